"""The audit's estimates from per-stratum counts, by two estimators: exact finite-population
intervals per stratum (`exact_part`), and the model-assisted estimate that corrects the
agent's P(YES) with the audited labels (`annotate.audit.assisted`). Either way the strata
combine by MOVER (`mover_sum`; completeness's ratio by `mover_ratio`), and each figure is
quoted by the estimator `FIGURE_ESTIMATOR` names, chosen by the coverage and width
bench/audit_coverage.py measured; the other is kept beside it (`TaskEstimates.alternatives`).

Why exact: a stratum ("band") of the audit is a finite set of N candidates of which a simple
random sample of n was reviewed, x of them truly YES. The number M of truly YES candidates in
the stratum then follows the hypergeometric law, and inverting it gives an interval for M
that is exact at any n, including n = 1 and a band of three (a Wilson or bootstrap interval
at a handful of items is not: one audited error among three made a pure band read 0 [0, 0.79]).
n = 0 leaves M anywhere in [0, N] (said as "not estimated" where no stratum has an audited
item). The figures are sums over strata (the agent's YES verdicts nobody reviewed, per
stratum), each stratum's count bounded by its own interval; MOVER adds their half-widths in
quadrature, as independent errors add.

Each candidate is counted in the stratum it had at the draw (`StratumCounts.stratum`), not
the one its P(YES) has now: re-scoring changes verdicts, never the design. Candidates in no
draw's population (vetted after the draw, or not confident then) whose truth is unknown are
bounded, not estimated: each may be YES or NO.

Experts' labels are the truth, and a census: a candidate an expert decided (in the sample,
in the hand-off queue, or by a correction) is known whatever its stratum, and the audit is
read as a sample of the stratum's other members (`StratumCounts.pool`).

>>> h = StratumCounts("1:YES 0.95-0.99", members=3, drawn=1, audited=1, audited_yes=0,
...                   expert=1, expert_yes=0, agent_yes=2)
>>> e = task_figures("s_type", [h], expert_yes_total=0)
>>> e.precision.value, e.precision.low, e.precision.high
(0.0, 0.0, 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

from scipy.stats import beta, hypergeom

from annotate.audit.assisted import MIN_AUDITED, assisted_part

ALPHA = 0.05  # 1 - the intervals' confidence level
# Strata up to this size get the exact hypergeometric interval (a few milliseconds each);
# larger ones Clopper-Pearson's, which leaves out the finite-population correction and is
# so a little wider than it need be (at a 5% audit share, about 2.5%), and takes microseconds.
EXACT_UP_TO = 5000
EXACT = "exact"  # exact hypergeometric per stratum, combined by MOVER
ASSISTED = "model-assisted"  # the difference estimator on the agent's P(YES) (assisted.py)
# The estimator each figure is quoted by, chosen by the coverage and width
# bench/audit_coverage.py measured with a calibrated and a miscalibrated agent (docs/audit.md)
FIGURE_ESTIMATOR = {"precision": EXACT, "completeness": ASSISTED, "ECE": ASSISTED}
ESTIMATOR_TEXT = {
    EXACT: "exact hypergeometric per stratum, MOVER",
    ASSISTED: "difference estimator on P(YES), floored variance",
}


@dataclass
class Estimate:
    """A figure with its 95% interval, the audited items it rests on and their effective
    number; `value` is None where the audit does not allow it (`note` says why; `low` and
    `high` may still bound it)."""

    value: float | None
    low: float | None
    high: float | None
    n: int  # audited (reviewed) items behind the figure
    n_eff: float = 0.0
    note: str = ""
    method: str = ""  # the estimator it comes from (EXACT or ASSISTED); "" where none is needed

    def __str__(self) -> str:
        """The figure as the CLI, the Dashboard and the catalogue's notes print it.

        >>> str(Estimate(1.0, 1.0, 1.0, 0, note="every YES was decided by an expert"))
        '1.000 exactly (every YES was decided by an expert)'
        """
        if self.value is None:
            return f"not estimated ({self.note})" if self.note else "not estimated"
        if self.note and self.low == self.high == self.value:
            # known without sampling: "[1.000, 1.000] (n=0)" would read as an interval from
            # no audited item
            return f"{self.value:.3f} exactly ({self.note})"
        return self.interval()

    def interval(self) -> str:
        """`value [low, high] (n=...) estimator`, also for a figure known exactly (for
        tables whose columns are read back).

        >>> Estimate(0.9, 0.8, 0.95, 12, method="model-assisted").interval()
        '0.900 [0.800, 0.950] (n=12) model-assisted'
        """
        how = f" {self.method}" if self.method else ""
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}] (n={self.n}){how}"


@dataclass
class StratumCounts:
    """One stratum of a task as the estimates read it. `stratum` is "<draw>:<verdict> <band>"
    as recorded at the draw; None holds the task's candidates in no draw's population.
    The sums of P(YES) (of its square over the audited items) are what the model-assisted
    estimator reads (`annotate.audit.assisted`)."""

    stratum: str | None
    members: int = 0  # N: candidates of the stratum
    drawn: int = 0  # in the audit sample
    audited: int = 0  # n: drawn and labelled by an expert
    audited_yes: int = 0  # x: of them truly YES
    expert: int = 0  # members labelled by an expert (audited or not): their truth is known
    expert_yes: int = 0
    agent_yes: int = 0  # the agent's own YES label, nobody reviewed (auto-accepted)
    agent_no: int = 0
    pending: int = 0  # no label yet
    p_sum: float = 0.0  # sum of the members' P(YES) now
    p_agent_yes: float = 0.0  # sum of P(YES) over `agent_yes`
    p_agent_no: float = 0.0
    p_expert: float = 0.0  # sum of P(YES) over `expert` (the audited among them)
    p_audited: float = 0.0  # sum of P(YES) over `audited`
    p_audited_yes: float = 0.0  # sum of P(YES) over the audited items truly YES
    p2_audited: float = 0.0  # sum of P(YES)^2 over `audited` (read with the audited items)

    @property
    def unknown(self) -> int:
        """Members whose truth no expert has given: what the estimates estimate."""
        return self.members - self.expert

    @property
    def pool(self) -> int:
        """Members less those an expert decided outside the sample (the hand-off queue,
        corrections): those are a census, known exactly; the audit is read as a simple
        random sample of the rest."""
        return self.members - (self.expert - self.audited)

    @property
    def side(self) -> str:
        """The agent's verdict at the draw ("YES"/"NO"; "" outside any draw)."""
        return (self.stratum or "").partition(":")[2].split(" ")[0]


