"""Template files: a team's own rest-frame templates read from a folder, and the built-in
set written out as text files to start one from."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from agent.templates import Template, TemplateError, _normalised, builtin_templates

# Pixels of one template at most: a template is drawn over a spectrum as an overlay and
# kept in the server for its life (a survey template has a few thousand).
MAX_TEMPLATE_PIXELS = 131_072


def read_templates(folder: str | Path) -> list[Template]:
    """Every spectrum in the files of `folder` as a rest-frame template, by file name.

    A folder that does not exist, or holds no readable spectrum, is a TemplateError; an
    unreadable file names itself in the error. The files are read in a limited worker
    (`agent.formats.sandbox`), as any file is, and a template is kept for the server's
    life, so one of more than `MAX_TEMPLATE_PIXELS` pixels is refused (a template is an
    overlay: rebin it)."""
    from agent.formats import read_spectra
    from agent.formats.sandbox import pool
    from agent.spectrum import SpectrumError

    root = Path(folder)
    if not root.is_dir():
        raise TemplateError(f"{root}: not a folder of templates")
    out: list[Template] = []
    for path in sorted(p for p in root.iterdir() if p.is_file() and not p.name.startswith(".")):
        try:
            specs = pool().call(path, read_spectra, path)
        except (SpectrumError, OSError) as e:
            raise TemplateError(f"{path}: not a template spectrum ({e})") from e
        for i, s in enumerate(specs):
            if s.wavelength.size > MAX_TEMPLATE_PIXELS:
                raise TemplateError(
                    f"{path}: a template of {s.wavelength.size} pixels; templates hold at "
                    f"most {MAX_TEMPLATE_PIXELS} (rebin it)"
                )
            flux = np.where(s.mask, np.nan, s.flux).astype(float)
            name = s.id or path.stem
            if len(specs) > 1 and not s.id:
                name = f"{path.stem} [{i}]"
            out.append(Template(name, "file", s.rest_wavelength(), _normalised(flux)))
    if not out:
        raise TemplateError(f"{root}: no template spectra in it")
    return out


def write_templates(folder: str | Path) -> list[Path]:
    """The built-in templates as two-column text files (wavelength, flux) in `folder`, for
    editing or as a starting point for a team's own set."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for t in builtin_templates():
        p = folder / ("".join(ch if ch.isalnum() else "_" for ch in t.name).strip("_") + ".csv")
        rows = np.column_stack([t.wavelength, t.flux])
        np.savetxt(p, rows, delimiter=",", header="wavelength,flux", comments="", fmt="%.6g")
        paths.append(p)
    return paths
