#!/usr/bin/env bash
# DDP throughput of the small BERT classifier (examples/ddp_bert.py) on 2
# ranks vs 1 rank, one thread per rank, same per-rank batch (weak scaling).
# Usage: bench/ddp_bert_scaling.sh [steps] [batch]   (target: >= 1.8x)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-40}; batch=${2:-16}
export OMP_NUM_THREADS=1 PYTHONWARNINGS=ignore
port=$((30000 + RANDOM % 20000))
sps() { python -m torch.distributed.run --nproc_per_node="$1" --master_port=$((port + $1)) \
          "$root/examples/ddp_bert.py" --steps "$steps" --batch "$batch" "${@:2}" 2>/dev/null |
        sed -n 's/.*samples_per_s=\([0-9.]*\).*/\1/p'; }
one=$(sps 1); two=$(sps 2)
echo "hpu/hccl: 1 rank ${one} samples/s, 2 ranks ${two} samples/s, scaling $(python -c "print(round(${two:-0}/${one:-1}, 2))")x"
c1=$(sps 1 --cpu); c2=$(sps 2 --cpu)
echo "cpu/gloo: 1 rank ${c1} samples/s, 2 ranks ${c2} samples/s, scaling $(python -c "print(round(${c2:-0}/${c1:-1}, 2))")x"
