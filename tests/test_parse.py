"""The raw-text parser: well-formed turns, every kind of format error, and never a crash."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.protocol import parse_turn

CALL = {"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [4800, 4920]}}
TOOL_TURN = f"<think>Zoom on H-beta.</think>\n<tool_call>\n{json.dumps(CALL)}\n</tool_call>"
ANSWER_TURN = "<think>Broad emission.</think><answer>\\boxed{YES} Balmer emission, He I.</answer>"


def test_tool_turn():
    p = parse_turn(TOOL_TURN)
    assert p.kind == "tool" and p.format_ok
    assert p.thought == "Zoom on H-beta."
    assert p.tool_call == CALL


def test_answer_turn():
    p = parse_turn(ANSWER_TURN)
    assert p.kind == "answer" and p.format_ok
    assert p.answer == "YES"
    assert p.explanation == "Balmer emission, He I."


def test_answer_no_lowercase_and_spaces():
    p = parse_turn("<think>x</think><answer> \\boxed{ no } not a WD</answer>")
    assert p.answer == "NO" and p.format_ok


def test_openai_style_string_arguments():
    call = {
        "name": "spectral_visualization_tool",
        "arguments": json.dumps({"wavelength_range": [1, 2]}),
    }
    p = parse_turn(f"<think>a</think><tool_call>{json.dumps(call)}</tool_call>")
    assert p.tool_call["arguments"] == {"wavelength_range": [1, 2]}


def test_format_errors_follow_speco3_rules():
    cases = {
        "<answer>\\boxed{YES}</answer>": "missing <think>",
        "<think>a<think>b</think><answer>\\boxed{YES}</answer>": "unbalanced <think>",
        "<think>a</think><answer>\\boxed{YES}</answer><answer>\\boxed{NO}</answer>": "exactly one",
        "<think>a</think><answer>YES it is</answer>": "no \\boxed{} inside",
        "<think>a</think><answer>\\boxed{MAYBE}</answer>": "is not YES or NO",
        "<think>a</think>I think it is a CV.": "neither a tool call nor an <answer>",
        "<think>a</think><tool_call>{not json}</tool_call>": "not valid JSON",
        "<think>a</think><tool_call>[1, 2]</tool_call>": "not a JSON object",
        '<think>a</think><tool_call>{"arguments": {}}</tool_call>': "no function name",
        "<think>a</think><tool_call>{": "unclosed <tool_call>",
        "": "empty output",
    }
    for text, reason in cases.items():
        p = parse_turn(text)
        assert not p.format_ok, text
        assert any(reason in e for e in p.errors), (text, p.errors)


def test_verdict_boxed_outside_answer_is_kept_but_flagged():
    p = parse_turn("<think>a</think>Final: \\boxed{NO}")
    assert p.kind == "answer" and p.answer == "NO" and not p.format_ok


def test_answer_missing_boxed_has_no_verdict():
    p = parse_turn("<think>a</think><answer>YES</answer>")
    assert p.kind == "answer" and p.answer is None


def test_two_tool_calls_runs_first_and_flags():
    p = parse_turn(TOOL_TURN + "\n<tool_call>" + json.dumps(CALL) + "</tool_call>")
    assert p.kind == "tool" and p.tool_call == CALL
    assert any("2 tool calls" in e for e in p.errors)


def test_a_verdict_beside_a_tool_call_runs_the_tool():
    # verl ends an episode only on a turn without a readable tool call, so the published
    # model's boxed mention next to a call was followed by the tool's reply.
    p = parse_turn(TOOL_TURN + ANSWER_TURN)
    assert p.kind == "tool" and p.tool_call == CALL and p.answer is None
    assert not p.format_ok and "<answer> in a turn that calls the tool" in p.error
    mention = TOOL_TURN.replace("Zoom on H-beta.", "If broad, \\boxed{YES}; zoom on H-beta.")
    p = parse_turn(mention)
    assert p.kind == "tool" and p.tool_call == CALL and p.answer is None
    assert not p.format_ok and "\\boxed{} verdict in a turn that calls the tool" in p.error


def test_an_unreadable_call_beside_an_answer_answers():
    p = parse_turn("<think>x</think>\n<tool_call>\n{oops}\n</tool_call>" + ANSWER_TURN)
    assert p.kind == "answer" and p.answer == "YES" and p.tool_call is None
    assert "could not be run" in p.error


def test_the_first_readable_call_runs():
    p = parse_turn(
        "<think>x</think><tool_call>{oops}</tool_call><tool_call>"
        + json.dumps(CALL)
        + "</tool_call>"
    )
    assert p.kind == "tool" and p.tool_call == CALL
    assert "not valid JSON" in p.error and "2 tool calls" in p.error


def test_non_string_and_control_characters():
    for junk in [None, 42, b"\xff\xfe", "\x00\ud800<think>", {"a": 1}]:
        p = parse_turn(junk)
        assert not p.format_ok
        json.dumps(p.raw)  # always serialisable


TAGS = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<answer>",
    "</answer>",
    "\\boxed{",
    "}",
    "{",
    '"name"',
    '"arguments"',
    "YES",
    "NO",
    ":",
    ",",
    "[",
    "]",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(TAGS), st.text(max_size=12)), max_size=30))
def test_random_text_never_crashes(parts):
    p = parse_turn("".join(parts))
    assert p.kind in ("tool", "answer", "invalid")
    assert p.format_ok == (not p.errors)
    if p.kind == "tool":
        assert isinstance(p.tool_call["name"], str)
        assert isinstance(p.tool_call["arguments"], dict)
    if p.answer is not None:
        assert p.answer in ("YES", "NO")


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_arbitrary_unicode_never_crashes(text):
    parse_turn(text)
