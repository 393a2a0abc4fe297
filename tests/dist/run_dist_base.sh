#!/usr/bin/env bash
# PyTorch's _DistTestBase against hccl (2 ranks).
#   run_dist_base.sh              the CI subset below (about a minute)
#   run_dist_base.sh all [XML]    every test of the base class (10-13
#                                 minutes on 2 cores), junit xml kept at XML
#                                 (default /tmp/dist_base.xml); summarise it
#                                 with dist_base_report.py
set -u
here=$(cd "$(dirname "$0")" && pwd)
export BACKEND=hccl WORLD_SIZE=2 PT_HPU_SHARE_CARDS=1 TEMP_DIR=$(mktemp -d /tmp/hccl-disttest.XXXXXX)
pid=
cleanup() {
  # pytest runs in its own process group (setsid) so that an interrupted
  # run also takes down the rank processes the test base spawned, which
  # would otherwise keep the shared card and the rendezvous files busy.
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null
    sleep 2
    kill -KILL -- "-$pid" 2>/dev/null
  fi
  rm -rf "$TEMP_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
tests=(
  test_all_reduce_sum test_all_reduce_max test_all_reduce_product test_all_reduce_group_sum
  test_all_reduce_coalesced_sum test_all_reduce_complex_unsupported_ops test_broadcast test_broadcast_group
  test_reduce_sum test_reduce_max test_all_gather test_all_gather_coalesced_simple test_gather test_scatter
  test_all_to_all test_all_to_all_single_equal_split test_all_to_all_single_unequal_split test_barrier
  test_send_recv test_isend test_irecv test_batch_isend_irecv_op_err test_get_future
  test_broadcast_object_list test_all_gather_object_default_pg test_gather_object test_scatter_object_list
  test_new_subgroups test_get_rank_size_group test_destroy_group test_coalescing_manager
  test_DistributedDataParallelCPU test_ddp_hook_parity_allreduce test_ddp_comm_hook_logging
)
if [ "${1:-}" = all ]; then
  xml=${2:-/tmp/dist_base.xml}
  # Not exec: the trap above must still clean up after pytest.
  setsid python -m pytest -q -rfs -p no:cacheprovider --junitxml="$xml" \
    "$here/test_dist_base.py" &
  pid=$!
  wait "$pid"
  rc=$?
  pid=
  echo "junit xml: $xml"
  exit $rc
fi
ids=(); for t in "${tests[@]}"; do ids+=("$here/test_dist_base.py::TestHcclWithSpawn::$t"); done
python -m pytest -q -rfs -p no:cacheprovider "${ids[@]}" 2>&1 | grep -vE "^\s*$" | tail -60
rc=${PIPESTATUS[0]}
[ $rc -eq 0 ] && echo OK
exit $rc
