#!/usr/bin/env bash
# Multi-process tests of the hccl process-group backend: every
# collective (torchrun 2 ranks, mpirun 4 ranks, lazy mode), DDP on a small BERT
# vs one CPU process (2 and 4 ranks, torchrun and mpirun, lazy mode), FSDP1/2,
# accelerate's Accelerator as MULTI_HPU over hccl (torchrun 2 ranks, lazy and
# eager), DeepSpeed ZeRO-1/2/3 vs the same run on gloo and tensor-parallel
# inference (torchrun 2 ranks), our own tensor-parallel GPT-2 generation
# (examples/text_generation.py, torchrun 2 ranks, lazy and eager), card
# acquisition, the gaudi_spawn launcher, a killed rank, two hosts in network
# namespaces, and a subset of PyTorch's _DistTestBase.
#
# Usage: scripts/test_dist.sh [--quick]     (--quick: skip mpirun/4-rank/two-host/_DistTestBase)
# Needs: habana_torch importable (installed, or PYTHONPATH), torchrun, mpirun
# (OpenMPI), transformers, accelerate, deepspeed; root for the two-host test (skipped otherwise).
# Ends non-zero if any step failed; leaves nothing in /dev/shm.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
quick=0; [ "${1:-}" = "--quick" ] && quick=1
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
export PYTHONWARNINGS=ignore
logs=$(mktemp -d /tmp/hccl-dist-tests.XXXXXX)
port=$((20000 + RANDOM % 20000))
pass=0; fail=0; failed=()
shm_before=$(ls /dev/shm 2>/dev/null | grep -ci hccl || true)
MPI=(mpirun -np 4 --oversubscribe --bind-to none -x PYTHONPATH -x OMP_NUM_THREADS -x PYTHONWARNINGS)
[ "$(id -u)" = 0 ] && MPI+=(--allow-run-as-root)

step() {  # step <name> <expect-regex> <timeout-s> cmd...
  local name=$1 expect=$2 t=$3; shift 3
  port=$((port + 7))
  local log="$logs/$(echo "$name" | tr ' /' '__').log"
  local t0=$SECONDS
  MASTER_PORT=$port timeout -k 10 "$t" "$@" > "$log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ] && grep -Eq "$expect" "$log"; then
    pass=$((pass + 1)); printf 'PASS  %-44s %4ss\n' "$name" $((SECONDS - t0))
  else
    fail=$((fail + 1)); failed+=("$name"); printf 'FAIL  %-44s %4ss (rc %s, log %s)\n' "$name" $((SECONDS - t0)) $rc "$log"
    grep -Ev "Warning|warn\(|^\s*$" "$log" | tail -15 | sed 's/^/      /'
  fi
  grep -hE "^(DDP|FSDP|ACCELERATE|DEEPSPEED|TEXTGEN|COLLECTIVES|FAULT|CARD|TWO|RESULT)" "$log" | sed 's/^/      /' | head -12
}
trun() { python -m torch.distributed.run --nproc_per_node="$1" --master_port="$MASTER_PORT" "${@:2}"; }
export -f trun

step "collectives eager x2" "COLLECTIVES OK world=2 .* lazy=0" 180 env PT_HPU_LAZY_MODE=0 bash -c 'trun 2 tests/dist/collectives_worker.py'
step "collectives lazy x2" "COLLECTIVES OK world=2 .* lazy=1" 180 env PT_HPU_LAZY_MODE=1 bash -c 'trun 2 tests/dist/collectives_worker.py'
step "ddp bert eager x2" "DDP hook OK world=2 .*lazy=0" 300 env PT_HPU_LAZY_MODE=0 bash -c 'trun 2 tests/dist/ddp_bert_worker.py'
step "ddp bert lazy x2" "DDP bucket_view OK world=2 .*lazy=1" 300 env PT_HPU_LAZY_MODE=1 bash -c 'trun 2 tests/dist/ddp_bert_worker.py --modes plain,bucket_view'
step "fsdp2+fsdp1 torchrun x2" "FSDP1 OK" 300 bash -c 'trun 2 tests/dist/fsdp_worker.py'
if python -c "import accelerate" 2>/dev/null; then
  step "accelerate MULTI_HPU lazy x2" "ACCELERATE MULTI_HPU OK world=2 lazy=1" 200 env PT_HPU_LAZY_MODE=1 bash -c 'trun 2 tests/dist/accelerate_worker.py'
  step "accelerate MULTI_HPU eager x2" "ACCELERATE MULTI_HPU OK world=2 lazy=0" 200 env PT_HPU_LAZY_MODE=0 bash -c 'trun 2 tests/dist/accelerate_worker.py'
else
  echo "SKIP  accelerate MULTI_HPU: needs the accelerate package (pip install accelerate)"
