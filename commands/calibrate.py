"""`launch.py calibrate`: refit the inspector, or a model run's confidence, on expert labels.

`launch.py calibrate` refits the rule-based inspector on the store's labels: per task a
learned model blended with the plain rules at the weight the evidence supports (0, the
rules, while it is thin). It adopts the version (`--if-better`: only where a task's blend
moved, as the app's learning schedule does) and re-scores the pending candidates with it
(`annotate.learning.schedule`), or, with `--run`, calibrates the confidence of one model run
(hf/vllm/openai) against the experts' decisions."""

from __future__ import annotations

import argparse
import sys

from annotate.learning.fit import NoLabels, cv_table, inspector_dir
from annotate.learning.run_calibration import CalibrationError, calibrate_run
from annotate.learning.run_calibration import cv_table as run_cv_table
from annotate.learning.schedule import learn
from commands import flags
from db.store import DEFAULT_DB


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=DEFAULT_DB, help="Store (file or SQLAlchemy URL).")
    parser.add_argument(
        "--out", default=str(inspector_dir()), help="Folder for the model JSON (the app's too)."
    )
    parser.add_argument(
        "--min-labels",
        type=flags.at_least(1),
        default=50,
        help="Labels per task before a combiner is tried.",
    )
    parser.add_argument(
        "--folds", type=flags.at_least(2), default=5, help="Cross-validation folds."
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--if-better",
        action="store_true",
        help="Write a version only where a task's blend moved against the current one (as "
        "the app's learning schedule does); without it every task is fitted afresh from the "
        "plain rules and the version is written. Either way a task serves a learned model "
        "only at the weight its out-of-fold evidence supports (nested cross-validation "
        "grouped by object), and waits while it has too few labels of either class.",
    )
    add_run_arguments(parser)


def main(args: argparse.Namespace) -> int:
    from db.store import Store

    if getattr(args, "run", None) is not None:  # a model run's P(YES), not the inspector
        return calibrate_run_command(args)

    store = Store(args.db, create=False)
    try:
        done = learn(store, args.out, force=not getattr(args, "if_better", False), min_labels=args.min_labels,
                     folds=args.folds, seed=args.seed, actor="calibrate")  # fmt: skip
    except NoLabels as exc:
        print(f"calibrate: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    for p in done.problems:
        print(f"calibrate: skipped {p}", file=sys.stderr)
    if done.model is None:
        print(f"calibrate: {done.labels} labelled decisions; {done.in_words()}")
        for line in done.per_task():  # what waited, what was kept, and why
            print(f"calibrate: {line}")
        return 0
    tag, path = done.model.tag, done.path
    print(f"calibrate: {done.labels} labelled decisions; per task the weight on the learned "
          "model, the plain rules and what serves now on objects held out of the fit, and "
          "what was blended, kept or waited and why:")  # fmt: skip
    print(cv_table(done.model))
    print(f"calibrate: saved {tag} to the store and {path}")
    print(f"calibrate: {done.rescored} pending candidates re-scored by {tag} from their stored "
          f"inputs ({done.flips} verdicts flipped); the queue re-ranks")  # fmt: skip
    print(f"calibrate: vet --db uses the store's {tag} by default (--model none: the plain rules)")
    return 0


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--run",
        type=int,
        default=None,
        help="Calibrate this agent run's P(YES) (hf/vllm/openai) instead of the inspector.",
    )


def calibrate_run_command(args: argparse.Namespace) -> int:
    from db.store import Store

    store = Store(args.db, create=False)
    try:
        entry = calibrate_run(store, args.run, args.folds, args.seed)
    except CalibrationError as exc:
        print(f"calibrate: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    print(f"calibrate: run #{entry['run']} ({entry['policy']}/{entry['model']}): ")
    print(f"{entry['n']} labelled trajectories; cross-validated, raw P(YES) -> calibrated:")
    print(run_cv_table(entry))
    print(
        "calibrate: stored with the run; the hand-off queue now ranks it by the calibrated P(YES)"
    )
    return 0
