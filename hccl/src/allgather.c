/* AllGather within a host: each rank stages a piece of its block, then
 * copies every rank's piece into place. In place (sendbuff at rank's block
 * of recvbuff) needs no copy of its own block. */
#include <string.h>

#include "internal.h"

hcclResult_t hccl_allgather(hcclComm_t comm, const hccl_op_t *op) {
  if (comm->nhosts > 1) return hccl_generic_collective(comm, op);
  const int L = comm->local_n, me = comm->local;
  const size_t es = hccl_dtype_size(op->dtype);
  const size_t block = op->count * es, chunk = comm->shm.slot_bytes;
  char *recv = op->recvbuff;
  const bool inplace = (const char *)op->sendbuff == recv + (size_t)me * block;
  hcclResult_t r;
  for (size_t pos = 0; pos < block; pos += chunk) {
    size_t n = block - pos < chunk ? block - pos : chunk;
    int b = hccl_round_next(comm);
    if (pos == 0) hccl_desc_publish(comm, op, b);
    memcpy(hccl_slot(&comm->shm, me, b), (const char *)op->sendbuff + pos, n);
    hccl_post(comm);
    if ((r = hccl_wait_all_posted(comm, "allgather")) != hcclSuccess) return r;
    if (pos == 0 && (r = hccl_desc_check(comm, b)) != hcclSuccess) return r;
    for (int k = 0; k < L; k++) {
      if (k == me && inplace) continue;
      memcpy(recv + (size_t)k * block + pos, hccl_slot(&comm->shm, k, b), n);
    }
  }
  return hcclSuccess;
}
