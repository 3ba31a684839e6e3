"""The benchmark's sources and splits, and the survey files built from them.

`load_sources` reads the library manifest, `assign_splits` puts each source OBJECT in one
split (kept from then on in `splits.csv`, which `freeze_splits` extends), `plan` picks each
task's positives and hard negatives, and `build` observes every source in every layout and
SNR (`training.sim.surveys`) and writes each split's catalogue.
"""

from __future__ import annotations

import csv
import hashlib
import logging
import os
import re
import shutil
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
# LOUPE_SPECTRA points elsewhere, e.g. from a checkout that is not beside ../shared.
DEFAULT_SPECTRA = Path(os.environ.get("LOUPE_SPECTRA") or REPO.parent / "shared" / "spectra")
SNRS = (5.0, 8.0, 12.0, 20.0, 35.0)
TASK_NAMES = ("cv", "carbon", "s_type", "m_giant", "wd")
LAYOUTS = ("lamost", "sdss", "desi")

# Manifest label -> tasks it is a positive for / a hard negative for.
POSITIVE: dict[str, tuple[str, ...]] = {
    "wd": ("wd",),
    "cv": ("cv",),
    "cv_pca_component": ("cv",),
    "carbon": ("carbon",),
    "s_type": ("s_type",),
    "m_giant": ("m_giant",),
}
# The stars a survey is mostly made of: negatives for every task, every source of them
# (no cap), each observed once per SNR in one layout (`observations`), so they add many
# objects without multiplying the build.
ORDINARY = ("a_star", "fgk_dwarf", "fgk_giant")
NEGATIVE: dict[str, tuple[str, ...]] = {
    "ob_star": ("wd",),
    "hot_subdwarf": ("wd",),
    "emission_star": ("cv",),
    "qso": ("cv", "wd", "carbon"),
    "galaxy": ("cv", "wd", "carbon"),
    "m_dwarf": ("cv", "m_giant"),
    "m_star": ("cv", "m_giant"),
    "m_giant": ("carbon", "s_type"),
    "s_type": ("carbon", "m_giant"),
    "carbon": ("s_type", "m_giant"),
    "wd": ("carbon",),  # DQ white dwarfs show C2 too
}
# Rest-frame templates observed at a random redshift: (manifest label, row) -> (class, z range).
EXTRAGALACTIC = {
    ("qso_pca_component", "0"): ("qso", (0.3, 2.6)),
    ("galaxy_pca_component", "0"): ("galaxy", (0.02, 0.4)),
}
# At most this many source objects per (hard-negative label, task), so one plentiful
# class does not swamp a task; ordinary stars are not capped.
MAX_NEG_SOURCES = 16
# Each object's split, frozen once it has been scored (`freeze_splits`; committed).
SPLITS_FILE = Path(__file__).with_name("splits.csv")
# Approximate resolving power of each library (None: much higher than the surveys').
SOURCE_R = {
    "miles": 2000.0,
    "stelib": 1700.0,
    "pickles": 1000.0,
    "calspec": 800.0,
    "sdss": 2000.0,
    "sdss-templates": 2000.0,
    "lamost": 1800.0,
    "ugem": None,
}


@dataclass
class Source:
    file: str
    hdu: int | None
    row: int | None
    label: str
    spectral_type: str
    library: str
    obj: str  # object identity used for the split
    template: bool  # a template / PCA mean rather than one observed star
    z_range: tuple[float, float] | None = None  # rest-frame template: draw a redshift

    @property
    def key(self) -> str:
        stem = re.sub(r"\.(fits|fit|txt)(\.gz)?$", "", Path(self.file).name).replace(".", "_")
        return f"{self.library}-{stem}" + (f"-r{self.row}" if self.row is not None else "")


