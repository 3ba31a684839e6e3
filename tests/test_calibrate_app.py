"""Calibrate from the app: the Dashboard's button (admins) -> the store's model -> `vet --db`
and the app's vetting use it -> each verdict records its version -> gold agreement by version."""

from __future__ import annotations

import argparse
import csv
from types import SimpleNamespace

import pytest

from agent.loop import DEFAULT_MAX_TURNS
from annotate.learning import schedule
from annotate.learning.fit import CV_HEADERS, cv_rows
from annotate.vetting.into_store import INSPECTOR_SETTING as SETTING
from app import context as app_context
from app.pages import dashboard as dashboard_page
from app.pages import upload as upload_page
from tests.app_support import context


@pytest.fixture
def team(tmp_path_factory, tmp_path):
    from annotate.team.experts import create_expert

    c = context(tmp_path_factory, tmp_path, login=True)
    create_expert(c.store, "ada", "admin", "pw-ada-123")
    create_expert(c.store, "bob", "expert", "pw-bob-123")
    yield c
    c.store.close()


def who(ctx, name):
    return app_context.expert_for(ctx, SimpleNamespace(username=name))


def _catalog(store, path) -> list:
    """The store's candidates as a catalogue CSV for `vet --catalog`."""
    cands = store.list_candidates(limit=1000)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["path", "task", "id", "hdu", "row"])
        for c in cands:
            r = c.spectrum_ref
            w.writerow([r["path"], c.task, c.key, r.get("hdu") or "", r.get("row") or ""])
    return cands


def _vet(db_url: str, catalog, tmp_path, *extra: str) -> int:
    from commands import vet

    p = argparse.ArgumentParser()
    vet.add_arguments(p)
    args = p.parse_args(["--catalog", str(catalog), "--policy", "rules", "--db", db_url,
                         "--workers", "1", "--no-progress", *extra,
                         "--out", str(tmp_path / "unused.jsonl")])  # fmt: skip
    return vet.main(args)


