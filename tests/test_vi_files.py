"""VI files that round-trip and speak Prospect and Marz, and commands that never make a store
out of a mistyped --db."""

from __future__ import annotations

import csv
import datetime as dt
from pathlib import Path

import pytest

from annotate import review
from annotate.export import vi
from annotate.intake.labels import import_labels
from db.store import Store, StoreError
from tests.app_support import context, seeded_copy

# The first lines of desihub/prospect py/prospect/test/t/test_read_vi.csv (a data file:
# Prospect's own test VI file, an older release with 15 of today's 16 fields).
PROSPECT_TEST_VI = (
    "TARGETID,EXPID,NIGHT,TILEID,Spec_version,Redrock_version,Template_version,"
    "Redrock_spectype,Redrock_z,VI_scanner,VI_quality,VI_issue,VI_z,VI_spectype,VI_comment\n"
    "123456789,12345,20200703,65432,0.33.3,0.22.2,1.0,GALAXY,0.22,Desi Arnaz,1,R,0.23,QSO,"
    '"This is a comment containing a , comma."\n'
    "987654321,12345,20200703,65432,0.33.3,0.22.2,1.0,STAR,0.0003,Desi Arnaz,4,C,0.0004,STAR,"
    '"This looks nice"\n'
)


def _decisions(store) -> list[int]:
    """Five decisions of every kind, with every field a decision can carry."""
    cands = [c for c in store.list_candidates(limit=40, order="id") if c.verdict]
    by_task: dict[str, list] = {}
    for c in cands:
        by_task.setdefault(c.key, []).append(c)
    picked = [c for c in cands if len(by_task[c.key]) == 1][:5]
    a, r, c, s, f = (x.id for x in picked)
    review.decide(store, "local", a, "accept", grade=3, redshift=1.27, redshift_source="expert",
                  comment="clean", seconds=4.2, spectype="QSO")  # fmt: skip
    review.decide(store, "local", r, "reject", explanation="TiO bands, no CN, so NO",
                  grade=2, comment="see also, the red end", seconds=7.0, issues="sr",
                  spectype="M giant")  # fmt: skip
    review.decide(store, "local", c, "correct", label="YES", wrong_step=0,
                  explanation="I see C2 Swan bands at 5165 Å, so YES",
                  comment="check 4737", redshift=0.0012, redshift_source="agent")  # fmt: skip
    review.decide(store, "local", s, "skip")
    review.decide(store, "local", f, "flag", comment="odd continuum", grade=1)
    return [a, r, c, s, f]


def _as_decided(store) -> dict[tuple[str, str], tuple]:
    names = {e.id: e.name for e in store.experts()}
    out = {}
    for r in store.reviews():
        c = store.candidate(r.candidate_id)
        out[(c.key, c.task)] = (
            r.action, r.label, r.grade, None if r.redshift is None else round(r.redshift, 5),
            r.redshift_source, r.explanation, r.wrong_step, r.comment, names[r.expert_id],
            None if r.seconds is None else round(r.seconds, 1),
            r.updated.replace(microsecond=0), r.issues, r.spectype,
        )  # fmt: skip
    return out


@pytest.mark.parametrize("layout", ["loupe", "prospect", "marz"])
def test_export_vi_then_import_labels_reproduces_every_decision(
    ctx, tmp_path_factory, tmp_path, layout
):
    _decisions(ctx.store)
    out = tmp_path / f"vi_{layout}.csv"
    assert vi.write_vi(ctx.store, out, layout=layout) == 5
    seeded_copy(tmp_path_factory, tmp_path / "fresh")
    fresh = Store(tmp_path / "fresh" / "loupe.db")
    try:
        assert fresh.reviews() == []
        report = import_labels(fresh, out, None, create_expert=True)
        assert (report.recorded, report.errors) == (5, [])
        assert _as_decided(fresh) == _as_decided(ctx.store)
        again = import_labels(fresh, out, None)
        assert (again.recorded, again.unchanged) == (0, 5)  # the same file changes nothing
    finally:
        fresh.close()


