/* Broadcast within a host. Past the small-message size, if every rank can
 * read the root's buffer in place (it lies in a card arena that peers map,
 * or every rank may use CMA), each rank copies it straight into its output
 * and a final barrier keeps the root's buffer alive until all have read
 * it: one copy per byte per receiver, two barriers per call. Otherwise the
 * root stages each chunk in its slot and the others copy it out after the
 * barrier. Across hosts: the generic path. */
#include <string.h>

#include "internal.h"

static hcclResult_t broadcast_direct(hcclComm_t comm, const hccl_op_t *op, int root, int b, bool zc) {
  const size_t total = op->count * hccl_dtype_size(op->dtype);
  hcclResult_t r = hcclSuccess;
  if (comm->local != root) {
    const hccl_zc_desc_t *z = &comm->shm.ctrl[root].zc[b];
    if (zc) {
      char *src;
      if ((r = hccl_zc_addr(comm, root, &z->send, total, &src)) == hcclSuccess) hccl_copy(op->recvbuff, src, total);
    } else {
      r = hccl_cma_read(comm, root, op->recvbuff, z->send_va, total);
    }
    if (r != hcclSuccess) return r;
  }
  hccl_post(comm);
  return hccl_wait_all_posted(comm, "broadcast (waiting for peers to finish reading)");
}

hcclResult_t hccl_broadcast(hcclComm_t comm, const hccl_op_t *op) {
  if (comm->nhosts > 1) return hccl_generic_collective(comm, op);
  const size_t es = hccl_dtype_size(op->dtype);
  const int me = comm->local, root = comm->local_of[op->root], L = comm->local_n;
  const size_t total = op->count * es, chunk = comm->shm.slot_bytes;
  const bool try_direct = total > hccl_small_bytes(comm);
  hcclResult_t r;
  if (me == root && op->sendbuff != op->recvbuff) memmove(op->recvbuff, op->sendbuff, total);
  for (size_t pos = 0; pos < total; pos += chunk) {
    size_t n = total - pos < chunk ? total - pos : chunk;
    int b = hccl_round_next(comm);
    bool skipped = false;
    if (pos == 0) {
      hccl_desc_publish(comm, op, b);
      memset(&comm->shm.ctrl[me].zc[b], 0, sizeof comm->shm.ctrl[me].zc[b]);
      /* the root's data is in its output now (copied above if need be) */
      if (try_direct)
        skipped = hccl_zc_offer_send(comm, b, me == root ? op->recvbuff : NULL, total) && me == root;
    }
    if (me == root && !skipped) hccl_copy(hccl_slot(&comm->shm, me, b), (const char *)op->recvbuff + pos, n);
    hccl_post(comm);
    if ((r = hccl_wait_all_posted(comm, "broadcast")) != hcclSuccess) return r;
    if (pos == 0) {
      if ((r = hccl_desc_check(comm, b)) != hcclSuccess) return r;
      const hccl_zc_desc_t *rz = &comm->shm.ctrl[root].zc[b];
      int cma = 0;
      for (int k = 0; k < L; k++) cma += comm->shm.ctrl[k].zc[b].cma;
      if (try_direct && rz->send.valid) return broadcast_direct(comm, op, root, b, true);
      if (try_direct && cma == L) return broadcast_direct(comm, op, root, b, false);
      if (try_direct && (rz->send.valid || rz->cma)) {  /* the root did not stage: it does now */
        if (me == root) hccl_copy(hccl_slot(&comm->shm, me, b), op->recvbuff, n);
        hccl_post(comm);
        if ((r = hccl_wait_all_posted(comm, "broadcast")) != hcclSuccess) return r;
      }
    }
    if (me != root) hccl_copy((char *)op->recvbuff + pos, hccl_slot(&comm->shm, root, b), n);
  }
  return hcclSuccess;
}
