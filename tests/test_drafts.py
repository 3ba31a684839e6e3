"""One draft per candidate, on the server: what an expert sets on a candidate (grade,
flags, spectral type, redshift, template, a comment) is that candidate's, kept in the store
across reloads, saved whole with the decision, amending it after; texts the page kept go
with the decision on their own candidate only; undo puts the undone values back."""

from __future__ import annotations

import json

import pytest

from annotate import drafts
from app import context as app_context
from app import views
from app.pages import desk, vet_texts, vet_writes
from app.pages import vet as vet_page

F, D = views.QueueFilters(), views.Display()


def _start(ctx):
    ex = app_context.expert_for(ctx, None)
    st, view = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    return ex, st, view


def _texts(key: str, **texts: str) -> str:
    return json.dumps({"key": key, **texts})


def test_a_typed_comment_goes_with_the_decision_on_its_own_candidate(ctx):
    """The page's texts for A go with A's accept; texts meant for A sent with B's decision
    (a late answer, a page showing another candidate) land nowhere."""
    ex, st, view = _start(ctx)
    a, key_a, task_a = st["current"], st["key"], st["task"]
    # the same id's candidate of another task is another candidate: its texts are not A's
    other = json.dumps({"key": key_a, "task": "not-" + task_a, "comment": "elsewhere"})
    assert vet_texts.page_text(other, key_a, task_a) == {}
    st, view = vet_writes.vet_act(ctx, ex, st, "accept", F, D, page=_texts(key_a, comment="DA?"))
    (r,) = ctx.store.reviews(candidate_id=a)
    assert r.comment == "DA?"
    assert view.form["saved"] == {"key": key_a, "task": task_a,
                                  "texts": {"comment": "DA?"}}  # fmt: skip
    b = st["current"]
    st, _ = vet_writes.vet_act(ctx, ex, st, "skip", F, D, page=_texts(key_a, comment="for A"))
    (rb,) = ctx.store.reviews(candidate_id=b)
    assert rb.comment is None
    # a reject's reason kept by the page is its explanation
    c, key_c = st["current"], st["key"]
    vet_writes.vet_act(ctx, ex, st, "reject", F, D, page=_texts(key_c, reason="TiO bands"))
    (rc,) = ctx.store.reviews(candidate_id=c)
    assert (rc.action, rc.explanation) == ("reject", "TiO bands")


def test_a_redshift_set_on_a_decided_candidate_amends_the_decision(ctx):
    ex, st, _ = _start(ctx)
    a = st["current"]
    st, _ = vet_writes.vet_act(ctx, ex, st, "accept", F, D)
    st, view = vet_page.vet_prev(ctx, ex, st, F, D)
    assert st["current"] == a
    st, msg = desk.keep_z(ctx, ex, desk.set_z(st, 0.002))
    assert "saved on" in msg and "your accept" in msg
    (r,) = ctx.store.reviews(candidate_id=a)
    assert (r.redshift, r.redshift_source, r.revision) == (0.002, "expert", 2)
    st, view = vet_page.vet_refresh(ctx, ex, st, desk.display_with(st, D))
    assert "saved on your accept" in desk.info_html(view.redshift)


def test_a_draft_survives_a_new_session_and_is_saved_with_the_decision(ctx):
    """Grade, flags, type, redshift and template set, then the page reloaded (a new
    session's state): the same candidate shows them all, and the accept saves them."""
    ex, st, _ = _start(ctx)
    a, key = st["current"], st["key"]
    st, _ = vet_writes.vet_grade(ctx, ex, st, 3)
    st, _ = desk.set_mark(ctx, ex, st, "issues", "RS")
    st, _ = desk.keep(ctx, ex, st, "Template", "QSO", template="QSO")
    st, _ = desk.set_mark(ctx, ex, st, "spectype", "QSO")
    st, _ = desk.keep_z(ctx, ex, desk.set_z(st, 1.5))
    st, msg = vet_writes.vet_comment(ctx, ex, st, "odd continuum")
    assert "kept in your draft" in msg
    st2, view = vet_page.vet_jump(ctx, ex, views.new_state(), key, D)  # a reload
    assert st2["current"] == a
    assert (view.grade, view.issues, view.spectype, view.template) == (3, "RS", "QSO", "QSO")
    assert view.redshift["z"] == 1.5 and view.form["comment"] == "odd continuum"
    assert view.global_fig["data"][-1]["name"] == "template: QSO at z = 1.5000"
    vet_writes.vet_act(ctx, ex, st2, "accept", F, D)
    (r,) = ctx.store.reviews(candidate_id=a)
    assert (r.grade, r.issues, r.spectype, r.redshift, r.comment) == (
        3, "RS", "QSO", 1.5, "odd continuum")  # fmt: skip
    # saved: no draft is left behind (the template drawn is the decision's spectral type)
    assert drafts.get(ctx.store, ex.name, a) == {}
    st3, view = vet_page.vet_jump(ctx, ex, views.new_state(), key, D)
    assert view.template == "QSO"


