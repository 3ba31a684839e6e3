"""The learning curve: what `calibrate` makes of expert labels, drawn at random and drawn
as the app's queue serves them.

    nice -n 10 python bench/learning_curve.py [--bench data/bench] [--seeds 5]
    nice -n 10 python bench/learning_curve.py --tune   # the prior and class minimum, on tune

Campaigns are drawn from the benchmark's `tune` split two ways, one campaign per seed:
`random` (labels drawn at random) and `queue` (labels in the order the app's own queue
serves them to an expert: least certain first, a share of the random audit, the schedule
refitting every 100 labels and re-ranking the queue; `bench/expert_queue.py`, which stops
where the queue runs dry). The inspector model is fitted on each campaign exactly as
`calibrate` fits the store's labels (`annotate.learning.fit.fit`) and scored on the `test`
split it never saw. Per draw, size and task: F1 (mean over seeds), its change against the
plain rules with a 95% interval from a bootstrap over test objects (the seeds' mean change
on each resample), the worst seed, and the weight the blend gave the learned model; per
size macro-F1 and ECE. The inspector's measurements of each split are read once and cached
beside the benchmark (`examples-SPLIT.pkl`; `--remeasure` after a rule change).

`--tune` sets the blend's prior and the class minimums of `annotate.learning.evidence`
on tune alone: tune's objects are split in two halves, campaigns drawn from one (both
ways) and scored on the other, for each candidate setting; it prints the setting with the
largest mean M-giant gain among those under which no task's F1 fell more than 0.01 below
the plain rules at any size, seed and draw.

`--plot FILE` draws the curve; `--doc docs/accuracy.md` writes it into the accuracy report
from its `<!-- learning-curve -->` line to the end (the report's runner keeps that part),
keeping the block `bench/learning_ceiling.py --doc` writes there. The last line is
`learning_curve_min_gain: X`, the worst per-task F1 change against the plain rules over
every draw, size and seed (the goal: no lower than -0.02).
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
DRAWS = ("random", "queue")
GOAL = 0.03  # the M-giant F1 gain asked for after ~1,000 labels


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


def campaigns(pool: list, sizes, seeds: int, how: str) -> dict[int, dict[int, list]]:
    """size -> seed -> the campaign's examples. `random`: drawn at random per size and
    seed; `queue`: the first n labels of one queue-served campaign per seed (sizes the
    queue never reaches are left out; the largest entry is all it served)."""
    from bench.expert_queue import served_order

    if how == "random":
        return {n: {s: draw(pool, n, s) if n else [] for s in range(seeds)} for n in sizes}
    out: dict[int, dict[int, list]] = {}
    for s in range(seeds):
        order = served_order(pool, seed=s, stop=max(sizes))
        for n in sizes:
            if n <= len(order):
                out.setdefault(n, {})[s] = [pool[i] for i in order[:n]]
        if len(order) < max(sizes):  # the queue ran dry: all it served is one more size
            out.setdefault(-len(order), {})[s] = [pool[i] for i in order]
    # a size reached by every seed stands as itself; the dry ends, by their median length
    dry = {k: v for k, v in out.items() if k < 0}
    kept = {k: v for k, v in out.items() if k >= 0 and len(v) == seeds}
    if dry:
        ends = {s: camp for v in dry.values() for s, camp in v.items()}
        kept[int(np.median([len(c) for c in ends.values()]))] = ends
    return dict(sorted(kept.items()))


def curve(camps: dict[int, dict[int, list]], held: list, n_boot: int = 1000, **blend) -> dict:
    """Per size: per task the F1 change of each seed, the bootstrap interval of the mean
    change, the weights and statuses; macro-F1 and ECE per seed."""
    from annotate.learning.evidence import counts
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
    out = {"tasks": tasks, "rules": {t: float(f1_of(base_c[t].sum(1))) for t in tasks},
           "rules_ece": ece(base, y), "sizes": {}, "n_boot": n_boot}  # fmt: skip
    for n, per_seed in camps.items():
        keys = ("f1", "delta", "weight", "positives", "objects", "status", "labels")
        rec: dict = {k: {t: [] for t in tasks} for k in keys}
        rec.update(macro=[], ece=[], seconds=[], n=[])
        boot_d = {t: np.zeros(n_boot) for t in tasks}
        for s, camp in per_seed.items():
            t0 = time.perf_counter()
            model = fit(camp, version=1, seed=s, **blend) if camp else None
            rec["seconds"].append(time.perf_counter() - t0)
            rec["n"].append(len(camp))
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
                rec["weight"][t].append(tm.weight if tm is not None and tm.kind != "rules" else 0.0)
                mine = counts([e for e in camp if e.task == t])
                rec["labels"][t].append(mine["positives"] + mine["negatives"])
                rec["positives"][t].append(mine["positives"])
                rec["objects"][t].append(mine["positive_objects"])
                why = (model.info["cv"].get(t) or {}) if model is not None else {}
                rec["status"][t].append(why.get("status", "waited"))
                bc = c[:, boot].sum(2)  # (3, n_boot)
                bb = base_c[t][:, boot].sum(2)
                boot_d[t] += (f1_of(bc) - f1_of(bb)) / len(per_seed)
            rec["macro"].append(float(np.mean(f1s)))
        rec["interval"] = {t: [float(np.percentile(boot_d[t], 2.5)),
                               float(np.percentile(boot_d[t], 97.5))] for t in tasks}  # fmt: skip
        out["sizes"][n] = rec
    return out


def worst(res: dict) -> float:
    """The worst per-task F1 change against the plain rules over every size and seed."""
    return min(min(d) for r in res["sizes"].values() for d in r["delta"].values())


def labels_to(res: dict, task: str = "m_giant", gain: float = GOAL) -> int | None:
    """The smallest campaign size whose mean F1 change for `task` reaches `gain`."""
    for n, r in res["sizes"].items():
        if task in r["delta"] and np.mean(r["delta"][task]) >= gain:
            return n
    return None


def report(res: dict, draw_name: str = "random") -> list[str]:
    """One draw's curve as text lines (markdown tables)."""
    tasks = res["tasks"]
    lines = [f"| labels ({draw_name}) | macro-F1 (mean, worst seed) | ECE (worst seed) | "
             + " | ".join(f"{t}: F1 change [95%], worst seed; weight" for t in tasks) + " |",
             "|---" * (3 + len(tasks)) + "|"]  # fmt: skip
    for n, r in res["sizes"].items():
        cells = []
        for t in tasks:
            lo, hi = r["interval"][t]
            w = r["weight"][t]
            cells.append(f"{np.mean(r['delta'][t]):+.3f} [{lo:+.3f}, {hi:+.3f}], "
                         f"{min(r['delta'][t]):+.3f}; "
                         + (f"{np.mean(w):.2f} ({min(w):.2f}-{max(w):.2f})" if max(w) > 0 else "0"))  # fmt: skip
        lines.append(f"| {_size(n, r)} | {np.mean(r['macro']):.3f}, {min(r['macro']):.3f} | "
                     f"{max(r['ece']):.3f} | " + " | ".join(cells) + " |")  # fmt: skip
    lines += ["", f"What each task's labels held ({draw_name} draws, median over seeds): "
              "labels, YES labels (distinct YES objects), and how many seeds' fits waited "
              "(too few labels of a class), kept the rules (weight 0) or blended.", "",
              f"| labels ({draw_name}) | " + " | ".join(tasks) + " |",
              "|---" * (1 + len(tasks)) + "|"]  # fmt: skip
    for n, r in res["sizes"].items():
        cells = []
        for t in tasks:
            st = r["status"][t]
            said = ", ".join(f"{k} {st.count(k)}" for k in ("waited", "rules", "blended")
                             if st.count(k))  # fmt: skip
            cells.append(f"{int(np.median(r['labels'][t]))}: {int(np.median(r['positives'][t]))} "
                         f"YES ({int(np.median(r['objects'][t]))}); {said}")  # fmt: skip
        lines.append(f"| {_size(n, r)} | " + " | ".join(cells) + " |")
    return lines


