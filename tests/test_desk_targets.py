"""Every write from the desk names the candidate, task and revision it acts on, and a tab is
a holder: the handler-level cases behind the desk's lost work (each failed on the code where
the server acted on the candidate it last showed the session)."""

from __future__ import annotations

import json

from annotate import drafts, review
from annotate.export.vi import vi_rows
from app import context as app_context
from app import views
from app.pages import vet as vet_page
from app.pages import vet_target, vet_writes

F, D = views.QueueFilters(), views.Display()


def page_for(ctx, cid: int, tab: str = "", form: dict | None = None, **texts: str) -> str:
    """What the page sends with a write on candidate `cid` as it shows it now."""
    c = ctx.store.candidate(cid)
    out = {"cid": cid, "key": c.key, "task": c.task, "rev": review.revision(ctx.store, cid),
           "tab": tab, **texts}  # fmt: skip
    if form is not None:
        out["form"] = form
    return json.dumps(out)


def _tab(tab: str) -> dict:
    return {**views.new_state(), "tab": tab}


def test_a_comment_and_a_correction_note_are_both_kept(ctx):
    """A comment typed, then a correction with its reasoning and a note: the review holds
    the comment and the note each in its own field, the VI file carries both, and the
    comment is not lost (it once shared one column with the note)."""
    ex = app_context.expert_for(ctx, None)
    st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    a = st["current"]
    page = page_for(ctx, a, comment="odd blue end", explanation="I see no C2 bands",
                    note="ask ada about the sky", form={"label": "NO", "wrong_step": "2"})  # fmt: skip
    st, view = vet_writes.vet_act(ctx, ex, st, "correct", F, D, page=page)
    (r,) = ctx.store.reviews(candidate_id=a)
    assert (r.action, r.label, r.wrong_step) == ("correct", "NO", 1)
    assert (r.explanation, r.comment, r.note) == (
        "I see no C2 bands", "odd blue end", "ask ada about the sky")  # fmt: skip
    row = next(x for x in vi_rows(ctx.store) if x["_cid"] == a)
    assert (row["comment"], row["note"], row["reasoning"]) == (
        "odd blue end", "ask ada about the sky", "I see no C2 bands")  # fmt: skip


def test_a_saved_correction_shows_its_label_and_step_and_keeps_them(ctx):
    """Back on a saved correction (wrong step 2) the panel shows NO and step 2, not
    "none"; saving it again with new reasoning keeps the step."""
    ex = app_context.expert_for(ctx, None)
    st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    a = st["current"]
    page = page_for(ctx, a, explanation="first", form={"label": "NO", "wrong_step": "2"})
    st, _ = vet_writes.vet_act(ctx, ex, st, "correct", F, D, page=page)
    st, view = vet_page.vet_prev(ctx, ex, st, F, D)
    assert st["current"] == a
    assert (view.correct_label, view.wrong_step) == ("NO", "2")
    assert view.form["explanation"] == "first"
    page = page_for(ctx, a, explanation="second", form={"label": "NO", "wrong_step": "2"})
    vet_writes.vet_act(ctx, ex, st, "correct", F, D, page=page)
    (r,) = ctx.store.reviews(candidate_id=a)
    assert (r.label, r.wrong_step, r.explanation) == ("NO", 1, "second")


def test_undo_of_a_correction_puts_its_label_step_and_texts_back(ctx):
    """`u` on a correction (NO, step 3) brings the form back as NO with step 3 and its
    reasoning and note, and saving it again stores exactly that (it once came back as YES
    with no step)."""
    ex = app_context.expert_for(ctx, None)
    st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    a = st["current"]
    verdict = ctx.store.candidate(a).verdict
    label = verdict  # the label the panel does not suggest (it offers the opposite)
    page = page_for(ctx, a, explanation="why", note="for bob",
                    form={"label": label, "wrong_step": "3"})  # fmt: skip
    st, _ = vet_writes.vet_act(ctx, ex, st, "correct", F, D, page=page)
    st, view = vet_writes.vet_undo(ctx, ex, st, D)
    assert st["current"] == a and review.my_decision(ctx.store, ex.name, a) is None
    assert (view.correct_label, view.wrong_step) == (label, "3")
    assert view.form["restore"]["explanation"] == "why"
    assert view.form["restore"]["note"] == "for bob"
    assert drafts.get(ctx.store, ex.name, a) == {"label": label, "wrong_step": 3}
    # the page sends its form as it shows it (restored); saved again, as it was
    page = page_for(ctx, a, explanation="why", note="for bob",
                    form={"label": view.correct_label, "wrong_step": view.wrong_step})  # fmt: skip
    vet_writes.vet_act(ctx, ex, st, "correct", F, D, page=page)
    (r,) = ctx.store.reviews(candidate_id=a)
    assert (r.action, r.label, r.wrong_step, r.note) == ("correct", label, 2, "for bob")
    assert drafts.get(ctx.store, ex.name, a) == {}