def test_a_vi_file_keeps_its_labels_in_a_store_whose_agent_said_otherwise(ctx, tmp_path):
    """An accept or reject judged the verdict of the agent where it was made. Read into a
    store not vetted yet, or one whose agent answered the other way, it records the same
    label (as a correction, or as the opposite decision), never the opposite label."""
    a, r, c, _, _ = _decisions(ctx.store)
    out = tmp_path / "vi.csv"
    vi.write_vi(ctx.store, out)
    labels = {(x.key, x.task): x for x in (ctx.store.candidate(i) for i in (a, r, c))}
    want = {
        (ctx.store.candidate(a).key, ctx.store.candidate(a).task): ctx.store.candidate(a).verdict,
        (ctx.store.candidate(r).key, ctx.store.candidate(r).task): {"YES": "NO", "NO": "YES"}[
            ctx.store.candidate(r).verdict
        ],
        (ctx.store.candidate(c).key, ctx.store.candidate(c).task): "YES",
    }
    unvetted = Store(f"sqlite:///{tmp_path / 'unvetted.db'}")
    try:
        unvetted.add_candidates(ctx.store.candidate_refs())
        report = import_labels(unvetted, out, None, create_expert=True)
        assert (report.recorded, report.errors) == (5, [])
        got = {}
        for rv in unvetted.reviews():
            info = unvetted.candidate(rv.candidate_id)
            got[(info.key, info.task)] = (rv.action, rv.label)
        for k, lab in want.items():
            assert got[k] == ("correct", lab)
        assert sorted(a for a, _ in got.values()) == ["correct"] * 3 + ["flag", "skip"]
    finally:
        unvetted.close()
    # The same file where the agent answered the other way for the accepted candidate.
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    flipped = next(x for x in rows if x["action"] == "accept")
    flipped["verdict"] = {"YES": "NO", "NO": "YES"}[flipped["verdict"]]
    one = tmp_path / "one.csv"
    with one.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerow(flipped)
    assert import_labels(ctx.store, one, None).recorded == 1
    key = (flipped["id"], flipped["task"])
    [rv] = ctx.store.reviews(candidate_id=labels[key].id)
    assert (rv.action, rv.label) == ("reject", flipped["verdict"])


def test_vi_csv_writes_reason_and_reasoning_as_columns(ctx, tmp_path):
    _decisions(ctx.store)
    out = tmp_path / "vi.csv"
    vi.write_vi(ctx.store, out)
    rows = {r["action"]: r for r in csv.DictReader(out.open(encoding="utf-8"))}
    assert (rows["reject"]["reason"], rows["reject"]["reasoning"]) == (
        "TiO bands, no CN, so NO",
        "",
    )
    assert rows["correct"]["reasoning"] == "I see C2 Swan bands at 5165 Å, so YES"
    assert (rows["correct"]["wrong_step"], rows["correct"]["comment"]) == ("1", "check 4737")
    assert rows["reject"]["comment"] == "see also, the red end"


def test_prospect_layout_writes_its_16_fields_in_order(ctx, tmp_path):
    _decisions(ctx.store)
    out = tmp_path / "p.csv"
    vi.write_vi(ctx.store, out, layout="prospect")
    rows = list(csv.reader(out.open(encoding="utf-8")))
    assert rows[0][:16] == [
        "TARGETID", "EXPID", "NIGHT", "TILEID", "Spec_version", "Redrock_version",
        "Template_version", "Redrock_spectype", "Redrock_z", "Redrock_deltachi2",
        "VI_scanner", "VI_quality", "VI_issue", "VI_z", "VI_spectype", "VI_comment",
    ]  # fmt: skip
    by = {r[rows[0].index("action")]: dict(zip(rows[0], r)) for r in rows[1:]}
    assert by["accept"]["VI_quality"] == "3" and by["accept"]["VI_z"] == "1.27000"
    assert by["skip"]["VI_quality"] == "-1"  # Prospect's "not given"
    assert by["accept"]["VI_scanner"] == "local" and by["accept"]["VI_comment"] == "clean"
    # Prospect's issue letters concatenated in its order, and the expert's spectral type as
    # Prospect's class, the finer type beside it
    assert (by["reject"]["VI_issue"], by["reject"]["VI_spectype"]) == ("RS", "STAR")
    assert by["reject"]["spectype"] == "M giant"
    assert (by["accept"]["VI_issue"], by["accept"]["VI_spectype"]) == ("", "QSO")
    for r in by.values():  # DESI's own TARGETID, else one of Loupe's above DESI's bits
        assert r["TARGETID"] == r["object_id"] or int(r["TARGETID"]) >= 2**62
        assert float(r["Redrock_z"]) >= -1  # the file's own pipeline z


def test_prospect_redshift_of_a_star_at_rest_is_never_minus_zero():
    row = {"object_id": "x", "expert": "e", "grade": "", "issues": "", "redshift": "",
           "spectype": "", "comment": ""}  # fmt: skip
    for z in (-0.0, -4e-6, 0.0):
        assert vi.prospect_row(row, {"class": "STAR", "z": z})[8] == "0.0000"
    assert vi.prospect_row(row, {"class": "QSO", "z": 1.23456})[8] == "1.2346"


