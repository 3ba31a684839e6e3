"""Exporters on a small store built here: simulated LAMOST files, scripted agent runs,
expert reviews, an audited authored trajectory."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from agent.formats import write_lamost_fits
from agent.loop import run_batch
from agent.policies.scripted import ScriptedPolicy
from agent.protocol import parse_turn
from agent.refs import CandidateRef
from agent.spectrum import Spectrum, SpectrumMeta
from annotate import authoring
from annotate.export import (
    ExportRecord,
    dedup,
    export_records,
    hash_split,
    object_split,
)
from annotate.export import run_export as _run_export
from annotate.export.selection import collect
from annotate.review import decide
from db.store import Store

datasets = pytest.importorskip("datasets")


def run_export(*args, **kwargs):
    """`annotate.export.run_export` with the fast renderer (the default draws speco3)."""
    kwargs.setdefault("renderer", "fast")
    return _run_export(*args, **kwargs)


def _spectrum(seed: int, kind: str) -> Spectrum:
    rng = np.random.default_rng(seed)
    wave = 10 ** np.arange(np.log10(3700), np.log10(9100), 1e-4)
    flux = 1.0 + 0.3 * (wave / 5000.0) ** -2
    for line in (4102.9, 4341.7, 4862.7, 6564.6):
        width = 40.0 if kind == "wd" else 6.0
        flux -= 0.5 * np.exp(-0.5 * ((wave - line) / width) ** 2)
    flux += rng.normal(0, 0.02, wave.size)
    return Spectrum(
        wave,
        flux,
        ivar=np.full(wave.size, 2500.0),
        meta=SpectrumMeta(survey="simulated", simulated=True),
    )


def _call(lo, hi):
    return f'<think>Look at {lo}-{hi}.</think><tool_call>{{"name": "spectral_visualization_tool", "arguments": {{"wavelength_range": [{lo}, {hi}]}}}}</tool_call>'


def _answer(v):
    return f"<think>Broad lines.</think><answer>\\boxed{{{v}}} Balmer profile.</answer>"


# candidate key -> (object id, task, spectrum kind, agent verdict, meta)
LAYOUT = {
    "c0": ("o0", "wd", "wd", "YES", {}),
    "c1": ("o1", "wd", "a", "YES", {}),
    "c2": ("o2", "wd", "a", "YES", {}),
    "c3": ("o3", "wd", "wd", "YES", {}),
    "c4": ("o4", "wd", "wd", "YES", {}),
    "c4b": ("o4", "wd", "wd", "YES", {}),
    "c5": ("o5", "wd", "a", "YES", {}),
    "c6": ("o6", "wd", "wd", None, {}),  # catalogue label only
    "c7": ("o7", "wd", "wd", "NO", {"split": "test"}),
    "c8": ("o8", "wd", "wd", "YES", {}),  # its file breaks after review
    "c9": ("o0", "cv", "wd", "NO", {}),  # same object as c0, other task
}


@pytest.fixture
def world(tmp_path: Path):
    data = tmp_path / "spectra"
    data.mkdir()
    refs, meta = [], {}
    for i, (key, (obj, task, kind, _, extra)) in enumerate(LAYOUT.items()):
        path = data / f"{key}.fits"
        write_lamost_fits(_spectrum(i, kind), path)
        label = "YES" if key == "c6" else None
        refs.append(CandidateRef(id=key, task=task, path=str(path), label=label))
        meta[i] = {"object_id": obj, **extra}
    store = Store(f"sqlite:///{tmp_path / 'loupe.db'}")
    assert store.add_candidates(refs, meta=meta).added == len(refs)
    scripts = {
        key: [_call(4800, 4920), _call(4300, 4400), _answer(v)]
        for key, (_, _, _, v, _) in LAYOUT.items()
        if v is not None
    }
    policy = ScriptedPolicy(scripts=scripts, p_yes=0.7)
    vetted = [r for r in refs if r.id in scripts]
    run = store.start_run("scripted", None, "fast", {})
    for t in run_batch(vetted, policy, renderer="fast"):
        assert t.state == "done" and t.format_ok, t.error
        store.record_trajectory(t, run)
    for name, role in (("ann", "expert"), ("bob", "expert"), ("ada", "admin")):
        store.create_expert(name, role=role)
    cid = {c.key: c.id for c in store.list_candidates(limit=100, order="id")}
    decide(store, "ann", cid["c0"], "accept", seconds=5)
    decide(
        store,
        "ann",
        cid["c1"],
        "correct",
        label="NO",
        explanation="Narrow Balmer lines: an A star.",
        wrong_step=1,
        seconds=9,
    )
    decide(store, "ann", cid["c2"], "reject", seconds=4)
    decide(store, "ann", cid["c3"], "accept")
    decide(store, "bob", cid["c3"], "accept")
    decide(store, "ann", cid["c4"], "accept")
    decide(store, "ann", cid["c4b"], "accept")
    decide(store, "ann", cid["c7"], "accept")
    decide(store, "ann", cid["c8"], "accept")
    decide(store, "bob", cid["c9"], "accept")
    # bob writes c5 himself; ada audits it
    c5 = store.candidate(cid["c5"])
    spec5 = store.load_spectrum(cid["c5"])
    d = authoring.start_draft(c5, renderer="fast")
    authoring.add_step(d, spec5, 4800, 4920, "H-beta is narrow, ~6 A wide.")
    authoring.set_answer(d, "NO", "Narrow Balmer lines of an A star, not a white dwarf.")
    authoring.submit(store, d, "bob")
    authoring.audit(store, d.authored_id, "ada", True, "fine")
    (data / "c8.fits").write_bytes(b"SIMPLE  = broken")
    return store, cid, tmp_path


def _rows(out: Path) -> dict[str, list[dict]]:
    dd = datasets.load_from_disk(str(out / "hf"))
    return {s: list(dd[s]) for s in dd}


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_sft_export_contents(world):
    store, cid, tmp = world
    res = run_export(store, "sft", tmp / "sft1", test_fraction=0.0)
    rows = _rows(tmp / "sft1")
    flat = [r for rs in rows.values() for r in rs]
    by_key = {r["candidate"]: r for r in flat}
    # c0 c3 (one of) c4/c4b, c7, c9 accepted; c1 corrected; c2 rejected without a reason;
    # c5 authored; c6 (label only) is not SFT; c8's file no longer reads.
    assert sorted(by_key) == sorted(["c0", "c1", "c2", "c3", "c4b", "c5", "c7", "c9"])
    assert {r["source"] for r in flat} == {"accepted", "corrected", "rejected", "authored"}
    assert by_key["c1"]["source"] == "corrected" and by_key["c5"]["source"] == "authored"
    assert [e["candidate"] for e in res.errors] == ["c8"]
    assert "c8.fits" in res.errors[0]["reason"]
    assert res.manifest["errors"][0]["id"] == "o8:wd"
    # dedup by object+task: o4 once; o0 twice (two tasks)
    keys = [(r["object_id"], r["task"]) for r in flat]
    assert len(keys) == len(set(keys))
    assert keys.count(("o0", "wd")) == 1 and keys.count(("o0", "cv")) == 1
    for r in flat:
        msgs = r["messages"]
        assert [m["role"] for m in msgs[:2]] == ["system", "user"]
        assert msgs[1]["content"][0]["type"] == "image"
        n_placeholders = sum(it["type"] == "image" for m in msgs for it in m["content"])
        assert n_placeholders == len(r["images"]) >= 1
        assert all(hasattr(im, "size") for im in r["images"])  # PIL images
        assert msgs[-1]["role"] == "assistant"
        for m in msgs:
            if m["role"] == "assistant":
                turn = parse_turn("".join(it["text"] for it in m["content"]))
                assert turn.format_ok, turn.errors
        assert f"\\boxed{{{r['label']}}}" in msgs[-1]["content"][0]["text"]
    # the correction: step 1 and after dropped, the expert's answer appended
    c1 = by_key["c1"]["messages"]
    assistant = [m for m in c1 if m["role"] == "assistant"]
    assert len(assistant) == 2 and len(by_key["c1"]["images"]) == 2
    assert "Narrow Balmer lines: an A star." in assistant[-1]["content"][0]["text"]
    assert by_key["c1"]["label"] == "NO"
    # the authored trajectory: the expert's own zoom and thought
    c5 = by_key["c5"]["messages"]
    assert "H-beta is narrow" in c5[2]["content"][0]["text"]
    # existing split wins; otherwise train at test_fraction 0
    assert by_key["c7"]["split"] == "test" and "test" in rows
    assert all(r["split"] == "train" for r in rows["train"])
    # manifest counts and hashes
    m = res.manifest
    assert m["rows"] == 8 and m["counts"]["source"] == {
        "accepted": 5,
        "authored": 1,
        "corrected": 1,
        "rejected": 1,
    }
    assert m["counts"]["label"] == {"NO": 5, "YES": 3}
    # the reject without a reason: the agent's zooms with neutral thoughts, the flipped verdict
    c2 = by_key["c2"]
    assert c2["label"] == "NO" and len(c2["images"]) == 3
    texts = [m["content"][0]["text"] for m in c2["messages"] if m["role"] == "assistant"]
    assert texts[0].startswith("<think>I zoom into 4800-4920 Å") and "Look at" not in texts[0]
    assert "do not show the features that identify a white dwarf" in texts[-1]
    # what was left out, and why: c8's file broke (c6 has no decision, only a catalogue label)
    assert m["left_out"] == {"total": 1, "reasons": {"row could not be built": 1}}
    # the dashboard counts the reject without a reason (c1's correction has one)
    assert store.rejects_without_reason() == {"wd": 1}
    assert store.rejects_without_reason("cv") == {}
    assert m["renderer"] == "fast"
    for rel, h in m["files"].items():
        assert h == "sha256:" + hashlib.sha256((tmp / "sft1" / rel).read_bytes()).hexdigest()
    assert "manifest.json" not in m["files"]
    assert json.loads((tmp / "sft1" / "manifest.json").read_text()) == m
    assert [b.kind for b in store.export_batches()] == ["sft"]


def test_sharegpt_matches_llamafactory_layout(world):
    store, _, tmp = world
    run_export(store, "sft", tmp / "sft", test_fraction=0.0)
    sg = tmp / "sft" / "sharegpt"
    info = json.loads((sg / "dataset_info.json").read_text())
    assert set(info) == {"loupe_sft_train", "loupe_sft_test"}
    assert info["loupe_sft_train"]["formatting"] == "sharegpt"
    assert info["loupe_sft_train"]["columns"] == {"messages": "messages", "images": "images"}
    rows = json.loads((sg / "train.json").read_text())
    for r in rows:
        tokens = sum(m["content"].count("<image>") for m in r["messages"])
        assert tokens == len(r["images"])
        assert all((sg / p).is_file() and not Path(p).is_absolute() for p in r["images"])
        roles = [m["role"] for m in r["messages"]]
        assert roles[0] == "system"
        # alternating user/assistant after the system prompt, as sharegpt requires
        assert roles[1:] == ["user", "assistant"] * (len(roles[1:]) // 2)


def test_deterministic_reexport(world):
    store, _, tmp = world
    run_export(store, "sft", tmp / "a", full=True, test_fraction=0.3)
    run_export(store, "sft", tmp / "b", full=True, test_fraction=0.3)
    fa, fb = _files(tmp / "a"), _files(tmp / "b")
    assert fa.keys() == fb.keys() and len(fa) > 5
    assert fa == fb
    for kind in ("rl", "pairs"):
        run_export(store, kind, tmp / f"{kind}1", full=True)
        run_export(store, kind, tmp / f"{kind}2", full=True)
        assert _files(tmp / f"{kind}1") == _files(tmp / f"{kind}2")


def test_incremental_and_revised(world):
    store, cid, tmp = world
    first = run_export(store, "rl", tmp / "r1")
    # every labelled object+task once (o4 twice deduplicated; c8's file is broken)
    assert first.manifest["rows"] == 9 and len(first.errors) == 1
    second = run_export(store, "rl", tmp / "r2")
    assert second.manifest["rows"] == 0 and second.manifest["since_batch"] == first.batch_id
    assert second.manifest["unchanged_since_earlier_batches"] == 9
    # a new review and a revised one: only those two come out
    decide(store, "bob", cid["c6"], "correct", label="NO", explanation="No broad lines.")
    decide(store, "ann", cid["c0"], "reject")
    third = run_export(store, "rl", tmp / "r3")
    got = {(r["candidate"], r["label"]) for r in _jsonl(tmp / "r3")}
    assert got == {("c6", "NO"), ("c0", "NO")}
    assert third.manifest["revised"] == 2
    # the same command again (a re-run after a crash past the commit) changes nothing
    again = run_export(store, "rl", tmp / "r3")
    assert again.existing and again.batch_id == third.batch_id
    assert len(store.export_batches("rl")) == 3
    (tmp / "other").mkdir()
    (tmp / "other" / "notes.txt").write_text("not an export")
    with pytest.raises(FileExistsError):
        run_export(store, "rl", tmp / "other")


def _jsonl(out: Path) -> list[dict]:
    rows = []
    for p in sorted(out.glob("*.jsonl")):
        rows += [json.loads(line) for line in p.read_text().splitlines() if line]
    return rows


def test_rl_rows_match_specvi_schema(world):
    import pyarrow.parquet as pq

    store, _, tmp = world
    res = run_export(store, "rl", tmp / "rl", test_fraction=0.5)
    tables = {p.stem: pq.read_table(p).to_pylist() for p in (tmp / "rl").glob("*.parquet")}
    rows = [r for t in tables.values() for r in t]
    assert len(rows) == res.manifest["rows"] == 9
    by_key = {r["candidate"]: r for r in rows}
    assert by_key["c2"]["label"] == "NO"  # the reject flipped YES
    assert by_key["c6"]["source"] == "catalog" and by_key["c6"]["label"] == "YES"
    assert by_key["c5"]["source"] == "authored" and by_key["c5"]["label"] == "NO"
    for r in rows:
        assert r["reward_model"]["ground_truth"] == r["label"] in ("YES", "NO")
        assert r["data_source"] == r["task"]  # wd / cv keep their names
        assert r["agent_name"] and r["prompt"][1]["content"].startswith("<image>")
        # verl writes the tool block from its tool config: the prompt must not hold one too
        assert "<tools>" not in r["prompt"][0]["content"]
        assert "# Tools" not in r["prompt"][0]["content"]
        kw = r["extra_info"]["tools_kwargs"]["spectral_visualization_tool"]["create_kwargs"]
        assert len(kw["flux"]) == len(kw["wavelength"]) > 3000
        assert r["extra_info"]["name"].endswith(".fits") and r["path"].endswith(".fits")
        assert len(r["images"]) == 1 and r["images"][0]["bytes"][:4] == b"\x89PNG"
        assert r["split"] in tables and r in tables[r["split"]]
    # split by object: no object in two splits, and c7 stays in test
    splits: dict[str, set] = {}
    for r in rows:
        splits.setdefault(r["object_id"], set()).add(r["split"])
    assert all(len(s) == 1 for s in splits.values())
    assert by_key["c7"]["split"] == "test"
    assert {r["candidate"] for r in _jsonl(tmp / "rl")} == set(by_key)


def test_pairs_export(world):
    store, _, tmp = world
    res = run_export(store, "pairs", tmp / "pairs")
    rows = [r for rs in _rows(tmp / "pairs").values() for r in rs]
    by_key = {r["candidate"]: r for r in rows}
    assert set(by_key) == {"c1", "c2", "c5"} and res.manifest["rows"] == 3
    # the reject without a reason: the agent's own evidence, then NO against its YES
    c2 = by_key["c2"]
    assert [m["role"] for m in c2["prompt"]][-2:] == ["assistant", "user"]
    assert len(c2["prompt"]) == 2 + 2 * 2 and len(c2["images"]) == 3
    assert "\\boxed{NO}" in c2["chosen"][0]["content"][0]["text"]
    assert "\\boxed{YES}" in c2["rejected"][0]["content"][0]["text"]
    c1 = by_key["c1"]
    # shared prefix: system, user, the first zoom and its tool response
    assert [m["role"] for m in c1["prompt"]] == ["system", "user", "assistant", "user"]
    assert (
        len(c1["images"])
        == 2
        == sum(it["type"] == "image" for m in c1["prompt"] for it in m["content"])
    )
    chosen = c1["chosen"][0]["content"][0]["text"]
    rejected = c1["rejected"][0]["content"][0]["text"]
    assert "\\boxed{NO}" in chosen and "<tool_call>" in rejected
    c5 = by_key["c5"]
    assert [m["role"] for m in c5["prompt"]] == ["system", "user"]
    assert "H-beta is narrow" in c5["chosen"][0]["content"][0]["text"]


@pytest.mark.slow
def test_rows_feed_trl(world):
    """TRL's own multimodal preparation accepts the SFT and pair rows as written."""
    from trl.data_utils import prepare_multimodal_messages

    store, _, tmp = world
    run_export(store, "sft", tmp / "sft", test_fraction=0.0)
    run_export(store, "pairs", tmp / "pairs")
    for r in (r for rs in _rows(tmp / "sft").values() for r in rs):
        msgs = prepare_multimodal_messages(r["messages"], images=r["images"])
        filled = [it for m in msgs for it in m["content"] if it["type"] == "image"]
        assert len(filled) == len(r["images"]) and all("image" in it for it in filled)
    for r in (r for rs in _rows(tmp / "pairs").values() for r in rs):
        prepare_multimodal_messages(r["prompt"], images=r["images"])


