"""Untrusted files are never processed in the server: an upload is read and vetted in
limited workers, the views draw a display copy read there, and what the server keeps of a
spectrum is bounded in bytes.

- Twenty 230 KB gzipped FITS files of 9.9 million pixels each (1.9 GB as the float64
  arrays of a spectrum), uploaded and each opened in the Vet view: the server's resident
  memory grows by less than `GROWTH_MB`, and an expert's next item keeps being served while
  they are vetted (bench/upload_load.py measures by how much it slows).
- The same for a file of another kind whose decoded size dwarfs its bytes: a parquet
  spectrum of a few hundred KB that decodes to 9.9 million pixels.
- A display copy keeps every pixel of the windows the agent zoomed into, so the zoom
  panels draw what they draw from the whole file.

The vetting of these files is cut at a few CPU seconds (the vet pool's CPU limit, set low
for the test): what the server holds does not depend on how long a worker thinks.
"""

from __future__ import annotations

import gc
import gzip
import io
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from app import context as app_context
from app import views
from app.pages import upload as upload_page
from app.pages import vet as vet_page
from tests.app_support import context

# The documented bound (docs/deploy.md): what 20 such uploads, each opened, may add to the
# server's resident memory. The spectrum cache's budget (LOUPE_MAX_SPECTRUM_CACHE_MB, 32)
# is most of it.
GROWTH_MB = 100
N_FILES = int(os.environ.get("LOUPE_TEST_UPLOADS", 20))  # fewer for a quick look
PIXELS = 9_900_000


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        kb = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))
    return kb / 1024


def big_fits_gz(folder: Path, i: int, n: int = PIXELS) -> Path:
    """A 1-D FITS image of `n` pixels (a linear wavelength solution in its header), gzipped
    to about 230 KB: the flux repeats every 1000 pixels."""
    from astropy.io import fits

    k = np.arange(n)
    flux = (1 + 0.2 * np.sin(2 * np.pi * (k % 1000) / 1000)).astype(np.float32)
    hdu = fits.PrimaryHDU(flux)
    hdu.header.update({"CRVAL1": 3700.0, "CDELT1": 5400.0 / n, "CRPIX1": 1, "OBJECT": f"big{i}"})
    buf = io.BytesIO()
    hdu.writeto(buf)
    path = folder / f"big{i:02d}.fits.gz"
    path.write_bytes(gzip.compress(buf.getvalue(), 6))
    return path


def big_parquet(folder: Path, i: int, n: int = 8_000_000) -> Path:
    """A SpecVI-Bench parquet row whose spectrum has `n` pixels (at 15 bytes a pixel, what
    the readers' inflate limit allows) in about 60 KB: wavelengths 2**-11 A apart and a
    repeating flux, stored byte-stream-split and compressed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    k = np.arange(n)
    wave = 3700.0 + k * 2.0**-11
    flux = (1 + 0.2 * np.sin(2 * np.pi * (k % 1000) / 1000)).astype(np.float32)
    create = {"flux": flux, "wavelength": wave, "redshift": 0.0}
    rec = {"data_source": "cv", "reward_model": {"ground_truth": "NO", "style": "rule"},
           "extra_info": {"index": i, "name": f"big{i:02d}.fits",
                          "tools_kwargs": {"spectral_visualization_tool": {"create_kwargs": create}}}}  # fmt: skip
    kwargs = "extra_info.tools_kwargs.spectral_visualization_tool.create_kwargs"
    path = folder / f"big{i:02d}.parquet"
    pq.write_table(pa.Table.from_pylist([rec]), path, compression="zstd", use_dictionary=False,
                   use_byte_stream_split=[f"{kwargs}.{c}.list.element" for c in ("flux", "wavelength")])  # fmt: skip
    return path


@pytest.fixture
def quick_vetting(monkeypatch):
    """The vet pool with a CPU limit of 1 s per candidate (a 9.9 M-pixel spectrum takes
    the rules 20-30 s) and the test's priority (on a loaded machine a nice worker waits
    long for its second), one worker, as in production otherwise."""
    from agent.formats import sandbox

    pool = sandbox.ReadPool(
        sandbox.SandboxLimits(memory_mb=4096, cpu_seconds=1, workers=1, nice=0), "vet"
    )
    monkeypatch.setitem(sandbox._POOLS, "vet", pool)
    yield pool
    pool.close()


def _key(ctx, path: Path) -> str:
    """The id an uploaded file's candidate got (a FITS file's is its stored copy's name)."""
    stem = path.name.split(".")[0]
    keys = [c.key for c in ctx.store.list_candidates(limit=10_000) if c.key.endswith(stem)]
    assert len(keys) == 1, keys
    return keys[0]


