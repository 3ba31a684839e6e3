"""Peak memory of the spectrum readers on the largest inputs the limits accept.

    python bench/reader_memory.py [--scale 0.1] [--keep DIR]

For each layout, the worst input `agent.formats.LIMITS` still accepts is written (text at
the text-size limit: the most rows, the most columns, the widest fields; the same gzipped;
a FITS file with an image at the pixel limit, at the file-size limit, and gzipped at the
inflate limit; SpecVI parquet files whose spectra decode to the inflate limit), then read by `read_spectra` in
a fresh process that reports how far its peak resident memory rose during the read. The
baseline is the same measurement on an ordinary survey spectrum (3,900 pixels), in the
same run. `--scale` multiplies every byte and pixel limit (passed to the readers through
the LOUPE_MAX_* variables) for a quicker run. Prints one row per input (its size, the
memory the read added, and that over the baseline as a multiple of the input's inflated
size); the last line is the largest rise over the baseline, in MiB.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHILD = """
import json, sys, time
from agent.formats import read_spectra
import astropy.io.fits, astropy.table, numpy, pyarrow.parquet  # loaded before the baseline

def status(key):
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) for l in fh if l.startswith(key + ":"))

before = status("VmRSS")
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # the peak so far becomes the present size
t0 = time.time()
try:
    n = len(read_spectra(sys.argv[1]))
    outcome = f"read {n} spectra"
except Exception as exc:
    outcome = f"{type(exc).__name__}: {str(exc)[:300]}"
