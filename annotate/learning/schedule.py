"""Learning while experts work: the schedule that fits the next inspector version in a
separate process, adopts per task only what the labels support, and re-scores the pending
candidates with it.

When: after `learn_every` distinct new expert labels (a team setting beside `audit_rate`,
overlap and gold_rate; default 100; 0 switches the schedule off) and whenever an admin asks
(the Dashboard's Calibrate button). Recording a label only notes the (candidate, label)
pair (`note_labels`, called by `annotate.review`): a pair the last fit already saw, or one
noted since, counts once, so taking a decision back and making it again (accept, undo,
accept...) starts nothing. The fit runs in a child process (`multiprocessing`, spawned,
under a lower CPU priority), one at a time per store, so it never holds the server's
interpreter while experts wait; a fit that fails, crashes or is killed is logged and
recorded in the `learning` setting and the audit log, and the current version stays (the
adoption is one transaction, written only at the very end). An in-memory store, which no
other process can open, is fitted in a thread instead.

What is adopted (`learn`): the fit reads every expert label in the store and, per task,
blends as `annotate.learning.evidence.blend_task` says: a task with too few labels of
either class waits (and says what for); otherwise a learned model is served pooled with the
plain rules at the weight the out-of-fold evidence supports (folds grouped by object; 0,
the rules, with little evidence, growing with it), where nested cross-validation shows the
blend no worse than the rules. A version is adopted when at least one task's blend moves a
labelled P(YES) by `evidence.MOVED` or more against what serves now; else nothing is
written but the outcome. `launch.py calibrate` (`force`) fits every task afresh from the
plain rules (a task that waits serves them) and always writes a version.

On adoption (`Store.adopt_scores`, one transaction): the version becomes the store's
inspector model (`inspector_model`, what `vet --db` and the app's vetting use), every
pending candidate whose trajectory stored the model's inputs is re-scored from them
(`annotate.learning.rescore`, the agent is not rerun) and gets the new P(YES), the verdict it
implies, its queue priority (so the queue re-ranks) and `scored_by` = the version; the
audit log records the adoption: version, per task the weight, the labels, positives and
objects it rests on, the out-of-fold scores before and after, how many candidates were
re-scored and how many verdicts flipped (per task too). Every outcome (adopted, not
adopted, failed) is also the `learning` setting the Dashboard reads, with per task what
was blended, what waited and why.
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
from annotate.learning.fit import NoLabels, fit, inspector_dir, labelled_from_store
from annotate.learning.rescore import rescore_store
from annotate.vetting.into_store import INSPECTOR_SETTING

log = logging.getLogger(__name__)

LEARN_EVERY = 100  # distinct new expert labels between two fits
LEARN_EVERY_SETTING = "learn_every"  # the team setting beside audit_rate, overlap, gold_rate
STATUS_SETTING = "learning"  # the last fit's outcome (labels it saw, adopted or why not)


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


def served(tm: TaskModel) -> str:
    """What a task serves, in words: 'rules', or the learned kind and its weight."""
    return "rules" if tm.kind == "rules" else f"{tm.kind} at weight {tm.weight:.2f}"


def task_report(model: InspectorModel, current: InspectorModel | None) -> dict[str, dict]:
    """Per task the fit saw: labels, positives and objects, what served before and after
    (with out-of-fold scores), the weight, the status (blended, rules, waited), why, the
    nested F1 change with its interval, and whether it changed (a labelled P(YES) moved by
    at least `evidence.MOVED`)."""
    from annotate.learning.evidence import MOVED
    from annotate.learning.fit import after_scores

    cur = current.tasks if current is not None else {}
    out = {}
    for task, r in (model.info.get("cv") or {}).items():
        old = cur.get(task, TaskModel("rules"))
        new = model.tasks.get(task, TaskModel("rules"))
        before = r.get("served") or r["rules"]
        after = after_scores(r) if r.get("status") != "waited" else before
        moved = float(r.get("moved", 0.0)) >= MOVED
        out[task] = {"n": r["n"], "positives": r.get("positives"),
                     "negatives": r.get("negatives"),
                     "positive_objects": r.get("positive_objects"),
                     "negative_objects": r.get("negative_objects"),
                     "status": r.get("status", ""), "why": r.get("why", ""),
                     "gain": r.get("gain"), "weight": new.weight if new.kind != "rules" else 0.0,
                     "weight_before": old.weight if old.kind != "rules" else 0.0,
                     "rules": r["rules"], "before": {**before, "kind": served(old)},
                     "after": {**after, "kind": served(new)},
                     "model": served(new) if moved else f"kept {served(old)}",
                     "changed": moved}  # fmt: skip
    return out


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
    seen: list[tuple[int, str]] = field(default_factory=list)  # (candidate, label) fitted on

    def in_words(self) -> str:
        waited = [t for t, r in self.tasks.items() if r.get("status") == "waited"]
        tail = f"; waiting for labels: {', '.join(waited)}" if waited else ""
        if not self.adopted:
            return f"inspector not changed ({self.why}; {self.labels} labels){tail}"
        moved = ", ".join(f"{t} {r['model']}" for t, r in self.tasks.items() if r["changed"])
        return (f"adopted inspector-v{self.version} from {self.labels} labels ({moved or 'no task changed'}); "
                f"{self.rescored} pending candidates re-scored, {self.flips} verdicts flipped{tail}")  # fmt: skip

    def per_task(self) -> list[str]:
        """One line per task: what was adopted, kept or waited, and why."""
        return [f"{t}: {r.get('status') or r['model']} ({r['model']}); {r.get('why', '')}".rstrip("; ")
                for t, r in sorted(self.tasks.items())]  # fmt: skip


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
    """Fit the next inspector version, adopt it where a task's blend moved against the
    current version (with `force`: fitted from the plain rules and written even where
    nothing moved, what `launch.py calibrate` asks), re-score the pending candidates with
    it and record the outcome."""
    from annotate.learning.fit import expert_labels

    examples, problems = labelled_from_store(store)
    if not examples:
        raise NoLabels("no labelled decisions in the store to learn from")
    seen = [(int(c.id), str(lab)) for c, lab in expert_labels(store)]
    current = current_model(store)
    version = (current.version if current is not None else 0) + 1
    model = fit(examples, version, min_labels, folds, seed,
                current=None if force else current)  # fmt: skip
    report = task_report(model, current)
    changed = force or any(r["changed"] for r in report.values())
    outcome = Outcome(changed, model.version if changed else getattr(current, "version", None),
                      len(examples), report, problems=problems, seen=seen)  # fmt: skip
    if not changed:
        outcome.why = "no task's evidence supported a change"
        _record(store, outcome, actor)
        return outcome
    folder = Path(inspector_dir() if out is None else out)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{model.tag}.json"
    payload = model.to_json()
    path.write_text(json.dumps(payload, indent=1))
    r = rescore_store(store, model)
    outcome.path, outcome.flips, outcome.model = str(path), r.flips, model
    for t, rec in report.items():  # what the version changed, task by task
        mine = np.array([x == t for x in r.tasks], bool)
        rec["flips"] = int(np.sum((r.old[mine] > 0.5) != (r.new[mine] > 0.5)))
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


NICE = 10  # the fit process's CPU priority below the server's


def _fit_in_child(
    url: str, out: str, actor: str, force: bool, fit_args: dict[str, Any], conn: Any
) -> None:
    """The fit, in its own process: it opens the store itself, fits, adopts and records,
    then sends the outcome (or the error) back."""
    import os

    try:
        os.nice(NICE)
    except (AttributeError, OSError):
        pass
    from db.store import Store

    try:
        store = Store(url, create=False)
        try:
            got: tuple[str, Any] = ("ok", learn(store, out, force=force, actor=actor, **fit_args))
        finally:
            store.close()
    except Exception as exc:  # reported to the server, which records it
        got = ("error", f"{type(exc).__name__}: {exc}")
    conn.send(got)
    conn.close()


class Learner:
    """The schedule of one store: notes new labels, runs one fit at a time, in a child
    process (an in-memory store: a thread; `background=False`: inline, for the bench and the
    command line)."""

    def __init__(self, store: Any, out: str | Path, *, background: bool = True, **fit_args: Any):
        self.store, self.out, self.background, self.fit_args = (
            store,
            Path(out),
            background,
            fit_args,
        )
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None  # the fit's watcher, or the fit itself
        self._proc: Any = None  # the fit's process, while one runs
        self.last: Outcome | None = None
        self.error: str | None = None
        self.every = learn_every(store)
        seen = (status(store) or {}).get("expert_labels", 0)
        # labels recorded while no server ran: counted once, as the store counts them
        self._backlog = max(0, store.count_expert_labels() - int(seen or 0))
        self._seen: set[tuple[int, str]] = set()  # (candidate, label) the last fit read
        self._fresh: set[tuple[int, str]] = set()  # distinct pairs noted since

    @property
    def running(self) -> bool:
        t = self._thread
        return t is not None and t.is_alive()

    @property
    def pending(self) -> int:
        """Distinct new labels counted towards the next fit."""
        return self._backlog + len(self._fresh)

    def note_labels(self, n: int = 1, pairs: Any = None) -> bool:
        """Note new labels (the request path: no query, no fit): `pairs` of (candidate id,
        label) count only where neither the last fit nor an earlier note saw them; without
        pairs, `n` labels count. Start a fit when `learn_every` have come in; whether one
        started."""
        with self._lock:
            if pairs is None:
                self._backlog += n
            else:
                self._fresh.update(p for p in pairs if p not in self._seen)
            due = self.every > 0 and self.pending >= self.every
        return due and self.start("learning")

    def _use_process(self) -> bool:
        url = getattr(self.store, "url", None)
        memory = getattr(self.store, "is_sqlite", False) and getattr(url, "database", None) in (
            None, "", ":memory:")  # fmt: skip
        return url is not None and not memory

    def start(self, actor: str = "learning", *, force: bool = False) -> bool:
        """Fit now (in a child process unless `background` is off); False when a fit is
        already running (it will see the labels this one would have)."""
        import multiprocessing as mp

        with self._lock:
            if self.running:
                return False
            self._backlog = 0
            self._seen |= self._fresh
            self._fresh = set()
            if not self.background:
                self._thread = None
            elif self._use_process():
                ctx = mp.get_context("spawn")  # a fresh interpreter: no server threads forked
                recv, send = ctx.Pipe(duplex=False)
                url = self.store.url.render_as_string(hide_password=False)
                self._proc = ctx.Process(
                    target=_fit_in_child, name="loupe-learning", daemon=True,
                    args=(url, str(self.out), actor, force, self.fit_args, send),
                )  # fmt: skip
                self._proc.start()
                send.close()
                self._thread = threading.Thread(target=self._watch, args=(self._proc, recv, actor),
                                                name="loupe-learning-watch", daemon=True)  # fmt: skip
            else:
                self._thread = threading.Thread(
                    target=self._run, args=(actor, force), name="loupe-learning", daemon=True
                )
            thread = self._thread
        if thread is None:
            self._run(actor, force)
        else:
            thread.start()
        return True

    def join(self, timeout: float | None = None) -> None:
        t = self._thread
        if t is not None:
            t.join(timeout)

    def _watch(self, proc: Any, conn: Any, actor: str) -> None:
        """Wait for the child's answer; a child that dies without one failed."""
        got = None
        try:
            while got is None:
                if conn.poll(0.5):
                    try:
                        got = conn.recv()
                    except (EOFError, OSError):
                        break
                elif not proc.is_alive() and not conn.poll(0):
                    break
        finally:
            conn.close()
            proc.join()
            self._proc = None
        if got is not None and got[0] == "ok":
            self._done(got[1])
        else:
            why = got[1] if got is not None else (
                f"the fit process ended without an answer (exit code {proc.exitcode})")  # fmt: skip
            self._failed(actor, why)

    def _run(self, actor: str, force: bool) -> None:
        try:
            got = learn(self.store, self.out, force=force, actor=actor, **self.fit_args)
        except Exception as exc:  # serving goes on; the current version stays
            log.exception("learning: the fit failed")
            self._failed(actor, f"{type(exc).__name__}: {exc}")
        else:
            self._done(got)

    def _done(self, outcome: Outcome) -> None:
        with self._lock:
            self.last, self.error = outcome, None
            self._seen = set(map(tuple, outcome.seen))
            self._fresh -= self._seen
        self._reread_every()

    def _failed(self, actor: str, error: str) -> None:
        log.error("learning: the fit failed (%s); the current inspector version stays", error)
        self.error = error
        try:
            _record(self.store, Outcome(False, None, 0, why="the fit failed"), actor,
                    error=f"the fit failed: {error}")  # fmt: skip
        except Exception:
            log.exception("learning: could not record the failed fit")
        self._reread_every()

    def _reread_every(self) -> None:
        try:
            self.every = learn_every(self.store)  # a changed setting applies from now on
        except Exception:
            log.exception("learning: unreadable %s; keeping %d", LEARN_EVERY_SETTING, self.every)


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


def note_labels(
    store: Any, n: int = 1, *, candidate: int | None = None, label: str | None = None
) -> None:
    """What recording a label calls: the (candidate, label) pair noted, and a background
    fit when enough distinct new ones are due; a store with no schedule attached (the
    command line) does nothing."""
    got = _LEARNERS.get(store)
    if got is None:
        return
    if candidate is not None and label is not None:
        got.note_labels(pairs=[(int(candidate), str(label))])
    else:
        got.note_labels(n)