def test_marz_layout_is_read_as_marz_reads_it(ctx, tmp_path):
    """Marz takes its header from the last leading '#' line and reads columns by name."""
    _decisions(ctx.store)
    out = tmp_path / "m.mz"
    vi.write_vi(ctx.store, out, layout="marz")
    lines = out.read_text(encoding="utf-8").splitlines()
    n = next(i for i, line in enumerate(lines) if not line.startswith("#")) - 1
    headers = [h.strip() for h in lines[n].replace("#", "").split(",")]
    assert headers[:15] == [
        "ID",
        "Name",
        "RA",
        "DEC",
        "Mag",
        "Type",
        "AutoTID",
        "AutoTN",
        "AutoZ",
        "AutoXCor",
        "FinTID",
        "FinTN",
        "FinZ",
        "QOP",
        "Comment",
    ]
    first = dict(zip(headers, lines[n + 1].split(",")))  # Marz splits on every comma
    assert first["QOP"] == "3" and first["FinZ"] == "1.27000" and first["Comment"] == "clean"
    assert first["FinTN"] == "QSO"  # the expert's type, as Marz's final template name


def test_prospects_own_vi_file_is_read(ctx, tmp_path):
    """Prospect's test VI file: every field read (a quoted comma too); its rows say what the
    object is, not a YES/NO for a Loupe task, so the file is refused with that reason and
    nothing is stored."""
    from annotate.intake.labels import _read_rows

    path = tmp_path / "test_read_vi.csv"
    path.write_text(PROSPECT_TEST_VI, encoding="utf-8")
    with path.open(encoding="utf-8") as fh:
        names, rows = _read_rows(fh)
    assert {"object_id", "expert", "grade", "redshift", "comment"} <= set(names)
    (line1, a), (line2, b) = rows
    assert (line1, a["object_id"], a["expert"], a["grade"], a["issues"]) == (
        2,
        "123456789",
        "Desi Arnaz",
        "1",
        "R",
    )
    assert (a["redshift"], a["spectype"]) == ("0.23", "QSO")
    assert a["comment"] == "This is a comment containing a , comma."
    assert (line2, b["grade"], b["comment"]) == (3, "4", "This looks nice")
    # (its scanner is no expert here: --create-expert, which creates none for a refused
    # file); the file has no verdict column: refused once, for the file, not row by row
    with pytest.raises(StoreError, match="no 'label' column, nor a 'verdict'"):
        import_labels(ctx.store, path, "local", create_expert=True)
    assert ctx.store.reviews() == [] and ctx.store.expert("Desi Arnaz") is None


def test_a_vi_row_with_a_verdict_and_prospect_fields_is_imported(ctx, tmp_path):
    c, d = [c for c in ctx.store.list_candidates(limit=40, order="id") if c.verdict][:2]
    path = tmp_path / "vi.csv"
    path.write_text(
        "TARGETID,task,VI_scanner,VI_quality,VI_issue,VI_z,VI_spectype,VI_comment,verdict\n"
        f'{c.key},{c.task},local,4,SR,0.5,QSO,"a comment, with a comma",{c.verdict}\n'
        f"{d.key},{d.task},local,4,X,0.5,QSO,,{d.verdict}\n",
        encoding="utf-8",
    )
    report = import_labels(ctx.store, path, None)
    assert report.recorded == 1
    ((line, why),) = report.errors  # an issue flag Prospect does not have: refused, named
    assert line == 3 and "'X' is not one of R" in why, why
    (r,) = ctx.store.reviews(candidate_id=c.id)
    assert (r.action, r.grade, r.redshift, r.redshift_source, r.comment, r.issues,
            r.spectype) == ("accept", 4, 0.5, "expert", "a comment, with a comma", "RS",
                            "QSO")  # fmt: skip
    assert ctx.store.reviews(candidate_id=d.id) == []


def test_import_keeps_the_time_of_the_decision(ctx, tmp_path):
    c = next(c for c in ctx.store.list_candidates(limit=40, order="id") if c.verdict)
    path = tmp_path / "vi.csv"
    path.write_text(f"id,task,action,verdict,expert,time\n{c.key},{c.task},accept,,local,"
                    "2021-03-04T05:06:07Z\n", encoding="utf-8")  # fmt: skip
    assert import_labels(ctx.store, path, None).errors == []
    (r,) = ctx.store.reviews(candidate_id=c.id)
    assert r.updated == r.created == dt.datetime(2021, 3, 4, 5, 6, 7)


# -- a mistyped --db never becomes a new, empty store


def _one_line(capsys, rc: int, *words: str) -> None:
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    for w in words:
        assert w in err, err


