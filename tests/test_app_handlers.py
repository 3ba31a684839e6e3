"""The app's handlers, called directly on a small seeded store (no browser, no server)."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import plotly.graph_objects as go
import pytest

from app import context as app_context
from app import views
from app.pages import author as author_page
from app.pages import dashboard as dashboard_page
from app.pages import experts as experts_page
from app.pages import export as export_page
from app.pages import upload as upload_page
from app.pages import vet as vet_page
from app.pages import vet_writes
from db.settings import DEFAULTS, ServeSettings
from tests.app_support import context

F, D = views.QueueFilters(), views.Display()


@pytest.fixture
def team(tmp_path_factory, tmp_path):
    """Login on, with an admin and two experts."""
    from annotate.team.experts import create_expert

    c = context(tmp_path_factory, tmp_path, login=True)
    create_expert(c.store, "ada", "admin", "pw-ada-123")
    create_expert(c.store, "bob", "expert", "pw-bob-123")
    create_expert(c.store, "cyd", "expert", "pw-cyd-123")
    yield c
    c.store.close()


def who(ctx, name):
    return app_context.expert_for(ctx, SimpleNamespace(username=name))


def test_first_item_is_the_least_certain(ctx):
    ex = app_context.expert_for(ctx, None)
    st, view = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    assert view.candidate_id is not None and view.global_fig is not None
    shown = ctx.store.candidate(st["current"])
    vetted = [c for c in ctx.store.list_candidates(limit=1000) if c.confidence is not None]
    assert abs(shown.confidence - 0.5) <= min(abs(c.confidence - 0.5) for c in vetted) + 0.05
    assert "loupe-conf" in view.header_html and shown.key in view.header_html
    assert view.steps and all(s.fig is not None for s in view.steps)
    # the page draws the panels as one figure, one row per step, thoughts in the same order
    lay = view.zoom_fig["layout"]
    assert sum(1 for k in lay if k.startswith("yaxis")) == len(view.steps)
    assert lay["height"] == len(view.steps) * vet_page.plots.PANEL_HEIGHT
    for i in range(len(view.steps)):
        assert f'id="vet-thought-{i}"' in view.thoughts_html


def test_accept_reject_correct_skip_flag_are_saved_at_once(ctx):
    ex = app_context.expert_for(ctx, None)
    st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    seen = []
    for action in ("accept", "reject", "skip", "flag"):
        cid = st["current"]
        seen.append(cid)
        st["shown_at"] = time.time() - 4.0  # as if the expert looked for four seconds
        st, view = vet_writes.vet_act(ctx, ex, st, action, F, D)
        assert view.message.startswith(f"Saved **{action}**")
        (r,) = ctx.store.reviews(candidate_id=cid)
        assert r.action == action and 3.9 < r.seconds < 30
        c = ctx.store.candidate(cid)
        if action == "accept":
            assert r.label == c.verdict
        if action == "reject":
            assert r.label == {"YES": "NO", "NO": "YES"}[c.verdict]
        if action == "flag":
            assert c.flagged
    assert len(set(seen)) == 4 and st["current"] not in seen
    cid = st["current"]
    st, view = vet_writes.vet_act(ctx, ex, st, "correct", F, D, label="YES", explanation="C2 at 5165",
                         wrong_step="2")  # fmt: skip
    (r,) = ctx.store.reviews(candidate_id=cid)
    assert (r.action, r.label, r.explanation, r.wrong_step) == ("correct", "YES", "C2 at 5165", 1)


def test_correct_without_label_stores_nothing(ctx):
    ex = app_context.expert_for(ctx, None)
    st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    st2, view = vet_writes.vet_act(ctx, ex, st, "correct", F, D, label=None)
    assert "Choose the correct label" in view.message
    assert st2["current"] == st["current"] and ctx.store.reviews() == []


def test_prev_next_walk_the_session_history(ctx):
    ex = app_context.expert_for(ctx, None)
    st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    a = st["current"]
    st, _ = vet_writes.vet_act(ctx, ex, st, "accept", F, D)
    b = st["current"]
    st, _ = vet_page.vet_prev(ctx, ex, st, F, D)
    assert st["current"] == a
    st, view = vet_page.vet_next(ctx, ex, st, F, D)
    assert st["current"] == b
    # revising one's own review from history is allowed and keeps the history
    st, _ = vet_page.vet_prev(ctx, ex, st, F, D)
    st, _ = vet_writes.vet_act(ctx, ex, st, "reject", F, D)
    (r,) = ctx.store.reviews(candidate_id=a)
    assert r.action == "reject" and r.revision == 2


def test_jump_to_id_and_unknown_id(ctx):
    ex = app_context.expert_for(ctx, None)
    target = ctx.store.list_candidates(limit=50, order="id")[-1]
    st, view = vet_page.vet_jump(ctx, ex, views.new_state(), target.key, D)
    assert st["key"] == target.key and view.candidate_id == target.key
    st, view = vet_page.vet_jump(ctx, ex, st, "no-such-object", D)
    assert "No candidate" in view.message and st["key"] == target.key


def test_filters_restrict_the_queue(ctx):
    ex = app_context.expert_for(ctx, None)
    st, view = vet_page.vet_next(ctx, ex, views.new_state(), views.QueueFilters(task="carbon"), D)
    assert ctx.store.candidate(st["current"]).task == "carbon"
    st, view = vet_page.vet_next(
        ctx, ex, views.new_state(), views.QueueFilters(task="wd", band="0.8-1.0"), D
    )
    if st["current"] is not None:
        assert ctx.store.candidate(st["current"]).confidence >= 0.8
    st, view = vet_page.vet_next(
        ctx, ex, views.new_state(), views.QueueFilters(survey="no-such-survey"), D
    )
    assert st["current"] is None and "Nothing left" in view.message


def test_comment_is_kept_then_saved_with_the_decision(ctx):
    ex = app_context.expert_for(ctx, None)
    st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    cid = st["current"]
    st, msg = vet_writes.vet_comment(ctx, ex, st, "odd continuum <b>x</b>")
    assert "kept" in msg and ctx.store.reviews() == []
    st, _ = vet_writes.vet_act(ctx, ex, st, "accept", F, D)
    (r,) = ctx.store.reviews(candidate_id=cid)
    assert r.comment == "odd continuum <b>x</b>"
    st, _ = vet_page.vet_prev(ctx, ex, st, F, D)
    st, msg = vet_writes.vet_comment(ctx, ex, st, "second thought")
    (r,) = ctx.store.reviews(candidate_id=cid)
    assert r.comment == "second thought" and r.action == "accept"


def test_display_options_and_model_images(ctx):
    ex = app_context.expert_for(ctx, None)
    st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    st, view = vet_page.vet_refresh(ctx, ex, st, views.Display(markers=False, smooth=5, frame="observed",
                                                    images=True))  # fmt: skip
    assert all(s.image is not None and s.image.size[0] > 100 for s in view.steps)
    assert view.thoughts_html.count('src="data:image/png;base64,') == len(view.steps)
    assert view.zoom_fig["layout"]["height"] == len(view.steps) * vet_page.IMAGE_PANEL_HEIGHT
    assert any(t["name"].startswith("smoothed") for t in view.global_fig["data"])
    assert "observed" in view.global_fig["layout"]["xaxis"]["title"]["text"]


def test_skipping_serves_a_new_candidate_with_its_panels_each_time(ctx):
    # How fast is for bench/app_latency.py (its "server" figure); a timing bound here
    # would be noise on a shared CI machine.
    ex = app_context.expert_for(ctx, None)
    st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    seen = [st["current"]]
    for _ in range(8):
        st, view = vet_writes.vet_act(ctx, ex, st, "skip", F, D)
        if st["current"] is None:
            break
        assert st["current"] not in seen and view.global_fig["data"]
        seen.append(st["current"])
    assert len(seen) >= 5


def test_login_mode_identity_and_permissions(team):
    assert app_context.expert_for(team, SimpleNamespace(username=None)) is None
    assert app_context.expert_for(team, SimpleNamespace(username="mallory")) is None
    st, view = vet_writes.vet_act(team, None, {"current": 1, "key": "x"}, "accept", F, D)
    assert "Log in" in view.message and team.store.reviews() == []
    bob, cyd, ada = who(team, "bob"), who(team, "cyd"), who(team, "ada")
    from annotate.team import settings as team_settings

    team_settings.change(team.store, "overlap", "2", "ada")  # two labels per item asked
    st, _ = vet_page.vet_jump(team, bob, views.new_state(), team.store.candidate(1).key, D)
    vet_writes.vet_act(team, bob, st, "accept", F, D)
    st, _ = vet_page.vet_jump(team, cyd, views.new_state(), team.store.candidate(1).key, D)
    vet_writes.vet_act(team, cyd, st, "reject", F, D)
    by = {team.store.expert(r.expert_id).name: r for r in team.store.reviews(candidate_id=1)}
    assert by["bob"].action == "accept" and by["cyd"].action == "reject"  # each their own
    assert "Refused" in export_page.run_export(team, bob, "rl").message
    assert "Refused" in experts_page.add_expert(team, bob, "eve", "admin", "x")
    assert team.store.expert("eve") is None
    assert "saved" in experts_page.add_expert(team, ada, "eve", "expert", "pw-eve-123")
    assert team.store.expert("eve").role == "expert"


def test_author_two_steps_submit_and_audit(team):
    bob, ada = who(team, "bob"), who(team, "ada")
    key = team.store.candidate(1).key
    d, view = author_page.author_load(team, bob, None, key, "blank")
    assert d.candidate_id == 1 and view.global_fig["layout"]["dragmode"] == "select"
    img, fig, msg = author_page.author_zoom(team, d, 6450, 6680, "Hα")
    assert img is not None and fig is not None and "6450" in msg
    d, view, form = author_page.author_step(team, bob, d, "add", lo=6450, hi=6680, label="Hα",
                                  thought="H-alpha in emission")  # fmt: skip
    assert form == [None, None, "", ""] and view.rows[0][2] == "Hα"
    d, view, form = author_page.author_step(team, bob, d, "add", lo=4800, hi=4950, label="",
                                  thought="H-beta too")  # fmt: skip
    d, view, _ = author_page.author_step(team, bob, d, "up", index=2)
    assert [s.thought for s in d.steps] == ["H-beta too", "H-alpha in emission"]
    assert [r[3] for r in view.rows] == ["H-beta too", "H-alpha in emission"]
    d, view, _ = author_page.author_step(team, bob, d, "add", lo=1, hi=2, thought="outside")
    assert "Not done" in view.message and len(d.steps) == 2
    d, view = author_page.author_finish(team, bob, d, "submit", None, "")
    assert "Before submitting" in view.message and "verdict" in view.message
    assert d.authored_id is None and team.store.list_authored() == []
    d, view = author_page.author_finish(team, bob, d, "submit", "YES", "Balmer emission: a CV")
    assert "Submitted" in view.message
    a = team.store.authored(d.authored_id)
    assert a.status == "submitted" and len(a.steps) == 3 and a.verdict == "YES"
    assert author_page.audit_choices(team, bob) == []  # not one's own
    pick = author_page.audit_choices(team, ada)[0][1]
    assert "H-alpha" in author_page.audit_view(team, ada, pick)
    assert "saying what to change" in author_page.audit_decide(team, ada, pick, "send_back", "")
    assert team.store.authored(a.id).status == "submitted"
    assert "sent back" in author_page.audit_decide(
        team, ada, pick, "send_back", "zoom on He II too"
    )
    d2, view = author_page.author_load(team, bob, None, key, "blank")
    assert d2.authored_id == a.id and "zoom on He II" in view.header_html
    d2, _ = author_page.author_finish(team, bob, d2, "submit", "YES", "Balmer emission: a CV")
    assert "zoom on He II too" in author_page.audit_view(
        team, ada, str(a.id)
    )  # earlier round shown
    assert "approved" in author_page.audit_decide(team, ada, str(a.id), "approve", "fine")
    assert team.store.authored(a.id).status == "approved"


def test_author_edit_replace_delete_keep_the_form(team):
    bob = who(team, "bob")
    d, _ = author_page.author_load(team, bob, None, team.store.candidate(1).key, "blank")
    d, _, _ = author_page.author_step(
        team, bob, d, "add", lo=4800, hi=4950, label="Hβ", thought="one"
    )
    d, _, _ = author_page.author_step(team, bob, d, "add", lo=6450, hi=6680, thought="two")
    d, view, form = author_page.author_step(team, bob, d, "edit", index=1)
    assert form == [4800.0, 4950.0, "Hβ", "one"] and "in the form" in view.message
    d, view, _ = author_page.author_step(team, bob, d, "replace", index=1, lo=4300, hi=4400, label="",
                               thought="one, moved to H-gamma")  # fmt: skip
    assert d.steps[0].window == (4300.0, 4400.0) and d.steps[0].thought.endswith("H-gamma")
    assert "label" not in d.steps[0].tool_call["arguments"]  # an emptied label is dropped
    before = d
    d, view, form = author_page.author_step(team, bob, d, "add", lo=4000, hi=4100, thought="<answer>x",
                                  verdict="NO", explanation="kept")  # fmt: skip
    assert "Not done" in view.message and len(d.steps) == 2 and form[3] == "<answer>x"
    assert d.explanation == "kept" and d.verdict == "NO" and before.verdict is None
    d, view, _ = author_page.author_step(team, bob, d, "down", index=2)
    assert "cannot move down" in view.message
    d, view, _ = author_page.author_step(team, bob, d, "delete", index=1)
    assert [s.thought for s in d.steps] == ["two"]
    d, view = author_page.author_finish(team, bob, d, "save", "NO", "narrow lines")
    assert "saved" in view.message and team.store.authored(d.authored_id).status == "draft"


def test_author_from_agent_draft(ctx):
    ex = app_context.expert_for(ctx, None)
    c = next(c for c in ctx.store.list_candidates(limit=100) if c.trajectory_id)
    d, view = author_page.author_load(ctx, ex, None, c.key, "agent draft")
    t = ctx.store.trajectory(c.trajectory_id)
    assert len(d.steps) == len(t.zooms) and d.verdict == t.verdict
    assert d.based_on == c.trajectory_id and d.renderer == t.renderer
    same, view = author_page.author_load(ctx, ex, d, "no-such-object", "blank")
    assert same is d and "No candidate" in view.message  # the draft in hand is kept


def test_dashboard_figures_are_valid(ctx):
    ex = app_context.expert_for(ctx, None)
    st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    for action in ("accept", "reject", "accept"):
        st["shown_at"] = time.time() - 5
        st, _ = vet_writes.vet_act(ctx, ex, st, action, F, D)
    dv = dashboard_page.dashboard(ctx, ex, "all", 0.9)
    for fig in (dv.progress, dv.rates, dv.confusion, dv.reliability, dv.speed, dv.gold):
        go.Figure(fig)
    assert "3** decisions" in dv.summary
    assert sum(r[1] for r in dv.per_task["data"]) == 3


def test_uploads_are_validated_and_paths_confined(ctx, tmp_path):
    ex = app_context.expert_for(ctx, None)
    junk = tmp_path / "junk.fits"
    junk.write_bytes(b"not a fits file at all" * 10)
    msg = upload_page.ingest_upload(ctx, ex, [str(junk)], "cv")
    assert "refused" in msg and not any((ctx.data_roots[0] / "uploads").glob("*junk*"))
    big = tmp_path / "big.fits"
    big.write_bytes(b"\0" * 2048)
    ctx.settings = ServeSettings(max_upload_bytes=1024)
    assert "limit" in upload_page.ingest_upload(ctx, ex, [str(big)], "cv")
    assert "outside the data roots" in upload_page.ingest_upload(ctx, ex, [], "cv", "/etc/passwd")
    assert "outside the data roots" in upload_page.ingest_upload(ctx, ex, [], "cv",
                                                       str(ctx.data_roots[0] / ".." / ".."))  # fmt: skip
    ctx.settings = DEFAULTS
    good = next((ctx.data_roots[0] / "demo").glob("*.fits"))
    n0 = ctx.store.count_candidates()
    msg = upload_page.ingest_upload(ctx, ex, [str(good)], "wd")
    assert "1 spectrum" in msg and "vetted" in msg
    assert ctx.store.count_candidates() >= n0  # same file: may already be a wd candidate


def test_moving_is_not_deciding(ctx):
    ex = app_context.expert_for(ctx, None)
    st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    seen = [st["current"]]
    for _ in range(12):
        st, view = vet_page.vet_next(ctx, ex, st, F, D)
        seen.append(st["current"])
    assert len(set(seen)) == 13 and ctx.store.reviews() == []  # twelve j presses, no skips
    st, _ = vet_page.vet_prev(ctx, ex, st, F, D)
    assert st["current"] == seen[-2] and ctx.store.reviews() == []
    st, view = vet_writes.vet_act(ctx, ex, st, "skip", F, D)
    assert [r.action for r in ctx.store.reviews()] == ["skip"]


def test_grade_undo_and_reason(ctx):
    ex = app_context.expert_for(ctx, None)
    st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    a = st["current"]
    st, msg = vet_writes.vet_grade(ctx, ex, st, "3")
    assert "kept" in msg and ctx.store.reviews() == []
    st, view = vet_writes.vet_act(ctx, ex, st, "reject", F, D, explanation="an M giant: TiO only",
                                active_seconds=7.5)  # fmt: skip
    (r,) = ctx.store.reviews(candidate_id=a)
    assert (r.action, r.grade, r.explanation, r.seconds) == ("reject", 3, "an M giant: TiO only",
                                                             7.5)  # fmt: skip
    assert "7.5 s active" in view.message
    # the grade alone, after deciding: a revision of the review
    st, _ = vet_page.vet_prev(ctx, ex, st, F, D)
    st, msg = vet_writes.vet_grade(ctx, ex, st, 4)
    assert (
        "saved" in msg
        and ctx.store.review(r.id).grade == 4
        and ctx.store.review(r.id).revision == 2
    )
    st, view = vet_page.vet_next(ctx, ex, st, F, D)
    b = st["current"]
    # undo: the last decision is taken back, kept in the history, and shown again
    st, view = vet_writes.vet_undo(ctx, ex, st, D)
    assert st["current"] == a and "Took back your **reject**" in view.message
    assert [h.action for h in ctx.store.review_history(r.id)] == ["reject", "reject"]
    assert ctx.store.review(r.id).action == "undo" and ctx.store.candidate(a).label is None
    st, view = vet_writes.vet_undo(ctx, ex, st, D)
    assert "Nothing to undo" in view.message
    st, _ = vet_writes.vet_act(ctx, ex, st, "accept", F, D)
    assert ctx.store.review(r.id).action == "accept" and b is not None
    # the correct panel never starts from the agent's explanation, and warns on notes
    assert view.explanation == ""
    st, view = vet_writes.vet_act(ctx, ex, st, "correct", F, D, label="NO",
                                explanation="the agent mislabelled this")  # fmt: skip
    assert "reads like a note about the agent" in view.message
    st, view = vet_writes.vet_act(ctx, ex, st, "correct", F, D, label="NO", explanation="x" * 2001)
    assert "Not saved" in view.message and "2001 characters" in view.message


def test_jump_to_an_id_of_several_tasks_asks_which(ctx):
    ex = app_context.expert_for(ctx, None)
    keys = [c.key for c in ctx.store.list_candidates(limit=1000, order="id")]
    multi = next(k for k in keys if keys.count(k) > 1)
    tasks = vet_page.tasks_of(ctx, multi)
    assert len(tasks) > 1
    st, view = vet_page.vet_jump(ctx, ex, views.new_state(), multi, D)
    assert view.jump_tasks == tasks and "choose one" in view.message and st["key"] != multi
    st, view = vet_page.vet_jump(ctx, ex, st, multi, D, task=tasks[-1])
    assert st["key"] == multi and ctx.store.candidate(st["current"]).task == tasks[-1]
    d, dv = author_page.author_load(ctx, ex, None, multi, "blank")
    assert d is None and "choose" in dv.message and dv.tasks == tasks
    d, dv = author_page.author_load(ctx, ex, None, multi, "blank", task=tasks[-1])
    assert d.task == tasks[-1]


def test_each_zoom_panel_shows_the_agents_reading_of_it(ctx):
    """A turn's thought precedes its zoom, so the reading of zoom k is turn k+1's thought:
    that is what stands beside panel k, with the thought that asked for it folded below."""
    ex = app_context.expert_for(ctx, None)
    st, view = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    traj = ctx.store.trajectory(ctx.store.candidate(st["current"]).trajectory_id)
    zooms = [i for i, s in enumerate(traj.steps) if s.window is not None]
    assert len(zooms) >= 2 and zooms[-1] + 1 < len(traj.steps)
    for row, i in enumerate(zooms[: len(view.steps)]):
        html = view.steps[row].thought_html
        reading, asked = html.split("<details>")
        words = traj.steps[i + 1].thought.split()[:4]
        assert " ".join(words) in reading  # the next turn's thought reads this panel
        assert " ".join(traj.steps[i].thought.split()[:4]) in asked


def test_upload_records_the_run_params_and_resumes(ctx, tmp_path):
    from agent.loop import DEFAULT_MAX_TURNS
    from tests.store_factory import write_text_spectrum

    ex = app_context.expert_for(ctx, None)
    [seeded_run] = ctx.store.runs()  # the demo set, vetted by the same pipeline
    before = ctx.store.done_keys(run_id=seeded_run.id)
    spec = write_text_spectrum(tmp_path / "upload.csv", seed=5)
    msg = upload_page.ingest_upload(ctx, ex, [str(spec)], "cv")
    assert "1 candidate(s) vetted" in msg
    [run] = ctx.store.runs()  # the upload joined the serving policy's run
    assert run.id == seeded_run.id
    assert (run.policy, run.renderer) == ("rules", "fast")
    assert run.params == {"max_turns": DEFAULT_MAX_TURNS}
    after = ctx.store.done_keys(run_id=run.id)
    [new] = after - before
    traj_id = ctx.store.find_candidate(new[0], new[1]).trajectory_id
    # The same file again: the candidate is already vetted by this run, so nothing re-runs.
    msg = upload_page.ingest_upload(ctx, ex, [str(spec)], "cv")
    assert "0 candidate(s) vetted" in msg
    assert ctx.store.done_keys(run_id=run.id) == after
    assert ctx.store.find_candidate(new[0], new[1]).trajectory_id == traj_id


def test_jump_and_next_lease_for_the_teams_lease(ctx):
    ex = app_context.expert_for(ctx, None)
    ctx.store.set_setting("lease_seconds", 90)
    st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    key = ctx.store.candidate(st["current"]).key
    st, _ = vet_page.vet_jump(ctx, ex, views.new_state(), key, D)
    leases = ctx.store.leases(st["current"])
    assert leases
    for lease in leases:
        held = (lease.expires - lease.created).total_seconds()
        assert 85 <= held <= 95, held  # the team's 90 s, not the store's 600 s default


def test_the_experts_redshift_is_stored_with_the_decision(ctx):
    """z = 1.27 typed on the shown candidate is saved as the expert's; an adopted estimate
    as the agent's; a candidate without a chosen z stores none."""
    from app.pages import desk

    ex = app_context.expert_for(ctx, None)
    st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    a = st["current"]
    st, _ = desk.keep_z(ctx, ex, desk.set_z(st, 1.27))
    st, _ = vet_writes.vet_act(ctx, ex, st, "accept", F, D)
    (r,) = ctx.store.reviews(candidate_id=a)
    assert (r.redshift, r.redshift_source) == (1.27, "expert")
    b = st["current"]
    assert b != a
    st, _ = desk.keep_z(ctx, ex, desk.set_z(st, 0.5, source="agent"))
    st, _ = vet_writes.vet_act(ctx, ex, st, "skip", F, D)
    (r2,) = ctx.store.reviews(candidate_id=b)
    assert (r2.redshift, r2.redshift_source) == (0.5, "agent")
    # the z chosen on b does not follow the expert to the next candidate
    c = st["current"]
    st, _ = vet_writes.vet_act(ctx, ex, st, "flag", F, D)
    (r3,) = ctx.store.reviews(candidate_id=c)
    assert (r3.redshift, r3.redshift_source) == (None, None)


