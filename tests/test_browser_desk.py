"""In Chromium: nothing an expert does on the desk is lost or distorted (unsaved text is
never replaced by a shortcut's decision, Esc cancels, an out-of-range redshift is refused
aloud, the Dashboard and Experts tabs show what was just decided)."""

from __future__ import annotations

import re
import time

import pytest

from tests.app_support import ANSWER_MS, context
from tests.test_browser import DRAWN, HOLD, _current_key, _desk, _drawn_after, _reviews_of

OPEN_S = 120  # seconds to open the page (tests.test_browser.OPEN_MS)


pytestmark = [pytest.mark.browser, pytest.mark.slow]

MESSAGE = "#vet-message"


def _stored(ctx, key: str, n: int = 1, timeout: float = 20.0) -> list:
    """The candidate's reviews once `n` are stored: a decision draws the next candidate at
    the key press and is saved in the background."""
    deadline = time.time() + timeout
    while time.time() < deadline and len(_reviews_of(ctx, key)) < n:
        time.sleep(0.1)
    return _reviews_of(ctx, key)


def _settle(page, ms: int = 700) -> None:
    """Long enough for a request a key might have sent to reach the store."""
    page.wait_for_timeout(ms)


BLOCKED = "#loupe-blocked"
CORRECTION = "#correct-explanation textarea"
REASON = "#reject-reason input, #reject-reason textarea"


def test_unsaved_correction_is_never_replaced_by_a_shortcut(tab, tmp_path_factory, tmp_path):
    """c, reasoning typed, Shift+Tab to the wrong step, ArrowDown, Enter: the focus may drop
    to the page body, and then s must not record a skip (nor a, f decide): the reasoning
    stays, and the line by the buttons says why. It is the candidate's draft: j leaves it
    there (the next candidate's panel is empty), k and a reload bring it back, Esc keeps
    it; emptied, s skips."""
    with _desk(tab, tmp_path_factory, tmp_path) as (ctx, srv, page):
        key = _current_key(page)
        page.keyboard.press("c")
        page.wait_for_selector("#correct-panel", state="visible", timeout=ANSWER_MS)
        page.keyboard.type("I see C2 Swan bands at 5165")
        page.keyboard.press("Shift+Tab")
        page.keyboard.press("ArrowDown")
        page.keyboard.press("Enter")
        page.evaluate("() => document.activeElement && document.activeElement.blur()")
        assert page.evaluate("() => document.activeElement === document.body")
        for k in ["s", "a", "f"]:
            page.evaluate("() => document.activeElement && document.activeElement.blur()")
            page.keyboard.press(k)
            assert page.evaluate("() => document.activeElement === document.body")
        _settle(page)
        assert _reviews_of(ctx, key) == [] and _current_key(page) == key
        assert page.is_visible("#correct-panel")
        assert page.locator(CORRECTION).input_value() == "I see C2 Swan bands at 5165"
        assert "a correction is typed" in page.inner_text(BLOCKED)
        # j: another candidate, its own (empty) texts; k brings the reasoning back
        nxt, _ = _drawn_after(page, "j")
        assert nxt != key and page.is_hidden("#correct-panel")
        assert page.locator(CORRECTION).input_value() == ""
        _drawn_after(page, "k")
        page.wait_for_selector("#correct-panel", state="visible", timeout=ANSWER_MS)
        assert page.locator(CORRECTION).input_value() == "I see C2 Swan bands at 5165"
        # a reload loses nothing
        page.reload(wait_until="load")
        page.wait_for_function(DRAWN, arg="", timeout=OPEN_S * 1000)
        assert _current_key(page) == key
        page.wait_for_selector("#correct-panel", state="visible", timeout=ANSWER_MS)
        assert page.locator(CORRECTION).input_value() == "I see C2 Swan bands at 5165"
        # Esc leaves the panel and keeps the text: s is still refused
        page.click(CORRECTION)
        page.keyboard.press("Escape")
        page.wait_for_selector("#correct-panel", state="hidden", timeout=ANSWER_MS)
        page.keyboard.press("s")
        _settle(page)
        assert _reviews_of(ctx, key) == []
        # emptied, the candidate may be skipped
        page.keyboard.press("c")
        page.fill(CORRECTION, "")
        page.keyboard.press("Escape")
        _drawn_after(page, "s")
        (r,) = _stored(ctx, key)
        assert r.action == "skip" and r.explanation is None


