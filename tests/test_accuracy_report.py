"""The accuracy report is regenerated whole, except the sections other tools write after it."""

from __future__ import annotations

from training.benchmark.report import KEPT_FROM, with_kept_tail


def test_regenerating_keeps_the_learning_curve_section_to_the_end(tmp_path):
    doc = tmp_path / "accuracy.md"
    tail = f"{KEPT_FROM}\n## Learning from experts\n\n| labels | F1 |\n|---|---|\n| 0 | 0.9 |\n"
    doc.write_text("# old figures\n\nmacro-F1 0.80\n\n" + tail)
    new = with_kept_tail("# new figures\n\nmacro-F1 0.91\n", doc)
    assert new.startswith("# new figures")
    assert "0.80" not in new
    assert new.endswith(tail)
    # A second regeneration keeps the section once, not twice.
    doc.write_text(new)
    again = with_kept_tail("# newer figures\n", doc)
    assert again.count(KEPT_FROM) == 1 and again.endswith(tail)


def test_a_report_without_the_marker_or_not_yet_written_is_the_new_text_alone(tmp_path):
    doc = tmp_path / "accuracy.md"
    assert with_kept_tail("# figures\n", doc) == "# figures\n"
    doc.write_text("# old\n\nno marker here\n")
    assert with_kept_tail("# figures\n", doc) == "# figures\n"