def test_prefetch_is_what_j_and_k_bring(ctx):
    """What the page draws ahead at j/k is the candidate the server then shows: the next
    item is leased ahead, and its panels are built once."""
    import json

    ex = app_context.expert_for(ctx, None)
    st, first = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    ahead = vet_page.prefetch(ctx, ex, st, F, D)
    assert ahead["for"] == first.candidate_id and "prev" not in ahead
    nxt = ahead["next"]
    assert nxt["key"] != first.candidate_id and nxt["key"] in nxt["header"]
    fig = json.loads(nxt["global"])
    assert fig["layout"]["meta"]["candidate"] == nxt["key"]
    st, second = vet_page.vet_next(ctx, ex, st, F, D)
    assert second.candidate_id == nxt["key"] and second.header_html == nxt["header"]
    assert vet_page.plots.to_json(vet_page.plots.stamped(second.global_fig)) == nxt["global"]
    # k: the previous candidate, whose panels come from the cache
    back = vet_page.prefetch(ctx, ex, st, F, D)["prev"]
    assert back["key"] == first.candidate_id
    st, again = vet_page.vet_prev(ctx, ex, st, F, D)
    assert again.global_fig is first.global_fig and again.header_html == back["header"]
    # a decision brings the item leased ahead too
    ahead = vet_page.prefetch(ctx, ex, st, F, D)
    st, _ = vet_page.vet_next(ctx, ex, st, F, D)
    ahead = vet_page.prefetch(ctx, ex, st, F, D)
    st, view = vet_writes.vet_act(ctx, ex, st, "skip", F, D)
    assert view.candidate_id == ahead["next"]["key"]