def test_two_tabs_of_one_expert_are_never_served_one_candidate(ctx):
    """Two tabs (holders) of one expert get different candidates; a tab cannot write on
    what the other holds (said, nothing written); each tab's typed comment is saved only
    by that tab's own decision; a tab that jumps to the other's candidate takes it, and the
    other's writes on it are then refused."""
    ex = app_context.expert_for(ctx, None)
    sa, va = vet_page.vet_next(ctx, ex, _tab("tab-a"), F, D)
    sb, vb = vet_page.vet_next(ctx, ex, _tab("tab-b"), F, D)
    a, b = sa["current"], sb["current"]
    assert a != b
    # a grade from B on A's candidate is refused, nothing written
    _, msg = vet_writes.vet_grade(ctx, ex, sb, 3, page_for(ctx, a, "tab-b"))
    assert "open in another tab" in msg and drafts.get(ctx.store, ex.name, a) == {}
    # B's accept naming A's candidate: refused, nothing written; B goes on to its next
    sb, view = vet_writes.vet_act(ctx, ex, sb, "accept", F, D, page=page_for(ctx, a, "tab-b"))
    assert "open in another tab of yours" in view.message
    assert ctx.store.reviews(candidate_id=a) == []
    b = sb["current"]
    assert b not in (a, None)
    # each tab's own decision saves its own texts, on its own candidate
    vet_writes.vet_act(ctx, ex, sa, "accept", F, D, page=page_for(ctx, a, "tab-a", comment="A's"))
    vet_writes.vet_act(ctx, ex, sb, "skip", F, D, page=page_for(ctx, b, "tab-b", comment="B's"))
    assert ctx.store.reviews(candidate_id=a)[0].comment == "A's"
    assert ctx.store.reviews(candidate_id=b)[0].comment == "B's"
    # a jump takes the candidate: the tab that held it is then refused
    sa, va = vet_page.vet_next(ctx, ex, sa, F, D)
    c = sa["current"]
    key = ctx.store.candidate(c).key
    sb, vb = vet_page.vet_jump(ctx, ex, sb, key, D, task=ctx.store.candidate(c).task)
    assert sb["current"] == c
    _, view = vet_writes.vet_act(ctx, ex, sa, "accept", F, D, page=page_for(ctx, c, "tab-a"))
    assert "open in another tab of yours" in view.message
    assert ctx.store.reviews(candidate_id=c) == []


def test_a_write_after_another_tab_decided_is_a_conflict_that_names_both(ctx):
    """Tab A shows a candidate undecided; the same expert decides it elsewhere (tab B,
    after A moved on and B took it); A's reject, sent with the revision A saw, is refused
    in one line naming the candidate, what A showed and what the store holds; A's typed
    reason is not dropped (the answer does not tell the page its texts were saved)."""
    ex = app_context.expert_for(ctx, None)
    sa, _ = vet_page.vet_next(ctx, ex, _tab("tab-a"), F, D)
    a = sa["current"]
    seen = page_for(ctx, a, "tab-a", reason="TiO bands")
    # B decides it (a jump takes the lease from A), then A's page sends its reject
    c = ctx.store.candidate(a)
    sb, _ = vet_page.vet_jump(ctx, ex, _tab("tab-b"), c.key, D, task=c.task)
    vet_writes.vet_act(ctx, ex, sb, "accept", F, D, page=page_for(ctx, a, "tab-b"))
    sa, _ = vet_page.vet_jump(ctx, ex, sa, c.key, D, task=c.task)  # A takes it back
    _, view = vet_writes.vet_act(ctx, ex, sa, "reject", F, D, page=seen)
    assert "changed since this tab showed it" in view.message
    assert f"{c.key} · {c.task}" in view.message
    assert "this tab showed: not decided by you" in view.message
    assert "the store holds: your accept" in view.message
    assert "saved" not in view.form
    (r,) = ctx.store.reviews(candidate_id=a)
    assert r.action == "accept"