def test_cli(world, capsys):
    import launch

    store, _, tmp = world
    url = str(store.url)
    assert launch.main(["export", "rl", "--db", url, "--out", str(tmp / "cli")]) == 0
    assert "rows" in capsys.readouterr().out
    assert (tmp / "cli" / "manifest.json").is_file()
    # a repeat (as after a crash past the commit) finds the recorded batch and writes nothing
    assert launch.main(["export", "rl", "--db", url, "--out", str(tmp / "cli")]) == 0
    assert "nothing written" in capsys.readouterr().out
    (tmp / "busy").mkdir()
    (tmp / "busy" / "x.txt").write_text("someone else's")
    assert launch.main(["export", "rl", "--db", url, "--out", str(tmp / "busy")]) == 2


# -- pure parts ----------------------------------------------------------------------------
def test_split_and_dedup_rules():
    ids = [f"obj{i}" for i in range(2000)]
    frac = sum(hash_split(o, 0.2) == "test" for o in ids) / len(ids)
    assert 0.17 < frac < 0.23
    assert hash_split("a", 0.2) == hash_split("a", 0.2)
    assert object_split("a", ["train", "holdout"], 0.5) == "holdout"
    with pytest.raises(ValueError):
        object_split("a", ["validation"], 0.5)

    def rec(cid, obj, source, recency=0):
        return ExportRecord(cid, f"k{cid}", obj, "wd", "YES", source, recency=recency)

    got = dedup(
        [
            rec(1, "o", "accepted", 5),
            rec(2, "o", "authored", 1),
            rec(3, "o", "corrected", 9),
            rec(4, "p", "accepted"),
        ]
    )
    assert sorted(r.candidate_id for r in got) == [2, 4]
    got = dedup([rec(1, "o", "accepted", 5), rec(2, "o", "accepted", 7)])
    assert [r.candidate_id for r in got] == [2]


