"""The campaign's product: per task, the final YES list as CSV and as a FITS binary table,
with the audit's estimates of its precision (purity) and completeness, each with its 95%
interval and the estimator it comes from, in the FITS header, the CSV's comment lines and
the manifest.

    python launch.py export catalogue --db loupe.db --out exports/catalogue-1

One row per candidate whose resolved label is YES (an expert's decision, an adjudication,
or the agent's verdict where auto-accepted): `id` (the candidate id), `survey`,
`object_id`, `ra`/`dec` (deg; NaN where the file has none), `redshift` (the expert's where
one was given, else the agent's; NaN where neither), `p_yes` (the agent's P(YES)),
`decided_by` ("expert", "adjudicated", or the agent version that auto-accepted it:
"inspector-vN", "rules", "policy:model"), `grade` (the lowest grade of the experts' YES
decisions, 1 a guess .. 4 certain; 0 none) and `audit_weight` (1/pi for an item of the
random audit sample, 0 otherwise). docs/audit.md says how to read and quote the precision.
Text is any Unicode: the CSV is UTF-8 with every text cell neutralised for spreadsheets
(`annotate.export.spreadsheet`: a leading `=`, `+`, `-`, `@`, tab or CR gets a `'`), and the
FITS table's text columns are UTF-8 bytes (header `TEXTENC = 'UTF-8'`; `read_fits_text`).
Files: `<task>.csv`, `<task>.fits`, `manifest.json`, written under a staging name and renamed
into `--out` only when complete.
"""

from __future__ import annotations

import json
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from annotate.audit.estimate import ESTIMATOR_TEXT
from annotate.audit.sample import TaskEstimates, store_estimates, task_estimates
from annotate.export.manifest import content_hash, file_hashes, staged
from annotate.export.spreadsheet import csv_line

COLUMNS = ("id", "survey", "object_id", "ra", "dec", "redshift", "p_yes", "decided_by",
           "grade", "audit_weight")  # fmt: skip
FLOATS = ("ra", "dec", "redshift", "p_yes", "audit_weight")
UNITS = {"ra": "deg", "dec": "deg"}
TEXTS = tuple(c for c in COLUMNS if c not in FLOATS and c != "grade")
CONFIDENCE = 0.95


class CatalogueError(ValueError):
    """The catalogue could not be written as asked; the message says why."""


@dataclass
class Catalogue:
    out: Path
    manifest: dict[str, Any]

    @property
    def files(self) -> list[Path]:
        return sorted(p for p in self.out.iterdir() if p.is_file())


def _float(v: Any) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f if math.isfinite(f) else math.nan


def decided_by(row: dict[str, Any]) -> str:
    """Who set the YES: an expert, an adjudicator, or the agent version that was sure.

    >>> decided_by({"label_source": "review"}), decided_by({"label_source": "adjudication"})
    ('expert', 'adjudicated')
    >>> decided_by({"label_source": "auto", "policy": "rules", "model": "x.json",
    ...             "params": {"inspector_version": 3}, "measurements": {}})
    'inspector-v3'
    >>> decided_by({"label_source": "auto", "policy": "rules", "scored_by": 5, "params": {}})
    'inspector-v5'
    >>> decided_by({"label_source": "auto", "policy": "hf", "model": "qwen", "params": {},
    ...             "measurements": {}})
    'hf:qwen'
    """
    source = row.get("label_source")
    if source != "auto":
        return "adjudicated" if source == "adjudication" else "expert"
    # a version adopted since re-scored this verdict from its stored inputs (annotate.learning.schedule)
    v = row.get("scored_by")
    if v is None:
        v = (row.get("params") or {}).get("inspector_version")
    if v is None:
        v = (row.get("measurements") or {}).get("inspector_version")
    if v is not None:
        return f"inspector-v{int(v)}"
    policy, model = row.get("policy") or "agent", row.get("model")
    return f"{policy}:{model}" if model else policy


def catalogue_row(row: dict[str, Any]) -> dict[str, Any]:
    """A store row (`Store.catalogue_rows`) as the catalogue's columns."""
    grades = [g for g, _, _ in row["reviews"] if g is not None]
    z_expert = [z for _, z, _ in row["reviews"] if z is not None]
    z = z_expert[0] if z_expert else (row["measurements"] or {}).get("redshift")
    incl = row.get("audit_inclusion")
    return {
        "id": row["key"],
        "survey": row.get("survey") or "",
        "object_id": row["object_id"],
        "ra": _float(row.get("ra")),
        "dec": _float(row.get("dec")),
        "redshift": _float(z),
        "p_yes": _float(row.get("p_yes")),
        "decided_by": decided_by(row),
        "grade": int(min(grades)) if grades else 0,
        "audit_weight": 1.0 / incl if incl else 0.0,
    }