def test_unsaved_reason_is_never_replaced_by_a_shortcut(tab, tmp_path_factory, tmp_path):
    """A reason typed: s, a, f are refused and say so by the buttons, leaving the focus
    where it was (a blocked a once put the cursor in the reason box, and the next j typed
    "j" there); j moves on, k brings the reason back; Enter saves the reject with it, and the
    refusal's words go with it."""
    with _desk(tab, tmp_path_factory, tmp_path) as (ctx, srv, page):
        key = _current_key(page)
        page.keyboard.press("r")
        page.wait_for_selector("#reject-reason", state="visible", timeout=ANSWER_MS)
        page.keyboard.type("TiO bands")
        for k in ["s", "a", "f"]:
            page.evaluate("() => document.activeElement.blur()")
            page.keyboard.press(k)
            assert page.evaluate("() => !document.activeElement.closest('#reject-reason')")
        _settle(page)
        assert _reviews_of(ctx, key) == [] and _current_key(page) == key
        assert "a reject reason is typed" in page.inner_text(BLOCKED)
        _drawn_after(page, "j")
        assert page.locator(REASON).input_value() == ""  # not carried along
        _drawn_after(page, "k")
        page.wait_for_selector("#reject-reason", state="visible", timeout=ANSWER_MS)
        assert page.locator(REASON).input_value() == "TiO bands"
        page.click(REASON)
        page.keyboard.press("Enter")
        page.wait_for_function(DRAWN, arg=key, timeout=ANSWER_MS)
        (r,) = _stored(ctx, key)
        assert (r.action, r.explanation) == ("reject", "TiO bands")
        assert page.inner_text(BLOCKED).strip() == ""


def test_esc_keeps_the_text(tab, tmp_path_factory, tmp_path):
    """Esc after r (with or without a reason typed) and after c decides nothing and
    discards nothing: r opens the reason as it was left."""
    with _desk(tab, tmp_path_factory, tmp_path) as (ctx, srv, page):
        key = _current_key(page)
        page.keyboard.press("r")
        page.wait_for_selector("#reject-reason", state="visible", timeout=ANSWER_MS)
        page.keyboard.press("Escape")
        page.wait_for_selector("#reject-reason", state="hidden", timeout=ANSWER_MS)
        page.keyboard.press("r")
        page.wait_for_selector("#reject-reason", state="visible", timeout=ANSWER_MS)
        page.keyboard.type("half a reason")
        page.keyboard.press("Escape")
        page.wait_for_selector("#reject-reason", state="hidden", timeout=ANSWER_MS)
        page.keyboard.press("c")
        page.wait_for_selector("#correct-panel", state="visible", timeout=ANSWER_MS)
        page.keyboard.press("Escape")
        page.wait_for_selector("#correct-panel", state="hidden", timeout=ANSWER_MS)
        _settle(page, 1500)
        assert _reviews_of(ctx, key) == [] and _current_key(page) == key
        page.keyboard.press("r")
        page.wait_for_selector("#reject-reason", state="visible", timeout=ANSWER_MS)
        assert page.locator(REASON).input_value() == "half a reason"
        page.keyboard.press("Enter")
        page.wait_for_function(DRAWN, arg=key, timeout=ANSWER_MS)
        (r,) = _stored(ctx, key)
        assert (r.action, r.explanation) == ("reject", "half a reason")


@pytest.mark.parametrize("typed", ["-5", "12"])
def test_an_out_of_range_redshift_is_refused_aloud(tab, tmp_path_factory, tmp_path, typed):
    """The box does not keep a value that was not recorded: it says why and shows the z in
    force; the decision then carries no redshift of the expert's."""
    with _desk(tab, tmp_path_factory, tmp_path) as (ctx, srv, page):
        key = _current_key(page)
        box = "#desk-z input[type=number]"
        before = page.locator(box).input_value()
        page.keyboard.press("z")
        page.keyboard.type(typed)
        page.keyboard.press("Enter")
        page.wait_for_function(
            "() => (document.querySelector('#vet-message')?.innerText ?? '').includes('Redshift not "
            "changed')", timeout=ANSWER_MS)  # fmt: skip
        msg = page.inner_text(MESSAGE)
        assert typed in msg and "not a number from" in msg
        page.wait_for_function(
            "([s, v]) => parseFloat(document.querySelector(s).value) === parseFloat(v)",
            arg=[box, before], timeout=30_000)  # fmt: skip
        _drawn_after(page, "a")
        (r,) = _stored(ctx, key)
        assert r.redshift_source != "expert"


