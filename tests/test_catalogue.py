"""`export catalogue`: each task's YES list as CSV and FITS, with the audit's precision in
the FITS header and the manifest."""

from __future__ import annotations

import argparse
import csv
import json
import math

import pytest

from agent.refs import CandidateRef
from annotate.audit.sample import draw_for_store
from annotate.export.catalogue import COLUMNS, CatalogueError, write_catalogue
from annotate.review import decide
from commands import export as cli
from tests.store_factory import traj


def _campaign(store) -> dict[str, int]:
    """20 confident YES verdicts (auto-accepted, 4 audited, one of them wrong), 10 unsure
    ones of which an expert corrects one to YES; half the spectra carry a position."""
    refs = [
        CandidateRef(id=f"w{i}", task="wd", path=f"/data/w{i}.fits",
                     extra=(("ra", 10.0 + i), ("dec", -5.0), ("survey", "LAMOST"))
                     if i % 2 == 0 else ())
        for i in range(30)
    ]  # fmt: skip
    store.add_candidates(refs)
    for i in range(30):
        t = traj(f"w{i}", 0.995 if i < 20 else 0.3, "wd")
        t.steps[-1].measurements = {"redshift": 0.0002 * i, "redshift_quality": 0.0,
                                    "redshift_source": 0.0, "inspector_version": 2.0}  # fmt: skip
        store.record_trajectory(t)
    ids = {f"w{i}": store.find_candidate(f"w{i}", "wd").id for i in range(30)}
    store.auto_accept(0.9)
    store.set_setting("audit_rate", 0.2)
    draws = draw_for_store(store, seed=4)
    assert len(draws) == 4 and {d.inclusion for d in draws} == {0.2}
    store.ensure_expert("ada")
    decide(store, "ada", draws[0].id, "reject", explanation="an F star", grade=4)
    for d in draws[1:]:
        decide(store, "ada", d.id, "accept", grade=3, redshift=0.0015,
                            redshift_source="expert")  # fmt: skip
    decide(store, "ada", ids["w25"], "correct", label="YES", grade=2,
                        explanation="weak but broad Balmer lines")  # fmt: skip
    return {"rejected": draws[0].id, "audited": [d.id for d in draws[1:]], **ids}


def _csv(path) -> list[dict[str, str]]:
    """The CSV's rows, below its comment lines (`#`: the quoted figures)."""
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))


def test_catalogue_fits_reads_back_and_agrees_with_the_csv(each_store, tmp_path):
    from astropy.io import fits

    ids = _campaign(each_store)
    cat = write_catalogue(each_store, tmp_path / "cat")
    assert [p.name for p in cat.files] == ["manifest.json", "wd.csv", "wd.fits"]
    rows = _csv(tmp_path / "cat" / "wd.csv")
    with fits.open(tmp_path / "cat" / "wd.fits") as hdul:
        h, data = hdul["CATALOGUE"].header, hdul["CATALOGUE"].data
        assert list(data.columns.names) == list(COLUMNS)
        assert data.columns["ra"].unit == "deg"
        assert len(data) == len(rows) == h["NYES"] == 20  # 19 auto/audited YES + 1 corrected
        for c in COLUMNS:
            for fits_v, csv_v in zip(data[c], (r[c] for r in rows)):
                if isinstance(fits_v, float):
                    assert (math.isnan(fits_v) and csv_v == "nan") or fits_v == float(csv_v), c
                else:
                    assert str(fits_v) == csv_v, c
        man = json.loads((tmp_path / "cat" / "manifest.json").read_text())
        est = man["tasks"]["wd"]["estimates"]["precision"]
        # 16 agent-only YES at the audited rate 3/4, plus 4 decided by experts
        assert h["PRECISN"] == pytest.approx(est["value"]) == pytest.approx((4 + 16 * 0.75) / 20)
        assert h["PREC_LO"] == pytest.approx(est["low"]) and h["PREC_HI"] == pytest.approx(
            est["high"]
        )
        assert h["PREC_LO"] < h["PRECISN"] < h["PREC_HI"]
        assert (h["AUD_DRWN"], h["AUD_REV"], h["PREC_N"]) == (4, 4, 4)
        assert (h["NYES_EXP"], h["NYES_AGT"]) == (4, 16)
        assert h["CONFLEV"] == 0.95 and "COMPNOTE" not in h  # no auto-NO: complete by design
    by_id = {r["id"]: r for r in rows}
    rejected = next(k for k, v in ids.items() if v == ids["rejected"] and k != "rejected")
    assert rejected not in by_id  # the audit's catch left the list
    assert by_id["w25"]["decided_by"] == "expert" and by_id["w25"]["grade"] == "2"
    auto = [r for r in rows if r["decided_by"] == "inspector-v2"]
    assert len(auto) == 16 and {r["audit_weight"] for r in auto} == {"0.0"}
    audited = [r for r in rows if float(r["audit_weight"]) > 0]
    assert len(audited) == 3 and {r["audit_weight"] for r in audited} == {"5.0"}
    assert {r["redshift"] for r in audited} == {"0.0015"}  # the expert's, not the agent's
    assert by_id["w2"]["ra"] == "12.0" and by_id["w1"]["ra"] == "nan"
    assert by_id["w2"]["survey"] == "LAMOST"
    assert "precision 0.800" in man["tasks"]["wd"]["quote"]
    assert man["files"]["wd.fits"].startswith("sha256:")


