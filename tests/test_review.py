"""Review semantics: accept/reject/correct labels, revisions, ownership, majority and
adjudication."""

from __future__ import annotations

import doctest

import pytest

import db.store
from agent.catalog import CandidateRef
from annotate import review as rv
from db.store import StoreError
from tests.store_factory import seeded


@pytest.fixture
def store(mem_store):
    for name in ("ada", "bob", "cy"):
        mem_store.create_expert(name)
    mem_store.create_expert("boss", "admin")
    return mem_store


def test_rules_doctests():
    assert doctest.testmod(db.store).failed == 0


def test_accept_reject_correct_set_labels(store):
    yes, no, _ = seeded(store, [0.8, 0.2, 0.5])
    assert rv.accept(store, "ada", yes).label == "YES"
    assert rv.reject(store, "ada", no).label == "YES"  # the NO verdict was wrong
    r = rv.correct(
        store,
        "bob",
        yes,
        "NO",
        explanation="the emission is a sky line",
        wrong_step=1,
        seconds=12.5,
    )
    assert (r.label, r.explanation, r.wrong_step, r.seconds) == (
        "NO",
        "the emission is a sky line",
        1,
        12.5,
    )
    assert r.trajectory_id == store.candidate(yes).trajectory_id


def test_skip_and_flag_set_no_label(store):
    a, b = seeded(store, [0.6, 0.6])
    assert rv.skip(store, "ada", a).label is None
    assert rv.flag(store, "ada", b, comment="odd continuum").label is None
    ca, cb = store.candidate(a), store.candidate(b)
    assert (ca.review_count, ca.label, ca.status) == (0, None, "unreviewed")
    assert cb.flagged and cb.label is None
    assert store.expert("ada").review_count == 2


def test_bad_reviews_are_refused_with_the_item_named(store):
    [a] = seeded(store, [0.6])
    store.add_candidates([CandidateRef(id="u0", task="cv", path="/d/u0.fits")])
    unvetted = store.find_candidate("u0").id
    with pytest.raises(StoreError, match="has none; use 'correct'"):
        rv.accept(store, "ada", unvetted)
    assert rv.correct(store, "ada", unvetted, "YES").label == "YES"
    with pytest.raises(StoreError, match="YES or NO"):
        rv.correct(store, "ada", a, "maybe")
    with pytest.raises(StoreError, match="wrong_step 7"):
        rv.reject(store, "ada", a, wrong_step=7)
    with pytest.raises(StoreError, match="unknown review action"):
        store.record_review("ada", a, "approve")
    with pytest.raises(StoreError, match="seconds"):
        rv.accept(store, "ada", a, seconds=float("nan"))
    assert store.reviews(candidate_id=a) == []


def test_revision_keeps_history_and_identical_retry_is_a_no_op(store):
    [a] = seeded(store, [0.7])
    first = rv.accept(store, "ada", a, comment="clear Halpha")
    again = rv.accept(store, "ada", a, comment="clear Halpha")
    assert again.id == first.id and again.revision == 1
    second = rv.reject(store, "ada", a, comment="no, a sky residual")
    assert second.id == first.id and second.revision == 2
    hist = rv.history(store, first.id)
    assert [(h.revision, h.action, h.label) for h in hist] == [
        (1, "accept", "YES"),
        (2, "reject", "NO"),
    ]
    assert store.candidate(a).label == "NO"
    assert store.expert("ada").review_count == 1  # a revision is not a new review
    assert len(store.reviews(candidate_id=a)) == 1


def test_an_expert_never_revises_another_experts_review(store):
    [a] = seeded(store, [0.7])
    mine = rv.accept(store, "ada", a)
    with pytest.raises(PermissionError, match="belongs to 'ada'"):
        rv.revise(store, "bob", mine.id, "reject")
    assert store.review(mine.id).action == "accept" and store.review_history(mine.id) == []
    # bob reviewing the same candidate writes his own review, not ada's
    theirs = rv.reject(store, "bob", a)
    assert theirs.id != mine.id and store.review(mine.id).label == "YES"


def test_majority_tie_conflict_and_adjudication(store):
    [a] = seeded(store, [0.7])
    rv.accept(store, "ada", a)
    rv.reject(store, "bob", a)
    c = store.candidate(a)
    assert (c.n_yes, c.n_no, c.label, c.status) == (1, 1, None, "conflict")
    assert [x.id for x in rv.conflicts(store)] == [a]
    rv.accept(store, "cy", a)
    c = store.candidate(a)
    assert (c.label, c.label_source, c.status) == ("YES", "review", "conflict")
    with pytest.raises(PermissionError, match="not an admin"):
        rv.adjudicate(store, "ada", a, "NO")
    c = rv.adjudicate(store, "boss", a, "NO", comment="sky line")
    assert (c.label, c.label_source, c.status) == ("NO", "adjudication", "reviewed")
    assert rv.conflicts(store) == []
    rv.adjudicate(store, "boss", a, None)  # withdrawn: back to the majority
    assert store.candidate(a).label == "YES"


def test_expert_disagreeing_with_agent_marks_disagreement(store):
    a, b = seeded(store, [0.9, 0.9])
    rv.reject(store, "ada", a)
    rv.accept(store, "ada", b)
    assert store.candidate(a).disagreement and not store.candidate(b).disagreement


def test_reviews_listing(store):
    a, b = seeded(store, [0.9, 0.1])
    r1 = rv.accept(store, "ada", a)
    rv.accept(store, "bob", b)
    assert [r.id for r in store.reviews(expert="ada")] == [r1.id]
    assert len(store.reviews(since_id=r1.id)) == 1
    assert len(store.reviews(task="cv", actions=["accept"])) == 2
