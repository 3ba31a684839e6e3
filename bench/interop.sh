#!/usr/bin/env bash
# Do Loupe's checkpoints and exports open in the tools ML engineers use?
#
#   bash bench/interop.sh            # Loupe's side runs with .venv/bin/python (or $PYTHON)
#
# 1. LLaMA-Factory: one SFT step (`llamafactory-cli train`) on `export sft`'s sharegpt/
#    folder, from a Loupe-saved tiny checkpoint (`training.tiny_model`, saved as the
#    training scripts save theirs).
# 2. verl: `RLHFDataset` loads `export rl`'s train.parquet with that checkpoint's processor
#    and tokenizer, and its first row holds the overview image and its image tokens.
# The exports come from the loop a team runs: demo spectra -> ingest -> rules vet -> the
# truth imported as an expert's labels -> `export sft` and `export rl`.
#
# The tools live in their own environment, never Loupe's: INTEROP_VENV (default
# /work/interop/venv; made here when missing) with llamafactory==0.9.5, a current verl,
# qwen-vl-utils (verl's image reader) and torch 2.13.0. Public torchvision wheels are built against the CUDA torch, and
# transformers builds no Qwen2.5-VL processor without torchvision, so where the installed
# torch cannot load torchvision, that torch is replaced by the public index's CUDA build
# of the same version (several GB; it runs on the CPU all the same).
#
# Environment: PYTHON (Loupe's), INTEROP_VENV, INTEROP_DIR (work folder; default a new
# temporary one), INTEROP_TIMEOUT (seconds per stage, default 900).
# The last line is `interop: N/2`; exit 0 when N is 2, else 1.

set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
VENV=${INTEROP_VENV:-/work/interop/venv}
WORK=${INTEROP_DIR:-$(mktemp -d /tmp/loupe-interop.XXXXXX)}
LIMIT=${INTEROP_TIMEOUT:-900}
TORCH=2.13.0
mkdir -p "$WORK"
export PYTHONPATH=$ROOT ROOT PYTHON VENV WORK

stage() {  # stage NAME COMMAND...: run with a time limit, log to $WORK/NAME.log
    local name=$1
    shift
    # a fresh bash runs the command, so it may be one of the functions below (exported)
    if timeout "$LIMIT" bash -c '"$@"' stage "$@" >"$WORK/$name.log" 2>&1; then
        echo "  $name: ok"
        return 0
    fi
    echo "  $name: FAILED (log: $WORK/$name.log)"
    tail -n 15 "$WORK/$name.log" | sed 's/^/    /'
    return 1
}

# -- the tools' environment ------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
    echo "making $VENV (llamafactory 0.9.5, verl, torch $TORCH)"
    python3 -m venv "$VENV" &&
        "$VENV/bin/pip" install -q "torch==$TORCH" &&
        "$VENV/bin/pip" install -q "llamafactory==0.9.5" verl qwen-vl-utils "torch==$TORCH" ||
        { echo "interop: 0/2"; exit 1; }
fi
if ! "$VENV/bin/python" -c "import torchvision" >/dev/null 2>&1; then
    echo "torchvision does not load with this torch: installing the public torch $TORCH"
    env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null "$VENV/bin/pip" install -q \
        --force-reinstall --no-deps "torch==$TORCH" &&
        env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null "$VENV/bin/pip" install -q \
            "torch==$TORCH" "torchvision" ||
        { echo "interop: 0/2"; exit 1; }
fi

# verl reads images with qwen-vl-utils, which it does not install itself
"$VENV/bin/python" -c "import qwen_vl_utils" >/dev/null 2>&1 ||
    "$VENV/bin/pip" install -q qwen-vl-utils || { echo "interop: 0/2"; exit 1; }

