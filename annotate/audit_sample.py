"""The random audit: a stratified draw among the candidates the agent decided confidently,
and the weighted estimates it allows (precision and completeness of the YES list, the
agent's error rate per confidence band, ECE), each with a 95% interval.

Why: the hand-off queue serves the least certain verdicts first, so the items experts label
are no sample of anything, and a confident mistake is never seen. A random share of the
confident verdicts (`audit_rate`, default 5%) is reviewed like any other item; weighting each
audited item by 1/pi (its inclusion probability) makes the figures unbiased for the whole
population it was drawn from.

Strata are (task, the agent's verdict, certainty band), certainty = max(P, 1 - P) in the
bands `CERTAINTY_EDGES`. `draw_audit` takes a simple random sample without replacement in
each stratum and returns each draw's inclusion probability n_h / N_h. Drawn items not yet
reviewed are non-response: within a band, the reviewed ones stand for all (Hajek).

Experts' labels are taken as the truth. So the YES list's precision is
(K + T) / (K + U): K items an expert decided YES, U the agent's own YES (auto-accepted,
nobody reviewed) of which T are estimated truly YES, per band from the audited items. The
interval is Wilson's at the Kish effective sample size (sum w)^2 / sum w^2, carried through
that monotone map; a band the audit has not reached counts as all wrong at the interval's
low end and all right at its high end. Completeness (among decided candidates: items still
pending in the queue are in neither list) needs audited NO verdicts too, and its interval
combines the two ends (conservative). ECE's interval is a stratified bootstrap.

>>> pop = [(i, "wd", 0.97) for i in range(100)] + [(100 + i, "wd", 0.5) for i in range(50)]
>>> draws = draw_audit(pop, 0.05, seed=1)
>>> len(draws), draws[0].inclusion, str(draws[0].band)
(5, 0.05, 'YES 0.95-0.99')
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

import numpy as np

AUDIT_RATE = 0.05  # the default share of confident verdicts drawn into the audit
AUDIT_RATE_SETTING = "audit_rate"  # the team setting beside overlap and gold_rate
CONFIDENT = 0.9  # certainty max(P, 1 - P) from which a verdict counts as confident
CERTAINTY_EDGES = (0.5, 0.9, 0.95, 0.99, 1.0)
Z95 = 1.959964


class Band(NamedTuple):
    """The agent's verdict and a certainty band [lo, hi) (the last one includes 1)."""

    side: str  # "YES" or "NO": the agent's verdict
    lo: float
    hi: float

    def __str__(self) -> str:
        return f"{self.side} {self.lo:.2f}-{self.hi:.2f}"


def band_of(p_yes: float, edges: Sequence[float] = CERTAINTY_EDGES) -> Band:
    """The band of an agent's P(YES); the verdict is YES above 0.5, as the agent says it.

    >>> str(band_of(0.97)), str(band_of(0.02)), str(band_of(1.0)), str(band_of(0.5))
    ('YES 0.95-0.99', 'NO 0.95-0.99', 'YES 0.99-1.00', 'NO 0.50-0.90')
    """
    c = max(p_yes, 1.0 - p_yes)
    k = min(bisect.bisect_right(edges, c), len(edges) - 1)  # c == 1.0 joins the last band
    return _band("YES" if p_yes > 0.5 else "NO", edges[k - 1], edges[k])


_band = functools.cache(Band)  # one instance per band: the estimates key dicts by it


@dataclass(frozen=True)
class Draw:
    id: int
    task: str
    band: Band
    inclusion: float  # n_h / N_h of its stratum