def _leases(ctx, name: str) -> dict[int, float]:
    """candidate id -> seconds the expert's live lease was taken for."""
    eid = ctx.store.expert(name).id
    return {x.candidate_id: (x.expires - x.created).total_seconds()
            for x in ctx.store.leases() if x.expert_id == eid}  # fmt: skip


def test_undo_takes_the_teams_lease_and_keeps_the_item_shown(team):
    """Undo leases the item taken back for the team's lease, names who else holds it, and
    leaves the lease on the item the expert was looking at, so the queue does not hand that
    one to another expert (overlap 1)."""
    ctx = team
    ctx.store.set_setting("lease_seconds", 90)
    ada, bob, cyd = who(ctx, "ada"), who(ctx, "bob"), who(ctx, "cyd")
    st, _ = vet_page.vet_next(ctx, ada, views.new_state(), F, D)
    x = st["current"]
    # cyd opens it too (before ada's label fills its one slot: a jump to a full item takes
    # no lease, as it could not be decided)
    vet_page.vet_jump(ctx, cyd, views.new_state(), ctx.store.candidate(x).key, D)
    st, _ = vet_writes.vet_act(ctx, ada, st, "accept", F, D)
    y = st["current"]
    assert vet_page.prefetch(ctx, ada, st, F, D) is not None  # the next one drawn ahead
    st, view = vet_writes.vet_undo(ctx, ada, st, D)
    held = _leases(ctx, "ada")
    assert 85 <= held[x] <= 95, held[x]  # the team's 90 s, not the store's 600 s default
    assert y in held
    bst, _ = vet_page.vet_next(ctx, bob, views.new_state(), F, D)
    assert bst["current"] not in (x, y)
    assert st["current"] == x and "Also open for cyd" in view.message