def test_bad_rows_reported_not_fatal(tmp_path):
    spec = _spectrum(1, "wd")
    good = tmp_path / "good.fits"
    write_lamost_fits(spec, good)
    recs = [
        ExportRecord(1, "g", "g", "wd", "YES", "review", {"path": str(good)}),
        ExportRecord(2, "m", "m", "wd", "NO", "review", {"path": str(tmp_path / "missing.fits")}),
        ExportRecord(3, "n", "n", "wd", "NO", "review", {}),
    ]
    res = export_records("rl", recs, tmp_path / "out", version="test")
    assert res.manifest["rows"] == 1
    assert {e["candidate"] for e in res.errors} == {"m", "n"}
    assert all(e["reason"] for e in res.errors)
    assert not (tmp_path / ".out.partial").exists()


def test_rl_rows_carry_masked_pixels_so_grpo_draws_what_vet_draws(tmp_path):
    """ivar = 0 pixels with finite flux: the speco3 tool draws them (it drops only non-finite
    flux), so the RL row must carry them, and GRPO, reading the row's arrays, must draw the
    same global view and zoom as vet reading the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from agent.formats import load_one
    from agent.protocol import TOOL_NAME
    from agent.tool import call_tool, global_view
    from annotate.export import rl
    from annotate.export.conversation import Images
    from annotate.export.record import ExportRecord
    from training.data import load_rl_dataset, spectrum_from_ref

    spec = _spectrum(3, "wd")
    near = np.flatnonzero((spec.wavelength > 4850) & (spec.wavelength < 4875))
    spec.flux[near] += 0.8  # a spike the expert's survey flagged (ivar = 0), still drawn
    spec.ivar[near] = 0.0
    path = tmp_path / "z.fits"
    write_lamost_fits(Spectrum(spec.wavelength, spec.flux, ivar=spec.ivar, meta=spec.meta), path)
    vet = load_one(path)
    assert vet.mask[near].all() and np.isfinite(vet.flux[near]).all()

    rec = ExportRecord(1, "z", "z", "wd", "YES", "review", {"path": str(path)}, "train")
    built = rl.build_row(0, rec, vet, Images(vet, "speco3"))
    kw = built.row["extra_info"]["tools_kwargs"][TOOL_NAME]["create_kwargs"]
    assert len(kw["flux"]) == vet.flux.size  # every finite pixel, masked or not
    assert sum(built.row["mask"]) == near.size and len(built.row["ivar"]) == len(kw["flux"])
    # the row as the RL export writes it, its file gone: GRPO reads the arrays
    row = {**built.row, "images": [{"bytes": built.images["images"][0], "path": None}]}
    row.update({**rl.common_row(rec), "split": "train", "path": ""})
    out = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist([row], schema=rl.schema()), out)
    ref = json.loads(load_rl_dataset(out)[0]["spectrum"])
    assert ref.get("table") == str(out.resolve())
    grpo = spectrum_from_ref(ref)
    assert np.array_equal(grpo.mask, vet.mask) and np.array_equal(grpo.flux, vet.flux)
    for a, b in (
        (global_view(vet, renderer="speco3").image, global_view(grpo, renderer="speco3").image),
        (
            call_tool(vet, TOOL_NAME, {"wavelength_range": [4800, 4920]}, renderer="speco3").image,
            call_tool(grpo, TOOL_NAME, {"wavelength_range": [4800, 4920]}, renderer="speco3").image,
        ),
    ):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    # the spike is in the picture: without the masked pixels the zoom would differ
    dropped = Spectrum(grpo.wavelength[~grpo.mask], grpo.flux[~grpo.mask], meta=grpo.meta)
    c = call_tool(dropped, TOOL_NAME, {"wavelength_range": [4800, 4920]}, renderer="speco3").image
    assert not np.array_equal(np.asarray(c), np.asarray(b))


def test_grade_and_redshift_travel_and_filter(world, capsys):
    """The expert's grade (1-4) and redshift reach every kind of row as `grade`, `redshift`
    and `weight` (grade / 4); `--min-grade` leaves out the rest and says so; the training
    loaders filter on the same column, and the pairs JSONL reads like its hf/ folder."""
    import launch
    from training.data import load_pairs_dataset, load_rl_dataset, load_sft_dataset

    store, cid, tmp = world
    decide(
        store,
        "bob",
        cid["c0"],
        "accept",
        grade=4,
        redshift=0.0123,
        redshift_source="expert",
        seconds=3,
    )
    decide(store, "bob", cid["c2"], "reject", grade=2, seconds=3)
    sft_out, rl_out, pairs_out = tmp / "sft", tmp / "rl", tmp / "pairs"
    run_export(store, "sft", sft_out, test_fraction=0.0)
    rows = {r["candidate"]: r for rs in _rows(sft_out).values() for r in rs}
    assert (rows["c0"]["grade"], rows["c0"]["redshift"], rows["c0"]["weight"]) == (4, 0.0123, 1.0)
    assert (rows["c2"]["grade"], rows["c2"]["weight"]) == (2, 0.5)
    assert rows["c3"]["grade"] is None and rows["c3"]["weight"] == 1.0
    assert len(load_sft_dataset(sft_out)) == len(_rows(sft_out)["train"])
    assert len(load_sft_dataset(sft_out, min_grade=2)) == 2
    assert len(load_sft_dataset(sft_out, min_grade=3)) == 1

    res = run_export(store, "rl", rl_out, test_fraction=0.0, min_grade=3)
    assert res.manifest["rows"] == 1
    left = res.manifest["not_exported"]["grade below --min-grade 3 (or ungraded)"]
    from annotate.export.selection import collect

    assert left == len(collect(store, "rl").records) - 1  # every other labelled decision
    ds = load_rl_dataset(rl_out)
    assert ds["id"] == [f"{rows['c0']['object_id']}:wd"]

    res = run_export(store, "pairs", pairs_out, test_fraction=0.0)
    hf = load_pairs_dataset(pairs_out)
    pairs_rows = {r["candidate"]: r for r in _rows(pairs_out)["train"]}
    assert pairs_rows["c2"]["grade"] == 2 and pairs_rows["c1"]["grade"] is None
    assert len(load_pairs_dataset(pairs_out, min_grade=2)) == 1
    # the JSONL, image paths relative to its folder, reads as the hf/ folder does
    jl = load_pairs_dataset(pairs_out / "jsonl" / "train.jsonl")
    assert len(jl) == len(hf) and jl["chosen"] == hf["chosen"]
    assert [len(x) for x in jl["images"]] == [len(x) for x in hf["images"]]
    a, b = jl[0]["images"][0], hf[0]["images"][0]
    assert a.size == b.size and np.array_equal(np.asarray(a), np.asarray(b))
    assert len(load_pairs_dataset(pairs_out / "jsonl")) == len(hf)

    url = str(store.url)
    assert (
        launch.main(["export", "rl", "--db", url, "--out", str(tmp / "x"), "--min-grade", "5"]) == 2
    )
    assert "--min-grade must be 1, 2, 3 or 4" in capsys.readouterr().err


def test_imported_comment_is_never_trained_on(world):
    """An imported reject with an empty reason and a comment gives the same neutral row as
    the app's reject; the comment is in no sft row nor pair."""
    from annotate.intake.labels import import_labels

    store, cid, tmp = world
    run_export(store, "sft", tmp / "app", test_fraction=0.0)
    run_export(store, "pairs", tmp / "app-pairs")
    note = "ALICE-C1 check with Bob tomorrow"
    f = tmp / "vi.csv"
    f.write_text(f"id,label,reason,comment\nc2,NO,,{note}\n")
    assert import_labels(store, f, "ann").recorded == 1
    run_export(store, "sft", tmp / "imported", test_fraction=0.0, full=True)
    run_export(store, "pairs", tmp / "imported-pairs", full=True)
    for out in ("imported", "imported-pairs"):
        assert note not in json.dumps(_rows(tmp / out), default=str)

    def c2(out):
        return next(r for rs in _rows(tmp / out).values() for r in rs if r["candidate"] == "c2")

    for a, b in (("app", "imported"), ("app-pairs", "imported-pairs")):
        row_app, row_import = c2(a), c2(b)
        row_app.pop("images"), row_import.pop("images")
        assert row_app == row_import
    # a review stored by the earlier importer (its comment copied into the explanation)
    decide(store, "bob", cid["c2"], "reject", explanation=note, comment=note, source="import")
    run_export(store, "sft", tmp / "legacy", test_fraction=0.0, full=True)
    legacy = json.dumps(_rows(tmp / "legacy"), default=str)
    assert note not in legacy, legacy[legacy.index(note) - 300 : legacy.index(note) + 100]


