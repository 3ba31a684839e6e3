"""`import-labels` never guesses which candidate a row means.

An object vetted for several tasks is one id (and one TARGETID) with several candidates. A
row naming it without a task is refused in one line naming the id and its candidates,
unless `--task` says which; the summary counts it; `--dry-run` shows what each row would
change and writes nothing. Loupe's own Prospect and Marz files carry the task, so they are
read back onto the one candidate each row was written from. And the file-level problems
are said once: a Prospect file with no verdict column, an expert name with a typo.
"""

from __future__ import annotations

import pytest

import launch
from agent.refs import CandidateRef
from annotate.export import vi
from annotate.export.vi_ids import target_id
from annotate.intake.labels import import_labels
from db.store import Store, StoreError
from tests.store_factory import traj

TASKS = ("carbon", "m_giant", "s_type")


def _fill(store: Store) -> None:
    """Objects sim-0-0004 and sim-0-0005, each a candidate of three tasks (one spectrum),
    and sim-0-0006 of one; the agent said NO to each."""
    refs = []
    for n in (4, 5):
        key = f"sim-0-000{n}"
        refs += [CandidateRef(id=key, task=t, path=f"/data/{key}.fits",
                              extra=(("object_id", key), ("survey", "simulated")))
                 for t in TASKS]  # fmt: skip
    refs.append(CandidateRef(id="sim-0-0006", task="cv", path="/data/sim-0-0006.fits",
                             extra=(("object_id", "sim-0-0006"), ("survey", "simulated"))))  # fmt: skip
    store.add_candidates(refs)
    for r in refs:
        store.record_trajectory(traj(r.id, 0.2, task=r.task))
    store.create_expert("alice")


@pytest.fixture
def store(mem_store):
    _fill(mem_store)
    return mem_store


def _labels(store: Store) -> dict[tuple[str, str], str | None]:
    out = {}
    for r in store.reviews():
        c = store.candidate(r.candidate_id)
        out[(c.key, c.task)] = r.label
    return out


def test_an_id_of_several_tasks_is_refused_unless_the_task_is_given(store, tmp_path):
    f = tmp_path / "ids.csv"
    f.write_text("id,label,comment\nsim-0-0004,NO,meant for s_type\nsim-0-0006,YES,\n")
    rep = import_labels(store, f, "alice")
    assert (rep.recorded, len(rep.errors)) == (1, 1) and "1 refused" in str(rep)
    ((line, why),) = rep.errors
    assert line == 2 and "'sim-0-0004'" in why and "\n" not in why
    assert all(f"sim-0-0004 ({t})" in why for t in TASKS) and "--task" in why
    assert _labels(store) == {("sim-0-0006", "cv"): "YES"}  # nothing put on m_giant
    rep = import_labels(store, f, "alice", task="s_type")
    assert rep.recorded == 1 and _labels(store)[("sim-0-0004", "s_type")] == "NO"
    assert ("sim-0-0004", "m_giant") not in _labels(store)
    # sim-0-0006 has no s_type candidate: --task names the task, it does not guess another
    assert [why for _, why in rep.errors] == ["no candidate with id 'sim-0-0006' for task 's_type'"]


def test_a_number_that_is_no_id_is_not_taken_for_an_internal_one(store, tmp_path):
    f = tmp_path / "n.csv"
    f.write_text("id,task,label\n1,carbon,YES\n")
    rep = import_labels(store, f, "alice")
    assert rep.recorded == 0 and "no candidate with id '1'" in rep.errors[0][1]


def _prospect(rows: list[tuple[int, str]]) -> str:
    """Prospect's 16 VI fields and a verdict, nothing of Loupe's."""
    head = ",".join(vi.PROSPECT_FIELDS) + ",verdict"
    lines = [f"{tid},-1,-1,-1,-1,-1,-1,STAR,0.0,-1,alice,3,,,STAR,,{v}" for tid, v in rows]
    return "\n".join([head, *lines]) + "\n"


def test_a_targetid_of_several_candidates_is_refused_unless_the_task_is_given(store, tmp_path):
    tid4, tid5 = (target_id("simulated", f"sim-0-000{n}") for n in (4, 5))
    f = tmp_path / "prospect.csv"
    f.write_text(_prospect([(tid4, "NO"), (tid5, "YES"), (tid4, "YES"), (tid5, "NO")]))
    rep = import_labels(store, f, None)
    assert rep.recorded == 0 and [ln for ln, _ in rep.errors] == [2, 3, 4, 5]
    assert all(f"TARGETID {tid4}" in why or f"TARGETID {tid5}" in why for _, why in rep.errors)
    assert "sim-0-0004 (m_giant)" in rep.errors[0][1] and _labels(store) == {}
    rep = import_labels(store, f, None, task="s_type")
    assert rep.recorded == 2 and rep.superseded == [(2, 4), (3, 5)]
    assert _labels(store) == {("sim-0-0004", "s_type"): "YES", ("sim-0-0005", "s_type"): "NO"}


