"""The vet desk as each expert left it: filters and display options kept per expert in the
store, checked field by field, and the page opening with them (its first candidate built
with them, the toolbar saying which filters narrow the queue)."""

from __future__ import annotations

import re

import pytest

from annotate.team import prefs
from app import context as app_context
from app import views
from app.pages import desk
from app.pages import vet as vet_page
from app.ui import vet_prefs
from db.store import Store

PAGE = ["all", "all", "any", "all", "all", True, True, 0, "rest", False]  # the page's defaults


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "p.db")
    for name in ("ada", "bo"):
        s.create_expert(name)
    yield s
    s.close()


def test_each_expert_keeps_their_own_desk(store):
    assert prefs.remembered(store, "ada") == prefs.DEFAULTS
    prefs.remember(store, "ada", task="carbon", smooth=5, normalised=True)
    prefs.remember(store, "ada", frame="observed")  # the rest stays as kept
    prefs.remember(store, "bo", sky=True)
    ada = prefs.remembered(store, "ada")
    assert (ada["task"], ada["smooth"], ada["normalised"], ada["frame"]) == (
        "carbon", 5, True, "observed",
    )  # fmt: skip
    assert ada["sky"] is False and prefs.remembered(store, "bo")["sky"] is True
    assert prefs.remembered(store, "bo")["task"] == "all"
    # back to a default: nothing of it is stored
    prefs.remember(store, "ada", task="all", smooth=0, normalised=False, frame="rest")
    assert store.prefs("ada") == {}


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [("smooth", 40, "from 0 to 25"), ("smooth", "2.5", "whole number"),
     ("frame", "sideways", "rest, observed"), ("task", "dragons", "one of all"),
     ("band", "0.9-0.1", "P(YES) range"), ("markers", "maybe", "true or false"),
     ("colour", "red", "no desk preference")],
)  # fmt: skip
def test_a_bad_value_is_refused_by_name_and_nothing_is_kept(store, field, value, says):
    prefs.remember(store, "ada", task="wd")
    with pytest.raises(prefs.PrefError, match=re.escape(says)) as err:
        prefs.remember(store, "ada", **{"sky": True, field: value})
    assert field in str(err.value)
    assert store.prefs("ada") == {"task": "wd"}  # the good value beside it is not kept


def test_a_value_kept_before_a_field_changed_is_dropped_on_reading(store):
    store.put_prefs("ada", {"frame": "sideways", "smooth": 4, "gone": 1})
    p = prefs.remembered(store, "ada")
    assert p["frame"] == "rest" and p["smooth"] == 4 and "gone" not in p


def test_the_page_opens_with_the_experts_desk(ctx):
    """The first candidate is built with the kept display and filters; the components get
    the kept values, those the page shows already skipped; the summary names the filter."""
    ex = app_context.expert_for(ctx, None)
    prefs.remember(ctx.store, ex.name, task="wd", frame="observed", normalised=True)
    choices = {"task": ["all", "wd", "cv"], "band": ["all"], "status": ["any"], "split": ["all"]}
    st, values, kept = vet_prefs.opening(ctx, ex, views.new_state(), list(PAGE), choices)
    tk, band, status, survey, split, mk, err, sm, fr, im = values
    assert (tk, fr) == ("wd", "observed") and st["desk"]["normalised"] is True
    d = views.Display(mk, err, sm, fr, im)
    st, view = vet_page.vet_next(ctx, ex, st, views.QueueFilters(tk, band, status, survey, split),
                                 desk.display_with(st, d))  # fmt: skip
    assert "task <b>wd</b>" in view.header_html
    assert view.global_fig["layout"]["xaxis"]["title"]["text"].startswith("observed")
    assert view.global_fig["layout"]["yaxis"]["title"]["text"] == "flux / continuum"
    ups = vet_prefs.updates(kept, dict(zip(vet_prefs.FIELDS, PAGE)))
    names = [k for k in vet_prefs.FIELDS if k != "survey"]
    sent = {k: u["value"] for k, u in zip(names, ups) if "value" in u}
    assert sent == {"task": "wd", "frame": "observed", "normalised": True}
    assert "task <b>wd</b>" in ups[-1] and "observed" in ups[-1]
    # a kept value the page no longer offers leaves the page's
    _, values, _ = vet_prefs.opening(ctx, ex, views.new_state(), list(PAGE),
                                     {**choices, "task": ["all", "cv"]})  # fmt: skip
    assert values[0] == "all"


def test_a_desk_that_narrows_nothing_says_so():
    assert "all candidates" in vet_prefs.summary_html(dict(prefs.DEFAULTS))
    html = vet_prefs.summary_html({**prefs.DEFAULTS, "band": "0.2-0.4", "smooth": 3})
    assert "P(YES) <b>0.2-0.4</b>" in html and "smoothed <b>3 px</b>" in html