def test_a_row_that_contradicts_its_verdict_is_refused_and_counted(world):
    store, cid, tmp = world
    decide(
        store,
        "ann",
        cid["c2"],
        "reject",
        explanation="Cannot tell whether it is one; near even odds.",
    )
    res = run_export(store, "sft", tmp / "sft", test_fraction=0.0)
    rows = [r for rs in _rows(tmp / "sft").values() for r in rs]
    assert "c2" not in {r["candidate"] for r in rows}
    reasons = res.manifest["left_out"]["reasons"]
    assert reasons["row contradicts its verdict NO: near even odds; Cannot tell whether"] == 1


def test_empty_export_says_why_and_training_scripts_stop_with_one_line(world, capsys):
    """A second export without --full holds nothing new: it says so and names --full; the
    training scripts given it (or an empty folder) print one line and exit 2."""
    pytest.importorskip("trl")
    import launch
    from training import dpo, grpo, sft

    store, _, tmp = world
    db = str(store.url)
    for kind in ("sft", "rl", "pairs"):
        run_export(store, kind, tmp / kind)
    capsys.readouterr()
    out = {}
    for kind in ("sft", "rl", "pairs"):
        out[kind] = tmp / f"{kind}-again"
        argv = ["export", kind, "--db", db, "--out", str(out[kind]), "--renderer", "fast"]
        assert launch.main(argv) == 0
        printed = capsys.readouterr().out
        assert f"{kind}: 0 rows" in printed and "--full" in printed, printed
    (tmp / "nothing").mkdir()
    for script, folder in ((sft, out["sft"]), (grpo, out["rl"]), (dpo, out["pairs"]),
                           (sft, tmp / "nothing")):  # fmt: skip
        argv = ["--model", str(tmp), "--dataset", str(folder), "--output_dir", str(tmp / "o")]
        assert script.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and str(folder) in err, err
        assert ("--full" in err) == (folder.name != "nothing")
    assert not (tmp / "o").exists()