def test_dashboard_and_experts_refresh_when_opened(tab, tmp_path_factory, tmp_path):
    with _desk(tab, tmp_path_factory, tmp_path) as (ctx, srv, page):
        page.click("button[role='tab']:has-text('Dashboard')")
        page.wait_for_function(
            "() => /\\b0\\*?\\*? reviewed/.test(document.querySelector('#dash-summary')"
            ".innerText)", timeout=ANSWER_MS)  # fmt: skip
        page.click("button[role='tab']:has-text('Vet')")
        page.wait_for_selector("#btn-accept", state="visible")
        for k in ["a", "a"]:
            _drawn_after(page, k)
        deadline = time.time() + 10
        while time.time() < deadline and len(ctx.store.reviews()) < 2:
            time.sleep(0.1)
        page.click("button[role='tab']:has-text('Dashboard')")
        page.wait_for_function(
            "() => /\\b2\\*?\\*? reviewed/.test(document.querySelector('#dash-summary')"
            ".innerText)", timeout=ANSWER_MS)  # fmt: skip
        page.click("button[role='tab']:has-text('Experts')")
        page.wait_for_function(
            "() => /local\\s+admin\\s+yes\\s+2\\b/.test("
            "(document.querySelector('#experts-list') || {}).innerText || '')",
            timeout=ANSWER_MS,
        )  # fmt: skip (shown to the admin once the tab is opened)
        # the team's settings, changed by the admin here, reach the store (a bad one says why)
        page.wait_for_selector("#team-settings-table", state="visible", timeout=ANSWER_MS)

        def set_audit_rate(text: str, says: str) -> None:
            page.fill("#team-setting-value textarea, #team-setting-value input", text)
            page.click("#btn-team-setting")
            page.wait_for_function(
                f"() => /{says}/.test(document.querySelector('#team-setting-message')"
                ".innerText)", timeout=ANSWER_MS)  # fmt: skip

        set_audit_rate("0.2", "audit_rate.* is now 0.2")
        assert ctx.store.setting("audit_rate") == 0.2
        set_audit_rate("7", "Refused: audit_rate = '7' refused")
        assert ctx.store.setting("audit_rate") == 0.2


def test_undo_brings_back_the_decision_before(tab, tmp_path_factory, tmp_path):
    """3, a, k, then r with a reason, then u: the accept (grade 3) is back, the header says
    so, and the VI CSV holds the accept, no undo row."""
    import csv

    from annotate.export import vi

    with _desk(tab, tmp_path_factory, tmp_path) as (ctx, srv, page):
        key = _current_key(page)
        page.keyboard.press("3")
        page.wait_for_function("() => (document.querySelector('#vet-message')?.innerText ?? '')"
                               ".includes('Grade 3 kept')", timeout=30_000)  # fmt: skip
        _drawn_after(page, "a")
        _drawn_after(page, "k")
        assert _current_key(page) == key
        page.keyboard.press("r")
        page.wait_for_selector("#reject-reason", state="visible", timeout=ANSWER_MS)
        page.keyboard.type("on second thoughts, no")
        page.keyboard.press("Enter")
        page.wait_for_function(DRAWN, arg=key, timeout=ANSWER_MS)
        deadline = time.time() + 20
        while time.time() < deadline and _reviews_of(ctx, key)[0].action != "reject":
            time.sleep(0.1)
        assert _drawn_after(page, "u")[0] == key
        (r,) = _reviews_of(ctx, key)
        assert (r.action, r.grade) == ("accept", 3)
        assert re.search(r"your review: accept", page.inner_text("#vet-header"))
        out = tmp_path / "vi.csv"
        vi.write_vi(ctx.store, out)
        rows = list(csv.DictReader(out.open(encoding="utf-8")))
        assert [x["action"] for x in rows if x["id"] == key] == ["accept"]


def test_a_non_admin_sees_no_admin_controls(tab, tmp_path_factory, tmp_path):
    """Export and account controls refuse a non-admin: they are not shown to one (an admin
    sees them); the VI CSV download (of one's own decisions) is shown to both."""
    from annotate.team.experts import create_expert

    ctx = context(tmp_path_factory, tmp_path, login=True)
    create_expert(ctx.store, "bea", "expert", "pw-bea-12345")
    create_expert(ctx.store, "ada", "admin", "pw-ada-12345")
    try:
        with tab.serve(ctx) as (srv, page):
            for name, admin in (("bea", False), ("ada", True)):
                tab.context.clear_cookies()  # a new login: nothing of the last one's session
                page.goto(srv.url, wait_until="load", timeout=OPEN_S * 1000)
                page.fill("input[name=username]", name)
                page.fill("input[name=password]", f"pw-{name}-12345")
                page.click("button[type=submit]")
                page.wait_for_function(DRAWN, arg="", timeout=OPEN_S * 1000)
                assert name in page.inner_text("#whoami")
                page.click("button[role='tab']:has-text('Export')")
                page.wait_for_selector("#export-note", state="visible", timeout=ANSWER_MS)
                page.wait_for_timeout(500)
                assert page.is_visible("#btn-export") is admin
                assert page.is_visible("#btn-export-vi")  # everyone's own decisions
                page.click("button[role='tab']:has-text('Experts')")
                page.wait_for_selector("#experts-note", state="visible", timeout=ANSWER_MS)
                page.wait_for_timeout(500)
                assert page.is_visible("#experts-add") is admin
                assert page.is_visible("#experts-list") is admin
    finally:
        ctx.store.close()


