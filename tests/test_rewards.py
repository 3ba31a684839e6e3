"""GRPO rewards, the published scoring and Loupe's stricter one: accuracy - 0.2 x format
error, on strings and multi-turn rollouts."""

from __future__ import annotations

import json

import pytest

from agent.protocol import parse_turn
from training.rewards import (
    accuracy_reward,
    completion_text,
    format_error,
    format_penalty,
    loupe_reward,
    reward,
    reward_functions,
    speco3_accuracy,
    speco3_format_penalty,
    speco3_reward,
    speco3_score,
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
def test_loupe_reward_values_on_single_turns(completion, truth, expected):
    assert loupe_reward([completion], ground_truth=[truth]) == [pytest.approx(expected)]


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
    assert loupe_reward(completions, ground_truth=truth) == [1.0, 0.8, -0.2]
    # the published scoring counts <think> over the whole response: the sloppy rollout's
    # one pair balances, so only the unfinished one (no answer) is penalised
    assert speco3_format_penalty(completions) == [0.0, 0.0, -0.2]
    assert speco3_accuracy(completions, ground_truth=truth) == [1.0, 1.0, 0.0]
    assert speco3_reward(completions, ground_truth=truth) == [1.0, 1.0, -0.2]
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
    for scoring in ("speco3", "loupe"):
        out = reward(scoring)(junk, ground_truth=["YES"] * len(junk))
        assert len(out) == len(junk)
        assert all(v in (0.0, -0.2) for v in out), (scoring, out)


@pytest.mark.parametrize(
    ("completion", "truth", "expected"),
    [
        ("<think>broad Balmer</think><answer>\\boxed{YES} a DA white dwarf</answer>", "YES", 1.0),
        ("<answer>\\boxed{YES} a DA white dwarf</answer>", "YES", 0.8),  # no <think>
        ("<think>narrow lines</think><answer>\\boxed{NO} an A star</answer>", "YES", 0.0),
        ("\\boxed{NO}", "NO", 0.8),  # no tags at all, the box anywhere still counts
        ("<think>a</think><answer>YES, a WD</answer>", "YES", 0.8),  # bare word fallback
        ("<think>a</think><answer>not YES but NO</answer>", "NO", -0.2),  # YES is looked for first
        ("<think>a</think><answer>\\boxed{Maybe}</answer>", "YES", -0.2),  # kept as 'Maybe'
        ("<think>a</think><answer>\\boxed{ no }</answer>", "NO", 1.0),
        ("<think>a</think><answer>\\boxed{YES}</answer><answer>\\boxed{NO}</answer>", "NO", 0.8),
        ("<think>a</think><think>b</think>\n<answer>\\boxed{NO}</answer>", "NO", 1.0),
        ("<think>a<think>b</think><answer>\\boxed{NO}</answer>", "NO", 0.8),  # unbalanced
        ("nothing useful\nlast line", "YES", -0.2),
    ],
)
def test_published_scoring_values(completion, truth, expected):
    assert speco3_reward([completion], ground_truth=[truth]) == [pytest.approx(expected)]


def test_published_scoring_reads_tool_replies_like_verl():
    # verl scored the decoded response, tool replies included: a bare word in a reply counts
    # when the model gave no verdict of its own
    rollout_ = [
        {"role": "assistant", "content": "<think>zoom</think>" + f"<tool_call>{CALL}</tool_call>"},
        {"role": "tool", "content": [{"type": "image"}, {"type": "text", "text": "No data."}]},
        {"role": "assistant", "content": "<think>unsure</think>"},
    ]
    s = speco3_score(rollout_)
    assert s.format_error and s.answer == "NO"
    assert speco3_reward([rollout_], ground_truth=["NO"]) == [0.8]
    assert loupe_reward([rollout_], ground_truth=["NO"]) == [-0.2]


def test_the_two_scorings_differ_where_documented():
    # one text holding a call and an answer: the published scoring reads the answer; per
    # turn it is a turn that calls the tool (so it never answered) with an answer beside it
    text = f"<tool_call>{CALL}</tool_call><think>broad</think><answer>\\boxed{{YES}}</answer>"
    assert speco3_reward([text], ground_truth=["YES"]) == [1.0]
    assert loupe_reward([text], ground_truth=["YES"]) == [-0.2]


@pytest.mark.parametrize(
    "box", ["\\boxed{x{y} \\boxed{YES}", "\\boxed{\\text{YES}}", "\\boxed{{YES}}"]
)
def test_both_scorings_read_a_box_up_to_its_first_closing_brace(box):
    # one box pattern (agent.protocol.BOXED) for the parser and the published scoring: a
    # brace inside the first box spoils the verdict for both, a later box does not rescue it
    text = f"<think>a</think><answer>{box} broad lines</answer>"
    assert parse_turn(text).answer is None and "is not YES or NO" in parse_turn(text).error
    assert speco3_score(text).format_error and speco3_score(text).answer != "YES"
    assert loupe_reward([text], ground_truth=["YES"]) == [-0.2]
    assert speco3_reward([text], ground_truth=["YES"]) == [-0.2]


def test_scoring_by_name():
    assert [f.__name__ for f in reward_functions()] == ["speco3_accuracy", "speco3_format_penalty"]
    assert reward_functions("loupe") == [accuracy_reward, format_penalty]
    assert reward() is speco3_reward and reward("loupe") is loupe_reward
    with pytest.raises(ValueError, match="unknown reward scoring"):
        reward_functions("nope")
    # the pair sums to the one-function reward
    texts = ["<answer>\\boxed{NO}</answer>", "<think>a</think><answer>YES</answer>"]
    for scoring in ("speco3", "loupe"):
        acc, fmt = reward_functions(scoring)
        summed = [a + f for a, f in zip(acc(texts, ground_truth=["NO", "YES"]), fmt(texts))]
        assert summed == pytest.approx(reward(scoring)(texts, ground_truth=["NO", "YES"]))
