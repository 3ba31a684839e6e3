"""Export reviewed decisions as training data: SFT trajectories, RL labels, DPO pairs.

    python launch.py export sft   --db loupe.db --out exports/sft-1 --renderer speco3
    python launch.py export rl    --db loupe.db --out exports/rl-1
    python launch.py export pairs --db loupe.db --out exports/pairs-1

What goes in
- sft: agent trajectories an expert accepted (resolved label = agent verdict, well formed,
  finished), trajectories an expert corrected, and approved authored trajectories.
- rl: every candidate with a resolved label (expert reviews or adjudication), else the
  verdict of an approved authored trajectory, a gold label or a catalogue label; label only.
- pairs: the agent's trajectory against its correction (or against an approved authored
  trajectory that reaches the other verdict).

The correction rule (one rule, used by sft and pairs). An expert who corrects a trajectory
gives the label L, an explanation E and, optionally, the index k (0-based, into
`Trajectory.steps`) of the first step they judged wrong. The corrected trajectory keeps the
agent's steps before k (all its tool-call steps when k is not given, dropping its final
answer), drops step k and everything after it, and appends one final assistant turn
`<think>E</think><answer>\\boxed{L} E</answer>`. Its verdict is L, its explanation E. A
review that flips the label without an explanation gives no correction: that candidate
goes to rl only (counted under `not_exported` in the manifest).

Rows
- One row per object and task (`Candidate.object_id`); when several sources offer one, an
  approved authored trajectory beats a correction, which beats an accepted agent run; the
  newest wins among equals. Labels come from the store's resolution rule
  (`Candidate.label`: majority with an adjudicator's override).
- Splits by object: an object's existing `Candidate.split` wins (if its candidates name
  several, the most held-out one: holdout > test > train); otherwise a hash of the object
  id puts `--test-fraction` of objects in test. No object is in two splits.
- Deterministic: rows sorted by (split, task, object, candidate), no timestamps or random
  values inside any file; the same inputs give byte-identical files.
- Incremental: only rows whose content is new since the earlier batches of that kind
  (`--full` exports everything). A row that changed (a new review, an approved authored
  version) is exported again with the same `id` (object:task); keep the last one when
  concatenating batches. `manifest.json` counts it under `revised`.
- A row that cannot be built (a spectrum file that no longer reads, a step the tool
  refuses) is reported in the manifest with its id and reason; the other rows are kept.

Files
- sft: `hf/` (a `datasets.DatasetDict` saved with `save_to_disk`, one split per folder,
  columns `messages` in chat format with `{"type": "image"}` placeholders and `images`, as
  TRL's SFTTrainer reads them) and `sharegpt/` (LLaMA-Factory: `train.json`/`test.json`
  with `messages` holding `<image>` tokens, `images` paths relative to that folder,
  `images/*.png`, and `dataset_info.json`).
- rl: `{split}.parquet` and `{split}.jsonl`, SpecVI-Bench row schema plus Loupe's columns
  (id, task, label, split, path, hdu, row, object_id, source); overview images under
  `images/` (in the parquet too, as `{bytes, path}`).
- pairs: `hf/` with TRL's conversational preference columns `prompt`, `chosen`,
  `rejected` and `images` (the prompt's images). The prompt is the conversation up to the
  turn where the two trajectories part (with every image before it), `chosen` the
  expert's turn there and `rejected` the agent's, so each completion is one assistant
  turn and DPO needs no images inside completions. `jsonl/` has the same with image paths.
- `manifest.json`: kind, code version, renderer, counts per split/task/label/source, what
  was skipped and why, and the sha256 of every other file.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import shutil
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent.spectrum import Spectrum
from agent.trajectory import Step, Trajectory
from annotate.authoring import assistant_text, final_step
from db.store import DEFAULT_DB, code_version

Kind = Literal["sft", "rl", "pairs"]
KINDS: tuple[str, ...] = ("sft", "rl", "pairs")
SPLIT_ORDER = {"train": 0, "test": 1, "holdout": 2}
# A source's rank when several offer one object+task: higher wins.
SOURCE_RANK = {"authored": 3, "corrected": 2, "accepted": 1, "review": 3, "gold": 2, "catalog": 1}
# SpecVI-Bench's data_source names for Loupe's task names (others are the same).
SPECVI_SOURCE = {"carbon": "carbon", "s_type": "ss", "m_giant": "gm", "cv": "cv", "wd": "wd"}
AGENT_NAME = "tool_agent"
FORMAT_VERSION = 1


# -- the record an exporter works on ------------------------------------------------------
@dataclass
class ExportRecord:
    """One candidate's exportable decision, independent of where it was stored."""

    candidate_id: int  # the store's candidate id (ExportItem.entity_id)
    key: str  # candidate id users see
    object_id: str
    task: str
    label: str  # resolved YES / NO
    source: str  # sft/pairs: accepted | corrected | authored; rl: review | gold | catalog
    spectrum_ref: dict[str, Any] = field(default_factory=dict)  # path, hdu, row
    split: str | None = None  # the object's existing split, if the store has one
    trajectory: Trajectory | None = None  # sft: what to train on; pairs: chosen
    rejected: Trajectory | None = None  # pairs: the agent's trajectory
    recency: int = 0  # larger is newer (a review or authored id): breaks ties in dedup

    @property
    def row_id(self) -> str:
        return f"{self.object_id}:{self.task}"

    def content_hash(self) -> str:
        """Hash of what is exported for this record (not of rendered pixels)."""
        payload = {
            "key": self.key,
            "object_id": self.object_id,
            "task": self.task,
            "label": self.label,
            "source": self.source,
            "ref": self.spectrum_ref,
            "trajectory": _traj_payload(self.trajectory),
            "rejected": _traj_payload(self.rejected),
        }
        return "sha256:" + _sha(json.dumps(payload, sort_keys=True, default=str).encode())


