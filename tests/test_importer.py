"""`launch.py import-labels`: earlier verdicts become an expert's reviews."""

from __future__ import annotations

import pytest

import launch
from agent.refs import CandidateRef
from annotate.intake.labels import import_labels
from db.store import Store, StoreError
from tests.store_factory import traj


@pytest.fixture
def store(mem_store):
    mem_store.create_expert("ada")
    mem_store.add_candidates(
        [CandidateRef(id=f"c{i}", task="cv", path=f"/data/c{i}.fits") for i in range(4)]
        + [CandidateRef(id="w0", task="wd", path="/data/c0.fits")]
    )
    mem_store.record_trajectory(traj("c0", 0.9))  # agent says YES
    mem_store.record_trajectory(traj("c1", 0.1))  # agent says NO
    return mem_store


def test_labels_become_accept_reject_or_correct(store, tmp_path):
    f = tmp_path / "prospect.csv"
    f.write_text("id,label,comment\nc0,YES,clear\nc1,yes,\nc2,No,no lines\n")
    rep = import_labels(store, f, "vi-2019", create_expert=True)
    assert (rep.recorded, rep.unchanged, rep.errors) == (3, 0, [])
    by_key = {store.candidate(r.candidate_id).key: r for r in store.reviews(expert="vi-2019")}
    assert {k: (r.action, r.label, r.source) for k, r in by_key.items()} == {
        "c0": ("accept", "YES", "import"),
        "c1": ("reject", "YES", "import"),
        "c2": ("correct", "NO", "import"),
    }
    assert by_key["c0"].comment == "clear"
    assert store.find_candidate("c1").label == "YES"
    # the same file again changes nothing; a changed label is a revision with history
    assert import_labels(store, f, "vi-2019").unchanged == 3
    f.write_text("id,label\nc0,NO\n")
    assert import_labels(store, f, "vi-2019").recorded == 1
    r = store.reviews(expert="vi-2019", candidate_id=store.find_candidate("c0").id)[0]
    assert (r.action, r.label, r.revision) == ("reject", "NO", 2)


def test_path_and_task_columns(store, tmp_path):
    f = tmp_path / "marz.csv"
    f.write_text(
        "path,task,label\n/data/c0.fits,wd,YES\n/data/c0.fits,cv,NO\n/data/zz.fits,cv,NO\n"
        "/data/c3.fits,,YES\n"
    )
    rep = import_labels(store, f, "ada")
    assert rep.recorded == 2
    assert [(line, why) for line, why in rep.errors] == [
        (4, "no candidate for path '/data/zz.fits' and task 'cv'"),
        (5, "a row identified by path needs a task"),
    ]
    assert store.find_candidate("w0", "wd").label == "YES"
    assert store.find_candidate("c0", "cv").label == "NO"


def test_bad_rows_reported_good_rows_kept(store, tmp_path):
    f = tmp_path / "labels.csv"
    f.write_text("id,label\nc0,YES\nc9,YES\nc1,perhaps\n,YES\nc2,NO\n")
    rep = import_labels(store, f, "ada")
    assert rep.recorded == 2
    assert [line for line, _ in rep.errors] == [3, 4, 5]
    assert "c9" in rep.errors[0][1] and "perhaps" in rep.errors[1][1]


def test_bad_files_are_refused_whole(store, tmp_path):
    f = tmp_path / "x.csv"
    f.write_text("name,answer\na,YES\n")
    with pytest.raises(StoreError, match="no 'label' column"):
        import_labels(store, f, "ada")
    f.write_text("label\nYES\n")
    with pytest.raises(StoreError, match="'id' column or 'path' and 'task'"):
        import_labels(store, f, "ada")
    with pytest.raises(StoreError, match="cannot open"):
        import_labels(store, tmp_path / "missing.csv", "ada")
    with pytest.raises(StoreError, match="no expert"):
        import_labels(store, f, "nobody", create_expert=False)


def test_cli(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    s = Store(url)
    s.add_candidates([CandidateRef(id="a1", task="cv", path="/d/a1.fits")])
    s.record_trajectory(traj("a1", 0.8))
    s.close()
    f = tmp_path / "l.csv"
    f.write_text("id,label\na1,NO\nb2,YES\n")
    rc = launch.main(["import-labels", str(f), "--expert", "ada", "--db", url])
    err = capsys.readouterr().err  # no phantom expert; the command could not run: exit 2
    assert rc == 2 and err.startswith("launch.py import-labels: no expert 'ada'")
    assert err.count("\n") == 1
    s = Store(url)
    assert s.expert("ada") is None
    s.close()
    argv = ["import-labels", str(f), "--expert", "ada", "--create-expert", "--db", url]
    rc = launch.main(argv)
    out = capsys.readouterr()
    assert rc == 1  # one row refused
    assert "line 3: no candidate with id 'b2'" in out.err and "1 recorded" in out.out
    s = Store(url)
    assert [(r.action, r.label) for r in s.reviews(expert="ada")] == [("reject", "NO")]
    s.close()


def test_unknown_expert_refused_unless_created(store, tmp_path):
    f = tmp_path / "labels.csv"
    f.write_text("id,label\nc0,YES\n")
    with pytest.raises(StoreError, match="no expert 'adaa'.*--create-expert"):
        import_labels(store, f, "adaa")
    assert store.expert("adaa") is None
    assert import_labels(store, f, "adaa", create_expert=True).recorded == 1


def test_a_reason_overruling_the_agent_is_trained_on(store, tmp_path):
    """A label that differs from the agent's verdict, with a reason, is recorded as a reject
    whose explanation is that reason (what the export trains on); an accept's comment stays
    a note only."""
    f = tmp_path / "vi.csv"
    f.write_text(
        "id,label,reason,comment\n"
        "c0,NO,Narrow Balmer lines of an A star.,seen at the telescope\n"
        "c1,NO,,looks fine\n"
        "c2,YES,,\n"
    )
    assert import_labels(store, f, "ada").recorded == 3
    by_key = {store.candidate(r.candidate_id).key: r for r in store.reviews(expert="ada")}
    c0 = by_key["c0"]
    assert (c0.action, c0.label) == ("reject", "NO")
    assert c0.explanation == "Narrow Balmer lines of an A star."
    assert c0.comment == "seen at the telescope"
    assert by_key["c1"].action == "accept" and by_key["c1"].explanation is None
    # a comment alone is a note, never a reason: the reject carries no explanation
    g = tmp_path / "marz.csv"
    g.write_text("id,label,comment\nc0,NO,ALICE-C1 check with Bob tomorrow\n")
    assert import_labels(store, g, "bob", create_expert=True).recorded == 1
    r = store.reviews(expert="bob")[0]
    assert (r.action, r.explanation, r.comment) == (
        "reject",
        None,
        "ALICE-C1 check with Bob tomorrow",
    )


def test_a_refused_import_creates_no_expert(store, tmp_path):
    """--create-expert creates the expert only when a row is recorded."""
    f = tmp_path / "vi.csv"
    f.write_text("name,answer\nc0,YES\n")  # refused whole: no label column
    with pytest.raises(StoreError, match="no 'label' column"):
        import_labels(store, f, "carol", create_expert=True)
    assert store.expert("carol") is None
    f.write_text("id,label\nc9,YES\nc0,maybe\n")  # every row refused
    assert len(import_labels(store, f, "carol", create_expert=True).errors) == 2
    assert store.expert("carol") is None
    with pytest.raises(StoreError, match="cannot open"):
        import_labels(store, tmp_path / "missing.csv", "carol", create_expert=True)
    assert store.expert("carol") is None
