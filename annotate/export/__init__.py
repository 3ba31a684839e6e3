"""Export reviewed decisions as training data: SFT trajectories, RL labels, DPO pairs.

    python launch.py export sft   --db loupe.db --out exports/sft-1 --renderer speco3
    python launch.py export rl    --db loupe.db --out exports/rl-1
    python launch.py export pairs --db loupe.db --out exports/pairs-1

What goes in (docs/training-data.md has the whole story)
- sft: agent trajectories an expert accepted (resolved label = agent verdict, well formed,
  finished, source `accepted`), every reject and correction of a trajectory (source
  `corrected` with the expert's reason, `rejected` without one; `correction` says what
  such a row holds: no thought in it speaks for the verdict the expert overruled, and a
  review's comment is never in it), and approved authored trajectories (`authored`).
  Every row is checked against the contradiction table and refused (counted in
  `left_out`) if it fails.
- rl: every candidate with a resolved label (expert reviews or adjudication), else the
  verdict of an approved authored trajectory, a gold label or a catalogue label; label only.
- pairs: the agent's trajectory against its reject or correction (or against an approved
  authored trajectory that reaches the other verdict).
- The manifest's `left_out` counts the decisions an export passed over, by reason;
  `renderer` names the renderer of every image (`DEFAULT_RENDERER` unless `--renderer`).

Where each part lives
- `selection`: reading the store into `ExportRecord`s, one per object and task, and the
  split rule (`collect`, `dedup`, `hash_split`, `object_split`).
- `correction`: the correction rule (`corrected_trajectory`, `rejected_side`), the same
  for sft and pairs, and the contradiction check (`contradictions`).
- `conversation`: a trajectory as chat messages with image placeholders, and its images.
- `sft`, `rl`, `pairs`: one writer per format (each module says what its files hold).
- `writing`: what those writers share (content-named images, streamed HF splits).
- `manifest`: `manifest.json`, the write-then-rename that keeps a recorded batch complete,
  and what a folder already holds on a re-run.
- `pipeline`: `export_records`, records to a finished folder; `batch`: `run_export`, the
  store to a recorded batch (`launch.py export` is `commands.export`).
"""

from annotate.export.batch import run_export
from annotate.export.conversation import Conversation, conversation
from annotate.export.correction import contradictions, corrected_trajectory, rejected_side
from annotate.export.manifest import content_hash
from annotate.export.pipeline import export_records
from annotate.export.record import DEFAULT_RENDERER, KINDS, ExportRecord, ExportResult, Kind
from annotate.export.selection import Collected, collect, dedup, hash_split, object_split

__all__ = [
    "DEFAULT_RENDERER",
    "KINDS",
    "Collected",
    "Conversation",
    "ExportRecord",
    "ExportResult",
    "Kind",
    "collect",
    "content_hash",
    "contradictions",
    "conversation",
    "corrected_trajectory",
    "dedup",
    "export_records",
    "hash_split",
    "object_split",
    "rejected_side",
    "run_export",
]