def test_history_does_not_send_an_expert_to_an_item_another_has_taken(team):
    """Overlap 1: an item ada moved past and bob was then served is passed over when ada
    walks her history, and a decision on it is refused: never two reviews."""
    ctx = team
    ada, bob = who(ctx, "ada"), who(ctx, "bob")
    st, _ = vet_page.vet_next(ctx, ada, views.new_state(), F, D)
    x = st["current"]
    st, _ = vet_page.vet_next(ctx, ada, st, F, D)  # j: ada moves past x undecided
    y = st["current"]
    bst, _ = vet_page.vet_next(ctx, bob, views.new_state(), F, D)
    assert bst["current"] == x  # x was free again: bob is served it
    st, view = vet_page.vet_prev(ctx, ada, st, F, D)  # k: back towards x
    assert st["current"] == y and "Passed over" in view.message
    # a stale page that still shows x cannot decide it
    stale = {**st, "current": x, "key": ctx.store.candidate(x).key}
    _, view = vet_writes.vet_act(ctx, ada, stale, "accept", F, D)
    assert "Not saved" in view.message and "taken by another expert" in view.message
    vet_writes.vet_act(ctx, bob, bst, "reject", F, D, explanation="a sky line")
    assert [r.expert_id for r in ctx.store.reviews(candidate_id=x)] == [ctx.store.expert("bob").id]


