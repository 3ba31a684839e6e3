"""The expert's desk off the browser: VI CSV, password length, account list, dashboard
colours, `make run PORT=`, templates and continuum normalisation."""

from __future__ import annotations

import argparse
import csv
import shutil
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from annotate.export import vi
from annotate.team.experts import MIN_PASSWORD_LENGTH, create_expert, set_password, update_expert
from app import context as app_context
from app import views
from app.pages import dashboard as dashboard_page
from app.pages import experts as experts_page
from app.pages import export as export_page
from app.pages import vet as vet_page
from app.pages import vet_writes
from db.store import StoreError

F, D = views.QueueFilters(), views.Display()
REPO = Path(__file__).resolve().parent.parent


def _decide(ctx, actions):
    ex = app_context.expert_for(ctx, None)
    st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    keys = []
    for action in actions:
        keys.append(st["key"])
        st["shown_at"] = time.time() - 4
        st, _ = vet_writes.vet_act(ctx, ex, st, action, F, D, comment=f"note on {st['key']}")
    return keys


def test_vi_csv_has_one_row_per_decision(ctx, tmp_path):
    keys = _decide(ctx, ["accept", "reject", "flag"])
    out = tmp_path / "vi.csv"
    n = vi.write_vi(ctx.store, out)
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert n == 3 and [r["id"] for r in rows] == keys
    assert list(rows[0]) == list(vi.COLUMNS)
    by = {r["id"]: r for r in rows}
    first = ctx.store.find_candidate(keys[0])
    assert by[keys[0]]["action"] == "accept" and by[keys[0]]["verdict"] == first.verdict
    assert by[keys[1]]["verdict"] == {"YES": "NO", "NO": "YES"}[ctx.store.find_candidate(
        keys[1]).verdict]  # fmt: skip
    assert by[keys[2]]["verdict"] == ""  # a flag sets no label
    assert all(r["expert"] == "local" and float(r["seconds"]) >= 4 for r in rows)
    assert by[keys[0]]["comment"] == f"note on {keys[0]}"
    assert rows[0]["time"].endswith("Z") and rows[0]["task"] == first.task


def test_vi_csv_layouts_and_campaigns(ctx, tmp_path):
    _decide(ctx, ["accept", "accept"])
    out = tmp_path / "p.csv"
    vi.write_vi(ctx.store, out, layout="prospect")
    head = out.read_text().splitlines()[0].split(",")
    assert {"TARGETID", "VI_scanner", "VI_quality", "VI_z", "VI_comment"} <= set(head)
    with pytest.raises(vi.VIError, match="unknown layout"):
        vi.write_vi(ctx.store, out, layout="excel")
    with pytest.raises(vi.VIError, match="no decisions in campaign 'nowhere'"):
        vi.write_vi(ctx.store, out, campaign="nowhere")
    paths = vi.write_per_campaign(ctx.store, tmp_path / "per")
    total = sum(len(p.read_text().splitlines()) - 1 for p in paths)
    assert paths and total == 2


def test_vi_from_the_command_line(ctx, tmp_path):
    from commands import export as cli

    _decide(ctx, ["reject"])
    p = argparse.ArgumentParser()
    cli.add_arguments(p)
    db = f"sqlite:///{tmp_path / 'loupe.db'}"  # the store the context opened
    args = p.parse_args(["vi", "--db", db, "--out", str(tmp_path / "o" / "vi.csv")])
    assert cli.main(args) == 0
    assert len((tmp_path / "o" / "vi.csv").read_text().splitlines()) == 2
    bad = p.parse_args(["vi", "--db", db, "--out", str(tmp_path / "x.csv"), "--campaign", "no"])
    assert cli.main(bad) == 2


def test_vi_download_is_everyones_for_admins(ctx, tmp_path):
    _decide(ctx, ["accept"])
    msg, files = export_page.vi_download(ctx, app_context.Viewer("local", "admin"))
    assert files and Path(files[0]).is_file() and "1 campaign" in msg
    # an expert gets their own decisions only: bob has none
    msg, files = export_page.vi_download(ctx, app_context.Viewer("bob", "expert"))
    assert msg.startswith("No decisions yet") and files == []
    assert export_page.vi_download(ctx, None)[0].startswith("Refused")