def _figure(name: str, est: Any) -> str:
    """`name value (95% interval low-high; estimator)`, or why it is not estimated.

    >>> from annotate.audit.estimate import Estimate
    >>> _figure("completeness", Estimate(0.91, 0.84, 0.97, 40, method="model-assisted"))
    'completeness 0.910 (95% interval 0.840-0.970; model-assisted)'
    >>> _figure("completeness", Estimate(None, None, None, 0, note="no audit sample drawn"))
    'completeness not estimated (no audit sample drawn)'
    """
    if est.value is None:
        return f"{name} not estimated ({est.note})"
    if est.note and est.low == est.high == est.value:
        return f"{name} {est.value:.3f} exactly ({est.note})"
    how = f"; {est.method}" if est.method else ""
    return f"{name} {est.value:.3f} (95% interval {est.low:.3f}-{est.high:.3f}{how})"


def quote(e: TaskEstimates) -> str:
    """The sentence to quote: the precision and the completeness, their intervals and
    estimators, and what the audit rests on."""
    p = e.precision
    if p.value is None:
        return (f"{e.task}: precision not estimated ({p.note}); "
                f"{_figure('completeness', e.completeness)}; {e.yes_list} objects listed")  # fmt: skip
    return (
        f"{e.task}: {_figure('precision', p)} and {_figure('completeness', e.completeness)} "
        f"from {e.audited} audited of {e.drawn} drawn; {e.yes_list} objects listed "
        f"({e.yes_by_expert} decided by experts, {e.yes_by_agent} by the agent alone)"
    )


def header_cards(e: TaskEstimates) -> list[tuple[str, Any, str]]:
    """FITS header keywords (8 characters at most) for a task's YES list: precision and
    completeness, each with its 95% interval, the audited items it rests on and the
    estimator it comes from (`PRECMETH`, `COMPMETH`), or a note saying why not."""
    cards: list[tuple[str, Any, str]] = [
        ("TASK", e.task, "Loupe task of this YES list"),
        ("NYES", e.yes_list, "objects in the YES list"),
        ("NYES_EXP", e.yes_by_expert, "YES decided by an expert"),
        ("NYES_AGT", e.yes_by_agent, "YES decided by the agent alone"),
        ("AUD_DRWN", e.drawn, "items drawn into the random audit"),
        ("AUD_REV", e.audited, "of them reviewed by an expert"),
        ("CONFLEV", CONFIDENCE, "confidence level of the intervals"),
        ("CONFMETH", "see PRECMETH, COMPMETH", "how the intervals are made: docs/audit.md"),
    ]
    for key, lo, hi, n, meth, est, what in (
        ("PRECISN", "PREC_LO", "PREC_HI", "PREC_N", "PRECMETH", e.precision,
         "precision (purity) of the YES list"),
        ("COMPLETE", "COMP_LO", "COMP_HI", "COMP_N", "COMPMETH", e.completeness,
         "completeness among decided"),
    ):  # fmt: skip
        if est.value is None:
            cards.append((key[:4] + "NOTE", card_text(f"not estimated: {est.note}", "and why"),
                          "and why"))  # fmt: skip
            continue
        cards += [
            (key, est.value, what),
            (lo, est.low, "lower end of its 95% interval"),
            (hi, est.high, "upper end of its 95% interval"),
            (n, est.n, "audited items it rests on"),
            (meth, ESTIMATOR_TEXT.get(est.method, est.method or "known exactly"),
             "estimator"),
        ]  # fmt: skip
        if key == "PRECISN":
            cards.append(("PREC_NEF", round(est.n_eff, 3), "their effective number (Kish)"))
    return cards


def card_text(text: str, comment: str) -> str:
    """`text` cut so that a FITS card holds it whole with `comment` (80 characters: the
    key and "= " take 10, the quotes 2, " / " 3; a quote inside is written twice), so
    astropy never truncates the card, nor warns that it does.

    >>> len(card_text("x" * 100, "and why"))
    58
    """
    room = 80 - 10 - 2 - 3 - len(comment)
    while len(text) + text.count("'") > room:
        text = text[:-1]
    return text


