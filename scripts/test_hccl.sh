#!/usr/bin/env bash
# Every HCCL test, in about five minutes on two cores:
#   1. exact-result collectives (CUnit) under mpirun at 2, 4 and 8 ranks;
#   2. two hosts over TCP: ranks in two network namespaces joined by a veth
#      pair (skipped loudly if namespaces are not permitted), plus two and
#      uneven "hosts" on loopback forced with HCCL_HOST_ID (always runs);
#   3. faults: killed rank, late rank, mismatches, abort, foreign peers;
#   4. soak: thousands of random collectives, checked, fd/RSS leak checks;
#      under ASan too when HCCL_ASAN_BUILD names a -DHPU_SANITIZE=ON build;
#   and after every step /dev/shm must hold nothing of ours.
#
# Usage: scripts/test_hccl.sh [BUILD_DIR]
#   BUILD_DIR: a build configured with -DHPU_BUILD_TESTS=ON (built here if
#   needed); default: configure one in /tmp/hccl-test-build.
# Environment: HCCL_SOAK_ITERS (default 3000), HCCL_ASAN_BUILD (optional).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-/tmp/hccl-test-build}
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DHPU_BUILD_EXTENSION=OFF -DHPU_BUILD_TESTS=ON >/dev/null || exit 1
fi
cmake --build "$BUILD" -j2 --target test_hccl_coll test_hccl_faults test_hccl_soak test_hccl_initall hccl_perf >/dev/null ||
  { echo "test_hccl.sh: build failed in $BUILD"; cmake --build "$BUILD" -j2 --target test_hccl_coll 2>&1 | grep -E "error" | head -20; exit 1; }
T=$BUILD/tests/c/hccl
MPIRUN=(timeout 900 mpirun --oversubscribe --bind-to none)   # timeout: a hang is a failure
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
export HCCL_TIMEOUT=${HCCL_TIMEOUT:-120}   # a bug must fail, not hang
export OMPI_MCA_btl_vader_single_copy_mechanism=none
FAILED=()
SKIPPED=()
T_START=$(date +%s)

shm_clean() {
  local left
  left=$(ls /dev/shm 2>/dev/null | grep '^hccl-' || true)
  if [ -n "$left" ]; then
    echo "!!! /dev/shm holds HCCL segments after $1: $left"
    FAILED+=("$1: /dev/shm not clean")
    rm -f /dev/shm/hccl-* 2>/dev/null
  fi
}

step() {
  local name=$1
  shift
  echo
  echo "=== $name"
  local s=$(date +%s)
  if "$@"; then
    echo "--- $name: PASS ($(( $(date +%s) - s )) s)"
  else
    echo "--- $name: FAIL ($(( $(date +%s) - s )) s)"
    FAILED+=("$name")
  fi
  shm_clean "$name"
}

summary_only() {   # CUnit's summary and our verdict lines from rank 0's report
  grep -E "Suite|Test:|Run Summary|suites|tests |asserts|HCCL |FAILED|soak:|wrong|error|\[rank" || true
}

coll() {   # coll NP [extra env...]
  local np=$1
  shift
  "${MPIRUN[@]}" -np "$np" "$@" "$T/test_hccl_coll" 2>&1 | summary_only
  return "${PIPESTATUS[0]}"
}

# ---- 1. collectives at 2, 4, 8 ranks -------------------------------------
step "collectives, 2 ranks" coll 2
step "collectives, 4 ranks" coll 4
step "collectives, 8 ranks (oversubscribed)" coll 8
step "collectives, 3 ranks, host buffers through CMA (HCCL_CMA=1)" coll 3 -x HCCL_CMA=1

# hcclCommInitAll: one process, four cards, one thread driving them
initall() { timeout 600 "$1/tests/c/hccl/test_hccl_initall" 2>&1 | grep -vE "^\s*$|CUnit|sourceforge"; return "${PIPESTATUS[0]}"; }
step "hcclCommInitAll, 4 cards in one process" initall "$BUILD"

