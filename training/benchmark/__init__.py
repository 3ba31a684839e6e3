"""The survey-like benchmark built from real library spectra, and the accuracy report.

    python -m training.benchmark --out data/bench --report docs/accuracy.md

reads ../shared/spectra/manifest.csv (or $LOUPE_SPECTRA), picks for each task its positives,
the stars a survey is mostly made of (every A, F, G and K dwarf and giant in the library, a
negative for every task, each observed once per SNR in one layout) and the hard
negatives the paper names (K giants, M dwarfs and S stars for M giants; OB stars, hot
subdwarfs and QSOs for white dwarfs; M giants for S and carbon stars;
Be/emission-line stars, M dwarfs and QSOs for CVs; redshifted QSOs and galaxies for CVs,
white dwarfs and carbon stars), and observes every source object as each survey would
(`training.sim.surveys`): in the LAMOST, SDSS/BOSS and DESI layouts (their grids,
resolutions, arm joins, masks and flux units, written as real files the readers in
`agent.formats` read), at SNR 5, 8, 12, 20 and 35, with a random RV within +-300 km/s
(stars) or a random redshift (the SDSS QSO and galaxy templates), a 10% flux-calibration
error, sky residuals and flagged bad columns. Each split gets a labelled catalogue
(`tune/catalog.csv`, `test/catalog.csv`). Splits are by source OBJECT: one star observed
by two libraries (MILES and STELIB, CALSPEC and STELIB) or several times (U Gem) lands in
one split only, and objects whose labels disagree between libraries are left out. Each
object's split is frozen in `training/benchmark/splits.csv`: after adding spectra to the
manifest, `python -m training.benchmark --freeze-splits` gives each new object a split (a
positive or hard negative joins the split holding fewer of its kind) and changes no row
already there, so no object already scored moves.

`--report` scores the policies on both splits and writes the report: per layout and per
SNR, with object-level bootstrap confidence intervals, the demo's numbers beside it, and
how many distinct objects stand behind each positive class, and a second report on the
ordinary stars: precision at 1-in-100 and 1-in-1,000 base rates and the false-positive
rate per ordinary class. `--fit-calibration` refits
the inspector's per-task logistic calibration on the tune split and prints the constants.

Sources whose positives are templates rather than single observed stars are flagged
`template=1` in the catalogue and counted in the report.

The package: `sources` (sources, splits, plan, build), `report` (scoring and the accuracy
document), `tuning` (refitting the inspector's calibration), `quick` (scoring a split from
`inspect` on measurements cached per file, for setting rules on tune in seconds) and
`__main__` (the CLI).
"""

from training.benchmark.sources import (
    DEFAULT_SPECTRA,
    LAYOUTS,
    ORDINARY,
    SNRS,
    TASK_NAMES,
    Source,
    assign_splits,
    build,
    load_sources,
    observations,
    ordinary_class,
    plan,
)

__all__ = [
    "DEFAULT_SPECTRA",
    "LAYOUTS",
    "ORDINARY",
    "SNRS",
    "TASK_NAMES",
    "Source",
    "assign_splits",
    "build",
    "load_sources",
    "observations",
    "ordinary_class",
    "plan",
]
