"""Agent runs and their trajectories: one run per set-up (policy, model, renderer,
params), one trajectory per run and candidate."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from agent.trajectory import Step
from agent.trajectory import Trajectory as TrajectoryRecord
from db import models as m
from db.models import utcnow
from db.store.errors import NotFound, StoreError
from db.store.rules import UNVETTED_PRIORITY
from db.store.values import float_or_none, hdu_out, json_default, ref_key


def run_fingerprint(policy: str, model: str | None, renderer: str, params: dict[str, Any]) -> str:
    blob = json.dumps([policy, model, renderer, params], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def trajectory_record(
    row: m.Trajectory,
    run: m.AgentRun,
    key: str,
    task: str,
    spectrum_ref: dict[str, Any],
    label: str | None,
) -> TrajectoryRecord:
    """The one `Trajectory` record for a stored trajectory row and its run."""
    from agent.redshift import from_measurements

    steps = [Step.from_dict(d) for d in row.steps or []]
    # The redshift step's numbers ride in the last step's measurements (agent.redshift).
    z = from_measurements(steps[-1].measurements) if steps and steps[-1].measurements else None
    return TrajectoryRecord(
        id=key,
        task=task,
        spectrum_ref=dict(spectrum_ref),
        policy=run.policy,
        model=run.model,
        renderer=run.renderer,
        steps=steps,
        verdict=row.verdict,
        explanation=row.explanation,
        confidence=row.confidence,
        format_ok=row.format_ok,
        state=row.state,
        error=row.error,
        label=label,
        started_at=row.started_at,
        seconds=row.seconds,
        params=dict(run.params or {}),
        redshift=z,
    )


class RunsMixin:
    """Agent runs and trajectories of a `Store`; recording one refreshes its candidate."""

    def start_run(
        self,
        policy: str,
        model: str | None = None,
        renderer: str = "fast",
        params: dict[str, Any] | None = None,
        actor: str = "vet",
    ) -> int:
        """The run with this set-up (policy, model, renderer, params), created if new."""
        with self._tx() as s:
            return self._run_id(s, policy, model, renderer, params or {}, actor)

    def _run_id(self, s: Session, policy, model, renderer, params, actor) -> int:
        fp = run_fingerprint(policy, model, renderer, params)
        rid = s.scalar(select(m.AgentRun.id).where(m.AgentRun.fingerprint == fp))
        if rid is None:
            run = m.AgentRun(
                fingerprint=fp,
                policy=policy,
                model=model,
                renderer=renderer,
                params=json.loads(json.dumps(params, default=str)),
                code_version=self.code_version(),
            )
            s.add(run)
            s.flush()
            rid = run.id
            self._audit(
                s,
                actor,
                "start_run",
                "agent_run",
                rid,
                {"policy": policy, "model": model, "renderer": renderer},
            )
        return rid

    def runs(self) -> list[m.AgentRun]:
        with self._ro() as s:
            return list(s.scalars(select(m.AgentRun).order_by(m.AgentRun.id)))

    def record_trajectory(
        self, traj: TrajectoryRecord, run_id: int | None = None, actor: str = "vet"
    ) -> int:
        """Store one agent trajectory (replacing that run's earlier one for the candidate)."""
        return self.record_trajectories([traj], run_id, actor)[0]

    def record_trajectories(
        self, trajs: Sequence[TrajectoryRecord], run_id: int | None = None, actor: str = "vet"
    ) -> list[int]:
        """Store several trajectories in one transaction; a candidate not yet in the store
        is created from the trajectory's spectrum_ref."""
        for t in trajs:
            _check_trajectory(t)
        with self._tx() as s:
            threshold = self._threshold(s)
            out = []
            for t in trajs:
                rid = (
                    run_id
                    if run_id is not None
                    else self._run_id(s, t.policy, t.model, t.renderer, t.params, actor)
                )
                c = self._candidate_for(s, t)
                row = s.scalars(
                    select(m.Trajectory).where(
                        m.Trajectory.run_id == rid, m.Trajectory.candidate_id == c.id
                    )
                ).first()
                fields = dict(
                    steps=[st.to_dict() for st in t.steps],
                    verdict=t.verdict,
                    explanation=t.explanation or "",
                    confidence=float_or_none(t.confidence),
                    format_ok=bool(t.format_ok),
                    state=t.state,
                    error=t.error,
                    seconds=float(t.seconds or 0.0),
                    started_at=t.started_at,
                )
                fields["steps"] = json.loads(json.dumps(fields["steps"], default=json_default))
                if row is None:
                    row = m.Trajectory(run_id=rid, candidate_id=c.id, **fields)
                    s.add(row)
                else:
                    for k, v in fields.items():
                        setattr(row, k, v)
                    row.created = utcnow()
                s.flush()
                # The item shows the newest trajectory with a verdict: a failed or unfinished
                # run of another policy does not hide a finished one.
                shown = s.get(m.Trajectory, c.trajectory_id) if c.trajectory_id else None
                if shown is None or shown.id == row.id or row.verdict or not shown.verdict:
                    c.trajectory_id, c.verdict, c.confidence = row.id, row.verdict, row.confidence
                self._refresh_candidate(s, c, threshold)
                self._audit(
                    s,
                    actor,
                    "record_trajectory",
                    "trajectory",
                    row.id,
                    {
                        "candidate": c.key,
                        "task": t.task,
                        "run": rid,
                        "verdict": t.verdict,
                        "state": t.state,
                    },
                )
                out.append(row.id)
            return out

    def _candidate_for(self, s: Session, t: TrajectoryRecord) -> m.Candidate:
        tid = self._task_id(s, t.task)
        c = s.scalars(
            select(m.Candidate).where(m.Candidate.key == t.id, m.Candidate.task_id == tid)
        ).first()
        if c is not None:
            return c
        ref = t.spectrum_ref or {}
        path = str(ref.get("path") or "")
        if not path:
            raise StoreError(
                f"{t.id}: candidate not in the store and trajectory has no spectrum path"
            )
        key = ref_key(path, ref.get("hdu"), ref.get("row"))
        sp = s.scalars(select(m.Spectrum).where(m.Spectrum.ref_key == key)).first()
        if sp is None:
            hdu = ref.get("hdu")
            sp = m.Spectrum(
                ref_key=key,
                path=path,
                hdu=None if hdu is None else str(hdu),
                row=ref.get("row"),
                extra={},
            )
            s.add(sp)
            s.flush()
        c = m.Candidate(
            key=t.id,
            object_id=t.id,
            spectrum_id=sp.id,
            task_id=tid,
            known_label=t.label if t.label in m.LABELS else None,
            priority=UNVETTED_PRIORITY,
        )
        s.add(c)
        s.flush()
        return c

    def _to_record(self, s: Session, row: m.Trajectory) -> TrajectoryRecord:
        c = s.get(m.Candidate, row.candidate_id)
        run = s.get(m.AgentRun, row.run_id)
        info = self._info(s, c)
        return trajectory_record(row, run, c.key, info.task, info.spectrum_ref, c.known_label)

    def trajectory(self, trajectory_id: int) -> TrajectoryRecord:
        with self._ro() as s:
            row = s.get(m.Trajectory, trajectory_id)
            if row is None:
                raise NotFound(f"no trajectory #{trajectory_id}")
            return self._to_record(s, row)

    def trajectory_records(self, ids: Sequence[int]) -> dict[int, TrajectoryRecord]:
        """trajectory id -> record, as `trajectory` builds it, read in bulk (one query per
        500 ids, the candidate, task, spectrum and run joined in); unknown ids are left out."""
        ids = list(ids)
        out: dict[int, TrajectoryRecord] = {}
        with self._ro() as s:
            runs = {r.id: r for r in s.scalars(select(m.AgentRun))}
            C, S = m.Candidate, m.Spectrum
            for j in range(0, len(ids), 500):
                q = (
                    select(m.Trajectory, C.key, C.known_label, m.Task.name, S.path, S.hdu, S.row)
                    .join(C, C.id == m.Trajectory.candidate_id)
                    .join(m.Task, m.Task.id == C.task_id)
                    .join(S, S.id == C.spectrum_id)
                    .where(m.Trajectory.id.in_(ids[j : j + 500]))
                )
                for row, key, known, task, path, hdu, n in s.execute(q):
                    ref = {"path": path, "hdu": hdu_out(hdu), "row": n}
                    out[row.id] = trajectory_record(row, runs[row.run_id], key, task, ref, known)
        return out

    def trajectories(self, candidate_id: int) -> list[tuple[int, TrajectoryRecord]]:
        """(trajectory id, record) for every run over this candidate, oldest first."""
        with self._ro() as s:
            rows = s.scalars(
                select(m.Trajectory)
                .where(m.Trajectory.candidate_id == candidate_id)
                .order_by(m.Trajectory.id)
            ).all()
            return [(r.id, self._to_record(s, r)) for r in rows]

    def done_keys(
        self, policy: str | None = None, model: str | None = None, run_id: int | None = None
    ) -> set[tuple[str, str]]:
        """(candidate id, task) pairs that already have a trajectory (any state but
        'running') from runs matching policy/model/run_id: what a resumed run skips. An
        'error' record counts as done, as in the JSONL sink, so an unreadable file is not
        retried forever; a later record for the same run replaces it."""
        with self._ro() as s:
            q = (
                select(m.Candidate.key, m.Task.name)
                .join(m.Trajectory, m.Trajectory.candidate_id == m.Candidate.id)
                .join(m.AgentRun, m.AgentRun.id == m.Trajectory.run_id)
                .join(m.Task, m.Task.id == m.Candidate.task_id)
                .where(m.Trajectory.state != "running")
            )
            if policy is not None:
                q = q.where(m.AgentRun.policy == policy)
            if model is not None:
                q = q.where(m.AgentRun.model == model)
            if run_id is not None:
                q = q.where(m.AgentRun.id == run_id)
            return set(s.execute(q).tuples())


def _check_trajectory(t: TrajectoryRecord) -> None:
    if not t.id or not t.task:
        raise StoreError(f"trajectory needs a candidate id and a task (got {t.id!r}, {t.task!r})")
    if t.verdict is not None and t.verdict not in m.LABELS:
        raise StoreError(f"{t.id}: verdict must be YES, NO or None (got {t.verdict!r})")
    if t.confidence is not None and not (
        isinstance(t.confidence, (int, float)) and 0.0 <= t.confidence <= 1.0
    ):
        raise StoreError(f"{t.id}: confidence must be in [0, 1] (got {t.confidence!r})")
