"""Training data as `datasets`: SFT exports, RL exports and SpecVI-Bench parquet.

- SFT (`load_sft_dataset`): the folder `launch.py export sft` writes (`save_to_disk`) with
  chat `messages` (content lists of `{"type": "image"}` / `{"type": "text", "text": ...}`)
  and `images`, as TRL's SFTTrainer reads it for VLMs.
- RL (`load_rl_dataset`): label-only rows, from Loupe's RL export (parquet or JSONL) or the
  published SpecVI-Bench parquet files. Each becomes one GRPO prompt with the columns
  `id`, `task`, `ground_truth` ("YES"/"NO"), `spectrum` (a JSON reference that
  `spectrum_from_ref` turns back into a `Spectrum`) and `prompt` (system prompt with the
  tool block, then an empty user turn that the environment fills with the global view and
  the task text, so the model sees exactly the conversation the agent loop builds; a
  SpecVI-Bench row is asked with its own prompt and images, as `vet` asks it).
- `write_sample` writes a small SFT export and RL export from seeded simulated spectra and
  scripted zoom-and-answer runs of the real agent loop: smoke-test data for trying the
  scripts without a store, never training data.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from agent.errors import LoupeError
from agent.protocol import TOOL_NAME, format_turn
from agent.spectrum import Spectrum, SpectrumMeta
from agent.units import lamost_grid

SPECVI_TOOL = TOOL_NAME  # the key SpecVI-Bench rows file the tool arguments under


class DataError(LoupeError, ValueError):
    """A training file or row that cannot be used; the message names it and the problem."""


# -- export folders ----------------------------------------------------------------------


def find_manifest(path: str | Path) -> tuple[Path, dict[str, Any]] | None:
    """The export folder holding `path` and its `manifest.json`, whatever sub-path is given.

    `launch.py export` writes `OUT/manifest.json` beside `OUT/hf/<split>` (sft, pairs) or
    `OUT/<split>.parquet` (rl); a training script may be pointed at any of these.
    """
    p = Path(path).resolve()
    for folder in [p, *p.parents][:4]:
        try:
            manifest = json.loads((folder / "manifest.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(manifest, dict) and manifest.get("kind"):
            return folder, manifest
    return None


def export_renderer(path: str | Path) -> str | None:
    """The renderer an export's images were drawn with (its manifest), if it is an export."""
    found = find_manifest(path)
    if found is None:
        return None
    renderer = found[1].get("renderer")
    # Manifests before format 2 wrote "fast (overview image only)" for rl exports.
    return str(renderer).split()[0] if renderer else None


def check_export(path: str | Path) -> None:
    """Raise `DataError` (one line: the folder and why) when `path` holds nothing to train
    on: missing, an empty folder, or an export whose manifest counts no rows (an export
    without `--full` holds only what is new since the last batch, often nothing)."""
    p = Path(path)
    if not p.exists():
        raise DataError(f"{p}: not found")
    if p.is_dir() and not any(p.iterdir()):
        raise DataError(f"{p}: empty folder, no export in it")
    found = find_manifest(p)
    if found is None:
        return
    folder, manifest = found
    data = [f for f in manifest.get("files", {}) if not f.startswith("images/")]
    if manifest.get("rows") == 0 or (manifest.get("kind") in ("sft", "rl", "pairs") and not data):
        kind = manifest.get("kind", "sft")
        why = manifest.get("left_out", {}).get("reasons") or {}
        since = manifest.get("since_batch")
        raise DataError(
            f"{folder}: the {kind} export holds no rows"
            + (f" (only what was new since batch {since})" if since is not None else "")
            + (f"; left out: {why}" if why else "")
            + f"; for every decision run `launch.py export {kind} --full --out NEW_FOLDER`"
        )


