#!/usr/bin/env bash
# GPU check of the bundled training scripts and the `hf` and `vllm` policies, on the tiny model.
#
#   GPU_CHECK_TIMEOUT=540 bash bench/gpu_check.sh     # uses .venv/bin/python (or $PYTHON)
#
# Installs nothing. Needs a Python whose torch sees a CUDA device (requirements-gpu.txt).
# Builds the tiny Qwen2.5-VL and a small SFT and RL sample from simulated spectra, runs SFT
# and multi-turn GRPO for a few steps in bf16 on CUDA (GRPO generates with transformers
# here; vLLM inside GRPO is exercised by the real configs), builds a DPO pairs export the
# way experts do (demo -> ingest -> rules vet -> 4 or more of its verdicts rejected with a
# reason, its mistakes first -> `export pairs`)
# and runs DPO from the GRPO checkpoint on it, then times `launch.py vet` over the demo
# spectra with the DPO checkpoint, first with `--policy hf` and then with `--policy vllm`.
# Prints each stage's figure; the vetting figures are spectra/s, once over the whole
# command (model load included) and once over the generation calls only. The last line is
# `vllm_vet_spectra_per_s: N` (generation only), or `hf_vet_spectra_per_s: N` when the
# vLLM stage is skipped. About 3-5 minutes on one GPU.
#
# Every stage runs under `timeout` with what is left of GPU_CHECK_TIMEOUT seconds (default
# 900), so the whole check ends within it.
#
# Environment: PYTHON, GPU_CHECK_TIMEOUT (s), GPU_CHECK_DIR (work folder; default a new
# temporary one), GPU_CHECK_N_VET (spectra per vetting batch, default 16),
# GPU_CHECK_ALLOW_CPU=1 (walk the same stages on CPU in fp32 with fewer steps, shorter
# completions and 4 spectra, to check this script itself in a few minutes; the vLLM stage
# is then skipped, since vLLM needs a GPU).
#
# Exit codes:
#   0    every stage ran, the vLLM vetting batch included
#   1    a stage failed (the end of its log is shown; the full log is in the work folder)
#   3    this torch sees no CUDA device (and GPU_CHECK_ALLOW_CPU is not 1)
#   4    every other stage ran, but vLLM is not importable (or this is a CPU run), so the
#        vLLM vetting batch was skipped
#   124  a stage ran past what was left of GPU_CHECK_TIMEOUT
set -euo pipefail
cd "$(dirname "$0")/.."
# the training scripts run as files (`python training/sft.py`): let them import the project
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

PY="${PYTHON:-.venv/bin/python}"
if [ ! -x "$PY" ]; then
  PY="$(command -v python3)"
fi
WORK="${GPU_CHECK_DIR:-$(mktemp -d /tmp/loupe-gpu-check.XXXXXX)}"
mkdir -p "$WORK"
N_VET="${GPU_CHECK_N_VET:-16}"
LIMIT="${GPU_CHECK_TIMEOUT:-900}"
DEADLINE=$(($(date +%s) + LIMIT))
echo "gpu_check: python $PY, work folder $WORK, time limit ${LIMIT} s"

left() { echo $((DEADLINE - $(date +%s))); }

run() {  # run a stage quietly under what is left of the time limit; stop on failure
  local name=$1; shift
  local budget rc=0
  budget=$(left)
  if [ "$budget" -le 0 ]; then
    echo "gpu_check: no time left for $name (GPU_CHECK_TIMEOUT=$LIMIT)" >&2
    exit 124
  fi
  timeout --kill-after=10 "$budget" "$@" >"$WORK/$name.log" 2>&1 || rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    tail -n 20 "$WORK/$name.log" >&2
    echo "gpu_check: $name ran past the time limit (GPU_CHECK_TIMEOUT=$LIMIT; log: $WORK/$name.log)" >&2
    exit 124
  elif [ "$rc" -ne 0 ]; then
    tail -n 40 "$WORK/$name.log" >&2
    echo "gpu_check: $name failed with exit code $rc (log: $WORK/$name.log)" >&2
    exit 1
  fi
}

secs() { date +%s.%N; }
elapsed() { "$PY" -c "print(f'{$(secs) - $1:.1f}')"; }