def test_status_lines_name_the_candidate_and_its_task(ctx):
    ex = app_context.expert_for(ctx, None)
    st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    c = ctx.store.candidate(st["current"])
    _, msg = vet_writes.vet_grade(ctx, ex, st, 2, page_for(ctx, c.id))
    assert f"{c.key} · {c.task}" in msg
    _, view = vet_writes.vet_act(ctx, ex, st, "accept", F, D, page=page_for(ctx, c.id))
    assert f"Saved **accept** on {c.key} · {c.task}" in view.message


def test_a_form_the_page_sent_is_what_the_decision_saves(ctx):
    """The page's form (grade, flags, spectral type) is what the decision saves, whatever
    the store's draft says (a grade set in another request that has not answered yet)."""
    ex = app_context.expert_for(ctx, None)
    st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    a = st["current"]
    drafts.set_field(ctx.store, ex.name, a, grade=1, issues="C")
    page = page_for(ctx, a, form={"grade": "4", "issues": "RS", "spectype": "M5 III"})
    vet_writes.vet_act(ctx, ex, st, "accept", F, D, page=page)
    (r,) = ctx.store.reviews(candidate_id=a)
    assert (r.grade, r.issues, r.spectype) == (4, "RS", "M5 III")


def test_a_target_is_read_from_the_page_or_the_session(ctx):
    ex = app_context.expert_for(ctx, None)
    st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    c = ctx.store.candidate(st["current"])
    t = vet_target.parse(ctx, st, page_for(ctx, c.id, "t1"))
    assert (t.cid, t.key, t.task, t.rev, t.tab) == (c.id, c.key, c.task, 0, "t1")
    t = vet_target.parse(ctx, st, "")  # an API call: the session's, no revision check
    assert (t.cid, t.key, t.task, t.rev) == (c.id, c.key, c.task, None)
    assert vet_target.parse(ctx, st, '{"cid": "x"}') is None
    assert vet_target.holder({"tab": "kept"}, "") == "kept"
    assert vet_target.holder({}, '{"tab": "t9"}') == "t9"


def test_a_mark_sent_twice_from_one_page_is_not_refused_by_its_own_write(ctx):
    """The spectral type box's Enter and then its blur send the same value, both naming the
    revision the page saw before either answered: the first amends the decision, the second
    changes nothing and is not a conflict (it once said "Not saved: ... changed since this
    tab showed it" for the tab's own write). A different value on the stale revision still
    is one."""
    from app.pages import desk

    ex = app_context.expert_for(ctx, None)
    st, _ = vet_page.vet_next(ctx, ex, _tab("t1"), F, D)
    a = st["current"]
    st, _ = vet_writes.vet_act(ctx, ex, st, "accept", F, D, page=page_for(ctx, a, "t1"))
    seen = page_for(ctx, a, "t1")  # both writes leave before either answer
    st, first = desk.set_mark(ctx, ex, st, "spectype", "K0 V", seen)
    st, second = desk.set_mark(ctx, ex, st, "spectype", "K0 V", seen)
    assert "saved on" in first and "already so" in second and "Not saved" not in second
    (r,) = ctx.store.reviews(candidate_id=a)
    assert (r.spectype, r.revision) == ("K0 V", 2)
    st, third = desk.set_mark(ctx, ex, st, "spectype", "M5 III", seen)
    assert "Not saved" in third and "changed since this tab showed it" in third
    assert ctx.store.reviews(candidate_id=a)[0].spectype == "K0 V"
    # on an undecided candidate the draft is what is compared: a cleared flag not set is so
    b = st["current"]
    st, msg = desk.set_mark(ctx, ex, st, "issues", "", page_for(ctx, b, "t1"))
    assert "already so" in msg and drafts.get(ctx.store, ex.name, b) == {}