def _first(holds, lo: int, hi: int) -> int:
    """The first integer of [lo, hi] where a monotone (False, then True) predicate holds;
    hi + 1 where it never does."""
    while lo <= hi:
        mid = (lo + hi) // 2
        if holds(mid):
            hi = mid - 1
        else:
            lo = mid + 1
    return lo


@lru_cache(maxsize=65536)
def yes_count_interval(members: int, audited: int, yes: int, alpha: float) -> tuple[int, int]:
    """Exact interval (level 1 - alpha, equal tails) for the number of truly YES among
    `members` candidates, `yes` of a simple random sample of `audited` being YES
    (hypergeometric; Clopper-Pearson's above `EXACT_UP_TO` members).

    >>> yes_count_interval(3, 1, 0, 0.05), yes_count_interval(100, 100, 40, 0.05)
    ((0, 2), (40, 40))
    >>> yes_count_interval(50, 0, 0, 0.05)
    (0, 50)
    >>> lo, hi = yes_count_interval(1000, 100, 90, 0.05); 800 < lo < 900 < hi < 960
    True
    """
    n_, n, x = int(members), int(audited), int(yes)
    if not 0 <= x <= n <= n_:
        raise ValueError(f"stratum counts: {x} YES of {n} audited of {n_} members")
    lo_b, hi_b = x, n_ - (n - x)  # what the sample itself rules out
    if n == 0 or n == n_ or alpha <= 0:
        return lo_b, hi_b
    a = alpha / 2
    if n_ > EXACT_UP_TO:  # Clopper-Pearson: no finite-population correction, so wider
        lo = lo_b if x == 0 else max(lo_b, math.ceil(n_ * beta.ppf(a, x, n - x + 1) - 1e-9))
        hi = hi_b if x == n else min(hi_b, math.floor(n_ * beta.ppf(1 - a, x + 1, n - x) + 1e-9))
        return int(lo), int(hi)
    # P(X >= x | M) grows with M: the lowest M where it exceeds a
    lo = lo_b if x == 0 else _first(lambda m: hypergeom.sf(x - 1, n_, m, n) > a, lo_b, hi_b)
    # P(X <= x | M) falls with M: the first M where it no longer does, less one
    hi = hi_b if x == n else _first(lambda m: hypergeom.cdf(x, n_, m, n) <= a, lo_b, hi_b) - 1
    return int(lo), int(hi)


