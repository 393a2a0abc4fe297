/* AllGather within a host. Past the small-message size, if every rank's
 * block can be read in place (card arenas mapped by peers, or CMA), each
 * rank copies every peer's block straight into its output and a final
 * barrier keeps the blocks alive until all have read them. Otherwise each
 * rank stages a piece of its block, then copies every rank's piece into
 * place. In place (sendbuff at rank's block of recvbuff) needs no copy of
 * its own block. */
#include <string.h>

#include "internal.h"

static hcclResult_t allgather_direct(hcclComm_t comm, const hccl_op_t *op, int b, bool zc, bool inplace) {
  const int L = comm->local_n, me = comm->local;
  const size_t block = op->count * hccl_dtype_size(op->dtype);
  char *recv = op->recvbuff;
  hcclResult_t r = hcclSuccess;
  for (int j = 1; j <= L && r == hcclSuccess; j++) {
    int k = (me + j) % L;   /* start with the next rank: readers spread over the owners */
    char *dst = recv + (size_t)k * block;
    if (k == me) {
      if (!inplace) hccl_copy(dst, op->sendbuff, block);
      continue;
    }
    const hccl_zc_desc_t *z = &comm->shm.ctrl[k].zc[b];
    if (zc) {
      char *src;
      if ((r = hccl_zc_addr(comm, k, &z->send, block, &src)) == hcclSuccess) hccl_copy(dst, src, block);
    } else {
      r = hccl_cma_read(comm, k, dst, z->send_va, block);
    }
  }
  if (r != hcclSuccess) return r;
  hccl_post(comm);
  return hccl_wait_all_posted(comm, "allgather (waiting for peers to finish reading)");
}

hcclResult_t hccl_allgather(hcclComm_t comm, const hccl_op_t *op) {
  if (comm->nhosts > 1) return hccl_generic_collective(comm, op);
  const int L = comm->local_n, me = comm->local;
  const size_t es = hccl_dtype_size(op->dtype);
  const size_t block = op->count * es, chunk = comm->shm.slot_bytes;
  char *recv = op->recvbuff;
  const bool inplace = (const char *)op->sendbuff == recv + (size_t)me * block;
  const bool try_direct = block * (size_t)L > hccl_small_bytes(comm);
  hcclResult_t r;
  for (size_t pos = 0; pos < block; pos += chunk) {
    size_t n = block - pos < chunk ? block - pos : chunk;
    int b = hccl_round_next(comm);
    bool skipped = false;
    if (pos == 0) {
      hccl_desc_publish(comm, op, b);
      memset(&comm->shm.ctrl[me].zc[b], 0, sizeof comm->shm.ctrl[me].zc[b]);
      if (try_direct) skipped = hccl_zc_offer_send(comm, b, op->sendbuff, block);
    }
    if (!skipped) hccl_copy(hccl_slot(&comm->shm, me, b), (const char *)op->sendbuff + pos, n);
    hccl_post(comm);
    if ((r = hccl_wait_all_posted(comm, "allgather")) != hcclSuccess) return r;
    if (pos == 0) {
      if ((r = hccl_desc_check(comm, b)) != hcclSuccess) return r;
      int zc, cma, skip;
      hccl_zc_tally(comm, b, &zc, &cma, &skip);
      if (try_direct && zc == L) return allgather_direct(comm, op, b, true, inplace);
      if (try_direct && cma == L) return allgather_direct(comm, op, b, false, inplace);
      if (try_direct && skip > 0) {  /* mixed: the ranks that did not stage stage now */
        if (skipped) hccl_copy(hccl_slot(&comm->shm, me, b), op->sendbuff, n);
        hccl_post(comm);
        if ((r = hccl_wait_all_posted(comm, "allgather")) != hcclSuccess) return r;
      }
    }
    for (int k = 0; k < L; k++) {
      if (k == me && inplace) continue;
      hccl_copy(recv + (size_t)k * block + pos, hccl_slot(&comm->shm, k, b), n);
    }
  }
  return hcclSuccess;
}
