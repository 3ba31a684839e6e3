"""How much a model over the inspector's measurements could gain, on the tune split alone.

    nice -n 10 python bench/learning_ceiling.py --bench data/bench-learn

Reads only the tune split's cached examples (`examples-tune.pkl`, written by
`bench/learning_curve.py`); the test split is never opened. Two questions:

1. The ceiling of each model class: per task, cross-validation grouped by object (stratified,
   repeated) over ALL tune labels, no class minimum and no blend. Classes: the plain
   rules; `calibrate`'s own kinds (`platt`, the sign-constrained `combiner`, `isotonic`); an
   L2 logistic over the rules' input and the task's measurements; scikit-learn's
   HistGradientBoostingClassifier over the same, with monotone constraints where the rules
   give a measurement a direction (`inspector_models.directions`, no label read) and without;
   and the same boosting over every measurement the inspector takes. Printed per task: F1 at
   P(YES) > 0.5 (mean over repeats) and its change against the rules with the interval of
   a paired bootstrap over objects (`annotate.learning.evidence.f1_change`).
2. What a campaign's size allows: tune's objects split in two halves by a stable hash; a
   campaign of n labels drawn from one half trains each class (again no minimum), and
   `calibrate`'s blend as it is, without its prior on the weight and with a minimum of 5;
   the other half scores them (and the other way round), per size and seed.

Which measurements carry a gain: for the monotone boosting, the drop in out-of-fold F1
when one measurement is shuffled in the test folds. The last line is
`learning_ceiling_best_gain: X`, the largest per-task F1 gain over the rules of any
class in question 1.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
from pathlib import Path

import numpy as np

from agent.tasks import TASKS as _TASKS
from bench.learning_curve import CEILING as BLOCK
from bench.learning_curve import CEILING_END as BLOCK_END
from bench.learning_curve import halves, predictions, put_block

TASKS = tuple(sorted(_TASKS))  # the tables' order
CLASSES = ("platt", "combiner", "isotonic", "logistic_l2", "hgb_monotone", "hgb_free", "hgb_all")


def design(ex: list, feats: list[str]) -> np.ndarray:
    """(n, 1 + len(feats)): the rules' calibration input, then the measurements (NaN where
    not measured)."""
    from annotate.learning.models import feature_matrix

    return np.column_stack([np.array([e.x for e in ex], float), feature_matrix(ex, feats)])


def all_features(ex: list) -> list[str]:
    """Every numeric measurement present in at least half of the examples."""
    keys: dict[str, int] = {}
    for e in ex:
        for k, v in e.m.items():
            if isinstance(v, int | float) and np.isfinite(v):
                keys[k] = keys.get(k, 0) + 1
    skip = {"calibration_input", "p_rules", "capped", "inspector_version"}
    return sorted(k for k, c in keys.items() if c >= len(ex) / 2 and k not in skip)


def fit_predict(kind: str, tr: list, te: list, feats: list[str], every: list[str]) -> np.ndarray:
    """P(YES) on `te` of class `kind` fitted on `tr`."""
    from annotate.learning.models import directions, fit_model, predict

    y = np.array([e.label for e in tr], int)
    if kind in ("platt", "combiner", "isotonic"):
        return predict(fit_model(kind, tr, feats), te)
    use = every if kind == "hgb_all" else feats
    xtr, xte = design(tr, use), design(te, use)
    if kind == "logistic_l2":
        from sklearn.impute import SimpleImputer
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        keep = np.isfinite(xtr).sum(0) >= 2
        m = make_pipeline(SimpleImputer(strategy="mean"), StandardScaler(),
                          LogisticRegression(C=1.0, max_iter=2000))  # fmt: skip
        m.fit(xtr[:, keep], y)
        p = m.predict_proba(xte[:, keep])[:, 1]
    else:
        from sklearn.ensemble import HistGradientBoostingClassifier

        cst = None
        if kind in ("hgb_monotone", "hgb_all"):
            # the rules' input raises P(YES); a measurement keeps the sign the rules give it
            cst = [1] + [int(s) for s in directions(xtr[:, 0], xtr[:, 1:])]
        m = HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, max_leaf_nodes=15,
                                           min_samples_leaf=20, l2_regularization=1.0,
                                           monotonic_cst=cst, random_state=0)  # fmt: skip
        m.fit(xtr, y)
        p = m.predict_proba(xte)[:, 1]
    cap = np.array([e.capped for e in te])
    return np.where(cap, np.minimum(p, 0.1), p)


def task_cv(ex: list, repeats: int, folds: int, importance: bool) -> dict:
    """Out-of-fold scores of every class for one task's examples."""
    from annotate.learning.evidence import brier, counts, f1, f1_change, fold_sets
    from annotate.learning.models import task_features

    c = counts(ex)
    out: dict = {"counts": c}
    y = np.array([e.label for e in ex], float)
    p_rules = np.array([e.p_rules for e in ex])
    out["rules"] = {"f1": f1(p_rules, y), "brier": float(brier(p_rules, y).mean())}
    if min(c["positive_objects"], c["negative_objects"]) < 2:
        out["why"] = f"{c['positive_objects']} positive object(s): no fold can hold one out"
        return out
    feats = task_features(ex[0].task)
    every = all_features(ex)
    sets = fold_sets(ex, folds, repeats, seed=0)
    groups = np.array([e.group for e in ex])
    n = len(ex)
    for kind in CLASSES:
        oof = np.empty((repeats, n))
        for r, tests in enumerate(sets):
            for te in tests:
                tr = np.setdiff1d(np.arange(n), te)
                trx = [ex[i] for i in tr]
                if len({e.label for e in trx}) < 2:
                    oof[r, te] = p_rules[te]
                    continue
                oof[r, te] = fit_predict(kind, trx, [ex[i] for i in te], feats, every)
        loss = np.mean([brier(p, y) for p in oof], axis=0)
        g = f1_change(oof, p_rules, y, groups)
        out[kind] = {"f1": float(np.mean([f1(p, y) for p in oof])),
                     "brier": float(loss.mean()), "gain": g}  # fmt: skip
    from annotate.learning.evidence import blend_task

    # what `calibrate` itself makes of every tune label: its blend, or why it keeps the rules
    tm, rep = blend_task(ex)
    out["calibrate"] = {k: rep.get(k) for k in ("status", "why", "weight", "gain", "blend")}
    if importance:
        out["importance"] = permutation(ex, sets[0], feats, every)
        from annotate.learning.models import fit_model

        tm = fit_model("combiner", ex, feats)  # its weights: log-odds per standard deviation
        out["weights"] = sorted(zip(tm.features, tm.weights), key=lambda fw: -abs(fw[1]))
    return out


