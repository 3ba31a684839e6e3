"""`hf` with a tiny random Qwen2.5-VL built locally: real processor, chat template,
batched generation, parsing; garbage output ends as recorded format errors; P(YES)."""

from __future__ import annotations

import numpy as np
import pytest

from agent.confidence import verdict_char_index
from agent.loop import run_batch
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
    from agent.protocol import system_message, user_turn
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


# -- vllm: no vLLM here, so the engine is a stand-in; prompts and parsing are real ------
class _Logprob:
    def __init__(self, logprob, decoded_token):
        self.logprob, self.decoded_token, self.rank = logprob, decoded_token, 1


class _Completion:
    def __init__(self, text, tokens, top):
        self.text = text
        self.token_ids = list(range(len(tokens)))
        self.logprobs = [
            {
                i: _Logprob(top.get(i, {}).get(t, -0.01), t),
                **{
                    1000 + j: _Logprob(lp, alt)
                    for j, (alt, lp) in enumerate(top.get(i, {}).items())
                    if alt != t
                },
            }
            for i, t in enumerate(tokens)
        ]


class _Engine:
    def __init__(self, replies):
        self.replies, self.calls = replies, []

    def generate(self, prompts, params, use_tqdm=False):
        self.calls.append((prompts, params))
        outs = []
        for _ in prompts:
            text = self.replies.pop(0)
            toks = (
                [text[: text.index("YES")], "YES", text[text.index("YES") + 3 :]]
                if "YES" in text
                else [text]
            )
            top = {1: {"YES": -0.1, "NO": -2.4}} if "YES" in text else {}
            outs.append(type("Out", (), {"outputs": [_Completion(text, toks, top)]})())
        return outs


def test_vllm_missing_is_a_clear_error(tiny_model_dir):
    import importlib.util

    from agent.policies import get_policy

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    from agent.errors import LoupeError

    with pytest.raises(LoupeError, match="needs vLLM"):
        get_policy("vllm", model=str(tiny_model_dir))


def test_a_checkpoint_that_is_not_there_is_one_line(tmp_path, capsys, monkeypatch):
    import launch
    from training.sim.demo import generate_demo

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    generate_demo(tmp_path / "demo", n_per_class=1, labels=tmp_path / "labels.csv")
    argv = ["vet", "--catalog", str(tmp_path / "labels.csv"), "--policy", "hf", "--model",
            str(tmp_path / "no-such-checkpoint"), "--out", str(tmp_path / "o.jsonl"),
            "--limit", "1", "--no-progress"]  # fmt: skip
    assert launch.main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "no-such-checkpoint: cannot load this checkpoint" in err, err


def test_vllm_batches_prompts_with_images_and_reads_p_yes(tiny_model_dir):
    from agent.policies import get_policy

    zoom = (
        '<think>z</think><tool_call>{"name": "spectral_visualization_tool", '
        '"arguments": {"wavelength_range": [6500, 6620]}}</tool_call>'
    )
    answer = "<think>e</think><answer>\\boxed{YES} emission</answer>"
    engine = _Engine([zoom, answer, answer])
    params = []
    pol = get_policy(
        "vllm",
        model=str(tiny_model_dir),
        renderer="fast",
        engine=engine,
        sampling_params_cls=lambda **kw: params.append(kw) or kw,
    )
    out = run_batch([(_spec(0), "cv"), (_spec(1), "wd")], pol, max_turns=4)
    assert [t.verdict for t in out] == ["YES", "YES"]
    assert [len(t.steps) for t in out] == [2, 1]
    assert len(engine.calls) == 2 and len(engine.calls[0][0]) == 2  # one call per turn, batched
    for prompts, _ in engine.calls:
        for p in prompts:
            assert p["prompt"].count("<|image_pad|>") == len(p["multi_modal_data"]["image"])
            assert p["prompt"].rstrip().endswith("<|im_start|>assistant")
    assert len(engine.calls[1][0][0]["multi_modal_data"]["image"]) == 2  # global + zoom
    assert params[0]["logprobs"] == 5 and params[0]["temperature"] == 0.0
    expected = np.exp(-0.1) / (np.exp(-0.1) + np.exp(-2.4))
    assert out[0].confidence == pytest.approx(expected)


def test_checkpoint_renderer_comes_from_its_training_record(tmp_path):
    from agent.policies.hf import trained_renderer

    assert trained_renderer(str(tmp_path)) == "speco3"  # published weights: no record
    (tmp_path / "loupe_training.json").write_text('{"stage": "grpo", "renderer": "fast"}')
    assert trained_renderer(str(tmp_path)) == "fast"
    (tmp_path / "loupe_training.json").write_text("not json")
    assert trained_renderer(str(tmp_path)) == "speco3"
