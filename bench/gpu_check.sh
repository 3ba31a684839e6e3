#!/usr/bin/env bash
# GPU smoke check of the bundled training scripts and the `hf` policy, on the tiny model.
#
#   bash bench/gpu_check.sh            # uses .venv/bin/python (or $PYTHON)
#
# Installs nothing. Needs a Python whose torch sees a CUDA device (requirements-gpu.txt);
# with a CPU-only torch it says so and exits 3. Builds the tiny Qwen2.5-VL, a small SFT and
# RL sample from simulated spectra, runs SFT and multi-turn GRPO for a few steps in bf16 on
# CUDA (GRPO generates with transformers here; vLLM is exercised by the real configs), then
# times `launch.py vet --policy hf` over the demo spectra with the GRPO checkpoint. Prints
# each figure and ends with one line `gpu_vet_s_per_spectrum: N`. About 2-4 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-.venv/bin/python}"
if [ ! -x "$PY" ]; then
  PY="$(command -v python3)"
fi
WORK="${GPU_CHECK_DIR:-$(mktemp -d /tmp/loupe-gpu-check.XXXXXX)}"
N_VET="${GPU_CHECK_N_VET:-16}"
echo "gpu_check: python $PY, work folder $WORK"

BF16=true
if ! "$PY" - <<'EOF'
import os
import sys
import torch
print(f"torch {torch.__version__}, CUDA build {torch.version.cuda}")
if not torch.cuda.is_available():
    print("gpu_check: this torch has no usable CUDA device (CPU-only build or no GPU); "
          "install requirements-gpu.txt into the Python you run this with", file=sys.stderr)
    # GPU_CHECK_ALLOW_CPU=1 walks the same steps on CPU, to check this script itself.
    sys.exit(0 if os.environ.get("GPU_CHECK_ALLOW_CPU") == "1" else 3)
p = torch.cuda.get_device_properties(0)
print(f"device: {torch.cuda.device_count()} x {p.name}, {p.total_memory / 2**30:.0f} GiB, "
      f"bf16 supported: {torch.cuda.is_bf16_supported()}")
import transformers, trl
print(f"transformers {transformers.__version__}, trl {trl.__version__}")
try:
    import vllm
    print(f"vllm {vllm.__version__}")
except Exception as exc:  # optional here: the check generates with transformers
    print(f"vllm not importable ({type(exc).__name__}); fine for this check")
EOF
then
  exit 3
fi
if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  BF16=false
  echo "gpu_check: running on CPU (GPU_CHECK_ALLOW_CPU=1); figures are not GPU figures"
fi

run() {  # run a step quietly; on failure show the end of its log and stop
  local name=$1; shift
  if ! "$@" >"$WORK/$name.log" 2>&1; then
    tail -n 40 "$WORK/$name.log" >&2
    echo "gpu_check: $name failed (log: $WORK/$name.log)" >&2
    exit 1
  fi
}

secs() { "$PY" -c 'import time; print(f"{time.time():.3f}")'; }
elapsed() { "$PY" -c "print(f'{$(secs) - $1:.1f}')"; }

t=$(secs)
run tiny_model "$PY" -m training.tiny_model "$WORK/tiny"
run sample "$PY" -m training.data "$WORK/sample" --n 16 --renderer fast
echo "setup_s: $(elapsed "$t")  (tiny model + 16-candidate SFT/RL sample)"

t=$(secs)
run sft "$PY" training/sft.py --model "$WORK/tiny" --dataset "$WORK/sample/sft" \
  --output_dir "$WORK/sft" --max_steps 5 --per_device_train_batch_size 4 \
  --bf16 "$BF16" --save_strategy no --report_to none
grep "^sft:" "$WORK/sft.log"
echo "sft_5_steps_s: $(elapsed "$t")"

t=$(secs)
run grpo "$PY" training/grpo.py --model "$WORK/sft" --dataset "$WORK/sample/rl.jsonl" \
  --output_dir "$WORK/grpo" --max_steps 3 --num_generations 8 \
  --per_device_train_batch_size 8 --gradient_accumulation_steps 1 --steps_per_generation 1 \
  --max_completion_length 512 --use_vllm false --renderer fast \
  --bf16 "$BF16" --save_strategy no --report_to none
grep "^grpo:" "$WORK/grpo.log"
echo "grpo_3_steps_s: $(elapsed "$t")"

run demo "$PY" launch.py demo --out "$WORK/demo" --n-per-class 2 --seed 0 \
  --labels "$WORK/demo/labels.csv"
t=$(secs)
run vet "$PY" launch.py vet --catalog "$WORK/demo/labels.csv" --policy hf --model "$WORK/grpo" \
  --renderer fast --batch-size 8 --max-new-tokens 128 --limit "$N_VET" \
  --out "$WORK/vet.jsonl" --no-progress
tail -n 3 "$WORK/vet.log"
vet_s=$(elapsed "$t")
"$PY" - "$WORK/vet.jsonl" "$vet_s" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
if not rows:
    sys.exit("gpu_check: the hf vetting batch wrote no trajectories")
states = {}
for r in rows:
    states[r.get("state")] = states.get(r.get("state"), 0) + 1
seconds = float(sys.argv[2])
print(f"hf_vet: {len(rows)} spectra in {seconds:.1f} s (states {states}; model load included)")
print(f"gpu_vet_s_per_spectrum: {seconds / len(rows):.3f}")
EOF