def draw_audit(
    candidates: Iterable[tuple[int, str, float]],
    share: float = AUDIT_RATE,
    *,
    min_certainty: float = CONFIDENT,
    seed: int | np.random.Generator | None = None,
    edges: Sequence[float] = CERTAINTY_EDGES,
) -> list[Draw]:
    """Stratified random draw of `share` of the confident ones among (id, task, P(YES)).

    Each stratum (task, verdict, band) with N_h confident items gives n_h = round(share N_h),
    at least one, so every band is seen; its items' inclusion probability is n_h / N_h. The
    draws come back in random order, so a queue that serves them in it leaves a random
    remainder unreviewed when it stops. Draw once per population: a candidate not drawn must
    not be offered to a later draw, or its inclusion probability is no longer n_h / N_h.

    >>> pop = [(i, "cv", 0.995) for i in range(40)] + [(40 + i, "cv", 0.003) for i in range(400)]
    >>> sorted((str(d.band), d.inclusion) for d in draw_audit(pop, 0.05, seed=0))[::10]
    [('NO 0.99-1.00', 0.05), ('NO 0.99-1.00', 0.05), ('YES 0.99-1.00', 0.05)]
    >>> draw_audit(pop, 0.0)
    []
    >>> draw_audit(pop, 1.5)
    Traceback (most recent call last):
    ...
    ValueError: audit share must be in [0, 1] (got 1.5)
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"audit share must be in [0, 1] (got {share})")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    strata: dict[tuple[str, Band], list[int]] = {}
    for cid, task, p in candidates:
        if p is None or not math.isfinite(p) or max(p, 1.0 - p) < min_certainty:
            continue
        strata.setdefault((task, band_of(p, edges)), []).append(int(cid))
    if share == 0.0:
        return []
    out: list[Draw] = []
    for (task, band), ids in sorted(strata.items()):
        n = min(len(ids), max(1, round(share * len(ids))))
        pick = rng.choice(len(ids), size=n, replace=False)
        out += [Draw(ids[k], task, band, n / len(ids)) for k in pick]
    return [out[k] for k in rng.permutation(len(out))]


def audit_turn(review_count: int, rate: float) -> bool:
    """Whether an expert's next item comes from the audit sample: one in round(1/rate),
    half a period away from the gold item's turn (`Store.next_item`), so the two interleave.

    >>> [k for k in range(40) if audit_turn(k, 0.05)], audit_turn(3, 0.0)
    ([10, 30], False)
    """
    if rate <= 0:
        return False
    period = max(1, round(1 / rate))
    return review_count % period == period // 2


# -- intervals ------------------------------------------------------------------------------


def wilson(p: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for a proportion p seen on n (possibly effective) items.

    >>> [round(v, 3) for v in wilson(0.5, 100)]
    [0.404, 0.596]
    >>> [round(v, 3) for v in wilson(1.0, 20)]
    [0.839, 1.0]
    >>> wilson(0.3, 0)
    (0.0, 1.0)
    """
    if n <= 0:
        return 0.0, 1.0
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(max(p * (1 - p), 0.0) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def kish(weights: Sequence[float]) -> float:
    """Kish's effective sample size (sum w)^2 / sum w^2.

    >>> kish([1, 1, 1, 1]), kish([1, 1, 1, 3])
    (4.0, 3.0)
    """
    w = np.asarray(weights, dtype=float)
    s2 = float(np.sum(w * w))
    return float(np.sum(w)) ** 2 / s2 if s2 > 0 else 0.0


@dataclass
class Estimate:
    """A figure with its 95% interval, the audited items it rests on and their effective
    number; `value` is None where the audit does not allow it (`note` says why)."""

    value: float | None
    low: float | None
    high: float | None
    n: int  # audited (reviewed) items behind the figure
    n_eff: float = 0.0
    note: str = ""

    def __str__(self) -> str:
        if self.value is None:
            return f"n/a ({self.note})" if self.note else "n/a"
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}] (n={self.n})"