def test_undo_brings_back_the_earlier_decision_and_is_never_a_decision(ctx):
    """Grade 3, accept, k, reject with a reason, undo: the accept is back with its label and
    grade; the header counts one review; the VI file and the Dashboard hold no undo. A
    second undo leaves no decision, and nothing is counted or exported for it."""
    from annotate.export.vi import vi_rows

    ex = app_context.expert_for(ctx, None)
    st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    a = st["current"]
    verdict = ctx.store.candidate(a).verdict
    st, _ = vet_writes.vet_grade(ctx, ex, st, 3)
    st, _ = vet_writes.vet_act(ctx, ex, st, "accept", F, D)
    st, _ = vet_page.vet_prev(ctx, ex, st, F, D)
    assert st["current"] == a
    st, _ = vet_writes.vet_act(ctx, ex, st, "reject", F, D, explanation="TiO only")
    st, view = vet_writes.vet_undo(ctx, ex, st, D)
    assert st["current"] == a and "earlier **accept** is back" in view.message
    (r,) = ctx.store.reviews(candidate_id=a)
    assert (r.action, r.label, r.grade, r.explanation) == ("accept", verdict, 3, None)
    assert ctx.store.candidate(a).label == verdict
    assert "1 review(s)" in view.header_html and "your review: <b>accept" in view.header_html
    assert [row["action"] for row in vi_rows(ctx.store)] == ["accept"]
    st, view = vet_writes.vet_undo(ctx, ex, st, D)
    assert "undecided again" in view.message
    assert ctx.store.review(r.id).action == "undo"
    assert "review(s)" not in view.header_html and "your review" not in view.header_html
    assert list(vi_rows(ctx.store)) == []
    stats = ctx.store.dashboard_stats()
    assert stats.n_reviews == 0 and not any("undo" in a for a in stats.actions.values())
    dash = dashboard_page.dashboard(ctx, ex, "all")
    assert "**0** decisions" in dash.summary