def _size(n: int, r: dict) -> str:
    """A size as the table shows it: where seeds' campaigns differ in length (the queue
    ran dry), their range."""
    lo, hi = min(r["n"], default=n), max(r["n"], default=n)
    return str(n) if lo == hi else f"{n} (all served: {lo}-{hi})"


def plot(results: dict[str, dict], path: Path) -> None:
    """Per task, the F1 change (mean over seeds, 95% band) and the weight against labels,
    random draws solid, queue draws dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    any_res = next(iter(results.values()))
    tasks = any_res["tasks"]
    fig, (ax, aw) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=110)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, t in enumerate(tasks):
        for name, res in results.items():
            sizes = list(res["sizes"])
            xs = [int(np.median(res["sizes"][n]["n"])) for n in sizes]
            ls = "-" if name == "random" else "--"
            mean = [np.mean(res["sizes"][n]["delta"][t]) for n in sizes]
            lo = [res["sizes"][n]["interval"][t][0] for n in sizes]
            hi = [res["sizes"][n]["interval"][t][1] for n in sizes]
            ax.plot(xs, mean, ls, marker="o", color=colours[k], label=f"{t} ({name})")
            ax.fill_between(xs, lo, hi, color=colours[k], alpha=0.08)
            aw.plot(xs, [np.mean(res["sizes"][n]["weight"][t]) for n in sizes], ls,
                    marker="o", color=colours[k], label=f"{t} ({name})")  # fmt: skip
    ax.axhline(0, color="black", lw=0.8)
    ax.axhline(-0.02, color="grey", lw=0.8, ls=":")
    top = max(int(np.median(r["n"])) for res in results.values() for r in res["sizes"].values())
    for a in (ax, aw):
        a.set_xscale("symlog", linthresh=50)
        a.set_xlim(0, max(top, 50) * 1.3)
        a.set_xlabel("expert labels (solid: random draws; dashed: the queue's)")
        a.grid(alpha=0.3)
    ax.set_ylabel("F1 change against the plain rules (test)")
    ax.set_title("F1 change, mean over seeds (band: 95%)", fontsize=10)
    aw.set_ylabel("weight on the learned model (mean over seeds)")
    aw.set_ylim(-0.02, 1.02)
    aw.set_title("The blend's weight", fontsize=10)
    aw.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


MARKER = "<!-- learning-curve -->"
CEILING, CEILING_END = "<!-- learning-ceiling -->", "<!-- /learning-ceiling -->"
TUNED, TUNED_END = "<!-- learning-tune -->", "<!-- /learning-tune -->"


def kept_block(text: str, start: str, end: str) -> str:
    """The block from `start` to `end` in `text` ('' when absent)."""
    if start in text and end in text:
        return start + text.split(start, 1)[1].split(end, 1)[0] + end
    return ""


def put_block(doc: Path, block: list[str], start: str, end: str) -> None:
    """Put the block in `doc`: in place of the one there, else at its end."""
    text = doc.read_text() if doc.exists() else ""
    body = "\n".join(block)
    if start in text and end in text:
        head, rest = text.split(start, 1)
        text = head + body + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + body + "\n"
    doc.write_text(text)


def goals(results: dict[str, dict]) -> list[str]:
    """The learning goals against this run, as a markdown table."""
    rows = []
    for name, res in results.items():
        sizes = res["sizes"]
        near = min(sizes, key=lambda n: (abs(n - 1000), -n))
        r = sizes[near]
        mg, wd = np.mean(r["delta"].get("m_giant", [0])), np.mean(r["delta"].get("wd", [0]))
        at = f"{_size(near, r)} labels, {name}"
        rows += [(f"M-giant F1 change after {at}", f">= +{GOAL:.2f}", f"{mg:+.3f}", mg >= GOAL),
                 (f"white-dwarf F1 change after {at}", ">= 0", f"{wd:+.3f}", wd >= -1e-9)]  # fmt: skip
    w = min(worst(res) for res in results.values())
    top = max(max(r["ece"]) for res in results.values() for r in res["sizes"].values())
    rows += [("no task's F1 more than 0.02 below the plain rules, any draw, size and seed",
              ">= -0.02", f"{w:+.3f}", w >= -0.02),
             ("ECE after learning, worst draw, size and seed", "<= 0.05", f"{top:.3f}", top <= 0.05)]  # fmt: skip
    if set(results) >= {"random", "queue"}:
        rn, qn = labels_to(results["random"]), labels_to(results["queue"])
        said = lambda n: "not reached" if n is None else f"{n}"  # noqa: E731
        rows.append((f"labels until the M-giant gain reaches +{GOAL:.2f}: queue against random",
                     "queue fewer", f"{said(qn)} against {said(rn)}",
                     qn is not None and (rn is None or qn < rn)))  # fmt: skip
    return ["| goal | target | measured | met |", "|---|---|---|---|"] + [
        f"| {g} | {t} | {m} | {'yes' if ok else 'no'} |" for g, t, m, ok in rows
    ]


def draws_note(results: dict[str, dict], task: str = "m_giant") -> list[str]:
    """How the two draws compare, in words, from this run's figures: the labels each needs
    for the gain, and what the queue's campaigns hold against random ones of the same size."""
    if not set(results) >= {"random", "queue"} or task not in results["random"]["tasks"]:
        return []
    rnd, que = results["random"]["sizes"], results["queue"]["sizes"]
    rn, qn = labels_to(results["random"], task), labels_to(results["queue"], task)
    end = max(que)
    said = lambda n: "never" if n is None else f"from {n} labels"  # noqa: E731
    parts = [f"Queue against random: the {task} gain of +{GOAL:.2f} is reached {said(qn)} by "
             f"the queue's campaigns and {said(rn)} by random ones."]  # fmt: skip
    lengths = que[end]["n"]
    if min(lengths) < max(SIZES):
        parts.append(f"The queue runs dry after {min(lengths)}-{max(lengths)} labels: it serves "
                     "the verdicts the inspector is unsure of (certainty under 0.9) and the "
                     "audit's share of the confident ones, and no more, so its campaigns stop "
                     "short of 1,000.")  # fmt: skip
    common = [n for n in que if n in rnd and n > 0]
    if common:
        n = max(common)
        med = lambda r, k: int(np.median(r[n][k][task]))  # noqa: E731
        parts.append(f"At {n} labels the queue's campaigns hold {med(que, 'positives')} {task} "
                     f"YES labels from {med(que, 'objects')} objects against random draws' "
                     f"{med(rnd, 'positives')} from {med(rnd, 'objects')}, and give the learned "
                     f"model weight {np.mean(que[n]['weight'][task]):.2f} against "
                     f"{np.mean(rnd[n]['weight'][task]):.2f}.")  # fmt: skip
    return [" ".join(parts), ""]