def _traj_payload(t: Trajectory | None) -> Any:
    if t is None:
        return None
    return {
        "steps": [[s.raw, s.window, s.tool_call] for s in t.steps],
        "verdict": t.verdict,
        "explanation": t.explanation,
    }


@dataclass
class ExportResult:
    kind: str
    out: Path
    manifest: dict[str, Any]
    items: list[tuple[int, str]]  # (candidate id, content hash) of the rows written
    errors: list[dict[str, str]]
    seconds: float = 0.0
    batch_id: int | None = None
    existing: bool = False  # `out` already held this recorded batch; nothing was written


# -- the correction rule ------------------------------------------------------------------
def corrected_trajectory(
    agent: Trajectory, label: str, explanation: str, wrong_step: int | None = None
) -> Trajectory:
    """The agent's trajectory with an expert's correction as its final answer.

    Keeps the steps before `wrong_step` (every tool-call step when it is None), drops the
    rest, and appends the expert's answer turn (see the module docstring).

    >>> from agent.trajectory import Step, Trajectory
    >>> call = {"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [1, 2]}}
    >>> t = Trajectory(id="c1", task="wd", steps=[Step(thought="a", tool_call=call, raw="A"),
    ...     Step(thought="b", tool_call=call, raw="B"), Step(thought="c", answer="YES", raw="C")],
    ...     verdict="YES")
    >>> c = corrected_trajectory(t, "NO", "Narrow Balmer lines: an A star.", wrong_step=1)
    >>> [s.raw for s in c.steps[:-1]], c.steps[-1].answer, c.verdict
    (['A'], 'NO', 'NO')
    >>> len(corrected_trajectory(t, "NO", "x").steps)  # no index: both zooms kept
    3
    """
    if label not in ("YES", "NO"):
        raise ValueError(f"label must be YES or NO, got {label!r}")
    if not (explanation or "").strip():
        raise ValueError("a correction needs the expert's explanation")
    if wrong_step is None:
        kept = [s for s in agent.steps if s.answer is None and s.tool_call is not None]
    else:
        if not 0 <= wrong_step < max(len(agent.steps), 1):
            raise ValueError(
                f"wrong step {wrong_step} is outside the trajectory's {len(agent.steps)} steps"
            )
        kept = [s for s in agent.steps[:wrong_step] if s.answer is None]
    steps = [Step.from_dict(s.to_dict()) for s in kept]
    for s in steps:
        if not s.raw:
            s.raw = assistant_text(s)
    steps.append(final_step(label, explanation.strip()))
    return dataclasses.replace(
        agent,
        steps=steps,
        verdict=label,  # type: ignore[arg-type]
        explanation=explanation.strip(),
        format_ok=True,
        state="done",
        error=None,
        params={**agent.params, "corrected": True},
    )


# -- selection: splits and dedup ----------------------------------------------------------
def hash_split(object_id: str, test_fraction: float, salt: str = "loupe") -> str:
    """`test` for about `test_fraction` of object ids, `train` for the rest; stable.

    >>> hash_split("obj-1", 0.0), hash_split("obj-1", 1.0)
    ('train', 'test')
    """
    h = int(hashlib.sha256(f"{salt}:{object_id}".encode()).hexdigest()[:12], 16) / 16**12
    return "test" if h < test_fraction else "train"


def object_split(
    object_id: str, existing: Iterable[str | None], test_fraction: float, salt: str = "loupe"
) -> str:
    """The split of an object: its candidates' existing split wins (the most held-out one
    if they disagree), else the hash.

    >>> object_split("o", ["train", None, "test"], 0.1)
    'test'
    >>> object_split("o", [None], 0.0)
    'train'
    """
    named = {s for s in existing if s}
    unknown = named - set(SPLIT_ORDER)
    if unknown:
        raise ValueError(f"object {object_id}: unknown split {sorted(unknown)}")
    if named:
        return max(named, key=SPLIT_ORDER.__getitem__)
    return hash_split(object_id, test_fraction, salt)


def dedup(
    records: Iterable[ExportRecord], rank: dict[str, int] | None = None
) -> list[ExportRecord]:
    """One record per (object, task): the best source (`rank`), then the newest."""
    rank = SOURCE_RANK if rank is None else rank
    best: dict[tuple[str, str], ExportRecord] = {}

    def key(r: ExportRecord) -> tuple:
        return (rank.get(r.source, 0), r.recency, r.candidate_id)

    for r in records:
        k = (r.object_id, r.task)
        if k not in best or key(r) > key(best[k]):
            best[k] = r
    return list(best.values())


def sort_key(r: ExportRecord) -> tuple:
    return (SPLIT_ORDER.get(r.split or "train", 9), r.task, r.object_id, r.key, r.candidate_id)


# -- rendering (runs in worker processes) --------------------------------------------------
@dataclass
class Conversation:
    """A trajectory as chat messages with image placeholders, plus the PNGs in order."""

    messages: list[dict[str, Any]]  # content: [{"type": "text", "text"} | {"type": "image"}]
    images: list[bytes]


