/* AllReduce and Reduce.
 *
 * Within a host (DeepSpeed's shm design): each rank copies its chunk into
 * its slot; after a barrier each rank reduces its own slice of the chunk out
 * of every peer's slot into its slot; after a second barrier everyone
 * gathers the reduced slices. Small messages skip the second phase: every
 * rank reduces the whole chunk itself (one barrier instead of two).
 *
 * Across hosts (uniform hosts): the same, but between the two phases the
 * owner of slice i on each host exchanges its host-partial with the owners
 * of slice i on the other hosts over TCP and reduces them in host order:
 * reduce-scatter within the host, exchange between hosts, all-gather within
 * the host. Every rank ends with bit-identical results. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static size_t small_limit(hcclComm_t comm) {
  size_t lim = hccl_small_bytes(comm);
  return lim < comm->shm.slot_bytes ? lim : comm->shm.slot_bytes;
}

/* Inter-host step for my slice: partial -> sum over hosts, in place. */
static hcclResult_t exchange_hosts(hcclComm_t comm, char *slice, size_t len, hcclDataType_t dt, hcclRedOp_t op) {
  const int H = comm->nhosts;
  const size_t bytes = len * hccl_dtype_size(dt);
  char *tmp = malloc(bytes * (size_t)(H - 1));
  hccl_p2p_t *p = calloc((size_t)(2 * (H - 1)), sizeof *p);
  const void **srcs = malloc(sizeof(void *) * (size_t)H);
  if (!tmp || !p || !srcs) {
    free(tmp); free(p); free(srcs);
    return hccl_err(hcclSystemError, "out of memory");
  }
  int k = 0, t = 0;
  for (int h = 0; h < H; h++) {
    if (h == comm->host) { srcs[h] = slice; continue; }
    int peer = comm->host_ranks[h][comm->local];
    p[k++] = (hccl_p2p_t){.is_send = 1, .peer = peer, .buf = slice, .bytes = bytes};
    p[k++] = (hccl_p2p_t){.is_send = 0, .peer = peer, .buf = tmp + bytes * (size_t)t, .bytes = bytes};
    srcs[h] = tmp + bytes * (size_t)t++;
  }
  hcclResult_t r = hccl_p2p_run(comm, p, k);
  if (r == hcclSuccess) hccl_reduce_n(slice, srcs, H, len, dt, op);
  free(tmp); free(p); free(srcs);
  return r;
}

/* Whether local rank li published buffers that can be used in place in
 * round b: its input always, its output when it receives a result. */
static bool zc_rank_ok(hcclComm_t comm, int li, int b, int root_local) {
  const hccl_zc_desc_t *z = &comm->shm.ctrl[li].zc[b];
  return z->send.valid && (z->recv.valid || (root_local >= 0 && root_local != li));
}

/* A rank that could take part in a direct path skips staging its first
 * chunk (mapped card memory, or CMA). */
static bool direct_ok(hcclComm_t comm, int li, int b, int root_local) {
  return zc_rank_ok(comm, li, b, root_local) || comm->shm.ctrl[li].zc[b].cma;
}

/* Zero-copy reduction (every local rank's buffers are in card arenas): rank
 * k reduces slice k straight out of every rank's input and writes the
 * result straight into every rank's output (or the root's), block by block
 * so the reduced block is still in cache when it is copied out. Only rank k
 * touches slice k anywhere, so in-place buffers are safe: a block of a
 * peer's output is written after the same block of its input was read.
 * Memory traffic: N*S read + N*S written in total (vs (3N-1)*S for the
 * staged design). One barrier after: nobody returns while a peer may still
 * write its output or read its input. */
static hcclResult_t reduce_zc(hcclComm_t comm, const hccl_op_t *op, int root_local, int b) {
  const int L = comm->local_n, me = comm->local;
  const size_t es = hccl_dtype_size(op->dtype);
  const size_t align = es >= 64 ? 1 : 64 / es;
  char *sends[L], *recvs[L];
  const void *srcs[L];
  hcclResult_t r;
  for (int k = 0; k < L; k++) {
    const hccl_zc_desc_t *z = &comm->shm.ctrl[k].zc[b];
    recvs[k] = NULL;
    if ((r = hccl_zc_addr(comm, k, &z->send, op->count * es, &sends[k])) != hcclSuccess) return r;
    if ((root_local < 0 || root_local == k) &&
        (r = hccl_zc_addr(comm, k, &z->recv, op->count * es, &recvs[k])) != hcclSuccess)
      return r;
  }
  char *dst = recvs[root_local < 0 ? me : root_local];
  size_t off, len;
  hccl_slice(op->count, L, me, align, &off, &len);
  size_t blk = (32768 / es + align - 1) / align * align;
  for (size_t p = off; p < off + len; p += blk) {
    size_t m = off + len - p < blk ? off + len - p : blk;
    for (int k = 0; k < L; k++) srcs[k] = sends[k] + p * es;
    hccl_reduce_n(dst + p * es, srcs, L, m, op->dtype, op->redop);
    if (op->redop == hcclAvg) hccl_avg_div(dst + p * es, m, op->dtype, comm->nranks);
    if (root_local < 0)
      for (int k = 0; k < L; k++)
        if (k != me) hccl_copy(recvs[k] + p * es, dst + p * es, m * es);
  }
  hccl_post(comm);
  return hccl_wait_all_posted(comm, "reduction (waiting for peers to finish in place)");
}

