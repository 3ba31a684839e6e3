"""In Chromium, the desk's lost-work cases: each failed on the code where a request acted on
the server's idea of the current candidate and the desk kept work in several places.

A held key decides once; a comment and a correction's note are both kept; a correction
keeps its label and step on revisit and undo; two tabs of one expert never share a
candidate or each other's typed text; the Reject button opens the reason box; focus leaves
the correction after Ctrl+Enter."""

from __future__ import annotations

import time

import pytest

from tests.app_support import ANSWER_MS, context
from tests.test_browser import DRAWN, _current_key, _desk, _reviews_of

pytestmark = [pytest.mark.browser, pytest.mark.slow]

IDLE = "() => !!window.loupeIdle && window.loupeIdle()"
TASK = "#vet-header .loupe-head .task b"
COMMENT = "#vet-comment textarea, #vet-comment input"


def _idle(page, ms: int = 150) -> None:
    page.wait_for_function(IDLE, timeout=ANSWER_MS, polling=50)
    page.wait_for_timeout(ms)
    page.wait_for_function(IDLE, timeout=ANSWER_MS, polling=50)


def _shown(page) -> tuple[str, str]:
    return _current_key(page), page.inner_text(TASK).strip()


def _review(ctx, key: str, task: str, timeout: float = 20.0):
    """The review of candidate (key, task) once stored (decisions are saved while the next
    candidate is drawn)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        c = ctx.store.find_candidate(key, task)
        rs = ctx.store.reviews(candidate_id=c.id)
        if rs:
            return rs[0]
        time.sleep(0.1)
    return None


def test_a_held_key_decides_once_and_later_marks_land_on_the_shown_candidate(
    tab, tmp_path_factory, tmp_path
):
    """Holding `a` (key auto-repeat) accepts the candidate it was pressed on and no other;
    the page then ends idle with nothing "saving", and a grade, Shift+S and a comment set
    next land on the candidate the header shows."""
    with _desk(tab, tmp_path_factory, tmp_path) as (ctx, srv, page):
        first = _shown(page)
        page.keyboard.down("a")
        for _ in range(6):  # what a held key sends: keydown with repeat, ~33 ms apart
            page.wait_for_timeout(33)
            page.keyboard.down("a")
        page.keyboard.up("a")
        _idle(page, 600)
        assert len(ctx.store.reviews()) == 1
        assert _review(ctx, *first).action == "accept"
        assert page.evaluate("() => window.loupeSending()") == 0
        assert "saving" not in (page.inner_text("#vet-dock") or "")
        now = _shown(page)
        assert now != first
        page.keyboard.press("3")
        _idle(page)
        page.keyboard.press("Shift+S")
        _idle(page)
        page.fill(COMMENT, "seen in the blue")
        page.keyboard.press("Enter")
        _idle(page)
        c = ctx.store.find_candidate(*now)
        from annotate import drafts

        assert drafts.get(ctx.store, "local", c.id) == {
            "grade": 3, "issues": "S", "comment": "seen in the blue"}  # fmt: skip
        for key, task in {first}:
            other = ctx.store.find_candidate(key, task)
            assert drafts.get(ctx.store, "local", other.id) == {}


def test_a_comment_and_a_correction_note_are_both_kept(tab, tmp_path_factory, tmp_path):
    """Type a comment, press c, type the reasoning, choose NO and a wrong step, type a
    note, Ctrl+Enter: the review holds the comment and the note, each in its own field;
    the focus has left the reasoning box at once, so a `k` pressed next is a key."""
    with _desk(tab, tmp_path_factory, tmp_path) as (ctx, srv, page):
        key, task = _shown(page)
        page.fill(COMMENT, "a blue excess below 4000")
        page.locator(COMMENT).blur()
        page.keyboard.press("c")
        page.wait_for_selector("#correct-panel", state="visible", timeout=ANSWER_MS)
        page.keyboard.type("I see no C2 Swan bands at 5165")
        page.click("#correct-label label:has-text('NO')")
        _idle(page)
        page.click("#correct-step input")
        page.click("ul[role=listbox] li:has-text('2')")
        _idle(page)
        page.fill("#correct-note textarea, #correct-note input", "ask about the sky line")
        page.focus("#correct-explanation textarea")
        page.keyboard.press("Control+Enter")
        assert not page.evaluate("() => !!document.activeElement.closest('#correct-panel')")
        page.wait_for_function(DRAWN, arg=key + "|" + task, timeout=ANSWER_MS)
        r = _review(ctx, key, task)
        assert (r.action, r.label, r.wrong_step) == ("correct", "NO", 1)
        assert r.explanation == "I see no C2 Swan bands at 5165"
        assert (r.comment, r.note) == ("a blue excess below 4000", "ask about the sky line")


def test_a_correction_keeps_its_label_and_step_on_revisit_and_undo(tab, tmp_path_factory, tmp_path):
    """Back on a saved correction with `k` the panel shows its label and wrong step; saving
    an edited reasoning keeps them. `u` then brings the form back as it was, label and step
    included, and saving it stores exactly that."""
    with _desk(tab, tmp_path_factory, tmp_path) as (ctx, srv, page):
        key, task = _shown(page)
        page.keyboard.press("c")
        page.wait_for_selector("#correct-panel", state="visible", timeout=ANSWER_MS)
        page.keyboard.type("first reasoning")
        page.click("#correct-label label:has-text('NO')")
        _idle(page)
        page.click("#correct-step input")
        page.click("ul[role=listbox] li:has-text('3')")
        _idle(page)
        page.focus("#correct-explanation textarea")
        page.keyboard.press("Control+Enter")
        page.wait_for_function(DRAWN, arg=key + "|" + task, timeout=ANSWER_MS)
        assert _review(ctx, key, task).wrong_step == 2
        _idle(page)
        page.keyboard.press("k")
        _idle(page)
        assert _shown(page) == (key, task)
        page.keyboard.press("c")
        page.wait_for_selector("#correct-panel", state="visible", timeout=ANSWER_MS)
        assert page.input_value("#correct-step input") == "3"
        assert page.is_checked("#correct-label input[value='NO']")
        page.fill("#correct-explanation textarea", "second reasoning")
        page.keyboard.press("Control+Enter")
        _idle(page, 600)
        r = _review(ctx, key, task)
        deadline = time.time() + 20
        while time.time() < deadline and r.explanation != "second reasoning":
            time.sleep(0.1)
            r = _review(ctx, key, task)
        assert (r.label, r.wrong_step, r.explanation) == ("NO", 2, "second reasoning")
        page.keyboard.press("u")
        _idle(page, 600)
        assert _shown(page) == (key, task)
        assert page.input_value("#correct-step input") == "3"
        assert page.is_checked("#correct-label input[value='NO']")
        page.keyboard.press("c")
        page.wait_for_selector("#correct-panel", state="visible", timeout=ANSWER_MS)
        assert page.input_value("#correct-explanation textarea") == "second reasoning"
        page.focus("#correct-explanation textarea")
        page.keyboard.press("Control+Enter")
        _idle(page, 600)
        deadline = time.time() + 20
        while time.time() < deadline and _review(ctx, key, task).action != "correct":
            time.sleep(0.1)
        r = _review(ctx, key, task)
        assert (r.action, r.label, r.wrong_step, r.explanation) == (
            "correct", "NO", 2, "second reasoning")  # fmt: skip


def test_two_tabs_of_one_expert_hold_their_own_candidates(browser, tmp_path_factory, tmp_path):
    """Two tabs of one expert (one browser, shared storage): never the same candidate; a
    comment typed (not saved) in tab A is not saved by tab B's accept; each tab's decision
    lands on its own candidate."""
    ctx = context(tmp_path_factory, tmp_path)
    from app.main import serve

    srv = serve(ctx)
    bctx = browser.new_context(viewport={"width": 1366, "height": 768})
    try:
        a, b = bctx.new_page(), bctx.new_page()
        for p in (a, b):
            p.goto(srv.url, wait_until="load", timeout=120_000)
            p.wait_for_function("() => !!window.loupeHeadKey && !!window.loupeHeadKey() && "
                                "window.loupeIdle()", timeout=120_000)  # fmt: skip
        shown_a, shown_b = _shown(a), _shown(b)
        assert shown_a != shown_b
        assert a.evaluate("() => window.loupeTab()") != b.evaluate("() => window.loupeTab()")
        a.fill(COMMENT, "typed in A, not saved")
        a.locator(COMMENT).blur()
        b.keyboard.press("a")
        _idle(b, 600)
        rb = _review(ctx, *shown_b)
        assert rb.action == "accept" and rb.comment is None
        assert ctx.store.reviews(candidate_id=ctx.store.find_candidate(*shown_a).id) == []
        a.keyboard.press("s")
        _idle(a, 600)
        ra = _review(ctx, *shown_a)
        assert (ra.action, ra.comment) == ("skip", "typed in A, not saved")
        # a reload keeps the tab's id, so it gets back what it holds
        tab_a = a.evaluate("() => window.loupeTab()")
        now_a = _shown(a)
        a.reload(wait_until="load")
        a.wait_for_function("() => !!window.loupeHeadKey && !!window.loupeHeadKey()",
                            timeout=120_000)  # fmt: skip
        assert a.evaluate("() => window.loupeTab()") == tab_a
        assert _shown(a) == now_a
    finally:
        bctx.close()
        srv.close()
        ctx.store.close()


def test_the_reject_button_opens_the_reason_box(tab, tmp_path_factory, tmp_path):
    """A click on Reject is `r`: the reason box opens and nothing is saved until Enter or
    its Save button; the reject then carries the reason."""
    with _desk(tab, tmp_path_factory, tmp_path) as (ctx, srv, page):
        key, task = _shown(page)
        page.click("#btn-reject")
        page.wait_for_selector("#reject-reason", state="visible", timeout=ANSWER_MS)
        page.wait_for_timeout(500)
        assert ctx.store.reviews() == []
        page.keyboard.type("TiO bands, an M giant")
        page.click("#btn-save-reject")
        page.wait_for_function(DRAWN, arg=key + "|" + task, timeout=ANSWER_MS)
        r = _review(ctx, key, task)
        assert (r.action, r.explanation) == ("reject", "TiO bands, an M giant")
        assert _reviews_of(ctx, key)[0].id == r.id


def test_marks_typed_in_a_row_on_a_decided_candidate_are_each_saved(
    tab, tmp_path_factory, tmp_path
):
    """Back on an accepted candidate: a spectral type typed with Enter, then `2` and
    Shift+R at once, each pressed before the last answer came (answers held back): every
    mark amends the decision once, none is refused as "changed since this tab showed it"
    (the grade once left with the revision from before the type's answer), and the page
    ends idle."""
    from tests.test_browser import HOLD

    with _desk(tab, tmp_path_factory, tmp_path) as (ctx, srv, page):
        first = _shown(page)
        page.keyboard.press("a")
        _idle(page)
        page.keyboard.press("k")
        page.wait_for_function(f"() => document.querySelector('{TASK}').textContent === "
                               f"'{first[1]}'", timeout=ANSWER_MS)  # fmt: skip
        _idle(page)
        assert _shown(page) == first
        page.evaluate(HOLD)
        box = "#vet-spectype input, #vet-spectype textarea"
        page.fill(box, "M5 III")
        page.focus(box)
        page.keyboard.press("Enter")  # leaves the box: the next keys are keys
        page.keyboard.press("2")
        page.keyboard.press("Shift+R")
        page.wait_for_timeout(300)
        page.evaluate("window.__release()")
        _idle(page, 400)
        msg = page.inner_text("#vet-message")
        assert "Not saved" not in msg, msg
        r = _review(ctx, *first)
        assert (r.action, r.spectype, r.grade, r.issues) == ("accept", "M5 III", 2, "R")
        # one revision per mark: the decision, the type, the grade, the flag
        assert r.revision == 4