def test_experts_at_once_never_review_an_item_twice_under_overlap_1(team):
    """Three experts press keys at once (j, k, decisions, undo) through the page's
    handlers: under overlap 1 no item that is not gold ends with two labelled reviews."""
    import random

    from tests.concurrency import run_threads

    ctx = team
    ctx.store.create_expert("dan")

    def desk(name: str, seed: int) -> None:
        rng = random.Random(seed)
        ex = who(ctx, name)
        st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
        for _ in range(14):
            key = rng.choice("aaarjkuu")
            if key == "j":
                st, _ = vet_page.vet_next(ctx, ex, st, F, D)
            elif key == "k":
                st, _ = vet_page.vet_prev(ctx, ex, st, F, D)
            elif key == "u":
                st, _ = vet_writes.vet_undo(ctx, ex, st, D)
            else:
                action = "accept" if key == "a" else "reject"
                st, _ = vet_writes.vet_act(ctx, ex, st, action, F, D, explanation="x")
            vet_page.prefetch(ctx, ex, st, F, D)

    run_threads(desk, [("bob", 1), ("cyd", 2), ("dan", 3)], barrier=True, timeout=600)
    labelled: dict[int, int] = {}
    for r in ctx.store.reviews(actions=("accept", "reject", "correct")):
        labelled[r.candidate_id] = labelled.get(r.candidate_id, 0) + 1
    assert labelled, "the experts decided nothing"
    twice = [c for c, n in labelled.items() if n > 1 and not ctx.store.candidate(c).is_gold]
    assert twice == []