fi
if python -c "import deepspeed" 2>/dev/null; then
  # ZeRO 1/2/3: the same run on the CPU over gloo first (its parameters are the hpu runs' reference).
  step "deepspeed ZeRO-1/2/3 cpu gloo x2" "DEEPSPEED ZERO3 OK accel=gloo world=2" 300 env DS_ACCELERATOR=cpu bash -c "trun 2 tests/dist/deepspeed_worker.py --save $logs/deepspeed_cpu.pt"
  step "deepspeed ZeRO-1/2/3 hccl lazy x2" "DEEPSPEED ZERO3 OK accel=hccl world=2 lazy=1 .*compare" 300 env PT_HPU_LAZY_MODE=1 bash -c "trun 2 tests/dist/deepspeed_worker.py --compare $logs/deepspeed_cpu.pt"
  step "deepspeed ZeRO-1/2/3 hccl eager x2" "DEEPSPEED ZERO3 OK accel=hccl world=2 lazy=0 .*compare" 300 env PT_HPU_LAZY_MODE=0 bash -c "trun 2 tests/dist/deepspeed_worker.py --compare $logs/deepspeed_cpu.pt"
  step "deepspeed inference TP lazy x2" "DEEPSPEED TP OK world=2 lazy=1" 300 env PT_HPU_LAZY_MODE=1 bash -c 'trun 2 tests/dist/deepspeed_inference_worker.py'
else
  echo "SKIP  deepspeed: needs the deepspeed package (pip install deepspeed)"
fi
if python -c "import transformers" 2>/dev/null; then
  step "text generation TP lazy x2" "TEXTGEN TP OK world=2 lazy=1" 200 env PT_HPU_LAZY_MODE=1 bash -c 'trun 2 tests/dist/text_generation_tp_worker.py'
  step "text generation TP example x2" "\\| 2 \\| hpu x2 \\(tensor parallel\\) .*\\| yes \\|" 200 bash -c 'python examples/text_generation.py --tp 2 --use_kv_cache --batch_sizes 1,2 --max_new_tokens 8 --prompt_length 8 --n_iterations 1'
else
  echo "SKIP  text generation TP: needs the transformers package"
fi
step "card lock" "CARD LOCK OK" 120 python tests/dist/card_lock_check.py
step "launcher gaudi_spawn (torchrun)" "DDP plain OK world=2" 300 bash -c 'python examples/gaudi_spawn.py --world_size 2 --master_port $MASTER_PORT tests/dist/ddp_bert_worker.py --modes plain'
step "killed rank -> exception x3" "FAULT CHECK OK" 200 env FAULT_TIMEOUT_S=10 python tests/dist/fault_check.py 3
if [ $quick = 0 ]; then
  step "collectives mpirun x4" "COLLECTIVES OK world=4" 300 "${MPI[@]}" -x MASTER_PORT python tests/dist/collectives_worker.py
  step "ddp bert mpirun x4" "DDP hook OK world=4" 400 "${MPI[@]}" -x MASTER_PORT python tests/dist/ddp_bert_worker.py
  step "ddp bert torchrun x4" "DDP plain OK world=4" 300 bash -c 'trun 4 tests/dist/ddp_bert_worker.py --modes plain,no_sync'
  step "launcher gaudi_spawn --use_mpi" "DDP plain OK world=2" 300 bash -c 'python examples/gaudi_spawn.py --world_size 2 --use_mpi --master_port $MASTER_PORT tests/dist/ddp_bert_worker.py --modes plain'
  if python -c "import deepspeed" 2>/dev/null; then
    step "deepspeed inference TP eager x2" "DEEPSPEED TP OK world=2 lazy=0" 300 env PT_HPU_LAZY_MODE=0 bash -c 'trun 2 tests/dist/deepspeed_inference_worker.py'
  fi
  if python -c "import transformers" 2>/dev/null; then
    step "text generation TP eager x2" "TEXTGEN TP OK world=2 lazy=0" 200 env PT_HPU_LAZY_MODE=0 bash -c 'trun 2 tests/dist/text_generation_tp_worker.py'
  fi
  if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && ip netns list >/dev/null 2>&1; then
    step "two hosts (netns+veth) 2x2" "TWO HOSTS OK" 400 bash tests/dist/two_hosts.sh 20
  else
    echo "SKIP  two hosts: needs root and iproute2 (ip netns)"
  fi
  if python -c "import expecttest" 2>/dev/null; then
    step "_DistTestBase subset x2" "^OK" 600 bash tests/dist/run_dist_base.sh
  else
    echo "SKIP  _DistTestBase: torch.testing._internal needs the expecttest package (pip install expecttest)"
  fi
fi
shm_after=$(ls /dev/shm 2>/dev/null | grep -ci hccl || true)
if [ "$shm_after" -gt "$shm_before" ]; then
  fail=$((fail + 1)); failed+=("shared memory left behind"); echo "FAIL  /dev/shm: $(ls /dev/shm | grep -i hccl | head)"
else
  echo "PASS  nothing of ours left in /dev/shm"
fi
echo "hccl process-group tests: $pass passed, $fail failed${failed:+ (${failed[*]})}; logs in $logs"
[ $fail -eq 0 ]