def _object_id(r: dict[str, str]) -> str:
    """One name per physical object, so cross-library duplicates share it."""
    lib = r["file"].split("/")[0]
    text = f"{Path(r['file']).name} {r['spectral_type']}".upper()
    m = re.search(r"HD[ _]?0*(\d+)", text)
    if m:
        return f"HD{int(m.group(1))}"
    m = re.search(r"(FEIGE|GD|BD|LDS|LTT|HZ|G)[ _]?(\d+)", text)
    if m and lib in ("calspec", "stelib"):
        return f"{m.group(1)}{m.group(2)}"
    if lib == "ugem":
        return "UGEM"
    if lib == "sdss" and r["label"] == "qso":
        return "QSO"  # two of the three are one quasar re-observed; keep them together
    return f"{lib}:{Path(r['file']).name}:{r['row']}"


def ordinary_class(label: str, spectral_type: str) -> str:
    """The report's name for an ordinary star: "A star", "G dwarf", "K giant" ("" otherwise).

    >>> ordinary_class("fgk_dwarf", "STAR K7"), ordinary_class("fgk_giant", "HD216174 K1 III")
    ('K dwarf', 'K giant')
    """
    if label not in ORDINARY:
        return ""
    if label == "a_star":
        return "A star"
    m = re.search(r"([FGK])\d", re.sub(r"HD\s?\d+", "", spectral_type.upper()))
    kind = "dwarf" if label == "fgk_dwarf" else "giant"
    return f"{m.group(1)} {kind}" if m else f"F/G/K {kind}"


def observations(
    s: Source, snrs: tuple[float, ...], layouts: tuple[str, ...]
) -> list[tuple[str, float]]:
    """(layout, SNR) pairs a source is observed at: every pair, or for an ordinary star one
    layout per SNR, turning with the source so each layout gets its share."""
    if s.label not in ORDINARY:
        return [(lay, snr) for lay in layouts for snr in snrs]
    k = _h("layout:" + s.key)
    return [(layouts[(k + i) % len(layouts)], snr) for i, snr in enumerate(snrs)]


def load_sources(spectra: Path) -> list[Source]:
    with open(spectra / "manifest.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = []
    labels_of: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        lbl = r["label"]
        z_range = None
        if (lbl, r["row"]) in EXTRAGALACTIC:
            lbl, z_range = EXTRAGALACTIC[(lbl, r["row"])]
        elif lbl not in POSITIVE and lbl not in NEGATIVE and lbl not in ORDINARY:
            continue
        if lbl == "cv_pca_component" and r["row"] not in ("0",):
            continue  # eigenvectors (negative flux) are not spectra; row 0 is the mean CV
        lib = r["file"].split("/")[0]
        obj = _object_id(r)
        labels_of[obj].add(lbl)
        out.append(
            Source(
                file=r["file"],
                hdu=int(r["hdu"]) if r["hdu"] not in ("", None) else None,
                row=int(r["row"]) if r["row"] not in ("", None) else None,
                label=lbl,
                spectral_type=r["spectral_type"],
                library=lib,
                obj=obj,
                template=lib == "sdss-templates",
                z_range=z_range,
            )
        )
    conflicted = {o for o, ls in labels_of.items() if len(ls) > 1}
    return [s for s in out if s.obj not in conflicted]


def _h(text: str) -> int:
    return int(hashlib.sha1(text.encode()).hexdigest()[:8], 16)


def _frozen_rows(path: Path) -> dict[str, tuple[str, str]]:
    if not path.exists():
        return {}
    with path.open(newline="") as fh:
        return {r["object"]: (r["split"], r["label"]) for r in csv.DictReader(fh)}


def read_splits(path: Path = SPLITS_FILE) -> dict[str, str]:
    """object -> split, as frozen in `path` (empty where there is no such file)."""
    return {o: sp for o, (sp, _) in _frozen_rows(path).items()}


def freeze_splits(sources: list[Source], path: Path = SPLITS_FILE) -> list[str]:
    """Add to `path` the objects of `sources` it does not hold yet, with the split
    `assign_splits` gives them; the rows already there stay as they are. Returns the added."""
    rows = _frozen_rows(path)
    split = assign_splits(sources, {o: sp for o, (sp, _) in rows.items()})
    label = {s.obj: s.label for s in sources}
    added = sorted(set(split) - set(rows))
    rows.update({o: (split[o], label[o]) for o in added})
    with path.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["object", "split", "label"])
        w.writerows((o, *rows[o]) for o in sorted(rows))
    return added