/* The same with host buffers, through CMA: rank k reads block b of slice k
 * out of every peer's input into a staging block (still in cache when it
 * is reduced), reduces into its own output, and writes the block into
 * every peer's output (or reduces into a staging block and writes it to the
 * root). */
static hcclResult_t reduce_cma(hcclComm_t comm, const hccl_op_t *op, int root_local, int b) {
  const int L = comm->local_n, me = comm->local;
  const size_t es = hccl_dtype_size(op->dtype);
  const size_t align = es >= 64 ? 1 : 64 / es;
  const void *srcs[L];
  hcclResult_t r;
  if (!comm->cma_tmp && !(comm->cma_tmp = malloc((size_t)L * HCCL_CMA_BLOCK)))
    return hccl_err(hcclSystemError, "out of memory");
  char *out_tmp = comm->cma_tmp + (size_t)me * HCCL_CMA_BLOCK;  /* my slot of tmp is free: the root's result */
  size_t off, len;
  hccl_slice(op->count, L, me, align, &off, &len);
  const size_t blk = HCCL_CMA_BLOCK / es;
  for (size_t p = off; p < off + len; p += blk) {
    size_t m = off + len - p < blk ? off + len - p : blk, bytes = m * es;
    for (int k = 0; k < L; k++) {
      if (k == me) { srcs[k] = (const char *)op->sendbuff + p * es; continue; }
      char *t = comm->cma_tmp + (size_t)k * HCCL_CMA_BLOCK;
      if ((r = hccl_cma_read(comm, k, t, comm->shm.ctrl[k].zc[b].send_va + p * es, bytes)) != hcclSuccess) return r;
      srcs[k] = t;
    }
    char *dst = root_local < 0 || root_local == me ? (char *)op->recvbuff + p * es : out_tmp;
    hccl_reduce_n(dst, srcs, L, m, op->dtype, op->redop);
    if (op->redop == hcclAvg) hccl_avg_div(dst, m, op->dtype, comm->nranks);
    for (int k = 0; k < L; k++) {
      if (k == me || (root_local >= 0 && root_local != k)) continue;
      if ((r = hccl_cma_write(comm, k, comm->shm.ctrl[k].zc[b].recv_va + p * es, dst, bytes)) != hcclSuccess) return r;
    }
  }
  hccl_post(comm);
  return hccl_wait_all_posted(comm, "reduction (waiting for peers to finish in place)");
}