def _open(ctx, ex, key: str):
    st, view = vet_page.vet_jump(ctx, ex, views.new_state(), key, views.Display(), task="cv")
    assert view.candidate_id is not None, view.message
    assert view.global_fig is not None
    return view


def _uploads_leave_memory_bounded(ctx, files: list[Path]) -> None:
    ex = app_context.expert_for(ctx, None)
    # the pools started and the views' code warm, as on a server that has been running
    out = upload_page.ingest_upload(ctx, ex, [str(files[0])], "cv")
    assert "1 spectrum(s)" in out, out
    _open(ctx, ex, _key(ctx, files[0]))
    gc.collect()
    before = rss_mb()
    latencies: list[float] = []
    done = threading.Event()
    demo = [c.key for c in ctx.store.list_candidates(limit=50) if c.task != "cv"][:6]

    def next_items() -> None:  # an expert at the desk while the uploads are vetted
        desk = app_context.expert_for(ctx, None)
        while not done.is_set():
            for key in demo:
                t0 = time.perf_counter()
                vet_page.vet_jump(ctx, desk, views.new_state(), key, views.Display())
                latencies.append(time.perf_counter() - t0)
                time.sleep(0.2)  # an expert reads what they opened

    desk = threading.Thread(target=next_items, daemon=True)
    desk.start()
    try:
        for f in files[1:]:
            out = upload_page.ingest_upload(ctx, ex, [str(f)], "cv")
            assert "1 spectrum(s)" in out and "1 candidate(s) vetted" in out, out
            view = _open(ctx, ex, _key(ctx, f))
            assert "9900000" not in view.header_html  # nothing said of pixels here
    finally:
        done.set()
        desk.join(60)
    gc.collect()
    grown = rss_mb() - before
    assert grown < GROWTH_MB, f"the server grew by {grown:.0f} MB over {len(files) - 1} uploads"
    assert latencies, "the desk served nothing while the uploads were vetted"
    # how much slower it is is bench/upload_load.py's to measure; here: never stuck
    assert max(latencies) < 30, max(latencies)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # ~4 s a file on two idle cores; far more on a loaded machine
def test_twenty_huge_fits_uploads_leave_the_server_small(tmp_path_factory, tmp_path, quick_vetting):
    ctx = context(tmp_path_factory, tmp_path)
    folder = tmp_path / "in"
    folder.mkdir()
    files = [big_fits_gz(folder, i) for i in range(N_FILES + 1)]
    assert all(f.stat().st_size < 300_000 for f in files)
    try:
        _uploads_leave_memory_bounded(ctx, files)
        recorded = [ctx.store.find_candidate(_key(ctx, f), "cv") for f in files]
        assert all(c is not None and c.trajectory_id is not None for c in recorded)
        # cut at the vet pool's CPU limit, and said so, not lost
        traj = ctx.store.trajectory(recorded[-1].trajectory_id)
        assert traj.state == "error" and "needs more than 1 s to vet" in (traj.error or "")
    finally:
        ctx.store.close()


@pytest.mark.slow
def test_parquet_uploads_that_decode_to_millions_of_pixels_leave_the_server_small(
    tmp_path_factory, tmp_path, quick_vetting
):
    ctx = context(tmp_path_factory, tmp_path)
    folder = tmp_path / "in"
    folder.mkdir()
    files = [big_parquet(folder, i) for i in range(6)]
    assert all(f.stat().st_size < 2_000_000 for f in files)
    try:
        _uploads_leave_memory_bounded(ctx, files)
    finally:
        ctx.store.close()