# -- Loupe's side: a checkpoint and the two exports --------------------------------------
echo "work folder: $WORK"
export DB="sqlite:///$WORK/loupe.db"
loupe() { "$PYTHON" "$ROOT/launch.py" "$@"; }
prepare() {
    "$PYTHON" -m training.tiny_model "$WORK/tiny" &&
        loupe demo --out "$WORK/demo" --labels "$WORK/demo/labels.csv" --n-per-class 2 &&
        loupe ingest "$WORK/demo/labels.csv" --db "$DB" &&
        loupe vet --catalog "$WORK/demo/labels.csv" --policy rules --db "$DB" --renderer fast &&
        loupe import-labels "$WORK/demo/labels.csv" --expert vi --create-expert --db "$DB" &&
        loupe export sft --db "$DB" --out "$WORK/sft" --renderer fast --test-fraction 0 &&
        loupe export rl --db "$DB" --out "$WORK/rl" --renderer fast --test-fraction 0
}
export -f loupe prepare
if ! stage loupe prepare; then
    echo "interop: 0/2"
    exit 1
fi

passed=0
# -- 1. LLaMA-Factory: one SFT step ------------------------------------------------------
cat >"$WORK/llamafactory.yaml" <<EOF
model_name_or_path: $WORK/tiny
stage: sft
do_train: true
finetuning_type: full
freeze_vision_tower: true
dataset: loupe_sft_train
dataset_dir: $WORK/sft/sharegpt
template: qwen2_vl
cutoff_len: 8192
max_samples: 4
preprocessing_num_workers: 1
overwrite_cache: true
output_dir: $WORK/llamafactory-out
per_device_train_batch_size: 1
gradient_accumulation_steps: 1
max_steps: 1
learning_rate: 1.0e-4
bf16: false
report_to: none
save_strategy: "no"
EOF
llamafactory_step() {
    DISABLE_VERSION_CHECK=1 FORCE_TORCHRUN=0 CUDA_VISIBLE_DEVICES="" \
        "$VENV/bin/llamafactory-cli" train "$WORK/llamafactory.yaml" &&
        grep -q "'train_loss'\|train_loss" "$WORK/llamafactory.log"
}
export -f llamafactory_step
stage llamafactory llamafactory_step && passed=$((passed + 1))

# -- 2. verl: RLHFDataset over the RL export ---------------------------------------------
cat >"$WORK/verl_check.py" <<'EOF'
import sys

from omegaconf import OmegaConf
from verl.utils import hf_processor, hf_tokenizer
from verl.utils.dataset.rl_dataset import RLHFDataset

ckpt, parquet = sys.argv[1], sys.argv[2]
tokenizer = hf_tokenizer(ckpt)
processor = hf_processor(ckpt)
assert processor is not None, "verl found no processor in the checkpoint"
config = OmegaConf.create(
    {"prompt_key": "prompt", "image_key": "images", "max_prompt_length": 8192,
     "filter_overlong_prompts": False, "return_raw_chat": True, "truncation": "error"}
)
ds = RLHFDataset(data_files=[parquet], tokenizer=tokenizer, config=config, processor=processor)
n = len(ds)
# verl's own length filter renders and tokenizes every prompt with its image; run in this
# process (with a worker process, num_proc=1, it dropped every row on a CPU-only machine)
ds.filter_overlong_prompts, ds.num_workers = True, None
ds.dataframe = ds.maybe_filter_out_long_prompts(ds.dataframe)
assert len(ds) == n > 0, f"{n - len(ds)} of {n} rows failed verl's prompt processing"
row = ds[0]
# what verl's agent loop does with the row's raw_prompt
images = [c["image"] for m in row["raw_prompt"] if isinstance(m["content"], list)
          for c in m["content"] if c.get("type") == "image"]
text = processor.apply_chat_template(row["raw_prompt"], add_generation_prompt=True, tokenize=False)
inputs = processor(text=[text], images=images, return_tensors="pt")
image_pad = tokenizer.convert_tokens_to_ids("<|image_pad|>")
n_image_tokens = int((inputs["input_ids"] == image_pad).sum())
assert len(images) == 1 and n_image_tokens > 0, (len(images), n_image_tokens)
print(f"verl: {len(ds)} rows; row 0 data_source {row['data_source']}, "
      f"{n_image_tokens} image tokens, ground truth {row['reward_model']['ground_truth']}")
EOF
stage verl "$VENV/bin/python" "$WORK/verl_check.py" "$WORK/tiny" "$WORK/rl/train.parquet" &&
    passed=$((passed + 1))
grep -h "^verl:" "$WORK/verl.log" 2>/dev/null | sed 's/^/  /'

echo "interop: $passed/2"
[ "$passed" -eq 2 ]
