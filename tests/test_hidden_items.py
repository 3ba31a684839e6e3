"""What an expert sees never tells which items are hidden: gold items, and the random
audit's sample.

The probe an expert can run on any item: jump to it, decide it, read everything the app
shows them, take the decision back, read again. The test runs it on two copies of one store
that differ only in whether the item is hidden, and compares everything an expert can see
in each: every figure and table of the dashboard (all tasks and the item's task), the
audit's, the inspector's versions, learning curve, last fit and proposal, the Vet view of
the item and of another one, the messages the actions answer with, and the VI files an
expert may download in every layout. They must be the same before the decision, after it
and after the undo. An admin's view must differ, or the probe could not see anything.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from app import context as app_context
from app import views
from app.pages import dashboard as dashboard_page
from app.pages import export as export_page
from app.pages import vet as vet_page
from app.pages import vet_writes
from tests.app_support import context

F, D = views.QueueFilters(), views.Display()
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ|\d{8}-\d{6}|loupe-vi-[^/\s`]+")


def who(ctx, name):
    return app_context.expert_for(ctx, SimpleNamespace(username=name))


def _plain(value):
    """`value` as comparable JSON, the clock's readings (times, folder stamps) masked."""
    return _TIME.sub("<t>", json.dumps(value, sort_keys=True, default=repr))


def seen(ctx, name: str, task: str, key: str, other: str) -> dict[str, str]:
    """Everything `name` can see that could depend on which items are hidden."""
    ex = who(ctx, name)
    out: dict[str, str] = {}
    for t in ("all", task):
        dv = dashboard_page.dashboard(ctx, ex, t)
        out[f"dashboard {t}"] = _plain(vars(dv))
        out[f"audit {t}"] = _plain(vars(dashboard_page.audit_estimates(ctx, ex, t)))
        out[f"versions {t}"] = _plain(dashboard_page.inspector_versions(ctx, ex, t))
        out[f"curve {t}"] = _plain(dashboard_page.learning_curve(ctx, ex, t))
    out["proposal"] = _plain(dashboard_page.proposal_note(ctx, ex))
    out["last fit"] = _plain(dashboard_page.last_fit(ctx, ex))
    for k in (key, other):
        _, view = vet_page.vet_jump(ctx, ex, views.new_state(), k, D, task=task)
        out[f"vet {k}"] = _plain([view.header_html, view.message, view.answer_html])
    for layout in ("loupe", "prospect", "marz"):
        msg, files = export_page.vi_download(ctx, ex, layout)
        out[f"vi {layout}"] = _plain([msg, *(Path(f).read_text() for f in files)])
    return out


def probe(ctx, name: str, key: str, task: str, other: str) -> list[dict[str, str]]:
    """What `name` sees before deciding `key`, after accepting it, after taking it back,
    and after rejecting it (with the messages each action answered with)."""
    ex = who(ctx, name)
    stages = [seen(ctx, name, task, key, other)]
    for action in ("accept", "undo", "reject"):
        st, view = vet_page.vet_jump(ctx, ex, views.new_state(), key, D, task=task)
        if action == "undo":
            st, view = vet_writes.vet_undo(ctx, ex, st, D)
        else:
            st, view = vet_writes.vet_act(ctx, ex, st, action, F, D, active_seconds=5.0,
                                        explanation="not it" if action == "reject" else None)  # fmt: skip
        got = seen(ctx, name, task, key, other)
        got["answer"] = _plain([view.message, view.header_html])
        stages.append(got)
    return stages


@pytest.fixture
def twins(tmp_path_factory, tmp_path):
    """Two copies of one store with an admin, two experts and a few decisions by the other
    expert and the admin (the dashboard has agreement, speed and gold figures to draw)."""
    from annotate.team.experts import create_expert

    made = []
    for side in ("plain", "hidden"):
        ctx = context(tmp_path_factory, tmp_path / side, login=True)
        for name, role in (("ada", "admin"), ("bob", "expert"), ("cyd", "expert")):
            create_expert(ctx.store, name, role, f"pw-{name}-123456")
        made.append(ctx)
    cands = made[0].store.list_candidates(order="id", limit=1000)
    probed, other, decided = cands[3], cands[4], [cands[0], cands[1]]
    for ctx in made:
        for c in decided:  # a gold item both others decided, in both copies
            ctx.store.set_gold(c.id, "YES")
            for name in ("cyd", "ada"):
                ex = who(ctx, name)
                st, _ = vet_page.vet_jump(ctx, ex, views.new_state(), c.key, D, task=c.task)
                vet_writes.vet_act(ctx, ex, st, "accept", F, D, active_seconds=3.0)
    yield made, probed, other
    for ctx in made:
        ctx.store.close()


@pytest.mark.parametrize("hidden", ["gold YES", "gold NO", "audit", "gold YES, decided by another"])
def test_deciding_and_taking_back_shows_an_expert_nothing_of_a_hidden_item(twins, hidden):
    (plain, secret), item, other = twins
    if "another" in hidden:  # its one label slot (overlap 1) taken by another expert
        for ctx in (plain, secret):
            ex = who(ctx, "cyd")
            st, _ = vet_page.vet_jump(ctx, ex, views.new_state(), item.key, D, task=item.task)
            vet_writes.vet_act(ctx, ex, st, "accept", F, D, active_seconds=3.0)
    if hidden.startswith("gold"):
        secret.store.set_gold(item.id, hidden.split()[1].rstrip(","))
    else:
        secret.store.mark_audit({item.id: 0.5}, strata={item.id: "d1:0.90-0.99"})
    a = probe(plain, "bob", item.key, item.task, other.key)
    b = probe(secret, "bob", item.key, item.task, other.key)
    stages = ("before", "accepted", "taken back", "rejected")
    differ = {s: sorted(k for k in x if x[k] != y[k]) for s, x, y in zip(stages, a, b)}
    differ = {s: keys for s, keys in differ.items() if keys}
    assert not differ, f"what an expert sees changes with a hidden item: {differ}"
    # the admin sees gold figures: the same probe does tell them apart (the test can see)
    if hidden.startswith("gold"):
        a = probe(plain, "ada", item.key, item.task, other.key)
        b = probe(secret, "ada", item.key, item.task, other.key)
        assert any(x["dashboard all"] != y["dashboard all"] for x, y in zip(a, b))


def test_an_expert_gets_no_gold_figure_and_an_admin_does(twins):
    (ctx, _), item, _ = twins
    dv = dashboard_page.dashboard(ctx, who(ctx, "bob"))
    assert "Gold-standard accuracy is shown to admins" in json.dumps(dv.gold)
    assert dashboard_page.inspector_versions(ctx, who(ctx, "bob"))["data"] == []
    dv = dashboard_page.dashboard(ctx, who(ctx, "ada"))
    assert "Gold-standard accuracy per expert" in json.dumps(dv.gold)
    assert "/2" in json.dumps(dv.gold)  # each expert's gold items: correct/n
