#!/usr/bin/env bash
# Sets everything up, then runs the main job: a small network trained on
# hpu and on the CPU, losses side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python3 examples/train_mlp.py "$@"
