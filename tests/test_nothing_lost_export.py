"""Nothing lost in an export: SIGKILL at seeded random moments in `export sft` and
`export rl` (LOUPE_CRASH_TRIALS kills per case, as in tests/test_nothing_lost.py), and a run
killed between renaming its files into place and committing its batch: a re-run finishes
the batch, byte for byte what an uninterrupted run writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.refs import CandidateRef
from annotate.review import decide
from db.store import Store
from tests.store_factory import traj, write_text_spectrum
from tests.test_nothing_lost import _copies, _rows, kill_trials


def _export_world(tmp_path: Path, n: int = 30) -> Path:
    """A store with n vetted candidates (text spectra) and an expert's mixed reviews."""
    data = tmp_path / "spectra"
    data.mkdir()
    template = tmp_path / "template.db"
    store = Store(f"sqlite:///{template}")
    refs = []
    for i in range(n):
        path = write_text_spectrum(data / f"s{i:03d}.csv", seed=i)
        refs.append(CandidateRef(id=f"x{i}", task="cv", path=str(path),
                                 label="YES" if i % 7 == 0 else None))  # fmt: skip
    store.add_candidates(refs)
    store.create_expert("ann")
    for i in range(n):
        t = traj(f"x{i}", (i % 10) / 10 + 0.05)
        t.spectrum_ref = {"path": str(data / f"s{i:03d}.csv")}
        store.record_trajectory(t)
    cid = {c.key: c.id for c in store.list_candidates(limit=1000, order="id")}
    for i in range(n):
        if i % 5 == 4:
            continue  # unreviewed: a catalogue label at most
        if i % 3 == 0:
            decide(store, "ann", cid[f"x{i}"], "correct", label="NO" if i % 2 else "YES",
                                explanation="The expert's reading.", wrong_step=1)  # fmt: skip
        else:
            decide(store, "ann", cid[f"x{i}"], "accept" if i % 3 == 1 else "reject")
    store.close()
    assert not Path(f"{template}-wal").exists() or Path(f"{template}-wal").stat().st_size == 0
    return template


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sft", "rl"])
def test_sigkill_during_export_then_rerun_is_byte_identical(tmp_path, forks, kind):
    pytest.importorskip("datasets")
    template = _export_world(tmp_path)

    def job(url, name):
        # The fast renderer: what is under test is the batch's atomicity, not the drawing
        # (tests/test_export_parallel.py checks that speco3 images are the same in any
        # process), and speco3 made each of the case's runs about ten times longer.
        return {"launch": ["export", kind, "--db", url, "--out", str(tmp_path / f"out-{name}"),
                           "--workers", "1", "--renderer", "fast"]}  # fmt: skip

    def batches(url):
        return _rows(url, "SELECT b.id, b.content_hash, b.manifest, count(i.id), "
                          "count(DISTINCT i.entity_id) FROM export_batch b "
                          "LEFT JOIN export_item i ON i.batch_id = b.id GROUP BY b.id")  # fmt: skip

    def state(url):
        (bid, chash, manifest, n_items, n_distinct), *more = batches(url)
        assert not more, "one export, one batch"
        manifest = json.loads(manifest)
        assert n_items == n_distinct == manifest["rows"]  # every row recorded once
        out = Path(_rows(url, "SELECT path FROM export_batch")[0][0])
        assert json.loads((out / "manifest.json").read_text())["content_hash"] == chash
        leftovers = [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]
        assert not leftovers, leftovers
        return {"files": _tree(out), "rows": manifest["rows"], "hash": chash}

    def after_kill(url, ref):
        got = batches(url)
        assert len(got) <= 1  # a batch is recorded whole or not at all
        for _, chash, manifest, n_items, _ in got:
            assert chash == ref["hash"] and n_items == json.loads(manifest)["rows"]

    out = kill_trials(
        forks, tmp_path, _copies(tmp_path, template), job, state, seed=13, after_kill=after_kill
    )
    ref = out["reference"]
    assert ref["rows"] >= 10
    if kind == "rl":  # one row per labelled object, none twice
        ids = [json.loads(line)["id"] for name, data in ref["files"].items()
               if name.endswith(".jsonl") for line in data.decode().splitlines()]  # fmt: skip
        assert len(ids) == len(set(ids)) == ref["rows"]


@pytest.mark.slow
def test_export_killed_between_files_and_commit_is_completed_by_rerun(tmp_path):
    """The narrowest window: files renamed into place, batch not yet committed."""
    pytest.importorskip("datasets")
    from annotate.export import collect, export_records, run_export

    template = _export_world(tmp_path, n=12)
    url = f"sqlite:///{template}"
    store = Store(url)
    got = collect(store, "rl")
    # what a run killed after its rename and before its commit leaves behind
    export_records("rl", got.records, tmp_path / "rl", existing_splits=got.existing_splits,
                   not_exported=got.not_exported, workers=1,
                   version=store.code_version())  # fmt: skip
    files = _tree(tmp_path / "rl")
    assert store.export_batches() == []
    res = run_export(store, "rl", tmp_path / "rl", workers=1)
    assert not res.existing and _tree(tmp_path / "rl") == files
    (batch,) = store.export_batches()
    assert batch.content_hash == json.loads(files["manifest.json"])["content_hash"]
    again = run_export(store, "rl", tmp_path / "rl", workers=1)  # and once more: a no-op
    assert again.existing and again.batch_id == batch.id and len(store.export_batches()) == 1
    store.close()
