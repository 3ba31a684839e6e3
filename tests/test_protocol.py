"""One writer of the Spec-o3 assistant turn: everything that writes one reads back with
`parse_turn` to the steps it meant (thought, window, answer)."""

from __future__ import annotations

import json

import pytest

from agent import protocol
from agent.loop import run_batch
from agent.policies.openai import message_text
from agent.policies.rules import RulesPolicy
from agent.protocol import TOOL_NAME, format_turn, parse_turn
from agent.trajectory import Step, Trajectory
from training.rewards import completion_text
from training.sim import demo


def _meant(step: Step) -> tuple:
    window = None
    if step.tool_call is not None and step.answer is None:
        lo, hi = step.tool_call["arguments"]["wavelength_range"]
        window = (float(lo), float(hi))
    return (step.thought.strip(), window, step.answer, (step.explanation or "").strip() or None)


def _read(text: str) -> tuple:
    p = parse_turn(text)
    assert p.format_ok, (p.errors, text)
    return (p.thought, p.window, p.answer, p.explanation or None)


def test_format_turn_writes_the_published_layout_and_parses_back():
    zoom = format_turn("  Check H-beta. ", (4800, 4920), label="H-beta")
    assert zoom.startswith("<think>Check H-beta.</think>\n<tool_call>\n")
    assert zoom.endswith("\n</tool_call>")
    body = json.loads(zoom.split("<tool_call>\n", 1)[1].rsplit("\n</tool_call>", 1)[0])
    assert body == {
        "name": TOOL_NAME,
        "arguments": {"wavelength_range": [4800.0, 4920.0], "label": "H-beta"},
    }
    assert _read(zoom) == ("Check H-beta.", (4800.0, 4920.0), None, None)

    final = format_turn("Broad lines.", answer="NO", explanation="An A star.")
    assert final == "<think>Broad lines.</think><answer>\\boxed{NO} An A star.</answer>"
    assert _read(final) == ("Broad lines.", None, "NO", "An A star.")
    assert _read(format_turn("x", answer="YES")) == ("x", None, "YES", None)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},  # neither a call nor an answer
        {"window": (1.0, 2.0), "answer": "YES"},
        {"answer": "MAYBE"},
        {"answer": "YES", "explanation": "see <answer>"},
    ],
)
def test_format_turn_refuses_turns_that_would_not_read_back(kwargs):
    with pytest.raises(ValueError):
        format_turn("thought", **kwargs)
    with pytest.raises(ValueError, match="thought"):
        format_turn("a </think> b", (1.0, 2.0))


def test_rules_policy_turns_parse_back_to_their_steps():
    items = []
    for cls in ("wd_da", "a_star", "carbon", "m_giant", "cv", "s_star"):
        spec, _ = demo.simulate(cls, (3, 1), snr=25)
        items += [(spec, task) for task in demo.CLASS_BY_NAME[cls].tasks]
    trajs = run_batch(items, RulesPolicy())
    assert sum(len(t.steps) for t in trajs) > 2 * len(trajs)
    for t in trajs:
        assert t.format_ok and t.verdict in ("YES", "NO")
        for step in t.steps:
            assert _read(step.raw) == _meant(step)
            # the rules policy writes exactly what format_turn writes for that step
            w = _meant(step)[1]
            label = (step.tool_call or {}).get("arguments", {}).get("label")
            again = (
                format_turn(step.thought, w, label=label)
                if step.answer is None
                else format_turn(step.thought, answer=step.answer, explanation=step.explanation)
            )
            assert again == step.raw


def test_openai_split_message_is_rebuilt_into_the_same_turn():
    turn = format_turn("Check H-alpha.", (6500, 6620), label="H-alpha")
    args = {"wavelength_range": [6500.0, 6620.0], "label": "H-alpha"}
    split = {
        "content": "",
        "reasoning_content": "Check H-alpha.",
        "tool_calls": [{"function": {"name": TOOL_NAME, "arguments": json.dumps(args)}}],
    }
    assert message_text(split) == turn
    assert _read(message_text(split)) == _read(turn)
    # TRL's rollouts hand the same turn over as a message; the reward reads the same text
    trl = {"role": "assistant", "content": "", "reasoning_content": "Check H-alpha.",
           "tool_calls": [{"type": "function", "function": {"name": TOOL_NAME, "arguments": args}}]}  # fmt: skip
    assert completion_text([trl]) == turn


def test_authoring_writer_parses_back_to_its_steps():
    from annotate.authoring import assistant_text

    steps = [
        Step(
            thought="Check H-beta.",
            tool_call={"name": TOOL_NAME, "arguments": {"wavelength_range": [4800.0, 4920.0]}},
        ),
        Step(thought="Broad Balmer lines.", answer="YES", explanation="A DA white dwarf."),
        Step(thought="Nothing there.", answer="NO"),
    ]
    for step in steps:
        assert _read(assistant_text(step)) == _meant(step)


