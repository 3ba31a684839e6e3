"""The model-assisted estimate of a stratum's truly YES: the difference estimator on the
agent's P(YES), corrected by the audited labels.

Why: the exact intervals (`annotate.audit.estimate.exact_part`) use nothing but the audited
labels, and a NO list tens of times longer than the YES list hides its misses where few
audited items can bound them: none found among n audited NO verdicts bounds their rate only
by about 3.7/n, so completeness read "between 0.35 and 0.97". The agent gives every verdict
a P(YES), and where it is calibrated the sum of P(YES) over the unknown items already
predicts how many of them are YES; the audit corrects that prediction.

A stratum's pool (`StratumCounts.pool`: its members less those an expert decided outside
the sample, which are known) holds N items, of which a simple random sample of n was
audited. With y = 1 for an item truly YES and the residual e = y - p, the truly YES among
the pool's R = N - n unknown items are estimated by

    T = sum over R of p  +  R * mean of e over the sample

(the difference estimator: Cochran 1977, 7.1; Saerndal, Swensson and Wretman 1992, 6.3;
prediction-powered inference's rectified estimate, Angelopoulos et al. 2023, is the same
form), unbiased over the draw whatever the agent's calibration. Its error is that of the
pool's total, with the standard variance

    V = N^2 (1 - n/N) s^2 / n = N R s^2 / n,

s^2 the residuals' sample variance. The floor: where misses are rare a sample mostly holds
none, its residuals are all -p and s^2 is near zero, which would claim the misses are known
to a fraction of an item. s^2 is taken at least p(1 - p) at the pool's mean P(YES) (no less
than the mean of p(1 - p), the residual variance a calibrated agent implies), and at least that of a 0.5% error rate
(`RATE_FLOOR`: the agent is trusted down to P(YES) 1%, not below; the draw's allocation
assumes the same); a sample that finds misses the agent did not predict has a larger s^2,
which then counts.
The interval is T +- t sqrt(V), t Student's quantile at n - 1 degrees of freedom (a sum
over strata adds the half-widths in quadrature, and is then cut to what the counts allow). A part of R (the agent's YES among them, or
its NO, after a re-scoring moved some) gets its own P(YES) plus its share of the correction,
and its share of V (a random part of R has less).

Whether the interval covers is measured, not assumed (bench/audit_coverage.py, with a
calibrated agent and one whose P(YES) is shrunk toward 0 on the NO list): the figures it
quotes are chosen by that measurement (`annotate.audit.estimate.FIGURE_ESTIMATOR`).

>>> from annotate.audit.estimate import StratumCounts
>>> h = StratumCounts("1:NO 0.99-1.00", members=100, audited=10, expert=10, agent_no=90,
...                   p_sum=0.5, p_audited=0.05, p2_audited=0.0003, p_expert=0.05,
...                   p_agent_no=0.45)
>>> [round(v, 3) for v in assisted_part(h, 90, 0.45, 0.05)]
[0.0, -4.787, 4.787]
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from scipy.stats import t as t_dist

# A stratum with fewer audited items takes its exact interval instead
# (`annotate.audit.estimate.PART_INTERVALS`)
MIN_AUDITED = 5
# The least residual variance a stratum is taken to have, p(1 - p) at P(YES) 1%: an agent's
# P(YES) of 0.0001 is no promise that its misses are that rare (on the benchmark's test
# split the rules' confident CV NO verdicts, P(YES) ~ 0.0001, held 2 CVs in 327; with the
# agent's own p(1 - p) as the floor, ECE's interval covered in 1 run in 8). The draw's
# allocation assumes the same (`annotate.audit.sample.band_spread`).
RATE_FLOOR = 0.005
RESIDUAL_FLOOR = RATE_FLOOR * (1 - RATE_FLOOR)


@dataclass(frozen=True)
class Residuals:
    """A stratum's audited residuals y - P(YES), as the difference estimator reads them."""

    pool: int  # N: the stratum's members less those decided outside the sample
    n: int  # audited
    mean: float  # mean residual over the sample
    s2: float  # the residuals' sample variance
    floor: float  # p(1 - p) at the pool's mean P(YES), at least RESIDUAL_FLOOR

    @property
    def unknown(self) -> int:
        return self.pool - self.n

    @property
    def variance(self) -> float:
        """V = N R s^2 / n of the estimate of the R unknown items' truly YES, s^2 floored."""
        return self.pool * self.unknown * max(self.s2, self.floor) / self.n


def residuals(h: Any) -> Residuals | None:
    """The stratum's residuals from its sums; None where nothing is audited.

    >>> from annotate.audit.estimate import StratumCounts
    >>> r = residuals(StratumCounts("1:YES 0.95-0.99", members=20, audited=4, audited_yes=3,
    ...               expert=4, expert_yes=3, p_sum=19.4, p_audited=3.88, p2_audited=3.7636,
    ...               p_expert=3.88, p_audited_yes=2.91))
    >>> round(r.mean, 3), round(r.s2, 3), round(r.floor, 4), round(r.variance, 2)
    (-0.22, 0.25, 0.0291, 20.0)
    """
    n = h.audited
    if n <= 0:
        return None
    x = h.audited_yes
    mean = (x - h.p_audited) / n
    # sum of e^2 = sum y - 2 sum y p + sum p^2 (y is 0 or 1)
    sq = x - 2.0 * h.p_audited_yes + h.p2_audited
    s2 = max(0.0, (sq - n * mean * mean) / (n - 1)) if n > 1 else max(0.0, sq)
    pool = h.pool
    # p(1 - p) at the pool's mean P(YES): at least the mean of p(1 - p) (p(1 - p) is
    # concave), and read from a sum the database keeps per stratum (a band is narrow)
    p_bar = min(1.0, max(0.0, (h.p_sum - (h.p_expert - h.p_audited)) / pool)) if pool else 0.0
    floor = max(RESIDUAL_FLOOR, p_bar * (1.0 - p_bar))
    return Residuals(pool, n, mean, s2, floor)


@functools.lru_cache(maxsize=4096)
def t_quantile(q: float, df: int) -> float:
    """Student's t quantile (cached: a read asks for the same few many times)."""
    return float(t_dist.ppf(q, df))


def assisted_part(h: Any, part: int, p_part: float, alpha: float):
    """(estimate, low, high) of the truly YES among `part` of the stratum's unknown members,
    whose P(YES) sum to `p_part`: their P(YES) corrected by the audit's mean residual, with
    the part's share of the stratum's variance, at level 1 - alpha (not cut to [0, part]);
    None where nothing is audited."""
    if not part:
        return 0.0, 0.0, 0.0
    r = residuals(h)
    if r is None or r.unknown <= 0:
        return None
    # Student's t at n - 1 degrees of freedom, not the normal's z: with a handful of
    # residuals their spread is itself uncertain (at n = 6 of 11 the normal interval missed
    # the M-giant YES band's count in 1 run in 10; bench/audit_coverage.py)
    z = t_quantile(1 - alpha / 2, r.n - 1)
    est = p_part + part * r.mean
    half = z * math.sqrt(part / r.unknown * r.variance)
    # not cut to [0, part] here: a sum of parts is normal only uncut (its total is cut)
    return est, est - half, est + half
