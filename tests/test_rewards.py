"""The Spec-o3 reward: accuracy - 0.2 x format error, on strings and multi-turn rollouts."""

from __future__ import annotations

import json

import pytest

from training.rewards import (
    accuracy_reward,
    completion_text,
    format_error,
    format_penalty,
    speco3_reward,
)

CALL = json.dumps(
    {"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [4800, 4920]}}
)


def rollout(first: str, last: str) -> list[dict]:
    """A TRL multi-turn completion: tool-calling turn, tool reply, final turn."""
    return [
        {
            "role": "assistant",
            "content": first,
            "tool_calls": [
                {
                    "type": "function",
                    "function": {
                        "name": "spectral_visualization_tool",
                        "arguments": {"wavelength_range": [4800, 4920]},
                    },
                }
            ],
        },
        {
            "role": "tool",
            "name": "spectral_visualization_tool",
            "content": [{"type": "text", "text": "ok"}],
        },
        {"role": "assistant", "content": last},
    ]


@pytest.mark.parametrize(
    ("completion", "truth", "expected"),
    [
        ("<think>broad Balmer</think><answer>\\boxed{YES} a DA white dwarf</answer>", "YES", 1.0),
        ("<answer>\\boxed{YES} a DA white dwarf</answer>", "YES", 0.8),  # no <think>
        ("<think>narrow lines</think><answer>\\boxed{NO} an A star</answer>", "YES", 0.0),
        ("\\boxed{NO}", "YES", -0.2),  # wrong and no <answer>
        ("<think>a</think><answer>\\boxed{YES}</answer><answer>\\boxed{YES}</answer>", "YES", 0.8),
        ("<think>a</think><answer>YES</answer>", "YES", -0.2),  # no box: no verdict, format error
    ],
)
def test_reward_values_on_single_turns(completion, truth, expected):
    assert speco3_reward([completion], ground_truth=[truth]) == [pytest.approx(expected)]


def test_multi_turn_rollouts():
    good = rollout(
        "<think>check H-beta</think>", "<think>broad</think><answer>\\boxed{YES} WD</answer>"
    )
    # the tool-calling turn has no <think>: a format error even though the answer is right
    sloppy = rollout("", "<think>broad</think><answer>\\boxed{YES} WD</answer>")
    # never answers: it called the tool and stopped
    unfinished = rollout("<think>check</think>", "<think>still looking</think>")[:2]
    truth = ["YES", "YES", "YES"]
    completions = [good, sloppy, unfinished]
    assert accuracy_reward(completions, ground_truth=truth) == [1.0, 1.0, 0.0]
    assert format_penalty(completions) == [0.0, -0.2, -0.2]
    assert speco3_reward(completions, ground_truth=truth) == [1.0, 0.8, -0.2]
    assert format_error(unfinished) == "the last turn does not answer"
    assert "turn 1" in format_error(sloppy)
    # the tool call is kept in the text the format is judged on
    assert "<tool_call>" in completion_text(good) and "wavelength_range" in completion_text(good)


def test_answer_before_the_last_turn_is_an_error():
    early = [
        {"role": "assistant", "content": "<think>a</think><answer>\\boxed{NO}</answer>"},
        {"role": "tool", "content": "x"},
        {"role": "assistant", "content": f"<think>b</think><tool_call>\n{CALL}\n</tool_call>"},
    ]
    assert format_error(early) is not None


def test_unknown_label_gives_no_reward_and_labels_are_case_insensitive():
    text = "<think>a</think><answer>\\boxed{no}</answer>"
    assert accuracy_reward([text, text], ground_truth=[None, "no"]) == [None, 1.0]


def test_garbage_never_raises():
    junk = ["", "<think>", "</answer><answer>", "\\boxed{", None, 42, [{"role": "assistant"}]]
    out = speco3_reward(junk, ground_truth=["YES"] * len(junk))
    assert len(out) == len(junk)
    assert all(v in (0.0, -0.2) for v in out)