def _load_split(path: Path, split: str, columns: tuple[str, ...], what: str) -> Any:
    """One split of a `save_to_disk` folder (a Dataset, or a DatasetDict's `split`), or JSONL.

    An export folder (`OUT/`, holding `hf/`) is read as its `hf/` DatasetDict.
    """
    from datasets import DatasetDict, load_from_disk

    if not path.exists():
        raise DataError(f"{path}: {what} dataset not found")
    if path.is_dir() and (path / "hf").is_dir() and not (path / "dataset_dict.json").exists():
        path = path / "hf"  # the export folder itself was given
    elif path.is_dir() and (path / f"{split}.jsonl").is_file():
        path = path / f"{split}.jsonl"  # a folder of JSONL splits (the pairs export's jsonl/)
    if path.is_dir():
        try:
            ds = load_from_disk(str(path))
        except Exception as exc:  # datasets raises several types for a bad folder
            raise DataError(f"{path}: not a datasets folder ({exc})") from exc
        # In datasets 5 a DatasetDict has `column_names` too: test the type, not an attribute.
        if isinstance(ds, DatasetDict):
            if split not in ds:
                raise DataError(f"{path}: no {split!r} split (has {', '.join(ds)})")
            ds = ds[split]
    else:
        ds = _jsonl_dataset(path)
    missing = [c for c in columns if c not in ds.column_names]
    if missing:
        raise DataError(
            f"{path}: {what} data needs the column(s) {', '.join(repr(c) for c in missing)} "
            f"(has {ds.column_names})"
        )
    return ds


def _jsonl_dataset(path: Path) -> Any:
    """JSONL rows as a Dataset; an `images` column of paths (relative to the file's folder,
    as the exports write them, or `{"path": ...}`) becomes decoded images, as in `hf/`."""
    from datasets import Dataset, Image, List

    rows = _json_lines(path)
    if not any(isinstance(r, dict) and "images" in r for r in rows):
        return Dataset.from_list(rows)
    for n, r in enumerate(rows, 1):
        paths = []
        for v in r.get("images") or []:
            p = v.get("path") if isinstance(v, dict) else v
            if not isinstance(p, str) or not p:
                raise DataError(f"{path} line {n}: an image is neither a path nor {{'path': ...}}")
            full = Path(p) if Path(p).is_absolute() else path.parent / p
            if not full.is_file():
                raise DataError(f"{path} line {n}: image {p} not found (looked at {full})")
            paths.append(str(full))
        r["images"] = paths
    return Dataset.from_list(rows).cast_column("images", List(Image()))


def keep_grades(ds: Any, min_grade: int | None, where: str | Path) -> Any:
    """The rows an expert graded at least `min_grade` (the exports' `grade` column, 1-4);
    every row when `min_grade` is None."""
    if min_grade is None:
        return ds
    if "grade" not in ds.column_names:
        raise DataError(
            f"{where}: --min_grade {min_grade} needs a 'grade' column (Loupe exports carry "
            f"one; has {ds.column_names})"
        )
    kept = ds.filter(lambda g: g is not None and g >= min_grade, input_columns="grade")
    if not len(kept):
        raise DataError(f"{where}: no row graded {min_grade} or better (of {len(ds)})")
    return kept


# -- SFT -------------------------------------------------------------------------------


def load_sft_dataset(path: str | Path, split: str = "train", min_grade: int | None = None) -> Any:
    """The SFT export at `path` (the export folder, its `hf/` or `hf/<split>` folder, or
    JSONL of `messages` rows): the `messages` and `images` columns of `split`, only rows
    graded at least `min_grade` if given."""
    ds = keep_grades(_load_split(Path(path), split, ("messages",), "SFT"), min_grade, path)
    keep = [c for c in ("messages", "images") if c in ds.column_names]
    return ds.select_columns(keep)


# -- DPO -------------------------------------------------------------------------------


def load_pairs_dataset(path: str | Path, split: str = "train", min_grade: int | None = None) -> Any:
    """The preference pairs at `path` (`launch.py export pairs` folder, its `hf/` or
    `hf/<split>`, its `jsonl/` folder or a `jsonl/<split>.jsonl` file, image paths relative
    to the file): TRL's conversational `prompt`/`chosen`/`rejected` + `images`, only rows
    graded at least `min_grade` if given."""
    columns = ("prompt", "chosen", "rejected")
    ds = keep_grades(_load_split(Path(path), split, columns, "DPO"), min_grade, path)
    keep = [c for c in ("prompt", "chosen", "rejected", "images") if c in ds.column_names]
    return ds.select_columns(keep)


# -- RL --------------------------------------------------------------------------------