def test_auto_accepted_labels_are_marked_and_never_outrank_an_expert(world, tmp_path):
    """`audit --auto-accept` makes the agent's sure verdicts labels. An export leaves them
    out unless --include-auto, and then its rows say `auto`; an approved authored
    trajectory of the same candidate (c5: the agent said YES, bob wrote NO, ada approved)
    is an expert's label and wins over the agent's."""
    store, cid, _ = world
    assert store.auto_accept(0.6) == 1  # c5: vetted, reviewed by nobody
    assert store.candidate(cid["c5"]).label_source == "auto"
    for kind in ("rl", "sft"):
        res = run_export(store, kind, tmp_path / f"{kind}-plain", full=True)
        m = res.manifest
        assert m["left_out"]["reasons"].get("auto-accepted (no expert saw it)") == 1
        assert m["counts"]["source"].get("authored") == 1 and "auto" not in m["counts"]["source"]
        res = run_export(store, kind, tmp_path / f"{kind}-auto", full=True, include_auto=True)
        out = tmp_path / f"{kind}-auto"
        rows = _jsonl(out) if kind == "rl" else [r for rs in _rows(out).values() for r in rs]
        c5 = [r for r in rows if r["candidate"] == "c5"]
        assert [(r["source"], r["label"]) for r in c5] == [("authored", "NO")]
        # before the one-row-per-object choice both were offered, the agent's marked auto
        got = collect(store, kind, include_auto=True).records
        offered = sorted((r.source, r.label) for r in got if r.key == "c5")
        assert offered == [("authored", "NO"), ("auto", "YES")]