def _png(img: Any) -> bytes:
    if isinstance(img, bytes | bytearray):
        return bytes(img)
    from agent.render import to_png

    return to_png(img)


def _load(ref: dict[str, Any]) -> Spectrum:
    from agent.formats import load_one

    path = ref.get("path")
    if not path:
        raise ValueError("no spectrum file recorded")
    hdu = ref.get("hdu")
    if isinstance(hdu, str) and hdu.isdigit():
        hdu = int(hdu)
    return load_one(Path(path), hdu=hdu, row=ref.get("row"))


class _Images:
    """Renders the global view and zooms of one spectrum, each window once."""

    def __init__(self, spectrum: Spectrum, renderer: str):
        self.spectrum = spectrum
        self.renderer = renderer
        self._cache: dict[Any, bytes] = {}

    def global_view(self) -> bytes:
        if "global" not in self._cache:
            from agent.tool import global_view

            view = global_view(self.spectrum, renderer=self.renderer)
            if getattr(view, "error", None):
                raise ValueError(f"global view failed: {view.error}")
            self._cache["global"] = _png(view.image)
        return self._cache["global"]

    def step(self, step: Step) -> bytes:
        if step.window is None:
            raise ValueError("a zoom step has no window to render")
        key = (float(step.window[0]), float(step.window[1]))
        if key not in self._cache:
            from agent.tool import render_window

            # The export's renderer, not the one recorded in the step: the images must be
            # what the model that trains on them will see at inference.
            self._cache[key] = _png(render_window(self.spectrum, key, renderer=self.renderer))
        return self._cache[key]


