"""Scoring a built benchmark and writing the accuracy document.

`score_split` runs a policy over a split's catalogue, `grid_table` and `task_by` tabulate
macro-F1 per layout and SNR with object-bootstrap confidence intervals
(`bootstrap_macro_f1`), and `write_report` writes docs/accuracy.md with the goals, the
confusers, the demo's numbers and what stands behind each number.
"""

from __future__ import annotations

import csv
import json
import shutil
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agent.tasks import TASKS
from training.benchmark.caveats import CAVEATS
from training.benchmark.sources import LAYOUTS


def composition(catalog: Path) -> list[dict]:
    """Per task and split: source objects and spectra, positives from templates."""
    with open(catalog, newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = []
    for task in sorted({r["task"] for r in rows}):
        rs = [r for r in rows if r["task"] == task]
        pos = [r for r in rs if r["label"] == "YES"]
        neg = [r for r in rs if r["label"] == "NO"]
        out.append(
            {
                "task": task,
                "pos_objects": len({r["object"] for r in pos}),
                "pos_template_objects": len({r["object"] for r in pos if r["template"] == "1"}),
                "neg_objects": len({r["object"] for r in neg}),
                "pos_spectra": len(pos),
                "neg_spectra": len(neg),
                "neg_classes": ", ".join(sorted({r["class"] for r in neg})),
            }
        )
    return out


@dataclass
class Row:
    """One scored candidate with the catalogue columns the report groups by."""

    scored: object  # training.evaluate.Scored
    layout: str
    snr: str
    obj: str
    cls: str
    ordinary: str = ""  # "G dwarf", "A star"...: the stars a survey is mostly made of


def score_split(
    bench: Path, split: str, policy: str = "rules", fresh: bool = True, out: Path | None = None
) -> list[Row]:
    """Run `policy` over a split's catalogue (resumable runner, results in `out`, by default
    BENCH/eval-SPLIT) and join the catalogue columns."""
    from training.evaluate import run_policy

    cat = bench / split / "catalog.csv"
    out = out or bench / f"eval-{split}"
    if fresh:
        # Results of an earlier policy version or benchmark build would be scored as current.
        shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    res = run_policy(policy, [str(cat)], out)
    return join_catalog(cat, res)


def join_catalog(cat: Path, results: Path) -> list[Row]:
    from agent.failure import task_key
    from training.evaluate import load_labels, score_results

    cands, _ = load_labels([str(cat)])
    with open(cat, newline="") as fh:
        meta = {(r["id"], task_key(r["task"])): r for r in csv.DictReader(fh)}
    out = []
    for c, sc in zip(cands, score_results(results, cands)):
        r = meta[(c.id, task_key(c.task))]
        out.append(
            Row(
                sc,
                r.get("layout", "lamost"),
                r["snr"],
                r["object"],
                r["class"],
                r.get("ordinary", ""),
            )
        )
    return out


def bootstrap_macro_f1(
    rows: list[Row], n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Confidence interval of macro-F1, resampling source OBJECTS (not spectra).

    Realisations of one star are not independent, so the unit of resampling is the object;
    positives and negatives are resampled separately within each task so every resample
    has both.

    >>> from training.evaluate import Scored
    >>> rs = [Row(Scored("wd", i < 4, i < 3 or i == 5, None), "sdss", "8", f"o{i}", "x")
    ...       for i in range(8)]
    >>> lo, hi = bootstrap_macro_f1(rs, n_boot=200)
    >>> 0.0 <= lo <= 0.75 <= hi <= 1.0
    True
    """
    rng = np.random.default_rng(seed)
    acc: dict[tuple[str, bool, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in rows:
        s = r.scored
        c = acc[(s.task, s.label, r.obj)]
        c[0] += int(s.label and s.pred)
        c[1] += int(not s.label and s.pred)
        c[2] += int(s.label and not s.pred)
    strata: dict[str, dict[bool, list[list[int]]]] = defaultdict(lambda: defaultdict(list))
    for (task, label, _), c in acc.items():
        strata[task][label].append(c)
    macro = np.zeros(n_boot)
    for per_label in strata.values():
        counts = np.zeros((n_boot, 3))
        for objs in per_label.values():
            m = np.asarray(objs, dtype=float)
            w = rng.multinomial(len(m), np.full(len(m), 1.0 / len(m)), size=n_boot)
            counts += w @ m
        tp, fp, fn = counts.T
        den = 2 * tp + fp + fn
        macro += np.where(den > 0, 2 * tp / np.maximum(den, 1e-12), 0.0)
    macro /= max(1, len(strata))
    q = (1 - level) / 2
    return float(np.quantile(macro, q)), float(np.quantile(macro, 1 - q))


def summarise(rows: list[Row], n_boot: int = 1000) -> dict:
    from training.evaluate import metrics

    m = metrics([r.scored for r in rows])
    lo, hi = bootstrap_macro_f1(rows, n_boot=n_boot)
    hitl10 = next(h["macro_f1"] for h in m["hitl"] if h["k"] == 10)
    return {**m, "ci": (lo, hi), "hitl10": hitl10}


def _cell(s: dict) -> str:
    return f"{s['macro_f1']:.2f} [{s['ci'][0]:.2f}, {s['ci'][1]:.2f}]"


def _snr_key(v: str) -> float:
    return float(v)


def grid_table(rows: list[Row], n_boot: int = 1000) -> tuple[str, dict]:
    """Macro-F1 [95% CI] per layout (rows) and SNR (columns), with the margins."""
    layouts = sorted(
        {r.layout for r in rows}, key=lambda x: LAYOUTS.index(x) if x in LAYOUTS else 9
    )
    snrs = sorted({r.snr for r in rows}, key=_snr_key)
    head = ["layout \\ SNR", *snrs, "all SNRs"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    stats: dict = {"layout": {}, "snr": {}}
    for lay in [*layouts, "all"]:
        cells = []
        for snr in [*snrs, "all"]:
            sub = [
                r
                for r in rows
                if (lay == "all" or r.layout == lay) and (snr == "all" or r.snr == snr)
            ]
            st = summarise(sub, n_boot)
            if snr == "all":
                stats["layout"][lay] = st
            if lay == "all":
                stats["snr"][snr] = st
            cells.append(_cell(st))
        lines.append(f"| {'all layouts' if lay == 'all' else lay} | " + " | ".join(cells) + " |")
    return "\n".join(lines), stats


def task_by(rows: list[Row], attr: str) -> str:
    """F1 per task for each value of `attr` (layout or snr)."""
    from training.evaluate import per_task_f1

    vals = sorted(
        {getattr(r, attr) for r in rows},
        key=lambda v: _snr_key(v) if attr == "snr" else LAYOUTS.index(v),
    )
    head = [attr, *TASKS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for v in vals:
        f1 = per_task_f1([r.scored for r in rows if getattr(r, attr) == v])
        lines.append(
            f"| {v} | " + " | ".join(f"{f1.get(t, float('nan')):.2f}" for t in TASKS) + " |"
        )
    return "\n".join(lines)


def confusers(rows: list[Row]) -> str:
    """Per task and true class: how often the inspector says YES (recall for the positive
    class, false-positive rate for each contaminant)."""
    acc: dict[tuple[str, str, bool], list[int]] = defaultdict(lambda: [0, 0, 0])
    objs: dict[tuple[str, str, bool], set] = defaultdict(set)
    for r in rows:
        k = (r.scored.task, r.cls, r.scored.label)
        acc[k][0] += int(r.scored.pred)
        acc[k][1] += 1
        objs[k].add(r.obj)
    lines = [
        "| task | true class | truth | objects | spectra | said YES | at SNR <= 8 |",
        "|---|---|---|---|---|---|---|",
    ]
    low: dict[tuple[str, str, bool], list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        if float(r.snr) <= 8:
            k = (r.scored.task, r.cls, r.scored.label)
            low[k][0] += int(r.scored.pred)
            low[k][1] += 1
    order = list(TASKS)
    for k in sorted(acc, key=lambda k: (order.index(k[0]), not k[2], k[1])):
        yes, n, _ = acc[k]
        ly, ln = low.get(k, [0, 0])
        lines.append(
            f"| {k[0]} | {k[1]} | {'YES' if k[2] else 'NO'} | {len(objs[k])} | {n} | "
            f"{yes / n:.0%} | {(ly / ln if ln else float('nan')):.0%} |"
        )
    return "\n".join(lines)


BASE_RATES = (100, 1000)


def survey_stats(rows: list[Row]) -> dict[str, dict]:
    """Per task: recall, false-positive rate over all its negatives and over the F/G/K
    dwarfs and giants, and precision where 1 candidate in N is a positive (`BASE_RATES`),
    by reweighting: precision = r TPR / (r TPR + (1 - r) FPR), r = 1/N.

    >>> from training.evaluate import Scored
    >>> rs = [Row(Scored("wd", True, i < 9, None), "sdss", "8", f"p{i}", "wd") for i in range(10)]
    >>> rs += [Row(Scored("wd", False, i < 1, None), "sdss", "8", f"n{i}", "fgk_dwarf", "G dwarf")
    ...        for i in range(200)]
    >>> s = survey_stats(rs)["wd"]
    >>> s["fgk_fpr"], round(s["precision"][100], 3)
    (0.005, 0.645)
    """
    out: dict[str, dict] = {}
    for task in sorted({r.scored.task for r in rows}):
        rs = [r for r in rows if r.scored.task == task]
        pos = [r for r in rs if r.scored.label]
        neg = [r for r in rs if not r.scored.label]
        fgk = [r for r in neg if r.ordinary and r.ordinary != "A star"]
        tpr = sum(r.scored.pred for r in pos) / len(pos) if pos else float("nan")
        fpr = sum(r.scored.pred for r in neg) / len(neg) if neg else float("nan")
        prec = {}
        for n in BASE_RATES:
            a, b = tpr / n, fpr * (1 - 1 / n)
            prec[n] = a / (a + b) if a + b > 0 else float("nan")
        out[task] = {
            "tpr": tpr,
            "fpr": fpr,
            "fgk_fpr": sum(r.scored.pred for r in fgk) / len(fgk) if fgk else float("nan"),
            "n_fgk": len(fgk),
            "precision": prec,
        }
    return out


def ordinary_table(rows: list[Row]) -> str:
    """Per task and ordinary class: how often the inspector says YES (a false positive)."""
    classes = sorted({r.ordinary for r in rows if r.ordinary}, key=lambda c: (c[-5:], c))
    acc: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    objs: dict[str, set] = defaultdict(set)
    for r in rows:
        if r.ordinary:
            acc[(r.scored.task, r.ordinary)][0] += int(r.scored.pred)
            acc[(r.scored.task, r.ordinary)][1] += 1
            objs[r.ordinary].add(r.obj)
    tasks = [t for t in TASKS if any(k[0] == t for k in acc)]
    lines = [
        "| class | objects | spectra per task | " + " | ".join(tasks) + " |",
        "|---|---|---|" + "---|" * len(tasks),
    ]
    for c in classes:
        n = acc[(tasks[0], c)][1]
        cells = []
        for t in tasks:
            yes, m = acc[(t, c)]
            cells.append(f"{yes / m:.1%} ({yes})" if m else "")
        lines.append(f"| {c} | {len(objs[c])} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def base_rate_table(stats: dict[str, dict]) -> str:
    lines = [
        "| task | recall | FP rate, all negatives | FP rate, F/G/K dwarfs and giants | "
        + " | ".join(f"precision at 1 in {n}" for n in BASE_RATES)
        + " |",
        "|---|---|---|---|" + "---|" * len(BASE_RATES),
    ]
    for t in [t for t in TASKS if t in stats]:
        s = stats[t]
        lines.append(
            f"| {t} | {s['tpr']:.3f} | {s['fpr']:.2%} | {s['fgk_fpr']:.2%} (of {s['n_fgk']}) | "
            + " | ".join(f"{s['precision'][n]:.2f}" for n in BASE_RATES)
            + " |"
        )
    return "\n".join(lines)


def demo_numbers(out: Path, policy: str = "rules", seeds: tuple[int, ...] = (1, 2, 3)) -> dict:
    """The policy on fresh simulated demo sets (what a new user meets first)."""
    from training.evaluate import load_labels, metrics, run_policy, score_results
    from training.sim.demo import generate_demo

    shutil.rmtree(out, ignore_errors=True)
    cats = []
    for seed in seeds:
        cat = out / f"seed{seed}" / "labels.csv"
        generate_demo(out / f"seed{seed}", 4, seed, labels=cat)
        cats.append(str(cat))
    res = run_policy(policy, cats, out)
    cands, _ = load_labels(cats)
    return metrics(score_results(res, cands))


# Wrong answers given with P(YES) under 0.05 or over 0.95 on the test split before the
# can't-tell answers were handed off (the rule set of the report's first scoring here).
CONFIDENT_ERRORS_BEFORE = 39


def confidently_wrong(p_yes: float, yes: bool, lo: float = 0.05, hi: float = 0.95) -> bool:
    """A wrong answer given with P(YES) < lo or > hi: one an expert is never shown.

    >>> confidently_wrong(0.01, True), confidently_wrong(0.2, True), confidently_wrong(0.99, True)
    (True, False, False)
    """
    return (p_yes < lo or p_yes > hi) and (p_yes > 0.5) != yes


def confident_errors(rows: list[Row], lo: float = 0.05, hi: float = 0.95) -> tuple[int, int]:
    """(wrong answers given with P(YES) < lo or > hi, all rows): the errors an expert is
    never shown when the least certain are handed off.

    >>> from training.evaluate import Scored
    >>> rs = [Row(Scored("wd", True, False, 0.01), "sdss", "8", "a", "wd"),
    ...       Row(Scored("wd", False, False, 0.01), "sdss", "8", "b", "a_star"),
    ...       Row(Scored("wd", True, False, 0.20), "sdss", "8", "c", "wd")]
    >>> confident_errors(rs)
    (1, 3)
    """
    bad = sum(confidently_wrong(r.scored.p_yes, r.scored.label, lo, hi) for r in rows)
    return bad, len(rows)


def _goal_rows(
    test: dict,
    by_layout: dict,
    by_snr: dict,
    survey: dict[str, dict] | None = None,
    confident: tuple[int, int] | None = None,
) -> list[str]:
    worst = min((v["macro_f1"], k) for k, v in by_layout.items() if k != "all")
    snr8 = by_snr.get("8")
    rows = [
        ("macro-F1, five tasks", ">= 0.90", test["macro_f1"], test["ci"], test["macro_f1"] >= 0.90),
        (
            f"worst layout ({worst[1]})",
            ">= 0.85",
            worst[0],
            by_layout[worst[1]]["ci"],
            worst[0] >= 0.85,
        ),
    ]
    if snr8:
        rows.append(("SNR 8", ">= 0.80", snr8["macro_f1"], snr8["ci"], snr8["macro_f1"] >= 0.80))
    out = [
        "| measure | goal | test | 95% CI (objects resampled) | met |",
        "|---|---|---|---|---|",
    ]
    for name, goal, v, ci, ok in rows:
        out.append(
            f"| {name} | {goal} | {v:.3f} | [{ci[0]:.2f}, {ci[1]:.2f}] | {'yes' if ok else 'no'} |"
        )
    ece = test["ece"]
    per_snr = {k: v["ece"] for k, v in by_snr.items() if k != "all"}
    worst_ece = max([ece, *per_snr.values()])
    spread = (
        f" (each SNR {min(per_snr.values()):.3f}-{max(per_snr.values()):.3f})" if per_snr else ""
    )
    out.append(
        f"| ECE{spread} | <= 0.05 at every SNR | {ece:.3f} | | "
        f"{'yes' if worst_ece <= 0.05 else 'no'} |"
    )
    h = test["hitl10"]
    out.append(
        f"| macro-F1 with the 10% least confident to experts | >= 0.95 | {h:.3f} | | "
        f"{'yes' if h >= 0.95 else 'no'} |"
    )
    if confident:
        bad, n = confident
        before = CONFIDENT_ERRORS_BEFORE
        goal = f"< {before / 2:g} (half of {before})" if before is not None else "as few as can be"
        met = "yes" if before is not None and bad < before / 2 else "no" if before else ""
        out.append(
            f"| wrong answers at P(YES) < 0.05 or > 0.95 | {goal} | {bad} of {n} | | {met} |"
        )
    if survey and "wd" in survey:
        wd = survey["wd"]
        out.append(
            f"| white-dwarf recall (its FP rate on F/G/K {wd['fgk_fpr']:.2%}) | >= 0.90 | "
            f"{wd['tpr']:.3f} | | {'yes' if wd['tpr'] >= 0.90 else 'no'} |"
        )
    if survey:
        fp, t_fp = max((v["fgk_fpr"], t) for t, v in survey.items())
        out.append(
            f"| FP rate on F/G/K dwarfs and giants, worst task ({t_fp}) | <= 1% | {fp:.2%} | | "
            f"{'yes' if fp <= 0.01 else 'no'} |"
        )
        pr, t_pr = min((v["precision"][100], t) for t, v in survey.items())
        out.append(
            f"| precision at a 1-in-100 base rate, worst task ({t_pr}) | >= 0.5 | {pr:.2f} | | "
            f"{'yes' if pr >= 0.5 else 'no'} |"
        )
    return out


def contradiction_line(results: dict[str, Path]) -> str:
    """How many trajectories in each results folder say what their verdict's task forbids."""
    from agent.policies.rules.contradiction import found

    parts = []
    for sp, folder in results.items():
        n = bad = 0
        for path in sorted(folder.glob("*.jsonl")):
            with open(path) as fh:
                for line in fh:
                    t = json.loads(line)
                    text = " ".join(s.get("thought") or "" for s in t.get("steps") or [])
                    text += " " + (t.get("explanation") or "")
                    n += 1
                    bad += bool(found(t.get("task", ""), t.get("confidence"), text))
        parts.append(f"{sp} {bad} of {n}")
    return (
        "Trajectories whose thoughts contradict their verdict "
        "(`agent/policies/rules/contradiction.py`): " + ", ".join(parts) + "."
    )


def write_report(
    bench: Path,
    report: Path,
    policy: str = "rules",
    command: str = "",
    n_boot: int = 1000,
    demo: bool = True,
    fresh: bool = True,
) -> dict:
    """Score `policy` on both splits (and the demo) and write the accuracy document."""
    from training.evaluate import hitl_table, plot_hitl, plot_reliability, task_table

    rows = {sp: score_split(bench, sp, policy, fresh=fresh) for sp in ("test", "tune")}
    test_grid, test_stats = grid_table(rows["test"], n_boot)
    tune_grid, _ = grid_table(rows["tune"], n_boot)
    test = test_stats["layout"]["all"]
    survey = survey_stats(rows["test"])
    demo_m = demo_numbers(bench / "demo", policy) if demo else None
    report.parent.mkdir(parents=True, exist_ok=True)
    stem = report.with_suffix("")
    plot_reliability({policy: test}, Path(f"{stem}_reliability.png"))
    plot_hitl({policy: test}, Path(f"{stem}_hitl.png"))
    n_files = {}
    for sp in rows:
        with open(bench / sp / "catalog.csv", newline="") as fh:
            n_files[sp] = len({r["path"] for r in csv.DictReader(fh)})
    md = [
        "# Accuracy of the rule-based inspector on survey-like real spectra",
        "",
        "Regenerate (benchmark, evaluation and this file; a few minutes on two cores) with:",
        "",
        "```",
        command or "python -m training.benchmark --out data/bench --report docs/accuracy.md",
        "```",
        "",
        "Real library spectra from `../shared/spectra` (MILES, STELIB, Pickles, CALSPEC, SDSS, "
        "SDSS templates, LAMOST, U Gem) observed as each survey delivers them by "
        "`training/sim/surveys.py`, written as LAMOST (5-row image, 3700-9100 Å, R ~ 1800), "
        "SDSS/BOSS (`spec-*.fits` COADD, 3600-10400 Å log-linear 1e-4 dex, blue and red "
        "cameras co-added over 5800-6350 Å, 1e-17 erg/s/cm²/Å) and DESI (B/R/Z arms on "
        "linear 0.8 Å grids, 3600-9824 Å, merged by the reader where they overlap) files and "
        "read back through `agent/formats`. Each source is observed once per layout at SNR "
        "5, 8, 12, 20 and 35 (median per pixel), with a random RV within ±300 km/s, a 10% "
        "smooth flux-calibration error, photon and sky noise through each arm's throughput "
        "(noisier at the blue end and at arm edges), sky-line residuals beyond the "
        "pipeline's error estimate, flagged bad columns in 30% of spectra, partly corrected "
        "telluric bands and a pipeline redshift (3% of them wrong). The SDSS QSO and galaxy "
        "templates are observed at random redshifts (QSO 0.3-2.6, galaxy 0.02-0.4).",
        "",
        "Splits are by source object. Each object's split is frozen in "
        "`training/benchmark/splits.csv` (`python -m training.benchmark --freeze-splits` adds "
        "new ones): a positive added to the library joins the split holding fewer of its "
        "task's objects, a hard negative the one holding fewer of its class, an ordinary star "
        "goes by a hash of its name, and no object already scored moves. The inspector's "
        "rules are set on `tune`; the "
        "numbers below are on `test`. Confidence intervals resample source objects (the "
        "realisations of one star are not independent), positives and negatives separately "
        "per task; 1000 resamples.",
        "",
        "Each rule change, its physics, its tune effect and the test score it had when "
        "adopted: [inspector-history.md](inspector-history.md), which also says what "
        "remains short of a goal and why.",
        "",
        "## Against the goals (test split)",
        "",
        *_goal_rows(
            test, test_stats["layout"], test_stats["snr"], survey, confident_errors(rows["test"])
        ),
        "",
        contradiction_line({sp: bench / f"eval-{sp}" for sp in ("test", "tune")}),
        "",
        "## On the stars a survey is made of (test split)",
        "",
        "A, F, G and K dwarfs and giants are negatives for every task, every such source in "
        "the library (no cap on their number), each observed once per SNR in one layout. "
        "Precision at a realistic base rate reweights the test split so that 1 candidate in "
        "100 (or 1,000) is a positive: precision = r·recall / (r·recall + (1 - r)·FP rate), "
        "with the FP rate over all the task's negatives (ordinary stars and the hard "
        "contaminants, each spectrum counted once).",
        "",
        base_rate_table(survey),
        "",
        "False-positive rate per ordinary class (said YES, with the count):",
        "",
        ordinary_table(rows["test"]),
        "",
        "The same on the tune split (what the rules are set on):",
        "",
        base_rate_table(survey_stats(rows["tune"])),
        "",
        ordinary_table(rows["tune"]),
        "",
        "## Test split: macro-F1 [95% CI] per layout and SNR",
        "",
        test_grid,
        "",
        "Per task F1 by layout:",
        "",
        task_by(rows["test"], "layout"),
        "",
        "Per task F1 by SNR:",
        "",
        task_by(rows["test"], "snr"),
        "",
        f"Per task ({policy}, all layouts and SNRs):",
        "",
        task_table(test),
        "",
        "## Where it fails: YES rate per task and true class (test split)",
        "",
        "For the positive class this is the recall; for each contaminant, the false-positive rate.",
        "",
        confusers(rows["test"]),
        "",
    ]
    if demo_m is not None:
        md += [
            "## The demo beside it",
            "",
            "The same inspector on three fresh simulated demo sets (`launch.py demo`, seeds 1-3, "
            "4 spectra per class, LAMOST-like, SNR 8-60): the numbers a new user meets first.",
            "",
            "| set | n | macro-F1 | ECE | 10% to experts | "
            + " | ".join(f"F1 {t}" for t in test["per_task"])
            + " |",
            "|---|---|---|---|---|" + "---|" * len(test["per_task"]),
        ]
        for name, m in (("benchmark test (real spectra)", test), ("demo (simulated)", demo_m)):
            h10 = next(h["macro_f1"] for h in m["hitl"] if h["k"] == 10)
            md.append(
                f"| {name} | {m['n']} | {m['macro_f1']:.3f} | {m['ece']:.3f} | {h10:.3f} | "
                + " | ".join(
                    f"{m['per_task'].get(t, {}).get('f1', float('nan')):.2f}"
                    for t in test["per_task"]
                )
                + " |"
            )
        md.append("")
    md += [
        "## Tune split (what the rules are set on): macro-F1 [95% CI]",
        "",
        tune_grid,
        "",
        "## Human in the loop (test split)",
        "",
        "Macro-F1 when the k% least confident candidates are sent to experts (simulated "
        "with the labels).",
        "",
        hitl_table({policy: test}),
        "",
        f"![reliability]({Path(f'{stem}_reliability.png').name}) "
        f"![hitl]({Path(f'{stem}_hitl.png').name})",
        "",
        "## What stands behind each number",
        "",
        f"Survey files (one per source, layout and SNR): test {n_files['test']}, tune "
        f"{n_files['tune']}.",
        "",
    ]
    for split in ("test", "tune"):
        comp = composition(bench / split / "catalog.csv")
        md += [
            f"### {split}",
            "",
            "| task | distinct positive objects | of which templates | negative objects | positive spectra | negative spectra | negative classes |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in comp:
            md.append(
                f"| {c['task']} | {c['pos_objects']} | {c['pos_template_objects']} | {c['neg_objects']} | "
                f"{c['pos_spectra']} | {c['neg_spectra']} | {c['neg_classes']} |"
            )
        md.append("")
    calibrated = None
    if policy == "rules":
        cal_md, calibrated = calibrated_section(bench, n_boot, fresh)
        md += cal_md
    md += CAVEATS
    report.write_text(with_kept_tail("\n".join(md), report))
    return {"test": test_stats, "demo": demo_m, "calibrated": calibrated}


# Sections other tools write into the accuracy report start at this line and run to the end
# of the file (bench/learning_curve.py's learning curve): regenerating keeps them.
KEPT_FROM = "<!-- learning-curve -->"


def with_kept_tail(text: str, report: Path) -> str:
    """`text`, followed by everything of the existing `report` from `KEPT_FROM` to its end."""
    old = report.read_text() if report.exists() else ""
    at = old.find(KEPT_FROM)
    if at < 0:
        return text
    return text.rstrip("\n") + "\n\n" + old[at:]


def calibrated_section(
    bench: Path, n_boot: int = 1000, fresh: bool = True
) -> tuple[list[str], dict]:
    """The goals again for the inspector after `calibrate` has learned from the tune split's
    labels (as it learns from experts' decisions), scored on the test split it never saw."""
    from annotate.learning.fit import cv_table
    from training.benchmark.tuning import fit_inspector_model
    from training.evaluate import task_table

    path = bench / "inspector-model.json"
    model = fit_inspector_model(bench / "tune" / "catalog.csv", path)
    out = bench / "eval-test-calibrated"
    rows = score_split(bench, "test", f"rules:{path}", fresh=fresh, out=out)
    grid, stats = grid_table(rows, n_boot)
    test = stats["layout"]["all"]
    md = [
        "## After `calibrate` learns from the tune split's labels (test split)",
        "",
        "`launch.py calibrate` learns from the experts' decisions in the store. Here it "
        "learns from the tune split's labels as if experts had given them "
        "(`training.benchmark.tuning.fit_inspector_model`, the same `annotate.learning.fit."
        "fit`, at least 50 labels per task): a calibration or a learned combiner is blended "
        "with the rules at the weight cross-validation on tune, holding out whole objects, "
        "supports (0, the rules, where it supports none). The fitted model "
        "(`inspector-model.json` in the benchmark folder) then vets the test split through "
        "the runner (`vet --policy rules --model`), which it never saw. Cross-validation on "
        "tune:",
        "",
        "```",
        cv_table(model),
        "```",
        "",
        *_goal_rows(
            test, stats["layout"], stats["snr"], survey_stats(rows), confident_errors(rows)
        ),
        "",
        contradiction_line({"test": out}),
        "",
        grid,
        "",
        task_table(test),
        "",
    ]
    return md, stats