def test_calibrate_button_to_vet_to_gold_agreement_by_version(team, tmp_path):
    ctx = team
    store = ctx.store
    url = f"sqlite:///{tmp_path / 'loupe.db'}"
    ada, bob = who(ctx, "ada"), who(ctx, "bob")
    cands = _catalog(store, tmp_path / "cat.csv")
    labelled = [c for c in cands if c.known_label in ("YES", "NO")]
    assert len(labelled) >= 10
    gold = labelled[::2]
    for c in gold:
        store.set_gold(c.id, c.known_label)
    # Before any calibration: only the plain rules (the demo's seeded run) on gold.
    table = dashboard_page.inspector_versions(ctx, ada)
    assert [r[:2] for r in table["data"]] == [["rules", len(gold)]]

    # The button is for admins: bob neither sees it nor may press it.
    assert dashboard_page.can_calibrate(ada) and not dashboard_page.can_calibrate(bob)
    assert not dashboard_page.can_calibrate(None)
    msg, cv = dashboard_page.calibrate_now(ctx, bob)
    assert msg.startswith("Refused") and "not an admin" in msg and cv["data"] == []
    assert store.setting(SETTING) is None

    # The button fits in the background (annotate.learning.schedule); the outcome shows on Refresh.
    # On these few labels nothing beats the plain rules, so nothing is adopted.
    msg, cv = dashboard_page.calibrate_now(ctx, ada)
    assert "in the background" in msg and cv["data"] == [], msg
    schedule.learner(store).join(120)
    said, fit = dashboard_page.last_fit(ctx, ada)
    assert "inspector not changed" in said and store.setting(SETTING) is None, said
    assert fit["headers"] == dashboard_page.FIT_HEADERS
    assert {r[0] for r in fit["data"]} == {c.task for c in labelled}
    col = {h: k for k, h in enumerate(dashboard_page.FIT_HEADERS)}
    for r in fit["data"]:
        assert (r[col["before"]], r[col["now"]], r[col["changed"]]) == ("rules", "kept rules", "no")
        # per task, what waited and why: too few labels of a class to consider a fit
        assert r[col["what and why"]].startswith("waited: ") and "(needs " in r[col["what and why"]]
        # the campaign's counts: labels, YES and NO labels with their objects
        n_yes = sum(c.task == r[0] and c.known_label == "YES" for c in labelled)
        assert r[col["YES (objects)"]].startswith(f"{n_yes} (")

    # `launch.py calibrate` adopts the version as fitted (each task no worse than the rules)
    done = schedule.learn(store, ctx.export_dir / "inspector", force=True, actor=ada.name)
    assert done.adopted and done.version == 1
    saved = store.setting(SETTING)
    assert saved["version"] == 1
    assert (ctx.export_dir / "inspector" / "inspector-v1.json").is_file()
    # the cross-validated before/after, one row per labelled task, as calibrate printed it
    cv = {"headers": CV_HEADERS, "data": cv_rows(done.model)}
    assert {r[0] for r in cv["data"]} == {c.task for c in labelled}
    for row in cv["data"]:
        task, n, _pos, chosen, weight, before_ll, before_f1, after_ll, after_f1, _note = row
        assert n == sum(c.task == task for c in labelled)
        assert chosen in ("rules", "platt", "isotonic", "combiner")
        assert 0 <= before_f1 <= 1 and 0 <= after_f1 <= 1
        if chosen == "rules":
            assert (after_ll, after_f1, weight) == (before_ll, before_f1, 0)
        else:  # blended only where, held out of its choice, it does no worse than the rules
            assert 0 < weight <= 1 and after_ll <= before_ll and after_f1 >= before_f1

    # vet --db without --model: the store's model, even though the plain rules' run of the
    # demo already vetted every candidate (a different run: nothing is skipped).
    store.close()
    assert _vet(url, tmp_path / "cat.csv", tmp_path) == 0
    ctx.store = store = type(store)(url)
    runs = {r.model: r for r in store.runs()}
    assert set(runs) == {None, "inspector-v1"}
    fitted = runs["inspector-v1"]
    assert fitted.params == {"max_turns": DEFAULT_MAX_TURNS, "inspector_version": 1}
    assert fitted.fingerprint != runs[None].fingerprint
    assert len(store.done_keys(run_id=fitted.id)) == len(cands)
    for c in cands[:5]:
        recs = [rec for _, rec in store.trajectories(c.id) if rec.model == "inspector-v1"]
        assert [r.steps[-1].measurements["inspector_version"] for r in recs] == [1.0]
    # P(YES) moves exactly on the tasks where a learned model was switched on
    chosen = {row[0]: row[3] for row in cv["data"]}
    moved: dict[str, bool] = {}
    for c in cands:
        p = {rec.model: rec.confidence for _, rec in store.trajectories(c.id)}
        moved[c.task] = moved.get(c.task, False) or abs(p["inspector-v1"] - p[None]) > 1e-9
    assert {t for t, m in moved.items() if m} == {t for t, k in chosen.items() if k != "rules"}
    # and the dashboard shows both versions on the same gold items
    table = dashboard_page.inspector_versions(ctx, ada)
    rows = {v: (n, agree) for v, n, agree in table["data"]}
    assert list(rows) == ["rules", "inspector-v1"]
    assert rows["rules"][0] == rows["inspector-v1"][0] == len(gold)
    # agreement is the share of gold items answered as their gold label, per version
    for model, version in ((None, "rules"), ("inspector-v1", "inspector-v1")):
        agree = [
            rec.verdict == c.known_label
            for c in gold
            for _, rec in store.trajectories(c.id)
            if rec.model == model
        ]
        assert len(agree) == len(gold)
        assert rows[version][1] == round(sum(agree) / len(gold), 3)
    one_task = gold[0].task
    t_rows = dashboard_page.inspector_versions(ctx, ada, one_task)["data"]
    assert [r[1] for r in t_rows] == [sum(c.task == one_task for c in gold)] * 2

    # A second press with no new label: nothing beats the version fitted on the same labels,
    # so nothing is adopted; `launch.py calibrate` (forced) makes a new version, and new
    # vetting uses it: the table shows three.
    dashboard_page.calibrate_now(ctx, ada)
    schedule.learner(store).join(120)
    said, _ = dashboard_page.last_fit(ctx, ada)
    assert "inspector not changed" in said and store.setting(SETTING)["version"] == 1, said
    assert schedule.learn(store, ctx.export_dir / "inspector", force=True).version == 2
    assert store.setting(SETTING)["version"] == 2
    store.close()
    assert _vet(url, tmp_path / "cat.csv", tmp_path) == 0
    ctx.store = store = type(store)(url)
    versions = [r[0] for r in dashboard_page.inspector_versions(ctx, ada)["data"]]
    assert versions == ["rules", "inspector-v1", "inspector-v2"]


