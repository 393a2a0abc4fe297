#!/usr/bin/env bash
# DDP throughput of the small BERT classifier (examples/ddp_bert.py) on 2
# ranks vs 1 rank, one thread per rank, same per-rank batch (weak scaling).
# Usage: bench/ddp_bert_scaling.sh [steps] [batch] [reps]   (target: >= 1.8x)
#
# Two settings for hpu/hccl, each as interleaved 1-rank / 2-rank pairs:
#   unbound: torchrun, ranks free to use both cores. A rank has a host thread
#     and its card's queue thread (the emulated card executes on the CPU), so
#     one rank alone runs host recording and card execution on two cores at
#     once (about 1.5 cores busy) while two ranks share them: this caps the
#     scaling well below 2 whatever the collectives cost.
#   one core per rank: mpirun --bind-to core, each rank (host thread and card
#     queue alike) on its own core, the 1-rank run on one core: "one thread
#     per rank" with the card's work counted in the rank's core.
# cpu/gloo (unbound torchrun) for comparison.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-200}; batch=${2:-16}; reps=${3:-2}
# A run that hangs (a dead peer under gloo waits out its 30-minute default)
# is cut off and shows as an empty figure instead of stopping the benchmark.
limit=${DDP_BENCH_TIMEOUT:-600}
export OMP_NUM_THREADS=1 PYTHONWARNINGS=ignore
port=$((30000 + RANDOM % 20000))
mpirun_=(mpirun --bind-to core --map-by core -x PYTHONPATH -x OMP_NUM_THREADS -x PYTHONWARNINGS)
[ "$(id -u)" = 0 ] && mpirun_+=(--allow-run-as-root)
pick() { sed -n 's/.*samples_per_s=\([0-9.]*\).*/\1/p'; }
sps() { port=$((port + 3))
        timeout "$limit" python -m torch.distributed.run --nproc_per_node="$1" --master_port=$port \
          "$root/examples/ddp_bert.py" --steps "$steps" --batch "$batch" "${@:2}" 2>/dev/null | pick; }
sps_bound() { port=$((port + 3))
              timeout "$limit" "${mpirun_[@]}" -x MASTER_PORT=$port -np "$1" python "$root/examples/ddp_bert.py" \
                --steps "$steps" --batch "$batch" "${@:2}" 2>/dev/null | pick; }
ratio() { python -c "print(round(${2:-0}/${1:-1}, 2))"; }
for r in $(seq "$reps"); do
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  one=$(sps 1); two=$(sps 2)
  echo "hpu/hccl unbound (pair $r, load $load): 1 rank ${one} samples/s, 2 ranks ${two} samples/s, scaling $(ratio "$one" "$two")x"
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  b1=$(sps_bound 1); b2=$(sps_bound 2)
  echo "hpu/hccl one core per rank (pair $r, load $load): 1 rank ${b1} samples/s, 2 ranks ${b2} samples/s, scaling $(ratio "$b1" "$b2")x"
done
c1=$(sps 1 --cpu); c2=$(sps 2 --cpu)
echo "cpu/gloo unbound: 1 rank ${c1} samples/s, 2 ranks ${c2} samples/s, scaling $(ratio "$c1" "$c2")x"