def write_section(doc: Path, results: dict[str, dict], png: str | None, command: str,
                  notes: list[str] | None = None) -> None:  # fmt: skip
    """Replace `doc` from MARKER to its end (or append) with the curve: the accuracy
    report's runner keeps what follows the marker."""
    text = doc.read_text() if doc.exists() else ""
    head = text.split(MARKER)[0].rstrip("\n")
    # what --tune and bench/learning_ceiling.py wrote into the section stays, after the curve
    kept = [b for b in (kept_block(text, TUNED, TUNED_END), kept_block(text, CEILING, CEILING_END))
            if b]  # fmt: skip
    from annotate.learning import evidence

    first = next(iter(results.values()))
    seeds = len(next(iter(first["sizes"].values()))["macro"])
    tasks = first["tasks"]
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
        "Campaigns are drawn from the tune split two ways, one campaign per seed: `random` "
        "(labels drawn at random, as if experts had labelled those candidates) and `queue` "
        "(labels in the order the app's queue serves them: least certain first, one item in "
        "20 from the random audit of the confident verdicts, the learning schedule refitting "
        "every 100 labels and re-ranking the queue; `bench/expert_queue.py`; the campaign "
        "ends where the queue runs dry). `calibrate`'s fit (`annotate.learning.fit.fit`: a "
        "task waits below its class minimums; otherwise it serves a learned model blended "
        "with the plain rules at the weight the out-of-fold evidence supports, checked by "
        "nested cross-validation grouped by object) learns from each campaign, and the test "
        "split, never seen, is scored. Per task: the F1 change against the plain rules (mean "
        f"over {seeds} seeds) with its 95% interval from {first.get('n_boot', 1000)} "
        "resamples of test objects, the worst seed's change, and the weight on the learned "
        "model (mean, and range over seeds; 0 = the plain rules). The weight's prior (sd "
        f"{evidence.PRIOR_WEIGHT:g}) and the class minimum ({evidence.MIN_POSITIVES} labels of "
        "each class) were set on the tune split alone (`--tune`: campaigns from one half of "
        "tune's objects scored on the other), before the test split was scored.",
        "",
    ]
    for name, res in results.items():
        body += [*report(res, name), ""]
    body += [f"Plain rules: macro-F1 {np.mean([first['rules'][t] for t in tasks]):.3f}, "
             f"ECE {first['rules_ece']:.3f}; "
             + ", ".join(f"{t} {first['rules'][t]:.3f}" for t in tasks) + ".", "",
             *goals(results), ""]  # fmt: skip
    body += [*draws_note(results), *(notes or [])]
    if png:
        body += [f"![learning curve]({Path(png).name})", ""]
    for b in kept:
        body += [b, ""]
    doc.write_text((head + "\n\n" if head else "") + "\n".join(body))


