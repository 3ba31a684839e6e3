"""Render benchmark: the `speco3` (matplotlib) and `fast` (numpy/PIL) renderers side by side.

    python bench/render.py [--repeat 10] [--spectra 4]

Both renderers draw the same spectra (real LAMOST files from ../shared/spectra when
present, else seeded synthetic 3909-pixel LAMOST-like spectra) over the same windows: the
global view and three zooms. Prints ms per image for each, and as the last line
`ratio: N` = speco3 time / fast time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from agent.render import render
from agent.spectrum import Spectrum, SpectrumMeta, read_spectra

REPO = Path(__file__).resolve().parent.parent

ZOOMS = [(4800.0, 4920.0), (6500.0, 6620.0), (8450.0, 8700.0)]


def real_spectra(n: int) -> list[Spectrum]:
    folder = REPO.parent / "shared" / "spectra" / "lamost"
    out: list[Spectrum] = []
    for path in sorted(folder.glob("*.fits"))[: 4 * n]:
        try:
            out.extend(read_spectra(path))
        except Exception:  # an unreadable file just is not benchmarked
            continue
        if len(out) >= n:
            break
    return out[:n]


def synthetic_spectra(n: int, seed: int = 0) -> list[Spectrum]:
    rng = np.random.default_rng(seed)
    wave = 10 ** (3.5682 + 1e-4 * np.arange(3909))
    out = []
    for i in range(n):
        flux = 1000 * (wave / 6000) ** rng.uniform(-2, 2) + rng.normal(0, 20, wave.size)
        flux[rng.integers(0, wave.size, 20)] = np.nan
        out.append(Spectrum(wave, flux, meta=SpectrumMeta(id=f"synthetic-{i}")))
    return out


def time_renderer(specs: list[Spectrum], renderer: str, repeat: int) -> dict[str, float]:
    def one(s: Spectrum, window):
        render(
            s.rest_wavelength(),
            s.flux,
            mask=s.mask,
            renderer=renderer,
            window=window,
            title=None if window else (s.meta.id or "spectrum"),
        )

    for s in specs:  # warm-up: fonts, figures, imports
        one(s, None)
    out = {}
    for name, windows in (("global", [None]), ("zoom", ZOOMS)):
        t0 = time.perf_counter()
        count = 0
        for _ in range(repeat):
            for s in specs:
                for w in windows:
                    one(s, w)
                    count += 1
        out[name] = (time.perf_counter() - t0) / count * 1000.0
    out["all"] = (out["global"] + len(ZOOMS) * out["zoom"]) / (1 + len(ZOOMS))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="passes over the spectra")
    ap.add_argument("--spectra", type=int, default=4, help="number of spectra")
    args = ap.parse_args(argv)
    specs = real_spectra(args.spectra)
    source = "LAMOST files from ../shared/spectra"
    if not specs:
        specs, source = synthetic_spectra(args.spectra), "synthetic 3909-pixel spectra"
    npix = int(np.mean([s.wavelength.size for s in specs]))
    print(f"spectra: {len(specs)} {source}, ~{npix} pixels; fast at 448x448")
    res = {r: time_renderer(specs, r, args.repeat) for r in ("speco3", "fast")}
    for r, t in res.items():
        print(
            f"{r:7s} global {t['global']:7.2f} ms   zoom {t['zoom']:7.2f} ms   "
            f"mean {t['all']:7.2f} ms per image"
        )
    print(f"ratio: {res['speco3']['all'] / res['fast']['all']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
