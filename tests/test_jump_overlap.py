"""Jumping to an item (by its id, or back through the history) opens it whatever others
hold, but does not buy a label slot: under overlap k, once k other experts have labelled an
item no further expert's first label is stored, however they opened it. Gold items are
every expert's. The same rule holds in the store, under the candidate's row lock, for
two experts who both opened the item and press at once."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from annotate import review
from annotate.team import settings as team_settings
from app import context as app_context
from app import views
from app.pages import vet as vet_page
from app.pages import vet_writes
from db.store import StorePermissionError
from tests.app_support import context

F, D = views.QueueFilters(), views.Display()


@pytest.fixture
def team(tmp_path_factory, tmp_path):
    from annotate.team.experts import create_expert

    c = context(tmp_path_factory, tmp_path, login=True)
    for name, role in (("ada", "admin"), ("bob", "expert"), ("cyd", "expert"), ("dee", "expert")):
        create_expert(c.store, name, role, f"pw-{name}-12345")
    yield c
    c.store.close()


def who(ctx, name):
    return app_context.expert_for(ctx, SimpleNamespace(username=name))


def labels(ctx, cid: int) -> dict[str, str | None]:
    return {
        ctx.store.expert(r.expert_id).name: r.label for r in ctx.store.reviews(candidate_id=cid)
    }


def test_two_experts_jumping_to_one_item_label_it_once_under_overlap_1(team):
    cand = next(c for c in team.store.list_candidates(limit=50, order="id") if not c.is_gold)
    bob, cyd = who(team, "bob"), who(team, "cyd")
    st_b, _ = vet_page.vet_jump(team, bob, views.new_state(), cand.key, D)
    st_c, view = vet_page.vet_jump(team, cyd, views.new_state(), cand.key, D)
    assert "bob" in view.message  # the jump still says who else has it open
    vet_writes.vet_act(team, bob, st_b, "accept", F, D)
    _, view = vet_writes.vet_act(team, cyd, st_c, "reject", F, D)
    assert "Not saved" in view.message and "overlap" in view.message, view.message
    assert set(labels(team, cand.id)) == {"bob"}
    # the store refuses the same, whoever calls it with the team's overlap
    with pytest.raises(StorePermissionError, match=r"already labelled by 1 other expert\(s\) and "
                       "the team's overlap is 1"):  # fmt: skip
        review.decide(team.store, "cyd", cand.id, "reject", overlap=1)
    # bob revises his own label: still his to change
    vet_page.vet_jump(team, bob, views.new_state(), cand.key, D)
    review.decide(team.store, "bob", cand.id, "correct", label="NO", explanation="x", overlap=1)
    assert labels(team, cand.id) == {"bob": "NO"}


def test_overlap_k_takes_k_labels_and_an_undo_frees_its_slot(team):
    team_settings.change(team.store, "overlap", "2", "ada")
    cand = next(c for c in team.store.list_candidates(limit=50, order="id") if not c.is_gold)
    states = {n: vet_page.vet_jump(team, who(team, n), views.new_state(), cand.key, D)[0]
              for n in ("bob", "cyd", "dee")}  # fmt: skip
    vet_writes.vet_act(team, who(team, "bob"), states["bob"], "accept", F, D)
    vet_writes.vet_act(team, who(team, "cyd"), states["cyd"], "accept", F, D)
    _, view = vet_writes.vet_act(team, who(team, "dee"), states["dee"], "accept", F, D)
    assert "Not saved" in view.message and set(labels(team, cand.id)) == {"bob", "cyd"}
    # cyd takes hers back: dee's label now fits, and cyd's again does not
    assert review.undo(team.store, "cyd") is not None
    assert labels(team, cand.id)["cyd"] is None
    review.decide(team.store, "dee", cand.id, "accept", overlap=2)
    assert labels(team, cand.id)["dee"] == cand.verdict
    with pytest.raises(StorePermissionError, match="overlap is 2"):
        review.decide(team.store, "cyd", cand.id, "accept", overlap=2)


def test_gold_items_are_every_experts(team):
    cand = next(c for c in team.store.list_candidates(limit=50, order="id") if not c.is_gold)
    team.store.set_gold(cand.id, "YES")
    for n in ("bob", "cyd", "dee"):
        review.decide(team.store, n, cand.id, "accept", overlap=1)
    assert len([v for v in labels(team, cand.id).values() if v]) == 3
