"""The correction rule: what an expert's reject or correction becomes in SFT rows and
pairs, and the contradiction check every exported row passes."""

from __future__ import annotations

import pytest

from agent.protocol import parse_turn
from agent.trajectory import Step, Trajectory
from annotate.export import corrected_trajectory, rejected_side

CALL = {"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [4800, 4920]}}


def _agent() -> Trajectory:
    steps = [
        Step(
            thought="zoom a",
            tool_call=CALL,
            window=(4800.0, 4920.0),
            raw="A",
            observation_image="render:fast:4800.0:4920.0",
        ),
        Step(
            thought="zoom b",
            tool_call=CALL,
            window=(4800.0, 4920.0),
            raw="B",
            observation_image="render:fast:4800.0:4920.0",
        ),
        Step(thought="bad", raw="garbage", error="neither a tool call nor an <answer>"),
        Step(thought="yes", answer="YES", explanation="wd", raw="C"),
    ]
    return Trajectory(id="x", task="wd", steps=steps, verdict="YES", format_ok=False)


def test_correction_rule():
    t = _agent()
    c = corrected_trajectory(t, "NO", "Narrow lines.", wrong_step=2)
    assert c.steps[-1].answer == "NO" and c.verdict == "NO" and c.format_ok
    turn = parse_turn(c.steps[-1].raw)
    assert turn.format_ok and turn.answer == "NO" and turn.explanation == "Narrow lines."
    # NO overrules the agent's YES: the kept zooms' thoughts are neutral, index or not
    assert [s.thought for s in c.steps[:-1]] == ["I zoom into 4800-4920 Å."] * 2
    assert [s.thought for s in corrected_trajectory(t, "NO", "x").steps[:-1]] == [
        "I zoom into 4800-4920 Å."
    ] * 2
    # without an index: every tool-call step kept, the malformed one and the answer dropped
    assert len(corrected_trajectory(t, "NO", "x").steps) == 3
    assert len(corrected_trajectory(t, "NO", "x", wrong_step=0).steps) == 1
    assert t.steps[-1].answer == "YES"  # the agent's record is untouched
    # no reason: a neutral explanation from the task alone
    assert corrected_trajectory(t, "NO", "   ").explanation.startswith("On inspection")
    # the verdict kept, the reasoning corrected: the steps before the index stand verbatim
    assert [s.raw for s in corrected_trajectory(t, "YES", "x", wrong_step=2).steps[:-1]] == [
        "A",
        "B",
    ]
    # the pair's agent side reads the same rewritten steps, then its own turns
    rej = rejected_side(t, "NO", wrong_step=1)
    assert rej.steps[0].raw == c.steps[0].raw and [s.raw for s in rej.steps[1:]] == [
        "B",
        "garbage",
        "C",
    ]
    with pytest.raises(ValueError):
        corrected_trajectory(t, "NO", "x", wrong_step=9)


def _s_type_run() -> Trajectory:
    """An s_type run the inspector would write: evidence for an S star, then YES."""

    def zoom(thought, lo, hi, label):
        call = {
            "name": "spectral_visualization_tool",
            "arguments": {"wavelength_range": [lo, hi], "label": label},
        }
        return Step(thought=thought, tool_call=call, window=(float(lo), float(hi)))

    steps = [
        zoom("TiO strong: an M-type star. Next I zoom into the ZrO 6474 head.", 6400, 6550,
             "ZrO 6474 head"),
        zoom("ZrO 6474 band-head depth 0.21: ZrO stands +8.1 sigma above an M giant of the "
             "same TiO strength, as in an S star. Next I zoom into LaO 7403.", 7350, 7450,
             "LaO 7403 head"),
        zoom("LaO 7403 band-head depth 0.18: LaO, seen only in S stars.", 7000, 7200,
             "TiO 7054 head"),
        Step(thought="For an S-type star: ZrO, LaO.", answer="YES",
             explanation="Consistent with an S-type star (P(YES) = 0.93): ZrO above TiO."),
    ]  # fmt: skip
    return Trajectory(id="s1", task="s_type", steps=steps, verdict="YES", confidence=0.93)


def test_named_wrong_step_leaves_no_thought_for_the_overruled_verdict():
    """Corrected to NO at step 2: step 1 ('... as in an S star') is not kept word for word,
    in the SFT row nor in the pair's shared prompt."""
    t = _s_type_run()
    row = corrected_trajectory(t, "NO", "No ZrO band head at 6474.", wrong_step=2)
    text = " ".join(s.thought + " " + s.raw for s in row.steps)
    assert "S star" not in text and "sigma" not in text
    assert [s.window for s in row.steps[:-1]] == [t.steps[0].window, t.steps[1].window]
    rej = rejected_side(t, "NO", wrong_step=2)
    assert [s.raw for s in rej.steps[:2]] == [s.raw for s in row.steps[:2]]
    assert rej.steps[2].thought == t.steps[2].thought  # where they part: the agent's own turn


def test_contradiction_table_refuses_a_row():
    """A row whose text the contradiction table flags for its verdict is refused."""
    from annotate.export import contradictions

    t = _s_type_run()
    # an expert reason that hedges while the verdict is certain
    row = corrected_trajectory(t, "NO", "Cannot tell whether this is S; near even odds.")
    assert contradictions(row) == ["near even odds", "Cannot tell whether"]
    assert contradictions(corrected_trajectory(t, "NO", "No ZrO head at 6474.")) == []
    # a verbatim step the table flags for the kept verdict is rewritten, not kept
    t.steps[0].thought = "ZrO no stronger than TiO predicts."
    row = corrected_trajectory(t, "YES", "LaO and ZrO: an S star.", wrong_step=2)
    assert row.steps[0].thought.startswith("I zoom into") and contradictions(row) == []
    assert row.steps[1].thought == t.steps[1].thought