def halves(ex: list) -> tuple[list, list]:
    """Tune split in two by object (a stable hash), for setting thresholds on tune alone."""
    a = [e for e in ex if zlib.crc32(e.group.encode()) % 2 == 0]
    b = [e for e in ex if zlib.crc32(e.group.encode()) % 2 == 1]
    return a, b


SAVED = "learning-curve-results.pkl"  # the last run's results, for --cached
PRIORS = (0.25, 0.5, 1.0, 1e6)  # the prior sd of the weight tried by --tune (1e6: none)
MINIMUMS = (10, 20, 40)


def tune(ex: list, sizes, seeds: int, draws=DRAWS) -> tuple[dict, list[str]]:
    """Each (prior, minimum) on tune's halves, both ways; the chosen setting and the lines
    that say why."""
    a, b = halves(ex)
    camps = {(d, i): campaigns(tr, sizes, seeds, d) for d in draws for i, tr in enumerate((a, b))}
    lines, best = [], None
    for prior in PRIORS:
        for k in MINIMUMS:
            deltas: dict[str, list[float]] = {}
            mg: list[float] = []
            for (_, i), camp in camps.items():
                res = curve(camp, (b, a)[i], 200, prior=prior, thresholds=(k, k))
                for r in res["sizes"].values():
                    for t, v in r["delta"].items():
                        deltas.setdefault(t, []).extend(v)
                near = min(res["sizes"], key=lambda n: (abs(n - 1000), -n))
                mg += res["sizes"][near]["delta"].get("m_giant", [])
            w = min(min(v) for v in deltas.values())
            gain = float(np.mean(mg))
            lines.append(f"prior {prior:g}, minimum {k}: worst per-task F1 change {w:+.3f}, "
                         f"M-giant near 1,000 labels {gain:+.3f}, white dwarfs worst "
                         f"{min(deltas.get('wd', [0])):+.3f}")  # fmt: skip
            print(lines[-1], flush=True)
            if w >= -0.01 and (best is None or gain > best[2]):
                best = (prior, k, gain)
    chosen = {"prior": best[0], "minimum": best[1]} if best else {}
    return chosen, lines


