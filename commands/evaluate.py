"""`launch.py evaluate`: score one or more policies on a labelled set, side by side.

    python launch.py evaluate --catalog data/bench/test/catalog.csv --policy rules --out eval/
    python launch.py evaluate --catalog labelled.csv --results vet=results.jsonl --out eval/

What is measured and written is `training.evaluate`'s; this module holds the flags.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from commands import UsageError, flags
from training.evaluate import evaluate, markdown_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--catalog", action="append", default=[], help="Labelled catalogue CSV (repeatable)."
    )
    parser.add_argument(
        "--input",
        nargs="+",
        default=[],
        help="RL export / SpecVI-Bench parquet and other labelled inputs.",
    )
    parser.add_argument("--task", default=None, help="Task for inputs that carry none.")
    parser.add_argument(
        "--policy",
        action="append",
        default=[],
        help="Policy to run: rules, hf:DIR, vllm:DIR, openai:MODEL@URL (repeatable).",
    )
    parser.add_argument(
        "--results",
        action="append",
        default=[],
        help="Existing results JSONL from `vet`, as NAME=PATH or PATH (repeatable).",
    )
    parser.add_argument(
        "--by", default=None, help="Also report per value of this catalogue column (e.g. snr)."
    )
    parser.add_argument(
        "--workers", type=flags.at_least(1), default=None, help="rules: worker processes."
    )
    parser.add_argument(
        "--max-turns", type=flags.at_least(1), default=None, help="Assistant turns per candidate."
    )
    parser.add_argument("--out", default="eval", help="Output folder.")


def main(args: argparse.Namespace) -> int:
    sources = list(args.catalog) + list(args.input)
    if not sources:
        raise UsageError("give a labelled set with --catalog or --input")
    if not args.policy and not args.results:
        args.policy = ["rules"]
    try:
        rep = evaluate(
            sources,
            args.policy,
            args.results,
            Path(args.out),
            task=args.task,
            group_by=args.by,
            args=args,
        )
    except (ValueError, OSError, RuntimeError) as exc:
        print(f"evaluate: {exc}", file=sys.stderr)
        return 2
    print(markdown_table(rep["overall"]))
    print(f"evaluate: wrote {Path(args.out) / 'report.md'} and metrics.json")
    return 0
