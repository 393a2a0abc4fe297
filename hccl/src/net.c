/* Across hosts: a TCP connection to every rank on another host (the lower
 * rank connects, the higher accepts; each side proves itself with a hello
 * carrying magic, version and the bootstrap session), and the generic
 * algorithms built from the point-to-point engine, used for everything but
 * the hierarchical allreduce. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"
#include "wait_policy.h"

typedef struct hello {
  uint32_t magic, version;
  uint64_t session;
  int32_t from, to;
} hello_t;

hcclResult_t hccl_net_setup(hcclComm_t comm, int64_t deadline) {
  hcclResult_t r;
  int expect = 0;
  for (int p = 0; p < comm->nranks; p++) {
    if (comm->local_of[p] >= 0) continue;
    if (p > comm->rank) { expect++; continue; }
    int fd;
    if ((r = hccl_sock_connect(&comm->info[p].listen_addr, deadline, &fd)) != hcclSuccess)
      return hccl_err(r, "rank %d: cannot connect to rank %d: %s", comm->rank, p, hccl_thread_error());
    hello_t h = {HCCL_MAGIC, HCCL_PROTO_VERSION, comm->session, comm->rank, p};
    if ((r = hccl_sock_send_all(fd, &h, sizeof h, deadline, NULL)) != hcclSuccess) { close(fd); return r; }
    comm->sock[p] = fd;
  }
  while (expect > 0) {
    int fd;
    if ((r = hccl_sock_accept(comm->listen_fd, deadline, &fd)) != hcclSuccess)
      return hccl_err(r, "rank %d: %d peers on other hosts never connected", comm->rank, expect);
    hello_t h;
    int64_t dl = hccl_now_ns() + HCCL_HELLO_TIMEOUT_NS;
    if (dl > deadline) dl = deadline;
    if (hccl_sock_recv_all(fd, &h, sizeof h, dl, NULL) != hcclSuccess || h.magic != HCCL_MAGIC ||
        h.version != HCCL_PROTO_VERSION || h.session != comm->session || h.to != comm->rank || h.from <= comm->rank ||
        h.from >= comm->nranks || comm->local_of[h.from] >= 0 || comm->sock[h.from] >= 0) {
      hccl_debug("rank %d: refused a foreign or malformed connection", comm->rank);
      close(fd);
      continue;
    }
    comm->sock[h.from] = fd;
    expect--;
  }
  return hcclSuccess;
}

void hccl_net_teardown(hcclComm_t comm) {
  for (int p = 0; comm->sock && p < comm->nranks; p++)
    if (comm->sock[p] >= 0) {
      close(comm->sock[p]);
      comm->sock[p] = -1;
    }
}

/* ---- generic algorithms over point-to-point ---- */

#define GEN_CHUNK (4u << 20)

static hcclResult_t gen_broadcast(hcclComm_t comm, const void *send, void *recv, size_t bytes, int root) {
  const int n = comm->nranks, me = comm->rank;
  if (me != root) {
    hccl_p2p_t p = {.is_send = 0, .peer = root, .buf = recv, .bytes = bytes};
    return hccl_p2p_run(comm, &p, 1);
  }
  if (send != recv) memmove(recv, send, bytes);
  hccl_p2p_t *p = calloc((size_t)n, sizeof *p);
  if (!p) return hccl_err(hcclSystemError, "out of memory");
  int k = 0;
  for (int i = 0; i < n; i++)
    if (i != me) p[k++] = (hccl_p2p_t){.is_send = 1, .peer = i, .buf = recv, .bytes = bytes};
  hcclResult_t r = hccl_p2p_run(comm, p, k);
  free(p);
  return r;
}

/* Reduce to root in chunks; sources reduced in rank order. */
static hcclResult_t gen_reduce(hcclComm_t comm, const hccl_op_t *op, int root) {
  const int n = comm->nranks, me = comm->rank;
  const size_t es = hccl_dtype_size(op->dtype);
  const size_t chunk = GEN_CHUNK / es;
  hcclResult_t r = hcclSuccess;
  char *tmp = NULL;
  hccl_p2p_t *p = calloc((size_t)n, sizeof *p);
  const void **srcs = calloc((size_t)n, sizeof *srcs);
  if (me == root) tmp = malloc(chunk * es * (size_t)n);
  if (!p || !srcs || (me == root && !tmp)) { r = hccl_err(hcclSystemError, "out of memory"); goto out; }
  for (size_t pos = 0; pos < op->count; pos += chunk) {
    size_t c = op->count - pos < chunk ? op->count - pos : chunk;
    const char *mine = (const char *)op->sendbuff + pos * es;
    memset(p, 0, sizeof *p * (size_t)n);
    if (me != root) {
      p[0] = (hccl_p2p_t){.is_send = 1, .peer = root, .buf = (char *)mine, .bytes = c * es};
      if ((r = hccl_p2p_run(comm, p, 1)) != hcclSuccess) goto out;
      continue;
    }
    int k = 0;
    for (int i = 0; i < n; i++) {
      if (i == me) { srcs[i] = mine; continue; }
      srcs[i] = tmp + (size_t)i * chunk * es;
      p[k++] = (hccl_p2p_t){.is_send = 0, .peer = i, .buf = (char *)srcs[i], .bytes = c * es};
    }
    if ((r = hccl_p2p_run(comm, p, k)) != hcclSuccess) goto out;
    char *dst = (char *)op->recvbuff + pos * es;
    hccl_reduce_n(dst, srcs, n, c, op->dtype, op->redop);
    if (op->redop == hcclAvg) hccl_avg_div(dst, c, op->dtype, n);
  }
out:
  free(tmp); free(p); free(srcs);
  return r;
}

