"""The whole loop as one chain, each stage fed the previous stage's real output:

demo -> ingest -> rules vet into the store -> reviews of every kind (accept, reject with a
reason, reject without one, correct with the step that erred, author + approve) through
annotate's functions as the app calls them -> `export sft/rl/pairs` via `launch.main` ->
`sft.py`, `grpo.py`, `dpo.py` on the tiny model from those very folders (SFT's checkpoint
feeds GRPO, GRPO's feeds DPO) -> each checkpoint loaded by the `hf` policy, which vets a
demo spectrum with the renderer it was trained on.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")

pytestmark = pytest.mark.slow

REASON = "Na I 8183/8195 is strong and the Ca II triplet weak: a high-gravity M dwarf."
CORRECTION = "The Na I doublet is deep, as in a dwarf; I conclude this is not an M giant."


def _assistant_texts(messages: list[dict]) -> list[str]:
    return [
        "".join(it["text"] or "" for it in m["content"] if it["type"] == "text")
        for m in messages
        if m["role"] == "assistant"
    ]


def test_demo_to_checkpoints(tmp_path, tiny_model_dir):
    import datasets

    import launch
    from agent.loop import run_episode
    from agent.policies import get_policy
    from agent.protocol import parse_turn
    from annotate import authoring, review
    from annotate.export.correction import neutral_thought
    from db.store import Store
    from training import dpo, grpo, sft

    demo, db = tmp_path / "demo", tmp_path / "loupe.db"
    url = f"sqlite:///{db}"
    labels = demo / "labels.csv"
    assert (
        launch.main(["demo", "--out", str(demo), "--n-per-class", "2", "--labels", str(labels)])
        == 0
    )
    assert launch.main(["ingest", str(labels), "--db", url]) == 0
    assert launch.main(["vet", "--catalog", str(labels), "--policy", "rules", "--db", url]) == 0

    store = Store(url)
    store.create_expert("ann")
    store.create_expert("bob")
    cands = store.list_candidates(limit=1000, order="id")
    right = [c for c in cands if c.verdict is not None and c.verdict == c.known_label]
    wrong = [c for c in cands if c.verdict is not None and c.verdict != c.known_label]
    # The inspector errs on few demo spectra: the experts overrule it on more, as they may
    # (an expert's label is what the exports train on, whatever the catalogue says).
    wrong += right[len(right) - max(0, 4 - len(wrong)) :] if len(wrong) < 4 else []
    right = [c for c in right if c not in wrong]
    assert len(right) >= 2 and len(wrong) >= 4, "the seeded demo has verdicts to overrule"
    truth = {c.id: "NO" if c.verdict == "YES" else "YES" for c in wrong}
    agent_runs = {c.id: store.trajectory(c.trajectory_id) for c in wrong}

    # the decisions, as the vet page records them
    review.decide(store, "ann", right[0].id, "accept", seconds=3.0)
    review.decide(store, "ann", right[1].id, "accept", seconds=2.0)
    # the vet page's one-line reason of a reject is the review's explanation
    review.decide(store, "ann", wrong[0].id, "reject", explanation=REASON, seconds=8.0)
    wrong_step = 2
    review.decide(store, "ann", wrong[1].id, "correct", label=truth[wrong[1].id],
                  explanation=CORRECTION, wrong_step=wrong_step, seconds=20.0)  # fmt: skip
    review.decide(store, "ann", wrong[2].id, "reject", seconds=4.0)
    # ... and an authored trajectory, approved by another expert
    c = store.candidate(wrong[3].id)
    draft = authoring.start_draft(c, renderer="fast")
    spec = store.load_spectrum(c.id)
    authoring.add_step(draft, spec, 8150, 8240, "Na I 8183/8195 decides the gravity.")
    authoring.set_answer(draft, truth[c.id], "Deep Na I doublet: a dwarf, not a giant.")
    authoring.submit(store, draft, "ann")
    authoring.audit(store, draft.authored_id, "bob", True, "agreed")
    reviews = {r.candidate_id: r for r in store.reviews()}
    assert reviews[wrong[0].id].explanation == REASON, "a reject keeps its reason"

    # the exports, as an admin runs them
    out = {k: tmp_path / f"export-{k}" for k in ("sft", "rl", "pairs")}
    for kind, folder in out.items():
        argv = ["export", kind, "--db", url, "--out", str(folder), "--renderer", "fast",
                "--test-fraction", "0", "--workers", "1"]  # fmt: skip
        assert launch.main(argv) == 0
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["renderer"] == "fast" and manifest["rows"] > 0

    sft_rows = list(datasets.load_from_disk(str(out["sft"] / "hf"))["train"])
    # one spectrum can be a candidate of several tasks: a row is named by both
    by_cand = {(r["candidate"], r["task"]): r for r in sft_rows}
    key = {c.id: (c.key, c.task) for c in cands}
    sources = {by_cand[key[c.id]]["source"] for c in wrong[:4]}
    assert sources == {"corrected", "rejected", "authored"}
    # every decision with a label and a trajectory is a row: nothing an expert said is lost
    assert {key[r.id] for r in (*right[:2], *wrong[:4])} <= set(by_cand)
    # no thought in a row speaks for the overruled verdict: none of the agent's thoughts
    # appears, those before the step the expert named included; its zooms before that step
    # stay, each with a neutral thought
    for c, step in ((wrong[0], None), (wrong[1], wrong_step), (wrong[2], None)):
        row = by_cand[key[c.id]]
        texts = _assistant_texts(row["messages"])
        final = parse_turn(texts[-1])
        assert final.format_ok and final.answer == row["label"] == truth[c.id]
        agent = agent_runs[c.id]
        thoughts = [s.thought for s in agent.steps if s.thought]
        assert not [t for t in thoughts if any(t in x for x in texts)], c.key
        if step is not None:
            assert len(texts) == step + 1
            assert all(neutral_thought(agent.steps[i]) in texts[i] for i in range(step))
    # the expert's reasoning is the final turn of its row
    assert REASON in _assistant_texts(by_cand[key[wrong[0].id]]["messages"])[-1]
    assert CORRECTION in _assistant_texts(by_cand[key[wrong[1].id]]["messages"])[-1]
    pairs = list(datasets.load_from_disk(str(out["pairs"] / "hf"))["train"])
    assert {key[c.id] for c in wrong[:4]} <= {(r["candidate"], r["task"]) for r in pairs}
    rl_rows = [json.loads(x) for x in (out["rl"] / "train.jsonl").read_text().splitlines()]
    assert {key[c.id] for c in (*right[:2], *wrong[:4])} <= {
        (r["candidate"], r["task"]) for r in rl_rows
    }

    # training, each script from the export folder as written, each checkpoint feeding the next
    common = ["--max_steps", "1", "--per_device_train_batch_size", "1",
              "--gradient_checkpointing", "false", "--save_strategy", "no",
              "--learning_rate", "1e-4"]  # fmt: skip
    ckpt = {s: tmp_path / f"ckpt-{s}" for s in ("sft", "grpo", "dpo")}
    assert sft.main(["--model", str(tiny_model_dir), "--dataset", str(out["sft"]),
                     "--output_dir", str(ckpt["sft"]), "--max_length", "8192", *common]) == 0  # fmt: skip
    # a renderer the checkpoint and the export were not drawn with is refused
    assert grpo.main(["--model", str(ckpt["sft"]), "--dataset", str(out["rl"]),
                      "--renderer", "speco3", "--output_dir", str(tmp_path / "x")]) == 2  # fmt: skip
    assert grpo.main(["--model", str(ckpt["sft"]), "--dataset", str(out["rl"]),
                      "--output_dir", str(ckpt["grpo"]), "--num_generations", "2",
                      "--per_device_train_batch_size", "2", "--steps_per_generation", "1",
                      "--gradient_accumulation_steps", "1", "--max_completion_length", "16",
                      "--max_tool_calling_iterations", "1", "--use_vllm", "false", "--max_steps", "1",
                      *common[4:]]) == 0  # fmt: skip
    assert dpo.main(["--model", str(ckpt["grpo"]), "--dataset", str(out["pairs"]),
                     "--output_dir", str(ckpt["dpo"]), "--gradient_accumulation_steps", "1",
                     "--max_length", "16384", *common]) == 0  # fmt: skip

    spectrum = store.load_spectrum(right[0].id)
    for stage, folder in ckpt.items():
        meta = json.loads((Path(folder) / "loupe_training.json").read_text())
        assert meta["stage"] == stage and meta["renderer"] == "fast"
        policy = get_policy("hf", model=str(folder), max_new_tokens=8)
        assert policy.renderer == "fast"  # as trained, read from the checkpoint
        traj = run_episode(spectrum, right[0].task, policy, max_turns=1)
        assert traj.model and traj.steps and traj.state in ("done", "max_turns"), traj.error
    store.close()