def permutation(ex: list, tests: list, feats: list[str], every: list[str]) -> list:
    """(measurement, F1 drop) for the monotone boosting: one measurement shuffled in the
    test fold, the model fitted once per fold."""
    from annotate.learning.evidence import f1

    y = np.array([e.label for e in ex], float)
    n = len(ex)
    rng = np.random.default_rng(0)
    base = np.empty(n)
    shuffled = {k: np.empty(n) for k in ["x", *feats]}
    import copy

    for te in tests:
        tr = [ex[i] for i in np.setdiff1d(np.arange(n), te)]
        tex = [ex[i] for i in te]
        base[te] = fit_predict("hgb_monotone", tr, tex, feats, every)
        for k in shuffled:
            vals = [e.x if k == "x" else e.m.get(k, np.nan) for e in tex]
            perm = rng.permutation(len(tex))
            moved = []
            for e, j in zip(tex, perm):
                e2 = copy.copy(e)
                if k == "x":
                    e2.x = vals[j]
                else:
                    e2.m = dict(e.m)
                    e2.m[k] = vals[j]
                moved.append(e2)
            shuffled[k][te] = fit_predict("hgb_monotone", tr, moved, feats, every)
    f0 = f1(base, y)
    return sorted(((k, f0 - f1(p, y)) for k, p in shuffled.items()), key=lambda kv: -kv[1])


