"""The learning curve: what `calibrate` makes of 0, 50, 100, 300 and 1,000 expert labels.

    nice -n 10 python bench/learning_curve.py [--bench data/bench] [--seeds 5]
    nice -n 10 python bench/learning_curve.py --thresholds   # the class minimums, on tune

Campaigns of each size are drawn at random from the benchmark's `tune` split (one draw per
seed: labels as experts would give them), the inspector model is fitted on them exactly as
`calibrate` fits the store's labels (`annotate.learning.fit.fit`, against the plain rules)
and scored on the `test` split it never saw. Per size and task: F1 (mean over seeds), its
change against the plain rules with a 95% interval from a bootstrap over test objects
(the seeds' mean change on each resample), the worst seed, and the models adopted; per size
macro-F1 and ECE. The inspector's measurements of each split are read once and cached
beside the benchmark (`examples-SPLIT.pkl`; `--remeasure` after a rule change).

`--thresholds` sets the class minimums of `annotate.learning.evidence` from a learning
curve on tune alone: tune's objects are split in two halves, campaigns are drawn from one
and scored on the other, for each candidate minimum, adopting on the point comparison alone
(the bootstrap gate off, so the minimum is the only guard); it prints the smallest minimum
at which no task's F1 fell more than 0.01 below the plain rules at any size and seed.

`--plot FILE` draws the curve (macro-F1 and each task's F1 against the campaign size);
`--doc docs/accuracy.md` writes it into the accuracy report from its `<!-- learning-curve -->`
line to the end (the report's runner keeps that part), keeping the block
`bench/learning_ceiling.py --doc` writes there (what limits the gain, on tune alone).
The last line is `learning_curve_min_gain: X`, the worst per-task F1 change against the
plain rules over every size and seed (the goal: no lower than -0.02).
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
import zlib
from pathlib import Path

import numpy as np

SIZES = (0, 50, 100, 300, 1000)


def examples(bench: Path, split: str, remeasure: bool = False, workers: int = 2) -> list:
    """The split's labelled rows as learner examples, measured once and cached."""
    from training.benchmark.tuning import labelled_examples

    cache = bench / f"examples-{split}.pkl"
    if cache.exists() and not remeasure:
        with open(cache, "rb") as fh:
            return pickle.load(fh)
    got = labelled_examples(bench / split / "catalog.csv", workers=workers)
    with open(cache, "wb") as fh:
        pickle.dump(got, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return got


def predictions(model, ex: list) -> np.ndarray:
    """P(YES) of a fitted inspector model (the plain rules where it has no task model)."""
    from annotate.learning.models import predict

    p = np.array([e.p_rules for e in ex], float)
    if model is None:
        return p
    by: dict[str, list[int]] = {}
    for i, e in enumerate(ex):
        by.setdefault(e.task, []).append(i)
    for t, idx in by.items():
        tm = model.tasks.get(t)
        if tm is not None and tm.kind != "rules":
            p[idx] = predict(tm, [ex[i] for i in idx])
    return p


def object_counts(ex: list, p: np.ndarray, idx: np.ndarray, groups: np.ndarray, n_groups: int):
    """Per object, (tp, fp, fn) of the verdicts P(YES) > 0.5 over the rows `idx`."""
    y = np.array([ex[i].label for i in idx])
    pred = p[idx] > 0.5
    g = groups[idx]
    return np.stack([np.bincount(g, weights=(pred & y).astype(float), minlength=n_groups),
                     np.bincount(g, weights=(pred & ~y).astype(float), minlength=n_groups),
                     np.bincount(g, weights=(~pred & y).astype(float), minlength=n_groups)])  # fmt: skip


def f1_of(c: np.ndarray) -> np.ndarray:
    """F1 from summed (tp, fp, fn) along the first axis."""
    tp, fp, fn = c
    den = 2 * tp + fp + fn
    return np.where(den > 0, 2 * tp / np.where(den > 0, den, 1), 0.0)


def ece(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error over equal-width P(YES) bins."""
    b = np.minimum((p * bins).astype(int), bins - 1)
    out = 0.0
    for k in range(bins):
        m = b == k
        if m.any():
            out += m.mean() * abs(p[m].mean() - y[m].mean())
    return float(out)


def draw(pool: list, n: int, seed: int) -> list:
    """A campaign: `n` labels drawn at random from the pool."""
    rng = np.random.default_rng(seed)
    take = rng.choice(len(pool), size=min(n, len(pool)), replace=False)
    return [pool[i] for i in sorted(take)]


def curve(
    pool: list,
    held: list,
    sizes=SIZES,
    seeds: int = 5,
    n_boot: int = 1000,
    thresholds: tuple[int, int] | None = None,
    gate: bool = True,
) -> dict:
    """Per size: per task the F1 change of each seed, the bootstrap interval of the mean
    change, the kinds adopted; macro-F1 and ECE per seed."""
    from annotate.learning.fit import fit

    tasks = sorted({e.task for e in held})
    groups_all = sorted({e.group for e in held})
    gi = {g: i for i, g in enumerate(groups_all)}
    groups = np.array([gi[e.group] for e in held])
    by = {t: np.array([i for i, e in enumerate(held) if e.task == t]) for t in tasks}
    y = np.array([e.label for e in held], float)
    base = predictions(None, held)
    base_c = {t: object_counts(held, base, by[t], groups, len(gi)) for t in tasks}
    rng = np.random.default_rng(12345)
    boot = rng.integers(0, len(gi), (n_boot, len(gi)))
    sel: dict = {"gate": gate} if thresholds is None else {"thresholds": thresholds, "gate": gate}
    out = {"tasks": tasks, "rules": {t: float(f1_of(base_c[t].sum(1))) for t in tasks},
           "rules_ece": ece(base, y), "sizes": {}, "n_boot": n_boot}  # fmt: skip
    for n in sizes:
        rec = {"f1": {t: [] for t in tasks}, "delta": {t: [] for t in tasks},
               "adopted": {t: [] for t in tasks}, "macro": [], "ece": [], "seconds": [],
               "positives": {t: [] for t in tasks}, "status": {t: [] for t in tasks}}  # fmt: skip
        boot_d = {t: np.zeros(n_boot) for t in tasks}
        for s in range(seeds):
            t0 = time.perf_counter()
            camp = draw(pool, n, s) if n else []
            model = fit(camp, version=1, seed=s, **sel) if camp else None
            rec["seconds"].append(time.perf_counter() - t0)
            p = predictions(model, held)
            rec["ece"].append(ece(p, y))
            f1s = []
            for t in tasks:
                c = object_counts(held, p, by[t], groups, len(gi))
                f, f0 = float(f1_of(c.sum(1))), out["rules"][t]
                rec["f1"][t].append(f)
                rec["delta"][t].append(f - f0)
                f1s.append(f)
                tm = model.tasks.get(t) if model is not None else None
                rec["adopted"][t].append(tm.kind if tm is not None else "rules")
                why = (model.info["cv"].get(t) or {}) if model is not None else {}
                rec["positives"][t].append(sum(1 for e in camp if e.task == t and e.label))
                rec["status"][t].append(why.get("status", "waited"))
                bc = c[:, boot].sum(2)  # (3, n_boot)
                bb = base_c[t][:, boot].sum(2)
                boot_d[t] += (f1_of(bc) - f1_of(bb)) / seeds
            rec["macro"].append(float(np.mean(f1s)))
        rec["interval"] = {t: [float(np.percentile(boot_d[t], 2.5)),
                               float(np.percentile(boot_d[t], 97.5))] for t in tasks}  # fmt: skip
        out["sizes"][n] = rec
    return out


def worst(res: dict) -> float:
    """The worst per-task F1 change against the plain rules over every size and seed."""
    return min(min(d) for r in res["sizes"].values() for d in r["delta"].values())


def report(res: dict) -> list[str]:
    """The curve as text lines (a markdown table)."""
    tasks = res["tasks"]
    rules_macro = float(np.mean([res["rules"][t] for t in tasks]))
    lines = ["| labels | macro-F1 (mean, worst seed) | ECE (worst seed) | "
             + " | ".join(f"{t} F1 change [95%], worst seed" for t in tasks) + " |",
             "|---" * (3 + len(tasks)) + "|"]  # fmt: skip
    for n, r in res["sizes"].items():
        cells = []
        for t in tasks:
            lo, hi = r["interval"][t]
            kinds = sorted(set(r["adopted"][t]) - {"rules"})
            cells.append(f"{np.mean(r['delta'][t]):+.3f} [{lo:+.3f}, {hi:+.3f}], "
                         f"{min(r['delta'][t]):+.3f}" + (f" ({'/'.join(kinds)})" if kinds else ""))  # fmt: skip
        lines.append(f"| {n} | {np.mean(r['macro']):.3f}, {min(r['macro']):.3f} | "
                     f"{max(r['ece']):.3f} | " + " | ".join(cells) + " |")  # fmt: skip
    lines += ["", "What each task did, over the seeds: positive labels in the campaign (median) "
              "and how many seeds' fits waited (too few labels of a class), kept the rules "
              "(no interval above zero) or adopted a model.", "",
              "| labels | " + " | ".join(tasks) + " |", "|---" * (1 + len(tasks)) + "|"]  # fmt: skip
    for n, r in res["sizes"].items():
        cells = []
        for t in tasks:
            st = r["status"][t]
            said = ", ".join(f"{k} {st.count(k)}" for k in ("waited", "kept", "fell back", "adopted")
                             if st.count(k))  # fmt: skip
            cells.append(f"{int(np.median(r['positives'][t]))} positives: {said}")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"Plain rules: macro-F1 {rules_macro:.3f}, ECE {res['rules_ece']:.3f}; "
                 + ", ".join(f"{t} {res['rules'][t]:.3f}" for t in tasks) + ".")  # fmt: skip
    return lines


def plot(res: dict, path: Path) -> None:
    """Macro-F1 and each task's F1 (mean over seeds, worst seed dashed) against labels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = list(res["sizes"])
    xs = np.arange(len(sizes))
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=110)
    for t in res["tasks"]:
        mean = [np.mean(res["sizes"][n]["f1"][t]) for n in sizes]
        ax.plot(xs, mean, marker="o", label=t)
    macro = [np.mean(res["sizes"][n]["macro"]) for n in sizes]
    low = [min(res["sizes"][n]["macro"]) for n in sizes]
    ax.plot(xs, macro, marker="s", color="black", lw=2.2, label="macro-F1")
    ax.plot(xs, low, color="black", ls="--", lw=1, label="macro-F1, worst seed")
    ax.set_xticks(xs, [str(n) for n in sizes])
    ax.set_xlabel("expert labels drawn from tune (campaign size)")
    ax.set_ylabel("F1 on the test split")
    ax.set_title("What calibrate learns from expert labels (test split)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


MARKER = "<!-- learning-curve -->"
CEILING, CEILING_END = "<!-- learning-ceiling -->", "<!-- /learning-ceiling -->"


def goals(res: dict) -> list[str]:
    """The learning goals against this run, as a markdown table."""
    rules_macro = float(np.mean([res["rules"][t] for t in res["tasks"]]))
    sizes = res["sizes"]
    near = min(sizes, key=lambda n: abs(n - 1000))
    gain = float(np.mean(sizes[near]["macro"])) - rules_macro
    w = worst(res)
    top = max(max(r["ece"]) for r in sizes.values())
    rows = [
        ("no task's F1 more than 0.02 below the plain rules, any size and seed", ">= -0.02",
         f"{w:+.3f}", w >= -0.02),
        (f"macro-F1 after {near} labels against the plain rules ({rules_macro:.3f})", ">= +0.03",
         f"{gain:+.3f}", gain >= 0.03),
        ("ECE after learning, worst size and seed", "<= 0.05", f"{top:.3f}", top <= 0.05),
    ]  # fmt: skip
    return ["| goal | target | measured | met |", "|---|---|---|---|"] + [
        f"| {g} | {t} | {m} | {'yes' if ok else 'no'} |" for g, t, m, ok in rows
    ]


def write_section(doc: Path, res: dict, png: str | None, command: str) -> None:
    """Replace `doc` from MARKER to its end (or append) with the curve: the accuracy
    report's runner keeps what follows the marker."""
    text = doc.read_text() if doc.exists() else ""
    head = text.split(MARKER)[0].rstrip("\n")
    # what bench/learning_ceiling.py wrote into the section stays, after the curve
    kept = ""
    if CEILING in text and CEILING_END in text:
        kept = CEILING + text.split(CEILING, 1)[1].split(CEILING_END, 1)[0] + CEILING_END
    last = res["sizes"][max(res["sizes"])]
    body = [
        MARKER,
        "## Learning from experts: the learning curve (test split)",
        "",
        "Regenerate with:",
        "",
        "```",
        command,
        "```",
        "",
        "Campaigns of each size are drawn at random from the tune split (one draw per seed, "
        "as if experts had labelled those candidates), `calibrate`'s fit "
        "(`annotate.learning.fit.fit`: a task waits below 40 labels of each class; a model "
        "is adopted only where a paired bootstrap over objects of out-of-fold predictions "
        "shows an improvement and F1 does not drop) learns from them, and the test split, "
        "never seen, is scored. Per task: the F1 change against the plain rules (mean over "
        f"{len(last['macro'])} seeds) with its 95% interval from {res.get('n_boot', 1000)} "
        "resamples of test objects, the worst seed's change, and the models any seed "
        "adopted.",
        "",
        *report(res),
        "",
        *goals(res),
        "",
    ]
    if png:
        body += [f"![learning curve]({Path(png).name})", ""]
    if kept:
        body += [kept, ""]
    doc.write_text((head + "\n\n" if head else "") + "\n".join(body))


def halves(ex: list) -> tuple[list, list]:
    """Tune split in two by object (a stable hash), for setting thresholds on tune alone."""
    a = [e for e in ex if zlib.crc32(e.group.encode()) % 2 == 0]
    b = [e for e in ex if zlib.crc32(e.group.encode()) % 2 == 1]
    return a, b


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--bench", default="data/bench", help="A built benchmark (tune/, test/).")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--remeasure", action="store_true", help="Read the spectra again.")
    ap.add_argument("--thresholds", action="store_true", help="Set the class minimums on tune.")
    ap.add_argument("--plot", default=None, help="Write the curve as a PNG here.")
    ap.add_argument("--doc", default=None, help=f"Write the curve into this markdown file, "
                    f"from its {MARKER} line to its end.")  # fmt: skip
    args = ap.parse_args(argv)
    bench = Path(args.bench)
    if not (bench / "tune" / "catalog.csv").exists():
        print(
            f"{bench}: no benchmark (python -m training.benchmark --out {bench})", file=sys.stderr
        )
        return 2
    sizes = tuple(int(v) for v in args.sizes.split(","))
    tune = examples(bench, "tune", args.remeasure)
    if args.thresholds:
        a, b = halves(tune)
        chosen = None
        for k in (3, 5, 10, 20, 40, 80):
            res = curve(a, b, sizes, args.seeds, 200, thresholds=(k, k), gate=False)
            w = worst(res)
            print(f"minimum {k} of each class: worst per-task F1 change {w:+.3f}, macro-F1 at "
                  f"{sizes[-1]}: {np.mean(res['sizes'][sizes[-1]]['macro']):.3f}", flush=True)  # fmt: skip
            if chosen is None and w >= -0.01:
                chosen = k
        print(f"learning_curve_min_class: {chosen}")
        return 0
    test = examples(bench, "test", args.remeasure)
    res = curve(tune, test, sizes, args.seeds, args.bootstrap)
    for line in report(res):
        print(line)
    secs = [s for r in res["sizes"].values() for s in r["seconds"]]
    print(f"fit time per campaign: median {np.median(secs):.1f} s, max {max(secs):.1f} s")
    if args.plot:
        plot(res, Path(args.plot))
        print(f"plot: {args.plot}")
    if args.doc:
        cmd = "nice -n 10 python bench/learning_curve.py " + " ".join(
            a for a in (argv if argv is not None else sys.argv[1:])
        )
        write_section(Path(args.doc), res, args.plot, cmd.strip())
        print(f"doc: {args.doc}")
    print(f"learning_curve_min_gain: {worst(res):+.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