def conversation(traj: Trajectory, images: _Images) -> Conversation:
    """`traj.to_messages()` with every image reference replaced by a placeholder and the
    image rendered (global view first, then each tool response's zoom, in order)."""
    for s in traj.steps:
        if not s.raw:
            s.raw = assistant_text(s)
    msgs = traj.to_messages()
    image_steps = [
        s
        for s in traj.steps
        if s.tool_call is not None and s.answer is None and s.observation_image
    ]
    pngs: list[bytes] = []
    out: list[dict[str, Any]] = []
    n_img = 0
    for m in msgs:
        content = m["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        items = []
        for it in content:
            if it.get("type") == "image" or "image" in it:
                if n_img == 0:
                    pngs.append(images.global_view())
                else:
                    if n_img - 1 >= len(image_steps):
                        raise ValueError("more images in the conversation than zoom steps")
                    pngs.append(images.step(image_steps[n_img - 1]))
                n_img += 1
                items.append({"type": "image", "text": None})
            else:
                items.append({"type": "text", "text": str(it.get("text", ""))})
        out.append({"role": m["role"], "content": items})
    if n_img != 1 + len(image_steps):
        raise ValueError(f"{n_img} images in the conversation for {len(image_steps)} zooms")
    return Conversation(out, pngs)


@dataclass
class _Job:
    index: int
    kind: str
    record: ExportRecord
    renderer: str


@dataclass
class _Built:
    index: int
    row: dict[str, Any] | None = None
    images: dict[str, list[bytes]] = field(default_factory=dict)
    error: str | None = None


def _build(job: _Job) -> _Built:
    r = job.record
    try:
        spectrum = _load(r.spectrum_ref)
        imgs = _Images(spectrum, job.renderer)
        if job.kind == "sft":
            assert r.trajectory is not None
            conv = conversation(r.trajectory, imgs)
            return _Built(job.index, {"messages": conv.messages}, {"images": conv.images})
        if job.kind == "pairs":
            assert r.trajectory is not None and r.rejected is not None
            return _build_pair(job.index, r, imgs)
        return _build_rl(job.index, r, spectrum, imgs)
    except Exception as exc:  # one bad row must not end the export
        text = str(exc) or type(exc).__name__
        return _Built(
            job.index, error=text if type(exc).__name__ in text else f"{type(exc).__name__}: {text}"
        )


def _build_pair(index: int, r: ExportRecord, imgs: _Images) -> _Built:
    chosen = conversation(r.trajectory, imgs)  # type: ignore[arg-type]
    rejected = conversation(r.rejected, imgs)  # type: ignore[arg-type]
    # The conversations share system + user; they part at the first differing turn.
    n = 0
    while (
        n < min(len(chosen.messages), len(rejected.messages))
        and chosen.messages[n] == rejected.messages[n]
    ):
        n += 1
    if n < 2 or n >= len(chosen.messages) or n >= len(rejected.messages):
        raise ValueError("chosen and rejected trajectories do not differ")
    if chosen.messages[n]["role"] != "assistant" or rejected.messages[n]["role"] != "assistant":
        raise ValueError("the trajectories part at a tool response, not at an assistant turn")
    prompt = chosen.messages[:n]
    n_prompt_images = sum(1 for m in prompt for it in m["content"] if it["type"] == "image")
    row = {"prompt": prompt, "chosen": [chosen.messages[n]], "rejected": [rejected.messages[n]]}
    return _Built(index, row, {"images": chosen.images[:n_prompt_images]})


def _build_rl(index: int, r: ExportRecord, spectrum: Spectrum, imgs: _Images) -> _Built:
    from agent.prompts import system_prompt, task_prompt

    good = spectrum.good
    wave = spectrum.vacuum_wavelength()[good]
    flux = spectrum.flux[good]
    name = Path(str(r.spectrum_ref.get("path") or "")).name
    row = {
        "data_source": SPECVI_SOURCE.get(r.task, r.task),
        "prompt": [
            {"role": "system", "content": system_prompt()},
            {"role": "user", "content": "<image>" + task_prompt(r.task)},
        ],
        "ability": "spectral_vetting",
        "reward_model": {"style": "rule", "ground_truth": r.label},
        "agent_name": AGENT_NAME,
        "extra_info": {
            "index": index,
            "name": name,
            "split": r.split,
            "tools_kwargs": {
                "spectral_visualization_tool": {
                    "create_kwargs": {
                        "flux": [float(x) for x in flux],
                        "wavelength": [float(x) for x in wave],
                        "redshift": float(spectrum.redshift),
                    }
                }
            },
        },
    }
    return _Built(index, row, {"images": [imgs.global_view()]})


def _run_jobs(jobs: list[_Job], workers: int) -> Iterable[_Built]:
    if workers <= 1 or len(jobs) < 32:
        for j in jobs:
            yield _build(j)
        return
    # Order is kept: map returns results in submission order.
    with ProcessPoolExecutor(max_workers=workers) as pool:
        yield from pool.map(_build, jobs, chunksize=max(1, min(64, len(jobs) // (workers * 8))))


# -- writers ------------------------------------------------------------------------------
def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, allow_nan=False)


class _ImageStore:
    """PNG files named by content, so identical images are written once."""

    def __init__(self, root: Path, folder: str = "images"):
        self.root = root
        self.folder = folder
        self.written: set[str] = set()

    def put(self, png: bytes) -> str:
        name = f"{self.folder}/{_sha(png)[:20]}.png"
        if name not in self.written:
            _write(self.root / name, png)
            self.written.add(name)
        return name


def _sharegpt_messages(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    out = []
    for m in messages:
        text = "".join("<image>" if it["type"] == "image" else it["text"] for it in m["content"])
        out.append({"role": m["role"], "content": text})
    return out


class _HFWriter:
    """Rows of one split streamed to an Arrow file, then saved with `save_to_disk`."""

    def __init__(self, features: Any, tmp: Path, split: str):
        from datasets.arrow_writer import ArrowWriter

        self.path = tmp / f"{split}.arrow"
        self.writer = ArrowWriter(features=features, path=str(self.path))
        self.hash = hashlib.sha256()
        self.n = 0

    def write(self, row: dict[str, Any]) -> None:
        self.writer.write(row)
        self.hash.update(_dumps({k: v for k, v in row.items() if k != "images"}).encode())
        for img in row.get("images") or []:
            self.hash.update(img["bytes"])
        self.n += 1

    def dataset(self):
        from datasets import Dataset

        self.writer.finalize()
        self.writer.close()
        ds = Dataset.from_file(str(self.path))
        # The fingerprint lands in state.json: derive it from the content, not at random.
        ds._fingerprint = self.hash.hexdigest()[:16]
        return ds


def _save_hf(writers: dict[str, _HFWriter], out: Path) -> None:
    from datasets import DatasetDict

    # An empty split cannot be loaded back by `load_from_disk`, so only non-empty ones go in.
    dd = DatasetDict({s: w.dataset() for s, w in sorted(writers.items(), key=_split_order) if w.n})
    if dd:
        from datasets.utils import logging as ds_logging

        was_on = ds_logging.is_progress_bar_enabled()
        ds_logging.disable_progress_bar()  # one bar per split is noise in a CLI summary
        try:
            dd.save_to_disk(str(out))
        finally:
            if was_on:
                ds_logging.enable_progress_bar()


def _split_order(item: tuple[str, Any]) -> int:
    return SPLIT_ORDER.get(item[0], 9)


def _message_features(with_text_only: bool = False):
    from datasets import List, Value

    return List(
        {
            "role": Value("string"),
            "content": List({"type": Value("string"), "text": Value("string")}),
        }
    )


def _common_features() -> dict[str, Any]:
    from datasets import Value

    return {
        "id": Value("string"),
        "candidate": Value("string"),
        "object_id": Value("string"),
        "task": Value("string"),
        "label": Value("string"),
        "source": Value("string"),
        "split": Value("string"),
    }


def _common_row(r: ExportRecord) -> dict[str, Any]:
    return {
        "id": r.row_id,
        "candidate": r.key,
        "object_id": r.object_id,
        "task": r.task,
        "label": r.label,
        "source": r.source,
        "split": r.split,
    }


def _built_rows(
    records: Sequence[ExportRecord], built: Iterable[_Built], errors: list[dict[str, Any]]
) -> Iterator[tuple[ExportRecord, _Built]]:
    """Each built row with its record; a row that failed to build goes to `errors` instead."""
    for b in built:
        r = records[b.index]
        if b.error:
            errors.append({"id": r.row_id, "candidate": r.key, "reason": b.error})
        else:
            yield r, b


def _write_sft(records: list[ExportRecord], built: Iterable[_Built], out: Path, tmp: Path, errors):
    from datasets import Features, Image, List

    features = Features(
        {**_common_features(), "messages": _message_features(), "images": List(Image())}
    )
    writers: dict[str, _HFWriter] = {}
    sharegpt: dict[str, list[dict[str, Any]]] = defaultdict(list)
    images = _ImageStore(out / "sharegpt")
    written = []
    for r, b in _built_rows(records, built, errors):
        msgs = b.row["messages"]
        pngs = b.images["images"]
        sg = _sharegpt_messages(msgs)
        n_tokens = sum(m["content"].count("<image>") for m in sg)
        if n_tokens != len(pngs):
            errors.append(
                {
                    "id": r.row_id,
                    "candidate": r.key,
                    "reason": f"{n_tokens} <image> tokens for {len(pngs)} images "
                    "(a thought contains the text <image>)",
                }
            )
            continue
        split = r.split or "train"
        w = writers.get(split) or writers.setdefault(split, _HFWriter(features, tmp, split))
        w.write(
            {
                **_common_row(r),
                "messages": msgs,
                "images": [{"bytes": p, "path": None} for p in pngs],
            }
        )
        sharegpt[split].append(
            {**_common_row(r), "messages": sg, "images": [images.put(p) for p in pngs]}
        )
        written.append(r)
    _save_hf(writers, out / "hf")
    info = {}
    for split, rows in sorted(sharegpt.items(), key=_split_order):
        _write(
            out / "sharegpt" / f"{split}.json",
            (json.dumps(rows, ensure_ascii=False, indent=1, sort_keys=True) + "\n").encode(),
        )
        info[f"loupe_sft_{split}"] = {
            "file_name": f"{split}.json",
            "formatting": "sharegpt",
            "columns": {"messages": "messages", "images": "images"},
            "tags": {
                "role_tag": "role",
                "content_tag": "content",
                "user_tag": "user",
                "assistant_tag": "assistant",
                "system_tag": "system",
            },
        }
    if info:
        _write(
            out / "sharegpt" / "dataset_info.json",
            (json.dumps(info, indent=2, sort_keys=True) + "\n").encode(),
        )
    return written


def _write_pairs(records, built, out: Path, tmp: Path, errors):
    from datasets import Features, Image, List

    features = Features(
        {
            **_common_features(),
            "prompt": _message_features(),
            "chosen": _message_features(),
            "rejected": _message_features(),
            "images": List(Image()),
        }
    )
    writers: dict[str, _HFWriter] = {}
    lines: dict[str, list[str]] = defaultdict(list)
    images = _ImageStore(out / "jsonl")
    written = []
    for r, b in _built_rows(records, built, errors):
        split = r.split or "train"
        w = writers.get(split) or writers.setdefault(split, _HFWriter(features, tmp, split))
        pngs = b.images["images"]
        w.write({**_common_row(r), **b.row, "images": [{"bytes": p, "path": None} for p in pngs]})
        lines[split].append(
            _dumps({**_common_row(r), **b.row, "images": [images.put(p) for p in pngs]})
        )
        written.append(r)
    _save_hf(writers, out / "hf")
    for split, ls in lines.items():
        _write(out / "jsonl" / f"{split}.jsonl", ("\n".join(ls) + "\n").encode())
    return written


def _write_rl(records, built, out: Path, tmp: Path, errors):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    images = _ImageStore(out)
    written = []
    for r, b in _built_rows(records, built, errors):
        ref = r.spectrum_ref
        png = b.images["images"][0]
        row = {
            **b.row,
            "images": [{"bytes": png, "path": images.put(png)}],
            **_common_row(r),
            "split": r.split or "train",
            "path": str(ref.get("path") or ""),
            "hdu": None if ref.get("hdu") is None else str(ref.get("hdu")),
            "row": ref.get("row"),
        }
        rows[row["split"]].append(row)
        written.append(r)
    for split, rs in sorted(rows.items(), key=_split_order):
        table = pa.Table.from_pylist(rs, schema=_rl_schema())
        pq.write_table(table, out / f"{split}.parquet", compression="zstd")
        text = "\n".join(
            _dumps({**x, "images": [{"path": im["path"]} for im in x["images"]]}) for x in rs
        )
        _write(out / f"{split}.jsonl", (text + "\n").encode())
    return written


def _rl_schema():
    import pyarrow as pa

    msg = pa.struct([("role", pa.string()), ("content", pa.string())])
    kwargs = pa.struct(
        [
            ("flux", pa.list_(pa.float64())),
            ("wavelength", pa.list_(pa.float64())),
            ("redshift", pa.float64()),
        ]
    )
    tools = pa.struct([("spectral_visualization_tool", pa.struct([("create_kwargs", kwargs)]))])
    return pa.schema(
        [
            ("images", pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())]))),
            ("data_source", pa.string()),
            ("prompt", pa.list_(msg)),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
            ("agent_name", pa.string()),
            (
                "extra_info",
                pa.struct(
                    [
                        ("index", pa.int64()),
                        ("name", pa.string()),
                        ("split", pa.string()),
                        ("tools_kwargs", tools),
                    ]
                ),
            ),
            ("id", pa.string()),
            ("candidate", pa.string()),
            ("object_id", pa.string()),
            ("task", pa.string()),
            ("label", pa.string()),
            ("source", pa.string()),
            ("split", pa.string()),
            ("path", pa.string()),
            ("hdu", pa.string()),
            ("row", pa.int64()),
        ]
    )


