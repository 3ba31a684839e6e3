"""Trajectory <-> JSON and Trajectory <-> Spec-o3 messages round trips (property tests)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.protocol import TOOL_NAME, image_reference, parse_turn, system_prompt, task_prompt
from agent.tasks import TASKS
from agent.trajectory import Step, Trajectory, finish, record_observation, step_from_parsed

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
text = st.text(max_size=40)
verdicts = st.sampled_from(["YES", "NO", None])

steps = st.builds(
    Step,
    thought=text,
    tool_call=st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {"name": text, "arguments": st.dictionaries(text, st.one_of(text, finite), max_size=3)}
        ),
    ),
    window=st.one_of(st.none(), st.tuples(finite, finite)),
    observation_text=st.one_of(st.none(), text),
    observation_image=st.one_of(st.none(), text),
    answer=verdicts,
    explanation=st.one_of(st.none(), text),
    raw=text,
    error=st.one_of(st.none(), text),
    seconds=finite,
    measurements=st.dictionaries(text, finite, max_size=3),
)

trajectories = st.builds(
    Trajectory,
    id=text,
    task=st.sampled_from(sorted(TASKS)),
    spectrum_ref=st.fixed_dictionaries(
        {"path": text, "hdu": st.one_of(st.none(), st.integers(0, 5)), "row": st.none()}
    ),
    policy=text,
    model=st.one_of(st.none(), text),
    renderer=st.sampled_from(["fast", "speco3"]),
    steps=st.lists(steps, max_size=4),
    verdict=verdicts,
    explanation=text,
    confidence=st.one_of(st.none(), st.floats(0, 1)),
    format_ok=st.booleans(),
    state=st.sampled_from(["done", "max_turns", "error", "running"]),
    error=st.one_of(st.none(), text),
    label=verdicts,
    started_at=st.one_of(st.none(), finite),
    seconds=finite,
    params=st.dictionaries(text, st.one_of(text, st.integers(), finite), max_size=3),
)


@settings(max_examples=200, deadline=None)
@given(trajectories)
def test_json_round_trip_is_identity(traj):
    again = Trajectory.from_json(traj.to_json())
    assert again == traj
    assert again.to_json() == traj.to_json()


# -- messages: runs built the way the loop builds them ---------------------------------
def _call(lo: float, hi: float, name: str = TOOL_NAME) -> str:
    body = json.dumps({"name": name, "arguments": {"wavelength_range": [lo, hi]}})
    return f"<think>zoom {lo}</think>\n<tool_call>\n{body}\n</tool_call>"


turn_texts = st.one_of(
    st.builds(_call, finite, finite),
    st.builds(_call, finite, finite, text),
    st.sampled_from(
        [
            "<think>done</think><answer>\\boxed{YES} broad lines</answer>",
            "<think>no</think><answer>\\boxed{NO}</answer>",
            "<answer>\\boxed{YES}</answer>",
            "<think>a</think><answer>maybe</answer>",
            "garbage",
            "",
            "<think>a</think><tool_call>{bad</tool_call>",
        ]
    ),
    st.text(max_size=60),
)

observations = st.tuples(
    st.booleans(),  # tool error?
    st.text(max_size=40),
    st.tuples(st.floats(0, 1e4), st.floats(0, 1e4))
    .filter(lambda w: w[0] != w[1])
    .map(lambda w: (min(w), max(w))),
)


@st.composite
def chat_runs(draw):
    traj = Trajectory(
        id=draw(text),
        task=draw(st.sampled_from(sorted(TASKS))),
        renderer=draw(st.sampled_from(["fast", "speco3"])),
        params={"global_image": draw(st.text(min_size=1, max_size=20))},
    )
    for _ in range(draw(st.integers(0, 6))):
        step = step_from_parsed(parse_turn(draw(turn_texts)))
        if step.tool_call is not None:
            failed, reply, window = draw(observations)
            ref = None if failed else image_reference(traj.renderer, window)
            record_observation(step, reply, ref, None if failed else window, tool_error=failed)
        traj.steps.append(step)
        if step.tool_call is None:
            break
    finish(traj)
    return traj


@settings(max_examples=300, deadline=None)
@given(chat_runs())
def test_messages_round_trip_is_identity(traj):
    messages = traj.to_messages()
    again = Trajectory.from_messages(messages, id=traj.id, renderer=traj.renderer)
    assert again.to_dict() == traj.to_dict()
    assert again.to_messages() == messages


def test_messages_are_speco3_format():
    traj = Trajectory(id="x", task="carbon", params={"global_image": "G"})
    for t in [
        _call(5100, 5250),
        "<think>C2 bands.</think><answer>\\boxed{YES} Swan bands</answer>",
    ]:
        step = step_from_parsed(parse_turn(t))
        if step.tool_call:
            record_observation(step, "Generated plot.", "IMG", (5100.0, 5250.0), tool_error=False)
        traj.steps.append(step)
    finish(traj)
    assert traj.state == "done" and traj.verdict == "YES" and traj.format_ok
    m = traj.to_messages()
    assert [x["role"] for x in m] == ["system", "user", "assistant", "user", "assistant"]
    assert m[0]["content"][0]["text"] == system_prompt()
    assert "# Tools" in system_prompt() and TOOL_NAME in system_prompt()
    assert m[1]["content"] == [
        {"type": "image", "image": "G"},
        {"type": "text", "text": task_prompt("carbon")},
    ]
    assert "carbon star" in task_prompt("carbon")
    resp = m[3]["content"]
    assert resp[0]["text"].startswith("<tool_response>") and resp[1] == {
        "type": "image",
        "image": "IMG",
    }
    assert resp[2]["text"].endswith("</tool_response>")
    assert m[4]["content"][0]["text"].endswith("</answer>")


def test_from_messages_recovers_task_and_never_raises_on_junk():
    traj = Trajectory(id="x", task="wd", params={"global_image": "G"})
    assert Trajectory.from_messages(traj.to_messages()).task == "wd"
    for junk in [[], [{"role": "assistant"}], [1, "a", None], [{"role": "user", "content": 5}]]:
        t = Trajectory.from_messages(junk)
        assert t.verdict is None and not t.format_ok


def test_states_after_finish():
    t = Trajectory(id="a", task="cv")
    t.steps.append(step_from_parsed(parse_turn(_call(6500, 6620))))
    finish(t)
    assert t.state == "max_turns" and not t.format_ok and t.verdict is None
    t = Trajectory(id="a", task="cv")
    t.steps.append(step_from_parsed(parse_turn("I don't know")))
    finish(t)
    assert t.state == "done" and not t.format_ok and t.verdict is None


@pytest.mark.parametrize("reply", ["\n", "\nGenerated plot.", "Generated plot.\n", ""])
@pytest.mark.parametrize("failed", [False, True])
def test_a_tool_reply_keeps_its_own_newlines_through_messages(reply, failed):
    # Found by the property test above: a reply beginning with a newline lost it after an image.
    traj = Trajectory(id="x", task="wd", params={"global_image": "G"})
    step = step_from_parsed(parse_turn(_call(4800, 4900)))
    window = None if failed else (4800.0, 4900.0)
    ref = None if failed else image_reference(traj.renderer, window)
    record_observation(step, reply, ref, window, tool_error=failed)
    traj.steps.append(step)
    finish(traj)
    again = Trajectory.from_messages(traj.to_messages(), id="x", renderer=traj.renderer)
    assert again.steps[0].observation_text == traj.steps[0].observation_text
    assert again.to_dict() == traj.to_dict()
