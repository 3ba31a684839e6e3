"""The agent loop with the scripted policy: answers, zooms, tool errors, format errors,
turn exhaustion, backend failures and bad files all end as recorded trajectories."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from PIL import Image

from agent.loop import run_batch, run_episode
from agent.policies import get_policy
from agent.policies.base import Reply
from agent.policies.scripted import ScriptedPolicy
from agent.protocol import image_reference
from agent.refs import CandidateRef
from agent.spectrum import Spectrum, SpectrumMeta
from agent.trajectory import Trajectory

ANSWER_YES = "<think>Broad Balmer emission.</think><answer>\\boxed{YES} H-alpha emission.</answer>"


def zoom(lo, hi, label="H-alpha"):
    call = {
        "name": "spectral_visualization_tool",
        "arguments": {"wavelength_range": [lo, hi], "label": label},
    }
    return f"<think>Look at {label}.</think>\n<tool_call>\n{json.dumps(call)}\n</tool_call>"


def synthetic(seed: int = 0, name: str = "syn") -> Spectrum:
    rng = np.random.default_rng(seed)
    wave = np.linspace(3700.0, 9100.0, 3900)
    flux = 1.0 + 0.3 * np.exp(-0.5 * ((wave - 6564.6) / 8.0) ** 2) + rng.normal(0, 0.02, wave.size)
    return Spectrum(wave, flux, meta=SpectrumMeta(id=name, source=f"{name}.fits"))


def test_answer_directly_with_confidence():
    pol = ScriptedPolicy([ANSWER_YES], p_yes=0.83)
    t = run_episode(synthetic(), "cv", pol)
    assert (t.state, t.verdict, t.format_ok, t.confidence) == ("done", "YES", True, 0.83)
    assert t.id == "syn" and t.task == "cv" and t.policy == "scripted"
    assert t.explanation == "H-alpha emission."
    assert len(t.steps) == 1 and t.steps[0].seconds >= 0 and t.seconds > 0
    assert t.params["global_image"].startswith("render:fast:")


def test_confidence_is_none_when_unknown():
    t = run_episode(synthetic(), "cv", ScriptedPolicy([ANSWER_YES]))
    assert t.verdict == "YES" and t.confidence is None


def test_zoom_then_answer_records_observation_and_messages():
    seen = []

    def script(ep):
        seen.append(list(ep.messages))
        return zoom(6500, 6620) if ep.turn == 0 else ANSWER_YES

    t = run_episode(synthetic(), "cv", ScriptedPolicy(script), renderer="fast")
    assert t.state == "done" and t.format_ok and len(t.steps) == 2
    s = t.steps[0]
    assert s.window == (6500.0, 6620.0)
    assert s.observation_image == image_reference("fast", s.window)
    assert s.observation_text.startswith("Generated spectral visualization focused on")
    assert s.error is None
    # what the policy saw: real images, and the tool response as a user turn
    second = seen[1]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert isinstance(second[1]["content"][0]["image"], Image.Image)
    assert isinstance(second[3]["content"][1]["image"], Image.Image)
    # the stored record gives the same conversation with references instead of pixels
    msgs = t.to_messages()
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant"]
    assert msgs[3]["content"][1]["image"] == s.observation_image
    again = Trajectory.from_messages(msgs, id=t.id)
    assert [x.window for x in again.steps] == [x.window for x in t.steps]


def test_a_boxed_verdict_beside_a_tool_call_runs_the_tool_and_goes_on():
    first = zoom(6500, 6620).replace("Look at H-alpha.", "Maybe \\boxed{YES}; look at H-alpha.")
    seen = []

    def script(ep):
        seen.append(list(ep.messages))
        return first if ep.turn == 0 else ANSWER_YES

    t = run_episode(synthetic(), "cv", ScriptedPolicy(script))
    assert t.state == "done" and t.verdict == "YES" and len(t.steps) == 2
    s = t.steps[0]
    assert s.answer is None and s.window == (6500.0, 6620.0) and s.observation_image
    assert "calls the tool" in s.error and not t.format_ok
    # the reply text follows the image directly, as verl rendered it
    reply = seen[1][3]["content"]
    assert [i["type"] for i in reply] == ["text", "image", "text"]
    assert reply[2]["text"].startswith("Generated spectral visualization focused on")


def test_tool_error_is_recorded_and_run_goes_on():
    pol = ScriptedPolicy([zoom(20000, 21000), zoom(4800, 4900, label="H-beta"), ANSWER_YES])
    t = run_episode(synthetic(), "cv", pol)
    assert t.state == "done" and t.verdict == "YES"
    bad = t.steps[0]
    assert bad.window is None and bad.observation_image is None
    assert bad.error.startswith("tool error:")
    assert t.format_ok  # a refused zoom is not the model's format error
    assert t.steps[1].window is not None


def test_unknown_tool_and_bad_arguments_are_tool_errors():
    bad_name = '<think>a</think><tool_call>{"name": "rm", "arguments": {}}</tool_call>'
    bad_args = '<think>a</think><tool_call>{"name": "spectral_visualization_tool", "arguments": {"wavelength_range": "x"}}</tool_call>'
    t = run_episode(synthetic(), "cv", ScriptedPolicy([bad_name, bad_args, ANSWER_YES]))
    assert [s.error is not None for s in t.steps] == [True, True, False]
    assert t.verdict == "YES"


def test_format_error_ends_the_run_without_a_verdict():
    t = run_episode(synthetic(), "wd", ScriptedPolicy(["I think it's a white dwarf."], p_yes=0.9))
    assert t.state == "done" and t.verdict is None and not t.format_ok
    assert t.confidence is None
    assert "missing <think>" in t.steps[0].error


def test_max_turns():
    t = run_episode(synthetic(), "cv", ScriptedPolicy([zoom(6500, 6620)]), max_turns=3)
    assert t.state == "max_turns" and len(t.steps) == 3 and t.verdict is None
    assert not t.format_ok and t.params["max_turns"] == 3


def test_backend_error_and_exception_are_recorded():
    t = run_episode(
        synthetic(), "cv", ScriptedPolicy([Reply(text="", error="HTTP 503 after 3 tries")])
    )
    assert t.state == "error" and t.error == "HTTP 503 after 3 tries"

    class Boom:
        name, model_id, renderer = "boom", None, "fast"

        def act(self, episodes):
            raise RuntimeError("CUDA out of memory")

    t = run_episode(synthetic(), "cv", Boom())
    assert t.state == "error" and "CUDA out of memory" in t.error


def _tracebacks(caplog, logger: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger and r.exc_info is not None]


def test_a_bug_is_recorded_and_logged_with_its_traceback(caplog, monkeypatch):
    class Boom:
        name, model_id, renderer = "boom", None, "fast"

        def act(self, episodes):
            raise RuntimeError("index out of range in the sampler")

    caplog.set_level(logging.ERROR, logger="agent.loop")
    t = run_episode(synthetic(), "cv", Boom())
    assert t.state == "error" and "index out of range in the sampler" in t.error
    [record] = _tracebacks(caplog, "agent.loop")
    assert "boom" in record.getMessage() and record.exc_info[0] is RuntimeError

    # a tool that raises (call_tool never should) ends the step, not the run, and is logged
    caplog.clear()
    import agent.tool

    def broken(*args, **kwargs):
        raise KeyError("wavelength")

    monkeypatch.setattr(agent.tool, "call_tool", broken)
    t = run_episode(synthetic(), "cv", ScriptedPolicy([zoom(6500, 6620), ANSWER_YES]))
    assert t.verdict == "YES" and "tool failed: KeyError" in t.steps[0].observation_text
    [record] = _tracebacks(caplog, "agent.loop")
    assert "syn" in record.getMessage() and record.exc_info[0] is KeyError

    # a bug while opening the episode: an error trajectory, and the traceback in the log
    caplog.clear()
    monkeypatch.setattr("agent.loop.prompt_for", lambda spectrum: 1 / 0)
    t = run_episode(synthetic(), "cv", ScriptedPolicy([ANSWER_YES]))
    assert t.state == "error" and "ZeroDivisionError" in t.error
    assert [r.exc_info[0] for r in _tracebacks(caplog, "agent.loop")] == [ZeroDivisionError]


def test_bad_input_is_recorded_without_a_traceback(tmp_path, caplog):
    bad = tmp_path / "broken.fits"
    bad.write_bytes(b"not a fits file at all")
    items = [CandidateRef(id="bad", task="cv", path=str(bad)), (synthetic(), "quasar")]
    caplog.set_level(logging.DEBUG)
    out = run_batch(items, ScriptedPolicy([ANSWER_YES]))
    assert [t.state for t in out] == ["error", "error"]
    assert "unknown task" in out[1].error
    assert not [r for r in caplog.records if r.exc_info is not None]


def test_batch_keeps_order_and_batches_turns():
    pol = ScriptedPolicy(
        scripts={
            "a": [ANSWER_YES],
            "b": [zoom(6500, 6620), ANSWER_YES],
            "c": [
                zoom(6500, 6620),
                zoom(4800, 4900),
                "<think>x</think><answer>\\boxed{NO}</answer>",
            ],
        }
    )
    items = [(synthetic(i, n), "cv") for i, n in enumerate("abc")]
    out = run_batch(items, pol, max_turns=8)
    assert [t.id for t in out] == ["a", "b", "c"]
    assert [len(t.steps) for t in out] == [1, 2, 3]
    assert [t.verdict for t in out] == ["YES", "YES", "NO"]
    assert pol.calls == 3  # one batched call per turn, not per episode


def test_bad_candidate_file_and_bad_task_are_error_trajectories(tmp_path):
    bad = tmp_path / "broken.fits"
    bad.write_bytes(b"not a fits file at all")
    items = [
        CandidateRef(id="bad", task="cv", path=str(bad)),
        (synthetic(), "quasar"),
        (synthetic(1, "ok"), "cc"),
    ]
    out = run_batch(items, ScriptedPolicy([ANSWER_YES]))
    assert out[0].state == "error" and "broken.fits" in out[0].error
    assert out[1].state == "error" and "unknown task" in out[1].error
    assert out[2].state == "done" and out[2].task == "carbon"


def test_speco3_renderer_is_used_when_asked():
    t = run_episode(
        synthetic(), "cv", ScriptedPolicy([zoom(6500, 6620), ANSWER_YES]), renderer="speco3"
    )
    assert t.renderer == "speco3" and t.steps[0].observation_image.startswith("render:speco3:")


def test_get_policy():
    pol = get_policy("scripted", script=[ANSWER_YES])
    assert pol.name == "scripted"
    with pytest.raises(ValueError, match="unknown policy"):
        get_policy("nope")


def _specvi_file(tmp_path, with_images=True):
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.fits_factory import specvi_record

    overview = Image.new("RGB", (80, 48), (200, 10, 10))
    buf = io.BytesIO()
    overview.save(buf, format="PNG")
    rec = specvi_record(3, "cv", "YES", n=3909)
    rec["prompt"] = json.dumps(
        [
            {"role": "system", "content": "You vet spectra."},
            {"role": "user", "content": "<image>Is this a CV? Answer in \\boxed{}."},
        ]
    )
    if with_images:
        rec["images"] = [{"bytes": buf.getvalue(), "path": None}]
    path = tmp_path / "test_cv.parquet"
    pq.write_table(pa.Table.from_pylist([rec]), path)
    return path, overview


def test_a_specvi_row_is_asked_with_its_own_prompt_and_overview(tmp_path):
    from agent.formats import load_one
    from agent.protocol import tools_block

    path, overview = _specvi_file(tmp_path)
    spectrum = load_one(path, row=0)
    seen = []

    def script(ep):
        seen.append(list(ep.messages))
        return ANSWER_YES

    t = run_episode(spectrum, "cv", ScriptedPolicy(script))
    assert t.state == "done" and t.params["prompt"] == "row"
    system, user = seen[0]
    assert system["content"][0]["text"] == "You vet spectra.\n\n" + tools_block()
    assert [i["type"] for i in user["content"]] == ["image", "text"]
    assert np.array_equal(np.asarray(user["content"][0]["image"]), np.asarray(overview))
    assert user["content"][1]["text"] == "Is this a CV? Answer in \\boxed{}."

    # a row without images gets the rendered overview in the placeholder
    path, _ = _specvi_file(tmp_path, with_images=False)
    t = run_episode(load_one(path, row=0), "cv", ScriptedPolicy(script), renderer="speco3")
    user = seen[-1][1]
    assert user["content"][0]["image"].size != overview.size


def test_a_specvi_overview_title_is_the_same_in_vet_and_grpo(tmp_path):
    from agent.formats import load_one
    from agent.tool import global_view, spectrum_title
    from training.data import load_rl_dataset, spectrum_from_ref

    path, _ = _specvi_file(tmp_path)
    vet = load_one(path, row=0)
    row = load_rl_dataset(path)[0]
    grpo = spectrum_from_ref(row["spectrum"])
    assert spectrum_title(vet) == spectrum_title(grpo) == "spec-55862-B6212_sp06-003.fits"
    a = global_view(vet, renderer="speco3").image
    b = global_view(grpo, renderer="speco3").image
    assert np.array_equal(np.asarray(a), np.asarray(b))
