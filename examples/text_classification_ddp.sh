#!/usr/bin/env bash
# The fine-tune of examples/text_classification.py on NPROC cards (default 2)
# with torchrun over hccl, as Gaudi's run_glue runs with torchrun.
#
#     bash examples/text_classification_ddp.sh --output_dir /tmp/tc2 --bf16 [more flags]
#
# Each process takes its own card; the per-card batch is 32 / NPROC, so the
# global batch, the learning-rate schedule and the samples of every step are
# those of a single process with its default batch of 32, and the final
# metrics match a one-process run within bf16 rounding and dropout's noise.
# Flags given here come last and win (--per_device_train_batch_size too).
set -euo pipefail
cd "$(dirname "$0")/.."
NPROC=${NPROC:-2}
if ! [[ "$NPROC" =~ ^[1-9][0-9]*$ ]] || (( 32 % NPROC )); then
  echo "NPROC=$NPROC: expected a number of processes that divides the global batch of 32" >&2
  exit 2
fi
exec torchrun --standalone --nproc_per_node="$NPROC" examples/text_classification.py \
  --per_device_train_batch_size $((32 / NPROC)) "$@"