def weighted_rate(hits: Sequence[bool], weights: Sequence[float]) -> Estimate:
    """Hajek's weighted proportion with Wilson's interval at the Kish effective size.

    >>> str(weighted_rate([True] * 9 + [False], [1.0] * 10))
    '0.900 [0.596, 0.982] (n=10)'
    >>> weighted_rate([], []).value is None
    True
    """
    w = np.asarray(weights, dtype=float)
    if len(w) == 0 or float(w.sum()) <= 0:
        return Estimate(None, None, None, 0, 0.0, "no audited item")
    p = float(np.sum(w * np.asarray(hits, dtype=float)) / w.sum())
    ne = kish(w)
    lo, hi = wilson(p, ne)
    return Estimate(p, lo, hi, len(w), ne)


# -- the population and its estimates -------------------------------------------------------


@dataclass(frozen=True)
class Decided:
    """One candidate as the estimates see it.

    `label` is the final label (None while pending), `by_agent` whether that label is the
    agent's own (auto-accepted, no expert saw it), `inclusion` the probability with which it
    entered the audit sample (None: not in it). A gold item counts as audited only when its
    inclusion probability is known (a gold set drawn at random from the task's candidates).
    """

    task: str
    p_yes: float | None  # the agent's P(YES): the verdict the audit judges
    label: str | None
    by_agent: bool = False
    inclusion: float | None = None

    @property
    def audited(self) -> bool:
        """In the audit sample and decided by an expert (whose label is the truth)."""
        return (
            self.inclusion is not None
            and self.inclusion > 0
            and self.label in ("YES", "NO")
            and not self.by_agent
            and self.p_yes is not None
        )


@dataclass
class TaskEstimates:
    task: str
    yes_list: int  # items in the final YES list
    yes_by_expert: int
    yes_by_agent: int  # auto-accepted YES nobody reviewed
    no_by_agent: int
    drawn: int  # items in the audit sample
    audited: int  # of them reviewed
    precision: Estimate
    completeness: Estimate
    band_errors: dict[str, Estimate] = field(default_factory=dict)
    ece: Estimate = field(default_factory=lambda: Estimate(None, None, None, 0))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["band_errors"] = {b: asdict(e) for b, e in self.band_errors.items()}
        return d


def _weights(items: Sequence[Decided]) -> dict[Band, list[tuple[bool, float]]]:
    """Band -> (truth is YES, weight) of its audited items: 1/pi, scaled within the band
    by drawn/reviewed (the band's reviewed items stand for its unreviewed draws)."""
    drawn: dict[Band, float] = {}
    seen: dict[Band, float] = {}
    out: dict[Band, list[tuple[bool, float]]] = {}
    for d in items:
        if d.inclusion is None or d.p_yes is None or not d.inclusion > 0:
            continue  # not in the sample (a probability of 0 could not have been drawn)
        b = band_of(d.p_yes)
        drawn[b] = drawn.get(b, 0.0) + 1.0 / d.inclusion
        if d.audited:
            seen[b] = seen.get(b, 0.0) + 1.0 / d.inclusion
            out.setdefault(b, []).append((d.label == "YES", 1.0 / d.inclusion))
    return {b: [(y, w * drawn[b] / seen[b]) for y, w in v] for b, v in out.items()}


def true_yes_count(
    targets: dict[Band, int], audited: dict[Band, list[tuple[bool, float]]]
) -> tuple[float, float, float, int, float]:
    """How many of the agent-decided items in `targets` (band -> count) are truly YES:
    (estimate, low, high, audited items used, their effective number).

    Within a band the audited items estimate the band's rate (Hajek); across bands they
    are post-stratified to the target counts. A target band without audited items takes
    the pooled rate as the estimate and [0, all] as its share of the interval.

    >>> b = band_of(0.97)
    >>> est, lo, hi, n, ne = true_yes_count({b: 100}, {b: [(True, 20.0)] * 4 + [(False, 20.0)]})
    >>> round(est), n, lo < est < hi
    (80, 5, True)
    """
    covered = {b: c for b, c in targets.items() if c and audited.get(b)}
    uncovered = sum(c for b, c in targets.items() if c and not audited.get(b))
    total = sum(covered.values())
    if not total:
        return math.nan, 0.0, float(uncovered), 0, 0.0
    ys, ws = [], []
    for b, c in covered.items():
        wsum = sum(w for _, w in audited[b])
        for y, w in audited[b]:
            ys.append(y)
            ws.append(c * w / wsum)  # post-stratified: the band's items stand for its c
    r = weighted_rate(ys, ws)
    assert r.value is not None and r.low is not None and r.high is not None
    est = total * r.value + uncovered * r.value
    return est, total * r.low, total * r.high + uncovered, r.n, r.n_eff