Interval = tuple[float, float, float]  # (estimate, low, high)
# a stratum's truly YES among `part` of its unknown members, from its counts, at a level
PartInterval = Callable[[StratumCounts, int, float, float], "Interval | None"]


def exact_part(h: StratumCounts, part: int, p_part: float, alpha: float) -> Interval | None:
    """(estimate, low, high) of the truly YES among `part` of the stratum's unknown members
    (its agent YES, its agent NO, or all of them), None where nothing is audited: the pool
    (`StratumCounts.pool`) holds M truly YES, of which the audit saw x in n; M's exact
    interval, less the x seen, bounds the unknown members' YES, and what the rest of them
    may hold bounds the part's. `p_part` is unused (the exact interval reads no P(YES)).

    >>> h = StratumCounts("1:NO 0.99-1.00", members=100, audited=10, expert=10, agent_no=90)
    >>> exact_part(h, 90, 0.0, 0.05)  # none of 10 audited YES: at most 29 of the 90
    (0.0, 0.0, 29.0)
    """
    if not part:
        return 0.0, 0.0, 0.0
    if not h.audited:
        return None
    n, x = h.audited, h.audited_yes
    lo, hi = yes_count_interval(h.pool, n, x, alpha)
    others = h.unknown - part
    low, high = float(max(0, lo - x - others)), float(min(part, hi - x))
    return min(high, max(low, part * x / n)), low, high


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
    outside: int = 0  # agent-decided candidates in no draw's population
    # each figure by the estimator not chosen for it (FIGURE_ESTIMATOR), for comparison
    alternatives: dict[str, Estimate] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["band_errors"] = {b: asdict(e) for b, e in self.band_errors.items()}
        return d

    def by_estimator(self, figure: str) -> dict[str, Estimate]:
        """The figure ("precision", "completeness", "ECE") by each estimator, by name."""
        chosen = {"precision": self.precision, "completeness": self.completeness,
                  "ECE": self.ece}[figure]  # fmt: skip
        out = {FIGURE_ESTIMATOR[figure]: chosen}
        if figure in self.alternatives:
            out[self.alternatives[figure].method] = self.alternatives[figure]
        return out


def mover_sum(parts: Sequence[Interval]) -> Interval:
    """(estimate, low, high) of a sum of independent parts, each (estimate, low, high) with
    its own interval: the MOVER limits (Zou and Donner 2008; Newcombe's for a difference of
    proportions), sum - sqrt(sum (est - low)^2) and sum + sqrt(sum (high - est)^2). One part
    gives its own interval back; several add in quadrature, as their errors do (for normal
    parts, est +- z sd, this is the normal interval of the sum).

    >>> mover_sum([(8.0, 5.0, 9.0)]), [round(v, 3) for v in mover_sum([(8.0, 5.0, 9.0)] * 2)]
    ((8.0, 5.0, 9.0), [16.0, 11.757, 17.414])
    """
    est = sum(e for e, _, _ in parts)
    low = est - math.sqrt(sum((e - a) ** 2 for e, a, _ in parts))
    high = est + math.sqrt(sum((b - e) ** 2 for e, _, b in parts))
    return est, low, high


