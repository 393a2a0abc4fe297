#!/usr/bin/env bash
# Two "hosts": two network namespaces joined by a veth pair, 2 ranks each,
# one DDP run over them (HCCL: shared memory inside a host, TCP between
# hosts). Needs root (ip netns). Usage: tests/dist/two_hosts.sh [steps]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
steps=${1:-20}
A=hpu_hostA_$$; B=hpu_hostB_$$
cleanup() { ip netns del "$A" 2>/dev/null || true; ip netns del "$B" 2>/dev/null || true; rm -rf "$locks"; }
locks=$(mktemp -d)
trap cleanup EXIT
ip netns add "$A"; ip netns add "$B"
ip link add vethA$$ type veth peer name vethB$$
ip link set vethA$$ netns "$A"; ip link set vethB$$ netns "$B"
ip -n "$A" addr add 10.77.0.1/24 dev vethA$$; ip -n "$B" addr add 10.77.0.2/24 dev vethB$$
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set vethA$$ up; ip -n "$B" link set vethB$$ up
port=$((29800 + $$ % 100))
run() {  # node_rank ns
  # each host has its own /tmp for card locks, as separate machines would
  mkdir -p "$locks/$2"
  ip netns exec "$2" env PT_HPU_CARD_LOCK_DIR="$locks/$2" HCCL_SOCKET_IFNAME=veth \
    python -m torch.distributed.run --nnodes=2 --node_rank="$1" --nproc_per_node=2 \
      --master_addr=10.77.0.1 --master_port=$port \
      "$here/ddp_bert_worker.py" --steps "$steps" --modes plain,hook
}
run 0 "$A" > "$locks/a.log" 2>&1 & pa=$!
run 1 "$B" > "$locks/b.log" 2>&1 & pb=$!
rc=0; wait $pa || rc=$?; wait $pb || rc=$?
grep -h "DDP\|Error\|error" "$locks/a.log" "$locks/b.log" | grep -v Warning | head -20
if [ $rc -eq 0 ] && grep -q "DDP plain OK world=4" "$locks/a.log"; then echo "TWO HOSTS OK"; else echo "TWO HOSTS FAIL"; exit 1; fi
