"""Seeded builders for store tests: candidates, trajectories and spectrum files."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from agent.refs import CandidateRef
from agent.trajectory import Step, Trajectory


def refs(n: int, task: str = "cv", prefix: str = "c", **kw) -> list[CandidateRef]:
    return [
        CandidateRef(id=f"{prefix}{i}", task=task, path=f"/data/{prefix}{i}.fits", **kw)
        for i in range(n)
    ]


def traj(
    cid: str,
    p: float | None,
    task: str = "cv",
    policy: str = "rules",
    model: str | None = None,
    state: str = "done",
    steps: int = 3,
    verdict: str | None = "auto",
) -> Trajectory:
    """A finished trajectory with `steps` steps (zooms then the answer) and P(YES) = p."""
    if verdict == "auto":
        verdict = None if p is None else ("YES" if p >= 0.5 else "NO")
    st = [
        Step(
            thought=f"zoom {k}",
            tool_call={
                "name": "spectral_visualization_tool",
                "arguments": {"wavelength_range": [6500, 6600]},
            },
            window=(6500.0 + k, 6600.0 + k),
            observation_text="ok",
            measurements={"ew": 1.5 + k},
        )
        for k in range(max(steps - 1, 0))
    ]
    st.append(Step(thought="so", answer=verdict, explanation="because", raw="<answer>"))
    return Trajectory(
        id=cid,
        task=task,
        spectrum_ref={"path": f"/data/{cid}.fits"},
        policy=policy,
        model=model,
        steps=st,
        verdict=verdict,
        explanation="because",
        confidence=p,
        state=state,
        format_ok=True,
    )


def seeded(
    store, confidences: list[float | None], task: str = "cv", prefix: str = "c", **ref_kw
) -> list[int]:
    """Candidates prefix0.. with one rules trajectory each; returns their store ids."""
    store.add_candidates(refs(len(confidences), task, prefix, **ref_kw))
    out = []
    for i, p in enumerate(confidences):
        store.record_trajectory(traj(f"{prefix}{i}", p, task))
        out.append(store.find_candidate(f"{prefix}{i}", task).id)
    return out


def write_text_spectrum(path: Path, seed: int = 0, n: int = 400) -> Path:
    """A plain wavelength,flux CSV spectrum (the generic text layout)."""
    rng = np.random.default_rng(seed)
    w = np.linspace(3800.0, 9000.0, n)
    f = 1.0 + 0.05 * rng.standard_normal(n)
    path.write_text("wavelength,flux\n" + "\n".join(f"{a:.3f},{b:.5f}" for a, b in zip(w, f)))
    return path