def test_nothing_carries_over_to_the_next_candidate(ctx):
    """The template, a grade and flags chosen on A are not on B (the template overlay
    once followed the expert), and are A's again when they come back with k."""
    ex, st, _ = _start(ctx)
    st, _ = desk.keep(ctx, ex, st, "Template", "M giant", template="M giant")
    st, _ = vet_writes.vet_grade(ctx, ex, st, 2)
    st, _ = desk.set_mark(ctx, ex, st, "issues", "C")
    st, view = vet_page.vet_next(ctx, ex, st, F, desk.display_with(st, D))
    assert (view.template, view.grade, view.issues) == ("none", None, None)
    assert not any(t["name"].startswith("template:") for t in view.global_fig["data"])
    st, view = vet_page.vet_prev(ctx, ex, st, F, desk.display_with(st, D))
    assert (view.template, view.grade, view.issues) == ("M giant", 2, "C")


def test_undo_puts_the_undone_values_back_in_the_form(ctx):
    ex, st, _ = _start(ctx)
    a, key = st["current"], st["key"]
    st, _ = vet_writes.vet_grade(ctx, ex, st, 4)
    st, _ = desk.set_mark(ctx, ex, st, "issues", "S")
    st, _ = desk.set_mark(ctx, ex, st, "spectype", "M5 III")
    st, _ = vet_writes.vet_act(ctx, ex, st, "reject", F, D,
                             page=_texts(key, reason="no TiO", comment="see 7100"))  # fmt: skip
    st, view = vet_writes.vet_undo(ctx, ex, st, D)
    assert st["current"] == a and ctx.store.reviews(candidate_id=a)[0].action == "undo"
    assert (view.grade, view.issues, view.spectype) == (4, "S", "M5 III")
    assert view.form["restore"] == {"comment": "see 7100", "reason": "no TiO",
                                    "explanation": "", "note": ""}  # fmt: skip
    # deciding again saves the restored draft
    vet_writes.vet_act(ctx, ex, st, "accept", F, D)
    (r,) = ctx.store.reviews(candidate_id=a)
    assert (r.action, r.grade, r.issues, r.spectype) == ("accept", 4, "S", "M5 III")


def test_leaving_a_decided_candidate_saves_its_edited_comment(ctx):
    ex, st, _ = _start(ctx)
    a, key = st["current"], st["key"]
    st, _ = vet_writes.vet_act(ctx, ex, st, "accept", F, D, page=_texts(key, comment="first"))
    st, _ = vet_page.vet_prev(ctx, ex, st, F, D)
    note, saved = vet_texts.leave(ctx, ex, st, _texts(key, comment="second"))
    assert saved == {"key": key, "task": st["task"], "texts": {"comment": "second"}}
    assert "Comment saved" in note
    (r,) = ctx.store.reviews(candidate_id=a)
    assert (r.comment, r.revision) == ("second", 2)
    # unchanged, or another candidate's texts: nothing written
    assert vet_texts.leave(ctx, ex, st, _texts(key, comment="second")) == ("", None)
    assert vet_texts.leave(ctx, ex, st, _texts("other", comment="x")) == ("", None)


def test_a_bad_draft_value_names_the_field_and_keeps_the_draft(ctx):
    ex, st, _ = _start(ctx)
    a = st["current"]
    st, _ = vet_writes.vet_grade(ctx, ex, st, 2)
    st, msg = vet_writes.vet_grade(ctx, ex, st, 7)
    assert "1-4" in msg
    with pytest.raises(drafts.DraftError, match="template"):
        drafts.set_field(ctx.store, ex.name, a, template="x" * 100)
    with pytest.raises(drafts.DraftError, match="no field"):
        drafts.set_field(ctx.store, ex.name, a, colour="red")
    assert drafts.get(ctx.store, ex.name, a) == {"grade": 2}
    assert vet_texts.page_text("{not json", "k") == {}
    assert vet_texts.page_text(json.dumps({"key": "k", "comment": 5}), "k") == {}


def test_a_correction_keeps_the_comment_typed_beside_it(ctx):
    """A correction saved with an empty note keeps the comment the candidate holds (typed
    in the page, or given through the API), as any decision does; with a note, both are
    kept, each in its own field."""
    ex, st, _ = _start(ctx)
    a, key = st["current"], st["key"]
    st, _ = vet_writes.vet_act(ctx, ex, st, "correct", F, D, label="NO", explanation="no C2",
                               note="", page=_texts(key, comment="see 5165"))  # fmt: skip
    (r,) = ctx.store.reviews(candidate_id=a)
    assert (r.action, r.explanation, r.comment, r.note) == ("correct", "no C2", "see 5165", None)
    b = st["current"]
    st, _ = vet_writes.vet_comment(ctx, ex, st, "from the API")
    st, _ = vet_writes.vet_act(ctx, ex, st, "correct", F, D, label="YES", note="")
    (rb,) = ctx.store.reviews(candidate_id=b)
    assert rb.comment == "from the API"
    c, key_c = st["current"], st["key"]
    vet_writes.vet_act(ctx, ex, st, "correct", F, D, label="NO", explanation="no C2",
                       page=_texts(key_c, comment="odd blue end", note="ask ada"))  # fmt: skip
    (rc,) = ctx.store.reviews(candidate_id=c)
    assert (rc.comment, rc.note) == ("odd blue end", "ask ada")