def tune_block(lines: list[str], chosen: dict, sizes, draws, seeds: int, cmd: str) -> list[str]:
    """What `--tune` found, as the block it writes into the accuracy report."""
    return [TUNED, "### How the prior and the minimum were set (tune split only)", "",
            "Regenerate with:", "", "```", cmd, "```", "",
            f"Campaigns of {', '.join(map(str, sizes))} labels ({', '.join(draws)} draws, "
            f"{seeds} seeds) from one half of tune's objects, scored on the other half, both "
            "ways; the largest M-giant gain near 1,000 labels among the settings under which "
            "no task lost more than 0.01 F1 at any size, seed and draw was chosen (the queue's "
            "order comes from the schedule's fits with the settings of their day):", "",
            *[f"- {line}" for line in lines], "", f"Chosen: {chosen}.", TUNED_END]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--bench", default="data/bench", help="A built benchmark (tune/, test/).")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--draws", default=",".join(DRAWS), help="random, queue or both.")
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--remeasure", action="store_true", help="Read the spectra again.")
    ap.add_argument("--tune", action="store_true", help="Set the prior and minimums on tune.")
    ap.add_argument("--cached", action="store_true", help="Report, plot and write the doc from "
                    f"the last run's results ({SAVED} in the benchmark) instead of fitting.")  # fmt: skip
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
    draws = tuple(d for d in args.draws.split(",") if d)
    tune_ex = examples(bench, "tune", args.remeasure)
    if args.tune:
        chosen, lines = tune(tune_ex, sizes, args.seeds, draws)
        if args.doc:
            cmd = "nice -n 10 python bench/learning_curve.py " + " ".join(
                argv if argv is not None else sys.argv[1:]
            )
            block = tune_block(lines, chosen, sizes, draws, args.seeds, cmd.strip())
            put_block(Path(args.doc), block, TUNED, TUNED_END)
        print(f"learning_curve_tuned: {chosen}")
        return 0
    saved = bench / SAVED
    if args.cached:
        with open(saved, "rb") as fh:
            results, argv = pickle.load(fh)
    else:
        test = examples(bench, "test", args.remeasure)
        results = {}
        for d in draws:
            t0 = time.perf_counter()
            res = results[d] = curve(campaigns(tune_ex, sizes, args.seeds, d), test,
                                     args.bootstrap)  # fmt: skip
            secs = [s for r in res["sizes"].values() for s in r["seconds"]]
            print(f"{d}: fit time per campaign median {np.median(secs):.1f} s, max "
                  f"{max(secs):.1f} s; the draw in {time.perf_counter() - t0:.0f} s")  # fmt: skip
        argv = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--cached"]
        with open(saved, "wb") as fh:
            pickle.dump((results, argv), fh)
    for d, res in results.items():
        for line in report(res, d):
            print(line)
        print()
    for line in goals(results):
        print(line)
    if args.plot:
        plot(results, Path(args.plot))
        print(f"plot: {args.plot}")
    if args.doc:
        cmd = "nice -n 10 python bench/learning_curve.py " + " ".join(argv)
        write_section(Path(args.doc), results, args.plot, cmd.strip())
        print(f"doc: {args.doc}")
    print(f"learning_curve_min_gain: {min(worst(r) for r in results.values()):+.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
