"""How far experts agree with each other, with gold labels and with the agent.

Plain functions over plain values (labels are "YES"/"NO", confidences are the agent's
P(YES)); the dashboard and `training.evaluate` feed them from the store or a labelled file.

- `cohen_kappa` (two raters) and `fleiss_kappa` (any number of raters per item),
  `kappa_by_task` over review records;
- `gold_accuracy`: each expert's accuracy on gold-standard items;
- `confusion` and `prf`: agent-vs-expert confusion, precision/recall/F1 of the YES class;
- `handoff_plan`: the confidence thresholds that auto-accept as much as possible while the
  auto-accepted decisions keep a target precision (everything else goes to a human);
- `reliability_diagram`: confidence bins against the observed YES rate, and the ECE;
  `weighted_reliability` the same for a weighted (audit) sample, with 95% intervals;
- `agreement_by_grade`: agreement with the agent (and with gold) at each quality grade 1-4
  the experts gave their decisions.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

YES, NO = "YES", "NO"


# -- kappas -------------------------------------------------------------------------------
def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Cohen's kappa of two raters over the same items (position i of `a` and `b`).

    Returns nan when it is undefined (no items, or both raters always give the one same
    label, so chance agreement is 1).

    >>> cohen_kappa(["YES", "YES", "NO", "NO"], ["YES", "YES", "NO", "NO"])
    1.0
    >>> # 20 items: both YES 10, a YES b NO 5, a NO b YES 0, both NO 5 -> po 0.75, pe 0.5
    >>> a = ["YES"] * 15 + ["NO"] * 5
    >>> b = ["YES"] * 10 + ["NO"] * 5 + ["NO"] * 5
    >>> round(cohen_kappa(a, b), 4)
    0.5
    >>> cohen_kappa(["YES", "YES"], ["NO", "NO"])
    0.0
    """
    if len(a) != len(b):
        raise ValueError(f"raters rated different numbers of items ({len(a)} and {len(b)})")
    n = len(a)
    if n == 0:
        return math.nan
    po = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    pe = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    if pe == 1.0:
        return math.nan
    return (po - pe) / (1.0 - pe)


def fleiss_kappa(items: Iterable[Sequence[Hashable]]) -> float:
    """Fleiss' kappa; `items` holds, for each item, the labels its raters gave.

    Items may have different numbers of raters (the usual generalisation: each item's
    agreement is averaged over its own rater pairs); items with fewer than two ratings
    carry no agreement information and are ignored. nan when undefined, and for a single
    item (one item's two raters who differ are no evidence of chance-level agreement).

    >>> # 3 items, 3 raters each: P-bar = 7/9, Pe = (5/9)^2 + (4/9)^2 = 41/81
    >>> round(fleiss_kappa([["YES"] * 3, ["NO"] * 3, ["YES", "YES", "NO"]]), 4)
    0.55
    >>> fleiss_kappa([["YES", "YES"], ["NO", "NO"]])
    1.0
    >>> # with two raters per item and the same marginals it is close to Cohen's
    >>> round(fleiss_kappa([["YES", "NO"], ["NO", "YES"]]), 4)
    -1.0
    >>> fleiss_kappa([["YES", "NO"]])  # one item: shown as n/a
    nan
    """
    rated = [list(labels) for labels in items if len(labels) >= 2]
    if len(rated) < 2:
        return math.nan
    totals: Counter = Counter()
    p_items = []
    for labels in rated:
        n_i = len(labels)
        counts = Counter(labels)
        totals.update(counts)
        p_items.append(sum(c * (c - 1) for c in counts.values()) / (n_i * (n_i - 1)))
    n_ratings = sum(totals.values())
    p_bar = sum(p_items) / len(p_items)
    pe = sum((c / n_ratings) ** 2 for c in totals.values())
    if pe == 1.0:
        return math.nan
    return (p_bar - pe) / (1.0 - pe)


@dataclass(frozen=True)
class Rating:
    """One expert's label for one item (candidate) of one task."""

    item: Hashable
    task: str
    rater: str
    label: str


@dataclass
class TaskAgreement:
    task: str
    n_items: int  # items rated by two or more experts
    n_ratings: int
    fleiss: float
    cohen_mean: float  # mean Cohen's kappa over rater pairs sharing at least `min_shared` items
    cohen_pairs: dict[tuple[str, str], tuple[float, int]] = field(default_factory=dict)


