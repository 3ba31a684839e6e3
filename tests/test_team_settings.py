"""The team's campaign settings: changed from the command line and by admins on the Experts
tab, each value checked once, and read back by the queue, the audit and the schedule."""

from __future__ import annotations

import pytest

from annotate import team_settings
from annotate.audit_sample import audit_rate
from annotate.learning import learn_every
from annotate.queue import Queue


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
     ("gold_rate", "nan", "a number"), ("audit_rate", "-0.1", "between 0 and 1"),
     ("learn_every", "inf", "a number"), ("lease_seconds", "5", "between 60"),
     ("auto_accept", "0.4", "above 0.5"), ("colour", "red", "no team setting")],
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