VLLM=yes
rc=0
"$PY" - >"$WORK/env.log" 2>&1 <<'EOF' || rc=$?
import os
import sys
import torch
print(f"torch {torch.__version__}, CUDA build {torch.version.cuda}")
if not torch.cuda.is_available():
    print("gpu_check: this torch has no usable CUDA device (CPU-only build or no GPU); "
          "install requirements-gpu.txt into the Python you run this with")
    # GPU_CHECK_ALLOW_CPU=1 walks the same steps on CPU, to check this script itself.
    sys.exit(5 if os.environ.get("GPU_CHECK_ALLOW_CPU") == "1" else 3)
p = torch.cuda.get_device_properties(0)
print(f"device: {torch.cuda.device_count()} x {p.name}, {p.total_memory / 2**30:.0f} GiB, "
      f"bf16 supported: {torch.cuda.is_bf16_supported()}")
import transformers, trl
print(f"transformers {transformers.__version__}, trl {trl.__version__}")
EOF
cat "$WORK/env.log"
BF16=true
case "$rc" in
  0) ;;
  5) BF16=false; VLLM=cpu
     echo "gpu_check: running on CPU (GPU_CHECK_ALLOW_CPU=1); figures are not GPU figures" ;;
  *) exit 3 ;;
esac
VLLM_WHY=""
if ! VLLM_WHY=$("$PY" -c 'import vllm; print(f"vllm {vllm.__version__}")' 2>&1); then
  VLLM=no
  VLLM_WHY=$(printf '%s\n' "$VLLM_WHY" | tail -n 1)
  echo "vllm not importable: $VLLM_WHY"
else
  echo "$VLLM_WHY"
fi
# steps, GRPO group size and tokens per completion: smaller on CPU, where only the
# script's wiring is checked
if [ "$BF16" = true ]; then
  SFT_STEPS=5 GRPO_STEPS=3 GROUP=8 COMPLETION=512 DPO_STEPS=3 NEW_TOKENS=128
else
  SFT_STEPS=2 GRPO_STEPS=1 GROUP=2 COMPLETION=32 DPO_STEPS=1 NEW_TOKENS=16
  N_VET="${GPU_CHECK_N_VET:-4}"
fi

t=$(secs)
run tiny_model "$PY" -m training.tiny_model "$WORK/tiny"
run sample "$PY" -m training.data "$WORK/sample" --n 16 --renderer fast
echo "setup_s: $(elapsed "$t")  (tiny model + 16-candidate SFT/RL sample)"

t=$(secs)
run sft "$PY" training/sft.py --model "$WORK/tiny" --dataset "$WORK/sample/sft" \
  --output_dir "$WORK/sft" --max_steps "$SFT_STEPS" --per_device_train_batch_size 4 \
  --bf16 "$BF16" --save_strategy no --report_to none
grep "^sft:" "$WORK/sft.log" || true
echo "sft_s: $(elapsed "$t")  ($SFT_STEPS steps)"

t=$(secs)
run grpo "$PY" training/grpo.py --model "$WORK/sft" --dataset "$WORK/sample/rl.jsonl" \
  --output_dir "$WORK/grpo" --max_steps "$GRPO_STEPS" --num_generations "$GROUP" \
  --per_device_train_batch_size "$GROUP" --gradient_accumulation_steps 1 \
  --steps_per_generation 1 --max_completion_length "$COMPLETION" --use_vllm false \
  --renderer fast \
  --bf16 "$BF16" --save_strategy no --report_to none
grep "^grpo:" "$WORK/grpo.log" || true
echo "grpo_s: $(elapsed "$t")  ($GRPO_STEPS steps, groups of $GROUP)"

# DPO pairs as experts make them: the rules agent's verdicts on the demo, rejected with a reason
t=$(secs)
DB="sqlite:///$WORK/loupe.db"
run demo "$PY" launch.py demo --out "$WORK/demo" --n-per-class 3 --seed 0 \
  --labels "$WORK/demo/labels.csv"
run ingest "$PY" launch.py ingest "$WORK/demo/labels.csv" --db "$DB"
run rules_vet "$PY" launch.py vet --catalog "$WORK/demo/labels.csv" --policy rules --db "$DB" \
  --workers 1 --no-progress
run reject "$PY" - "$DB" <<'EOF'
import sys
from annotate import review
from db.store import Store

