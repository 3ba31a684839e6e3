"""The store: schema by migration, idempotent candidates, trajectory round trips, audit,
experts and sessions, authored trajectories, export bookkeeping."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from agent.refs import CandidateRef
from agent.trajectory import Trajectory
from annotate.review import decide
from db import models as m
from db.store import Filters, NotFound, Store, StoreError, StorePermissionError
from tests.store_factory import refs, seeded, traj, write_text_spectrum


def head() -> str:
    """The newest migration's revision: what a store opened now is migrated to."""
    from alembic.script import ScriptDirectory

    from db.store import MIGRATIONS

    return ScriptDirectory(str(MIGRATIONS)).get_current_head()


def test_file_store_is_migrated_wal_with_foreign_keys(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    store = Store(url)
    with store.engine.connect() as c:
        assert c.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert c.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert c.exec_driver_sql("PRAGMA busy_timeout").scalar() > 0
        assert c.execute(text("SELECT version_num FROM alembic_version")).scalar() == head()
        tables = {
            r[0] for r in c.exec_driver_sql("SELECT name FROM sqlite_master WHERE type='table'")
        }
    assert {
        "candidate",
        "review",
        "review_revision",
        "audit_event",
        "lease",
        "export_batch",
        "authored_trajectory",
        "agent_run",
        "trajectory",
        "expert",
        "spectrum",
        "task",
    } <= tables
    store.close()
    Store(str(tmp_path / "x.db")).close()  # a plain path works and re-opening is a no-op


def test_foreign_keys_are_enforced(mem_store):
    with pytest.raises(DBAPIError), mem_store.engine.begin() as c:
        c.execute(
            text(
                "INSERT INTO review (candidate_id, expert_id, action, source, revision,"
                " created, updated) VALUES (999, 999, 'accept', 'app', 1, '2020', '2020')"
            )
        )


def test_add_candidates_is_idempotent_and_refuses_bad_rows(mem_store):
    good = refs(5)
    bad = [
        CandidateRef(id="", task="cv", path="/d/x.fits"),
        CandidateRef(id="b", task="cv", path="/d/b.fits", label="maybe"),
        CandidateRef(id="s", task="cv", path="/d/s.fits", extra=(("split", "dev"),)),
    ]
    rep = mem_store.add_candidates(good[:3] + bad + good[3:])
    assert (rep.added, rep.existing) == (5, 0)
    assert [(i, why.split(" ")[0]) for i, _, why in rep.errors] == [
        (3, "empty"),
        (4, "label"),
        (5, "split"),
    ]
    rep2 = mem_store.add_candidates(good)
    assert (rep2.added, rep2.existing, rep2.errors) == (0, 5, [])
    assert mem_store.count_candidates() == 5
    # the same spectrum for a second task is a second candidate sharing one spectrum row
    mem_store.add_candidates(refs(2, task="wd"))
    assert mem_store.count_candidates() == 7
    a, b = mem_store.find_candidate("c0", "cv"), mem_store.find_candidate("c0", "wd")
    assert a.spectrum_id == b.spectrum_id and a.id != b.id
    assert mem_store.tasks() == ["cv", "wd"]


def test_candidate_metadata_and_filters(mem_store):
    rs = [
        CandidateRef(
            id=f"m{i}",
            task="cv",
            path=f"/d/m{i}.fits",
            hdu=1,
            row=i,
            label="YES" if i % 2 else None,
            extra=(("score", "0.7"), ("split", "test" if i else "train")),
        )
        for i in range(4)
    ]
    mem_store.add_candidates(
        rs,
        meta={0: {"survey": "LAMOST", "ra": 10.5, "snr": 12}},
        source_catalog="cat A",
        hashes={"/d/m0.fits": "sha256:ab"},
    )
    c = mem_store.find_candidate("m0", "cv")
    assert c.spectrum_ref == {"path": "/d/m0.fits", "hdu": 1, "row": 0}
    assert (c.survey, c.split, c.score, c.source_catalog) == ("LAMOST", "train", 0.7, "cat A")
    assert mem_store.find_candidate("m1").known_label == "YES"
    assert mem_store.count_candidates(Filters(survey="LAMOST")) == 1
    assert mem_store.surveys() == ["LAMOST"]  # candidates without a survey name none
    assert mem_store.object_splits()[c.object_id] == {"train"}
    labelled = [mem_store.candidate(i).key for i in mem_store.reference_labelled_ids()]
    assert labelled == ["m1", "m3"]  # catalogue labels, nothing resolved yet
    assert mem_store.count_candidates(Filters(split="test")) == 3
    assert mem_store.count_candidates(Filters(task="nope")) == 0
    assert mem_store.find_candidate(str(c.id)).key == "m0"  # jump to the internal id too


def test_trajectory_round_trip_and_upsert(mem_store):
    mem_store.add_candidates(refs(2))
    t = traj("c0", 0.8)
    t.params = {"temperature": 0.0, "max_turns": 8}
    run = mem_store.start_run("rules", None, "fast", t.params)
    tid = mem_store.record_trajectory(t, run)
    back = mem_store.trajectory(tid)
    assert isinstance(back, Trajectory)
    assert back.steps == t.steps and back.steps[0].window == (6500.0, 6600.0)
    assert (back.verdict, back.confidence, back.policy, back.params) == (
        "YES",
        0.8,
        "rules",
        t.params,
    )
    assert back.spectrum_ref == {"path": "/data/c0.fits", "hdu": None, "row": None}
    # re-recording for the same run replaces, a second run adds
    t.confidence, t.verdict = 0.3, "NO"
    assert mem_store.record_trajectory(t, run) == tid
    assert mem_store.trajectory(tid).verdict == "NO"
    other = traj("c0", 0.9, policy="hf", model="ckpt")
    mem_store.record_trajectory(other)
    info = mem_store.find_candidate("c0")
    assert len(mem_store.trajectories(info.id)) == 2
    assert info.verdict == "YES" and info.disagreement  # the two policies disagree
    assert len(mem_store.runs()) == 2
    # in bulk, the same records as one at a time; an unknown id is left out
    ids = [i for i, _ in mem_store.trajectories(info.id)]
    bulk = mem_store.trajectory_records([*ids, 10_000])
    assert bulk == {i: mem_store.trajectory(i) for i in ids}


def test_trajectory_for_unknown_candidate_creates_it(mem_store):
    mem_store.record_trajectory(traj("new1", 0.4, task="wd"))
    c = mem_store.find_candidate("new1", "wd")
    assert c is not None and c.verdict == "NO" and c.spectrum_ref["path"] == "/data/new1.fits"


def test_bad_trajectory_is_refused_and_nothing_written(mem_store):
    mem_store.add_candidates(refs(1))
    t = traj("c0", 1.7)
    with pytest.raises(StoreError, match="c0: confidence"):
        mem_store.record_trajectory(t)
    bad_batch = [traj("c0", 0.6), traj("c0", 0.6, verdict="MAYBE")]
    with pytest.raises(StoreError, match="verdict"):
        mem_store.record_trajectories(bad_batch)
    assert mem_store.trajectories(mem_store.find_candidate("c0").id) == []


def test_done_keys_count_errors_and_filter_by_policy(mem_store):
    mem_store.add_candidates(refs(3))
    mem_store.record_trajectory(traj("c0", 0.7))
    mem_store.record_trajectory(traj("c1", None, state="error", verdict=None))
    mem_store.record_trajectory(traj("c2", 0.2, policy="hf", model="m"))
    mem_store.record_trajectory(traj("c1", None, state="running", verdict=None, policy="x"))
    assert mem_store.done_keys("rules") == {("c0", "cv"), ("c1", "cv")}
    assert mem_store.done_keys("hf", "m") == {("c2", "cv")}
    assert mem_store.done_keys("x") == set()  # a running record is not done
    # a failed run is not put before the items a human can judge
    assert mem_store.find_candidate("c1").priority > mem_store.find_candidate("c0").priority
    mem_store.record_trajectory(traj("c0", None, state="error", verdict=None, policy="x"))
    assert mem_store.find_candidate("c0").verdict == "YES"  # the finished run stays shown


def test_every_write_is_audited_and_the_log_is_append_only(mem_store):
    mem_store.create_expert("ada")
    [cid] = seeded(mem_store, [0.6])
    n0 = len(mem_store.audit_events())
    decide(mem_store, "ada", cid, "accept")
    ev = mem_store.audit_events()[n0:]
    assert [(e.actor, e.action, e.entity) for e in ev] == [("ada", "review", "review")]
    with pytest.raises(DBAPIError, match="append-only"), mem_store.engine.begin() as c:
        c.execute(text("UPDATE audit_event SET actor = 'mallory'"))
    with pytest.raises(DBAPIError, match="append-only"), mem_store.engine.begin() as c:
        c.execute(text("DELETE FROM audit_event"))
    assert len(mem_store.audit_events()) == n0 + 1


def test_experts_passwords_and_sessions(mem_store):
    mem_store.create_expert("ada", "expert")  # an expert: the last admin is never deactivated
    with pytest.raises(StoreError, match="already exists"):
        mem_store.create_expert("ada")
    with pytest.raises(StoreError, match="role"):
        mem_store.create_expert("bob", "boss")
    mem_store.set_password("ada", "correct horse")
    assert mem_store.expert("ada").password_hash.startswith("$argon2id$")
    assert mem_store.verify_password("ada", "wrong") is None
    assert mem_store.verify_password("nobody", "x") is None
    assert mem_store.login("ada", "wrong") is None
    token = mem_store.login("ada", "correct horse")
    assert mem_store.session_expert(token) == "ada"
    assert mem_store.session_expert("forged") is None
    # the token itself is not stored, only its hash
    with mem_store.engine.connect() as c:
        stored = [r[0] for r in c.execute(text("SELECT token_hash FROM expert_session"))]
    assert token not in stored and len(stored) == 1
    mem_store.logout(token)
    assert mem_store.session_expert(token) is None
    short = mem_store.login("ada", "correct horse", ttl_seconds=-1)
    assert mem_store.session_expert(short) is None  # expired
    live = mem_store.login("ada", "correct horse")
    mem_store.set_password("ada", "new one")  # a password change ends open sessions
    assert mem_store.session_expert(live) is None
    live = mem_store.login("ada", "new one")
    mem_store.update_expert("ada", active=False)
    assert mem_store.session_expert(live) is None and mem_store.login("ada", "new one") is None
    assert [e.name for e in mem_store.list_experts()] == ["ada"]
    assert mem_store.ensure_expert("cy").role == "expert" and mem_store.ensure_expert("cy").id


def test_authored_trajectory_lifecycle(mem_store):
    mem_store.create_expert("ada")
    mem_store.create_expert("boss", "admin")
    [cid] = seeded(mem_store, [0.5])
    steps = traj("c0", 0.5).steps
    a = mem_store.create_authored("ada", cid, steps[:1])
    with pytest.raises(StoreError, match="verdict"):
        mem_store.submit_authored(a.id, "ada")
    mem_store.update_authored(a.id, "ada", steps=steps, verdict="YES", explanation="Halpha")
    with pytest.raises(StorePermissionError):
        mem_store.update_authored(a.id, "boss", verdict="NO")
    mem_store.submit_authored(a.id, "ada")
    with pytest.raises(StoreError, match="only drafts"):
        mem_store.update_authored(a.id, "ada", verdict="NO")
    with pytest.raises(StorePermissionError, match="own"):
        mem_store.review_authored(a.id, "ada", True)
    mem_store.create_expert("cy", "expert")  # a plain expert may audit a colleague's work
    mem_store.review_authored(a.id, "cy", False, "zoom on Hbeta too")
    assert mem_store.authored(a.id).status == "rejected"
    mem_store.update_authored(a.id, "ada", explanation="Halpha and Hbeta")
    mem_store.submit_authored(a.id, "ada")
    done = mem_store.review_authored(a.id, "boss", True, "good")
    assert (done.status, done.reviewer_comment) == ("approved", "good")
    assert [x.id for x in mem_store.list_authored(status="approved", author="ada")] == [a.id]
    assert mem_store.authored(a.id).steps[0]["window"] == [6500.0, 6600.0]


def test_export_bookkeeping(mem_store):
    b = mem_store.record_export(
        "sft",
        [("review", 1, "h1"), ("review", 2, "h2")],
        manifest={"count": 2},
        content_hash="sha256:x",
    )
    mem_store.record_export("sft", [("review", 1, "h1b")], manifest={"count": 1})
    assert mem_store.exported_items("sft", "review") == {1: {"h1", "h1b"}, 2: {"h2"}}
    assert mem_store.exported_items("rl", "review") == {}
    batches = mem_store.export_batches("sft")
    assert batches[0].id == b and batches[0].manifest == {"count": 2} and batches[0].code_version


def test_threshold_setting_reorders_priorities(mem_store):
    ids = seeded(mem_store, [0.5, 0.7])
    assert mem_store.candidate(ids[0]).priority < mem_store.candidate(ids[1]).priority
    mem_store.set_setting("threshold", 0.7)
    assert mem_store.setting("threshold") == 0.7
    assert mem_store.candidate(ids[1]).priority < mem_store.candidate(ids[0]).priority


def test_spectrum_is_read_from_its_file(mem_store, tmp_path):
    p = write_text_spectrum(tmp_path / "s.csv")
    mem_store.add_candidates([CandidateRef(id="s1", task="cv", path=str(p))])
    spec = mem_store.load_spectrum(mem_store.find_candidate("s1").id)
    assert spec.id == "s1" and spec.wavelength.size == 400
    with pytest.raises(NotFound):
        mem_store.candidate(12345)


def test_naive_utc_times():
    assert m.utcnow().tzinfo is None
    assert abs((m.utcnow() - dt.datetime.now(dt.UTC).replace(tzinfo=None)).total_seconds()) < 5


def test_add_expert_command(tmp_path, monkeypatch, capsys):
    import io

    import launch

    url = f"sqlite:///{tmp_path / 'e.db'}"
    Store(url).close()  # add-expert never makes a store
    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret pass\n"))
    assert (
        launch.main(["add-expert", "ada", "--role", "admin", "--password-stdin", "--db", url]) == 0
    )
    assert "created admin 'ada' with a password" in capsys.readouterr().out
    store = Store(url)
    assert store.login("ada", "s3cret pass") and store.expert("ada").role == "admin"
    store.close()
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    # A refusal is a usage-level failure: one line naming the problem, exit 2 (README).
    assert launch.main(["add-expert", "ada", "--password-stdin", "--db", url]) == 2
    assert capsys.readouterr().err == (
        "launch.py add-expert: --password-stdin: stdin held no password\n"
    )
    monkeypatch.setattr("sys.stdin", io.StringIO("other passphrase\n"))
    assert launch.main(["add-expert", "zoe", "--role", "admin", "--db", url]) == 0  # ada may go
    assert (
        launch.main(["add-expert", "ada", "--role", "expert", "--password-stdin", "--db", url]) == 0
    )
    store = Store(url)
    assert store.login("ada", "s3cret pass") is None and store.login("ada", "other passphrase")
    assert store.expert("ada").role == "expert"
    store.close()


def test_migration_downgrades_and_upgrades_again(tmp_path):
    from alembic import command
    from alembic.config import Config

    from db.store import MIGRATIONS

    store = Store(tmp_path / "m.db")
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with store.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "base")
    with store.engine.connect() as c:
        left = {
            r[0] for r in c.exec_driver_sql("SELECT name FROM sqlite_master WHERE type='table'")
        }
    assert left <= {"alembic_version"}
    store.migrate()
    store.create_expert("ada")  # the schema is whole again
    store.close()