def mover_ratio(num: Interval, den: Interval) -> tuple[float, float]:
    """(low, high) of the ratio num / den of two independent positive quantities, each
    (estimate, low, high) with its own interval: MOVER-R (Donner and Zou 2012), which
    recovers each limit from the parts' limits, as `mover_sum` does for a sum. A
    denominator whose interval reaches 0 leaves the ratio unbounded above.

    >>> [round(v, 4) for v in mover_ratio((0.0, 0.0, 6.0), (30.0, 26.0, 34.0))]
    [0.0, 0.2018]
    >>> mover_ratio((2.0, 1.0, 4.0), (3.0, 0.0, 5.0))[1]
    inf
    """
    (x, lx, ux), (y, ly, uy) = num, den
    if ly <= 0 or y <= 0:
        return (max(0.0, lx) / uy if uy > 0 else 0.0), math.inf
    xy = x * y
    d_lo = xy * xy - lx * uy * (2 * x - lx) * (2 * y - uy)
    d_hi = xy * xy - ux * ly * (2 * x - ux) * (2 * y - ly)
    # where a part's interval is too wide for the closed form, the plain bound of its limits
    low = (xy - math.sqrt(d_lo)) / (uy * (2 * y - uy)) if d_lo >= 0 and 2 * y > uy else lx / uy
    high = (xy + math.sqrt(d_hi)) / (ly * (2 * y - ly)) if d_hi >= 0 else ux / ly
    return max(0.0, min(low, x / y)), max(high, x / y)


def _sum_parts(strata: Sequence[StratumCounts], attr: str, p_attr: str, alpha: float,
               part_interval: PartInterval):  # fmt: skip
    """(estimate, low, high, audited items used, their effective number, whether every
    stratum behind it has an audited item) of the truly YES among the agent-labelled `attr`
    items of every stratum: each audited stratum's interval (`part_interval`), combined by
    MOVER; a stratum nobody audited, and the items outside every draw, add their whole
    range."""
    parts: list[Interval] = []
    box_est = box_low = box_high = 0.0
    n = 0
    wsum = w2sum = 0.0
    covered = True
    for h in strata:
        part = getattr(h, attr)
        if not part:
            continue
        p_part = getattr(h, p_attr)
        got = None if h.stratum is None else part_interval(h, part, p_part, alpha)
        if got is None:  # outside every draw, or nothing audited: its range, not estimated
            box_est, box_high = box_est + min(part, p_part), box_high + part
            covered = False
            continue
        parts.append(got)
        n += h.audited
        w = part / h.audited
        wsum += w * h.audited
        w2sum += w * w * h.audited
    est, low, high = mover_sum(parts)
    total = sum(getattr(h, attr) for h in strata)
    ne = wsum * wsum / w2sum if w2sum else 0.0
    # the sum of counts lies in [0, total] whatever the parts' intervals say
    top = float(total)
    low, high = max(0.0, low + box_low), min(top, high + box_high)
    return min(high, max(low, est + box_est)), low, max(low, high), n, ne, covered