def task_estimates(task: str, items: Sequence[Decided], *, reps: int = 1000, seed: int = 0):
    """The figures of one task's candidates (`items` all of that task)."""
    by_w = _weights(items)
    yes_expert = sum(1 for d in items if d.label == "YES" and not d.by_agent)
    yes_agent: dict[Band, int] = {}
    no_agent: dict[Band, int] = {}
    for d in items:
        if d.by_agent and d.label in ("YES", "NO") and d.p_yes is not None:
            t = yes_agent if d.label == "YES" else no_agent
            b = band_of(d.p_yes)
            t[b] = t.get(b, 0) + 1
    audited_yes = {b: v for b, v in by_w.items() if b.side == "YES"}
    audited_no = {b: v for b, v in by_w.items() if b.side == "NO"}
    u, v = sum(yes_agent.values()), sum(no_agent.values())
    listed = yes_expert + u

    tp, tp_lo, tp_hi, n_yes, ne_yes = true_yes_count(yes_agent, audited_yes)
    if not u:
        tp = tp_lo = tp_hi = 0.0
    if not listed:
        precision = Estimate(None, None, None, 0, 0.0, "the YES list is empty")
    elif not u:
        precision = Estimate(1.0, 1.0, 1.0, 0, 0.0, "every YES was decided by an expert")
    elif math.isnan(tp):
        precision = Estimate(None, 0.0, 1.0, 0, 0.0, "no audited YES verdict yet")
    else:
        precision = Estimate(
            (yes_expert + tp) / listed,
            (yes_expert + tp_lo) / listed,
            (yes_expert + tp_hi) / listed,
            n_yes,
            ne_yes,
        )
    fn, fn_lo, fn_hi, n_no, ne_no = true_yes_count(no_agent, audited_no)
    if not v:
        fn = fn_lo = fn_hi = 0.0
    if precision.value is None or math.isnan(fn):
        why = "no audited NO verdict yet" if precision.value is not None else precision.note
        completeness = Estimate(None, None, None, n_no, ne_no, why)
    else:
        t, t_lo, t_hi = yes_expert + tp, yes_expert + tp_lo, yes_expert + tp_hi

        def share(a: float, b: float) -> float:
            return a / (a + b) if a + b > 0 else 1.0

        completeness = Estimate(
            share(t, fn), share(t_lo, fn_hi), share(t_hi, fn_lo), n_yes + n_no, ne_yes + ne_no
        )
    errors = {
        str(b): weighted_rate([y != (b.side == "YES") for y, _ in v], [w for _, w in v])
        for b, v in sorted(by_w.items())
    }
    return TaskEstimates(
        task,
        listed,
        yes_expert,
        u,
        v,
        sum(1 for d in items if d.inclusion is not None),
        sum(1 for d in items if d.audited),
        precision,
        completeness,
        errors,
        ece(items, reps=reps, seed=seed),
    )


def estimate(
    items: Iterable[Decided], *, reps: int = 1000, seed: int = 0
) -> dict[str, TaskEstimates]:
    """Per task, the audit's figures (see the module's docstring for what each one means).

    >>> pop = [Decided("wd", 0.97, "YES", True) for _ in range(95)]
    >>> pop += [Decided("wd", 0.97, "YES", inclusion=0.05) for _ in range(4)]
    >>> pop += [Decided("wd", 0.97, "NO", inclusion=0.05)]
    >>> pop += [Decided("wd", 0.01, "NO", True) for _ in range(50)]
    >>> e = estimate(pop, reps=200)["wd"]
    >>> e.yes_list, e.yes_by_agent, e.audited, round(e.precision.value, 3)
    (99, 95, 5, 0.808)
    >>> e.completeness.note
    'no audited NO verdict yet'
    """
    by_task: dict[str, list[Decided]] = {}
    for d in items:
        by_task.setdefault(d.task, []).append(d)
    return {t: task_estimates(t, v, reps=reps, seed=seed) for t, v in sorted(by_task.items())}