def campaign_curve(ex: list, sizes: list[int], seeds: int, kinds: list[str]) -> dict:
    """Per size and task, each seed's and direction's F1 change against the rules on the
    other half of tune: of each class fitted alone (no minimum), and of `calibrate`'s fit
    in each of VARIANTS."""
    from annotate.learning.evidence import f1
    from annotate.learning.fit import fit
    from annotate.learning.models import task_features

    a, b = halves(ex)
    out: dict = {}
    for n in sizes:
        res: dict = {t: {k: [] for k in kinds} | {"positives": []} for t in TASKS}
        for s in range(seeds):
            for train, held in ((a, b), (b, a)):
                rng = np.random.default_rng(s)
                take = rng.choice(len(train), size=min(n, len(train)), replace=False)
                camp = [train[i] for i in take]
                fits = {
                    v: fit(camp, version=1, seed=s, **VARIANTS[v]) for v in VARIANTS if v in kinds
                }
                for t in TASKS:
                    tr = [e for e in camp if e.task == t]
                    te = [e for e in held if e.task == t]
                    y = np.array([e.label for e in te], float)
                    f0 = f1(np.array([e.p_rules for e in te]), y)
                    res[t]["positives"].append(sum(e.label for e in tr))
                    for k in kinds:
                        if k in VARIANTS:
                            p = predictions(fits[k], te)
                            res[t][k].append(f1(p, y) - f0 if y.any() else np.nan)
                            continue
                        if sum(e.label for e in tr) < 3 or not y.any():
                            res[t][k].append(np.nan)
                            continue
                        p = fit_predict(k, tr, te, task_features(t), all_features(tr))
                        res[t][k].append(f1(p, y) - f0)
        out[n] = res
    return out


# `calibrate`'s blend as it is, without its prior on the weight, and with a minimum of 5
VARIANTS = {"calibrate": {}, "no_prior": {"prior": 1e6}, "min_5": {"thresholds": (5, 5)}}


def best_class(r: dict) -> str:
    """The class with the largest out-of-fold F1 for a task's CV record."""
    return max(CLASSES, key=lambda k: r[k]["f1"])


def limits(cv: dict, camp: dict) -> list[str]:
    """'What limits the gain', in words, from this run's figures."""
    ok = [t for t in TASKS if "why" not in cv[t]]
    one = [t for t in TASKS if "why" in cv[t]]
    gains = {t: max(0.0, cv[t][best_class(cv[t])]["f1"] - cv[t]["rules"]["f1"]) for t in ok}
    bound = sum(gains.values()) / len(TASKS)
    near = min(camp, key=lambda n: abs(n - 1000)) if camp else None
    said = []
    if one:
        objs = " / ".join(str(cv[t]["counts"]["positive_objects"]) for t in one)
        said.append(f"{', '.join(one)}: tune holds {objs} positive object(s), each seen as "
                    "several spectra; cross-validation grouped by object cannot hold one out, "
                    "and a campaign learns that star, not its class. For these "
                    f"{len(one)} of the {len(TASKS)} tasks macro-F1 averages, the data is the "
                    "limit, not the model class, the minimum or the weight.")  # fmt: skip
    for t in ok:
        r = cv[t]
        b = best_class(r)
        g = r[b]["gain"]
        c = r["counts"]
        others = ", ".join(f"{k} {r[k]['f1'] - r['rules']['f1']:+.3f}"
                           for k in ("combiner", "logistic_l2", "hgb_monotone") if k != b)  # fmt: skip
        text = (f"{t} ({c['positives']} positives from {c['positive_objects']} objects): over "
                f"every tune label the best class, {b}, gains {gains[t]:+.3f} F1 out of fold "
                f"({others}); that F1 change's 95% interval over objects is "
                f"[{g['low']:+.3f}, {g['high']:+.3f}]"
                + (", above zero." if g["low"] > 0 else ", which reaches zero: a gain real "
                   "but small against its noise, which a blend weighs and a switch on the "
                   "interval would throw away."))  # fmt: skip
        own = r.get("calibrate") or {}
        if own.get("status") == "blended":
            text += (f" `calibrate` on every tune label blends it in at weight "
                     f"{own['weight']:.2f}.")  # fmt: skip
        elif own.get("status"):
            cg = own.get("gain") or {}
            text += (f" `calibrate` on every tune label keeps the rules: {own['why']}"
                     + (f"; its nested F1 change was {cg['mean']:+.3f} [{cg['low']:+.3f}, "
                        f"{cg['high']:+.3f}]" if cg else "") + ".")  # fmt: skip
        if near is not None:
            m = {k: float(np.nanmean(v)) for k, v in camp[near][t].items()
                 if k != "positives" and np.isfinite(v).any()}  # fmt: skip
            if "calibrate" in m:
                alone = max((k for k in m if k not in VARIANTS), key=m.get, default=None)
                text += (f" From {near}-label campaigns ({int(np.median(camp[near][t]['positives']))}"
                         f" positives), on held-out tune objects: `calibrate` {m['calibrate']:+.3f}, "
                         f"without its prior on the weight {m.get('no_prior', np.nan):+.3f}, with a "
                         f"minimum of 5 {m.get('min_5', np.nan):+.3f}"
                         + (f", {alone} fitted alone {m[alone]:+.3f}" if alone else "") + ".")  # fmt: skip
        said.append(text)
    carry = [f"{t} {gains[t]:+.3f}" for t in ok if gains[t] >= 0.03]
    said.append(f"If every task's best tune gain held on new objects, macro-F1 would rise by "
                f"{bound:+.3f}: the classes with one positive object hold it down whatever the "
                "model class, the minimum or the weight, and what would move them is more "
                "positive objects, not another model class. "
                + (f"Where the labels carry a gain of +0.03 or more F1 ({', '.join(carry)}), "
                   "the task's own goal is within reach of the best class on tune."
                   if carry else "No task's best class gains +0.03 F1 on tune."))  # fmt: skip
    return ["### What limits the gain (tune split only)", "", " ".join(said)]


