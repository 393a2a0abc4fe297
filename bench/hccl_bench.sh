#!/usr/bin/env bash
# HCCL allreduce vs torch.distributed gloo vs OpenMPI's MPI_Allreduce, in one
# run, at 2, 4 and 8 ranks, 8 B to 256 MB (float32 sum, host memory; hccl
# also on device buffers, nccl-tests' setting), plus
# this machine's copy bandwidth for the memory-bandwidth bound.
# Usage: bench/hccl_bench.sh [BUILD_DIR] [OUT.md]   (BUILD_DIR has hccl_perf)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-/tmp/hccl-test-build}
OUT=${2:-/tmp/hccl_bench.md}
RANKS=${HCCL_BENCH_RANKS:-"2 4 8"}
if [ ! -x "$BUILD/hccl/hccl_perf" ]; then
  [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" -DHPU_BUILD_EXTENSION=OFF -DHPU_BUILD_TESTS=ON >/dev/null
  cmake --build "$BUILD" -j2 --target hccl_perf >/dev/null
fi
W=$(mktemp -d /tmp/hccl-bench.XXXXXX)
gcc -O2 -o "$W/copy_bw" "$ROOT/bench/hccl_copy_bw.c" -lpthread
mpicc -O2 -o "$W/mpi_allreduce" "$ROOT/bench/hccl_mpi_allreduce.c"
MPIRUN=(mpirun --oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
"$W/copy_bw" | tee "$W/copy.txt"
for n in $RANKS; do
  echo "== $n ranks"
  # two sweeps: 8 B, then 64 B .. 256 MB by 4x (hits 64 KB, 1 MB, 64 MB)
  { "${MPIRUN[@]}" -np "$n" "$BUILD/hccl/hccl_perf" -b 8 -e 8 -i 0
    "${MPIRUN[@]}" -np "$n" "$BUILD/hccl/hccl_perf" -b 64 -e 256M -f 4 -i 0; } 2>&1 | tee "$W/hccl_$n.txt"
  # the same on device buffers (card arenas: the zero-copy path past 64 KB)
  { "${MPIRUN[@]}" -np "$n" "$BUILD/hccl/hccl_perf" -b 8 -e 8 -i 0 -m device
    "${MPIRUN[@]}" -np "$n" "$BUILD/hccl/hccl_perf" -b 64 -e 256M -f 4 -i 0 -m device; } 2>&1 | tee "$W/hccl_dev_$n.txt"
  { "${MPIRUN[@]}" -np "$n" "$W/mpi_allreduce" 8 8 2
    "${MPIRUN[@]}" -np "$n" "$W/mpi_allreduce" 64 268435456 4; } 2>&1 | tee "$W/mpi_$n.txt"
  { python3 "$ROOT/bench/hccl_gloo_allreduce.py" "$n" 8 8 2
    python3 "$ROOT/bench/hccl_gloo_allreduce.py" "$n" 64 268435456 4; } 2>&1 | grep -v Warning | tee "$W/gloo_$n.txt"
done
python3 "$ROOT/bench/hccl_bench_report.py" "$W" $RANKS | tee "$OUT"
echo "raw outputs in $W; report in $OUT"
