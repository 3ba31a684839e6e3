"""Learning while experts work: the schedule that fits the next inspector version, adopts it
only where grouped cross-validation says it beats the current one, and re-scores the
pending candidates with it.

When: after every `learn_every` new expert labels (a team setting beside `audit_rate`,
overlap and gold_rate; default 100; 0 switches the schedule off) and whenever an admin asks
(the Dashboard's Calibrate button). Recording a label only bumps a counter
(`note_labels`, called by `annotate.review`); the fit runs in a background thread, one at a
time per store, while the app keeps serving. A fit that fails is logged and recorded in the
`learning` setting and the audit log, and the current version stays.

What is adopted (`learn`): the candidate is fitted on every expert label in the store as
`launch.py calibrate` fits (`annotate.inspector_fit.fit`: per task, the rules or a model
that beat them under cross-validation with folds grouped by object). Per task it is then
compared on the same labels with the current version: the candidate's out-of-fold log loss
must be clearly lower (`MARGIN`) and its F1 no lower, or the task keeps its current model.
The current version is scored with its fixed parameters on labels it was partly fitted on,
so the comparison leans towards keeping it: a new version must earn its place. A current
model that now scores worse than the plain rules on the labels falls back to them, so no
task is ever served worse than the plain rules would serve it. The version is adopted when
at least one task changes; else nothing is written but the outcome.

On adoption (`Store.adopt_scores`, one transaction): the version becomes the store's
inspector model (`inspector_model`, what `vet --db` and the app's vetting use), every
pending candidate whose trajectory stored the model's inputs is re-scored from them
(`annotate.rescore`, the agent is not rerun) and gets the new P(YES), the verdict it
implies, its queue priority (so the queue re-ranks) and `scored_by` = the version; the
audit log records the adoption: version, cross-validated log loss and F1 per task before
and after, how many candidates were re-scored and how many verdicts flipped. Every outcome
(adopted, not adopted, failed) is also the `learning` setting the Dashboard reads.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agent.policies.rules.learned import InspectorModel, ModelError, TaskModel
from annotate.inspector_fit import Example, NoLabels, fit, inspector_dir, labelled_from_store
from annotate.rescore import rescore_store
from annotate.vetting.into_store import INSPECTOR_SETTING

log = logging.getLogger(__name__)

LEARN_EVERY = 100  # new expert labels between two fits
LEARN_EVERY_SETTING = "learn_every"  # the team setting beside audit_rate, overlap, gold_rate
STATUS_SETTING = "learning"  # the last fit's outcome (labels it saw, adopted or why not)
MARGIN = 0.05  # a task's new model must lower the log loss by this share, F1 no lower


def learn_every(store: Any) -> int:
    """The team's `learn_every` (new labels between two fits; 0: only on request)."""
    v = store.setting(LEARN_EVERY_SETTING, LEARN_EVERY)
    try:
        n = int(v)
    except (TypeError, ValueError):
        raise ValueError(
            f"team setting {LEARN_EVERY_SETTING} = {v!r} is not a whole number"
        ) from None
    if n < 0:
        raise ValueError(f"team setting {LEARN_EVERY_SETTING} = {n} is negative")
    return n


def current_model(store: Any) -> InspectorModel | None:
    """The store's adopted inspector version, or None (the plain rules)."""
    payload = store.setting(INSPECTOR_SETTING)
    if not payload:
        return None
    try:
        return InspectorModel.from_json(payload, f"the store's {INSPECTOR_SETTING} setting")
    except ModelError:
        log.warning("learning: the stored inspector model is unreadable; comparing with the rules")
        return None


def _scores(p: np.ndarray, y: np.ndarray) -> dict[str, float]:
    from annotate.inspector_fit import _f1, _log_loss

    return {"log_loss": _log_loss(p, y), "f1": _f1(p, y)}


def _task_p(tm: TaskModel, ex: list[Example]) -> np.ndarray:
    return np.array([tm.p_yes(e.x, e.m, e.p_rules, e.capped) for e in ex])


def _beats(new: dict[str, float], old: dict[str, float], margin: float = MARGIN) -> bool:
    return new["log_loss"] < (1 - margin) * old["log_loss"] and new["f1"] >= old["f1"]