def figures(
    strata: Sequence[StratumCounts], expert_yes_total: int, method: str, alpha: float = ALPHA
) -> dict[str, Estimate]:
    """Precision, completeness and ECE of one task's strata by one estimator (`EXACT` or
    `ASSISTED`), each Estimate naming it."""
    part_interval = PART_INTERVALS[method]
    k = int(expert_yes_total)
    u = sum(h.agent_yes for h in strata)
    v = sum(h.agent_no for h in strata)
    drawn = sum(h.drawn for h in strata)
    listed = k + u
    tp, tp_lo, tp_hi, n_yes, ne_yes, cov_yes = _sum_parts(strata, "agent_yes", "p_agent_yes",
                                                          alpha, part_interval)  # fmt: skip
    out_yes = sum(h.agent_yes for h in strata if h.stratum is None)
    out_any = sum(h.agent_yes + h.agent_no for h in strata if h.stratum is None)
    if not listed:
        precision = Estimate(None, None, None, 0, 0.0, "the YES list is empty")
    elif not u:
        precision = Estimate(1.0, 1.0, 1.0, 0, 0.0, "every YES was decided by an expert")
    elif not cov_yes:
        precision = Estimate(None, (k + tp_lo) / listed, (k + tp_hi) / listed, n_yes, 0.0,
                             _why(drawn, out_yes, "YES list"), method)  # fmt: skip
    else:
        precision = Estimate((k + tp) / listed, (k + tp_lo) / listed, (k + tp_hi) / listed,
                             n_yes, ne_yes, method=method)  # fmt: skip
    # completeness's bounds where it is not estimated: the true YES in both lists at once,
    # each at 1 - alpha/2 (Bonferroni)
    ty = _sum_parts(strata, "agent_yes", "p_agent_yes", alpha / 2, part_interval)
    fn = _sum_parts(strata, "agent_no", "p_agent_no", alpha / 2, part_interval)
    t = [k + ty[0], k + ty[1], k + ty[2]]
    f = [fn[0], fn[1], fn[2]]
    n_c = ty[3] + fn[3]

    def share(a: float, b: float) -> float:
        return a / (a + b) if a + b > 0 else 1.0

    if not (u or v):
        completeness = Estimate(None, None, None, 0, 0.0,
                                "nothing decided by the agent yet: close the campaign")  # fmt: skip
    elif not (ty[5] and fn[5]):
        completeness = Estimate(None, share(t[1], f[2]), share(t[2], f[1]), n_c, 0.0,
                                _why(drawn, out_any, "agent's lists"), method)  # fmt: skip
    else:  # 1 / (1 + F / A), A = K + T: the ratio F / A by MOVER-R, each at 1 - alpha
        fa = _sum_parts(strata, "agent_no", "p_agent_no", alpha, part_interval)
        lo_r, hi_r = mover_ratio(fa[:3], (k + tp, k + tp_lo, k + tp_hi))
        completeness = Estimate(share(k + tp, fa[0]), 1.0 / (1.0 + hi_r), 1.0 / (1.0 + lo_r),
                                n_c, method=method)  # fmt: skip
    out = {"precision": precision, "completeness": completeness,
           "ECE": calibration_error(strata, alpha, method)}  # fmt: skip
    for e in out.values():  # known or not estimated, it is still this estimator's figure
        e.method = method
    return out


def band_errors(strata: Sequence[StratumCounts], alpha: float = ALPHA) -> dict[str, Estimate]:
    """The agent's error rate per stratum (the share of its verdicts at the draw that are
    wrong), exact: the experts' decisions known, the pool's unknown members bounded."""
    errors = {}
    for h in strata:
        if h.stratum is None:
            continue
        got = exact_part(h, h.unknown, 0.0, alpha)
        if got is None:
            errors[h.stratum] = Estimate(None, None, None, 0, 0.0, "none audited")
            continue
        point, lo, hi = (h.expert_yes + v for v in got)  # the stratum's truly YES
        sign, base = (-1, h.members) if h.side == "YES" else (1, 0)  # wrong = YES on NO side
        e_lo, e_hi = sorted(((base + sign * lo) / h.members, (base + sign * hi) / h.members))
        val = min(e_hi, max(e_lo, (base + sign * point) / h.members))
        errors[h.stratum] = Estimate(val, e_lo, e_hi, h.audited, float(h.audited),
                                     method=EXACT)  # fmt: skip
    return errors


