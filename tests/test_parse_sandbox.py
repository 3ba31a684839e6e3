"""Untrusted files are parsed in limited worker processes (`agent.formats.sandbox`): a
file built to exhaust memory or time is refused ("refused: <file> needs more than N MB to
read") whatever it is, and the caller, the pool and the store go on. Also the two bombs
the readers now refuse themselves (YAML aliases in an ECSV header, dictionary-encoded
parquet strings), and one spectrum given two ids (refused before anything is written).
"""

from __future__ import annotations

import gzip
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from agent.formats import LIMITS, LimitError, read_spectra
from agent.spectrum import SpectrumError
from tests import fits_factory

ROOT = Path(__file__).resolve().parents[1]


# -- ECSV: YAML anchors and aliases ------------------------------------------------------
def alias_ecsv(folder: Path, depth: int, key: str = "frame") -> Path:
    """An ECSV whose `meta` nests `depth` levels of nine aliases each: 9^depth values from
    about a kilobyte, once anything turns the metadata into text."""
    lines = ["# %ECSV 1.0", "# ---", "# datatype:", "# - {name: wavelength, datatype: float64}",
             "# - {name: flux, datatype: float64}", "# meta:",
             "#   a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]  # fmt: skip
    for i in range(1, depth + 1):
        lines.append(f"#   a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    lines.append(f"#   {key}: *a{depth}")
    lines += ["wavelength flux"] + [f"{4000 + i} {1 + i % 3}" for i in range(20)]
    path = folder / f"aliases{depth}.ecsv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_an_ecsv_header_with_yaml_aliases_is_refused_before_astropy_reads_it(tmp_path):
    small = alias_ecsv(tmp_path, 2)
    with pytest.raises(SpectrumError, match=r"aliases2.ecsv: ECSV header line 7 holds a YAML "
                       r"anchor \(&a0\); anchors and aliases are not read"):  # fmt: skip
        read_spectra(small)
    bomb = alias_ecsv(tmp_path, 9)  # 5.4 GB and 51 s when expanded
    assert bomb.stat().st_size < 1200
    t0, rss0 = time.time(), _rss_mb()
    with pytest.raises(SpectrumError, match="anchors and aliases are not read"):
        read_spectra(bomb)
    assert time.time() - t0 < 2 and _rss_mb() - rss0 < 50
    plain = fits_factory.write_ecsv(tmp_path)  # astropy's own ECSV still reads, frame and all
    assert read_spectra(plain)[0].frame == "vacuum"


def test_an_ecsv_alias_bomb_uploaded_to_the_app_is_refused_and_not_kept(ctx, tmp_path):
    from app import context as app_context
    from app.pages import upload as upload_page

    ex = app_context.expert_for(ctx, None)
    n0 = ctx.store.count_candidates()
    msg = upload_page.ingest_upload(ctx, ex, [str(alias_ecsv(tmp_path, 9))], "cv")
    assert "aliases9.ecsv: refused" in msg and "anchors and aliases are not read" in msg
    assert ctx.store.count_candidates() == n0
    assert not any((ctx.data_roots[0] / "uploads").glob("*aliases9*"))


# -- parquet: what dictionary-encoded strings decode to -----------------------------------
def dictionary_parquet(folder: Path, rows: int, size: int, column: str = "name") -> Path:
    """A SpecVI-Bench parquet whose every row repeats one `size`-character string: stored
    once in the dictionary page (and compressed), decoded for every row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    big = "x" * size
    info = {"index": 0, "name": "spec.fits"}
    records = {
        "data_source": ["cv"] * rows,
        "reward_model": [{"ground_truth": "YES"}] * rows,
        "extra_info": [{**info, column: big}] * rows,
        "prompt": [big] * rows,
    }
    path = folder / f"dict-{column}.parquet"
    pq.write_table(pa.table(records), path, compression="zstd", compression_level=19)
    return path


def test_parquet_strings_count_decoded_not_as_stored(tmp_path, monkeypatch):
    """500 rows of one 100 kB name: 50 MB decoded from a file of about 2 kB. The footer's
    sizes count the dictionary once; the read counts what the rows decode to."""
    from agent.formats.specvi import row_prompt, rows

    path = dictionary_parquet(tmp_path, rows=500, size=100_000)
    assert path.stat().st_size < 4096
    monkeypatch.setattr(LIMITS, "max_inflated_bytes", 8 * 2**20)
    with pytest.raises(LimitError, match=r"dict-name.parquet: parquet columns .*extra_info decode "
                       r"to over 8388608 bytes by row \d+ \(over the 8388608-byte limit\)"):  # fmt: skip
        rows(path)
    from agent.candidates import collect_candidates

    _, bad = collect_candidates([str(path)], task="cv")  # what ingest and uploads read
    assert bad and "decode to over 8388608 bytes" in str(bad[0])
    with pytest.raises(LimitError, match="decode to over 8388608 bytes"):
        row_prompt(path, 400)  # the prompt column alone, 40 MB decoded up to row 400


def test_parquet_rows_and_prompts_still_read(tmp_path):
    from agent.formats.specvi import row_prompt, rows

    path = fits_factory.write_specvi_parquet(tmp_path)
    assert [r["label"] for r in rows(path)] == ["YES", "NO", "YES"]
    assert len(read_spectra(path)) == 3
    prompt = row_prompt(path, 1)
    assert prompt is not None and prompt.messages[0]["content"].startswith("<image>")


# -- the limited workers -------------------------------------------------------------------
def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def gzip_bomb(path: Path, inflated_mb: int) -> Path:
    """Text lines of zeros: one 16 MB deflate member repeated, a few kB per GB."""
    member = gzip.compress(b"0 0\n" * (4 * 2**20), 9)
    with open(path, "wb") as fh:
        for _ in range(inflated_mb // 16):
            fh.write(member)
    return path


@pytest.fixture
def small_pool():
    from agent.formats.sandbox import ReadPool, SandboxLimits

    reads = ReadPool(SandboxLimits(memory_mb=256, cpu_seconds=20, output_mb=4, workers=1))
    yield reads
    reads.close()


@pytest.fixture
def no_reader_limits(monkeypatch):
    """The readers' own limits lifted, as for a bomb nobody has thought of yet: only the
    OS limits of the worker stand."""
    for name in ("max_inflated_bytes", "max_text_bytes", "max_file_bytes", "max_pixels"):
        monkeypatch.setattr(LIMITS, name, 2**40)


def test_a_bomb_no_reader_limit_knows_is_refused_by_the_worker_limits(
    tmp_path, small_pool, no_reader_limits
):
    from agent.formats.sandbox import ReadRefused, read_metas

    bomb = gzip_bomb(tmp_path / "zeros.csv.gz", 1024)  # 1 GB of text from ~1 MB
    assert bomb.stat().st_size < 2 * 2**20
    good = fits_factory.write_sdss_spec(tmp_path)
    rss0 = _rss_mb()
    with pytest.raises(ReadRefused) as err:
        small_pool.call(bomb, read_metas, str(bomb), [(None, None)])
    assert str(err.value) == f"refused: {bomb} needs more than 256 MB to read"
    assert _rss_mb() - rss0 < 100  # the caller never held it
    (meta,) = small_pool.call(good, read_metas, str(good), [(None, None)])
    assert meta.survey == "SDSS"  # the pool goes on with a fresh worker


def test_a_read_answering_more_than_the_output_limit_is_refused(tmp_path, small_pool):
    from agent.formats.sandbox import ReadRefused

    path = tmp_path / "long.csv"
    path.write_text(
        "wavelength,flux\n" + "".join(f"{4000 + i * 0.01:.2f},1\n" for i in range(300_000))
    )
    with pytest.raises(ReadRefused, match=r"long.csv gives more than 4 MB when read"):
        small_pool.call(path, read_spectra, str(path))
    assert small_pool.call(path, len, "still serving") == 13


def test_a_reader_error_comes_back_as_the_same_spectrum_error(tmp_path, small_pool):
    bad = tmp_path / "bad.fits"
    bad.write_bytes(b"SIMPLE  =" + b" " * 100)
    with pytest.raises(SpectrumError) as err:
        small_pool.call(bad, read_spectra, str(bad))
    with pytest.raises(SpectrumError) as direct:
        read_spectra(bad)
    assert str(err.value) == str(direct.value)


def test_a_worker_killed_mid_parse_is_a_refusal_and_the_pool_goes_on(
    tmp_path, small_pool, no_reader_limits
):
    import threading

    from agent.formats.sandbox import ReadRefused, read_metas

    bomb = gzip_bomb(tmp_path / "slow.csv.gz", 4096)
    small_pool.call("warm", len, "")  # the worker is started
    (worker,) = small_pool._idle
    pid = worker.proc.pid
    killer = threading.Timer(1.0, os.kill, (pid, signal.SIGKILL))
    killer.start()
    try:
        with pytest.raises(ReadRefused, match=r"slow.csv.gz needs more than 256 MB to read"):
            small_pool.call(bomb, read_metas, str(bomb), [(None, None)])
    finally:
        killer.cancel()
    assert small_pool.call("again", len, "abc") == 3


def test_an_ingest_killed_during_a_refused_parse_leaves_the_store_intact(tmp_path):
    """kill -9 of the whole ingest (and its worker) while the worker parses a bomb: the
    store holds what it held, readable, and takes the next ingest."""
    db = tmp_path / "s.db"
    url = f"sqlite:///{db}"
    good = fits_factory.write_csv(tmp_path, "good.csv")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    launch = [sys.executable, str(ROOT / "launch.py"), "ingest", "--db", url, "--task", "cv"]
    subprocess.run([*launch, str(good)], env=env, cwd=tmp_path, check=True, capture_output=True)
    bomb = gzip_bomb(tmp_path / "bomb.csv.gz", 8192)
    cat = tmp_path / "cat.csv"
    cat.write_text(f"path,task,id\n{bomb.name},cv,bomb\n")
    lifted = {
        "LOUPE_MAX_INFLATED_BYTES": str(2**40), "LOUPE_MAX_TEXT_BYTES": str(2**40),
        "LOUPE_MAX_FILE_BYTES": str(2**40), "LOUPE_MAX_READ_MB": "600",
        "LOUPE_READ_WORKERS": "1",
    }  # fmt: skip
    proc = subprocess.Popen([*launch, str(cat)], env={**env, **lifted}, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip
    try:
        worker = _wait_for_parsing_worker(proc.pid, timeout=90)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the ingest and its worker at once
        proc.wait(10)
    assert worker, "the worker never started parsing"
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        keys = [k for (k,) in con.execute("SELECT key FROM candidate")]
        paths = [p for (p,) in con.execute("SELECT path FROM spectrum")]
    finally:
        con.close()
    assert keys == ["good"] and [Path(p).name for p in paths] == ["good.csv"]
    other = fits_factory.write_csv(tmp_path, "other.csv")
    done = subprocess.run([*launch, str(other)], env=env, cwd=tmp_path, capture_output=True,
                          text=True)  # fmt: skip
    assert done.returncode == 0 and "1 added" in done.stdout + done.stderr, done.stderr


def _wait_for_parsing_worker(parent: int, timeout: float) -> int | None:
    """The pid of `parent`'s read worker once it holds over 100 MB (mid-parse)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for child in Path("/proc").glob("[0-9]*"):
            try:
                stat = (child / "stat").read_text().rsplit(")", 1)[1].split()
                if int(stat[1]) != parent:
                    continue
                if b"agent.formats.sandbox" not in (child / "cmdline").read_bytes():
                    continue
                rss_pages = int((child / "statm").read_text().split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if rss_pages * os.sysconf("SC_PAGE_SIZE") > 100 * 2**20:
                return int(child.name)
        time.sleep(0.02)
    return None


# -- one spectrum under two ids --------------------------------------------------------------
def _two_ids_catalogue(folder: Path) -> Path:
    fits_factory.write_csv(folder, "twice.csv")
    cat = folder / "cat.csv"
    cat.write_text("path,task,id\ntwice.csv,cv,alpha\ntwice.csv,cv,beta\n")
    return cat


def test_vet_db_names_both_ids_and_the_file_when_one_file_has_two(tmp_path):
    cat = _two_ids_catalogue(tmp_path)
    url = f"sqlite:///{tmp_path / 's.db'}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = [sys.executable, str(ROOT / "launch.py")]
    subprocess.run([*run, "ingest", "--db", url, str(fits_factory.write_csv(tmp_path, "x.csv")),
                    "--task", "wd"], env=env, cwd=tmp_path, check=True, capture_output=True)  # fmt: skip
    out = subprocess.run([*run, "vet", "--catalog", str(cat), "--db", url, "--no-progress",
                          "--workers", "1"], env=env, cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr and "IntegrityError" not in out.stderr, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if "'beta'" in ln]
    assert len(lines) == 1, out.stderr
    assert "'alpha'" in lines[0] and "twice.csv" in lines[0], lines
    assert "vetted 1 candidates" in out.stdout  # alpha, the first, is vetted
    # Run again: alpha is the store's now, and beta is refused against it, by name.
    again = subprocess.run([*run, "vet", "--catalog", str(cat), "--db", url, "--no-progress",
                            "--workers", "1"], env=env, cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert again.returncode == 1 and "Traceback" not in again.stderr, again.stderr
    assert "already candidate 'alpha' (task cv) in the store" in again.stderr


def test_an_upload_naming_one_file_under_two_ids_says_so_and_adds_the_first(ctx):
    from app import context as app_context
    from app.pages import upload as upload_page

    ex = app_context.expert_for(ctx, None)
    folder = ctx.data_roots[0] / "two-ids"
    folder.mkdir()
    cat = _two_ids_catalogue(folder)
    n0 = ctx.store.count_candidates()
    msg = upload_page.ingest_upload(ctx, ex, [], "cv", str(cat))
    assert "internal error" not in msg
    (line,) = [ln for ln in msg.splitlines() if "beta" in ln]
    assert "alpha" in line and "twice.csv" in line and "one candidate per task" in line
    assert ctx.store.count_candidates() == n0 + 1


@pytest.fixture
def ctx(tmp_path_factory, tmp_path):
    from tests.app_support import context

    c = context(tmp_path_factory, tmp_path)
    yield c
    c.store.close()


def test_the_worker_protocol_survives_a_reader_that_prints(tmp_path, small_pool):
    """A reader's print goes to the worker's stderr, never into the answer pipe."""
    assert small_pool.call("print", print, "noise on stdout") is None
    assert small_pool.call("after", zlib.crc32, b"x") == zlib.crc32(b"x")


def test_a_bomb_in_a_batch_fails_its_own_candidate_and_the_batch_goes_on(
    tmp_path, monkeypatch, no_reader_limits
):
    """A file named straight to `vet` is read in the batch's worker processes, which carry
    the same address-space cap: the bomb's candidate is refused, naming the file, and the
    other candidates are vetted."""
    from agent.refs import CandidateRef
    from annotate.vetting.runner import VetOptions, run_processes

    monkeypatch.setenv("LOUPE_MAX_READ_MB", "256")
    bomb = gzip_bomb(tmp_path / "zeros.csv.gz", 1024)
    good = fits_factory.write_sdss_spec(tmp_path)
    refs = [
        CandidateRef(id=name, task="wd", path=str(path))
        for name, path in (("good-1", good), ("bomb", bomb), ("good-2", good))
    ]
    opts = VetOptions(policy="rules", workers=2, renderer="fast")
    trajs = {t.id: t for t in run_processes(refs, opts, {}, "fast")}
    assert trajs["bomb"].state == "error"
    assert trajs["bomb"].error == f"refused: {bomb} needs more than 256 MB to read"
    assert trajs["good-1"].state != "error" and trajs["good-2"].state != "error"