# -- the pipeline -------------------------------------------------------------------------


def export_records(
    kind: str,
    records: Sequence[ExportRecord],
    out: str | Path,
    *,
    renderer: str = "fast",
    previous: dict[int, set[str]] | None = None,
    test_fraction: float = 0.1,
    split_salt: str = "loupe",
    existing_splits: dict[str, set[str]] | None = None,
    not_exported: dict[str, int] | None = None,
    workers: int | None = None,
    force: bool = False,
    version: str | None = None,
    since_batch: int | None = None,
) -> ExportResult:
    """Write `records` as a `kind` export into `out` (a new folder) and return what was written.

    `previous` maps candidate id -> content hashes already exported in earlier batches of
    this kind; a record whose hash is among them is left out. `existing_splits` maps object
    id -> the splits its candidates carry in the store (all of them, not only exported).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown export kind {kind!r}; choose one of {', '.join(KINDS)}")
    t0 = time.perf_counter()
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not force:
        raise FileExistsError(f"{out} exists and is not empty; choose a new folder or --force")
    previous = previous or {}
    existing_splits = existing_splits or {}
    recs = [
        dataclasses.replace(r)
        for r in dedup(records, PAIR_RANK if kind == "pairs" else SOURCE_RANK)
    ]
    for r in recs:
        splits = set(existing_splits.get(r.object_id, set())) | ({r.split} if r.split else set())
        r.split = object_split(r.object_id, splits, test_fraction, split_salt)
    hashes = {id(r): r.content_hash() for r in recs}
    fresh = [r for r in recs if hashes[id(r)] not in previous.get(r.candidate_id, set())]
    revised = sum(1 for r in fresh if previous.get(r.candidate_id))
    fresh.sort(key=sort_key)

    workers = workers if workers is not None else min(4, os.cpu_count() or 1)
    jobs = [_Job(i, kind, r, renderer) for i, r in enumerate(fresh)]
    errors: list[dict[str, str]] = []

    # Write into a sibling folder and rename at the end: a killed export leaves no
    # half-written folder under the name the user asked for. Scratch files (Arrow shards)
    # sit in a second sibling, so a killed run's leftovers are swept by the next run
    # instead of piling up in /tmp.
    partial = out.parent / f".{out.name}.partial"
    scratch = out.parent / f".{out.name}.scratch"
    for leftover in (partial, scratch):
        if leftover.exists():
            shutil.rmtree(leftover)
    partial.mkdir(parents=True)
    try:
        scratch.mkdir()
        try:
            writer = {"sft": _write_sft, "rl": _write_rl, "pairs": _write_pairs}[kind]
            written = writer(fresh, _run_jobs(jobs, workers), partial, scratch, errors)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        files = {
            p.relative_to(partial).as_posix(): "sha256:" + _sha(p.read_bytes())
            for p in sorted(partial.rglob("*"))
            if p.is_file()
        }
        manifest = _manifest(
            kind,
            written,
            errors,
            files,
            renderer,
            test_fraction,
            split_salt,
            revised,
            not_exported or {},
            version or code_version(),
            since_batch,
            n_candidates=len(recs),
            n_unchanged=len(recs) - len(fresh),
        )
        _write(
            partial / "manifest.json",
            (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode(),
        )
        # On disk before the rename, and the rename on disk before the caller records the
        # batch: a recorded batch always names complete files, even after a power cut.
        _fsync_tree(partial)
        if out.exists():
            shutil.rmtree(out)
        os.replace(partial, out)
        _fsync_dir(out.parent)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return ExportResult(
        kind=kind,
        out=out,
        manifest=manifest,
        items=[(r.candidate_id, hashes[id(r)]) for r in written],
        errors=errors,
        seconds=time.perf_counter() - t0,
    )


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # some platforms cannot open a directory
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            with open(os.path.join(dirpath, name), "rb") as fh:
                os.fsync(fh.fileno())
        _fsync_dir(Path(dirpath))


def content_hash(files: dict[str, str]) -> str:
    """One hash over every file's path and hash (the batch's identity)."""
    text = "".join(f"{p}\t{h}\n" for p, h in sorted(files.items()))
    return "sha256:" + _sha(text.encode())


def _manifest(
    kind,
    written,
    errors,
    files,
    renderer,
    test_fraction,
    salt,
    revised,
    not_exported,
    version,
    since_batch,
    n_candidates,
    n_unchanged,
) -> dict[str, Any]:
    by_task_label: dict[str, Counter] = defaultdict(Counter)
    for r in written:
        by_task_label[r.task][r.label] += 1
    return {
        "kind": kind,
        "format_version": FORMAT_VERSION,
        "code_version": version,
        "renderer": renderer if kind != "rl" else renderer + " (overview image only)",
        "split": {
            "rule": "existing split, else hash of object id",
            "test_fraction": test_fraction,
            "salt": salt,
        },
        "since_batch": since_batch,
        "rows": len(written),
        "revised": revised,
        "unchanged_since_earlier_batches": n_unchanged,
        "candidates_considered": n_candidates,
        "counts": {
            "split": dict(sorted(Counter(r.split for r in written).items())),
            "task": dict(sorted(Counter(r.task for r in written).items())),
            "label": dict(sorted(Counter(r.label for r in written).items())),
            "source": dict(sorted(Counter(r.source for r in written).items())),
            "task_label": {t: dict(sorted(c.items())) for t, c in sorted(by_task_label.items())},
            "split_task_label": _nested(written),
        },
        "errors": sorted(errors, key=lambda e: (e["id"], e["reason"])),
        "not_exported": dict(sorted(not_exported.items())),
        "files": files,
        "content_hash": content_hash(files),
    }


def _nested(written: list[ExportRecord]) -> dict[str, Any]:
    d: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    for r in written:
        d[r.split or "train"][r.task][r.label] += 1
    return {
        s: {t: dict(sorted(c.items())) for t, c in sorted(ts.items())}
        for s, ts in sorted(d.items())
    }


# -- reading the store -------------------------------------------------------------------
# When several sources offer one object+task, the higher rank wins. For pairs a correction
# is preferred: it shares the agent's steps up to the wrong one, a cleaner contrast.
PAIR_RANK = {"corrected": 3, "authored": 2}


@dataclass
class Collected:
    records: list[ExportRecord]
    not_exported: dict[str, int]  # reason -> count
    existing_splits: dict[str, set[str]]


def collect(store: Any, kind: str, include_auto: bool = False) -> Collected:
    """The records a `kind` export draws from, read from a `db.store.Store`."""
    skipped: Counter = Counter()
    existing = store.object_splits()
    extra_ids = store.reference_labelled_ids() if kind == "rl" else []
    cands = store.labelled_candidates()
    usable = []
    for c in cands:
        if c.label_source == "auto" and not include_auto:
            skipped["auto-accepted (no expert saw it)"] += 1
            continue
        usable.append(c)
    if kind == "rl":
        records = [_rl_record(c, c.label, "review") for c in usable]
        labelled = {c.id for c in cands}
        for a in store.list_authored(status="approved"):
            # an audited expert trajectory is an expert label too
            if a.candidate_id not in labelled and a.verdict in ("YES", "NO"):
                c = store.candidate(a.candidate_id)
                records.append(_rl_record(c, a.verdict, "authored"))
                records[-1].recency = a.id
                labelled.add(c.id)
        for cid in extra_ids:
            if cid in labelled:
                continue
            c = store.candidate(cid)
            label, source = (c.gold_label, "gold") if c.gold_label else (c.known_label, "catalog")
            if label in ("YES", "NO"):
                records.append(_rl_record(c, label, source))
        return Collected(records, dict(skipped), existing)

    reviews: dict[int, list[Any]] = defaultdict(list)
    for r in store.reviews():
        reviews[r.candidate_id].append(r)
    info_by_id = {c.id: c for c in cands}
    wanted = {c.trajectory_id for c in usable if c.trajectory_id is not None}
    wanted |= {r.trajectory_id for rs in reviews.values() for r in rs if r.trajectory_id}
    trajectories = store.trajectory_records(sorted(wanted))

    def traj(tid: int) -> Trajectory:
        if tid not in trajectories:
            trajectories[tid] = store.trajectory(tid)
        return trajectories[tid]

    records: list[ExportRecord] = []
    for c in usable:
        rec, reason = _review_record(c, reviews.get(c.id, []), traj, kind)
        if rec is not None:
            records.append(rec)
        elif reason:
            skipped[reason] += 1

    from annotate.authoring import authored_to_trajectory

    for a in store.list_authored(status="approved"):
        c = info_by_id.get(a.candidate_id) or store.candidate(a.candidate_id)
        if c.label in ("YES", "NO") and c.label != a.verdict:
            skipped["approved authored verdict disagrees with the resolved label"] += 1
            continue
        chosen = authored_to_trajectory(a, c)
        rejected = None
        if kind == "pairs":
            agent = traj(c.trajectory_id) if c.trajectory_id is not None else None
            if agent is None or agent.verdict == a.verdict:
                continue  # nothing to contrast: the agent reached the same verdict
            rejected = agent
        records.append(
            ExportRecord(
                candidate_id=c.id,
                key=c.key,
                object_id=c.object_id,
                task=c.task,
                label=a.verdict,
                source="authored",
                spectrum_ref=dict(c.spectrum_ref),
                split=c.split,
                trajectory=chosen,
                rejected=rejected,
                recency=a.id,
            )
        )
    return Collected(records, dict(skipped), existing)


def _rl_record(c: Any, label: str, source: str) -> ExportRecord:
    return ExportRecord(
        candidate_id=c.id,
        key=c.key,
        object_id=c.object_id,
        task=c.task,
        label=label,
        source=source,
        spectrum_ref=dict(c.spectrum_ref),
        split=c.split,
    )


def _review_record(
    c: Any, reviews: list[Any], traj: Callable[[int], Trajectory], kind: str
) -> tuple[ExportRecord | None, str | None]:
    """The accepted or corrected trajectory behind a candidate's resolved label."""
    label = c.label
    agreeing = [r for r in reviews if r.label == label]
    corrections = [
        r
        for r in agreeing
        if r.action in ("correct", "reject")
        and (r.explanation or "").strip()
        and r.trajectory_id is not None
    ]
    base = dict(
        candidate_id=c.id,
        key=c.key,
        object_id=c.object_id,
        task=c.task,
        label=label,
        spectrum_ref=dict(c.spectrum_ref),
        split=c.split,
    )
    if corrections:
        r = max(corrections, key=lambda r: (r.updated, r.id))
        agent = traj(r.trajectory_id)
        try:
            fixed = corrected_trajectory(agent, label, r.explanation, r.wrong_step)
        except ValueError as exc:
            return None, f"correction not applicable ({exc})"
        return (
            ExportRecord(
                **base, source="corrected", trajectory=fixed, rejected=agent, recency=r.id
            ),
            None,
        )
    if kind == "pairs":
        return None, None  # an accepted run has nothing to contrast with
    accepted = [r for r in agreeing if r.trajectory_id is not None]
    tid = (
        max(accepted, key=lambda r: (r.updated, r.id)).trajectory_id
        if accepted
        else c.trajectory_id
    )
    if tid is None:
        return None, "no agent trajectory (label only: rl)"
    t = traj(tid)
    if t.verdict != label:
        return None, "label differs from the agent's verdict and no explanation was given"
    if not t.format_ok or t.state != "done":
        return None, "agent trajectory malformed or unfinished"
    recency = max((r.id for r in agreeing), default=0)
    return ExportRecord(**base, source="accepted", trajectory=t, recency=recency), None


