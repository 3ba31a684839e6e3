"""The team's campaign settings: changed from the command line and by admins on the Experts
tab, each value checked once, and read back by the queue, the audit and the schedule."""

from __future__ import annotations

import pytest

from annotate.audit.sample import audit_rate
from annotate.learning.schedule import learn_every
from annotate.queue import Queue
from annotate.team import settings as team_settings


def test_changes_reach_the_queue_the_audit_and_the_schedule(mem_store):
    for name, text in [("overlap", "2"), ("gold_rate", "0.1"), ("audit_rate", "0.2"),
                       ("learn_every", "0"), ("auto_accept", "0.97"),
                       ("lease_seconds", "900")]:  # fmt: skip
        team_settings.change(mem_store, name, text, "ada")
    cfg = Queue.from_settings(mem_store).config
    assert (cfg.overlap, cfg.gold_rate, cfg.audit_rate, cfg.auto_accept, cfg.lease_seconds) == (
        2, 0.1, 0.2, 0.97, 900.0)  # fmt: skip
    assert audit_rate(mem_store) == 0.2 and learn_every(mem_store) == 0
    team_settings.change(mem_store, "auto_accept", "none", "ada")
    assert Queue.from_settings(mem_store).config.auto_accept is None
    changed = [e for e in mem_store.audit_events(entity="setting") if e.actor == "ada"]
    assert len(changed) == 7


@pytest.mark.parametrize(
    "name,text,says",
    [("overlap", "0", "at least 1"), ("overlap", "1.5", "whole number"),
     ("gold_rate", "nan", "a number"), ("audit_rate", "-0.1", "between 0.0001 and 1"),
     ("learn_every", "inf", "a number"), ("lease_seconds", "5", "between 60"),
     ("auto_accept", "0.4", "above 0.5"), ("colour", "red", "no team setting"),
     # out of their documented bounds: each broke every expert's next item
     ("overlap", "1e19", "overlap = '1e19' refused: it takes a whole number, at least 1 and "
      "at most 20"), ("overlap", "21", "at most 20"),
     ("gold_rate", "1e-320", r"gold_rate = '1e-320' refused: it takes 0 \(none\), or a "
      r"share between 0.0001 and 1"),
     ("audit_rate", "5e-324", "audit_rate = '5e-324' refused"),
     ("audit_rate", "0.00009", "between 0.0001 and 1"),
     ("learn_every", "1e7", "at most 1,000,000"), ("lease_seconds", "1e300", "a week")],
)  # fmt: skip
def test_a_bad_value_is_refused_with_its_reason_and_changes_nothing(mem_store, name, text, says):
    before = team_settings.current(mem_store)
    with pytest.raises(ValueError, match=says):
        team_settings.change(mem_store, name, text, "ada")
    assert team_settings.current(mem_store) == before


def test_settings_command_shows_and_changes_all_or_nothing(tmp_path, capsys):
    import launch
    from db.store import Store

    db = tmp_path / "loupe.db"
    Store(str(db)).close()
    assert launch.main(["settings", "--db", str(db), "audit_rate=0.1", "learn_every=250"]) == 0
    out = capsys.readouterr().out
    assert "audit_rate" in out and "0.1" in out and "250" in out
    # one refused value: nothing of the others is stored either, and one line says why
    assert launch.main(["settings", "--db", str(db), "overlap=3", "gold_rate=2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "gold_rate = '2' refused" in err
    store = Store(str(db))
    assert team_settings.current(store)["overlap"] == 1
    assert team_settings.current(store)["audit_rate"] == 0.1
    store.close()


def test_the_queue_reads_each_team_setting_at_the_default_the_team_is_shown(mem_store):
    from annotate.queue import TEAM_QUEUE_SETTINGS

    assert set(TEAM_QUEUE_SETTINGS) <= set(team_settings.SETTINGS)
    cfg = Queue.from_settings(mem_store).config
    for name in TEAM_QUEUE_SETTINGS:
        assert getattr(cfg, name) == team_settings.SETTINGS[name].default, name


def test_a_stored_value_out_of_bounds_is_not_served_under(mem_store, caplog):
    """A value an older version stored (or one written to the store directly) outside its
    bounds: the queue runs on the default instead, says so, and serves the next item."""
    from db.store import QueueConfig

    for name, value in (("overlap", 1e19), ("gold_rate", 1e-320), ("audit_rate", 5e-324),
                        ("lease_seconds", float("inf"))):  # fmt: skip
        mem_store.set_setting(name, value, actor="old-version")
    with caplog.at_level("WARNING"):
        q = Queue.from_settings(mem_store)
    cfg = q.config
    assert (cfg.overlap, cfg.gold_rate, cfg.audit_rate) == (
        QueueConfig.overlap,
        QueueConfig.gold_rate,
        team_settings.SETTINGS["audit_rate"].default,
    )
    assert "overlap" in caplog.text and "at most 20" in caplog.text
    from annotate.team.experts import create_expert
    from tests.store_factory import seeded

    seeded(mem_store, [0.5, 0.6, 0.4])
    create_expert(mem_store, "ada", "expert")
    for _ in range(3):
        assert q.next("ada") is not None
    team_settings.change(mem_store, "gold_rate", "0.0001", "ada")  # the bounds themselves
    team_settings.change(mem_store, "overlap", "20", "ada")
    team_settings.change(mem_store, "learn_every", "1000000", "ada")
    assert Queue.from_settings(mem_store).config.overlap == 20
