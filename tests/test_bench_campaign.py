"""The simulated campaign (`bench/campaign.py --small`): it runs end to end on real library
spectra, and what it prints holds together (the curve's first row is the plain rules, the
gain is the last adopted version's macro-F1 over theirs, the coverage count is the rows')."""

from __future__ import annotations

import re

import pytest

from training import benchmark

pytestmark = [
    pytest.mark.slow,
    pytest.mark.realdata,
    pytest.mark.skipif(
        not (benchmark.DEFAULT_SPECTRA / "manifest.csv").exists(),
        reason="../shared/spectra is not available",
    ),
]


def test_small_campaign_prints_a_consistent_report(capsys, tmp_path):
    from bench import campaign

    assert campaign.main(["--small", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    m = re.match(r"campaign: (\d+) expert decisions \((\d+) of them audit items\), (\d+) fits",
                 next(x for x in lines if x.startswith("campaign: ")))  # fmt: skip
    made, audited, fits = map(int, m.groups())
    assert made > 0 and 0 < audited <= made and fits >= 1  # the schedule ran, on the audit too

    head = lines.index(next(x for x in lines if x.startswith("learning curve")))
    curve = []
    for x in lines[head + 2 :]:
        if not x.startswith("  "):
            break
        tag, n, f1, *per = x.split()
        curve.append((tag, int(n), float(f1), [float(v) for v in per]))
    assert curve[0][:2] == ("rules", 0) and len(curve) == 1 + int(
        re.search(r"(\d+) adopted", out).group(1)
    )
    for _tag, _n, f1, per in curve:
        assert len(per) == len(campaign.TASKS) and f1 == pytest.approx(
            sum(per) / len(per), abs=2e-3
        )
    assert [c[1] for c in curve] == sorted(c[1] for c in curve)  # more labels each version

    head = lines.index(next(x for x in lines if x.startswith("precision of the YES list")))
    rows = [x.split() for x in lines[head + 2 : head + 2 + len(campaign.TASKS)]]
    assert [r[0] for r in rows] == list(campaign.TASKS)
    covered = [r[-1] for r in rows]
    assert set(covered) <= {"yes", "NO", "n/a"}
    n_yes, n_judged = map(
        int, re.search(r"covering the true precision: (\d+) of (\d+)", out).groups()
    )
    assert n_yes == covered.count("yes") and n_judged == n_yes + covered.count("NO")
    for r in rows:
        if r[-1] != "n/a":  # estimate [low, high] and the truth, all shares
            low, high = float(r[5].strip("[,")), float(r[6].strip("]"))
            assert 0 <= low <= float(r[4]) <= high <= 1 and 0 <= float(r[-2]) <= 1

    assert lines[-1].startswith("campaign_gain: ")
    assert float(lines[-1].split(": ")[1]) == pytest.approx(curve[-1][2] - curve[0][2], abs=2e-3)