store = Store(sys.argv[1])
store.ensure_expert("gpu-check")
vetted = [c for c in store.list_candidates(limit=1000, order="id") if c.verdict is not None]
wrong = [c for c in vetted if c.known_label is not None and c.verdict != c.known_label]
# The inspector errs on few demo spectra; to have 4 pairs, the expert overrules it on a few
# more (an expert's decision is what the export trains on, whatever the catalogue says).
wrong += [c for c in vetted if c not in wrong][: max(0, 4 - len(wrong))]
if not wrong:
    sys.exit("gpu_check: the rules agent vetted nothing on the demo, so there is nothing to pair")
for c in wrong:
    other = "NO" if c.verdict == "YES" else "YES"
    reason = f"The lines that decide this task say {other}, not {c.verdict}."
    review.decide(store, "gpu-check", c.id, "reject", explanation=reason, seconds=5.0)
print(f"rejected {len(wrong)} of the rules agent's verdicts with a reason")
store.close()
EOF
run pairs "$PY" launch.py export pairs --db "$DB" --out "$WORK/pairs" --renderer fast \
  --test-fraction 0 --workers 1
tail -n 1 "$WORK/reject.log"
echo "pairs_export_s: $(elapsed "$t")  (demo, ingest, rules vet, rejects, export pairs)"

t=$(secs)
run dpo "$PY" training/dpo.py --model "$WORK/grpo" --dataset "$WORK/pairs" \
  --output_dir "$WORK/dpo" --max_steps "$DPO_STEPS" --per_device_train_batch_size 2 \
  --gradient_accumulation_steps 1 --max_length 16384 \
  --bf16 "$BF16" --save_strategy no --report_to none
grep "^dpo:" "$WORK/dpo.log" || true
echo "dpo_s: $(elapsed "$t")  ($DPO_STEPS steps)"

vet_figures() {  # name jsonl seconds -> prints the figures of one vetting batch
  "$PY" - "$@" <<'EOF'
import json, sys
name, path, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
rows = [json.loads(line) for line in open(path) if line.strip()]
if not rows:
    sys.exit(f"gpu_check: the {name} vetting batch wrote no trajectories")
states = {}
for r in rows:
    states[r.get("state")] = states.get(r.get("state"), 0) + 1
# a trajectory's `seconds` is its share of the batched generation calls (no model load)
gen = sum(float(r.get("seconds") or 0.0) for r in rows)
print(f"{name}_vet: {len(rows)} spectra in {seconds:.1f} s with model load "
      f"({len(rows) / seconds:.2f} spectra/s), {gen:.1f} s generating; states {states}")
print(f"{name}_vet_spectra_per_s: {len(rows) / gen if gen > 0 else float('nan'):.2f}")
EOF
}

t=$(secs)
run hf_vet "$PY" launch.py vet --catalog "$WORK/demo/labels.csv" --policy hf --model "$WORK/dpo" \
  --renderer fast --batch-size 8 --max-new-tokens "$NEW_TOKENS" --limit "$N_VET" \
  --out "$WORK/hf_vet.jsonl" --no-progress
hf_s=$(elapsed "$t")
vet_figures hf "$WORK/hf_vet.jsonl" "$hf_s" | tee "$WORK/hf_figures.log"

case "$VLLM" in
  no)
    echo "vllm_vet: skipped: vLLM is not importable in $PY ($VLLM_WHY);" \
      "pip install -r requirements-gpu.txt"
    tail -n 1 "$WORK/hf_figures.log"
    exit 4 ;;
  cpu)
    echo "vllm_vet: skipped: vLLM needs a CUDA device and this is a CPU run"
    tail -n 1 "$WORK/hf_figures.log"
    exit 4 ;;
esac

t=$(secs)
run vllm_vet "$PY" launch.py vet --catalog "$WORK/demo/labels.csv" --policy vllm \
  --model "$WORK/dpo" --renderer fast --batch-size "$N_VET" --max-new-tokens "$NEW_TOKENS" \
  --limit "$N_VET" --out "$WORK/vllm_vet.jsonl" --no-progress
vllm_s=$(elapsed "$t")
vet_figures vllm "$WORK/vllm_vet.jsonl" "$vllm_s"