def load_rl_dataset(
    paths: str | Path | Iterable[str | Path],
    splits: str | Iterable[str] | None = ("train",),
    limit: int | None = None,
    min_grade: int | None = None,
) -> Any:
    """GRPO prompts from RL exports / SpecVI-Bench files (parquet, JSONL, JSON, folders).

    `splits` (None: all) keeps rows whose `split` column is one of them (rows without one
    are kept); in a folder, files named for another split (`test.parquet`,
    `test_cc.parquet`, as Loupe's RL export and SpecVI-Bench name them) are skipped too, since
    SpecVI-Bench rows carry no split column. A file named explicitly is read whatever its name.
    `min_grade` keeps only rows an expert graded at least that (Loupe's `grade` column).
    """
    from datasets import Dataset

    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = list(paths)
    wanted = None if splits is None else ({splits} if isinstance(splits, str) else set(splits))
    rows: list[dict[str, Any]] = []
    for path, from_folder in _expand(paths):
        if from_folder and wanted is not None:
            named = file_split(path)
            if named is not None and named not in wanted:
                continue
        for i, raw in enumerate(_read_table(path)):
            row_split = raw.get("split") or _as_dict(raw.get("extra_info")).get("split")
            if wanted is not None and row_split not in (None, *wanted):
                continue
            if min_grade is not None and (raw.get("grade") or 0) < min_grade:
                continue
            rows.append(rl_row(raw, path, i))
            if limit is not None and len(rows) >= limit:
                break
    if not rows:
        which = "all" if wanted is None else ", ".join(sorted(wanted))
        graded = "" if min_grade is None else f", graded {min_grade} or better"
        raise DataError(f"no RL rows in {', '.join(map(str, paths))} (splits: {which}{graded})")
    for row in rows:
        row["prompt"] = rl_prompt(row["task"], row["spectrum"])
    return Dataset.from_list(rows)


def rl_prompt(task: str, ref: str | dict[str, Any]) -> list[dict[str, Any]]:
    """A GRPO row's `prompt`: the opening conversation (`agent.protocol.opening_messages`,
    as `vet` builds it), its last user turn left empty for the environment's `reset` to fill
    with the images and text; a SpecVI-Bench row keeps its own system text and prompt."""
    from agent.protocol import message_texts, opening_messages

    opening = opening_messages(task, None, row_messages(ref))
    head = [{"role": m["role"], "content": "".join(message_texts(m))} for m in opening[:-1]]
    return [*head, {"role": "user", "content": ""}]


def row_prompt_source(ref: str | dict[str, Any]) -> tuple[Path, int] | None:
    """The parquet file and row a spectrum reference points into, whose `prompt` column
    (SpecVI-Bench's, or an RL export's) the row is asked with; None for a spectrum file."""
    if isinstance(ref, str):
        ref = json.loads(ref)
    table = ref.get("table") or ref.get("path")
    if not table or ref.get("row") is None or Path(str(table)).suffix != ".parquet":
        return None
    return Path(str(table)), int(ref["row"])


def row_messages(ref: str | dict[str, Any]) -> list[dict[str, Any]] | None:
    """The chat messages of the row's own prompt, else None (Loupe's prompts apply).

    Read through the cached table rather than `agent.formats.specvi.row_prompt`, which
    decodes the row's images: building a dataset needs only the text."""
    src = row_prompt_source(ref)
    if src is None:
        return None
    messages = _table_row(str(src[0]), src[1]).get("prompt")
    if isinstance(messages, str):
        try:
            messages = json.loads(messages)
        except json.JSONDecodeError:
            raise DataError(f"{src[0]} row {src[1]}: prompt is not valid JSON") from None
    return list(messages) if messages else None


SPLIT_NAMES = ("train", "test", "holdout", "val", "validation")


def file_split(path: Path) -> str | None:
    """The split a file's name gives (`train.parquet`, `test_cc.parquet`), else None.

    >>> file_split(Path("test_cc.parquet")), file_split(Path("train.jsonl")), file_split(Path("x.parquet"))
    ('test', 'train', None)
    """
    stem = path.name.split(".")[0].lower()
    for name in SPLIT_NAMES:
        if stem == name or stem.startswith(name + "_") or stem.startswith(name + "-"):
            return name
    return None


def rl_row(raw: dict[str, Any], path: Path, index: int) -> dict[str, Any]:
    """One RL row (Loupe export or SpecVI-Bench) -> {id, task, ground_truth, spectrum, split}."""
    from agent.tasks import resolve_task

    where = f"{path} row {index}"
    extra = _as_dict(raw.get("extra_info"))
    task_name = raw.get("task") or raw.get("data_source")
    if not task_name:
        raise DataError(f"{where}: no 'task' or 'data_source'")
    try:
        task = resolve_task(str(task_name))
    except (KeyError, ValueError) as exc:
        raise DataError(f"{where}: unknown task {task_name!r}") from exc
    truth = raw.get("label")
    if truth is None:
        truth = _as_dict(raw.get("reward_model")).get("ground_truth")
    truth = None if truth is None else str(truth).strip().upper()
    if truth not in ("YES", "NO"):
        raise DataError(f"{where}: label must be YES or NO, got {truth!r}")
    ident = raw.get("id") or extra.get("name") or f"{path.stem}:{extra.get('index', index)}"
    return {
        "id": str(ident),
        "task": task,
        "ground_truth": truth,
        "split": raw.get("split"),
        "spectrum": json.dumps(_spectrum_ref(raw, extra, path, index, where)),
    }