def choose(
    candidate: InspectorModel, current: InspectorModel | None, examples: list[Example]
) -> tuple[InspectorModel, dict[str, dict[str, Any]], bool]:
    """Per task, the candidate's model where it beats the current one on `examples`, else
    the current one (or the rules, where the current one now scores worse than them).
    Returns the version to adopt, per task {"before", "after", "model"} and whether any task
    changed (adopt only then)."""
    by: dict[str, list[Example]] = {}
    for e in examples:
        by.setdefault(e.task, []).append(e)
    cur_tasks = current.tasks if current is not None else {}
    tasks: dict[str, TaskModel] = dict(cur_tasks)
    info = {t: dict(r) for t, r in (candidate.info.get("cv") or {}).items()}
    report: dict[str, dict[str, Any]] = {}
    changed = False
    for task, ex in sorted(by.items()):
        y = np.array([int(e.label) for e in ex])
        r = info.get(task) or {}
        rules = r.get("rules") or _scores(np.array([e.p_rules for e in ex]), y)
        cur_tm = cur_tasks.get(task, TaskModel("rules"))
        before = rules if cur_tm.kind == "rules" else _scores(_task_p(cur_tm, ex), y)
        keep, kept_kind = cur_tm, cur_tm.kind
        if cur_tm.kind != "rules" and (
            before["log_loss"] > rules["log_loss"] or before["f1"] < rules["f1"]
        ):
            keep, kept_kind, base = TaskModel("rules"), "rules", rules  # no worse than the rules
        else:
            base = before
        chosen = r.get("chosen", "rules")
        after_new = r.get(chosen) or rules
        if chosen != "rules" and _beats(after_new, base):
            tasks[task], after, how = candidate.tasks[task], after_new, chosen
        else:
            tasks[task], after, how = keep, base, f"kept {kept_kind}"
            if task in info:  # the version's own record says what it serves, and why
                info[task]["chosen"] = "kept"
                info[task]["kept"] = {**base, "kind": kept_kind}
        moved = (tasks[task].kind, vars(tasks[task])) != (cur_tm.kind, vars(cur_tm))
        changed = changed or moved
        report[task] = {"n": len(ex), "before": {**before, "kind": cur_tm.kind},
                        "after": {**after, "kind": tasks[task].kind}, "model": how,
                        "changed": moved}  # fmt: skip
    version = (current.version if current is not None else 0) + 1
    model = InspectorModel(version, tasks, candidate.created, {**candidate.info, "cv": info})
    return model, report, changed


@dataclass
class Outcome:
    """What one fit did: adopted (`version`) or not (`why`), with the per-task comparison."""

    adopted: bool
    version: int | None  # the adopted version, or the current one when not adopted
    labels: int  # labelled decisions the fit saw
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    rescored: int = 0
    flips: int = 0
    why: str = ""
    path: str | None = None
    problems: list[str] = field(default_factory=list)
    model: InspectorModel | None = None  # the version adopted (None: none was)

    def in_words(self) -> str:
        if not self.adopted:
            return f"inspector not changed ({self.why}; {self.labels} labels)"
        moved = ", ".join(f"{t} {r['model']}" for t, r in self.tasks.items() if r["changed"])
        return (f"adopted inspector-v{self.version} from {self.labels} labels ({moved}); "
                f"{self.rescored} pending candidates re-scored, {self.flips} verdicts flipped")  # fmt: skip


def _stamp() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def learn(
    store: Any,
    out: str | Path | None = None,
    *,
    force: bool = False,
    min_labels: int = 50,
    folds: int = 5,
    seed: int = 0,
    actor: str = "learning",
) -> Outcome:
    """Fit the next inspector version, adopt it where it beats the current one (or, with
    `force`, adopt the candidate as fitted: what `launch.py calibrate` asks), re-score the
    pending candidates with it and record the outcome."""
    examples, problems = labelled_from_store(store)
    if not examples:
        raise NoLabels("no labelled decisions in the store to learn from")
    current = current_model(store)
    version = (current.version if current is not None else 0) + 1
    candidate = fit(examples, version, min_labels, folds, seed)
    model, report, changed = choose(candidate, current, examples)
    if force:  # the candidate as fitted: each task still no worse than the rules
        model, changed = candidate, True
        for t, rep in report.items():
            r = candidate.info["cv"].get(t) or {}
            got = r.get(r.get("chosen", "rules")) or r.get("rules") or rep["before"]
            rep.update(after={**got, "kind": candidate.tasks[t].kind}, changed=True,
                       model=r.get("chosen", "rules"))  # fmt: skip
    outcome = Outcome(changed, model.version if changed else getattr(current, "version", None),
                      len(examples), report, problems=problems)  # fmt: skip
    if not changed:
        outcome.why = "no task's model beat the current one under grouped cross-validation"
        _record(store, outcome, actor)
        return outcome
    folder = Path(inspector_dir() if out is None else out)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{model.tag}.json"
    payload = model.to_json()
    path.write_text(json.dumps(payload, indent=1))
    r = rescore_store(store, model)
    outcome.path, outcome.flips, outcome.model = str(path), r.flips, model
    event = {"tag": model.tag, "labels": len(examples), "flips": r.flips, "kept": r.kept,
             "cv": report, "forced": force}  # fmt: skip
    outcome.rescored = store.adopt_scores(
        r.ids.tolist(), r.new.tolist(), model.version,
        setting=(INSPECTOR_SETTING, {**payload, "path": str(path)}), event=event, actor=actor,
    )  # fmt: skip
    _record(store, outcome, actor)
    log.info("learning: %s", outcome.in_words())
    return outcome


