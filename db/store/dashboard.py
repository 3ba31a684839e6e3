"""The dashboard's statistics, aggregated in the database."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from db import models as m
from db.store import tally
from db.store.records import DashboardStats


class DashboardMixin:
    """The figures the dashboard draws."""

    def dashboard_stats(self, task: str | None = None) -> DashboardStats:
        """Progress, decisions, agent-vs-expert counts, a confidence histogram per label,
        seconds per expert, multi-rater labels and gold ratings, for one task or all.

        The counts come from the running tallies the store keeps with every write
        (db/store/tally.py): a few hundred rows, however many candidates there are. The
        seconds' quantiles read ranks in an index of the timed reviews; the multi-rater
        and gold ratings read the (candidate, expert) index and the few gold items."""
        C, R, T, E = m.Candidate, m.Review, m.Task, m.Expert
        CT, RT = m.CandidateTally, m.ReviewTally
        with self._ro() as s:
            names = dict(s.execute(select(T.id, T.name)).tuples().all())
            experts = dict(s.execute(select(E.id, E.name)).tuples().all())
            tid = None
            if task is not None:
                tid = next((i for i, n in names.items() if n == task), None)
                if tid is None:
                    return DashboardStats([], {}, {}, {}, {}, 0, 0, [], [], {}, None, [], [])

            def only(q, col=C.task_id):
                return q if tid is None else q.where(col == tid)

            total: dict[str, int] = {}
            reviewed: dict[str, int] = {}
            auto: dict[str, int] = {}
            conf_counts: dict[tuple[str, str | None, str], int] = {}
            # the counts summed over the P(YES) bins, then the bins over tasks and verdicts:
            # a few thousand count rows come back as a few hundred
            cols = (CT.task_id, CT.reviewed, CT.auto, CT.label, CT.verdict)
            q = select(*cols, func.sum(CT.n)).group_by(*cols)
            for t, rv, au, lab, v, n in s.execute(only(q, CT.task_id)):
                t, n = names[t], int(n)
                if not n:
                    continue
                total[t] = total.get(t, 0) + n
                reviewed[t] = reviewed.get(t, 0) + n * bool(rv)
                auto[t] = auto.get(t, 0) + n * bool(au)
                if lab:  # an expert label
                    key = (t, v or None, lab)
                    conf_counts[key] = conf_counts.get(key, 0) + n
            q = (
                select(CT.bin, CT.label, func.sum(CT.n), func.sum(CT.p_sum))
                .where(CT.bin >= 0, CT.label != "")
                .group_by(CT.bin, CT.label)
                .order_by(CT.bin, CT.label)
            )
            hist = [
                (int(k), lab, int(n), int(ps) / tally.P_SCALE)
                for k, lab, n, ps in s.execute(only(q, CT.task_id))
                if n
            ]
            tasks = sorted(total)
            actions: dict[str, dict[str, int]] = {t: {} for t in tasks}
            reviewers: set[int] = set()
            n_reviews = 0
            q = (
                select(RT.task_id, RT.action, RT.expert_id, RT.n)
                .where(RT.action.in_(m.DECISIONS))  # a taken-back review holds no decision
                .where(RT.n != 0)
            )
            for t, action, eid, n in s.execute(only(q, RT.task_id)):
                acts = actions.setdefault(names[t], {})
                acts[action] = acts.get(action, 0) + n
                reviewers.add(eid)
                n_reviews += n
            confusion = [(t, v, lab, n) for (t, v, lab), n in sorted(conf_counts.items(), key=str)]
            seconds, median = self._seconds_quantiles(s, tid, experts)
            # items reviewed twice or more, found in the (candidate, expert) index alone: a
            # filter on labels or on the candidate row would fetch every reviewed row
            multi = select(R.candidate_id).group_by(R.candidate_id).having(func.count() >= 2)
            q = (
                select(R.candidate_id, C.task_id, R.expert_id, R.label)
                .join(C, C.id == R.candidate_id)
                .where(R.candidate_id.in_(multi), R.label.in_(m.LABELS))
                .order_by(R.id)
            )
            ratings = [(c, names[t], experts[e], lab) for c, t, e, lab in s.execute(only(q))]
            q = (
                select(R.candidate_id, C.task_id, R.expert_id, R.label, C.gold_label)
                .join(C, C.id == R.candidate_id)
                .where(C.is_gold.is_(True), C.gold_label.is_not(None), R.label.in_(m.LABELS))
                .order_by(R.id)
            )
            gold = [(c, names[t], experts[e], lab, g) for c, t, e, lab, g in s.execute(only(q))]
        return DashboardStats(
            tasks=tasks,
            total=total,
            reviewed=reviewed,
            auto=auto,
            actions=actions,
            n_reviews=n_reviews,
            n_reviewers=len(reviewers),
            confusion=confusion,
            confidence_hist=hist,
            seconds=seconds,
            seconds_median=median,
            ratings=ratings,
            gold=gold,
        )

    def recount_dashboard(self) -> None:
        """Rebuild the Dashboard's running counts from every candidate and review: for a
        bulk load written with raw SQL, which the store's own writes never need."""
        with self._tx() as s:
            tally.recount(s)

    def rejects_without_reason(self, task: str | None = None) -> dict[str, int]:
        """Per task, the rejects (and label-changing corrections) with no reason typed: their
        SFT rows carry a neutral explanation instead of the expert's reasoning."""
        C, R, T = m.Candidate, m.Review, m.Task
        no_reason = R.explanation.is_(None) | (func.trim(R.explanation) == "")
        q = (
            select(T.name, func.count())
            .select_from(R)
            .join(C, C.id == R.candidate_id)
            .join(T, T.id == C.task_id)
            .where(R.action.in_(("reject", "correct")), no_reason)
            .where((R.action == "reject") | (R.label != C.verdict))
            .group_by(T.name)
        )
        # every task's count, then the one asked for: filtered by task in SQL, the plan walks
        # the task's candidates and probes their reviews, where this reads the reviews once
        # and looks up only the rejects' and corrections' candidates
        with self._ro() as s:
            counts = {name: int(n) for name, n in s.execute(q)}
        return counts if task is None else {t: n for t, n in counts.items() if t == task}

    @staticmethod
    def _seconds_quantiles(s: Session, tid: int | None, experts: dict[int, str]):
        """Nearest-rank quantiles of seconds on item (min, q1, median, q3, max), per expert
        and overall. Over every task each rank is read from the timed reviews' partial
        indexes (`m.TIMED`, written out so that SQLite matches them): a count, then the
        k-th value in order, no sort. For one task, by window functions over that task's
        timed reviews (only the five ranks per expert come back)."""
        if tid is not None:
            return _task_quantiles(s, tid, experts)
        counts = s.execute(
            text(f"SELECT expert_id, count(*) FROM review WHERE {m.TIMED} GROUP BY expert_id")
        ).all()
        total = sum(n for _, n in counts)
        if not total:
            return {}, None
        # every rank wanted, each the k-th timed value in index order, in one statement
        wanted: list[tuple[int | None, str, int]] = [
            (eid, key, k)
            for eid, n in counts
            for key, k in (("min", 0), ("q1", (n - 1) // 4), ("median", (n - 1) // 2),
                           ("q3", 3 * (n - 1) // 4), ("max", n - 1))
        ]  # fmt: skip
        wanted.append((None, "all", (total - 1) // 2))
        rank = "(SELECT seconds FROM review WHERE {} ORDER BY seconds LIMIT 1 OFFSET :k{})"
        subs, params = [], {}
        for i, (eid, _, k) in enumerate(wanted):
            where = m.TIMED if eid is None else f"expert_id = :e{i} AND {m.TIMED}"
            subs.append(rank.format(where, i))
            params |= {f"k{i}": k} | ({} if eid is None else {f"e{i}": eid})
        values = s.execute(text("SELECT " + ", ".join(subs)), params).one()
        per: dict[str, dict[str, float]] = {}
        for eid, n in counts:
            per[experts.get(eid, "?")] = {"n": n}
        for (eid, key, _), v in zip(wanted, values):
            if eid is not None:
                per[experts.get(eid, "?")][key] = float(v)
        median = float(values[-1])
        return dict(sorted(per.items())), median

    def gold_agreement_by_inspector(self, task: str | None = None) -> list[tuple[str, int, int]]:
        """(inspector version, gold items it vetted, of them answered as the gold label), for
        the rules inspector: "rules" for the plain rules, "inspector-vN" for a fitted model.

        The version is the run's (`inspector_version` in its params) or, for a run recorded
        without it, the one its final step records. An item vetted twice by one version
        counts once, by its newest trajectory; no verdict counts as disagreement. Gold items
        are few, so their trajectories are read here rather than aggregated in SQL."""
        C, Tr, R = m.Candidate, m.Trajectory, m.AgentRun
        with self._ro() as s:
            runs = {r.id: r for r in s.scalars(select(R).where(R.policy == "rules"))}
            if not runs:
                return []
            q = (
                select(Tr.id, Tr.run_id, Tr.candidate_id, Tr.verdict, C.gold_label)
                .join(C, C.id == Tr.candidate_id)
                .where(C.is_gold.is_(True), C.gold_label.in_(m.LABELS))
                .where(Tr.run_id.in_(list(runs)), Tr.state != "running")
                .order_by(Tr.id)
            )
            if task is not None:
                q = q.join(m.Task, m.Task.id == C.task_id).where(m.Task.name == task)
            rows = s.execute(q).all()
            unknown = [
                tid
                for tid, rid, *_ in rows
                if runs[rid].model and "inspector_version" not in (runs[rid].params or {})
            ]
            from_steps: dict[int, Any] = {}
            for j in range(0, len(unknown), 500):
                q = select(Tr.id, Tr.steps).where(Tr.id.in_(unknown[j : j + 500]))
                for tid, steps in s.execute(q):
                    last = (steps or [{}])[-1] or {}
                    from_steps[tid] = (last.get("measurements") or {}).get("inspector_version")
        newest: dict[tuple[str, int], bool] = {}
        for tid, rid, cid, verdict, gold in rows:
            run = runs[rid]
            v = (run.params or {}).get("inspector_version", from_steps.get(tid))
            if v is not None:
                version = f"inspector-v{int(v)}"
            else:
                version = "rules" if not run.model else str(run.model)
            newest[(version, cid)] = verdict == gold  # rows come oldest first
        out: dict[str, list[int]] = {}
        for (version, _), agree in newest.items():
            n = out.setdefault(version, [0, 0])
            n[0] += 1
            n[1] += int(agree)

        def order(v: str) -> tuple[int, int, str]:
            tag = v.removeprefix("inspector-v")
            return (0, 0, v) if v == "rules" else (1, int(tag), v) if tag.isdigit() else (2, 0, v)

        return [(v, n, a) for v, (n, a) in sorted(out.items(), key=lambda kv: order(kv[0]))]


def _task_quantiles(s: Session, tid: int, experts: dict[int, str]):
    """`_seconds_quantiles` for one task: its timed reviews' seconds are read once (one pass
    over the task's candidates and their reviews) and ranked here, where a window query
    per figure would walk them twice."""
    q = text(  # the timed reviews (m.TIMED) of the task
        "SELECT r.expert_id, r.seconds FROM review r JOIN candidate c ON c.id = r.candidate_id"
        " WHERE c.task_id = :tid AND r.seconds IS NOT NULL AND r.action != 'undo'"
    )
    by_expert: dict[int, list[float]] = {}
    for eid, sec in s.execute(q, {"tid": tid}):
        by_expert.setdefault(eid, []).append(float(sec))
    per: dict[str, dict[str, float]] = {}
    for eid, xs in by_expert.items():
        xs.sort()
        n = len(xs)
        per[experts.get(eid, "?")] = {
            "n": n, "min": xs[0], "q1": xs[(n - 1) // 4], "median": xs[(n - 1) // 2],
            "q3": xs[3 * (n - 1) // 4], "max": xs[-1],
        }  # fmt: skip
    every = sorted(x for xs in by_expert.values() for x in xs)
    return dict(sorted(per.items())), every[(len(every) - 1) // 2] if every else None
