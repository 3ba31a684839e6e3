"""Render benchmark: the `speco3` (matplotlib) and `fast` (numpy/PIL) renderers side by side.

    python bench/render.py [--repeat 10] [--spectra 4] [--authors PATH/TO/spec-o3]

Both renderers draw the same spectra (real LAMOST files from ../shared/spectra when
present, else seeded synthetic 3909-pixel LAMOST-like spectra) over the same windows: the
global view and three zooms. Prints ms per image for each, and as the last line
`ratio: N` = speco3 time / fast time.

With `--authors` (or SPECO3_REPO) naming a local checkout of the published Spec-o3
repository, it also times that repository's own plotting function as its tool calls it
(`plot_spectrum`, then a PNG at 80 dpi with a tight box) and says how far the `speco3`
images are from its images, pixel for pixel.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import os
import sys
import time
from pathlib import Path

import numpy as np

from agent.formats import read_spectra
from agent.render import render
from agent.spectrum import Spectrum, SpectrumMeta

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


AUTHORS_PLOT = Path("reinforcement_learning/recipe/spec_o3/utils.py")


def load_authors_plot(repo: str):
    """`plot_spectrum` from a local checkout of the published repository."""
    path = Path(repo) / AUTHORS_PLOT
    if not path.is_file():
        raise SystemExit(f"--authors {repo}: no {AUTHORS_PLOT} there")
    spec = importlib.util.spec_from_file_location("speco3_published_utils", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.plot_spectrum


def authors_image(plot_spectrum, s: Spectrum, window, title: str):
    """The published tool's image: its plot, saved the way its tool saves it."""
    import matplotlib.pyplot as plt
    from PIL import Image

    flux = np.where(s.mask, np.nan, s.flux)  # the same points as Loupe's (invalid ones dropped)
    fig, _ = plot_spectrum(s.rest_wavelength(), flux, wavelength_range=window, title=title)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    buf.seek(0)
    return Image.open(buf).convert("RGB")


def time_authors(specs: list[Spectrum], plot_spectrum, repeat: int) -> dict[str, float]:
    def title(s: Spectrum, window) -> str:
        return "Spectrum" if window else (s.meta.id or "spectrum")

    out = {}
    for name, windows in (("global", [None]), ("zoom", ZOOMS)):
        t0 = time.perf_counter()
        count = 0
        for _ in range(repeat):
            for s in specs:
                for w in windows:
                    authors_image(plot_spectrum, s, w, title(s, w))
                    count += 1
        out[name] = (time.perf_counter() - t0) / count * 1000.0
    out["all"] = (out["global"] + len(ZOOMS) * out["zoom"]) / (1 + len(ZOOMS))
    # same pixels? the mean absolute difference over every image, and the worst one
    diffs, same_size = [], True
    for s in specs:
        for w in [None, *ZOOMS]:
            theirs = np.asarray(authors_image(plot_spectrum, s, w, title(s, w)), dtype=float)
            ours = np.asarray(
                render(
                    s.rest_wavelength(),
                    s.flux,
                    mask=s.mask,
                    renderer="speco3",
                    window=w,
                    title=None if w else (s.meta.id or "spectrum"),
                ),
                dtype=float,
            )
            if theirs.shape != ours.shape:
                same_size = False
                continue
            diffs.append(float(np.abs(theirs - ours).mean()))
    out["same_size"] = float(same_size)
    out["mean_abs_diff"] = max(diffs) if diffs else float("nan")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="passes over the spectra")
    ap.add_argument("--spectra", type=int, default=4, help="number of spectra")
    ap.add_argument(
        "--authors",
        default=os.environ.get("SPECO3_REPO"),
        help="local checkout of the published Spec-o3 repository (default: $SPECO3_REPO); "
        "adds its plotting function's time and the pixel difference",
    )
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
    if args.authors:
        t = time_authors(specs, load_authors_plot(args.authors), args.repeat)
        print(
            f"{'authors':7s} global {t['global']:7.2f} ms   zoom {t['zoom']:7.2f} ms   "
            f"mean {t['all']:7.2f} ms per image (published plot_spectrum + tight PNG)"
        )
        print(
            f"speco3 vs authors: same pixel size {'yes' if t['same_size'] else 'NO'}, "
            f"worst mean |pixel difference| {t['mean_abs_diff']:.3f} (0-255); "
            f"speco3 is {t['all'] / res['speco3']['all']:.1f}x faster"
        )
    else:
        print("authors: not timed (pass --authors or set SPECO3_REPO to a local spec-o3 checkout)")
    print(f"ratio: {res['speco3']['all'] / res['fast']['all']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