def assign_splits(sources: list[Source], frozen: dict[str, str] | None = None) -> dict[str, str]:
    """object -> 'tune' | 'test'. An object frozen in `training/benchmark/splits.csv` keeps
    its split, so spectra added to the library never move an object whose split has been
    scored; a new positive goes to the split holding fewer of its task's objects, a new hard
    negative to the one holding fewer of its class."""
    frozen = read_splits() if frozen is None else frozen
    objects = {s.obj for s in sources}
    split = {o: sp for o, sp in frozen.items() if o in objects}
    # Positives are grouped by task (U Gem and the CV template are both "cv"), real
    # stars before templates, and alternate test/tune so each split gets some; so do the
    # extragalactic contaminants (real SDSS quasars, the QSO and galaxy templates) and,
    # by class, the other hard negatives (a handful of hot subdwarfs). Ordinary stars
    # are many: a hash of the name splits them.
    groups: dict[str, list[Source]] = defaultdict(list)
    for s in sources:
        if s.label in POSITIVE:
            groups[POSITIVE[s.label][0]].append(s)
        elif s.label in ("qso", "galaxy"):
            groups["extragalactic"].append(s)
        elif s.label not in ORDINARY:
            groups[f"negative:{s.label}"].append(s)
    for g in sorted(groups):
        objs: list[str] = []
        for s in sorted(groups[g], key=lambda s: (s.template, _h(s.obj))):
            if s.obj not in objs:
                objs.append(s.obj)
        held = Counter(split[o] for o in objs if o in split)
        for o in objs:
            if o not in split:
                split[o] = "test" if held["test"] <= held["tune"] else "tune"
                held[split[o]] += 1
    for s in sources:
        split.setdefault(s.obj, "test" if _h("split:" + s.obj) % 2 == 0 else "tune")
    return split


def plan(sources: list[Source]) -> dict[str, list[tuple[str, str]]]:
    """source key -> [(task, YES|NO)]."""
    tasks: dict[str, list[tuple[str, str]]] = defaultdict(list)
    neg_count: Counter = Counter()
    for s in sorted(sources, key=lambda s: _h(s.key)):
        for t in POSITIVE.get(s.label, ()):
            tasks[s.key].append((t, "YES"))
        if s.label in ORDINARY:
            tasks[s.key] += [(t, "NO") for t in TASK_NAMES]
        for t in NEGATIVE.get(s.label, ()):
            if neg_count[(s.label, t)] < MAX_NEG_SOURCES:
                neg_count[(s.label, t)] += 1
                tasks[s.key].append((t, "NO"))
    return tasks


def _file_name(layout: str, name: str) -> str:
    """Neutral file names in each survey's style: neither the name nor the id gives the class."""
    from training.sim.surveys import _ids

    plate, mjd, fiber = _ids(name)
    if layout == "sdss":
        return f"spec-{plate:04d}-{mjd:05d}-{fiber:04d}.fits"
    if layout == "desi":
        return f"coadd-{plate}-{mjd}-{fiber:04d}.fits"
    return f"spec-{mjd}-B{plate}_sp{fiber % 16 + 1:02d}-{fiber:03d}.fits"