def _spectrum_ref(
    raw: dict[str, Any], extra: dict[str, Any], path: Path, index: int, where: str
) -> dict[str, Any]:
    ref = _as_dict(raw.get("spectrum") or raw.get("spectrum_ref"))
    if not ref and raw.get("path"):
        ref = {"path": raw.get("path"), "hdu": raw.get("hdu"), "row": raw.get("row")}
    if ref.get("path"):
        # A file reference gives the full spectrum (mask, frame); paths are relative to the export.
        p = Path(str(ref["path"]))
        if not p.is_absolute() and not p.exists() and (path.parent / p).exists():
            p = path.parent / p
        if p.exists():
            return {
                "path": str(p.resolve()),
                "hdu": _hdu(ref.get("hdu")),
                "row": _int(ref.get("row")),
            }
    kwargs = _as_dict(
        _as_dict(_as_dict(extra.get("tools_kwargs")).get(SPECVI_TOOL)).get("create_kwargs")
    )
    if kwargs.get("flux") is not None and kwargs.get("wavelength") is not None:
        return {"table": str(path.resolve()), "row": index}
    raise DataError(f"{where}: neither a readable spectrum file nor flux/wavelength arrays")


def spectrum_from_ref(ref: str | dict[str, Any]) -> Spectrum:
    """The spectrum a row's `spectrum` column refers to (a file, or arrays in a table row)."""
    if isinstance(ref, str):
        ref = json.loads(ref)
    if ref.get("path"):
        from agent.formats import load_one

        return load_one(Path(ref["path"]), hdu=ref.get("hdu"), row=ref.get("row"))
    if ref.get("table"):
        path, index = Path(ref["table"]), int(ref["row"])
        raw = _table_row(str(path), index)
        extra = _as_dict(raw.get("extra_info"))
        kw = _as_dict(
            _as_dict(_as_dict(extra.get("tools_kwargs")).get(SPECVI_TOOL)).get("create_kwargs")
        )
        name = extra.get("name") or raw.get("id") or f"{path.stem}:{index}"
        meta = SpectrumMeta(
            id=str(raw.get("id") or name),
            survey=str(raw.get("survey") or "LAMOST"),
            source=str(path),
            row=index,
            extra={"name": str(name)},
        )
        flux = np.array([np.nan if v is None else v for v in kw["flux"]], dtype=float)
        # An RL export carries every finite pixel with its mask and ivar beside the arrays
        # (as the file has them); SpecVI-Bench rows have neither.
        mask, ivar = raw.get("mask"), raw.get("ivar")
        return Spectrum(
            wavelength=np.asarray(kw["wavelength"], dtype=float),
            flux=flux,
            mask=None if mask is None or len(mask) != flux.size else np.asarray(mask, bool),
            ivar=None if ivar is None or len(ivar) != flux.size else np.asarray(ivar, float),
            redshift=float(kw.get("redshift") or 0.0),
            meta=meta,
        )
    if ref.get("wavelength") is not None:
        return Spectrum.from_dict(ref)
    raise DataError(f"spectrum reference without path, table or arrays: {sorted(ref)}")


# -- reading tables --------------------------------------------------------------------


def _expand(paths: Iterable[str | Path]) -> list[tuple[Path, bool]]:
    """(file, found in a folder) for every path given."""
    out: list[tuple[Path, bool]] = []
    for p in map(Path, paths):
        if p.is_dir():
            # An RL export holds each split as parquet and as JSONL: take one of the two.
            found = sorted(f for f in p.rglob("*.parquet") if f.is_file())
            found = found or sorted(f for f in p.rglob("*.jsonl") if f.is_file())
            if not found:
                raise DataError(f"{p}: no parquet/JSONL files in this folder")
            out += [(f, True) for f in found]
        elif p.exists():
            out.append((p, False))
        else:
            raise DataError(f"{p}: RL data file not found")
    return out