def test_a_marz_file_naming_an_id_of_several_tasks_is_refused(store, tmp_path):
    f = tmp_path / "marz.mz"
    head = ",".join(vi.MARZ_FIELDS) + ",verdict"
    f.write_text(f"# Marz results\n#{head}\n1,sim-0-0005,,,,STAR,,,0,,,,0.0,4,fine,YES\n")
    rep = import_labels(store, f, "alice")
    assert rep.recorded == 0 and "'sim-0-0005'" in rep.errors[0][1] and _labels(store) == {}
    assert import_labels(store, f, "alice", task="carbon").recorded == 1
    assert _labels(store) == {("sim-0-0005", "carbon"): "YES"}


@pytest.mark.parametrize("layout", vi.LAYOUTS)
def test_loupes_own_files_find_the_one_candidate_of_each_row(tmp_path, layout):
    """Decisions on every task of one object, exported in each layout and imported into a
    fresh store with the same candidates: each lands on its own task's candidate."""
    src, dst = Store("sqlite://"), Store("sqlite://")
    try:
        _fill(src)
        _fill(dst)
        want = {("sim-0-0004", "carbon"): "YES", ("sim-0-0004", "m_giant"): "NO",
                ("sim-0-0004", "s_type"): "YES", ("sim-0-0005", "m_giant"): "YES"}  # fmt: skip
        from annotate.review import decide

        for (key, task), label in want.items():
            cid = src.find_candidate(key, task).id
            decide(src, "alice", cid, "accept" if label == "NO" else "reject")
        out = tmp_path / f"vi-{layout}.csv"
        assert vi.write_vi(src, out, layout=layout) == 4
        rep = import_labels(dst, out, None)
        assert (rep.recorded, rep.errors) == (4, [])
        assert _labels(dst) == want
    finally:
        src.close()
        dst.close()


def test_dry_run_says_what_each_row_would_change_and_writes_nothing(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    s = Store(url)
    _fill(s)
    from annotate.review import decide

    decide(s, "alice", s.find_candidate("sim-0-0006", "cv").id, "accept")
    s.close()
    f = tmp_path / "l.csv"
    f.write_text("id,task,label\nsim-0-0004,carbon,YES\nsim-0-0006,cv,YES\nsim-0-0005,,NO\n"
                 "sim-0-0005,m_giant,NO\n")  # fmt: skip
    argv = ["import-labels", str(f), "--expert", "bob", "--create-expert", "--dry-run",
            "--db", url]  # fmt: skip
    rc = launch.main(argv)
    out = capsys.readouterr()
    assert rc == 1  # the row naming three candidates is refused, as it would be
    assert "line 2: sim-0-0004 (carbon) as bob: would record reject -> YES" in out.out
    assert "line 3: sim-0-0006 (cv) as bob: would record reject -> YES" in out.out
    assert "line 5: sim-0-0005 (m_giant) as bob: would record accept -> NO" in out.out
    assert "line 4:" in out.err and "3 candidates" in out.err
    assert "3 would record, 0 unchanged, 1 refused" in out.out and "nothing written" in out.out
    s = Store(url)
    assert s.expert("bob") is None and [r.action for r in s.reviews()] == ["accept"]
    s.close()
    # as alice: her stored accept of sim-0-0006 would be replaced; the same row is unchanged
    f.write_text("id,task,label\nsim-0-0006,cv,YES\n")
    rc = launch.main(["import-labels", str(f), "--expert", "alice", "--dry-run", "--db", url])
    out = capsys.readouterr().out
    assert rc == 0 and "would replace accept -> NO by reject -> YES" in out
    f.write_text("id,task,label\nsim-0-0006,cv,NO\n")
    launch.main(["import-labels", str(f), "--expert", "alice", "--dry-run", "--db", url])
    assert "unchanged (accept -> NO)" in capsys.readouterr().out


def test_a_prospect_file_without_a_verdict_is_refused_once(store, tmp_path, capsys):
    f = tmp_path / "prospect.csv"
    rows = "\n".join(f"{target_id('simulated', 'sim-0-0006')},-1,-1,-1,-1,-1,-1,STAR,0.0,-1,"
                     f"alice,3,,,STAR,row {i}" for i in range(5))  # fmt: skip
    f.write_text(",".join(vi.PROSPECT_FIELDS) + "\n" + rows + "\n")
    with pytest.raises(StoreError, match="no 'label' column, nor a 'verdict'") as err:
        import_labels(store, f, None)
    assert "\n" not in str(err.value) and _labels(store) == {}


def test_an_expert_name_with_a_typo_gets_the_nearest(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    s = Store(url)
    _fill(s)
    s.close()
    f = tmp_path / "l.csv"
    f.write_text("id,task,label\nsim-0-0006,cv,YES\n")
    rc = launch.main(["import-labels", str(f), "--expert", "alcie", "--db", url])
    err = capsys.readouterr().err
    assert rc == 2 and "no expert 'alcie'; did you mean 'alice'?" in err and err.count("\n") == 1
    f.write_text("id,task,label,expert\nsim-0-0006,cv,YES,Alice\n")
    rc = launch.main(["import-labels", str(f), "--db", url])
    err = capsys.readouterr().err
    assert rc == 2 and "'Alice' (1 row; did you mean 'alice'?)" in err