def test_export_command_writes_the_catalogue_and_refuses_a_full_folder(tmp_path, capsys):
    from db.store import Store

    db = tmp_path / "loupe.db"
    store = Store(str(db))
    _campaign(store)
    store.close()
    p = argparse.ArgumentParser()
    cli.add_arguments(p)
    args = p.parse_args(["catalogue", "--db", str(db), "--out", str(tmp_path / "c")])
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "wd: precision 0.800 (95% interval" in out and "4 audited of 4 drawn" in out
    assert cli.main(args) == 2  # the folder now holds a catalogue: nothing overwritten
    assert "not an empty folder" in capsys.readouterr().err
    store = Store(str(db))
    with pytest.raises(CatalogueError, match="unknown task 'cv'"):
        write_catalogue(store, tmp_path / "d", tasks=["cv"])
    store.close()


def test_export_page_writes_the_catalogue_for_admins_only(tmp_path_factory, tmp_path):
    from astropy.io import fits

    from app import context as app_context
    from app.pages import export as export_page
    from tests.app_support import context

    ctx = context(tmp_path_factory, tmp_path)
    try:
        tasks = ctx.store.tasks()
        msg, files = export_page.catalogue_download(ctx, app_context.Viewer("local", "admin"))
        names = sorted(p.rsplit("/", 1)[-1] for p in files)
        assert names == sorted(
            ["manifest.json", *(f"{t}.{x}" for t in tasks for x in ("csv", "fits"))]
        )
        assert msg.startswith("Catalogue") and all(f"{t}: precision" in msg for t in tasks)
        with fits.open(next(p for p in files if p.endswith(".fits"))) as hdul:
            h = hdul["CATALOGUE"].header  # no decision yet: the notes say why, whole
            assert h["NYES"] == 0 and h["PRECNOTE"] == "not estimated: the YES list is empty"
        msg, files = export_page.catalogue_download(ctx, app_context.Viewer("bob", "expert"))
        assert msg.startswith("Refused") and files == []
        assert export_page.close_campaign(ctx, app_context.Viewer("bob", "expert")).startswith(
            "Refused"
        )
        sure = [c for c in ctx.store.list_candidates(limit=500)
                if c.confidence is not None and max(c.confidence, 1 - c.confidence) >= 0.9]  # fmt: skip
        assert sure and any(c.verdict == "YES" for c in sure)
        msg = export_page.close_campaign(ctx, app_context.Viewer("local", "admin"))
        assert msg.startswith(f"{len(sure)} verdict(s) at least 0.9 sure")
        msg, files = export_page.catalogue_download(ctx, app_context.Viewer("local", "admin"))
        listed = sum(int(fits.getheader(p, "CATALOGUE")["NYES"]) for p in files
                     if p.endswith(".fits"))  # fmt: skip
        assert listed == sum(c.verdict == "YES" for c in sure)
    finally:
        ctx.store.close()