def page_for(ctx, cid: int, tab: str = "", **texts: str) -> str:
    """What the page sends with a write on candidate `cid` as it shows it now."""
    from annotate import review

    c = ctx.store.candidate(cid)
    rev = review.revision(ctx.store, cid)
    return json.dumps({"cid": cid, "key": c.key, "task": c.task, "rev": rev, "tab": tab, **texts})


def test_two_decisions_ahead_and_each_decision_acts_on_the_candidate_it_names(ctx):
    """The page is handed the next two candidates (a second key pressed before the server's
    answer draws the one after), both leased; each decision acts on exactly the candidate
    its page names, whatever the session last showed, and one naming a revision older than
    the store's is refused, naming the candidate, and changes nothing."""
    ex = app_context.expert_for(ctx, None)
    st, first = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    ahead = vet_page.prefetch(ctx, ex, st, F, D)
    nxt, after = ahead["next"]["key"], ahead["after"]["key"]
    assert len({first.candidate_id, nxt, after}) == 3
    held = {ctx.store.candidate(c).key for c in _leases(ctx, ex.name)}
    assert {first.candidate_id, nxt, after} <= held
    ids = {ctx.store.find_candidate(k).key: ctx.store.find_candidate(k).id for k in (nxt, after)}
    # the page drew `nxt` at the key press; the accept names `first`
    st, view = vet_writes.vet_act(ctx, ex, st, "accept", F, D, page=page_for(ctx, st["current"]))
    assert view.candidate_id == nxt and len(ctx.store.reviews()) == 1
    assert vet_page.prefetch(ctx, ex, st, F, D)["next"]["key"] == after
    # a second accept pressed on `nxt` names it, though the session shows `after` by now
    stale = page_for(ctx, ids[nxt])
    st, view = vet_writes.vet_act(ctx, ex, st, "accept", F, D, page=stale)
    assert view.candidate_id == after and len(ctx.store.reviews()) == 2
    assert ctx.store.reviews(candidate_id=ids[nxt])[0].action == "accept"
    # the same page again, its revision now old: a conflict, nothing written
    st, view = vet_writes.vet_act(ctx, ex, st, "skip", F, D, page=stale)
    assert "changed since this tab showed it" in view.message and nxt in view.message
    assert ctx.store.reviews(candidate_id=ids[nxt])[0].action == "accept"
    assert view.candidate_id == nxt  # shown again, as it is now