def render(cv: dict, camp: dict, command: str) -> list[str]:
    """The block for docs/accuracy.md: the tables and the paragraph."""
    lines = [BLOCK, *limits(cv, camp), "", "Regenerate with:", "", "```", command, "```", "",
             "Grouped cross-validation over all tune labels (no minimum, no blend): F1 change "
             "against the plain rules per class, that of the best class with its 95% interval "
             "(paired bootstrap over objects), and what carries it (the monotone boosting's F1 drop "
             "when one measurement is shuffled, x being the rules' own evidence; and the "
             "combiner's largest weights fitted on all labels, log-odds per standard deviation).", "",
             "| task | positives (objects) | rules F1 | " + " | ".join(CLASSES)
             + " | best: F1 change [95%] | carried by |",
             "|---" * (5 + len(CLASSES)) + "|"]  # fmt: skip
    for t in TASKS:
        r = cv[t]
        c = r["counts"]
        head = f"| {t} | {c['positives']} ({c['positive_objects']}) | {r['rules']['f1']:.3f} |"
        if "why" in r:
            lines.append(head + " n/a |" * len(CLASSES) + f" {r['why']} | |")
            continue
        b = best_class(r)
        g = r[b]["gain"]
        top = ", ".join(f"{k} {v:+.3f}" for k, v in r.get("importance", [])[:4])
        if r.get("weights"):
            top += "; combiner weights " + ", ".join(
                f"{k} {w:+.2f}" for k, w in r["weights"][:3] if abs(w) >= 0.01
            )
        lines.append(head + "".join(f" {r[k]['f1'] - r['rules']['f1']:+.3f} |" for k in CLASSES)
                     + f" {b} {g['mean']:+.3f} [{g['low']:+.3f}, {g['high']:+.3f}] | {top} |")  # fmt: skip
    if camp:
        kinds = [k for k in next(iter(next(iter(camp.values())).values())) if k != "positives"]
        lines += ["", "Campaigns drawn from one half of tune's objects, scored on the other "
                  "(both ways, mean F1 change over seeds): each class fitted alone, and "
                  "`calibrate`'s blend as it is (`calibrate`), without its prior on the weight "
                  "(`no_prior`), and with a minimum of 5 labels of each class (`min_5`).", "",
                  "| labels | task | positives | " + " | ".join(kinds) + " |",
                  "|---" * (3 + len(kinds)) + "|"]  # fmt: skip
        for n, res in camp.items():
            for t in TASKS:
                if not any(np.isfinite(res[t][k]).any() and np.nanmean(res[t][k]) != 0
                           for k in kinds):  # fmt: skip
                    continue
                cells = " | ".join(_mean(res[t][k]) for k in kinds)
                lines.append(f"| {n} | {t} | {int(np.median(res[t]['positives']))} | {cells} |")
    return [*lines, "", BLOCK_END]


