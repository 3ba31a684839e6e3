"""Shared fixtures. Real spectra are read from ../shared/spectra when that folder exists."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_SPECTRA = REPO.parent / "shared" / "spectra"


@pytest.fixture(scope="session")
def shared_spectra() -> Path:
    """The folder of real spectra; tests using it skip cleanly where it is absent."""
    if not (SHARED_SPECTRA / "manifest.csv").is_file():
        pytest.skip(f"real spectra not available ({SHARED_SPECTRA} is absent)")
    return SHARED_SPECTRA


@pytest.fixture(scope="session")
def manifest_rows(shared_spectra: Path) -> list[dict[str, str]]:
    with open(shared_spectra / "manifest.csv", newline="") as fh:
        return list(csv.DictReader(fh))