def kappa_by_task(ratings: Iterable[Rating], min_shared: int = 2) -> dict[str, TaskAgreement]:
    """Fleiss' kappa and pairwise Cohen's kappa per task.

    A rater who rated an item twice counts once (their last rating in `ratings` order).

    >>> rs = [Rating(i, "cv", r, l) for i, r, l in [
    ...     (1, "ann", "YES"), (1, "bob", "YES"), (2, "ann", "NO"), (2, "bob", "NO"),
    ...     (3, "ann", "YES"), (3, "bob", "NO"), (4, "ann", "NO")]]
    >>> ag = kappa_by_task(rs)["cv"]
    >>> ag.n_items, round(ag.fleiss, 3), round(ag.cohen_mean, 3), ag.cohen_pairs[("ann", "bob")][1]
    (3, 0.333, 0.4, 3)
    """
    by_task: dict[str, dict[Hashable, dict[str, str]]] = defaultdict(lambda: defaultdict(dict))
    for r in ratings:
        by_task[r.task][r.item][r.rater] = r.label
    out: dict[str, TaskAgreement] = {}
    for task in sorted(by_task):
        items = by_task[task]
        multi = {i: d for i, d in items.items() if len(d) >= 2}
        raters = sorted({r for d in items.values() for r in d})
        pairs: dict[tuple[str, str], tuple[float, int]] = {}
        for ra, rb in itertools.combinations(raters, 2):
            shared = [d for d in items.values() if ra in d and rb in d]
            if len(shared) >= min_shared:
                k = cohen_kappa([d[ra] for d in shared], [d[rb] for d in shared])
                pairs[(ra, rb)] = (k, len(shared))
        finite = [k for k, _ in pairs.values() if not math.isnan(k)]
        out[task] = TaskAgreement(
            task=task,
            n_items=len(multi),
            n_ratings=sum(len(d) for d in multi.values()),
            fleiss=fleiss_kappa(list(d.values()) for d in multi.values()),
            cohen_mean=sum(finite) / len(finite) if finite else math.nan,
            cohen_pairs=pairs,
        )
    return out


# -- gold-standard accuracy ---------------------------------------------------------------
@dataclass
class GoldScore:
    rater: str
    n: int
    correct: int

    @property
    def accuracy(self) -> float:
        return self.correct / self.n if self.n else math.nan