def test_a_refused_decision_brings_its_candidate_back(tab, tmp_path_factory, tmp_path):
    """`a` draws the next candidate at once and saves in the background; when the store
    refuses (here the expert was deactivated meanwhile), the candidate comes back with the
    reason, and once allowed again `a` stores it exactly once."""
    from annotate.team.experts import create_expert, update_expert

    with _desk(tab, tmp_path_factory, tmp_path) as (ctx, srv, page):
        create_expert(ctx.store, "ada", "admin", "pw-ada-12345")  # the last admin stays active
        key = _current_key(page)
        ready = ("k => ((document.querySelector('#vet-ahead textarea, #vet-ahead input') || {})"
                 ".value || '').includes('\"for\":\"' + k + '\"')")  # fmt: skip
        page.wait_for_function(ready, arg=key, timeout=OPEN_S * 1000)
        update_expert(ctx.store, "local", active=False)
        page.evaluate(HOLD)
        page.keyboard.press("a")
        # before any answer
        page.wait_for_function(DRAWN, arg=key, timeout=ANSWER_MS, polling="raf")
        page.evaluate("window.__release()")
        page.wait_for_function(
            "k => (document.querySelector('#vet-header .loupe-head .id')?.textContent ?? '').trim() "
            "=== k && (document.querySelector('#vet-message')?.innerText ?? '').includes('Not saved')",
            arg=key, timeout=30_000)  # fmt: skip
        assert "deactivated" in page.inner_text(MESSAGE)
        assert _reviews_of(ctx, key) == []
        page.wait_for_function("() => !(document.getElementById('loupe-pending') || {})"
                               ".textContent", timeout=30_000)  # fmt: skip
        update_expert(ctx.store, "local", active=True)
        _drawn_after(page, "a")
        (r,) = _stored(ctx, key)
        _settle(page, 1500)
        assert [x.revision for x in _reviews_of(ctx, key)] == [1] and r.action == "accept"


def test_zero_resets_the_zoom(tab, tmp_path_factory, tmp_path):
    """Zoomed in (as a drag would), `0` brings the whole-spectrum panel back to the range it
    was drawn with."""
    with _desk(tab, tmp_path_factory, tmp_path) as (ctx, srv, page):
        rng = "() => document.querySelector('#vet-global .js-plotly-plot')._fullLayout.xaxis.range"
        drawn = page.evaluate(rng)
        page.evaluate("() => window.loupePlotly.relayout(document.querySelector("
                      "'#vet-global .js-plotly-plot'), {'xaxis.range': [6500, 6600]})")  # fmt: skip
        page.wait_for_function(f"() => ({rng})()[0] === 6500", timeout=30_000)
        page.keyboard.press("0")
        page.wait_for_function(f"d => Math.abs(({rng})()[0] - d[0]) < 1e-6", arg=drawn,
                               timeout=30_000)  # fmt: skip
        assert page.evaluate(rng) == pytest.approx(drawn)


# The whole-spectrum panel is normalised and its template trace runs about 1.
NORMALISED_TEMPLATE = """() => {
  const gd = document.querySelector('#vet-global .js-plotly-plot');
  const tr = gd && (gd.data || []).find(t => (t.name || '').startsWith('template:'));
  if (!tr || !/continuum/.test(gd.layout.yaxis.title.text || '')) return false;
  let y = tr.y;
  if (y && y.bdata) {
    const b = atob(y.bdata), u = new Uint8Array(b.length);
    for (let i = 0; i < b.length; i++) u[i] = b.charCodeAt(i);
    y = new Float32Array(u.buffer);
  }
  const v = Array.from(y).filter(Number.isFinite).sort((a, b) => a - b);
  return v.length > 10 && Math.abs(v[v.length >> 1] - 1) < 0.2;
}"""


def _says(page, text: str, timeout: float = 30.0) -> None:
    """Wait until the status message holds `text` (a failure shows what it says instead)."""
    deadline = time.time() + timeout
    while time.time() < deadline and text not in page.inner_text(MESSAGE):
        page.wait_for_timeout(100)
    assert text in page.inner_text(MESSAGE), page.inner_text(MESSAGE)