def run_export(
    db: Any,
    kind: str,
    out: str | Path,
    *,
    renderer: str = "fast",
    test_fraction: float = 0.1,
    full: bool = False,
    include_auto: bool = False,
    force: bool = False,
    workers: int | None = None,
    actor: str = "",
) -> ExportResult:
    """Collect from the store, write the export, and record it as an ExportBatch.

    Safe to re-run after a crash, with the same arguments, wherever it stopped: the files
    are renamed into `out` only when complete, and the batch is recorded (one transaction)
    only after that. A re-run into a folder that holds a complete export no batch records
    (killed between the rename and the commit) writes it again, byte-identical, and records
    it; a re-run into a folder whose batch is recorded changes nothing and returns that
    batch (`result.existing`).
    """
    from db.store import Store

    store = db if isinstance(db, Store) else Store(db)
    out = Path(out)
    if not force and out.is_dir() and any(out.iterdir()):
        state = _folder_state(store, kind, out)
        if isinstance(state, ExportResult):
            return state
        force = state
    got = collect(store, kind, include_auto=include_auto)
    previous = {} if full else store.exported_items(kind, "candidate")
    batches = store.export_batches(kind)
    result = export_records(
        kind,
        got.records,
        out,
        renderer=renderer,
        previous=previous,
        test_fraction=test_fraction,
        existing_splits=got.existing_splits,
        not_exported=got.not_exported,
        workers=workers,
        force=force,
        version=store.code_version(),
        since_batch=None if full or not batches else batches[-1].id,
    )
    result.batch_id = store.record_export(
        kind,
        [("candidate", cid, h) for cid, h in result.items],
        manifest=result.manifest,
        path=str(Path(out).resolve()),
        content_hash=result.manifest["content_hash"],
        actor=actor or "export",
    )
    return result