/* root_local < 0: every rank gets the result (AllReduce). */
static hcclResult_t reduce_staged(hcclComm_t comm, const hccl_op_t *op, int root_local) {
  const int L = comm->local_n, me = comm->local;
  const size_t es = hccl_dtype_size(op->dtype);
  const size_t align = es >= 64 ? 1 : 64 / es;
  const char *send = op->sendbuff;
  char *recv = op->recvbuff;
  const void *srcs[L];
  hcclResult_t r;
  bool hier = comm->nhosts > 1;

  if (!hier && op->count * es <= small_limit(comm)) {
    int b = hccl_round_next(comm);
    hccl_desc_publish(comm, op, b);
    hccl_copy(hccl_slot(&comm->shm, me, b), send, op->count * es);
    hccl_post(comm);
    if ((r = hccl_wait_all_posted(comm, "reduction (waiting for peers' data)")) != hcclSuccess) return r;
    if ((r = hccl_desc_check(comm, b)) != hcclSuccess) return r;
    if (root_local < 0 || root_local == me) {
      for (int k = 0; k < L; k++) srcs[k] = hccl_slot(&comm->shm, k, b);
      hccl_reduce_n(recv, srcs, L, op->count, op->dtype, op->redop);
      if (op->redop == hcclAvg) hccl_avg_div(recv, op->count, op->dtype, comm->nranks);
    }
    return hcclSuccess;
  }

  /* An output larger than the last-level cache is written with streaming
   * stores (no read of the lines before they are overwritten). */
  void (*copy_out)(void *, const void *, size_t) = op->count * es >= HCCL_STREAM_BYTES ? hccl_copy_stream : hccl_copy;
  size_t chunk = comm->shm.slot_bytes / es;
  if (chunk > (size_t)L * align) chunk -= chunk % ((size_t)L * align);
  for (size_t pos = 0; pos < op->count; pos += chunk) {
    size_t n = op->count - pos < chunk ? op->count - pos : chunk;
    int b = hccl_round_next(comm);
    bool zc_mine = false;
    if (pos == 0) {
      hccl_desc_publish(comm, op, b);
      /* The first round also tells peers whether my buffers can be read in
       * place; a rank whose buffers can stages its first chunk only if
       * some peer's cannot (one extra barrier in that mixed case). */
      hccl_zc_desc_t *z = &comm->shm.ctrl[me].zc[b];
      memset(z, 0, sizeof *z);
      if (!hier) {
        hccl_zc_describe(comm, send, op->count * es, &z->send);
        hccl_zc_describe(comm, root_local < 0 || root_local == me ? recv : NULL, op->count * es, &z->recv);
        z->send_va = (uint64_t)(uintptr_t)send;
        z->recv_va = (uint64_t)(uintptr_t)recv;
        z->cma = hccl_cma_usable(comm);
      }
      zc_mine = direct_ok(comm, me, b, root_local);
    }
    size_t off, len;
    if (!zc_mine) /* peers read my slot only for their slices: mine I reduce straight out of send */
      for (int k = 0; k < L; k++) {
        if (k == me) continue;
        hccl_slice(n, L, k, align, &off, &len);
        if (len) hccl_copy(hccl_slot(&comm->shm, me, b) + off * es, send + (pos + off) * es, len * es);
      }
    hccl_post(comm);
    if ((r = hccl_wait_all_posted(comm, "reduction (waiting for peers' data)")) != hcclSuccess) return r;
    if (pos == 0) {
      if ((r = hccl_desc_check(comm, b)) != hcclSuccess) return r;
      int zc = 0, cma = 0, direct = 0;
      for (int k = 0; k < L; k++) {
        zc += zc_rank_ok(comm, k, b, root_local);
        cma += comm->shm.ctrl[k].zc[b].cma;
        direct += direct_ok(comm, k, b, root_local);
      }
      if (zc == L) return reduce_zc(comm, op, root_local, b);
      if (cma == L) return reduce_cma(comm, op, root_local, b);
      if (direct > 0) {  /* mixed: the ranks that did not stage stage now */
        if (zc_mine) hccl_copy(hccl_slot(&comm->shm, me, b), send, n * es);
        hccl_post(comm);
        if ((r = hccl_wait_all_posted(comm, "reduction (waiting for peers' data)")) != hcclSuccess) return r;
      }
    }
    hccl_slice(n, L, me, align, &off, &len);
    if (len) {
      char *dst = hccl_slot(&comm->shm, me, b) + off * es;
      for (int k = 0; k < L; k++) srcs[k] = k == me ? send + (pos + off) * es : hccl_slot(&comm->shm, k, b) + off * es;
      hccl_reduce_n(dst, srcs, L, len, op->dtype, op->redop);
      if (hier && (r = exchange_hosts(comm, dst, len, op->dtype, hccl_base_op(op->redop))) != hcclSuccess) return r;
      if (op->redop == hcclAvg) hccl_avg_div(dst, len, op->dtype, comm->nranks);
    }
    hccl_post(comm);
    if ((r = hccl_wait_all_posted(comm, "reduction (waiting for reduced slices)")) != hcclSuccess) return r;
    if (root_local < 0 || root_local == me) {
      for (int k = 0; k < L; k++) {
        hccl_slice(n, L, k, align, &off, &len);
        if (len) copy_out(recv + (pos + off) * es, hccl_slot(&comm->shm, k, b) + off * es, len * es);
      }
    }
  }
  return hcclSuccess;
}

hcclResult_t hccl_allreduce(hcclComm_t comm, const hccl_op_t *op) {
  if (comm->nhosts > 1 && !comm->uniform) return hccl_generic_collective(comm, op);
  return reduce_staged(comm, op, -1);
}

hcclResult_t hccl_reduce(hcclComm_t comm, const hccl_op_t *op) {
  if (comm->nhosts > 1) return hccl_generic_collective(comm, op);
  return reduce_staged(comm, op, comm->local_of[op->root]);
}