def test_issue_flags_and_spectral_type_are_kept_with_the_decision(tab, tmp_path_factory, tmp_path):
    """Shift+R and Shift+S set Prospect's issue flags (and decide nothing: no reject, no
    skip), `t` makes the template the spectral type, `a` stores them with the accept; back on
    it with `k` they are shown, Shift+C adds C to the decision and a typed type replaces the
    template's."""
    checked = (
        "() => [...document.querySelectorAll('#vet-issues label')].filter(l => "
        "l.querySelector('input').checked).map(l => l.textContent.trim()[0])"
    )
    spectype = "#vet-spectype textarea, #vet-spectype input"
    with _desk(tab, tmp_path_factory, tmp_path) as (ctx, srv, page):
        key = _current_key(page)
        page.keyboard.press("Shift+R")
        page.keyboard.press("Shift+S")
        _says(page, "Issue flags RS")
        assert sorted(page.evaluate(checked)) == ["R", "S"]
        assert page.is_hidden("#reject-reason-row input, #reject-reason-row textarea")
        page.keyboard.press("t")
        page.wait_for_function(f"() => document.querySelector('{spectype}').value !== ''",
                               timeout=30_000)  # fmt: skip
        template = page.input_value(spectype)
        assert template == page.input_value("#desk-template input")
        # n: the template is normalised with the spectrum, level about 1
        page.keyboard.press("n")
        page.wait_for_function(NORMALISED_TEMPLATE, timeout=ANSWER_MS)
        # the header's SNR is the one the agent's thoughts quote
        snr = float(re.search(r"SNR ([0-9.]+)", page.inner_text("#vet-header")).group(1))
        said = re.search(r"at SNR ~([0-9]+)", page.inner_text("#vet-thoughts"))
        assert said is None or abs(int(said.group(1)) - snr) <= 0.55, (said, snr)
        assert _current_key(page) == key and _reviews_of(ctx, key) == []  # nothing decided
        _drawn_after(page, "a")
        (r,) = _stored(ctx, key)
        assert (r.action, r.issues, r.spectype) == ("accept", "RS", template)
        _settle(page)
        assert page.evaluate(checked) == [] and page.input_value(spectype) == ""  # the next one
        _drawn_after(page, "k")
        page.wait_for_function(f"() => ({checked})().length === 2", timeout=30_000)
        assert page.input_value(spectype) == template
        page.keyboard.press("Shift+C")
        _says(page, "Issue flags RCS saved on")
        page.fill(spectype, "QSO")
        page.press(spectype, "Enter")
        _says(page, "Spectral type QSO saved on")
        (r,) = _reviews_of(ctx, key)
        assert (r.action, r.issues, r.spectype, r.revision) == ("accept", "RCS", "QSO", 3)


COMMENT = "#vet-comment textarea, #vet-comment input"


def test_a_typed_comment_goes_with_its_own_candidate(tab, tmp_path_factory, tmp_path):
    """A comment typed without "Add comment" is saved with `a` on its candidate (it once
    stayed in the box and went with the next candidate's decision); the next candidate's box
    is empty; a comment typed on that one survives a reload and goes with its skip."""
    with _desk(tab, tmp_path_factory, tmp_path) as (ctx, srv, page):
        key = _current_key(page)
        page.click(COMMENT)
        page.keyboard.type("odd continuum near 7100")
        page.evaluate("() => document.activeElement.blur()")
        nxt, _ = _drawn_after(page, "a")
        (r,) = _stored(ctx, key)
        assert (r.action, r.comment) == ("accept", "odd continuum near 7100")
        assert page.locator(COMMENT).input_value() == ""
        page.click(COMMENT)
        page.keyboard.type("sky residual at 5577")
        page.reload(wait_until="load")
        page.wait_for_function(DRAWN, arg="", timeout=OPEN_S * 1000)
        for _ in range(6):  # the queue serves the items this expert holds first
            if _current_key(page) == nxt:
                break
            _drawn_after(page, "j")
        assert _current_key(page) == nxt
        page.wait_for_function(
            f"() => document.querySelector('{COMMENT}').value === 'sky residual at 5577'",
            timeout=ANSWER_MS)  # fmt: skip
        _drawn_after(page, "s")
        (r2,) = _stored(ctx, nxt)
        assert (r2.action, r2.comment) == ("skip", "sky residual at 5577")
        (r,) = _reviews_of(ctx, key)
        assert r.comment == "odd continuum near 7100"  # untouched by the next decision