def _folder_state(store: Any, kind: str, out: Path) -> ExportResult | bool:
    """What a non-empty `out` holds: the recorded batch it completes (an ExportResult),
    True for an unrecorded `kind` export (a run killed before its commit: rewrite it), or
    False for anything else (left alone: export_records refuses it)."""
    try:
        manifest = json.loads((out / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(manifest, dict) or manifest.get("kind") != kind:
        return False
    where = str(out.resolve())
    batches = [b for b in store.export_batches() if b.path == where]
    if not batches:
        return True
    b = batches[-1]
    if b.kind != kind or b.content_hash != manifest.get("content_hash"):
        return False
    return ExportResult(
        kind=kind,
        out=out,
        manifest=b.manifest,
        items=[],
        errors=list((b.manifest or {}).get("errors", [])),
        batch_id=b.id,
        existing=True,
    )


# -- CLI ----------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=KINDS, help="sft trajectories, rl labels or DPO pairs")
    parser.add_argument("--db", default=DEFAULT_DB, help="database URL or SQLite file")
    parser.add_argument("--out", required=True, help="new folder to write the export into")
    parser.add_argument(
        "--renderer",
        default="fast",
        choices=("fast", "speco3"),
        help="renderer of the model that will train on the images (speco3 for Spec-o3 weights)",
    )
    parser.add_argument(
        "--test-fraction",
        type=float,
        default=0.1,
        help="fraction of objects without a stored split that go to test (by hash of object id)",
    )
    parser.add_argument(
        "--full", action="store_true", help="export everything, not only what is new"
    )
    parser.add_argument(
        "--include-auto",
        action="store_true",
        help="also export labels the agent set by auto-accept (no expert saw them)",
    )
    parser.add_argument("--force", action="store_true", help="replace --out if it is not empty")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="render processes; None: as many as CPUs, at most 4",
    )
    parser.add_argument("--actor", default="", help="who runs the export (recorded in the batch)")


def main(args: argparse.Namespace) -> int:
    try:
        result = run_export(
            args.db,
            args.kind,
            args.out,
            renderer=args.renderer,
            test_fraction=args.test_fraction,
            full=args.full,
            include_auto=args.include_auto,
            force=args.force,
            workers=args.workers,
            actor=args.actor,
        )
    except (FileExistsError, ValueError) as exc:
        print(f"export: {exc}", file=sys.stderr)
        return 2
    m = result.manifest
    if result.existing:
        print(f"{args.kind}: {result.out} already holds batch {result.batch_id} "
              f"({m['rows']} rows); nothing written")  # fmt: skip
        return 0
    print(f"{args.kind}: {m['rows']} rows into {result.out} ({result.seconds:.1f} s)")
    for name in ("split", "task", "label", "source"):
        print(f"  by {name}: {m['counts'][name]}")
    for e in result.errors:
        print(f"  skipped {e['id']}: {e['reason']}", file=sys.stderr)
    return 0