def comment_lines(e: TaskEstimates) -> list[str]:
    """The lines above the CSV's header (each starting with '#'): what the FITS header
    says, for a reader of the CSV alone."""
    return [f"# {quote(e)}",
            f"# precision: {ESTIMATOR_TEXT.get(e.precision.method, 'known exactly')}; "
            f"completeness: {ESTIMATOR_TEXT.get(e.completeness.method, 'known exactly')}; "
            "95% intervals; see docs/audit.md of Loupe"]  # fmt: skip


def write_task(folder: Path, task: str, rows: list[dict[str, Any]], e: TaskEstimates) -> None:
    from astropy.io import fits
    from astropy.table import Table

    with (folder / f"{task}.csv").open("w", newline="", encoding="utf-8") as fh:
        for line in comment_lines(e):  # a reader skips them: pandas comment="#", astropy
            fh.write(line + "\r\n")
        fh.write(csv_line(list(COLUMNS)))
        for r in rows:
            # no text cell runs as a formula when the file is opened in a spreadsheet
            fh.write(csv_line([repr(r[c]) if c in FLOATS else r[c] for c in COLUMNS]))
    t = Table(
        {c: _utf8([r[c] for r in rows]) if c in TEXTS else [r[c] for r in rows] for c in COLUMNS},
        dtype=[float if c in FLOATS else int if c == "grade" else None for c in COLUMNS],
    )
    for c, u in UNITS.items():
        t[c].unit = u
    hdu = fits.table_to_hdu(t)
    hdu.name = "CATALOGUE"
    # FITS strings are ASCII; any Unicode id or survey is kept as its UTF-8 bytes
    hdu.header["TEXTENC"] = ("UTF-8", "text columns hold UTF-8 bytes")
    for key, value, comment in header_cards(e):
        # the comment cut to what the card has room for: astropy would cut it and warn
        room = 80 - len(fits.Card(key, value).image.rstrip()) - 3
        hdu.header[key] = (value, comment[: max(0, room)])
    for line in textwrap.wrap(quote(e), 72):
        hdu.header.add_comment(line)
    hdu.header.add_comment("See docs/audit.md of Loupe for how to read these figures.")
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(folder / f"{task}.fits")


def _utf8(texts: list[Any]) -> Any:
    import numpy as np

    raw = [str(t).encode("utf-8") for t in texts]
    return np.array(raw, dtype=f"S{max([1, *map(len, raw)])}")


def read_fits_text(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a catalogue FITS file as written, text columns decoded from UTF-8."""
    from astropy.io import fits

    with fits.open(path) as hdul:
        data = hdul["CATALOGUE"].data
        names = list(data.columns.names)
        return [{n: _value(rec[n]) for n in names} for rec in data]


def _value(v: Any) -> Any:
    if isinstance(v, bytes):  # astropy hands back an ASCII text as str, any other as bytes
        return v.decode("utf-8")
    return v if isinstance(v, str) else v.item()


def write_catalogue(
    store: Any, out: str | Path, *, tasks: list[str] | None = None, seed: int = 0
) -> Catalogue:
    """Write each task's YES list (CSV and FITS) and `manifest.json` into the folder `out`
    (a new or empty one)."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CatalogueError(f"--out {str(out)!r} exists and is not an empty folder")
    known = store.tasks()
    tasks = known if tasks is None else tasks
    unknown = [t for t in tasks if t not in known]
    if unknown:
        raise CatalogueError(f"unknown task {unknown[0]!r}; known: {', '.join(known)}")
    estimates = store_estimates(store, seed=seed)
    per_task: dict[str, Any] = {}
    with staged(out) as (partial, _):
        for task in tasks:
            rows = [catalogue_row(r) for r in store.catalogue_rows(task)]
            e = estimates.get(task) or task_estimates(task, [])
            write_task(partial, task, rows, e)
            per_task[task] = {
                "rows": len(rows),
                "csv": f"{task}.csv",
                "fits": f"{task}.fits",
                "quote": quote(e),
                "estimates": e.to_dict(),
            }
        files = file_hashes(partial)
        manifest = {
            "kind": "catalogue",
            "code_version": store.code_version(),
            "columns": list(COLUMNS),
            "confidence_level": CONFIDENCE,
            "tasks": per_task,
            "files": files,
            "content_hash": content_hash(files),
        }
        (partial / "manifest.json").write_text(json.dumps(manifest, indent=1, allow_nan=False))
    return Catalogue(out, manifest)
