#!/usr/bin/env bash
# Sets everything up, then runs every test: the C core's CUnit tests under
# AddressSanitizer/UBSan (with the lock-order checker) and under
# ThreadSanitizer, HCCL's multi-rank tests, the Python suite, and the libraries
# built for Gaudi in their pinned environments (scripts/pinned_envs.sh).
# Exits non-zero if anything fails (or if pytest collects no test).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

JOBS=${HPU_BUILD_JOBS:-$(nproc)}
CBUILD=build/ctest
echo "== C tests (CUnit, ASan+UBSan)"
cmake -S . -B "$CBUILD" -DHPU_BUILD_EXTENSION=OFF -DHPU_BUILD_TESTS=ON -DHPU_SANITIZE=ON \
      -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$CBUILD" -j "$JOBS" >/dev/null
(cd "$CBUILD" && ctest --output-on-failure)

echo "== C tests (CUnit, ThreadSanitizer)"
TBUILD=build/ctest-tsan
cmake -S . -B "$TBUILD" -DHPU_BUILD_EXTENSION=OFF -DHPU_BUILD_TESTS=ON -DHPU_TSAN=ON \
      -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$TBUILD" -j "$JOBS" >/dev/null
TSAN_SUPP="$PWD/tests/c/tsan.supp"
(cd "$TBUILD" && TSAN_OPTIONS="halt_on_error=1 suppressions=$TSAN_SUPP" ctest --output-on-failure)
# One process driving four cards' queues and HCCL's zero-copy path between them.
cmake --build "$TBUILD" -j "$JOBS" --target test_hccl_initall >/dev/null
TSAN_OPTIONS="halt_on_error=1 suppressions=$TSAN_SUPP" "$TBUILD/tests/c/hccl/test_hccl_initall" | tail -4

echo "== HCCL tests (mpirun on a Release build; leak checks on the ASan build)"
HCCL_ASAN_BUILD="$CBUILD" bash scripts/test_hccl.sh build/hccl

echo "== process-group tests (torchrun, mpirun, DDP, FSDP, two hosts, faults, _DistTestBase subset)"
bash scripts/test_dist.sh

# Every Python test runs twice: in lazy mode (the default) and in eager mode.
# Tests that pick a mode themselves (fixtures, subprocesses) do so either way.
run_pytest() {
  local mode=$1
  shift
  set +e
  env PT_HPU_LAZY_MODE="$mode" python3 -m pytest -q "$@"
  local rc=$?
  set -e
  if [ $rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi
  if [ $rc -ne 0 ]; then echo "pytest failed in PT_HPU_LAZY_MODE=$mode ($*)"; exit $rc; fi
}
echo "== Python tests, lazy mode (the default)"
run_pytest 1 tests/python
echo "== Python tests, eager mode"
run_pytest 0 tests/python
# The kernels pick AVX-512, AVX2 or portable clones at run time; the runs
# above test the best one this CPU has. The op parity tests once more on the
# AVX2 clones (the portable ones where the CPU lacks AVX2), against torch's
# AVX2 kernels and oneDNN's (what the CPU answers on an AVX2-only machine).
echo "== Python op parity tests on the AVX2 kernel clones (HPU_KERNEL_ISA=avx2, torch and oneDNN on AVX2)"
HPU_KERNEL_ISA=avx2 ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 run_pytest 0 tests/python/test_ops.py \
  tests/python/test_ops_nn.py tests/python/test_ops_pointwise.py tests/python/test_ops_extra.py \
  tests/python/test_ops_special.py tests/python/test_fused_sdpa.py tests/python/test_conv.py \
  tests/python/test_resnet.py
# ... and on a CPU that has no AVX-512 (valgrind's), where an AVX-512
# instruction reached from an AVX2 path stops the run. HCCL's Release build
# above has the same configuration: only the kernel tests are left to build.
echo "== kernel tests on a CPU without AVX-512 (valgrind's CPU model)"
bash scripts/test_no_avx512.sh build/hccl

# Libraries built for Gaudi whose last releases pin older libraries run in
# venvs over the base torch (made once per machine, reused while unchanged).
echo "== libraries built for Gaudi in pinned environments (lightning-habana, optimum-habana, torchvision)"
bash scripts/pinned_envs.sh
run_pytest 1 tests/pinned
run_pytest 0 tests/pinned