def _observe_source(job: tuple) -> tuple[list[dict], list[str]]:
    """Every (layout, SNR) observation of one source, written; catalogue rows and problems."""
    from agent.formats import load_one
    from training.sim.surveys import observe_survey, write_survey

    s, spectra, out, split, tasks, pairs, realisations, seed = job
    rows: list[dict] = []
    try:
        spec = load_one(spectra / s.file, hdu=s.hdu, row=s.row)
    except Exception as exc:
        return rows, [f"{s.file}[{s.row}]: {exc}"]
    for layout, snr in pairs:
        for k in range(realisations):
            tag = f"{seed}:{s.key}:{layout}:{snr}:{k}"
            rng = np.random.default_rng(_h(tag))
            z, rv = 0.0, 0.0
            if s.z_range:
                z = float(rng.uniform(*s.z_range))
            else:
                rv = float(rng.uniform(-300.0, 300.0))
            try:
                obs = observe_survey(
                    spec,
                    layout,
                    snr=snr,
                    rng=rng,
                    rv_kms=rv,
                    redshift=z,
                    source_resolution=SOURCE_R.get(s.library),
                )
            except ValueError as exc:
                return rows, [f"{s.file}[{s.row}] {layout}: {exc}"]
            name = f"b{_h(tag):08x}"
            rel = Path(layout) / f"snr{int(snr)}" / _file_name(layout, name)
            write_survey(obs, out / split / rel, name)
            for task, label in tasks:
                rows.append(
                    {
                        "path": str(rel),
                        "task": task,
                        "id": f"{name}:{task}",
                        "label": label,
                        "layout": layout,
                        "snr": int(snr),
                        "source": s.file,
                        # Not "row": a catalogue's row column picks a spectrum in the file.
                        "source_row": "" if s.row is None else s.row,
                        "class": s.label,
                        "ordinary": ordinary_class(s.label, s.spectral_type),
                        "object": s.obj,
                        "template": int(s.template),
                        "rv_kms": round(rv, 1),
                        "z": round(z, 4),
                    }
                )
    return rows, []


def build(
    out: Path,
    spectra: Path = DEFAULT_SPECTRA,
    snrs: tuple[float, ...] = SNRS,
    realisations: int = 1,
    seed: int = 0,
    layouts: tuple[str, ...] = LAYOUTS,
    max_objects: int | None = None,
    workers: int = 1,
    splits: tuple[str, ...] = ("tune", "test"),
) -> dict[str, Path]:
    """Observe every chosen source; write `out/{tune,test}/catalog.csv` plus survey files.

    `max_objects` keeps at most that many source objects per (task, label) (a small,
    fast subset for tests); `splits` builds only those (the tune split alone while rules
    are being set).
    """
    sources = load_sources(spectra)
    split = assign_splits(sources)
    if loose := sorted(set(split) - set(read_splits())):
        log.warning(
            "%d objects are not in %s (%s): their split may move when more spectra join "
            "the library; freeze it with `python -m training.benchmark --freeze-splits` "
            "before setting rules on tune",
            len(loose), SPLITS_FILE.name, ", ".join(loose[:5]) + (" ..." if len(loose) > 5 else ""),
        )  # fmt: skip
    tasks = plan(sources)
    if max_objects is not None:
        kept: dict[tuple[str, str, str], set[str]] = defaultdict(set)
        for s in sorted(sources, key=lambda s: (s.template, _h(s.key))):
            want = []
            for t, lbl in tasks.get(s.key, []):
                k = kept[(split[s.obj], t, lbl)]
                if s.obj in k or len(k) < max_objects:
                    k.add(s.obj)
                    want.append((t, lbl))
            tasks[s.key] = want
    for sp in splits:
        shutil.rmtree(out / sp, ignore_errors=True)
    jobs = [
        (
            s,
            spectra,
            out,
            split[s.obj],
            tasks[s.key],
            observations(s, snrs, layouts),
            realisations,
            seed,
        )
        for s in sources
        if tasks.get(s.key) and split[s.obj] in splits
    ]
    rows: dict[str, list[dict]] = {sp: [] for sp in splits}
    skipped: list[str] = []
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(_observe_source, jobs, chunksize=4))
    else:
        results = [_observe_source(j) for j in jobs]
    for job, (rs, problems) in zip(jobs, results):
        rows[job[3]] += rs
        skipped += problems
    paths = {}
    for sp, rs in rows.items():
        (out / sp).mkdir(parents=True, exist_ok=True)
        p = out / sp / "catalog.csv"
        with open(p, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rs[0].keys()))
            w.writeheader()
            w.writerows(rs)
        paths[sp] = p
    for msg in skipped:
        log.warning("benchmark: skipped %s", msg)
    return paths