def test_a_display_copy_keeps_every_pixel_of_the_zoom_windows(tmp_path):
    from agent.display import display_copy
    from agent.spectrum import Spectrum

    n = 1_000_000
    rng = np.random.default_rng(3)
    wave = np.linspace(3700.0, 9100.0, n)
    flux = 1 + 0.05 * rng.standard_normal(n)
    flux[rng.integers(0, n, 50)] = 40.0  # spikes: the envelope keeps every one
    ivar = np.full(n, 400.0)
    ivar[123_456:123_470] = 0  # a gap stays a gap
    spec = Spectrum(wave, flux, ivar, redshift=0.01)
    windows = [(4850.0, 4900.0), (6550.0, 6610.0)]  # ~10,000 pixels each
    copy = display_copy(spec, windows, max_pixels=100_000)
    assert copy.wavelength.size < 150_000 and copy.meta.extra["display"]["pixels"] == n
    rest = spec.rest_wavelength()
    for lo, hi in windows:
        whole = (rest >= lo) & (rest <= hi)
        kept = np.isin(spec.wavelength[whole], copy.wavelength)
        assert kept.all(), f"{(~kept).sum()} pixels of {lo}-{hi} A were dropped"
        got = np.isin(copy.wavelength, spec.wavelength[whole])
        np.testing.assert_array_equal(copy.flux[got], spec.flux[whole])
    assert np.isin(np.flatnonzero(flux == 40.0), np.searchsorted(wave, copy.wavelength)).all()
    # a wider window keeps its extremes (what the zoom panel's min/max bins draw)
    copy = display_copy(spec, [(4000.0, 4400.0)], max_pixels=100_000)
    wide = (rest >= 4000.0) & (rest <= 4400.0)
    assert np.isin(
        np.flatnonzero(wide & (flux == 40.0)), np.searchsorted(wave, copy.wavelength)
    ).all()
    assert copy.mask.any()  # the gap
    # medians (the SNR, the continuum) as on the whole
    assert abs(np.median(copy.flux[~copy.mask]) - np.median(flux)) < 0.01


def test_the_views_read_through_the_workers_and_keep_the_trajectory_windows(mem_store, tmp_path):
    """`Store.load_spectrum` of a huge spectrum gives its display copy, read in a worker,
    with every pixel of the windows its trajectory zoomed into."""
    from agent.spectrum import Spectrum
    from agent.trajectory import Step, Trajectory
    from db.store.candidates import SPECTRA
    from tests import fits_factory  # noqa: F401  (the factory's set-up)

    path = big_fits_gz(tmp_path, 0, n=600_000)
    from agent.refs import CandidateRef

    mem_store.add_candidates([CandidateRef(id="huge", task="cv", path=str(path))])
    c = mem_store.find_candidate("huge", "cv")
    run = mem_store.start_run("rules", None, "fast", {})
    t = Trajectory(id="huge", task="cv", policy="rules", state="done", verdict="NO",
                   steps=[Step(thought="zoom", window=(4861.0, 4870.0)), Step(answer="NO")])  # fmt: skip
    mem_store.record_trajectories([t], run)
    SPECTRA.clear()
    spec = mem_store.load_spectrum(c.id)
    assert isinstance(spec, Spectrum) and spec.meta.id == "huge"
    assert spec.meta.extra["display"] == {"pixels": 600_000, "kept": spec.wavelength.size}
    assert spec.wavelength.size < 200_000
    step = 5400.0 / 600_000
    rest = spec.rest_wavelength()  # the window is rest-frame vacuum, the file's in air
    inside = rest[(rest >= 4861.0) & (rest <= 4870.0)]
    assert inside.size >= int(9.0 / step) - 2  # every pixel of the window
    assert SPECTRA.held <= SPECTRA.budget
