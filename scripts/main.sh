#!/usr/bin/env bash
# Sets everything up, then runs the main job: the pretrained all-MiniLM-L6-v2
# fine-tuned as a tweet sentiment classifier on hpu (lazy mode, bf16, HPU
# graphs for evaluation), then the same job on the CPU for 10 of its 128
# steps (enough for the speed ratio, and it keeps the job short on a busy
# machine, where the CPU's bf16 training slows down most), and the two side
# by side.
# Flags given to this script go to both runs (examples/text_classification.py --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
OUT=${MAIN_JOB_OUT:-$(mktemp -d /tmp/main-job.XXXXXX)}
JOB=(--bf16 --max_train_samples 4096 --max_seq_length 64 --per_device_train_batch_size 32 --num_train_epochs 1)
echo "== fine-tuning on hpu"
python3 examples/text_classification.py --output_dir "$OUT/hpu" --use_lazy_mode --use_hpu_graphs_for_inference \
  "${JOB[@]}" "$@"
echo "== the same job on the CPU for 10 steps, for the speed ratio"
python3 examples/text_classification.py --output_dir "$OUT/cpu" --device cpu "${JOB[@]}" \
  --max_train_samples 320 --max_eval_samples 128 "$@"
echo "== side by side ($OUT)"
python3 examples/compare_runs.py "$OUT/hpu" "$OUT/cpu" --require-no-fallbacks
