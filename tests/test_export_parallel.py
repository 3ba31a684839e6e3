"""A `speco3` export built in worker processes writes the files a single process writes."""

from __future__ import annotations

import pytest

from annotate.export import pipeline, run_export
from bench.export import folder_digest, seed_store

pytest.importorskip("datasets")


def test_parallel_speco3_export_is_byte_identical_to_one_process(tmp_path, monkeypatch):
    n = pipeline.MIN_POOL_ROWS["speco3"] + 1  # just enough rows for the worker pool
    store = seed_store(f"sqlite:///{tmp_path / 'x.db'}", tmp_path / "spectra", n)
    pools = []
    real_pool = pipeline.ProcessPoolExecutor

    def counting_pool(*args, **kwargs):
        pools.append(kwargs.get("max_workers"))
        return real_pool(*args, **kwargs)

    monkeypatch.setattr(pipeline, "ProcessPoolExecutor", counting_pool)
    one = run_export(store, "sft", tmp_path / "one", renderer="speco3", workers=1, full=True)
    assert pools == []
    two = run_export(store, "sft", tmp_path / "two", renderer="speco3", workers=2, full=True)
    assert pools == [2]
    assert one.manifest["rows"] == two.manifest["rows"] == n and not two.errors
    assert folder_digest(tmp_path / "one") == folder_digest(tmp_path / "two")
    store.close()
