/* ReduceScatter within a host. Past the small-message size, if every rank's
 * input can be read in place (card arenas mapped by peers, or CMA), each
 * rank reduces its block straight out of every rank's input into its output
 * and a final barrier keeps the inputs alive until all have read them.
 * Otherwise each rank stages, for every destination, a piece of that
 * destination's block; then each rank reduces its pieces out of every
 * peer's slot straight into its output. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static hcclResult_t reducescatter_direct(hcclComm_t comm, const hccl_op_t *op, int b, bool zc) {
  const int L = comm->local_n, me = comm->local;
  const size_t es = hccl_dtype_size(op->dtype), mine = (size_t)me * op->count * es;
  char *recv = op->recvbuff;
  const void *srcs[L];
  hcclResult_t r;
  if (zc) {
    for (int k = 0; k < L; k++) {
      char *base;
      /* rank k's whole input: L blocks, of which mine is read */
      if ((r = hccl_zc_addr(comm, k, &comm->shm.ctrl[k].zc[b].send, (size_t)L * op->count * es, &base)) != hcclSuccess)
        return r;
      srcs[k] = base + mine;
    }
    hccl_reduce_n(recv, srcs, L, op->count, op->dtype, op->redop);
    if (op->redop == hcclAvg) hccl_avg_div(recv, op->count, op->dtype, comm->nranks);
  } else {
    if (!comm->cma_tmp && !(comm->cma_tmp = malloc((size_t)L * HCCL_CMA_BLOCK)))
      return hccl_err(hcclSystemError, "out of memory");
    const size_t blk = HCCL_CMA_BLOCK / es;
    for (size_t p = 0; p < op->count; p += blk) {
      size_t m = op->count - p < blk ? op->count - p : blk;
      for (int k = 0; k < L; k++) {
        if (k == me) { srcs[k] = (const char *)op->sendbuff + mine + p * es; continue; }
        char *t = comm->cma_tmp + (size_t)k * HCCL_CMA_BLOCK;
        if ((r = hccl_cma_read(comm, k, t, comm->shm.ctrl[k].zc[b].send_va + mine + p * es, m * es)) != hcclSuccess)
          return r;
        srcs[k] = t;
      }
      hccl_reduce_n(recv + p * es, srcs, L, m, op->dtype, op->redop);
      if (op->redop == hcclAvg) hccl_avg_div(recv + p * es, m, op->dtype, comm->nranks);
    }
  }
  hccl_post(comm);
  return hccl_wait_all_posted(comm, "reducescatter (waiting for peers to finish reading)");
}

hcclResult_t hccl_reducescatter(hcclComm_t comm, const hccl_op_t *op) {
  if (comm->nhosts > 1) return hccl_generic_collective(comm, op);
  const int L = comm->local_n, me = comm->local;
  const size_t es = hccl_dtype_size(op->dtype);
  size_t piece = comm->shm.slot_bytes / ((size_t)L * es);   /* elements per destination per round */
  if (piece > 16) piece -= piece % 16;
  const char *send = op->sendbuff;
  char *recv = op->recvbuff;
  const void *srcs[L];
  const bool try_direct = op->count * es * (size_t)L > hccl_small_bytes(comm);
  hcclResult_t r;
  for (size_t pos = 0; pos < op->count; pos += piece) {
    size_t n = op->count - pos < piece ? op->count - pos : piece;
    int b = hccl_round_next(comm);
    bool skipped = false;
    char *slot = hccl_slot(&comm->shm, me, b);
    if (pos == 0) {
      hccl_desc_publish(comm, op, b);
      memset(&comm->shm.ctrl[me].zc[b], 0, sizeof comm->shm.ctrl[me].zc[b]);
      if (try_direct) skipped = hccl_zc_offer_send(comm, b, send, op->count * es * (size_t)L);
    }
    if (!skipped)
      for (int j = 0; j < L; j++) hccl_copy(slot + (size_t)j * piece * es, send + ((size_t)j * op->count + pos) * es, n * es);
    hccl_post(comm);
    if ((r = hccl_wait_all_posted(comm, "reducescatter")) != hcclSuccess) return r;
    if (pos == 0) {
      if ((r = hccl_desc_check(comm, b)) != hcclSuccess) return r;
      int zc, cma, skip;
      hccl_zc_tally(comm, b, &zc, &cma, &skip);
      if (try_direct && zc == L) return reducescatter_direct(comm, op, b, true);
      if (try_direct && cma == L) return reducescatter_direct(comm, op, b, false);
      if (try_direct && skip > 0) {  /* mixed: the ranks that did not stage stage now */
        if (skipped)
          for (int j = 0; j < L; j++) hccl_copy(slot + (size_t)j * piece * es, send + (size_t)j * op->count * es, n * es);
        hccl_post(comm);
        if ((r = hccl_wait_all_posted(comm, "reducescatter")) != hcclSuccess) return r;
      }
    }
    for (int k = 0; k < L; k++) srcs[k] = hccl_slot(&comm->shm, k, b) + (size_t)me * piece * es;
    hccl_reduce_n(recv + pos * es, srcs, L, n, op->dtype, op->redop);
    if (op->redop == hcclAvg) hccl_avg_div(recv + pos * es, n, op->dtype, comm->nranks);
  }
  return hcclSuccess;
}
