/* ReduceScatter within a host: each rank stages, for every destination, a
 * piece of that destination's block; then each rank reduces its pieces out
 * of every peer's slot straight into its output. */
#include <string.h>

#include "internal.h"

hcclResult_t hccl_reducescatter(hcclComm_t comm, const hccl_op_t *op) {
  if (comm->nhosts > 1) return hccl_generic_collective(comm, op);
  const int L = comm->local_n, me = comm->local;
  const size_t es = hccl_dtype_size(op->dtype);
  size_t piece = comm->shm.slot_bytes / ((size_t)L * es);   /* elements per destination per round */
  if (piece > 16) piece -= piece % 16;
  const char *send = op->sendbuff;
  char *recv = op->recvbuff;
  const void *srcs[L];
  hcclResult_t r;
  for (size_t pos = 0; pos < op->count; pos += piece) {
    size_t n = op->count - pos < piece ? op->count - pos : piece;
    int b = hccl_round_next(comm);
    if (pos == 0) hccl_desc_publish(comm, op, b);
    char *mine = hccl_slot(&comm->shm, me, b);
    for (int j = 0; j < L; j++) memcpy(mine + (size_t)j * piece * es, send + ((size_t)j * op->count + pos) * es, n * es);
    hccl_post(comm);
    if ((r = hccl_wait_all_posted(comm, "reducescatter")) != hcclSuccess) return r;
    if (pos == 0 && (r = hccl_desc_check(comm, b)) != hcclSuccess) return r;
    for (int k = 0; k < L; k++) srcs[k] = hccl_slot(&comm->shm, k, b) + (size_t)me * piece * es;
    hccl_reduce_n(recv + pos * es, srcs, L, n, op->dtype, op->redop);
    if (op->redop == hcclAvg) hccl_avg_div(recv + pos * es, n, op->dtype, comm->nranks);
  }
  return hcclSuccess;
}