def _mean(v: list) -> str:
    a = np.asarray(v, float)
    return f"{np.nanmean(a):+.3f}" if np.isfinite(a).any() else "n/a"


def write_block(doc: Path, block: list[str]) -> None:
    """Put the block in `doc`: in place of the one there, else at its end."""
    put_block(doc, block, BLOCK, BLOCK_END)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--bench", default="data/bench", help="A benchmark with examples-tune.pkl.")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--sizes", default="300,1000,3000", help="Campaign sizes (question 2).")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--no-importance", action="store_true")
    ap.add_argument("--doc", default=None, help="Write the figures and what limits the gain "
                    f"into this markdown file (between {BLOCK} and {BLOCK_END}).")  # fmt: skip
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    cache = Path(args.bench) / "examples-tune.pkl"
    if not cache.exists():
        print(f"{cache}: missing (run bench/learning_curve.py first)", file=sys.stderr)
        return 2
    with open(cache, "rb") as fh:
        tune = pickle.load(fh)
    print("1. ceiling: grouped CV over all tune labels, no minimum, no blend")
    print("task     pos(obj)  class          F1     dF1    F1 change [95%] over objects")
    best = 0.0
    cv = {}
    for t in TASKS:
        r = cv[t] = task_cv([e for e in tune if e.task == t], args.repeats, args.folds,
                            not args.no_importance)  # fmt: skip
        c = r["counts"]
        head = f"{t:8s} {c['positives']:3d}({c['positive_objects']:2d})"
        print(f"{head}  rules          {r['rules']['f1']:.3f}")
        if "why" in r:
            print(f"{'':17s}{r['why']}")
            continue
        for k in CLASSES:
            g = r[k]["gain"]
            d = r[k]["f1"] - r["rules"]["f1"]
            best = max(best, d)
            print(f"{'':17s}{k:14s} {r[k]['f1']:.3f} {d:+.3f}  "
                  f"[{g['low']:+.3f}, {g['high']:+.3f}]")  # fmt: skip
        if "importance" in r:
            top = ", ".join(f"{k} {v:+.3f}" for k, v in r["importance"][:5])
            print(f"{'':17s}hgb_monotone F1 drop when shuffled: {top}")
            w = ", ".join(f"{k} {v:+.2f}" for k, v in r["weights"][:5])
            print(f"{'':17s}combiner weights (log-odds per sd), all labels: {w}")
    sizes = [int(v) for v in args.sizes.split(",") if v]
    camp: dict = {}
    if sizes:
        kinds = ["combiner", "logistic_l2", "hgb_monotone", *VARIANTS]
        print("\n2. campaigns from one half of tune, scored on the other")
        print("(calibrate: its blend as it is; no_prior: the weight without its prior; "
              "min_5: a minimum of 5 labels of each class)")  # fmt: skip
        print("size  task     positives(median)  " + "  ".join(f"{k:>12s}" for k in kinds))
        camp = campaign_curve(tune, sizes, args.seeds, kinds)
        for n, res in camp.items():
            for t in TASKS:
                cells = "  ".join(f"{_mean(res[t][k]):>12s}" for k in kinds)
                print(f"{n:5d} {t:8s} {int(np.median(res[t]['positives'])):6d}             {cells}")
    print()
    for line in limits(cv, camp):
        print(line)
    if args.doc:
        cmd = "nice -n 10 python bench/learning_ceiling.py " + " ".join(
            argv if argv is not None else sys.argv[1:]
        )
        write_block(Path(args.doc), render(cv, camp, cmd.strip()))
        print(f"doc: {args.doc}")
    print(f"learning_ceiling_best_gain: {best:+.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
