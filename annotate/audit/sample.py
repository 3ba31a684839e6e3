"""The random audit: a stratified draw among the candidates the agent decided confidently,
and the estimates it allows (precision and completeness of the YES list, the agent's error
rate per stratum, ECE), each with a 95% interval (`annotate.audit.estimate`).

Why: the hand-off queue serves the least certain verdicts first, so the items experts label
are no sample of anything, and a confident mistake is never seen. A random share of the
confident verdicts (`audit_rate`, default 5%) is reviewed like any other item.

Strata are (task, the agent's verdict, certainty band), certainty = max(P, 1 - P) in the
bands `CERTAINTY_EDGES`. `draw_audit` takes a simple random sample without replacement in
each stratum and returns each draw's inclusion probability n_h / N_h. `draw_for_store`
records, for every candidate of the draw's population, drawn or not, the stratum it is in
at the draw ("<draw>:<verdict> <band>"): the estimates weigh each candidate by that stratum
whatever re-scoring does to its P(YES) later. A later draw takes only the confident
candidates in no earlier draw's population (vetted since, or made confident by a
re-scoring): a new design of its own, beside the first. Drawn items not yet reviewed are
non-response: within a stratum, the reviewed ones stand for all.

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
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from annotate.audit.assisted import MIN_AUDITED, RESIDUAL_FLOOR
from annotate.audit.estimate import Estimate, StratumCounts, TaskEstimates, task_figures

__all__ = ["Estimate", "StratumCounts", "TaskEstimates"]  # re-exported: the figures' types

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


def side_sizes(n_yes: int, n_no: int, share: float) -> tuple[int, int]:
    """How many of a task's confident YES and NO verdicts the audit draws: `share` of them
    all, half from each list (a list smaller than its half gives the rest to the other).

    Why not in proportion to the lists: a survey's NO list is ten to a hundred times its YES
    list, so a proportional draw spends nearly all of the experts' audit on verdicts that are
    almost all right, and the YES list's precision, the figure a catalogue quotes, rests on
    a handful of items (an exact interval from six all-right items is still 0.45 wide).

    >>> side_sizes(60, 280, 0.1), side_sizes(3, 287, 0.1), side_sizes(0, 50, 0.1)
    ((17, 17), (3, 26), (0, 5))
    >>> side_sizes(5000, 95000, 0.1), side_sizes(2, 2, 0.01)
    ((5000, 5000), (1, 1))
    """
    total = n_yes + n_no
    budget = min(total, max(1, round(share * total))) if total and share > 0 else 0
    yes = min(n_yes, math.ceil(budget / 2))
    no = min(n_no, budget - yes)
    yes = min(n_yes, budget - no)
    # each non-empty list is seen, as each band is
    return max(yes, int(n_yes > 0 and budget > 0)), max(no, int(n_no > 0 and budget > 0))


def band_sizes(
    sizes: Sequence[int], n: int, spread: Sequence[float] | None = None, least: int = 1
) -> list[int]:
    """`n` draws spread over bands of `sizes` in proportion to size x `spread` (`spread` 1
    each: in proportion to size), each band given at least `least` (or all of it, if
    smaller; where `n` cannot give `least` to every band, the largest by size x spread get
    it first and the others one each: every band is seen) and at most its size; what a
    bound fixes comes out of the others, the remainders rounded largest first.

    >>> band_sizes([200, 60, 1], 13), band_sizes([10, 10], 3), band_sizes([4, 0], 9)
    ([9, 3, 1], [2, 1], [4, 0])
    >>> band_sizes([200, 40, 10], 20, [0.1, 0.15, 0.27]), band_sizes([90, 1, 1, 1], 2)
    ([14, 4, 2], [1, 1, 1, 1])
    >>> band_sizes([211, 36, 5], 16, [0.1, 0.13, 0.28], least=5)  # Neyman, 5 at least
    [6, 5, 5]
    >>> band_sizes([211, 36, 5], 9, [0.1, 0.13, 0.28], least=5)
    [7, 1, 1]
    """
    k = len(sizes)
    if not sum(sizes) or n <= 0:
        return [0] * k
    n = min(n, sum(sizes))
    mass = [s * w for s, w in zip(sizes, [1.0] * k if spread is None else spread)]
    if sum(mass) <= 0:
        mass = [float(s) for s in sizes]
    low = [min(s, least) for s in sizes]
    if sum(low) > n:  # not `least` for every band: for the largest (by size x spread) first
        low = [min(s, 1) for s in sizes]
        for h in sorted(range(k), key=lambda h: -mass[h]):
            if sum(low) - low[h] + min(sizes[h], least) <= n:
                low[h] = min(sizes[h], least)
    # the share each band gets, its bounds fixing some and the rest spread anew
    fixed: dict[int, float] = {}
    while True:
        free = [h for h in range(k) if h not in fixed and sizes[h] > 0]
        left = n - sum(fixed.values())
        total = sum(mass[h] for h in free) or 1.0
        share = {h: left * mass[h] / total for h in free}
        bound = {h: low[h] if x < low[h] else sizes[h] for h, x in share.items()
                 if x < low[h] or x > sizes[h]}  # fmt: skip
        if not bound:
            break
        fixed.update(bound)
    exact = [fixed.get(h, share.get(h, 0.0)) for h in range(k)]
    out = [min(sizes[h], max(low[h], math.floor(exact[h] + 1e-9))) for h in range(k)]
    while sum(out) < n:  # the largest remainders first
        h = max((h for h in range(k) if out[h] < sizes[h]), key=lambda h: (exact[h] - out[h], -h))
        out[h] += 1
    while sum(out) > n:  # over by the bands given one each: from the largest excess
        more = [h for h in range(k) if out[h] > low[h]]
        if not more:
            break
        out[max(more, key=lambda h: (out[h] - exact[h], h))] -= 1
    return out


# Neyman's allocation spreads a list's draws over its bands by N_h x sd_h, the sd of the
# residual y - P(YES) a calibrated agent implies: sqrt(mean of p(1 - p)) over the band. The
# floor keeps the bands at P(YES) ~ 0 (or ~ 1) from going unaudited: an agent's P(YES) 0.001
# is no promise that its misses are that rare (a band audited by one item in hundreds could
# hide them). Its value: the error rate of 0.5% a band is taken to be capable of, as the
# model-assisted estimate takes it (`annotate.audit.assisted.RESIDUAL_FLOOR`).
SPREAD_FLOOR = RESIDUAL_FLOOR


def band_spread(p_yes: Sequence[float]) -> float:
    """The sd Neyman's allocation gives a band of these P(YES): sqrt(mean p(1 - p)), floored.

    >>> round(band_spread([0.001] * 5), 3), round(band_spread([0.08, 0.06]), 3)
    (0.071, 0.255)
    """
    if not len(p_yes):
        return 0.0
    v = sum(p * (1.0 - p) for p in p_yes) / len(p_yes)
    return math.sqrt(max(v, SPREAD_FLOOR))


def draw_audit(
    candidates: Iterable[tuple[int, str, float]],
    share: float = AUDIT_RATE,
    *,
    min_certainty: float = CONFIDENT,
    seed: int | np.random.Generator | None = None,
    edges: Sequence[float] = CERTAINTY_EDGES,
    spread: bool = True,
) -> list[Draw]:
    """Stratified random draw of `share` of the confident ones among (id, task, P(YES)).

    Per task, `share` of its confident verdicts are drawn, half from its YES list and half
    from its NO list (`side_sizes`). The NO list's draws are spread over its certainty bands
    by Neyman's allocation, N_h x the sd of the residual the agent's P(YES) implies, floored
    (`band_spread`), each band given at least `MIN_AUDITED` where the list's share allows
    (what the model-assisted estimate needs in a stratum; `spread=False`: in proportion).
    Why: completeness and ECE rest on how many truly YES each NO band holds, and that count
    is uncertain where P(YES) is: the bands nearest the threshold hide most of the misses,
    and a draw in proportion spent most of the NO list's audit on the band at P(YES) ~ 0.
    The YES list's draws go in proportion to its bands' sizes: its precision is quoted by
    the exact intervals, whose width where a band holds no error is about N_h x 3.7 / n_h,
    which a draw in proportion evens out (by Neyman's, the M-giant precision interval was
    wider at a 5 or 10% share). At least one per band, so every band is seen. Each stratum
    (task, verdict, band) of N_h items gives a simple random sample of n_h; its items'
    inclusion probability is n_h / N_h. The draws come back in random order, so a queue
    that serves them in it leaves a random remainder unreviewed when it stops. Draw once per
    population: a candidate not drawn must not be offered to a later draw, or its inclusion
    probability is no longer n_h / N_h.

    >>> pop = [(i, "cv", 0.995) for i in range(40)] + [(40 + i, "cv", 0.003) for i in range(400)]
    >>> sorted((str(d.band), round(d.inclusion, 3)) for d in draw_audit(pop, 0.05, seed=0))[::11]
    [('NO 0.99-1.00', 0.028), ('YES 0.99-1.00', 0.275)]
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
    p_yes: dict[tuple[str, Band], list[float]] = {}
    for cid, task, p in candidates:
        if p is None or not math.isfinite(p) or max(p, 1.0 - p) < min_certainty:
            continue
        key = (task, band_of(p, edges))
        strata.setdefault(key, []).append(int(cid))
        p_yes.setdefault(key, []).append(float(p))
    if share == 0.0:
        return []
    sizes: dict[tuple[str, Band], int] = {}
    for task in sorted({t for t, _ in strata}):
        yes, no = (
            [b for t, b in sorted(strata) if t == task and b.side == s] for s in ("YES", "NO")
        )
        n_yes, n_no = side_sizes(sum(len(strata[task, b]) for b in yes),
                                 sum(len(strata[task, b]) for b in no), share)  # fmt: skip
        for bands, n in ((yes, n_yes), (no, n_no)):
            neyman = spread and bands is no
            got = band_sizes([len(strata[task, b]) for b in bands], n,
                             [band_spread(p_yes[task, b]) for b in bands] if neyman else None,
                             least=MIN_AUDITED if neyman else 1)  # fmt: skip
            for b, k in zip(bands, got):
                sizes[task, b] = k
    out: list[Draw] = []
    for (task, band), ids in sorted(strata.items()):
        n = sizes[task, band]
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
    """Wilson's score interval for a proportion p seen on n (possibly effective) items: the
    reliability diagram's bins (`annotate.audit.agreement.weighted_reliability`).

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


# -- the population and its estimates -------------------------------------------------------


def stratum_name(draw: int, band: Band) -> str:
    """How a candidate's stratum is recorded at the draw: "<draw>:<verdict> <band>".

    >>> stratum_name(1, band_of(0.97))
    '1:YES 0.95-0.99'
    """
    return f"{int(draw)}:{band}"


@dataclass(frozen=True)
class Decided:
    """One candidate as the estimates see it.

    `label` is the final label (None while pending), `by_agent` whether that label is the
    agent's own (auto-accepted, no expert saw it), `inclusion` the probability with which it
    entered the audit sample (None: not in it), `stratum` the one it had at the draw (None:
    in no draw's population, as is a sample drawn before strata were recorded).
    """

    task: str
    p_yes: float | None  # the agent's P(YES) now
    label: str | None
    by_agent: bool = False
    inclusion: float | None = None
    stratum: str | None = None

    @property
    def expert(self) -> bool:
        """Labelled by an expert (whose label is the truth)."""
        return self.label in ("YES", "NO") and not self.by_agent

    @property
    def audited(self) -> bool:
        """In the audit sample and decided by an expert."""
        return self.inclusion is not None and self.inclusion > 0 and self.expert


def stratum_counts(items: Iterable[Decided]) -> dict[str, list[StratumCounts]]:
    """Per task, its candidates counted per design stratum (as `Store.audit_counts` does in
    the database), the stratum None last."""
    acc: dict[tuple[str, str | None], StratumCounts] = {}
    for d in items:
        st = d.stratum
        h = acc.setdefault((d.task, st), StratumCounts(st))
        p = float(d.p_yes) if d.p_yes is not None else 0.5
        h.members += 1
        h.p_sum += p
        drawn = d.inclusion is not None and d.inclusion > 0
        h.drawn += drawn
        if d.expert:
            yes = d.label == "YES"
            h.expert += 1
            h.expert_yes += yes
            h.p_expert += p
            if drawn:
                h.audited += 1
                h.audited_yes += yes
                h.p_audited, h.p2_audited = h.p_audited + p, h.p2_audited + p * p
                h.p_audited_yes += p * yes
        elif d.label == "YES":
            h.agent_yes, h.p_agent_yes = h.agent_yes + 1, h.p_agent_yes + p
        elif d.label == "NO":
            h.agent_no, h.p_agent_no = h.agent_no + 1, h.p_agent_no + p
        else:
            h.pending += 1
    out: dict[str, list[StratumCounts]] = {}
    for (task, _st), h in sorted(acc.items(), key=lambda kv: (kv[0][0], kv[0][1] is None,
                                                              kv[0][1] or "")):  # fmt: skip
        out.setdefault(task, []).append(h)
    return out


def from_counts(counts: dict[str, list[StratumCounts]]) -> dict[str, TaskEstimates]:
    """Per task, the figures of its strata (`annotate.audit.estimate.task_figures`); the
    experts' YES are counted in every stratum, the None one included."""
    return {
        t: task_figures(t, hs, expert_yes_total=sum(h.expert_yes for h in hs))
        for t, hs in sorted(counts.items())
    }


def task_estimates(task: str, items: Sequence[Decided], **_: Any) -> TaskEstimates:
    """The figures of one task's candidates (`items` all of that task)."""
    return from_counts({task: stratum_counts(items).get(task, [])})[task]


def estimate(items: Iterable[Decided], **_: Any) -> dict[str, TaskEstimates]:
    """Per task, the audit's figures (annotate.audit.estimate says how each is made).

    >>> pop = [Decided("wd", 0.97, "YES", True, stratum="1:YES 0.95-0.99") for _ in range(95)]
    >>> pop += [Decided("wd", 0.97, "YES", False, 0.05, "1:YES 0.95-0.99") for _ in range(4)]
    >>> pop += [Decided("wd", 0.97, "NO", False, 0.05, "1:YES 0.95-0.99")]
    >>> pop += [Decided("wd", 0.01, "NO", True, stratum="1:NO 0.99-1.00") for _ in range(50)]
    >>> e = estimate(pop)["wd"]
    >>> e.yes_list, e.yes_by_agent, e.audited, round(e.precision.value, 3)
    (99, 95, 5, 0.808)
    >>> e.completeness.note
    "a stratum of the agent's lists has no audited item yet"
    """
    return from_counts(stratum_counts(items))


def audited_points(items: Iterable[Decided]) -> list[tuple[float, bool, float]]:
    """(the agent's P(YES), the expert said YES, weight N_h / n_h of its stratum) of each
    audited item: what an unbiased reliability diagram draws.

    >>> pts = audited_points([Decided("cv", 0.95, "YES", inclusion=0.1, stratum="1:YES x"),
    ...                       Decided("cv", 0.95, "NO", True, stratum="1:YES x"),
    ...                       Decided("cv", 0.4, "NO")])
    >>> [(p, y, round(w, 3)) for p, y, w in pts]
    [(0.95, True, 2.0)]
    """
    items = list(items)
    counts = {(t, h.stratum): h for t, hs in stratum_counts(items).items() for h in hs}
    return [
        (float(d.p_yes), d.label == "YES", counts[(d.task, st)].members / counts[(d.task, st)].audited)
        for d in items
        if d.audited and d.p_yes is not None and (st := d.stratum) is not None
    ]  # fmt: skip


TABLE_HEADERS = ["task", "YES listed", "by experts", "by the agent alone", "audited / drawn",
                 "precision [95%]", "completeness [95%]", "ECE [95%]"]  # fmt: skip
BAND_HEADERS = ["task", "stratum at the draw (draw:verdict band)", "audited",
                "error rate [95%]"]  # fmt: skip


def table_rows(estimates: dict[str, TaskEstimates]) -> list[list[Any]]:
    """One row per task for a table (`TABLE_HEADERS`): what the Dashboard shows.

    >>> pop = [Decided("wd", 0.97, "YES", True, stratum="1:YES 0.95-0.99")] * 9
    >>> pop += [Decided("wd", 0.97, "YES", inclusion=0.1, stratum="1:YES 0.95-0.99")]
    >>> table_rows(estimate(pop))[0][:6]
    ['wd', 10, 1, 9, '1 / 1', '1.000 [0.100, 1.000] (n=1) exact']
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
    """The agent's error rate per task and stratum, from the audit (`BAND_HEADERS`)."""
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


def plan_draw(
    rows: Sequence[Any], share: float, *, seed: int | np.random.Generator | None = None
) -> tuple[list[Draw], dict[int, str]]:
    """The draw `draw_for_store` records, from the store's population rows
    (`Store.audit_population`): the draws among the confident, still unreviewed verdicts in
    no earlier draw's population, and the stratum of every such candidate, numbered after
    the earlier draws. Nothing is written (bench/audit_coverage.py replays it)."""
    done = [int(r.audit_stratum.partition(":")[0]) for r in rows if r.audit_stratum]
    draw_no = max(done, default=0) + 1
    pool = [
        (r.id, r.task, r.confidence)
        for r in rows
        if r.audit_stratum is None
        and r.audit_inclusion is None
        and not r.is_gold
        and r.confidence is not None
        and r.label_source in (None, "auto")
    ]
    draws = draw_audit(pool, share, seed=seed)
    strata = {
        cid: stratum_name(draw_no, band_of(p))
        for cid, _, p in pool
        if math.isfinite(p) and max(p, 1.0 - p) >= CONFIDENT
    }
    return draws, strata


def draw_for_store(
    store: Any,
    share: float | None = None,
    *,
    seed: int | None = None,
    actor: str = "audit",
) -> list[Draw]:
    """Draw the audit sample among the store's confident, still unreviewed verdicts that are
    in no earlier draw's population, and record both each draw's inclusion probability and
    every such candidate's stratum (a new design, numbered after the earlier ones: their
    probabilities stay as they were). The first draw also holds confident verdicts out of
    the queue (`auto_accept` = 0.9) unless the team has chosen otherwise, so that experts'
    time goes to the uncertain items and to the sample. Returns the draws, in serving order."""
    share = audit_rate(store) if share is None else share
    draws, strata = plan_draw(store.audit_population(), share, seed=seed)
    if draws:
        store.mark_audit({d.id: d.inclusion for d in draws}, actor=actor, strata=strata)
        unset = object()
        if store.settings({"auto_accept": unset})["auto_accept"] is unset:
            store.set_setting("auto_accept", CONFIDENT, actor=actor)
    return draws


def accept_confident(
    store: Any, certainty: float | None = None, *, task: str | None = None, actor: str = "audit"
) -> tuple[int, float]:
    """Close a campaign: the agent's verdicts nobody reviewed whose P(YES) agrees with them
    at least `certainty` sure (a YES at P(YES) >= certainty, a NO at P(YES) <= 1 - certainty)
    become its labels (label_source 'auto'). They join the YES list of `export catalogue`
    (decided by the agent, its precision estimated by the audit) and leave the queue; an
    audit item among them is still served, and an expert's decision replaces the agent's
    label. `certainty` defaults to the team's `auto_accept`, else CONFIDENT (0.9), where the
    audit's eligibility starts. Returns (how many, certainty)."""
    if certainty is None:
        certainty = store.setting("auto_accept") or CONFIDENT
    certainty = float(certainty)
    if not 0.5 < certainty <= 1.0:
        raise ValueError(f"auto-accept certainty must be above 0.5 and at most 1 (got {certainty})")
    return store.auto_accept(certainty, task=task, actor=actor), certainty


def store_counts(
    store: Any, task: str | None = None, audited: Sequence[tuple] | None = None
) -> dict[str, list[StratumCounts]]:
    """Per task, the store's candidates counted per stratum, aggregated in the database
    (`Store.audit_counts`), and the sum of the squared P(YES) of each stratum's audited
    items (`Store.audited_items`, a few percent of the candidates, read through the
    sample's partial index; `audited` where already read): what the residuals' variance
    needs, kept out of the aggregate over every candidate."""
    audited = store.audited_items(task) if audited is None else audited
    out = {t: [StratumCounts(**h) for h in hs] for t, hs in store.audit_counts(task).items()}
    by = {(t, h.stratum): h for t, hs in out.items() for h in hs}
    for t, st, p, _label in audited:
        h = by.get((t, st))
        if h is not None:
            q = float(p) if p is not None else 0.5
            h.p2_audited += q * q
    return out


def store_estimates(store: Any, task: str | None = None, **_: Any) -> dict[str, TaskEstimates]:
    """The audit's figures for each task of the store (or one), from per-stratum counts
    the database aggregates (`Store.audit_counts`): nothing here reads every candidate."""
    return from_counts(store_counts(store, task))


def store_audited_points(
    store: Any,
    task: str | None = None,
    counts: dict[str, list[StratumCounts]] | None = None,
    audited: Sequence[tuple] | None = None,
) -> list[tuple[float, bool, float]]:
    """`audited_points` of the store's audited items (`audited`, `Store.audited_items`
    already read, where given), weighted by their stratum's N_h / n_h (from `counts`,
    `store_counts` already read, where given)."""
    audited = store.audited_items(task) if audited is None else audited
    counts = store_counts(store, task, audited) if counts is None else counts
    by = {(t, h.stratum): h for t, hs in counts.items() for h in hs}
    out = []
    for t, st, p, label in audited:
        h = by.get((t, st))
        if h is not None and h.audited and p is not None:
            out.append((float(p), label == "YES", h.members / h.audited))
    return out


def store_decided(store: Any, task: str | None = None) -> list[Decided]:
    """The store's candidates (of one task, or all) as the estimates see them, one by one
    (tests and simulations; the app reads `store_estimates`, aggregated)."""
    return [
        Decided(
            r.task,
            r.confidence,
            r.label,
            r.label_source == "auto",
            r.audit_inclusion,
            r.audit_stratum,
        )  # fmt: skip
        for r in store.audit_population(task)
    ]
