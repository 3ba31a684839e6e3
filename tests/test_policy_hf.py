"""`hf` with a tiny random Qwen2.5-VL built locally: real processor, chat template,
batched generation, parsing; garbage output ends as recorded format errors; P(YES)."""

from __future__ import annotations

import numpy as np
import pytest

from agent.loop import run_batch
from agent.parse import verdict_char_index
from agent.spectrum import Spectrum, SpectrumMeta

torch = pytest.importorskip("torch")


def _spec(i: int) -> Spectrum:
    rng = np.random.default_rng(i)
    wave = np.linspace(3700.0, 9100.0, 3900)
    return Spectrum(wave, 1 + rng.normal(0, 0.05, wave.size), meta=SpectrumMeta(id=f"t{i}"))


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    from agent.policies import get_policy

    return get_policy(
        "hf",
        model=str(tiny_model_dir),
        renderer="fast",
        batch_size=4,
        max_new_tokens=24,
        temperature=0.0,
    )


def test_processor_loads_back(tiny_model_dir):
    from agent.policies.hf import load_processor

    proc = load_processor(tiny_model_dir)
    assert proc.image_processor is not None and proc.tokenizer.chat_template
    assert proc.tokenizer.convert_tokens_to_ids("<tool_call>") != proc.tokenizer.unk_token_id


def test_garbage_output_ends_as_recorded_format_errors(policy):
    items = [(_spec(i), task) for i, task in enumerate(["cv", "wd", "carbon"])]
    out = run_batch(items, policy, max_turns=3)
    assert [t.id for t in out] == ["t0", "t1", "t2"]
    for t in out:
        assert t.policy == "hf" and t.model == policy.model_id
        assert t.state in ("done", "max_turns") and 1 <= len(t.steps) <= 3
        assert not t.format_ok and t.verdict is None and t.confidence is None
        assert t.steps[0].raw  # the model really generated text
        assert t.steps[0].error  # ... which the parser recorded as a format error


def test_batched_generation_matches_single(policy):
    from agent.policies.base import Episode
    from agent.prompts import system_message, user_turn
    from agent.tool import global_view

    eps = []
    for i, task in enumerate(["cv", "m_giant"]):
        s = _spec(i)
        view = global_view(s, renderer="fast")
        eps.append(
            Episode(
                candidate_id=s.id,
                task=task,
                spectrum=s,
                messages=[system_message(), user_turn(task, view.image)],
                steps=[],
            )
        )
    both = policy.act(eps)
    one = policy.act(eps[1:])
    assert both[1].text == one[0].text  # left padding does not change greedy output


def test_p_yes_at_the_boxed_verdict(policy):
    """Teacher-force an answer and check P(YES) is read where YES was generated."""
    tok = policy.tokenizer
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "Is it a CV?"}], add_generation_prompt=True, tokenize=False
    )
    answer = "<think>Broad lines.</think><answer>\\boxed{YES} emission</answer>"
    p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    a_ids = tok(answer, add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        logits = policy.model(input_ids=torch.tensor([p_ids + a_ids])).logits[0]
    gen_logits = logits[len(p_ids) - 1 : -1]  # the distribution each answer token came from
    p = policy._p_yes(a_ids, answer, gen_logits)
    assert p is not None and 0.0 < p < 1.0
    # by hand: find the token that starts "YES" and normalise over YES/NO first tokens
    at = verdict_char_index(answer)
    k = next(i for i in range(len(a_ids)) if len(tok.decode(a_ids[: i + 1])) > at)
    assert tok.decode(a_ids[: k + 1]).endswith(("Y", "YE", "YES"))
    probs = torch.softmax(gen_logits[k], -1)
    prefix = answer[len(tok.decode(a_ids[:k])) : at]
    yes = {tok.encode(prefix + v, add_special_tokens=False)[0] for v in ("YES", "Yes", "yes")}
    no = {tok.encode(prefix + v, add_special_tokens=False)[0] for v in ("NO", "No", "no")} - yes
    py, pn = float(sum(probs[i] for i in yes)), float(sum(probs[i] for i in no))
    assert p == pytest.approx(py / (py + pn), rel=1e-5)
    # no verdict, no confidence
    assert policy._p_yes(a_ids, "<think>x</think>", gen_logits) is None
