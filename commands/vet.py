"""`launch.py vet`: run an agent policy over candidates, writing JSONL or, with --db, the store.

    python launch.py vet --catalog candidates.csv --policy rules --out results.jsonl
    python launch.py vet --input 'spectra/*.fits' --task wd --policy openai \\
        --base-url http://localhost:8000/v1 --model spec-o3-7b --concurrency 32
    python launch.py vet --input "data/*.fits" --task cv --policy rules --db loupe.db
    python launch.py vet --db loupe.db --task cv --ray local   # the store's pending ones

Resumable: the output (--out, or the store with --db) is read first and every (id, task)
already recorded is skipped, so a run killed at any moment (even kill -9) continues where it
stopped, with no duplicates and no gaps (`annotate.vetting`).

With --db the candidates of --catalog/--input are ingested first, by `ingest`'s rules: an id
the store already gives to another spectrum is refused as `ingest` refuses it (exit status
1; `--keep-first` lets the stored one stand without failing). Without
--catalog/--input the candidates are the store's own (optionally only those of --task) that
this run has not recorded yet. With the rules policy the store's current inspector model
(`launch.py calibrate`) is used unless `--model FILE` names another or `--model none` asks
for the plain rules.

A bad input line (a missing or unreadable file, an unknown task, an id given to two
different spectra) is reported on stderr with its file, line and reason, and the rest is
vetted; `--strict` stops at the first one instead. A candidate whose spectrum cannot be read
when vetted is recorded as a trajectory with state "error" and the reason, so a resume does
not retry it forever. Exit status: 0 when every line was vetted, 1 when some failed, 2 for a
usage or fatal error (a Ray run that stopped part-way says so, and that a re-run resumes).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from agent.errors import LoupeError
from agent.loop import DEFAULT_MAX_TURNS
from annotate.vetting.runner import POLICY_CHOICES, VetOptions
from commands import flags

_DEFAULT = VetOptions()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_argument_group("candidates")
    src.add_argument(
        "--catalog",
        action="append",
        default=[],
        metavar="CSV",
        help="catalogue CSV with columns path,task[,id,hdu,row,label] (repeatable)",
    )
    src.add_argument(
        "--input",
        nargs="+",
        action="extend",
        default=[],
        metavar="PATH",
        help="spectrum files, globs, folders or SpecVI-Bench parquet files",
    )
    src.add_argument(
        "--task",
        default=None,
        help="task for inputs that carry none: cv, carbon, s_type, m_giant, wd",
    )
    src.add_argument(
        "--limit", type=flags.at_least(1), default=None, help="vet at most this many candidates"
    )
    src.add_argument(
        "--strict",
        action="store_true",
        help="stop at the first bad input line instead of reporting it and vetting the rest",
    )

    pol = parser.add_argument_group("policy")
    pol.add_argument(
        "--policy", choices=POLICY_CHOICES, default="rules", help="backend that plays the agent"
    )
    pol.add_argument(
        "--model",
        default=None,
        help="checkpoint folder (hf, vllm), model name (openai) or inspector model JSON (rules)",
    )
    pol.add_argument(
        "--base-url",
        default=None,
        help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 "
        "(key from OPENAI_API_KEY or LOUPE_API_KEY)",
    )
    pol.add_argument(
        "--renderer",
        choices=["fast", "speco3"],
        default=None,
        help="zoom renderer (default: the policy's; speco3 for Spec-o3 weights)",
    )
    pol.add_argument(
        "--max-turns",
        type=flags.at_least(1),
        default=DEFAULT_MAX_TURNS,
        help="assistant turns per candidate (zooms + the answer)",
    )
    pol.add_argument(
        "--temperature", type=float, default=_DEFAULT.temperature, help="sampling temperature"
    )
    pol.add_argument(
        "--max-new-tokens",
        type=flags.at_least(1),
        default=_DEFAULT.max_new_tokens,
        help="token budget per assistant turn (model backends)",
    )
    pol.add_argument(
        "--samples",
        type=flags.at_least(1),
        default=_DEFAULT.samples,
        help="openai: answers sampled per final turn for agreement-based "
        "confidence when the server returns no logprobs",
    )
    pol.add_argument(
        "--timeout", type=float, default=_DEFAULT.timeout, help="openai: seconds per request"
    )

    par = parser.add_argument_group("throughput")
    par.add_argument(
        "--workers",
        type=flags.at_least(1),
        default=_DEFAULT.workers,
        help="rules: worker processes",
    )
    par.add_argument(
        "--concurrency",
        type=flags.at_least(1),
        default=_DEFAULT.concurrency,
        help="openai: requests in flight",
    )
    par.add_argument(
        "--batch-size",
        type=flags.at_least(1),
        default=_DEFAULT.batch_size,
        help="hf/vllm: episodes generated together",
    )

    out = parser.add_argument_group("output")
    out.add_argument(
        "--out", default="results.jsonl", help="JSONL file of trajectories (appended to; resumes)"
    )
    out.add_argument(
        "--db",
        default=None,
        metavar="URL",
        help="Record trajectories into this database (file or SQLAlchemy URL) "
        "instead of only writing JSONL.",
    )
    out.add_argument(
        "--keep-first",
        action="store_true",
        help="with --db: a line giving an id the store holds for another spectrum is "
        "skipped (the stored one stands) without failing the run (as `ingest --keep-first`)",
    )
    out.add_argument("--no-progress", action="store_true", help="no progress bar")

    ray = parser.add_argument_group("cluster (Ray)")
    ray.add_argument(
        "--ray",
        nargs="?",
        const="auto",
        default=None,
        metavar="ADDRESS",
        help="run on a Ray cluster: ADDRESS of its head (host:6379 or ray://host:10001), "
        "none for the cluster this node joined (RAY_ADDRESS or `ray start`), "
        "'local' to start one on this machine",
    )
    ray.add_argument(
        "--ray-actors",
        type=int,
        default=None,
        metavar="N",
        help="actors in the pool (default: rules one per CPU, vllm one per GPU, "
        "openai one per endpoint)",
    )


class Bar:
    """The run as it goes: a tqdm bar on stderr, and a line per candidate that failed."""

    def __init__(self, disable: bool):
        self.disable = disable
        self.bar: Any = None

    def start(self, stats) -> None:
        from tqdm import tqdm

        if stats.skipped:
            print(
                f"vet: {stats.skipped} of {stats.candidates} candidates already done; resuming",
                file=sys.stderr,
            )
        self.bar = tqdm(
            total=stats.todo,
            unit="spectrum",
            file=sys.stderr,
            disable=self.disable,
            dynamic_ncols=True,
            smoothing=0.1,
        )

    def update(self, t, stats) -> None:
        if t.state == "error" and t.error:
            self.bar.write(f"vet: {t.id} ({t.task}): {t.error}", file=sys.stderr)
        self.bar.set_postfix(stats.states, refresh=False)  # counts per state
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def main(args: argparse.Namespace) -> int:
    """0: every line vetted; 1: some input lines or candidates failed (each reported on
    stderr, the rest vetted); 2: a usage or fatal error, or any bad line with --strict."""
    from annotate.vetting.runner import policy_kwargs, read_inputs, summary

    opts = VetOptions.of(args)
    from_store = bool(args.db) and not (opts.catalog or opts.input)
    candidates, problems = [], []
    try:
        if from_store:
            from agent.formats.catalogue import normalise_task

            opts.task = normalise_task(opts.task)
        elif not (opts.catalog or opts.input):
            raise ValueError(
                "give candidates with --catalog CSV or --input PATH ... "
                "(or --db URL alone for the store's own)"
            )
        else:
            candidates, problems = read_inputs(opts)
            if problems and args.strict:
                raise ValueError(f"{problems[0]} (--strict: nothing vetted)")
        if not args.db and opts.policy == "rules" and str(opts.model or "").lower() == "none":
            opts.model = None  # without a store the plain rules are the default anyway
        policy_kwargs(opts)  # a missing --model or --base-url is said before any work
    except (ValueError, OSError) as exc:
        print(f"vet: {exc}", file=sys.stderr)
        return 2
    for err in problems:
        print(f"vet: skipped {err}", file=sys.stderr)
    bar = Bar(disable=args.no_progress)
    try:
        if args.db:
            stats, refused, total = _into_store(
                args, opts, candidates if not from_store else None, bar
            )
        else:
            stats, refused, total = _into_jsonl(args.out, opts, candidates, bar), 0, None
    except LoupeError as exc:  # a bad inspector model, Ray, an --out another run holds
        print(f"vet: {exc}", file=sys.stderr)
        return 2
    if stats is None:
        return 2
    print(summary(stats))
    if stats.n == 0:
        print(nothing_vetted(stats, args.db or args.out, opts, total))
    if problems:
        print(f"vet: {len(problems)} input line(s) skipped (listed above)", file=sys.stderr)
    return 1 if problems or refused or stats.states["error"] else 0


def nothing_vetted(stats: Any, where: str, opts: VetOptions, store_total: int | None) -> str:
    """Why a run vetted nothing, with the counts (`store_total`: the store's candidates, when
    the run took its candidates from the store)."""
    setup = f"policy {opts.policy}" + (f", model {opts.model}" if opts.model else "")
    again = "another --policy, --model or setting starts a new run that vets them again"
    if store_total is not None:
        which = f" for task {opts.task}" if opts.task else ""
        return (f"nothing to vet: all {store_total} candidates{which} in the store already have a "
                f"finished trajectory from a run like this one ({setup}); {again}")  # fmt: skip
    if stats.candidates and stats.skipped == stats.candidates:
        return (f"nothing to vet: all {stats.candidates} candidates given are already "
                f"recorded in {where} by a run like this one ({setup}); {again}")  # fmt: skip
    return f"nothing to vet: the input gave no candidates ({stats.candidates} read)"


def _into_jsonl(out: str, opts: VetOptions, candidates: list, bar: Bar):
    from annotate.vetting.runner import vet
    from annotate.vetting.sinks import JsonlSink

    sink = JsonlSink(out)
    try:
        return vet(candidates, opts, sink, bar)
    finally:
        sink.close()


def _into_store(args, opts: VetOptions, candidates: list | None, bar: Bar):
    """(stats, candidates refused, the store's candidates when it supplied them) of the run
    into the store; stats None when there is
    nothing to vet (said on stderr). Candidates from files are ingested first, so an id the
    store gives to another spectrum is refused as `ingest` refuses it."""
    from annotate.intake.ingest import ingest_refs
    from annotate.vetting.into_store import vet_into_store
    from commands.ingest import report_refused
    from db.store import Filters, Store

    store = Store(args.db, create=False)
    try:
        refused = 0
        total = None if candidates is not None else store.count_candidates(Filters(task=opts.task))
        if total == 0:
            which = f" for task {opts.task}" if opts.task else ""
            print(
                f"vet: the store {args.db} has no candidates{which}: ingest some first "
                "(launch.py ingest) or give --catalog CSV / --input PATH",
                file=sys.stderr,
            )
            return None, 0, None
        if candidates is not None:
            # A spectrum new to the store is read here for its survey metadata (the Vet
            # page's survey filter, the VI file's survey column); one already held is not.
            _, problems, candidates = ingest_refs(store, candidates, read="new", actor="vet")
            refused = report_refused("vet", problems, keep_first=args.keep_first)
        stats = vet_into_store(
            store, candidates, policy=opts.policy, renderer=opts.renderer, options=opts,
            progress=bar,
        )  # fmt: skip
        return stats, refused, total
    finally:
        store.close()
