/* What every algorithm shares: staged rounds, operation descriptors and
 * their cross-rank check, slicing, and running one launch's operation list. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int hccl_round_next(hcclComm_t comm) { return (int)(comm->round++ & 1u); }

size_t hccl_small_bytes(hcclComm_t comm) {
  if (comm->small_bytes != UINT64_MAX) return (size_t)comm->small_bytes;
  return comm->local_n <= 2 ? 65536 : 16384;
}

void hccl_desc_publish(hcclComm_t comm, const hccl_op_t *op, int b) {
  hccl_op_desc_t *d = &comm->shm.ctrl[comm->local].desc[b];
  d->kind = (uint32_t)op->kind;
  d->dtype = (uint32_t)op->dtype;
  d->redop = (uint32_t)op->redop;
  d->root = op->root;
  d->count = op->count;
  d->seq = ++comm->op_seq;
}

hcclResult_t hccl_desc_check(hcclComm_t comm, int b) {
  const hccl_op_desc_t *me = &comm->shm.ctrl[comm->local].desc[b];
  for (int i = 0; i < comm->local_n; i++) {
    const hccl_op_desc_t *d = &comm->shm.ctrl[i].desc[b];
    if (d->kind == me->kind && d->dtype == me->dtype && d->redop == me->redop && d->root == me->root &&
        d->count == me->count && d->seq == me->seq)
      continue;
    return hccl_err(hcclInvalidUsage,
                    "mismatched collective calls: rank %d called %s(count=%llu, dtype=%u, op=%u, root=%lld) "
                    "as operation #%llu while rank %d called %s(count=%llu, dtype=%u, op=%u, root=%lld) as #%llu",
                    comm->rank, hccl_kind_name((int)me->kind), (unsigned long long)me->count, me->dtype, me->redop,
                    (long long)me->root, (unsigned long long)me->seq, comm->local_ranks[i],
                    hccl_kind_name((int)d->kind), (unsigned long long)d->count, d->dtype, d->redop,
                    (long long)d->root, (unsigned long long)d->seq);
  }
  return hcclSuccess;
}

void hccl_slice(size_t n, int parts, int i, size_t align, size_t *off, size_t *len) {
  size_t per = (n + (size_t)parts - 1) / (size_t)parts;
  per = (per + align - 1) / align * align;
  size_t o = per * (size_t)i;
  if (o > n) o = n;
  size_t e = o + per > n ? n : o + per;
  *off = o;
  *len = e - o;
}

static hcclResult_t run_collective(hcclComm_t comm, const hccl_op_t *op) {
  switch (op->kind) {
    case HCCL_K_ALLREDUCE: return hccl_allreduce(comm, op);
    case HCCL_K_BROADCAST: return hccl_broadcast(comm, op);
    case HCCL_K_REDUCE: return hccl_reduce(comm, op);
    case HCCL_K_ALLGATHER: return hccl_allgather(comm, op);
    case HCCL_K_REDUCESCATTER: return hccl_reducescatter(comm, op);
    case HCCL_K_ALLTOALL: return hccl_alltoall(comm, op);
    case HCCL_K_BARRIER: return hccl_barrier(comm, op);
  }
  return hccl_err(hcclInternalError, "unknown operation kind %d", op->kind);
}

/* Collectives in issue order, then every send and receive together (so a
 * group may hold matching sends and receives in any order). */
hcclResult_t hccl_run_ops(hcclComm_t comm, hccl_op_t *ops, int nops) {
  hcclResult_t r;
  int np = 0;
  for (int i = 0; i < nops; i++) {
    if (ops[i].kind == HCCL_K_SEND || ops[i].kind == HCCL_K_RECV) { np++; continue; }
    if (ops[i].count == 0 && ops[i].kind != HCCL_K_BARRIER) continue;
    if ((r = run_collective(comm, &ops[i])) != hcclSuccess) return r;
  }
  if (np == 0) return hcclSuccess;
  hccl_p2p_t *p = calloc((size_t)np, sizeof *p);
  if (!p) return hccl_err(hcclSystemError, "out of memory");
  int k = 0;
  /* Messages to oneself pair up in order and are plain copies. */
  for (int i = 0; i < nops; i++) {
    hccl_op_t *o = &ops[i];
    if (o->kind != HCCL_K_SEND && o->kind != HCCL_K_RECV) continue;
    size_t bytes = o->count * hccl_dtype_size(o->dtype);
    if (o->root == comm->rank) {
      if (o->kind != HCCL_K_SEND) continue;
      int j;
      for (j = 0; j < nops; j++)
        if (ops[j].kind == HCCL_K_RECV && ops[j].root == comm->rank && ops[j].count != (size_t)-1) break;
      if (j == nops) { free(p); return hccl_err(hcclInvalidUsage, "send to self without a matching receive"); }
      if (ops[j].count * hccl_dtype_size(ops[j].dtype) != bytes) {
        free(p);
        return hccl_err(hcclInvalidUsage, "send to self of %zu bytes, receive of %zu", bytes,
                        ops[j].count * hccl_dtype_size(ops[j].dtype));
      }
      if (ops[j].recvbuff != o->sendbuff) memmove(ops[j].recvbuff, o->sendbuff, bytes);
      ops[j].count = (size_t)-1;  /* consumed */
      continue;
    }
    p[k].is_send = o->kind == HCCL_K_SEND;
    p[k].peer = o->root;
    p[k].buf = p[k].is_send ? (char *)o->sendbuff : (char *)o->recvbuff;
    p[k].bytes = bytes;
    k++;
  }
  for (int i = 0; i < nops; i++)
    if (ops[i].kind == HCCL_K_RECV && ops[i].root == comm->rank && ops[i].count != (size_t)-1) {
      free(p);
      return hccl_err(hcclInvalidUsage, "receive from self without a matching send");
    }
  r = hccl_p2p_run(comm, p, k);
  free(p);
  return r;
}