static hcclResult_t gen_allgather(hcclComm_t comm, const hccl_op_t *op) {
  const int n = comm->nranks, me = comm->rank;
  const size_t block = op->count * hccl_dtype_size(op->dtype);
  char *recv = op->recvbuff;
  if (op->sendbuff != recv + (size_t)me * block) memmove(recv + (size_t)me * block, op->sendbuff, block);
  hccl_p2p_t *p = calloc((size_t)(2 * n), sizeof *p);
  if (!p) return hccl_err(hcclSystemError, "out of memory");
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (i == me) continue;
    p[k++] = (hccl_p2p_t){.is_send = 1, .peer = i, .buf = recv + (size_t)me * block, .bytes = block};
    p[k++] = (hccl_p2p_t){.is_send = 0, .peer = i, .buf = recv + (size_t)i * block, .bytes = block};
  }
  hcclResult_t r = hccl_p2p_run(comm, p, k);
  free(p);
  return r;
}

static hcclResult_t gen_reducescatter(hcclComm_t comm, const hccl_op_t *op) {
  const int n = comm->nranks, me = comm->rank;
  const size_t es = hccl_dtype_size(op->dtype);
  const size_t chunk = GEN_CHUNK / es;
  const char *send = op->sendbuff;
  hcclResult_t r = hcclSuccess;
  char *tmp = malloc(chunk * es * (size_t)n);
  hccl_p2p_t *p = calloc((size_t)(2 * n), sizeof *p);
  const void **srcs = calloc((size_t)n, sizeof *srcs);
  if (!tmp || !p || !srcs) { r = hccl_err(hcclSystemError, "out of memory"); goto out; }
  for (size_t pos = 0; pos < op->count; pos += chunk) {
    size_t c = op->count - pos < chunk ? op->count - pos : chunk;
    int k = 0;
    for (int i = 0; i < n; i++) {
      if (i == me) { srcs[i] = send + ((size_t)me * op->count + pos) * es; continue; }
      srcs[i] = tmp + (size_t)i * chunk * es;
      p[k++] = (hccl_p2p_t){.is_send = 1, .peer = i, .buf = (char *)send + ((size_t)i * op->count + pos) * es, .bytes = c * es};
      p[k++] = (hccl_p2p_t){.is_send = 0, .peer = i, .buf = (char *)srcs[i], .bytes = c * es};
    }
    if ((r = hccl_p2p_run(comm, p, k)) != hcclSuccess) goto out;
    char *dst = (char *)op->recvbuff + pos * es;
    hccl_reduce_n(dst, srcs, n, c, op->dtype, op->redop);
    if (op->redop == hcclAvg) hccl_avg_div(dst, c, op->dtype, n);
  }
out:
  free(tmp); free(p); free(srcs);
  return r;
}

static hcclResult_t gen_alltoall(hcclComm_t comm, const hccl_op_t *op) {
  const int n = comm->nranks, me = comm->rank;
  const size_t block = op->count * hccl_dtype_size(op->dtype);
  const char *send = op->sendbuff;
  char *recv = op->recvbuff, *copy = NULL;
  if ((const char *)send < recv + (size_t)n * block && recv < send + (size_t)n * block) {
    if (!(copy = malloc(block * (size_t)n))) return hccl_err(hcclSystemError, "out of memory");
    memcpy(copy, send, block * (size_t)n);
    send = copy;
  }
  hccl_p2p_t *p = calloc((size_t)(2 * n), sizeof *p);
  if (!p) { free(copy); return hccl_err(hcclSystemError, "out of memory"); }
  memmove(recv + (size_t)me * block, send + (size_t)me * block, block);
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (i == me) continue;
    p[k++] = (hccl_p2p_t){.is_send = 1, .peer = i, .buf = (char *)send + (size_t)i * block, .bytes = block};
    p[k++] = (hccl_p2p_t){.is_send = 0, .peer = i, .buf = recv + (size_t)i * block, .bytes = block};
  }
  hcclResult_t r = hccl_p2p_run(comm, p, k);
  free(p);
  free(copy);
  return r;
}

hcclResult_t hccl_generic_collective(hcclComm_t comm, const hccl_op_t *op) {
  const size_t bytes = op->count * hccl_dtype_size(op->dtype);
  hcclResult_t r;
  switch (op->kind) {
    case HCCL_K_BROADCAST: return gen_broadcast(comm, op->sendbuff, op->recvbuff, bytes, op->root);
    case HCCL_K_REDUCE: return gen_reduce(comm, op, op->root);
    case HCCL_K_ALLREDUCE:
      if ((r = gen_reduce(comm, op, 0)) != hcclSuccess) return r;
      return gen_broadcast(comm, op->recvbuff, op->recvbuff, bytes, 0);
    case HCCL_K_ALLGATHER: return gen_allgather(comm, op);
    case HCCL_K_REDUCESCATTER: return gen_reducescatter(comm, op);
    case HCCL_K_ALLTOALL: return gen_alltoall(comm, op);
  }
  return hccl_err(hcclInternalError, "no generic algorithm for %s", hccl_kind_name(op->kind));
}