def task_figures(
    task: str, strata: Sequence[StratumCounts], *, expert_yes_total: int, alpha: float = ALPHA
) -> TaskEstimates:
    """The audit's figures of one task from its strata (the one with stratum None holding
    its candidates outside every draw) and its expert-decided YES count: each figure by the
    estimator `FIGURE_ESTIMATOR` names, the other kept in `alternatives`."""
    by = {m: figures(strata, expert_yes_total, m, alpha) for m in PART_INTERVALS}
    chosen = {f: by[m][f] for f, m in FIGURE_ESTIMATOR.items()}
    other = {f: by[m][f] for f in FIGURE_ESTIMATOR for m in by if m != FIGURE_ESTIMATOR[f]}
    return TaskEstimates(
        task, int(expert_yes_total) + sum(h.agent_yes for h in strata), int(expert_yes_total),
        sum(h.agent_yes for h in strata), sum(h.agent_no for h in strata),
        sum(h.drawn for h in strata), sum(h.audited for h in strata),
        chosen["precision"], chosen["completeness"], band_errors(strata, alpha), chosen["ECE"],
        sum(h.agent_yes + h.agent_no for h in strata if h.stratum is None), other,
    )  # fmt: skip


def _why(drawn: int, outside: int, what: str) -> str:
    """Why a figure is not estimated: no sample, unreviewed strata, items outside the draws."""
    if not drawn:
        return "no audit sample drawn"
    if outside:
        return (f"{outside} item(s) of the {what} are in no draw's population: "
                "draw again (audit --draw)")  # fmt: skip
    return f"a stratum of the {what} has no audited item yet"


def calibration_error(
    strata: Sequence[StratumCounts], alpha: float = ALPHA, method: str = EXACT
) -> Estimate:
    """ECE of the P(YES) the store holds now over the audit's population, the draw's strata
    as its bins: sum over strata of |truly YES - sum of P(YES)|, over the members. Each
    stratum's truly YES is its experts' YES (known) plus an interval for its unknown
    members' (by `method`); the upper end combined by MOVER and the lower end their sum
    (|truly YES - sum of P(YES)| is biased upwards where a stratum's count is uncertain;
    resampling a handful of identical outcomes gave widths near zero); not estimated until
    every stratum has an audited item, since an unaudited stratum could hold anything.

    >>> hs = [StratumCounts("1:YES 0.99-1.00", 100, 10, 10, 10, 10, 10, p_sum=99.5),
    ...       StratumCounts("1:NO 0.99-1.00", 100, 10, 10, 0, 10, 0, p_sum=0.5)]
    >>> e = calibration_error(hs); round(e.value, 4), e.low, e.value < e.high < 0.25
    (0.005, 0.0, True)
    """
    inside = [h for h in strata if h.stratum is not None and h.members]
    if not inside:
        return Estimate(None, None, None, 0, 0.0, "no audit sample drawn")
    if any(not h.audited and h.unknown for h in inside):
        return Estimate(None, None, None, sum(h.audited for h in inside), 0.0,
                        "a stratum has no audited item yet", method)  # fmt: skip
    total = sum(h.members for h in inside)
    parts = []
    for h in inside:
        got = PART_INTERVALS[method](h, h.unknown, h.p_sum - h.p_expert, alpha)
        # the stratum's truly YES: the experts' YES and what its unknown members may hold
        point, lo, hi = (h.expert_yes + min(h.unknown, max(0.0, v)) for v in got)  # type: ignore[union-attr]
        s = h.p_sum
        low = 0.0 if lo <= s <= hi else min(abs(lo - s), abs(hi - s))
        parts.append((abs(point - s), low, max(abs(lo - s), abs(hi - s))))
    # the upper end by MOVER; the lower end the sum of the strata's own lower ends
    val, _, hi_s = mover_sum(parts)
    lo_s = sum(low for _, low, _ in parts)
    n = sum(h.audited for h in inside)
    return Estimate(val / total, lo_s / total, hi_s / total, n, float(n), method=method)


def assisted_or_exact(h: StratumCounts, part: int, p_part: float, alpha: float):
    """The model-assisted interval of a stratum (`annotate.audit.assisted`), or its exact
    one where fewer than `MIN_AUDITED` items were audited: too few residuals to say how far
    the agent is off."""
    if h.audited < MIN_AUDITED:
        return exact_part(h, part, p_part, alpha)
    return assisted_part(h, part, p_part, alpha)


PART_INTERVALS: dict[str, PartInterval] = {EXACT: exact_part, ASSISTED: assisted_or_exact}