def _ece(p: np.ndarray, y: np.ndarray, w: np.ndarray, bins: int) -> float:
    k = np.minimum((p * bins).astype(int), bins - 1)
    tot = np.bincount(k, w, bins)
    gap = np.abs(np.bincount(k, w * (y - p), bins))
    return float(gap.sum() / tot.sum())


def audited_points(items: Sequence[Decided]) -> list[tuple[float, bool, float]]:
    """(the agent's P(YES), the expert said YES, weight) of each audited item, weighted as
    the estimates weight it: what an unbiased reliability diagram draws.

    >>> pts = audited_points([Decided("cv", 0.95, "YES", inclusion=0.1),
    ...                       Decided("cv", 0.95, "NO", True), Decided("cv", 0.4, "NO")])
    >>> [(p, y, round(w, 3)) for p, y, w in pts]
    [(0.95, True, 10.0)]
    """
    by_w = _weights(items)
    p_of: dict[Band, list[float]] = {}
    for d in items:
        if d.audited:
            p_of.setdefault(band_of(d.p_yes), []).append(float(d.p_yes))
    return [(p, y, w) for b, v in sorted(by_w.items()) for p, (y, w) in zip(p_of[b], v)]


def ece(items: Sequence[Decided], *, bins: int = 10, reps: int = 1000, seed: int = 0) -> Estimate:
    """Expected calibration error of P(YES) over the population the audit represents,
    weighted by 1/pi, in `bins` equal bins; 95% interval by a bootstrap that resamples the
    audited items within each band. A few items per bin inflate ECE: read it with its n.

    >>> pop = [Decided("cv", 0.95, "YES", inclusion=0.1) for _ in range(19)]
    >>> pop += [Decided("cv", 0.95, "NO", inclusion=0.1)]
    >>> e = ece(pop, reps=200)
    >>> round(e.value, 3), e.n, e.low <= e.value <= e.high
    (0.0, 20, True)
    """
    by_w = _weights(items)
    p_of: dict[Band, list[float]] = {}
    for d in items:
        if d.audited:
            p_of.setdefault(band_of(d.p_yes), []).append(float(d.p_yes))
    if not by_w:
        return Estimate(None, None, None, 0, 0.0, "no audited item")
    groups = [
        (np.array(p_of[b]), np.array([y for y, _ in v], float), np.array([w for _, w in v]))
        for b, v in sorted(by_w.items())
    ]
    p, y, w = (np.concatenate(a) for a in zip(*groups))
    value = _ece(p, y, w, bins)
    rng = np.random.default_rng(seed)
    boot = np.empty(reps)
    for r in range(reps):
        take = [rng.integers(0, len(g[0]), len(g[0])) for g in groups]
        bp, by, bw = (np.concatenate([g[j][t] for g, t in zip(groups, take)]) for j in range(3))
        boot[r] = _ece(bp, by, bw, bins)
    lo, hi = np.quantile(boot, [0.025, 0.975]) if reps else (value, value)
    return Estimate(value, min(float(lo), value), max(float(hi), value), len(p), kish(w))


TABLE_HEADERS = ["task", "YES listed", "by experts", "by the agent alone", "audited / drawn",
                 "precision [95%]", "completeness [95%]", "ECE [95%]"]  # fmt: skip
BAND_HEADERS = ["task", "agent's verdict and certainty", "audited", "error rate [95%]"]


