"""quick --errors: the wrong answers given with P(YES) < 0.05 or > 0.95, with their evidence."""

from __future__ import annotations


def test_quick_lists_only_the_confident_errors_with_their_evidence():
    from training.benchmark.quick import confident_error_lines

    def row(obj, label, p):
        return {
            "task": "wd",
            "label": label,
            "class": "wd" if label == "YES" else "a_star",
            "object": obj,
            "layout": "sdss",
            "snr": "8",
            "p_yes": p,
            "notes": [f"note of {obj}"],
        }

    rows = [
        row("a", "YES", 0.01),  # confident miss
        row("b", "NO", 0.99),  # confident false positive
        row("c", "YES", 0.30),  # a miss handed to experts
        row("d", "NO", 0.01),  # right
        row("e", "YES", 0.97),  # right
    ]
    got = confident_error_lines(rows)
    assert len(got) == 2
    assert any(" a " in g and "p=0.010" in g and "note of a" in g for g in got)
    assert any(" b " in g and "p=0.990" in g for g in got)