def test_commands_refuse_a_database_that_is_not_there(tmp_path, capsys):
    import launch

    missing = tmp_path / "no" / "loupe.sqlite"
    for argv in (
        ["export", "vi", "--db", str(missing), "--out", str(tmp_path / "vi.csv")],
        ["export", "rl", "--db", str(missing), "--out", str(tmp_path / "rl")],
        ["import-labels", str(tmp_path / "x.csv"), "--expert", "a", "--db", str(missing)],
        ["add-expert", "zed", "--role", "expert", "--db", str(missing)],
        ["calibrate", "--db", str(missing)],
        ["audit", "--db", str(missing)],
        ["settings", "--db", str(missing), "audit_rate=0.1"],
        ["export", "catalogue", "--db", str(missing), "--out", str(tmp_path / "cat")],
    ):
        rc = launch.main(argv)
        _one_line(capsys, rc, str(missing), "no database there")
    assert not missing.exists() and not missing.parent.exists()
    assert not (tmp_path / "vi.csv").exists()


def test_store_opens_without_creating_only_what_exists(tmp_path):
    with pytest.raises(StoreError, match="no database there"):
        Store(tmp_path / "x.db", create=False)
    assert not (tmp_path / "x.db").exists()
    Store(tmp_path / "x.db").close()  # ingest, demo and serve's default create it
    Store(tmp_path / "x.db", create=False).close()
    text = tmp_path / "notes.txt"
    text.write_text("notes")
    with pytest.raises(StoreError, match="cannot create its folder"):
        Store(text / "sub" / "x.db")


def test_serve_on_a_missing_db_refuses_and_seeds_nothing(tmp_path, capsys):
    import launch

    missing = tmp_path / "nonexistent" / "dir" / "x.db"
    rc = launch.main(["serve", "--db", str(missing), "--port", "1"])
    _one_line(capsys, rc, str(missing), "no database there")
    assert not missing.parent.exists()


def test_an_expert_downloads_their_own_vi_csv(tmp_path_factory, tmp_path):
    """A non-admin's VI CSV holds their decisions only, outside the admins' export folder."""
    from annotate.team.experts import create_expert
    from app.context import Viewer
    from app.pages import export as export_page

    c = context(tmp_path_factory, tmp_path, login=True)
    try:
        create_expert(c.store, "bea", "expert", "pw-bea-12345")
        create_expert(c.store, "ada", "admin", "pw-ada-12345")
        cands = [x for x in c.store.list_candidates(limit=10, order="id") if x.verdict]
        review.decide(c.store, "bea", cands[0].id, "accept", comment="mine")
        review.decide(c.store, "ada", cands[1].id, "accept", comment="hers")
        msg, files = export_page.vi_download(c, Viewer("bea", "expert"))
        assert "your decisions" in msg and files
        rows = [r for f in files for r in csv.DictReader(open(f, encoding="utf-8"))]
        assert [(r["expert"], r["comment"]) for r in rows] == [("bea", "mine")]
        assert all(c.export_dir not in Path(f).parents for f in files)
        msg, files = export_page.vi_download(c, Viewer("ada", "admin"))
        rows = [r for f in files for r in csv.DictReader(open(f, encoding="utf-8"))]
        assert sorted(r["expert"] for r in rows) == ["ada", "bea"]
        assert all(c.export_dir in Path(f).parents for f in files)
        assert export_page.vi_download(c, None)[1] == []  # anonymous: refused
    finally:
        c.store.close()


def test_an_author_lists_their_drafts_and_what_was_sent_back(ctx):
    from annotate import authoring as au
    from annotate.team.experts import create_expert
    from app.context import Viewer
    from app.pages import author as author_page

    create_expert(ctx.store, "ann", "expert", None)
    create_expert(ctx.store, "ada", "admin", None)
    ann = Viewer("ann", "expert")
    assert author_page.my_drafts(ctx, ann) == "You have no drafts and nothing sent back."
    c1, c2, c3 = ctx.store.list_candidates(limit=3, order="id")
    drafts = []
    for c in (c1, c2, c3):
        d = au.start_draft(c, renderer="fast")
        au.add_step(d, ctx.store.load_spectrum(c.id), 4780, 4940, "H-beta.")
        au.set_answer(d, "YES", "Broad H-beta.")
        au.save_draft(ctx.store, d, "ann")
        drafts.append(d)
    au.submit(ctx.store, drafts[1], "ann")
    au.audit(ctx.store, drafts[1].authored_id, "ada", False, "Zoom on H-gamma | too.")
    au.submit(ctx.store, drafts[2], "ann")  # awaiting audit: not listed
    table = author_page.my_drafts(ctx, ann)
    lines = table.splitlines()[2:]
    assert len(lines) == 2
    assert any(c1.key in ln and "| draft |" in ln for ln in lines)
    assert any(c2.key in ln and "sent back" in ln and "Zoom on H-gamma \\| too." in ln
               for ln in lines)  # fmt: skip
    assert author_page.my_drafts(ctx, Viewer("ada", "admin")).startswith("You have no")
