/* Broadcast within a host: the root stages each chunk in its slot, the
 * others copy it out after the barrier. Across hosts: the generic path. */
#include <string.h>

#include "internal.h"

hcclResult_t hccl_broadcast(hcclComm_t comm, const hccl_op_t *op) {
  if (comm->nhosts > 1) return hccl_generic_collective(comm, op);
  const size_t es = hccl_dtype_size(op->dtype);
  const int me = comm->local, root = comm->local_of[op->root];
  const size_t total = op->count * es, chunk = comm->shm.slot_bytes;
  hcclResult_t r;
  if (me == root && op->sendbuff != op->recvbuff) memmove(op->recvbuff, op->sendbuff, total);
  for (size_t pos = 0; pos < total; pos += chunk) {
    size_t n = total - pos < chunk ? total - pos : chunk;
    int b = hccl_round_next(comm);
    if (pos == 0) hccl_desc_publish(comm, op, b);
    if (me == root) memcpy(hccl_slot(&comm->shm, me, b), (const char *)op->sendbuff + pos, n);
    hccl_post(comm);
    if ((r = hccl_wait_all_posted(comm, "broadcast")) != hcclSuccess) return r;
    if (pos == 0 && (r = hccl_desc_check(comm, b)) != hcclSuccess) return r;
    if (me != root) memcpy((char *)op->recvbuff + pos, hccl_slot(&comm->shm, root, b), n);
  }
  return hcclSuccess;
}