def gold_accuracy(ratings: Iterable[Rating], gold: Mapping[Hashable, str]) -> dict[str, GoldScore]:
    """Each rater's accuracy on the items whose gold label is known (`gold`: item -> label).

    >>> rs = [Rating(1, "wd", "ann", "YES"), Rating(2, "wd", "ann", "NO"),
    ...       Rating(2, "wd", "bob", "YES"), Rating(3, "wd", "bob", "NO")]
    >>> s = gold_accuracy(rs, {1: "YES", 2: "NO"})
    >>> s["ann"].accuracy, s["bob"].accuracy, s["bob"].n
    (1.0, 0.0, 1)
    """
    scores: dict[str, GoldScore] = {}
    last: dict[tuple[str, Hashable], str] = {}
    for r in ratings:
        if r.item in gold:
            last[(r.rater, r.item)] = r.label
    for (rater, item), label in sorted(last.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        s = scores.setdefault(rater, GoldScore(rater, 0, 0))
        s.n += 1
        s.correct += int(label == gold[item])
    return dict(sorted(scores.items()))


# -- confusion and precision/recall/F1 -----------------------------------------------------
@dataclass
class Confusion:
    """Counts for the YES class: predicted (agent) against truth (expert label)."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0
    unanswered: int = 0  # agent gave no verdict (format error, max turns)

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn + self.unanswered

    def as_matrix(self) -> list[list[int]]:
        """[[TP, FN], [FP, TN]]: rows are the expert label YES/NO, columns the agent's."""
        return [[self.tp, self.fn], [self.fp, self.tn]]


def confusion(pairs: Iterable[tuple[str | None, str]]) -> Confusion:
    """Confusion of (agent verdict, expert label) pairs; a missing verdict counts as NO
    for recall (a positive the agent did not find) and is also counted in `unanswered`.

    >>> c = confusion([("YES", "YES"), ("YES", "NO"), ("NO", "YES"), ("NO", "NO"), (None, "YES")])
    >>> (c.tp, c.fp, c.fn, c.tn, c.unanswered)
    (1, 1, 2, 1, 1)
    """
    c = Confusion()
    for pred, truth in pairs:
        if truth not in (YES, NO):
            raise ValueError(f"expert label must be YES or NO, got {truth!r}")
        if pred is None:
            c.unanswered += 1
            if truth == YES:
                c.fn += 1
            continue
        if pred == YES:
            if truth == YES:
                c.tp += 1
            else:
                c.fp += 1
        elif truth == YES:
            c.fn += 1
        else:
            c.tn += 1
    return c


@dataclass
class PRF:
    precision: float
    recall: float
    f1: float
    support: int  # expert YES count


def prf(c: Confusion) -> PRF:
    """Precision, recall and F1 of the YES class (the paper's metric); nan where undefined.

    >>> p = prf(Confusion(tp=8, fp=2, fn=8, tn=82))
    >>> round(p.precision, 3), round(p.recall, 3), round(p.f1, 3), p.support
    (0.8, 0.5, 0.615, 16)
    """
    precision = c.tp / (c.tp + c.fp) if c.tp + c.fp else math.nan
    recall = c.tp / (c.tp + c.fn) if c.tp + c.fn else math.nan
    if c.tp == 0:
        f1 = 0.0 if (c.fp or c.fn) else math.nan
    else:
        f1 = 2 * precision * recall / (precision + recall)
    return PRF(precision, recall, f1, c.tp + c.fn)


def confusion_by_task(
    records: Iterable[tuple[str, str | None, str]],
) -> dict[str, Confusion]:
    """`records` of (task, agent verdict, expert label) -> confusion per task.

    >>> cs = confusion_by_task([("cv", "YES", "YES"), ("wd", "NO", "YES"), ("cv", "YES", "NO")])
    >>> cs["cv"].tp, cs["cv"].fp, cs["wd"].fn
    (1, 1, 1)
    """
    grouped: dict[str, list[tuple[str | None, str]]] = defaultdict(list)
    for task, pred, truth in records:
        grouped[task].append((pred, truth))
    return {t: confusion(grouped[t]) for t in sorted(grouped)}


# -- hand-off thresholds ------------------------------------------------------------------
@dataclass
class HandoffPlan:
    """Auto-accept YES where P(YES) >= `yes_threshold`, NO where P(YES) <= `no_threshold`;
    every other candidate goes to a human. A threshold of None auto-accepts nothing on
    that side."""

    target_precision: float
    yes_threshold: float | None
    no_threshold: float | None
    n: int
    n_auto_yes: int
    n_auto_no: int
    precision_auto_yes: float  # fraction of auto-accepted YES that are YES
    precision_auto_no: float  # fraction of auto-accepted NO that are NO
    # Whole system when the humans who review the rest are right:
    system_precision: float
    system_recall: float

    @property
    def n_human(self) -> int:
        return self.n - self.n_auto_yes - self.n_auto_no

    @property
    def human_fraction(self) -> float:
        return self.n_human / self.n if self.n else math.nan


def _best_side(
    scored: list[tuple[float, bool]], target: float, min_auto: int
) -> tuple[float | None, int, int]:
    """Largest prefix (by score, ties kept together) whose hit rate reaches `target`.

    `scored` is (score, hit) sorted by score descending. Returns (threshold score, size, hits).
    """
    best: tuple[float | None, int, int] = (None, 0, 0)
    hits = 0
    i = 0
    while i < len(scored):
        s = scored[i][0]
        while i < len(scored) and scored[i][0] == s:
            hits += scored[i][1]
            i += 1
        if i >= min_auto and hits / i >= target:
            best = (s, i, hits)
    return best


def handoff_plan(
    confidences: Sequence[float],
    labels: Sequence[str],
    target_precision: float = 0.95,
    auto_reject: bool = True,
    min_auto: int = 1,
) -> HandoffPlan:
    """The thresholds that leave experts the fewest candidates while every auto-accepted
    decision keeps `target_precision` on these labelled data.

    P(YES) >= 0.5 is the agent's YES side and P(YES) < 0.5 its NO side; on each side the
    auto-accepted set is the largest set of most-confident candidates (equal confidences
    go together) whose precision reaches the target. The two sides do not overlap, so
    maximising each one minimises the human load. With `auto_reject=False` only YES is
    auto-accepted. `min_auto` avoids trusting a threshold backed by a handful of items.

    >>> conf = [0.99, 0.95, 0.9, 0.8, 0.7, 0.6, 0.4, 0.2, 0.1, 0.05]
    >>> lab = ["YES", "YES", "YES", "NO", "YES", "NO", "YES", "NO", "NO", "NO"]
    >>> p = handoff_plan(conf, lab, target_precision=0.9)
    >>> p.yes_threshold, p.n_auto_yes, p.no_threshold, p.n_auto_no, p.n_human
    (0.9, 3, 0.2, 3, 4)
    >>> round(p.system_precision, 3), p.system_recall
    (1.0, 1.0)
    >>> handoff_plan(conf, lab, target_precision=0.75).n_auto_yes  # 4 of 5 YES at >= 0.7
    5
    >>> handoff_plan(conf, lab, 0.9, auto_reject=False).no_threshold is None
    True
    """
    if len(confidences) != len(labels):
        raise ValueError("confidences and labels differ in length")
    if not 0.0 < target_precision <= 1.0:
        raise ValueError(f"target precision must be in (0, 1], got {target_precision}")
    for p in confidences:
        if not (0.0 <= p <= 1.0):
            raise ValueError(f"confidence must be P(YES) in [0, 1], got {p}")
    pairs = list(zip(confidences, labels))
    yes_side = sorted(((p, lab == YES) for p, lab in pairs if p >= 0.5), key=lambda t: -t[0])
    yes_t, n_yes, tp_auto = _best_side(yes_side, target_precision, min_auto)
    no_t, n_no, tn_auto = None, 0, 0
    if auto_reject:
        # On the NO side, "more confident" is a lower P(YES); a hit is a true NO.
        no_side = sorted(((1.0 - p, lab == NO) for p, lab in pairs if p < 0.5), key=lambda t: -t[0])
        s, n_no, tn_auto = _best_side(no_side, target_precision, min_auto)
        if s is not None:
            # map back to the P(YES) value itself (1 - (1 - p) can differ from p by rounding)
            no_t = max(p for p, _ in pairs if p < 0.5 and 1.0 - p == s)
    n_pos = sum(lab == YES for lab in labels)
    fn_auto = n_no - tn_auto  # positives auto-rejected: lost for good
    fp_auto = n_yes - tp_auto
    human_pos = n_pos - tp_auto - fn_auto  # found by the humans
    sys_tp = tp_auto + human_pos
    sys_precision = sys_tp / (sys_tp + fp_auto) if sys_tp + fp_auto else math.nan
    return HandoffPlan(
        target_precision=target_precision,
        yes_threshold=yes_t,
        no_threshold=no_t,
        n=len(pairs),
        n_auto_yes=n_yes,
        n_auto_no=n_no,
        precision_auto_yes=tp_auto / n_yes if n_yes else math.nan,
        precision_auto_no=tn_auto / n_no if n_no else math.nan,
        system_precision=sys_precision,
        system_recall=sys_tp / n_pos if n_pos else math.nan,
    )


# -- calibration --------------------------------------------------------------------------
@dataclass
class ReliabilityBin:
    lo: float
    hi: float
    count: int
    mean_confidence: float  # mean P(YES) in the bin (nan when empty)
    yes_rate: float  # observed fraction labelled YES (nan when empty)


@dataclass
class Reliability:
    bins: list[ReliabilityBin]
    ece: float  # expected calibration error: count-weighted |yes_rate - mean_confidence|
    n: int


def reliability_diagram(
    confidences: Sequence[float], labels: Sequence[str], n_bins: int = 10
) -> Reliability:
    """Equal-width bins of P(YES) against the observed YES rate, for a reliability plot.

    The last bin is closed on the right so P(YES) = 1 lands in it.

    >>> r = reliability_diagram([0.1, 0.15, 0.9, 0.95], ["NO", "YES", "YES", "YES"], n_bins=2)
    >>> [(b.count, round(b.mean_confidence, 3), b.yes_rate) for b in r.bins]
    [(2, 0.125, 0.5), (2, 0.925, 1.0)]
    >>> round(r.ece, 4)  # (2 * 0.375 + 2 * 0.075) / 4
    0.225
    """
    if len(confidences) != len(labels):
        raise ValueError("confidences and labels differ in length")
    if n_bins < 1:
        raise ValueError("n_bins must be at least 1")
    sums = [[0, 0.0, 0] for _ in range(n_bins)]  # count, sum of confidence, YES count
    for p, lab in zip(confidences, labels):
        if not (0.0 <= p <= 1.0):
            raise ValueError(f"confidence must be P(YES) in [0, 1], got {p}")
        k = min(int(p * n_bins), n_bins - 1)
        sums[k][0] += 1
        sums[k][1] += p
        sums[k][2] += lab == YES
    bins = []
    ece = 0.0
    n = len(labels)
    for k, (cnt, s, yes) in enumerate(sums):
        mean = s / cnt if cnt else math.nan
        rate = yes / cnt if cnt else math.nan
        if cnt:
            ece += cnt * abs(rate - mean)
        bins.append(ReliabilityBin(k / n_bins, (k + 1) / n_bins, cnt, mean, rate))
    return Reliability(bins=bins, ece=ece / n if n else math.nan, n=n)


@dataclass
class WeightedBin:
    """A reliability bin of audited items: the weighted YES rate with its 95% interval
    (Wilson's at the Kish effective size) and the audited items behind it."""

    lo: float
    hi: float
    count: int
    n_eff: float
    mean_confidence: float
    yes_rate: float
    low: float
    high: float


def weighted_reliability(
    points: Iterable[tuple[float, bool, float]], n_bins: int = 10
) -> list[WeightedBin]:
    """The reliability diagram of a weighted sample: (P(YES), truly YES, weight) points, e.g.
    `audit_sample.audited_points`, in equal-width bins; only bins holding items come back.

    >>> pts = [(0.95, True, 10.0)] * 9 + [(0.97, False, 10.0)] + [(0.02, False, 40.0)] * 5
    >>> [(b.lo, b.count, round(b.mean_confidence, 3), b.yes_rate, round(b.low, 2))
    ...  for b in weighted_reliability(pts)]
    [(0.0, 5, 0.02, 0.0, 0.0), (0.9, 10, 0.952, 0.9, 0.6)]
    """
    from annotate.audit.sample import kish, wilson

    cells: list[list[tuple[float, bool, float]]] = [[] for _ in range(n_bins)]
    for p, yes, w in points:
        if not (0.0 <= p <= 1.0):
            raise ValueError(f"confidence must be P(YES) in [0, 1], got {p}")
        cells[min(int(p * n_bins), n_bins - 1)].append((p, bool(yes), float(w)))
    out = []
    for k, cell in enumerate(cells):
        ws = [w for _, _, w in cell]
        total = sum(ws)
        if not cell or total <= 0:
            continue
        rate = sum(w for _, y, w in cell if y) / total
        ne = kish(ws)
        lo, hi = wilson(rate, ne)
        mean = sum(p * w for p, _, w in cell) / total
        out.append(WeightedBin(k / n_bins, (k + 1) / n_bins, len(cell), ne, mean, rate, lo, hi))
    return out


# -- by grade -----------------------------------------------------------------------------
@dataclass
class GradeAgreement:
    grade: int | None  # 1-4 (4 certain ... 1 a guess); None: decisions given no grade
    n: int  # expert-labelled decisions with this grade
    agree: int  # ... whose label is the agent's verdict
    n_gold: int = 0  # ... on gold items
    gold_correct: int = 0

    @property
    def agreement(self) -> float:
        return self.agree / self.n if self.n else math.nan

    @property
    def gold_accuracy(self) -> float:
        return self.gold_correct / self.n_gold if self.n_gold else math.nan


def agreement_by_grade(
    records: Iterable[tuple[int | None, str | None, str, str | None]],
) -> dict[int | None, GradeAgreement]:
    """Agreement with the agent, and accuracy on gold, at each grade the experts gave.

    `records` are (grade, agent verdict, expert label, gold label or None). A useful grade
    shows higher gold accuracy at 4 than at 1; decisions the experts call guesses are the
    ones to weight down or review again.

    >>> g = agreement_by_grade([(4, "YES", "YES", "YES"), (4, "NO", "YES", None),
    ...                         (1, "YES", "NO", "YES"), (None, "NO", "NO", None)])
    >>> [(k, v.n, v.agree, v.n_gold, v.gold_correct) for k, v in g.items()]
    [(1, 1, 0, 1, 0), (4, 2, 1, 1, 1), (None, 1, 1, 0, 0)]
    >>> g[4].agreement, g[1].gold_accuracy
    (0.5, 0.0)
    """
    out: dict[int | None, GradeAgreement] = {}
    for grade, verdict, label, gold in records:
        if label not in (YES, NO):
            continue  # skips, flags and undone decisions carry no label
        a = out.setdefault(grade, GradeAgreement(grade, 0, 0))
        a.n += 1
        a.agree += verdict == label
        if gold in (YES, NO):
            a.n_gold += 1
            a.gold_correct += gold == label
    return dict(sorted(out.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)))
