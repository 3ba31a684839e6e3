"""Every spectrum in ../shared/spectra/manifest.csv loads with a sane range and frame.

Per format, the wavelength range each file must lie within and the frame and survey the
reader must report. The ranges are what the files cover: CALSPEC spectra are extended
with model fluxes out to 300 micron, and the SDSS QSO eigenspectra are rest-frame from
450 A; every other file lies within 900-30000 A. All of them overlap the optical
3700-9100 A window the zoom tool works in (the U Gem files hold 6426-6726 A only).
No file in the manifest is refused, so there is no list of refusals to check.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from agent.formats import read_spectra

pytestmark = pytest.mark.realdata

# format -> (min wavelength >=, max wavelength <=, frame, survey or None for "any")
EXPECTED = {
    "lamost-dr-image": (3600, 9200, "vacuum", "LAMOST"),
    "sdss-spec": (3500, 10500, "vacuum", "SDSS"),
    "sdss-template-rows": (400, 12000, "vacuum", "SDSS"),
    "fits-1d-wcs": (900, 30000, "air", None),  # MILES and STELIB
    "pickles-table": (900, 30000, "air", None),
    "calspec-table": (900, 3.1e6, "vacuum", "CALSPEC"),
    "ascii-2col": (900, 30000, "air", None),
}
OPTICAL = (3700.0, 9100.0)
# Files the readers refuse on purpose, with the reason their error must give.
REFUSED: dict[str, str] = {}


def _load(root, row):
    hdu = int(row["hdu"]) if row["hdu"] else None
    r = int(row["row"]) if row["row"] else None
    return read_spectra(root / row["file"], hdu=hdu, row=r)


def test_manifest_formats_are_all_known(manifest_rows):
    assert {r["format"] for r in manifest_rows} <= set(EXPECTED)
    assert len(manifest_rows) > 700


def test_every_manifest_row_loads_sanely(shared_spectra, manifest_rows):
    problems = []
    by_format = defaultdict(int)
    for row in manifest_rows:
        lo, hi, frame, survey = EXPECTED[row["format"]]
        name = f"{row['file']} (hdu={row['hdu']}, row={row['row']})"
        if row["file"] in REFUSED:
            continue
        spectra = _load(shared_spectra, row)
        if len(spectra) != 1:
            problems.append(f"{name}: {len(spectra)} spectra, expected 1")
            continue
        s = spectra[0]
        w = s.wavelength
        checks = {
            "range": lo <= w[0] and w[-1] <= hi,
            "optical overlap": w[0] < OPTICAL[1] and w[-1] > OPTICAL[0],
            "pixels": 100 <= w.size <= 100_000,
            "good pixels": s.good.mean() >= 0.5 and np.all(np.isfinite(s.flux[s.good])),
            "frame": s.frame == frame,
            "survey": survey is None or s.meta.survey == survey,
            "meta": bool(s.meta.id) and s.meta.source == str(shared_spectra / row["file"]),
            "row": not row["row"] or s.meta.row == int(row["row"]),
        }
        failed = [k for k, ok in checks.items() if not ok]
        if failed:
            problems.append(f"{name}: {failed} ({w[0]:.0f}-{w[-1]:.0f} A, {s.frame})")
        by_format[row["format"]] += 1
    assert not problems, "\n".join(problems[:20])
    assert sum(by_format.values()) == len(manifest_rows) - len(REFUSED)


def test_manifest_files_as_whole_files(shared_spectra, manifest_rows):
    """Files read without hdu/row give every spectrum: template files give all their rows."""
    counts = defaultdict(int)
    for row in manifest_rows:
        counts[row["file"]] += 1
    for file, n in counts.items():
        if n > 1:
            spectra = read_spectra(shared_spectra / file)
            assert len(spectra) >= n, file
            assert len({s.meta.row for s in spectra}) == len(spectra)


def _balmer_offset(spec, line: float) -> float | None:
    """Centroid of an absorption core near `line` (vacuum rest frame) minus `line`."""
    w = spec.rest_wavelength()
    near = spec.good & (np.abs(w - line) < 12)
    if near.sum() < 5:
        return None
    depth = spec.flux[near].max() - spec.flux[near]
    if depth.max() <= 0:
        return None
    core = depth > 0.6 * depth.max()
    return float((w[near][core] * depth[core]).sum() / depth[core].sum() - line)


@pytest.mark.parametrize(
    "fmt", ["lamost-dr-image", "fits-1d-wcs", "calspec-table", "sdss-template-rows"]
)
def test_frames_put_balmer_lines_at_vacuum_rest_wavelengths(shared_spectra, manifest_rows, fmt):
    """The air/vacuum decision per format, checked on the stars themselves.

    In A/B stars and white dwarfs the H-beta and H-alpha cores must land on their vacuum
    wavelengths after the reader's frame is applied; the wrong frame would shift them by
    1.4 and 1.8 A. (Pickles is left out: its 5 A sampling cannot tell the frames apart.)
    """
    offsets = []
    for row in manifest_rows:
        if row["format"] != fmt or row["label"] not in ("a_star", "ob_star", "wd"):
            continue
        spec = _load(shared_spectra, row)[0]
        for line in (4862.68, 6564.61):
            off = _balmer_offset(spec, line)
            if off is not None:
                offsets.append(off)
    assert len(offsets) >= 10
    assert abs(np.median(offsets)) < 0.6, f"median offset {np.median(offsets):.2f} A"
