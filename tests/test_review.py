"""Review semantics: accept/reject/correct labels, revisions, ownership, majority and
adjudication."""

from __future__ import annotations

import pytest

from agent.refs import CandidateRef
from annotate import review as rv
from db.store import StoreError
from tests.store_factory import seeded


@pytest.fixture
def store(mem_store):
    for name in ("ada", "bob", "cy"):
        mem_store.create_expert(name)
    mem_store.create_expert("boss", "admin")
    return mem_store


def test_accept_reject_correct_set_labels(store):
    yes, no, _ = seeded(store, [0.8, 0.2, 0.5])
    assert rv.decide(store, "ada", yes, "accept").label == "YES"
    assert rv.decide(store, "ada", no, "reject").label == "YES"  # the NO verdict was wrong
    r = rv.decide(
        store,
        "bob",
        yes,
        "correct",
        label="NO",
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
    assert rv.decide(store, "ada", a, "skip").label is None
    assert rv.decide(store, "ada", b, "flag", comment="odd continuum").label is None
    ca, cb = store.candidate(a), store.candidate(b)
    assert (ca.review_count, ca.label, ca.status) == (0, None, "unreviewed")
    assert cb.flagged and cb.label is None
    assert store.expert("ada").review_count == 2


def test_bad_reviews_are_refused_with_the_item_named(store):
    [a] = seeded(store, [0.6])
    store.add_candidates([CandidateRef(id="u0", task="cv", path="/d/u0.fits")])
    unvetted = store.find_candidate("u0").id
    with pytest.raises(StoreError, match="has none; use 'correct'"):
        rv.decide(store, "ada", unvetted, "accept")
    assert rv.decide(store, "ada", unvetted, "correct", label="YES").label == "YES"
    with pytest.raises(StoreError, match="YES or NO"):
        rv.decide(store, "ada", a, "correct", label="maybe")
    with pytest.raises(StoreError, match="wrong_step 7"):
        rv.decide(store, "ada", a, "reject", wrong_step=7)
    with pytest.raises(StoreError, match="unknown review action"):
        store.record_review("ada", a, "approve")
    with pytest.raises(StoreError, match="seconds"):
        rv.decide(store, "ada", a, "accept", seconds=float("nan"))
    assert store.reviews(candidate_id=a) == []


def test_revision_keeps_history_and_identical_retry_is_a_no_op(store):
    [a] = seeded(store, [0.7])
    first = rv.decide(store, "ada", a, "accept", comment="clear Halpha")
    again = rv.decide(store, "ada", a, "accept", comment="clear Halpha")
    assert again.id == first.id and again.revision == 1
    second = rv.decide(store, "ada", a, "reject", comment="no, a sky residual")
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
    mine = rv.decide(store, "ada", a, "accept")
    with pytest.raises(PermissionError, match="belongs to 'ada'"):
        rv.revise(store, "bob", mine.id, "reject")
    assert store.review(mine.id).action == "accept" and store.review_history(mine.id) == []
    # bob reviewing the same candidate writes his own review, not ada's
    theirs = rv.decide(store, "bob", a, "reject")
    assert theirs.id != mine.id and store.review(mine.id).label == "YES"


def test_majority_tie_conflict_and_adjudication(store):
    [a] = seeded(store, [0.7])
    rv.decide(store, "ada", a, "accept")
    rv.decide(store, "bob", a, "reject")
    c = store.candidate(a)
    assert (c.n_yes, c.n_no, c.label, c.status) == (1, 1, None, "conflict")
    assert [x.id for x in store.conflicts()] == [a]
    rv.decide(store, "cy", a, "accept")
    c = store.candidate(a)
    assert (c.label, c.label_source, c.status) == ("YES", "review", "conflict")
    with pytest.raises(PermissionError, match="not an admin"):
        store.adjudicate("ada", a, "NO")
    c = store.adjudicate("boss", a, "NO", comment="sky line")
    assert (c.label, c.label_source, c.status) == ("NO", "adjudication", "reviewed")
    assert store.conflicts() == []
    store.adjudicate("boss", a, None)  # withdrawn: back to the majority
    assert store.candidate(a).label == "YES"


def test_expert_disagreeing_with_agent_marks_disagreement(store):
    a, b = seeded(store, [0.9, 0.9])
    rv.decide(store, "ada", a, "reject")
    rv.decide(store, "ada", b, "accept")
    assert store.candidate(a).disagreement and not store.candidate(b).disagreement


def test_reviews_listing(store):
    a, b = seeded(store, [0.9, 0.1])
    r1 = rv.decide(store, "ada", a, "accept")
    rv.decide(store, "bob", b, "accept")
    assert [r.id for r in store.reviews(expert="ada")] == [r1.id]
    assert len(store.reviews(since_id=r1.id)) == 1
    assert len(store.reviews(task="cv", actions=["accept"])) == 2


def test_grade_redshift_and_reason_are_stored_and_kept_in_revisions(store):
    a, b = seeded(store, [0.8, 0.3])
    r = rv.decide(store, "ada", a, "accept", grade=3, redshift=1.27, redshift_source="agent")
    assert (r.grade, r.redshift, r.redshift_source) == (3, 1.27, "agent")
    # the grade on its own is a revision of the review; the decision is kept
    r2 = rv.grade(store, "ada", store.review(r.id), 4)
    assert (r2.action, r2.label, r2.grade, r2.revision) == ("accept", "YES", 4, 2)
    assert r2.redshift == 1.27
    (old,) = store.review_history(r.id)
    assert (old.grade, old.redshift, old.redshift_source) == (3, 1.27, "agent")
    # a reject keeps its reason as the reasoning the model should learn
    rj = rv.decide(store, "ada", b, "reject", explanation=" an M giant: TiO bands, no CN ")
    assert rj.explanation == "an M giant: TiO bands, no CN" and rj.label == "YES"
    # other actions do not carry it
    assert rv.decide(store, "bob", b, "skip", explanation="x").explanation is None
    c = rv.comment(store, "ada", store.review(r.id), "see the sky line")
    assert (c.comment, c.grade, c.action) == ("see the sky line", 4, "accept")


def test_bad_grade_redshift_and_overlong_text_are_refused(store):
    [a] = seeded(store, [0.6])
    for bad in (0, 5, True):
        with pytest.raises(StoreError, match="grade must be one of"):
            rv.decide(store, "ada", a, "accept", grade=bad)
    with pytest.raises(StoreError, match="redshift_source"):
        rv.decide(store, "ada", a, "accept", redshift=0.5)
    with pytest.raises(StoreError, match="redshift must be"):
        rv.decide(store, "ada", a, "accept", redshift=float("inf"), redshift_source="expert")
    with pytest.raises((StoreError, ValueError), match="explanation is 2001 characters"):
        rv.decide(store, "ada", a, "correct", label="NO", explanation="x" * 2001)
    assert store.reviews(candidate_id=a) == []


def test_undo_takes_back_the_last_decision_and_keeps_it(store):
    a, b = seeded(store, [0.8, 0.8])
    rv.decide(store, "ada", a, "accept")
    rv.decide(store, "ada", b, "reject", explanation="a sky line")
    assert store.candidate(b).label == "NO"
    done = rv.undo(store, "ada")
    assert done.taken.candidate_id == b and done.taken.action == "reject"
    now = store.review(done.taken.id)
    assert (now.action, now.label) == ("undo", None)  # no decision before it
    assert [h.action for h in rv.history(store, done.taken.id)] == ["reject", "undo"]
    c = store.candidate(b)
    assert (c.review_count, c.label) == (0, None)
    assert rv.decisions(store, b) == [] and rv.my_decision(store, "ada", b) is None
    # the item is served to ada again; a second undo takes back the one before
    assert store.next_item("ada") == b
    assert rv.undo(store, "ada").taken.candidate_id == a
    assert rv.undo(store, "ada") is None
    assert store.expert("ada").review_count == 2  # an undo is not a new review


def test_undo_restores_the_decision_before_the_last(store):
    """Grade 3, accept, then a reject with a reason, then undo: the accept comes back, label,
    grade and all; a second undo leaves no decision; the revisions are all kept."""
    [a] = seeded(store, [0.8])
    rv.decide(store, "ada", a, "accept", grade=3, comment="clear lines")
    rv.decide(store, "ada", a, "reject", explanation="a sky line", grade=3)
    assert store.candidate(a).label == "NO"
    done = rv.undo(store, "ada")
    assert (done.taken.action, done.taken.label) == ("reject", "NO")
    now = store.review(done.taken.id)
    assert (now.action, now.label, now.grade, now.comment, now.explanation) == (
        "accept", "YES", 3, "clear lines", None,
    )  # fmt: skip
    c = store.candidate(a)
    assert (c.review_count, c.label) == (1, "YES")
    assert [r.action for r in rv.decisions(store, a)] == ["accept"]
    # an edit of the restored decision belongs to it; the next undo takes it back whole
    rv.grade(store, "ada", now, 4)
    again = rv.undo(store, "ada")
    assert (again.taken.action, again.taken.grade) == ("accept", 4)
    assert (again.now.action, again.now.label) == ("undo", None)
    assert store.candidate(a).review_count == 0
    assert rv.undo(store, "ada") is None
    assert [h.action for h in rv.history(store, now.id)] == [
        "accept", "reject", "accept", "accept", "undo",
    ]  # fmt: skip


def test_undo_leases_the_item_back_for_the_teams_lease(store):
    """The item taken back is leased to its expert for the lease given (the team's), in the
    write that takes it back; the lease on the item they were looking at stays, and the
    experts holding the undone item are named."""
    import datetime as dt

    a, b = seeded(store, [0.6, 0.6])
    rv.decide(store, "ada", a, "accept")
    assert store.next_item("ada") == b  # ada looks at b now
    store.claim("bob", a, 60)  # bob opened a by id meanwhile
    done = rv.undo(store, "ada", lease_seconds=5000, keep=[b])
    assert done.others == ["bob"]
    ada = store.expert("ada").id
    mine = {x.candidate_id: x for x in store.leases() if x.expert_id == ada}
    assert set(mine) == {a, b}
    left = (mine[a].expires - dt.datetime.now(dt.UTC).replace(tzinfo=None)).total_seconds()
    assert 4900 < left <= 5000


def test_queue_passes_over_excluded_items(store):
    a, b = seeded(store, [0.5, 0.9])
    assert store.next_item("ada") == a
    assert store.next_item("ada", exclude=[a]) == b
    assert store.next_item("ada", exclude=[a, b]) is None
    assert store.reviews() == []  # moving records nothing


def test_issue_flags_and_spectral_type_are_kept_in_revisions_and_undo(store):
    """Prospect's flags are kept as it writes them ("sr" -> "RS"); an amend is a revision
    that keeps the decision; undo brings back the earlier flags and type; a flag Prospect
    does not have is refused."""
    [a] = seeded(store, [0.8])
    r = rv.decide(store, "ada", a, "accept", issues="sr", spectype=" M giant ")
    assert (r.issues, r.spectype) == ("RS", "M giant")
    r2 = rv.amend(store, "ada", store.review(r.id), issues="RCS", spectype="QSO")
    assert (r2.action, r2.label, r2.issues, r2.spectype, r2.revision) == (
        "accept", "YES", "RCS", "QSO", 2,
    )  # fmt: skip
    (old,) = store.review_history(r.id)
    assert (old.issues, old.spectype) == ("RS", "M giant")
    rv.decide(store, "ada", a, "reject", explanation="a sky line")
    now = rv.undo(store, "ada").now
    assert (now.action, now.issues, now.spectype) == ("accept", "RCS", "QSO")
    with pytest.raises(StoreError, match="'X' is not one of R"):
        rv.decide(store, "ada", a, "accept", issues="RX")
    with pytest.raises(StoreError, match="issues must be letters"):
        store.record_review("ada", a, "accept", label="YES", issues="RR")
    with pytest.raises(StoreError, match="spectral type is 65 characters"):
        rv.amend(store, "ada", now, spectype="x" * 65)