# ---- 2. two hosts ----------------------------------------------------------
loopback_hosts() {   # ranks per "host" as arguments, e.g. 2 2 or 3 1
  local args=() h=0
  for n in "$@"; do
    [ ${#args[@]} -gt 0 ] && args+=(:)
    args+=(-np "$n" -x HCCL_HOST_ID=loophost$h -x HCCL_TEST_LEVEL=quick "$T/test_hccl_coll")
    h=$((h + 1))
  done
  "${MPIRUN[@]}" "${args[@]}" 2>&1 | summary_only
  return "${PIPESTATUS[0]}"
}

NS_A=hccla$$
NS_B=hcclb$$
netns_cleanup() {
  ip netns del "$NS_A" 2>/dev/null
  ip netns del "$NS_B" 2>/dev/null
}

netns_hosts() {
  # Two "hosts": namespaces joined by a veth pair, addresses of our own on
  # it; 2 ranks in each. No traffic leaves the namespaces.
  if ! { ip netns add "$NS_A" && ip netns add "$NS_B" &&
         ip link add hva$$ type veth peer name hvb$$ &&
         ip link set hva$$ netns "$NS_A" && ip link set hvb$$ netns "$NS_B" &&
         ip -n "$NS_A" addr add 192.168.77.1/24 dev hva$$ && ip -n "$NS_B" addr add 192.168.77.2/24 dev hvb$$ &&
         ip -n "$NS_A" link set hva$$ up && ip -n "$NS_B" link set hvb$$ up &&
         ip -n "$NS_A" link set lo up && ip -n "$NS_B" link set lo up; } 2>/tmp/hccl-netns-$$.err; then
    echo "!!! SKIPPED: network namespaces are not permitted here ($(head -c 200 /tmp/hccl-netns-$$.err))."
    echo "!!! The TCP path is still tested by the loopback two-host steps (HCCL_HOST_ID)."
    netns_cleanup
    rm -f /tmp/hccl-netns-$$.err
    SKIPPED+=("two hosts in network namespaces")
    return 0
  fi
  rm -f /tmp/hccl-netns-$$.err
  local port=$((20000 + RANDOM % 20000)) pids=() rc=0 logs=/tmp/hccl-netns-$$
  mkdir -p $logs
  for r in 0 1 2 3; do
    local ns=$NS_A
    [ $r -ge 2 ] && ns=$NS_B
    env HCCL_COMM_ID=192.168.77.1:$port HCCL_TEST_RANK=$r HCCL_TEST_NRANKS=4 HCCL_TEST_LEVEL=quick \
      HCCL_DEBUG=$([ $r = 0 ] && echo 1 || echo "") timeout 600 ip netns exec $ns "$T/test_hccl_coll" >$logs/$r.log 2>&1 &
    pids+=($!)
  done
  for i in 0 1 2 3; do wait ${pids[$i]} || { echo "rank $i failed (exit $?)"; rc=1; }; done
  summary_only <$logs/0.log | grep -v "^\[hccl"
  if ! grep -q "rank 0/4: 2 hosts" $logs/0.log; then echo "!!! ranks did not see two hosts"; rc=1; fi
  [ $rc = 0 ] || { for i in 1 2 3; do echo "--- rank $i:"; tail -n 5 $logs/$i.log; done; }
  # TCP allreduce figures across the veth pair (hierarchical algorithm)
  for r in 0 1 2 3; do
    local ns=$NS_A
    [ $r -ge 2 ] && ns=$NS_B
    env HCCL_COMM_ID=192.168.77.1:$((port + 1)) HCCL_PERF_RANK=$r HCCL_PERF_NRANKS=4 \
      timeout 300 ip netns exec $ns "$BUILD/hccl/hccl_perf" -b 8 -e 16M -f 16 -i 0 >$logs/perf$r.log 2>&1 &
    pids[$r]=$!
  done
  for i in 0 1 2 3; do wait ${pids[$i]} || rc=1; done
  cat $logs/perf0.log
  grep -qE "^ +[0-9]+ .* [1-9][0-9]* *$" $logs/perf0.log && { echo "!!! wrong results over TCP"; rc=1; }
  rm -rf $logs
  netns_cleanup
  return $rc
}
trap netns_cleanup EXIT

step "two hosts: network namespaces + veth, 2+2 ranks (TCP, hierarchical)" netns_hosts
step "two hosts on loopback (HCCL_HOST_ID), 2+2 ranks (hierarchical)" loopback_hosts 2 2
step "uneven hosts on loopback (HCCL_HOST_ID), 3+1 ranks (generic TCP)" loopback_hosts 3 1

# ---- 3. faults ---------------------------------------------------------------
faults() { timeout 600 "$1/tests/c/hccl/test_hccl_faults" 2>&1 | grep -vE "^\s*$|CUnit|sourceforge"; return "${PIPESTATUS[0]}"; }
step "faults (forked ranks)" faults "$BUILD"

# ---- 4. soak -------------------------------------------------------------------
soak() {   # soak BUILD NP ITERS
  HCCL_SOAK_ITERS=$3 "${MPIRUN[@]}" -np "$2" "$1/tests/c/hccl/test_hccl_soak" 2>&1 | summary_only
  return "${PIPESTATUS[0]}"
}
step "soak, 4 ranks" soak "$BUILD" 4 "${HCCL_SOAK_ITERS:-3000}"

asan_soak() {   # without mpirun: MPI's own allocations would drown LeakSanitizer's report
  local port=$((20000 + RANDOM % 20000)) pids=() rc=0
  for r in 0 1; do
    HCCL_COMM_ID=127.0.0.1:$port HCCL_TEST_RANK=$r HCCL_TEST_NRANKS=2 HCCL_SOAK_ITERS=$2 \
      timeout 900 "$1/tests/c/hccl/test_hccl_soak" >/tmp/hccl-asan-soak-$$-$r.log 2>&1 &
    pids+=($!)
  done
  for i in 0 1; do wait ${pids[$i]} || rc=1; done
  summary_only </tmp/hccl-asan-soak-$$-0.log
  grep -hE "ERROR: (Address|Leak)Sanitizer|runtime error|SUMMARY" /tmp/hccl-asan-soak-$$-*.log && rc=1
  rm -f /tmp/hccl-asan-soak-$$-*.log
  return $rc
}

if [ -n "${HCCL_ASAN_BUILD:-}" ]; then
  if cmake --build "$HCCL_ASAN_BUILD" -j2 --target test_hccl_soak test_hccl_faults test_hccl_initall >/dev/null 2>&1; then
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    step "soak under ASan/UBSan (leak check), 2 ranks" asan_soak "$HCCL_ASAN_BUILD" 1000
    asan_coll() {
      local port=$((20000 + RANDOM % 20000)) pids=() rc=0
      for r in 0 1 2; do
        HCCL_COMM_ID=127.0.0.1:$port HCCL_TEST_RANK=$r HCCL_TEST_NRANKS=3 HCCL_TEST_LEVEL=quick HCCL_CMA=1 \
          timeout 900 "$1/tests/c/hccl/test_hccl_coll" >/tmp/hccl-asan-coll-$$-$r.log 2>&1 &
        pids+=($!)
      done
      for i in 0 1 2; do wait ${pids[$i]} || rc=1; done
      grep -h "HCCL collectives" /tmp/hccl-asan-coll-$$-0.log
      grep -hE "ERROR: (Address|Leak)Sanitizer|runtime error|SUMMARY" /tmp/hccl-asan-coll-$$-*.log && rc=1
      rm -f /tmp/hccl-asan-coll-$$-*.log
      return $rc
    }
    cmake --build "$HCCL_ASAN_BUILD" -j2 --target test_hccl_coll >/dev/null 2>&1 &&
      step "collectives under ASan/UBSan (leak check), 3 ranks, CMA on" asan_coll "$HCCL_ASAN_BUILD"
    step "faults under ASan/UBSan" faults "$HCCL_ASAN_BUILD"
    asan_initall() { initall "$1" >/tmp/hccl-asan-initall-$$.log; local rc=$?; grep -E "Test:|tests " /tmp/hccl-asan-initall-$$.log
      grep -hE "ERROR: (Address|Leak)Sanitizer|runtime error|SUMMARY" /tmp/hccl-asan-initall-$$.log && rc=1
      rm -f /tmp/hccl-asan-initall-$$.log; return $rc; }
    step "hcclCommInitAll under ASan/UBSan" asan_initall "$HCCL_ASAN_BUILD"
  else
    echo "!!! HCCL_ASAN_BUILD=$HCCL_ASAN_BUILD does not build"
    FAILED+=("ASan build")
  fi
fi

echo
echo "=== HCCL tests finished in $(( $(date +%s) - T_START )) s"
for s in "${SKIPPED[@]}"; do echo "    SKIPPED: $s"; done
if [ ${#FAILED[@]} -gt 0 ]; then
  for f in "${FAILED[@]}"; do echo "    FAILED: $f"; done
  exit 1
fi
echo "    all passed; /dev/shm clean"
exit 0
