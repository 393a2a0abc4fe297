/* AlltoAll within a host: each rank stages a piece of every outgoing block,
 * then copies the pieces addressed to it out of every peer's slot. */
#include <string.h>

#include "internal.h"

hcclResult_t hccl_alltoall(hcclComm_t comm, const hccl_op_t *op) {
  if (comm->nhosts > 1) return hccl_generic_collective(comm, op);
  const int L = comm->local_n, me = comm->local;
  const size_t es = hccl_dtype_size(op->dtype);
  const size_t block = op->count * es;
  size_t piece = comm->shm.slot_bytes / (size_t)L;   /* bytes per destination per round */
  piece -= piece % 64;
  const char *send = op->sendbuff;
  char *recv = op->recvbuff;
  hcclResult_t r;
  for (size_t pos = 0; pos < block; pos += piece) {
    size_t n = block - pos < piece ? block - pos : piece;
    int b = hccl_round_next(comm);
    if (pos == 0) hccl_desc_publish(comm, op, b);
    char *mine = hccl_slot(&comm->shm, me, b);
    for (int j = 0; j < L; j++) hccl_copy(mine + (size_t)j * piece, send + (size_t)j * block + pos, n);
    hccl_post(comm);
    if ((r = hccl_wait_all_posted(comm, "alltoall")) != hcclSuccess) return r;
    if (pos == 0 && (r = hccl_desc_check(comm, b)) != hcclSuccess) return r;
    for (int k = 0; k < L; k++) hccl_copy(recv + (size_t)k * block + pos, hccl_slot(&comm->shm, k, b) + (size_t)me * piece, n);
  }
  return hcclSuccess;
}