def test_to_messages_round_trips_the_steps_through_parse_turn():
    spec, _ = demo.simulate("wd_da", (2, 2), snr=30)
    traj = run_batch([(spec, "wd")], RulesPolicy())[0]
    msgs = traj.to_messages()
    assert msgs == protocol.to_messages(traj.task, traj.steps, "render:fast:global")
    texts = ["".join(protocol.message_texts(m)) for m in msgs if m["role"] == "assistant"]
    assert [_read(t) for t in texts] == [_meant(s) for s in traj.steps]
    again = Trajectory.from_messages(msgs, id=traj.id)
    assert again.task == "wd" and again.verdict == traj.verdict
    assert [(s.thought, s.window, s.answer) for s in again.steps] == [
        (s.thought, s.window, s.answer) for s in traj.steps
    ]


def test_protocol_doctests():
    import doctest

    assert doctest.testmod(protocol).failed == 0


# The published tool config (configs/spectral_visualization_tool_config.yaml), as written.
PUBLISHED_TOOL_CONFIG = {
    "type": "function",
    "function": {
        "name": "spectral_visualization_tool",
        "description": (
            "A tool for visualizing spectral data with wavelength range zooming capabilities."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "wavelength_range": {
                    "type": "array",
                    "items": {"type": "number"},
                    "description": (
                        "Wavelength range to focus on [min_wavelength, max_wavelength] in Angstroms"
                    ),
                },
                "label": {
                    "type": "string",
                    "description": "Optional label for the spectral feature being analyzed",
                },
            },
            "required": ["wavelength_range"],
        },
    },
}


def _as_verl_dumps_it(config: dict) -> dict:
    # verl's property model has the fields type, description, enum; the dump omits unset ones
    fn = config["function"]
    props = {
        name: {k: prop[k] for k in ("type", "description", "enum") if k in prop}
        for name, prop in fn["parameters"]["properties"].items()
    }
    params = {"type": "object", "properties": props, "required": fn["parameters"]["required"]}
    return {
        "type": config["type"],
        "function": {"name": fn["name"], "description": fn["description"], "parameters": params},
    }


def test_tool_schema_is_what_the_model_saw_in_rl():
    expected = _as_verl_dumps_it(PUBLISHED_TOOL_CONFIG)
    assert protocol.TOOL_SCHEMA == expected
    # same keys in the same order, so the `<tools>` line is the same text
    assert json.dumps(protocol.TOOL_SCHEMA) == json.dumps(expected)
    assert "items" not in json.dumps(protocol.TOOL_SCHEMA)
    block = protocol.tools_block()
    assert "\n<tools>\n" + json.dumps(expected, ensure_ascii=False) + "\n</tools>\n" in block
    assert protocol.system_prompt().endswith(block)


def test_chat_template_writes_the_protocols_tool_block():
    """A prompt without the `# Tools` block gets, from the template, the very block the
    protocol writes (the template derives its wording from `agent.protocol`)."""
    from transformers.utils.chat_template_utils import _compile_jinja_template

    from training.chat_template import SPECO3_CHAT_TEMPLATE

    template = _compile_jinja_template(SPECO3_CHAT_TEMPLATE)
    bare = [{"role": "user", "content": "Is this a CV?"}]
    text = template.render(messages=bare, tools=[protocol.TOOL_SCHEMA])
    system = "".join(protocol.message_texts(protocol.opening_messages("cv", "g", bare)[0]))
    assert system == protocol.DEFAULT_SYSTEM + "\n\n" + protocol.tools_block()
    assert text.startswith("<|im_start|>system\n" + system + "<|im_end|>\n")


def test_reply_text_follows_the_tool_image_without_a_newline():
    from transformers.utils.chat_template_utils import _compile_jinja_template

    from training.chat_template import SPECO3_CHAT_TEMPLATE

    template = _compile_jinja_template(SPECO3_CHAT_TEMPLATE)
    reply = "Generated spectral visualization focused on wavelength range (6500, 6620) Å."
    head = [protocol.system_message(), protocol.user_turn("cv", "g")]
    head.append(protocol.assistant_turn(format_turn("Zoom.", (6500, 6620))))
    ours = template.render(messages=[*head, protocol.tool_response_turn(reply, "z")])
    # verl's rollout: a `tool` message [image, text] inside the template's <tool_response>
    verl = [{"role": "tool", "content": [{"type": "image"}, {"type": "text", "text": reply}]}]
    theirs = template.render(messages=head + verl)
    assert ours == theirs
    assert ours.endswith(
        "<|im_start|>user\n<tool_response>\n<|vision_start|><|image_pad|><|vision_end|>"
        + reply
        + "\n</tool_response><|im_end|>\n"
    )
    # a refusal has no image: the text sits alone between the tags
    refusal = protocol.tool_response_turn("Error: out of range.", None)
    assert "".join(protocol.message_texts(refusal)) == (
        "<tool_response>\nError: out of range.\n</tool_response>"
    )
