"""The benchmark's split by object is frozen: spectra added to the library never move an
object whose split has been scored (training/benchmark/splits.csv)."""

from __future__ import annotations

import csv

import pytest

from training import benchmark
from training.benchmark.__main__ import main
from training.benchmark.sources import Source, assign_splits, freeze_splits, read_splits


def star(obj: str, label: str) -> Source:
    return Source(f"miles/{obj}.fits", None, None, label, "", "miles", obj, False)


def test_new_stars_join_the_thinner_split_and_move_no_frozen_one(tmp_path):
    s_stars = [star(f"HD{i}", "s_type") for i in (1, 2, 3)]
    others = [star(f"HD{i}", "fgk_giant") for i in range(10, 30)]
    path = tmp_path / "splits.csv"
    assert freeze_splits(s_stars + others, path) == sorted(s.obj for s in s_stars + others)
    frozen = read_splits(path)
    # the S stars alternate, the test split first: two in test, one in tune
    assert sorted(frozen[s.obj] for s in s_stars) == ["test", "test", "tune"]
    before = path.read_text()

    new = [star(f"HD{i}", "s_type") for i in (4, 5, 6)]
    unfrozen = assign_splits(s_stars + new + others, {})
    split = assign_splits(s_stars + new + others, frozen)
    # without the file, the alternation over six S stars reshuffles the first three
    assert any(unfrozen[s.obj] != frozen[s.obj] for s in s_stars)
    assert {o: split[o] for o in frozen} == frozen
    # the three new ones go where S stars are fewer: tune, until both hold three
    assert sorted(split[s.obj] for s in new) == ["test", "tune", "tune"]

    assert freeze_splits(s_stars + new + others, path) == ["HD4", "HD5", "HD6"]
    lines = path.read_text().splitlines()
    assert set(before.splitlines()) <= set(lines)  # rows already there are kept as they were
    assert read_splits(path) == split
    assert freeze_splits(s_stars + new + others, path) == []  # nothing more to freeze


def test_a_new_hot_subdwarf_joins_the_split_holding_fewer_of_them(tmp_path):
    path = tmp_path / "splits.csv"
    sdbs = [star(f"GD{i}", "hot_subdwarf") for i in (1, 2, 3)]
    freeze_splits(sdbs, path)
    held = sorted(read_splits(path).values())
    assert held == ["test", "test", "tune"]
    for i in (4, 5):  # one at a time, as a library grows
        sdbs.append(star(f"GD{i}", "hot_subdwarf"))
        freeze_splits(sdbs, path)
    assert sorted(read_splits(path).values()) == ["test", "test", "test", "tune", "tune"]
    assert [read_splits(path)[f"GD{i}"] for i in (4, 5)] == ["tune", "test"]


def test_an_object_left_out_of_the_library_keeps_no_split(tmp_path):
    path = tmp_path / "splits.csv"
    freeze_splits([star("HD1", "s_type"), star("HD2", "m_giant")], path)
    assert assign_splits([star("HD2", "m_giant")], read_splits(path)) == {"HD2": "test"}


@pytest.mark.realdata
def test_every_library_object_has_its_split_frozen(shared_spectra, capsys):
    sources = benchmark.load_sources(shared_spectra)
    frozen = read_splits()
    assert {s.obj for s in sources} <= set(frozen), "run --freeze-splits and commit the file"
    assert assign_splits(sources) == {s.obj: frozen[s.obj] for s in sources}
    with open(benchmark.sources.SPLITS_FILE, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["object"] for r in rows] == sorted(r["object"] for r in rows)
    # the command adds nothing, and so leaves the committed file as it is
    before = benchmark.sources.SPLITS_FILE.read_bytes()
    assert main(["--freeze-splits", "--spectra", str(shared_spectra)]) == 0
    assert "0 new object(s)" in capsys.readouterr().out
    assert benchmark.sources.SPLITS_FILE.read_bytes() == before
