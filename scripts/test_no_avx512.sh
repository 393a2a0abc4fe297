#!/usr/bin/env bash
# The kernels on a CPU without AVX-512, as an AVX2-only machine runs them.
#
# valgrind (--tool=none: no checking, only its CPU) executes the program on
# a CPU model with AVX2, FMA and F16C but no AVX-512. Its CPUID says so:
# hpu_kernels_isa and torch pick their AVX2 paths by themselves, and an
# AVX-512 instruction stops the run with SIGILL. The AVX2 clones on an
# AVX-512 CPU (HPU_KERNEL_ISA=avx2, scripts/test.sh) test the same kernels'
# results, but an AVX-512 instruction reached from an AVX2 path runs there
# unnoticed; this stage fails on it. torch's own CPU kernels take their AVX2
# forms here too, so the Python tests compare against what an AVX2 machine's
# torch computes.
#
#   bash scripts/test_no_avx512.sh [build dir]   (after scripts/setup.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/ctest-release}
JOBS=${HPU_BUILD_JOBS:-$(nproc)}
VG=(valgrind --tool=none -q)

# valgrind runs a program, not the shell wrappers some installs put in
# front of python3 (pyenv's shims)
PY=$(python3 -c 'import sys; print(sys.executable)')
cap=$("${VG[@]}" "$PY" -c 'import torch; print(torch.backends.cpu.get_cpu_capability())' || true)
if [ "$cap" != AVX2 ]; then
  echo "valgrind's CPU model is not an AVX2 CPU without AVX-512 here (torch sees $cap)"; exit 1
fi

cmake -S . -B "$BUILD" -DHPU_BUILD_EXTENSION=OFF -DHPU_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j "$JOBS" >/dev/null
# The kernel suites (test_gemm's large products take minutes under valgrind;
# its AVX2 paths are its own cases on every CPU, test_gemm.c)
C_TESTS=(test_conv test_attention test_pointwise test_nn test_pool test_batch_norm test_vision
         test_kernels test_special test_pw_tail test_tailidx test_linalg test_fusion test_graph test_capture)
for t in "${C_TESTS[@]}"; do
  set +e
  "${VG[@]}" "$BUILD/tests/c/$t" > "$BUILD/$t.log" 2>&1
  rc=$?
  set -e
  echo "-- $t: $(grep -E '^ +tests ' "$BUILD/$t.log" | tr -s ' ')"
  if [ "$rc" -ne 0 ]; then
    tail -30 "$BUILD/$t.log"
    echo "$t failed on the CPU without AVX-512 (exit $rc)"
    exit 1
  fi
done

# Under valgrind Python runs 20-60 times slower: these take about 7
# minutes, where the whole suite would take hours (test_ops.py alone took
# 15). So a set: the op families with hand-written AVX2 forms, the
# convolutions and the attention's tiles, in eager mode (op by op).
PY_TESTS=(tests/python/test_conv.py tests/python/test_ops_pointwise.py tests/python/test_ops_nn.py
          tests/python/test_fused_sdpa.py::test_sdpa_matches_cpu)
set +e
PT_HPU_LAZY_MODE=0 "${VG[@]}" "$PY" -m pytest -q -p no:cacheprovider "${PY_TESTS[@]}"
rc=$?
set -e
if [ $rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi
if [ $rc -ne 0 ]; then echo "pytest failed on the CPU without AVX-512 (${PY_TESTS[*]})"; exit $rc; fi