took = time.time() - t0
print(json.dumps({"mib": (status("VmHWM") - before) / 1024, "s": took, "outcome": outcome}))
"""


def measure(path: Path, env: dict[str, str] | None = None) -> dict:
    """Read `path` with `read_spectra` in a fresh process: how far its peak resident size
    rose during the read (MiB; the kernel's high-water mark, reset after the imports, so
    neither this process's size nor the imports count), the seconds, and the outcome."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, timeout=1200,
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"reading {path.name} crashed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def fill_lines(path: Path, header: str, row, budget: int, max_rows: int) -> int:
    """Write `header` then `row(i)` lines while they fit in `budget` bytes; the bytes written."""
    size = len(header) + 1
    with open(path, "w") as fh:
        fh.write(header + "\n")
        for i in range(max_rows):
            line = row(i) + "\n"
            if size + len(line) > budget:
                break
            fh.write(line)
            size += len(line)
    return size


def text_inputs(folder: Path, limits) -> dict[str, tuple[Path, int]]:
    budget, rows_max = limits.max_text_bytes, limits.max_pixels
    out = {}
    path = folder / "rows.csv"
    out["text: most rows"] = (path, fill_lines(path, "wavelength,flux", lambda i: f"{i + 1},1",
                                               budget, rows_max))  # fmt: skip
    path = folder / "wide.csv"
    extra = ",".join(f"c{k}" for k in range(limits.max_columns - 2))
    zeros = ",0" * (limits.max_columns - 2)
    out["text: most columns"] = (path, fill_lines(
        path, "wavelength,flux," + extra, lambda i: f"{i + 1},1{zeros}", budget, rows_max
    ))  # fmt: skip
    path = folder / "widest.csv"
    width = limits.max_field_chars

    def wide_row(i: int) -> str:
        return f"{i + 1:0{width}d},{1:0{width}d},{1:0{width}d}"

    out["text: widest fields"] = (path, fill_lines(path, "wavelength,flux,error", wide_row,
                                                   budget, rows_max))  # fmt: skip
    gz = folder / "rows.csv.gz"
    gz.write_bytes(gzip.compress((folder / "rows.csv").read_bytes(), 6))
    out["text: most rows, gzipped"] = (gz, out["text: most rows"][1])
    return out


def fits_inputs(folder: Path, limits) -> dict[str, tuple[Path, int]]:
    """An image at the pixel limit, and more HDUs up to the file-size limit (plain) or to
    what a gzip stream may inflate to (gzipped)."""
    path, gz = folder / "big.fits", folder / "big.fits.gz"
    size = _write_fits(path, limits.max_pixels, limits.max_file_bytes)
    inflated = _write_fits(folder / "gz.fits", limits.max_pixels, limits.inflate_cap)
    gz.write_bytes(gzip.compress((folder / "gz.fits").read_bytes(), 1))
    (folder / "gz.fits").unlink()
    return {"FITS at the file limit": (path, size), "FITS, gzipped": (gz, inflated)}


def _write_fits(path: Path, npix: int, budget: int) -> int:
    from astropy.io import fits

    npix = min(npix, (budget - 2880 * 2) // 8)
    first = fits.PrimaryHDU(np.linspace(1.0, 2.0, npix).astype(np.float64))
    first.header.update({"CRVAL1": 3000.0, "CDELT1": 0.001, "CRPIX1": 1.0})
    hdus = [first]
    per = npix * 8 + 2880 * 2
    while (len(hdus) + 1) * per <= budget:
        hdus.append(fits.ImageHDU(np.zeros(npix, np.float64)))
    fits.HDUList(hdus).writeto(path, overwrite=True)
    return path.stat().st_size


def parquet_inputs(folder: Path, limits) -> dict[str, tuple[Path, int]]:
    """SpecVI-Bench files whose spectra decode to the inflate limit: rows as wide as the
    pixel and inflate limits allow, and rows of a survey spectrum's 3,900 pixels."""
    out = {}
    # 16 bytes a pixel (wavelength and flux) and up to ~6 of list levels, as the footer counts
    widest = min(limits.max_pixels, (limits.inflate_cap - 2**16) // 22)
    for name, npix in (("widest rows", widest), ("survey-sized rows", 3900)):
        nrows = max(1, limits.inflate_cap // (22 * npix + 64))
        path = folder / f"{npix}.parquet"
        _write_specvi(path, npix, nrows)
        out[f"parquet, {name}"] = (path, nrows * npix * 16)
    return out


def _write_specvi(path: Path, npix: int, nrows: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    wave = np.linspace(3700.0, 9100.0, npix)
    values = pa.array(np.tile(wave, nrows))
    offsets = pa.array(np.arange(nrows + 1, dtype=np.int32) * npix)
    lists = pa.ListArray.from_arrays(offsets, values)
    create = pa.StructArray.from_arrays(
        [lists, lists, pa.array([0.01] * nrows)], names=["flux", "wavelength", "redshift"]
    )
    tool = pa.StructArray.from_arrays([create], names=["create_kwargs"])
    kwargs = pa.StructArray.from_arrays([tool], names=["spectral_visualization_tool"])
    info = pa.StructArray.from_arrays(
        [pa.array(range(nrows)), pa.array([f"spec-{i}.fits" for i in range(nrows)]), kwargs],
        names=["index", "name", "tools_kwargs"],
    )
    table = pa.table({
        "data_source": ["cv"] * nrows,
        "reward_model": pa.array([{"ground_truth": "YES"}] * nrows),
        "extra_info": info,
    })  # fmt: skip
    pq.write_table(table, path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="Multiply every limit.")
    parser.add_argument("--keep", type=Path, help="Write the inputs here and keep them.")
    parser.add_argument(
        "--only", choices=["text", "fits", "parquet"], help="Only the inputs of one kind."
    )
    args = parser.parse_args()
    from agent.formats import LIMITS, Limits

    limits = Limits(
        max_pixels=int(LIMITS.max_pixels * args.scale),
        max_file_bytes=int(LIMITS.max_file_bytes * args.scale),
        max_inflated_bytes=int(LIMITS.max_inflated_bytes * args.scale),
        max_text_bytes=int(LIMITS.max_text_bytes * args.scale),
        max_field_chars=LIMITS.max_field_chars,
        max_columns=LIMITS.max_columns,
    )
    env = {
        "LOUPE_MAX_PIXELS": str(limits.max_pixels),
        "LOUPE_MAX_FILE_BYTES": str(limits.max_file_bytes),
        "LOUPE_MAX_INFLATED_BYTES": str(limits.max_inflated_bytes),
        "LOUPE_MAX_TEXT_BYTES": str(limits.max_text_bytes),
        "LOUPE_MAX_FIELD_CHARS": str(limits.max_field_chars),
        "LOUPE_MAX_COLUMNS": str(limits.max_columns),
    }
    print(
        f"limits: {limits.max_pixels} pixels, file {limits.max_file_bytes} B, inflated "
        f"{limits.inflate_cap} B, text "
        f"{limits.max_text_bytes} B, field {limits.max_field_chars} chars, "
        f"{limits.max_columns} columns"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        ordinary = folder / "ordinary.csv"
        wave = np.linspace(3700.0, 9100.0, 3900)
        ordinary.write_text("wavelength,flux,error\n" + "".join(f"{w:.3f},1.0,0.1\n" for w in wave))
        base = measure(ordinary, env)
        print(f"baseline (a 3,900-pixel CSV): {base['mib']:.1f} MiB ({base['outcome']})")
        cases = {}
        builds = {"text": text_inputs, "fits": fits_inputs, "parquet": parquet_inputs}
        for kind, build in builds.items():
            if args.only not in (None, kind):
                continue
            for name, (path, size) in build(folder, limits).items():
                got = measure(path, env)
                if not got["outcome"].startswith("read"):
                    raise SystemExit(f"{name}: not accepted ({got['outcome']}); fix the bench")
                rise = got["mib"] - base["mib"]
                cases[name] = rise
                print(
                    f"{name:32s} {path.stat().st_size / 2**20:8.1f} MiB on disk, "
                    f"{size / 2**20:8.1f} MiB inflated: +{got['mib']:7.1f} MiB "
                    f"({rise / max(size / 2**20, 1e-9):.1f}x its size over the baseline)"
                )
                path.unlink()
    worst = max(cases, key=cases.get)
    print(f"worst: {worst}")
    print(f"reader_worst_peak_over_baseline_mib: {cases[worst]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