def test_password_minimum_length(ctx):
    short = "x" * (MIN_PASSWORD_LENGTH - 1)
    with pytest.raises(StoreError, match=f"at least {MIN_PASSWORD_LENGTH}"):
        create_expert(ctx.store, "eve", "expert", short)
    assert ctx.store.expert("eve") is None
    create_expert(ctx.store, "eve", "expert", "x" * MIN_PASSWORD_LENGTH)
    with pytest.raises(StoreError, match="'eve'"):
        update_expert(ctx.store, "eve", password="short")
    with pytest.raises(StoreError):
        set_password(ctx.store, "eve", "short")
    set_password(ctx.store, "eve", "a long enough one")
    assert ctx.store.verify_password("eve", "a long enough one") is not None
    admin = app_context.Viewer("local", "admin")
    assert "Refused" in experts_page.add_expert(ctx, admin, "fay", "expert", "tiny")
    assert ctx.store.expert("fay") is None


def test_only_admins_see_the_accounts(ctx):
    admin = experts_page.expert_table(ctx, app_context.Viewer("local", "admin"))
    plain = experts_page.expert_table(ctx, app_context.Viewer("bob", "expert"))
    assert admin["headers"] == plain["headers"] == experts_page.HEADERS
    assert [r[0] for r in admin["data"]] == ["local"] and plain["data"] == []
    assert "Only admins" in experts_page.experts_note(app_context.Viewer("bob", "expert"))


def test_confusion_matrix_shows_errors_as_errors():
    tot = SimpleNamespace(tp=8, fn=2, fp=5, tn=1)
    fig = dashboard_page.confusion_figure(tot, "t")
    (hm,) = fig["data"]
    assert hm["text"] == [[8, 2], [5, 1]]
    z = np.array(hm["z"])
    # the diagonal (agreement) is on the green side, the errors on the red side, however many
    assert z[0, 0] > 0 and z[1, 1] > 0 and z[0, 1] < 0 and z[1, 0] < 0
    assert hm["colorscale"][0][1] == "#c1121f" and hm["colorscale"][-1][1] == "#2a9d8f"
    assert fig["layout"]["margin"]["l"] >= 90 and fig["layout"]["yaxis"]["automargin"]


def test_dashboard_tables_have_headers_when_empty(ctx):
    dv = dashboard_page.dashboard(ctx, None)
    assert dv.per_task["headers"][0] == "task" and dv.kappa["headers"][0] == "task"


@pytest.mark.skipif(shutil.which("make") is None, reason="make is absent")
@pytest.mark.parametrize(
    "args,env,port",
    [([], {}, "7860"), (["PORT=8000"], {}, "8000"), ([], {"LOUPE_PORT": "8123"}, "8123")],
)
def test_make_run_port(args, env, port, tmp_path):
    import os

    e = {k: v for k, v in os.environ.items() if k not in ("PORT", "LOUPE_PORT")} | env
    out = subprocess.run(["make", "-n", "-W", "requirements.txt", "run", *args], cwd=REPO,
                         capture_output=True, text=True, env=e, check=True).stdout  # fmt: skip
    serve = [ln for ln in out.splitlines() if "launch.py serve" in ln]
    assert serve and f"--port {port}" in serve[-1]


def test_desk_redshift_is_per_candidate_and_adoptable(ctx, tmp_path):
    from agent.formats.template_files import read_templates, write_templates
    from app.pages import desk

    ex = app_context.expert_for(ctx, None)
    st, view = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    # The rules agent's redshift step is read back from the store with its source.
    assert view.redshift["source"] == "agent" and not view.redshift["set_by_expert"]
    assert view.redshift["note"].split(",")[0] in (
        "pipeline",
        "emission lines",
        "cross-correlation",
    )
    assert "agent z = " in desk.info_html(view.redshift)
    st, _ = desk.keep(ctx, ex, st, "Template", "QSO", template="QSO")
    st, _ = desk.keep_z(ctx, ex, desk.set_z(st, 1.27))
    st, view = vet_page.vet_refresh(ctx, ex, st, desk.display_with(st, D))
    assert view.global_fig["data"][-1]["name"] == "template: QSO at z = 1.2700"
    assert desk.chosen_z(st) == (1.27, "expert") and view.redshift["z"] == 1.27
    st, _ = desk.keep_z(ctx, ex, desk.set_z(st, desk.adopt_z(ctx, st), source="agent"))
    assert desk.chosen_z(st)[1] == "agent" and abs(desk.chosen_z(st)[0]) < 0.01
    # another candidate starts from its own estimate (and template), not the last one's
    st, _ = desk.keep_z(ctx, ex, desk.set_z(st, 2.0))
    st["shown_at"] = time.time()
    st, view = vet_writes.vet_act(ctx, ex, st, "skip", F, desk.display_with(st, D))
    assert not view.redshift["set_by_expert"] and desk.chosen_z(st) == (None, None)
    assert view.template == "none" and view.global_fig["data"][-1]["name"] == "flux"
    # a template folder: the team's templates come first
    write_templates(tmp_path / "tpl")
    ctx.templates = read_templates(tmp_path / "tpl")
    assert desk.template_names(ctx)[1] == ctx.templates[0].name
    from agent.templates import TemplateError

    with pytest.raises(TemplateError, match="not a folder"):
        read_templates(tmp_path / "missing")