def _record(store: Any, outcome: Outcome, actor: str, error: str | None = None) -> None:
    status = {"at": _stamp(), "labels": outcome.labels, "adopted": outcome.adopted,
              "version": outcome.version, "rescored": outcome.rescored, "flips": outcome.flips,
              "why": outcome.why, "said": outcome.in_words() if error is None else error,
              "error": error, "cv": outcome.tasks,
              "expert_labels": store.count_expert_labels()}  # fmt: skip
    store.set_setting(STATUS_SETTING, status, actor=actor)


def status(store: Any) -> dict[str, Any] | None:
    """The last fit's outcome as recorded (None before the first)."""
    return store.setting(STATUS_SETTING)


class Learner:
    """The schedule of one store: counts new labels, runs one fit at a time, in a
    background thread (or inline, `background=False`: the bench and the command line)."""

    def __init__(self, store: Any, out: str | Path, *, background: bool = True, **fit_args: Any):
        self.store, self.out, self.background, self.fit_args = (
            store,
            Path(out),
            background,
            fit_args,
        )
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.last: Outcome | None = None
        self.error: str | None = None
        self.every = learn_every(store)
        seen = (status(store) or {}).get("expert_labels", 0)
        self._new = max(0, store.count_expert_labels() - int(seen or 0))

    @property
    def running(self) -> bool:
        t = self._thread
        return t is not None and t.is_alive()

    def note_labels(self, n: int = 1) -> bool:
        """Count `n` new expert labels (the request path: no query, no fit); start a fit
        when `learn_every` of them have come in since the last. Whether one started."""
        with self._lock:
            self._new += n
            due = self.every > 0 and self._new >= self.every
        return due and self.start("learning")

    def start(self, actor: str = "learning", *, force: bool = False) -> bool:
        """Fit now (in the background unless `background` is off); False when a fit is
        already running (it will see the labels this one would have)."""
        with self._lock:
            if self.running:
                return False
            self._new = 0
            if not self.background:
                self._thread = None
            else:
                self._thread = threading.Thread(
                    target=self._run, args=(actor, force), name="loupe-learning", daemon=True
                )
        if self._thread is None:
            self._run(actor, force)
        else:
            self._thread.start()
        return True

    def join(self, timeout: float | None = None) -> None:
        t = self._thread
        if t is not None:
            t.join(timeout)

    def _run(self, actor: str, force: bool) -> None:
        try:
            self.last, self.error = learn(self.store, self.out, force=force, actor=actor,
                                          **self.fit_args), None  # fmt: skip
        except Exception as exc:  # serving goes on; the current version stays
            log.exception("learning: the fit failed; the current inspector version stays")
            self.error = f"{type(exc).__name__}: {exc}"
            try:
                _record(self.store, Outcome(False, None, 0, why="the fit failed"), actor,
                        error=f"the fit failed: {self.error}")  # fmt: skip
            except Exception:
                log.exception("learning: could not record the failed fit")
        finally:
            try:
                self.every = learn_every(self.store)  # a changed setting applies from now on
            except Exception:
                log.exception(
                    "learning: unreadable %s; keeping %d", LEARN_EVERY_SETTING, self.every
                )


_LEARNERS: weakref.WeakKeyDictionary[Any, Learner] = weakref.WeakKeyDictionary()


def attach(store: Any, out: str | Path, **kwargs: Any) -> Learner:
    """Start the schedule for `store` (the app does at start): labels recorded through
    `annotate.review` from now on count towards the next fit."""
    learner = _LEARNERS.get(store)
    if learner is None:
        learner = _LEARNERS[store] = Learner(store, out, **kwargs)
    return learner


def learner(store: Any) -> Learner | None:
    """The store's schedule, if one was attached."""
    return _LEARNERS.get(store)


def note_labels(store: Any, n: int = 1) -> None:
    """What recording a label calls: a counter, and a background fit when one is due; a
    store with no schedule attached (the command line) does nothing."""
    got = _LEARNERS.get(store)
    if got is not None:
        got.note_labels(n)