def _read_table(path: Path) -> list[dict[str, Any]]:
    return list(_table(str(path)))


@functools.lru_cache(maxsize=8)
def _table(path: str) -> tuple[dict[str, Any], ...]:
    # Cached per process: GRPO environments load one row at a time from the same file.
    p = Path(path)
    try:
        if p.suffix == ".parquet":
            import pyarrow.parquet as pq

            return tuple(pq.read_table(p).to_pylist())
        if p.suffix == ".json":
            data = json.loads(p.read_text())
            return tuple(data if isinstance(data, list) else [data])
        return tuple(_json_lines(p))
    except DataError:
        raise
    except Exception as exc:
        raise DataError(f"{p}: cannot read rows ({type(exc).__name__}: {exc})") from exc


def _table_row(path: str, index: int) -> dict[str, Any]:
    rows = _table(path)
    if not 0 <= index < len(rows):
        raise DataError(f"{path}: no row {index} (has {len(rows)})")
    return rows[index]


def _json_lines(path: Path) -> list[Any]:
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError as exc:
                raise DataError(f"{path} line {n}: not JSON ({exc})") from exc
    return out


def _as_dict(v: Any) -> dict[str, Any]:
    if v is None:
        return {}
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return {}
    return dict(v) if isinstance(v, dict) else {}


def _int(v: Any) -> int | None:
    return None if v is None or v == "" else int(v)


def _hdu(v: Any) -> int | str | None:
    if v is None or v == "":
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return str(v)


# -- smoke-test sample -----------------------------------------------------------------

# (window lo, hi, label) per task: where the scripted runs zoom.
_SAMPLE_WINDOWS: dict[str, list[tuple[float, float, str]]] = {
    "wd": [(4780, 4940, "H-beta"), (4270, 4410, "H-gamma")],
    "cv": [(6480, 6640, "H-alpha"), (4800, 4920, "H-beta")],
    "carbon": [(5080, 5260, "C2 Swan band"), (7000, 7700, "TiO bands")],
    "s_type": [(6400, 6560, "ZrO band"), (7350, 7450, "LaO band")],
    "m_giant": [(8150, 8230, "Na I doublet"), (8460, 8700, "Ca II triplet")],
}
# Features a positive has: (centre, sigma, depth; negative depth = emission).
_SAMPLE_FEATURES: dict[str, list[tuple[float, float, float]]] = {
    "wd": [(4862.7, 40.0, 0.5), (4341.7, 35.0, 0.45), (4102.9, 30.0, 0.4)],
    "cv": [(6564.6, 12.0, -1.5), (4862.7, 10.0, -1.0), (5877.2, 8.0, -0.5)],
    "carbon": [(5165.0, 25.0, 0.5), (4737.0, 25.0, 0.45), (5636.0, 25.0, 0.4)],
    "s_type": [(6474.0, 20.0, 0.4), (5551.0, 20.0, 0.35), (7403.0, 20.0, 0.3)],
    "m_giant": [(7054.0, 30.0, 0.5), (7589.0, 30.0, 0.5), (8542.0, 6.0, 0.4)],
}


def simulated_spectrum(task: str, positive: bool, seed: int, snr: float = 30.0) -> Spectrum:
    """A seeded LAMOST-like spectrum: smooth continuum, the task's features if positive, noise."""
    rng = np.random.default_rng(seed)
    wave = lamost_grid()
    cont = 1.0 + 0.3 * np.sin((wave - 3700.0) / 2500.0 + rng.uniform(0, np.pi))
    flux = cont.copy()
    for centre, sigma, depth in _SAMPLE_FEATURES[task]:
        scale = 1.0 if positive else rng.uniform(0.0, 0.2)
        flux -= cont * depth * scale * np.exp(-0.5 * ((wave - centre) / sigma) ** 2)
    noise = np.abs(cont) / snr
    flux = flux + rng.normal(0.0, 1.0, wave.size) * noise
    kind = "positive" if positive else "negative"
    meta = SpectrumMeta(
        id=f"sim-{task}-{kind}-{seed}",
        survey="simulated",
        snr=snr,
        simulated=True,
        extra={"name": f"sim-{task}-{kind}-{seed}.fits"},
    )
    return Spectrum(wavelength=wave, flux=flux, ivar=1.0 / noise**2, meta=meta)