def test_typed_redshift_is_checked_and_shown_at_the_controls_resolution(ctx):
    from app.pages import desk

    ex = app_context.expert_for(ctx, None)
    st, _ = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    st, msg = desk.enter_z(st, " 1.27 ")
    assert msg == "" and desk.chosen_z(st) == (1.27, "expert")
    for bad in ("", "abc", "9", "nan", None):
        kept, msg = desk.enter_z(st, bad)
        assert kept == st and "Redshift not changed" in msg and "not a number" in msg
    # a pipeline's -0.00003 is drawn and shown as 0, never "-0.0000"
    assert f"{desk.shown_z(-3e-5):.4f}" == "0.0000" and desk.shown_z(1.27004) == 1.27
    info = {"estimate": -3e-5, "source": "pipeline", "z": -3e-5, "set_by_expert": True}
    assert "-0.0000" not in desk.info_html(info) and "yours: <b>0.0000</b>" in desk.info_html(info)
    st, _ = desk.keep(ctx, ex, st, "Template", "QSO", template="QSO")
    st, _ = desk.keep_z(ctx, ex, desk.set_z(st, -3e-5))
    st, view = vet_page.vet_refresh(ctx, ex, st, desk.display_with(st, D))
    assert view.global_fig["data"][-1]["name"] == "template: QSO at z = 0.0000"
    assert desk.chosen_z(st) == (-3e-5, "expert")  # the record keeps the value as set


def test_the_header_shows_the_snr_the_agent_measured(ctx):
    """The header's SNR is the inspector's own measurement (the one its thoughts quote),
    not the file's SNR keyword, which the demo files set differently."""
    import re

    from agent.policies.rules.features import measure_all

    ex = app_context.expert_for(ctx, None)
    st, view = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    shown = re.search(r"SNR ([0-9.]+)", view.header_html).group(1)
    spec = ctx.read.load_spectrum(st["current"])
    assert shown == f"{measure_all(spec)['snr']:.1f}"
    traj = ctx.read.trajectory(ctx.read.candidate(st["current"]).trajectory_id)
    said = re.search(r"at SNR ~([0-9]+)", traj.steps[0].thought)
    assert said is None or said.group(1) == f"{float(shown):.0f}"
    assert spec.meta.snr is None or f"{spec.meta.snr:.1f}" != shown  # they did differ


def test_issue_flags_and_spectral_type_wait_for_the_decision_or_amend_it(ctx):
    import html

    from annotate import drafts
    from app.pages import desk

    ex = app_context.expert_for(ctx, None)
    st, view = vet_page.vet_next(ctx, ex, views.new_state(), F, D)
    cid = st["current"]
    st, msg = desk.set_mark(ctx, ex, st, "issues", ["S", "R"])
    assert "Issue flags **RS** kept in your draft on" in msg and "saved with your decision" in msg
    st, msg = desk.set_mark(ctx, ex, st, "issues", ["X"])
    msg = html.unescape(msg)
    assert "not kept" in msg and "'X' is not one of R" in msg
    assert drafts.get(ctx.store, ex.name, cid)["issues"] == "RS"
    st, _ = desk.set_mark(ctx, ex, st, "spectype", "M giant")
    st, view = vet_page.vet_refresh(ctx, ex, st, D)
    assert (view.issues, view.spectype) == ("RS", "M giant")  # shown while they wait
    st, view = vet_writes.vet_act(ctx, ex, st, "accept", F, D)
    (r,) = ctx.store.reviews(candidate_id=cid)
    assert (r.issues, r.spectype) == ("RS", "M giant")
    assert (view.issues, view.spectype) == (None, None)  # the next candidate starts clean
    st, view = vet_page.vet_prev(ctx, ex, st, F, D)
    assert (view.issues, view.spectype) == ("RS", "M giant")
    st, msg = desk.set_mark(ctx, ex, st, "issues", [])
    assert "Issue flags cleared saved on" in msg
    (r,) = ctx.store.reviews(candidate_id=cid)
    assert (r.action, r.issues, r.spectype, r.revision) == ("accept", None, "M giant", 2)
