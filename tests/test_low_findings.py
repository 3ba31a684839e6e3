"""Small things said right: a shell's file-size limit named instead of "the read worker did
not start"; `export catalogue` warning of nothing (astropy's "Card is too long" came once
per task)."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

from tests import fits_factory

ROOT = Path(__file__).resolve().parents[1]


def _ingest_under(tmp_path: Path, fsize: int) -> subprocess.CompletedProcess:
    spec = fits_factory.write_wcs_image(tmp_path, "star.fits", n=2000)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run(
        [sys.executable, str(ROOT / "launch.py"), "ingest", str(spec), "--task", "cv",
         "--db", str(tmp_path / "l.db")],
        capture_output=True, text=True, timeout=240, preexec_fn=limit, cwd=str(ROOT),
    )  # fmt: skip


def test_ingest_works_under_a_file_size_limit_above_what_it_writes(tmp_path):
    """`ulimit -f` below the read worker's own output cap (256 MB): the worker keeps the
    shell's lower limit instead of failing to raise it."""
    got = _ingest_under(tmp_path, 64 * 2**20)
    assert got.returncode == 0, got.stderr[-2000:]
    assert "1 added" in got.stdout and "did not start" not in got.stderr


def test_ingest_names_a_file_size_limit_it_meets(tmp_path):
    got = _ingest_under(tmp_path, 20 * 1024)
    assert got.returncode == 2, (got.stdout, got.stderr[-2000:])
    (line,) = got.stderr.strip().splitlines()[-1:]
    assert "ulimit -f" in line and "20480 bytes" in line, got.stderr[-2000:]
    assert "did not start" not in got.stderr


def test_export_catalogue_warns_of_nothing(tmp_path_factory, tmp_path, capsys, recwarn):
    import launch
    from tests.app_support import seeded_copy

    seeded_copy(tmp_path_factory, tmp_path)
    db = f"sqlite:///{tmp_path / 'loupe.db'}"
    rc = launch.main(["export", "catalogue", "--db", db, "--out", str(tmp_path / "cat")])
    out = capsys.readouterr()
    assert rc == 0, out.err
    said = out.out + out.err + "".join(str(w.message) for w in recwarn)
    assert "too long" not in said, said
    from astropy.io import fits

    head = fits.getheader(tmp_path / "cat" / "wd.fits", "CATALOGUE")
    assert head.comments["CONFMETH"] == "how the intervals are made: docs/audit.md"
