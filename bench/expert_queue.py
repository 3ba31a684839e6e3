"""Campaigns as experts run them: labels in the order the app's own queue serves them.

    from bench.expert_queue import served_order
    order = served_order(examples, seed=0, stop=1000)  # indices into `examples`

A pool of learner examples (`bench/learning_curve.py` caches the benchmark's) becomes a
store of pending candidates, each with a rules trajectory whose final step holds what a
model reads, as the inspector stores it. The random audit is drawn as the app draws it
(`annotate.audit.sample.draw_for_store`: a share of the confident verdicts, after which
the confident ones are held out of the queue), and one simulated expert takes items from
`annotate.queue.Queue` (fewest reviews, then closest to the threshold, one item in
round(1/audit_rate) from the audit sample) and answers each with its true label through
`annotate.review.decide`. The learning schedule (`annotate.learning.schedule`, every
`learn_every` labels) refits inline and re-scores the pending candidates as it does in the
app, so the queue re-ranks. The campaign ends when the queue is empty. A seed shuffles
the ingest order (the queue's last tie-break) and the audit's draw.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

EXPERT = "sim-expert"


def _trajectory(key: str, e: Any):
    """A finished rules trajectory for example `e`, its final step storing the inputs."""
    from agent.trajectory import Step, Trajectory

    verdict = "YES" if e.p_rules > 0.5 else "NO"
    # what is not measured is not stored (JSON has no NaN), as the policy stores it
    meas = {k: float(v) for k, v in e.m.items() if isinstance(v, int | float) and math.isfinite(v)}
    meas.update(calibration_input=float(e.x), p_rules=float(e.p_rules),
                capped=float(bool(e.capped)))  # fmt: skip
    step = Step(thought="read", answer=verdict, explanation="rules", measurements=meas)
    return Trajectory(id=key, task=e.task, spectrum_ref={"path": f"/queue/{key}"},
                      policy="rules", steps=[step], verdict=verdict, explanation="rules",
                      confidence=float(e.p_rules), state="done", format_ok=True)  # fmt: skip


def campaign_store(pool: list[Any], seed: int, learn_every: int):
    """The pool as a store of pending candidates (ingested in a seeded order), the audit
    drawn, the team's `learn_every` set. Returns (store, key -> pool index)."""
    from agent.refs import CandidateRef
    from annotate.audit.sample import draw_for_store
    from annotate.learning import schedule
    from db.store import Store

    order = np.random.default_rng(seed).permutation(len(pool))
    store = Store("sqlite://")
    refs = [CandidateRef(f"q{i}", pool[i].task, f"/queue/q{i}",
                         extra=(("object_id", pool[i].group),)) for i in order]  # fmt: skip
    store.add_candidates(refs)
    store.record_trajectories([_trajectory(f"q{i}", pool[i]) for i in order], actor="bench")
    store.set_setting(schedule.LEARN_EVERY_SETTING, learn_every, actor="bench")
    draw_for_store(store, seed=seed, actor="bench")
    store.ensure_expert(EXPERT)
    return store, {f"q{i}": int(i) for i in order}


def served_order(
    pool: list[Any], seed: int, stop: int, learn_every: int = 100, out: Path | None = None
) -> list[int]:
    """Pool indices in the order the queue served them to the expert, at most `stop`
    (fewer where the queue ran dry)."""
    from annotate import review
    from annotate.learning import schedule
    from annotate.queue import Queue

    store, index = campaign_store(pool, seed, learn_every)
    tmp = tempfile.TemporaryDirectory(prefix="loupe-queue-")
    try:
        lr = schedule.attach(store, out or Path(tmp.name), background=False)
        served: list[int] = []
        while len(served) < stop:
            cid = Queue.from_settings(store).next_id(EXPERT)
            if cid is None:
                break
            i = index[store.candidate(cid).key]
            review.decide(store, EXPERT, cid, "correct", label="YES" if pool[i].label else "NO")
            if lr.error:
                raise RuntimeError(f"the schedule's fit failed: {lr.error}")
            served.append(i)
        return served
    finally:
        store.close()
        tmp.cleanup()