def _script(task: str, label: str) -> list[str]:
    turns = []
    for lo, hi, name in _SAMPLE_WINDOWS[task]:
        turns.append(format_turn(f"I should zoom into the {name} region.", (lo, hi), label=name))
    seen = "present" if label == "YES" else "absent"
    why = f"The diagnostic features are {seen}."
    turns.append(format_turn(why, answer=label, explanation=why))
    return turns


def sample_trajectories(n: int = 8, seed: int = 0, renderer: str = "fast") -> tuple[list, dict]:
    """Scripted runs of the agent loop over `n` simulated spectra (alternating YES/NO).

    Returns the trajectories and their spectra by id.
    """
    from agent.loop import run_batch
    from agent.policies.scripted import ScriptedPolicy

    tasks = list(_SAMPLE_WINDOWS)
    items, scripts, labels = [], {}, {}
    for i in range(n):
        task = tasks[i % len(tasks)]
        label = "YES" if i % 2 == 0 else "NO"
        spec = simulated_spectrum(task, label == "YES", seed=seed * 1000 + i)
        items.append((spec, task))
        scripts[spec.meta.id] = _script(task, label)
        labels[spec.meta.id] = label
    policy = ScriptedPolicy(scripts=scripts, renderer=renderer)
    trajs = run_batch(items, policy, renderer=renderer)
    for t in trajs:
        t.label = labels[t.id]
    return trajs, {spec.meta.id: spec for spec, _ in items}


def sft_example(traj: Any, spectrum: Spectrum) -> dict[str, Any]:
    """A trajectory as one SFT row: messages with image placeholders, and the rendered images."""
    from agent.tool import render_reference

    messages, images = [], []
    for m in traj.to_messages():
        content = []
        for item in m["content"]:
            if item.get("type") == "image":
                img = item["image"]
                if isinstance(img, str):
                    img = render_reference(spectrum, img)
                if img is None:
                    raise DataError(f"{traj.id}: cannot render image {item['image']!r}")
                images.append(img.convert("RGB"))
                content.append({"type": "image", "text": None})
            else:
                content.append({"type": "text", "text": item["text"]})
        messages.append({"role": m["role"], "content": content})
    return {"messages": messages, "images": images}


def write_sample(
    out_dir: str | Path, n: int = 8, seed: int = 0, renderer: str = "fast"
) -> tuple[Path, Path]:
    """Write `OUT/sft` (datasets folder) and `OUT/rl.jsonl` from scripted runs; return both."""
    from datasets import Dataset

    from annotate.export.rl import SPECVI_SOURCE

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    trajs, spectra = sample_trajectories(n=n, seed=seed, renderer=renderer)
    bad = [t.id for t in trajs if t.state != "done" or not t.format_ok]
    if bad:
        raise DataError(f"scripted sample runs did not finish cleanly: {bad}")
    sft_dir = out / "sft"
    # As an export records it, so the training scripts know the images' renderer.
    (out / "manifest.json").write_text(json.dumps({"kind": "sample", "renderer": renderer}))
    Dataset.from_list([sft_example(t, spectra[t.id]) for t in trajs]).save_to_disk(str(sft_dir))
    rl_path = out / "rl.jsonl"
    with open(rl_path, "w") as fh:
        for t in trajs:
            spec = spectra[t.id]
            row = {
                "id": t.id,
                "task": t.task,
                "label": t.label,
                "split": "train",
                "data_source": SPECVI_SOURCE.get(t.task, t.task),  # the authors' names
                "reward_model": {"ground_truth": t.label},
                "extra_info": {
                    "name": spec.meta.extra["name"],
                    "tools_kwargs": {
                        SPECVI_TOOL: {
                            "create_kwargs": {
                                "flux": [
                                    None if not np.isfinite(v) else v for v in spec.flux.tolist()
                                ],
                                "wavelength": spec.wavelength.tolist(),
                                "redshift": spec.redshift,
                            }
                        }
                    },
                },
            }
            fh.write(json.dumps(row) + "\n")
    return sft_dir, rl_path


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        description="Write a small smoke-test SFT export and RL export from simulated spectra."
    )
    parser.add_argument("out_dir", help="folder to write sft/ and rl.jsonl into")
    parser.add_argument("--n", type=int, default=8, help="number of simulated candidates")
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulated spectra")
    parser.add_argument("--renderer", default="fast", help="renderer of the images (fast, speco3)")
    args = parser.parse_args(argv)
    sft_dir, rl_path = write_sample(args.out_dir, n=args.n, seed=args.seed, renderer=args.renderer)
    print(f"SFT sample: {sft_dir}\nRL sample: {rl_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
