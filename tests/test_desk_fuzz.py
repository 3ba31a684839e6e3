"""In Chromium: random sequences of what experts do on the desk (typing, corrections, grades,
flags by key and mouse, the redshift and template, decisions by key, mouse and held key, undo,
reloads, two tabs of one expert and a second expert) leave the store and the browsers' kept
texts exactly as a reference model says (bench/desk_fuzz.py, bench/desk_model.py). Fixed
seeds run here; `python bench/desk_fuzz.py --seeds 200` runs many. A seed that ever failed
is kept in REGRESSIONS."""

from __future__ import annotations

import pytest

from bench import desk_fuzz
from bench.desk_model import Model, Tab

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SEEDS = [1, 2]
# Seeds that once found a mismatch, kept so that it stays fixed.
# 11, 27: keys pressed during a jump once acted before it; 109: a box's Enter and then its
# blur once refused the second write as stale by the first's own revision; 130: a redshift
# nudge, a grade and a flag in a row on a decided candidate, the flag once sent before the
# grade's answer had brought the revision it made
REGRESSIONS: list[int] = [11, 27, 109, 130]
STEPS = 24


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz-template")


@pytest.mark.parametrize("seed", SEEDS + REGRESSIONS)
def test_the_desk_loses_no_work(browser, served, tmp_path, seed):
    from app.main import serve

    ctx = desk_fuzz.fresh_store(tmp_path / "store", served)
    srv = serve(ctx)
    try:
        bad, log = desk_fuzz.run_seed(browser, srv.url, ctx, seed, STEPS)
        assert not bad, "\n".join(bad + ["steps:"] + log)
    finally:
        srv.close()
        ctx.store.close()


def test_the_model_follows_tabs_undo_and_identical_decisions():
    """The reference model itself: a write from a tab that does not hold the candidate, or
    after it changed, is refused; a decision saves the form and leaves no draft; undo takes
    back the tab's own last decision and puts its values back; the same decision again
    writes nothing."""
    m = Model({"A|wd": "YES", "B|wd": "NO"})
    one, two = Tab("one", "ada"), Tab("two", "ada")
    m.serve(one, "A|wd")
    m.serve(two, "B|wd")
    assert m.refusal(two, "A|wd") == "elsewhere" and m.refusal(one, "A|wd") is None
    m.set_mark(one, "A|wd", grade=3)
    m.typed("ada", "A|wd", "comment", "odd")
    m.decide(one, "A|wd", "accept")
    top = m.c("A|wd").of("ada").top()
    assert (top["action"], top["comment"], top["grade"]) == ("accept", "odd", 3)
    assert m.c("A|wd").of("ada").draft == {} and m.c("A|wd").of("ada").texts == {}
    assert m.refusal(one, "A|wd") == "changed"  # the page has not drawn it since
    m.answered(one, "A|wd")
    m.typed("ada", "B|wd", "reason", "tio")
    assert m.blocked("ada", "B|wd")
    m.decide(two, "B|wd", "reject")
    assert m.undo_target(one) == "A|wd" and m.undo_target(two) == "B|wd"
    m.undo(one, "A|wd")
    a = m.c("A|wd").of("ada")
    assert a.stack == [] and a.draft == {"grade": 3, "comment": "odd"}
    assert a.texts == {"comment": "odd"}
    rev = m.c("B|wd").rev
    m.serve(two, "B|wd")
    m.typed("ada", "B|wd", "reason", "tio")
    m.decide(two, "B|wd", "reject")  # the same again
    assert m.c("B|wd").rev == rev