def test_the_header_and_the_csv_quote_completeness_with_its_interval_and_estimator(
    each_store, tmp_path
):
    """A closed campaign whose audit found a miss among the agent's NO verdicts: the FITS
    header, the CSV's comment lines and the manifest quote the completeness with its 95%
    interval and the estimator it comes from (the difference estimator on P(YES)), next to
    the precision (exact); its value is the one worked out by hand below."""
    from astropy.io import fits

    from annotate.audit.estimate import ASSISTED, ESTIMATOR_TEXT, EXACT
    from tests.store_factory import seeded

    seeded(each_store, [0.995] * 20 + [0.003] * 40, task="wd")
    assert each_store.auto_accept(0.9) == 60
    each_store.set_setting("audit_rate", 0.25)
    draws = draw_for_store(each_store, seed=0)
    yes = sorted(d.id for d in draws if d.band.side == "YES")
    no = sorted(d.id for d in draws if d.band.side == "NO")
    assert (len(yes), len(no)) == (8, 7)
    each_store.ensure_expert("ada")
    decide(each_store, "ada", yes[0], "reject")  # a confident mistake on the YES list
    decide(each_store, "ada", no[0], "reject")  # a miss: the agent's NO was wrong
    for cid in yes[1:] + no[1:]:
        decide(each_store, "ada", cid, "accept")
    cat = write_catalogue(each_store, tmp_path / "cat")
    # by hand: 8 YES known (7 audited on the YES list, the miss); of the 12 YES verdicts
    # nobody reviewed, P(YES) 0.995 each corrected by the YES list's mean residual 7/8 -
    # 0.995: 10.5 truly YES; of the 33 NO verdicts, 0.003 each corrected by 1/7 - 0.003:
    # 33/7 truly YES
    want = (8 + 10.5) / (8 + 10.5 + 33 / 7)
    with fits.open(tmp_path / "cat" / "wd.fits") as hdul:
        h = hdul["CATALOGUE"].header
        assert h["COMPLETE"] == pytest.approx(want)
        assert h["COMP_LO"] < want < h["COMP_HI"] <= 1.0 and h["COMP_N"] == 15
        assert h["COMPMETH"] == ESTIMATOR_TEXT[ASSISTED]
        assert h["PRECMETH"] == ESTIMATOR_TEXT[EXACT] and h["PREC_N"] == 8
        assert "COMPNOTE" not in h and "PRECNOTE" not in h
        lo, hi = h["COMP_LO"], h["COMP_HI"]
        comments = " ".join(str(c) for c in h["COMMENT"])
    quoted = f"completeness {want:.3f} (95% interval {lo:.3f}-{hi:.3f}; {ASSISTED})"
    assert quoted in cat.manifest["tasks"]["wd"]["quote"]
    assert "completeness" in comments and ASSISTED in comments
    with (tmp_path / "cat" / "wd.csv").open(encoding="utf-8") as fh:
        head = [fh.readline() for _ in range(3)]
    assert head[0].startswith("# wd: precision ") and quoted in head[0]
    assert head[1].startswith("# precision: ") and ESTIMATOR_TEXT[ASSISTED] in head[1]
    assert head[2].startswith("id,survey,object_id")
    # a reader that skips comments (pandas, astropy) gets the table
    import pandas as pd

    table = pd.read_csv(tmp_path / "cat" / "wd.csv", comment="#")
    assert list(table.columns) == list(COLUMNS) and len(table) == h["NYES"]