def table_rows(estimates: dict[str, TaskEstimates]) -> list[list[Any]]:
    """One row per task for a table (`TABLE_HEADERS`): what the Dashboard shows.

    >>> pop = [Decided("wd", 0.97, "YES", True)] * 9 + [Decided("wd", 0.97, "YES", inclusion=0.1)]
    >>> table_rows(estimate(pop, reps=0))[0][:6]
    ['wd', 10, 1, 9, '1 / 1', '1.000 [0.286, 1.000] (n=1)']
    """
    return [
        [
            t,
            e.yes_list,
            e.yes_by_expert,
            e.yes_by_agent,
            f"{e.audited} / {e.drawn}",
            str(e.precision),
            str(e.completeness),
            str(e.ece),
        ]  # fmt: skip
        for t, e in estimates.items()
    ]


def band_rows(estimates: dict[str, TaskEstimates]) -> list[list[Any]]:
    """The agent's error rate per task and band, from the audit (`BAND_HEADERS`)."""
    return [[t, b, r.n, str(r)] for t, e in estimates.items() for b, r in e.band_errors.items()]


# -- the store's audit sample ---------------------------------------------------------------


def audit_rate(store: Any) -> float:
    """The team's audit share (`audit_rate`, beside overlap and gold_rate), default 5%."""
    v = store.setting(AUDIT_RATE_SETTING, AUDIT_RATE)
    try:
        rate = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"team setting {AUDIT_RATE_SETTING} = {v!r} is not a number") from None
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"team setting {AUDIT_RATE_SETTING} = {rate} is not in [0, 1]")
    return rate


def draw_for_store(
    store: Any,
    share: float | None = None,
    *,
    seed: int | None = None,
    actor: str = "audit",
) -> list[Draw]:
    """Draw the audit sample among the store's confident, still unreviewed verdicts, for
    each task that has none yet (a second draw would change the first's probabilities),
    and record each draw's inclusion probability. Returns the draws, in serving order."""
    share = audit_rate(store) if share is None else share
    rows = store.audit_population()
    sampled = {r.task for r in rows if r.audit_inclusion is not None}
    pool = [
        (r.id, r.task, r.confidence)
        for r in rows
        if r.task not in sampled
        and not r.is_gold
        and r.confidence is not None
        and r.label_source in (None, "auto")
    ]
    draws = draw_audit(pool, share, seed=seed)
    if draws:
        store.mark_audit({d.id: d.inclusion for d in draws}, actor=actor)
    return draws


def accept_confident(
    store: Any, certainty: float | None = None, *, task: str | None = None, actor: str = "audit"
) -> tuple[int, float]:
    """Close a campaign: the agent's verdicts nobody reviewed that are at least `certainty`
    sure, max(P, 1 - P), become its labels (label_source 'auto'). They join the YES list of
    `export catalogue` (decided by the agent, its precision estimated by the audit) and
    leave the queue; an audit item among them is still served, and an expert's decision
    replaces the agent's label. `certainty` defaults to the team's `auto_accept`, else
    CONFIDENT (0.9), where the audit's eligibility starts. Returns (how many, certainty)."""
    if certainty is None:
        certainty = store.setting("auto_accept") or CONFIDENT
    certainty = float(certainty)
    if not 0.5 < certainty <= 1.0:
        raise ValueError(f"auto-accept certainty must be above 0.5 and at most 1 (got {certainty})")
    return store.auto_accept(certainty, task=task, actor=actor), certainty


def store_estimates(
    store: Any, task: str | None = None, *, reps: int = 1000, seed: int = 0
) -> dict[str, TaskEstimates]:
    """The audit's figures for each task of the store (or one)."""
    return estimate(store_decided(store, task), reps=reps, seed=seed)


def store_decided(store: Any, task: str | None = None) -> list[Decided]:
    """The store's candidates (of one task, or all) as the estimates see them."""
    return [
        Decided(r.task, r.confidence, r.label, r.label_source == "auto", r.audit_inclusion)
        for r in store.audit_population(task)
    ]