def test_app_uploads_use_the_model_and_runs_never_resume_across_models(team, tmp_path):
    """The app's vetting records the fitted version; `--model none` is the plain rules' run,
    which does not count what the fitted model vetted as done, nor the other way round."""
    from annotate.vetting.into_store import run_params
    from annotate.vetting.sinks import StoreSink
    from tests.store_factory import write_text_spectrum

    ctx = team
    ada = who(ctx, "ada")
    url = f"sqlite:///{tmp_path / 'loupe.db'}"
    assert schedule.learn(ctx.store, ctx.export_dir / "inspector", force=True).version == 1
    spec = write_text_spectrum(tmp_path / "data" / "upload.csv", seed=5)
    msg = upload_page.ingest_upload(ctx, ada, [str(spec)], "cv")
    assert "1 candidate(s) vetted" in msg, msg
    runs = {r.model: r for r in ctx.store.runs()}
    assert set(runs) == {None, "inspector-v1"}
    [new] = ctx.store.done_keys(run_id=runs["inspector-v1"].id)
    info = ctx.store.find_candidate(*new)
    [(_, rec)] = ctx.store.trajectories(info.id)
    assert rec.model == "inspector-v1" and rec.steps[-1].measurements["inspector_version"] == 1.0

    params = run_params("rules", DEFAULT_MAX_TURNS, 0.0)
    plain = StoreSink(ctx.store, "rules", None, renderer="fast", params=params)
    assert new not in plain.done_keys()
    fitted = StoreSink(ctx.store, "rules", "inspector-v1", renderer="fast",
                       params=run_params("rules", DEFAULT_MAX_TURNS, 0.0, 1))  # fmt: skip
    assert fitted.done_keys() == {new}

    # --model none over the uploaded spectrum (the copy the store holds): vetted again, by
    # the plain rules
    cat = tmp_path / "cat.csv"
    cat.write_text(f"path,task,id\n{info.spectrum_ref['path']},cv,{new[0]}\n")
    ctx.store.close()
    assert _vet(url, cat, tmp_path, "--model", "none") == 0
    ctx.store = type(ctx.store)(url)
    recs = [r for _, r in ctx.store.trajectories(info.id)]
    assert [r.model for r in recs] == ["inspector-v1", None]
    assert "inspector_version" not in recs[1].steps[-1].measurements
    # and an explicit file is its own run, named by its path, with the version in its params
    path = ctx.store.setting(SETTING)["path"]
    ctx.store.close()
    assert _vet(url, cat, tmp_path, "--model", path) == 0
    ctx.store = type(ctx.store)(url)
    by_model = {r.model: r for r in ctx.store.runs()}
    assert by_model[path].params["inspector_version"] == 1
    assert len({r.fingerprint for r in by_model.values()}) == 3


def test_a_corrupt_stored_model_is_refused_by_name(team, tmp_path):
    from agent.policies.rules.learned import ModelError
    from annotate.vetting.into_store import vet_into_store

    ctx = team
    ctx.store.set_setting(SETTING, {"version": 3, "tasks": {"cv": {"kind": "magic"}}})
    c = ctx.store.list_candidates(limit=1)[0]
    from agent.refs import CandidateRef

    ref = CandidateRef(id=c.key, task=c.task, path=c.spectrum_ref["path"])
    with pytest.raises(ModelError, match="inspector_model.*unknown kind"):
        vet_into_store(ctx.store, [ref], workers=1)


def test_vet_db_refuses_an_unreadable_model_by_name(team, tmp_path, capsys):
    ctx = team
    url = f"sqlite:///{tmp_path / 'loupe.db'}"
    _catalog(ctx.store, tmp_path / "cat.csv")
    n_runs = len(ctx.store.runs())
    ctx.store.close()
    missing = tmp_path / "inspector-v9.json"
    assert _vet(url, tmp_path / "cat.csv", tmp_path, "--model", str(missing)) == 2
    assert f"vet: {missing}: cannot read the inspector model" in capsys.readouterr().err
    ctx.store = type(ctx.store)(url)
    assert len(ctx.store.runs()) == n_runs  # nothing started


def test_the_command_line_and_the_dashboard_write_the_inspector_to_one_folder():
    """`launch.py calibrate` wrote to data/inspector while the Dashboard wrote to
    exports/inspector: both default to `inspector_dir` of the export folder."""
    from pathlib import Path

    import launch
    from annotate.learning.fit import inspector_dir

    cli = Path(launch.build_parser("calibrate").parse_args([]).out)
    served = launch.build_parser("serve").parse_args([]).export_dir
    assert cli == inspector_dir(served) == inspector_dir(app_context.Context(None).export_dir)
    assert cli == Path("exports") / "inspector"
