"""Score one or more policies on a labelled set, side by side.

    python launch.py evaluate --catalog data/bench/test/catalog.csv --policy rules --out eval/
    python launch.py evaluate --catalog labelled.csv --policy rules --policy hf:ckpt/ --out eval/
    python launch.py evaluate --catalog labelled.csv --results vet=results.jsonl --out eval/

Labelled sets: catalogue CSVs with a `label` column, RL exports and SpecVI-Bench parquet
(anything `agent.candidates.read_candidates` reads), or results JSONL from `launch.py vet`
joined to the catalogue by (id, task). Each policy runs through the batch runner
(`annotate.vetting`, resumable: `OUT/<name>.jsonl`), so what is scored is exactly what
`vet` would record. Reported per task: precision, recall, F1, accuracy, confusion; over
tasks: macro-F1; calibration (ECE and a reliability plot), format-error rate, zooms per
candidate, seconds per spectrum; and the human-in-the-loop curve (macro-F1 when the k%
least confident candidates go to experts, simulated with the labels, k = 0..50).
Outputs: `OUT/metrics.json`, `OUT/report.md`, `OUT/reliability.png`, `OUT/hitl.png`.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.tasks import TASKS
from annotate.audit import agreement

# -- metric functions (plain, reusable) ---------------------------------------------------


def confusion(labels: Sequence[bool], preds: Sequence[bool]) -> dict[str, int]:
    """Counts of the positive-class confusion matrix.

    >>> confusion([True, True, False, False], [True, False, True, False])
    {'tp': 1, 'fn': 1, 'fp': 1, 'tn': 1}
    """
    c = {"tp": 0, "fn": 0, "fp": 0, "tn": 0}
    for y, p in zip(labels, preds):
        c[("t" if y == p else "f") + ("p" if p else "n")] += 1
    return c


def prf(c: dict[str, int]) -> dict[str, float]:
    """Precision, recall, F1 of the positive class and accuracy from confusion counts
    (the definitions of `annotate.audit.agreement.prf`, which the dashboard uses too).

    Undefined ratios (no predicted or no true positives) are 0, as scikit-learn's default.

    >>> r = prf({'tp': 8, 'fn': 2, 'fp': 4, 'tn': 86})
    >>> round(r['precision'], 3), round(r['recall'], 3), round(r['f1'], 3), r['accuracy']
    (0.667, 0.8, 0.727, 0.94)
    """
    r = agreement.prf(agreement.Confusion(tp=c["tp"], fp=c["fp"], fn=c["fn"], tn=c["tn"]))
    n = c["tp"] + c["fn"] + c["fp"] + c["tn"]
    return {
        "precision": _zero_if_nan(r.precision),
        "recall": _zero_if_nan(r.recall),
        "f1": _zero_if_nan(r.f1),
        "accuracy": (c["tp"] + c["tn"]) / n if n else 0.0,
    }


def _zero_if_nan(v: float) -> float:
    return 0.0 if math.isnan(v) else v


def f1_score(labels: Sequence[bool], preds: Sequence[bool]) -> float:
    """F1 of the positive class.

    >>> f1_score([1, 1, 0, 0, 1], [1, 0, 1, 0, 1])
    0.6666666666666666
    """
    return prf(confusion([bool(x) for x in labels], [bool(x) for x in preds]))["f1"]


def macro_f1(per_task: dict[str, float]) -> float:
    """Unweighted mean of per-task F1.

    >>> macro_f1({'a': 1.0, 'b': 0.5})
    0.75
    """
    return sum(per_task.values()) / len(per_task) if per_task else 0.0


def reliability(
    probs: Sequence[float], labels: Sequence[bool], n_bins: int = 10
) -> list[dict[str, float]]:
    """Equal-width bins of P(YES) that hold candidates: count, mean predicted probability,
    observed YES rate (the bins of `annotate.audit.agreement.reliability_diagram`)."""
    r = agreement.reliability_diagram(list(probs), _yes_no(labels), n_bins)
    return [
        {"lo": b.lo, "hi": b.hi, "n": b.count, "mean_p": b.mean_confidence, "frac_yes": b.yes_rate}
        for b in r.bins
        if b.count
    ]


def ece(probs: Sequence[float], labels: Sequence[bool], n_bins: int = 10) -> float:
    """Expected calibration error of P(YES): sum over bins of |mean p - YES rate| x share.

    >>> round(ece([0.9, 0.9, 0.1, 0.1], [True, True, False, False]), 6)
    0.1
    >>> ece([0.75, 0.75, 0.75, 0.75], [True, True, True, False])
    0.0
    """
    if len(probs) == 0:
        return 0.0
    return agreement.reliability_diagram(list(probs), _yes_no(labels), n_bins).ece


def _yes_no(labels: Sequence[bool]) -> list[str]:
    return ["YES" if y else "NO" for y in labels]


@dataclass
class Scored:
    """One candidate as evaluation sees it."""

    task: str
    label: bool
    verdict: bool | None  # None: no parseable answer (counted as NO)
    p_yes: float | None
    format_ok: bool = True
    zooms: int = 0
    seconds: float = 0.0
    group: str = ""

    @property
    def pred(self) -> bool:
        return bool(self.verdict)

    @property
    def certainty(self) -> float:
        """Confidence in the verdict given (0 when there is none)."""
        if self.verdict is None:
            return 0.0
        p = self.p_yes if self.p_yes is not None else (1.0 if self.verdict else 0.0)
        return p if self.verdict else 1.0 - p


def per_task_f1(items: Sequence[Scored], preds: Sequence[bool] | None = None) -> dict[str, float]:
    preds = [s.pred for s in items] if preds is None else preds
    by: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    for s, p in zip(items, preds):
        by[s.task][0].append(s.label)
        by[s.task][1].append(p)
    return {t: f1_score(*by[t]) for t in _ordered(by)}


def hitl_curve(
    items: Sequence[Scored], ks: Sequence[int] = tuple(range(0, 51, 5))
) -> list[dict[str, float]]:
    """Macro-F1 of agent + experts when the k% least confident candidates go to experts.

    Experts are simulated by the labels (they are right on what they see). Ties in
    confidence are broken by input order, so the curve is deterministic.

    >>> xs = [Scored('a', True, False, 0.45), Scored('a', True, True, 0.9),
    ...       Scored('a', False, False, 0.1), Scored('a', False, True, 0.6)]
    >>> [round(r['macro_f1'], 3) for r in hitl_curve(xs, ks=(0, 25, 50))]
    [0.5, 0.8, 1.0]
    """
    order = sorted(range(len(items)), key=lambda i: (items[i].certainty, i))
    out = []
    for k in ks:
        n_exp = int(round(len(items) * k / 100.0))
        to_expert = set(order[:n_exp])
        preds = [items[i].label if i in to_expert else items[i].pred for i in range(len(items))]
        out.append({"k": k, "to_experts": n_exp, "macro_f1": macro_f1(per_task_f1(items, preds))})
    return out


def _ordered(tasks) -> list[str]:
    order = list(TASKS)  # the reports' order: cv, carbon, s_type, m_giant, wd
    return sorted(tasks, key=lambda t: (order.index(t) if t in order else len(order), t))


def metrics(items: Sequence[Scored]) -> dict[str, Any]:
    """Everything the report shows for one policy on one set."""
    per_task: dict[str, Any] = {}
    by: dict[str, list[Scored]] = defaultdict(list)
    for s in items:
        by[s.task].append(s)
    for t in _ordered(by):
        xs = by[t]
        c = confusion([s.label for s in xs], [s.pred for s in xs])
        per_task[t] = {**c, **prf(c), "n": len(xs), "positives": sum(s.label for s in xs)}
    probs = [(s.p_yes, s.label) for s in items if s.p_yes is not None]
    n = len(items)
    return {
        "n": n,
        "per_task": per_task,
        "macro_f1": macro_f1({t: v["f1"] for t, v in per_task.items()}),
        "ece": ece([p for p, _ in probs], [y for _, y in probs]) if probs else None,
        "reliability": reliability([p for p, _ in probs], [y for _, y in probs]) if probs else [],
        "format_error_rate": sum(not s.format_ok for s in items) / n if n else 0.0,
        "no_verdict_rate": sum(s.verdict is None for s in items) / n if n else 0.0,
        "zooms_per_candidate": sum(s.zooms for s in items) / n if n else 0.0,
        "seconds_per_spectrum": sum(s.seconds for s in items) / n if n else 0.0,
        "hitl": hitl_curve(items),
    }


# -- loading labelled sets and results -----------------------------------------------------


def load_labels(sources: Sequence[str], task: str | None = None, group_by: str | None = None):
    """Candidates with labels, and {(id, task): group value} from a catalogue column."""
    from agent.candidates import read_candidates
    from agent.failure import task_key

    cands = [c for c in read_candidates(list(sources), task=task) if c.label in ("YES", "NO")]
    groups: dict[tuple[str, str], str] = {}
    if group_by:
        for src in sources:
            if src.lower().endswith(".csv"):
                with open(src, newline="") as fh:
                    for r in csv.DictReader(fh):
                        if group_by in r:
                            groups[(r.get("id") or r["path"], task_key(r["task"]))] = r[group_by]
    return cands, groups


def score_results(
    results: Path, cands, groups: dict[tuple[str, str], str] | None = None
) -> list[Scored]:
    """Join a results JSONL (from `vet`) to the labelled candidates by (id, task)."""
    from agent.failure import task_key
    from agent.trajectory import Trajectory

    got: dict[tuple[str, str], Trajectory] = {}
    with open(results) as fh:
        for line in fh:
            line = line.strip()
            if line:
                t = Trajectory.from_json(line)
                got[(t.id, task_key(t.task))] = t
    out = []
    for c in cands:
        key = (c.id, task_key(c.task))
        t = got.get(key)
        label = c.label == "YES"
        g = (groups or {}).get(key, "")
        if t is None:
            out.append(Scored(key[1], label, None, None, format_ok=False, group=g))
            continue
        out.append(
            Scored(
                task=key[1],
                label=label,
                verdict=None if t.verdict is None else t.verdict == "YES",
                p_yes=t.confidence,
                format_ok=bool(t.format_ok) and t.state != "error",
                zooms=len(t.zooms),
                seconds=float(t.seconds or 0.0),
                group=g,
            )
        )
    return out


def run_policy(
    spec: str, sources: Sequence[str], out: Path, args: argparse.Namespace | None = None
) -> Path:
    """Run `spec` ("rules", "rules:MODEL.json", "hf:DIR", "vllm:DIR", "openai:MODEL@URL")
    through the batch runner."""
    from agent.errors import LoupeError
    from annotate.vetting.runner import VetOptions, read_inputs, vet
    from annotate.vetting.sinks import JsonlSink

    name, _, arg = spec.partition(":")
    opts = VetOptions(policy=name)
    for s in sources:
        (opts.catalog if s.lower().endswith(".csv") else opts.input).append(s)
    if name in ("hf", "vllm", "rules") and arg:  # rules:PATH = a fitted inspector model
        opts.model = arg
    if name == "openai" and arg:
        opts.model, _, opts.base_url = arg.partition("@")
    if args is not None:
        opts.workers = getattr(args, "workers", None) or opts.workers
        opts.max_turns = getattr(args, "max_turns", None) or opts.max_turns
        opts.task = getattr(args, "task", None) or opts.task
    res = out / f"{_safe(spec)}.jsonl"
    try:
        candidates, problems = read_inputs(opts)
        sink = JsonlSink(res)
        try:
            stats = vet(candidates, opts, sink)
        finally:
            sink.close()
    except (ValueError, LoupeError) as exc:  # a bad source or policy setting, a busy file
        raise RuntimeError(f"evaluate: the runner failed for {spec} ({exc})") from exc
    if problems or stats.states["error"]:
        first = problems[0] if problems else "a candidate was recorded as an error"
        raise RuntimeError(
            f"evaluate: the runner failed for {spec} ({len(problems)} bad input line(s), "
            f"{stats.states['error']} error(s); first: {first})"
        )
    return res


def _safe(s: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in s)[:60]


# -- reporting ---------------------------------------------------------------------------


def markdown_table(results: dict[str, dict[str, Any]]) -> str:
    """Policies side by side: per-task F1, macro-F1, ECE, format errors, zooms, s/spectrum."""
    tasks = _ordered({t for m in results.values() for t in m["per_task"]})
    head = [
        "policy",
        *[f"F1 {t}" for t in tasks],
        "macro-F1",
        "ECE",
        "format err",
        "zooms",
        "s/spectrum",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, m in results.items():
        row = [name]
        for t in tasks:
            v = m["per_task"].get(t)
            row.append(f"{v['f1']:.2f}" if v else "-")
        row += [
            f"**{m['macro_f1']:.3f}**",
            "-" if m["ece"] is None else f"{m['ece']:.3f}",
            f"{m['format_error_rate']:.1%}",
            f"{m['zooms_per_candidate']:.1f}",
            f"{m['seconds_per_spectrum']:.3f}",
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def task_table(m: dict[str, Any]) -> str:
    head = [
        "task",
        "n",
        "positives",
        "precision",
        "recall",
        "F1",
        "accuracy",
        "TP",
        "FP",
        "FN",
        "TN",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for t, v in m["per_task"].items():
        lines.append(
            f"| {t} | {v['n']} | {v['positives']} | {v['precision']:.2f} | {v['recall']:.2f} | "
            f"{v['f1']:.2f} | {v['accuracy']:.2f} | {v['tp']} | {v['fp']} | {v['fn']} | {v['tn']} |"
        )
    return "\n".join(lines)


def hitl_table(results: dict[str, dict[str, Any]]) -> str:
    names = list(results)
    ks = [r["k"] for r in next(iter(results.values()))["hitl"]]
    lines = ["| k% to experts | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1)]
    for i, k in enumerate(ks):
        lines.append(
            f"| {k} | "
            + " | ".join(f"{results[n]['hitl'][i]['macro_f1']:.3f}" for n in names)
            + " |"
        )
    return "\n".join(lines)


def plot_reliability(results: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect calibration")
    for name, m in results.items():
        r = m["reliability"]
        if r:
            ax.plot(
                [b["mean_p"] for b in r],
                [b["frac_yes"] for b in r],
                "o-",
                label=f"{name} (ECE {m['ece']:.3f})",
            )
    ax.set_xlabel("predicted P(YES)")
    ax.set_ylabel("observed fraction YES")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_hitl(results: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, m in results.items():
        ax.plot([r["k"] for r in m["hitl"]], [r["macro_f1"] for r in m["hitl"]], "o-", label=name)
    ax.set_xlabel("% least confident candidates sent to experts")
    ax.set_ylabel("macro-F1 of agent + experts")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def evaluate(
    sources: Sequence[str],
    policies: Sequence[str] = (),
    results: Sequence[str] = (),
    out: Path = Path("eval"),
    task: str | None = None,
    group_by: str | None = None,
    args: argparse.Namespace | None = None,
) -> dict[str, Any]:
    """Run/join every policy, compute metrics (overall and per `group_by` value), write outputs."""
    out.mkdir(parents=True, exist_ok=True)
    cands, groups = load_labels(sources, task=task, group_by=group_by)
    if not cands:
        raise ValueError(
            "evaluate: no labelled candidates (a 'label' column with YES/NO is needed)"
        )
    runs: dict[str, Path] = {}
    for spec in policies:
        runs[spec] = run_policy(spec, sources, out, args)
    for r in results:
        name, _, path = r.rpartition("=")
        runs[name or Path(path).stem] = Path(path)
    overall: dict[str, Any] = {}
    by_group: dict[str, dict[str, Any]] = defaultdict(dict)
    for name, path in runs.items():
        scored = score_results(path, cands, groups)
        overall[name] = metrics(scored)
        if group_by:
            for g in sorted({s.group for s in scored}, key=_num_key):
                by_group[g][name] = metrics([s for s in scored if s.group == g])
    report = {"n_candidates": len(cands), "overall": overall, "by": group_by, "groups": by_group}
    (out / "metrics.json").write_text(json.dumps(report, indent=2))
    plot_reliability(overall, out / "reliability.png")
    plot_hitl(overall, out / "hitl.png")
    md = [
        f"# Evaluation on {', '.join(sources)}",
        "",
        f"{len(cands)} labelled candidates.",
        "",
        "## All",
        "",
        markdown_table(overall),
        "",
    ]
    for g, res in by_group.items():
        md += [f"## {group_by} = {g}", "", markdown_table(res), ""]
    for name, m in overall.items():
        md += [f"## {name}: per task", "", task_table(m), ""]
    md += [
        "## Human in the loop",
        "",
        hitl_table(overall),
        "",
        "![reliability](reliability.png) ![hitl](hitl.png)",
        "",
    ]
    (out / "report.md").write_text("\n".join(md))
    return report


def _num_key(g: str):
    try:
        return (0, float(g))
    except ValueError:
        return (1, g)


# -- command line -------------------------------------------------------------------------
