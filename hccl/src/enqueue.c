/* From an API call to execution: argument checks, the per-communicator
 * ticket order (operations run in issue order whether they run on the
 * caller's thread or on a card's queue), and stream enqueue. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/memory.h"
#include "hpu/status.h"
#include "hpu/status_page.h"
#include "hpu/stream.h"
#include "hpu/trace.h"
#include "hpu/clock.h"
#include "internal.h"

size_t hccl_dtype_size(hcclDataType_t dt) {
  switch (dt) {
    case hcclInt8: case hcclUint8: return 1;
    case hcclFloat16: case hcclBfloat16: return 2;
    case hcclInt32: case hcclUint32: case hcclFloat32: return 4;
    case hcclInt64: case hcclUint64: case hcclFloat64: return 8;
    default: return 0;
  }
}

const char *hccl_kind_name(int kind) {
  switch (kind) {
    case HCCL_K_ALLREDUCE: return "AllReduce";
    case HCCL_K_BROADCAST: return "Broadcast";
    case HCCL_K_REDUCE: return "Reduce";
    case HCCL_K_ALLGATHER: return "AllGather";
    case HCCL_K_REDUCESCATTER: return "ReduceScatter";
    case HCCL_K_ALLTOALL: return "AlltoAll";
    case HCCL_K_BARRIER: return "Barrier";
    case HCCL_K_SEND: return "Send";
    case HCCL_K_RECV: return "Recv";
  }
  return "?";
}

static hcclResult_t validate(hcclComm_t comm, const hccl_op_t *op) {
  const char *name = hccl_kind_name(op->kind);
  if (op->kind == HCCL_K_BARRIER) return hcclSuccess;
  if (hccl_dtype_size(op->dtype) == 0) return hccl_err(hcclInvalidArgument, "hccl%s: invalid data type %d", name, (int)op->dtype);
  if ((op->kind == HCCL_K_ALLREDUCE || op->kind == HCCL_K_REDUCE || op->kind == HCCL_K_REDUCESCATTER) &&
      ((int)op->redop < 0 || op->redop >= hcclNumOps))
    return hccl_err(hcclInvalidArgument, "hccl%s: invalid reduction op %d", name, (int)op->redop);
  if ((op->kind == HCCL_K_BROADCAST || op->kind == HCCL_K_REDUCE) && (op->root < 0 || op->root >= comm->nranks))
    return hccl_err(hcclInvalidArgument, "hccl%s: root %d not in [0, %d)", name, op->root, comm->nranks);
  if ((op->kind == HCCL_K_SEND || op->kind == HCCL_K_RECV) && (op->root < 0 || op->root >= comm->nranks))
    return hccl_err(hcclInvalidArgument, "hccl%s: peer %d not in [0, %d)", name, op->root, comm->nranks);
  if (op->count == 0) return hcclSuccess;
  if ((op->count > (SIZE_MAX / 16) / (size_t)comm->nranks))
    return hccl_err(hcclInvalidArgument, "hccl%s: count %zu too large", name, op->count);
  bool need_send = op->kind != HCCL_K_RECV && !(op->kind == HCCL_K_BROADCAST && op->root != comm->rank);
  bool need_recv = op->kind != HCCL_K_SEND && !(op->kind == HCCL_K_REDUCE && op->root != comm->rank);
  if (need_send && !op->sendbuff) return hccl_err(hcclInvalidArgument, "hccl%s: sendbuff is NULL", name);
  if (need_recv && !op->recvbuff) return hccl_err(hcclInvalidArgument, "hccl%s: recvbuff is NULL", name);
  return hcclSuccess;
}

/* A local peer marked the communicator failed (its abort word). */
static hcclResult_t peer_failure(hcclComm_t comm) {
  int who = comm->shm.hdr ? atomic_load(&comm->shm.hdr->abort) : 0;
  if (!who) return hcclSuccess;
  return hccl_err(hcclRemoteError, "rank %d failed or aborted the communicator", who - 1);
}

/* The card an op's traffic belongs to, as count_bytes decides it. */
static int op_device(hcclComm_t comm, const hccl_op_t *op) {
  int device = comm->device;
  if (device < 0 && hpu_pointer_get_device(op->recvbuff, &device) == HPU_SUCCESS && device < 0)
    hpu_pointer_get_device(op->sendbuff, &device);
  return device;
}

/* Counts the ops' bytes (count x dtype size) on the card's status page,
 * for hl-smi and the metrics exporter. Before running: a send to oneself
 * marks its matching receive consumed. Without a stream (the process
 * group runs blocking collectives on the calling thread) the card is the
 * one the buffers live on; host buffers are no card's traffic. */
static void count_bytes(hcclComm_t comm, const hccl_op_t *ops, int nops) {
  static const int slot[] = {
      [HCCL_K_ALLREDUCE] = HPU_COLL_ALLREDUCE, [HCCL_K_BROADCAST] = HPU_COLL_BROADCAST,
      [HCCL_K_REDUCE] = HPU_COLL_REDUCE, [HCCL_K_ALLGATHER] = HPU_COLL_ALLGATHER,
      [HCCL_K_REDUCESCATTER] = HPU_COLL_REDUCE_SCATTER, [HCCL_K_ALLTOALL] = HPU_COLL_ALLTOALL,
      [HCCL_K_BARRIER] = -1, [HCCL_K_SEND] = HPU_COLL_SEND, [HCCL_K_RECV] = HPU_COLL_RECV};
  for (int i = 0; i < nops; i++) {
    if (ops[i].kind <= 0 || ops[i].kind > HCCL_K_RECV) continue;
    int device = op_device(comm, &ops[i]);
    hpu_status_page_collective(device, slot[ops[i].kind], ops[i].count * hccl_dtype_size(ops[i].dtype));
  }
}

/* One HCCL-lane event per op of a ticket, all spanning the ticket's run
 * (a group's ops run together), for a recording profiler. */
static void trace_ops(hcclComm_t comm, const hccl_op_t *ops, int nops, uint64_t correlation,
                      uint64_t t0, uint64_t t1) {
  for (int i = 0; i < nops; i++) {
    hpu_trace_event_t ev = {.start_ns = t0, .end_ns = t1, .correlation = correlation,
                            .device = op_device(comm, &ops[i]), .engine = HPU_ENGINE_HCCL,
                            .bytes = ops[i].count * hccl_dtype_size(ops[i].dtype)};
    snprintf(ev.name, sizeof ev.name, "hccl%s", hccl_kind_name(ops[i].kind));
    hpu_trace_record(&ev);
  }
}

/* Runs one ticket: waits for the earlier tickets, runs, marks it done. An
 * error fails the communicator on every rank. `correlation` is the host op
 * that issued it, for the trace. */
static hcclResult_t execute(hcclComm_t comm, uint64_t ticket, hccl_op_t *ops, int nops, bool run,
                            uint64_t correlation) {
  pthread_mutex_lock(&comm->lock);
  while (comm->done_ticket != ticket) pthread_cond_wait(&comm->cond, &comm->lock);
  pthread_mutex_unlock(&comm->lock);
  hcclResult_t r = hcclSuccess;
  if (run) {
    if (atomic_load(&comm->failed) || atomic_load(&comm->aborted)) {
      r = hccl_err(comm->async_error != hcclSuccess ? comm->async_error : hcclRemoteError,
                   "communicator already failed: %s", comm->async_msg);
    } else if ((r = peer_failure(comm)) == hcclSuccess) {
      count_bytes(comm, ops, nops);
      int tracing = hpu_trace_active();
      uint64_t t0 = tracing ? hpu_now_ns() : 0;
      r = hccl_run_ops(comm, ops, nops);
      if (tracing && r == hcclSuccess) trace_ops(comm, ops, nops, correlation, t0, hpu_now_ns());
      /* A peer that failed meanwhile may have left data we used: report it. */
      if (r == hcclSuccess) r = peer_failure(comm);
      if (r != hcclSuccess) hccl_comm_fail(comm, r, hccl_thread_error());
    }
  }
  pthread_mutex_lock(&comm->lock);
  comm->done_ticket++;
  pthread_cond_broadcast(&comm->cond);
  pthread_mutex_unlock(&comm->lock);
  return r;
}

typedef struct hccl_task {
  hcclComm_t comm;
  uint64_t ticket;
  uint64_t correlation; /* the issuing host op, for the trace */
  int nops;
  hccl_op_t ops[];
} hccl_task_t;

static hpu_status_t task_run(void *arg) {
  hccl_task_t *t = arg;
  hcclResult_t r = execute(t->comm, t->ticket, t->ops, t->nops, true, t->correlation);
  if (r != hcclSuccess) return hpu_error(HPU_ERROR_SYSTEM, "hccl: %s", hccl_thread_error());
  return HPU_SUCCESS;
}

static void task_release(void *arg) {
  hccl_task_t *t = arg;
  hccl_comm_unref(t->comm);
  free(t);
}

hcclResult_t hccl_launch(hcclComm_t comm, hccl_op_t *ops, int nops, hcclStream_t stream) {
  if (atomic_load(&comm->failed) || atomic_load(&comm->aborted))
    return hccl_err(comm->async_error != hcclSuccess ? comm->async_error : hcclRemoteError,
                    "communicator already failed: %s", comm->async_msg);
  pthread_mutex_lock(&comm->lock);
  uint64_t ticket = comm->issue_ticket++;
  comm->refs++;
  pthread_mutex_unlock(&comm->lock);
  if (!stream) {
    /* As CUDA's legacy default stream: device buffers wait for their cards. */
    hcclResult_t pre = hcclSuccess;
    for (int i = 0; i < nops && pre == hcclSuccess; i++)
      pre = hccl_sync_device_buffers(ops[i].sendbuff, ops[i].recvbuff);
    if (pre != hcclSuccess) hccl_comm_fail(comm, pre, hccl_thread_error());
    hcclResult_t r = execute(comm, ticket, ops, nops, pre == hcclSuccess, hpu_trace_correlation());
    if (pre != hcclSuccess) r = pre;
    hccl_comm_unref(comm);
    return r;
  }
  hpu_stream_t *s = (hpu_stream_t *)stream;
  if (comm->device < 0) comm->device = s->device;
  hccl_task_t *t = malloc(sizeof *t + sizeof(hccl_op_t) * (size_t)nops);
  if (!t) {
    execute(comm, ticket, ops, nops, false, 0);
    hccl_comm_unref(comm);
    return hccl_err(hcclSystemError, "out of memory");
  }
  t->comm = comm;
  t->ticket = ticket;
  t->correlation = hpu_trace_active() ? hpu_trace_correlation() : 0;
  t->nops = nops;
  memcpy(t->ops, ops, sizeof(hccl_op_t) * (size_t)nops);
  hpu_status_t st = hpu_stream_enqueue(*s, task_run, t, task_release);
  if (st != HPU_SUCCESS) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", hpu_last_error());
    execute(comm, ticket, ops, nops, false, 0);
    task_release(t);
    return hccl_err(hcclUnhandledCudaError, "enqueue on card %d failed: %s", s->device, msg);
  }
  return hcclSuccess;
}

hcclResult_t hccl_submit(hcclComm_t comm, const hccl_op_t *op, hcclStream_t stream) {
  hccl_clear_error();
  hcclResult_t r = hccl_comm_check(comm);
  if (r != hcclSuccess) return r;
  if ((r = validate(comm, op)) != hcclSuccess) return r;
  if (op->count == 0 && op->kind != HCCL_K_BARRIER) return hcclSuccess;
  if (hccl_in_group()) return hccl_group_add(comm, op, stream);
  hccl_op_t copy = *op;
  return hccl_launch(comm, &copy, 1, stream);
}

/* ---- the public entry points ---- */

hcclResult_t hcclAllReduce(const void *sendbuff, void *recvbuff, size_t count, hcclDataType_t datatype,
                           hcclRedOp_t op, hcclComm_t comm, hcclStream_t stream) {
  hccl_op_t o = {HCCL_K_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0};
  return hccl_submit(comm, &o, stream);
}

hcclResult_t hcclBroadcast(const void *sendbuff, void *recvbuff, size_t count, hcclDataType_t datatype, int root,
                           hcclComm_t comm, hcclStream_t stream) {
  hccl_op_t o = {HCCL_K_BROADCAST, sendbuff, recvbuff, count, datatype, hcclSum, root};
  return hccl_submit(comm, &o, stream);
}

hcclResult_t hcclBcast(void *buff, size_t count, hcclDataType_t datatype, int root, hcclComm_t comm,
                       hcclStream_t stream) {
  return hcclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

hcclResult_t hcclReduce(const void *sendbuff, void *recvbuff, size_t count, hcclDataType_t datatype, hcclRedOp_t op,
                        int root, hcclComm_t comm, hcclStream_t stream) {
  hccl_op_t o = {HCCL_K_REDUCE, sendbuff, recvbuff, count, datatype, op, root};
  return hccl_submit(comm, &o, stream);
}

hcclResult_t hcclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, hcclDataType_t datatype,
                           hcclComm_t comm, hcclStream_t stream) {
  hccl_op_t o = {HCCL_K_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, hcclSum, 0};
  return hccl_submit(comm, &o, stream);
}

hcclResult_t hcclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, hcclDataType_t datatype,
                               hcclRedOp_t op, hcclComm_t comm, hcclStream_t stream) {
  hccl_op_t o = {HCCL_K_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0};
  return hccl_submit(comm, &o, stream);
}

hcclResult_t hcclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, hcclDataType_t datatype,
                          hcclComm_t comm, hcclStream_t stream) {
  hccl_op_t o = {HCCL_K_ALLTOALL, sendbuff, recvbuff, count, datatype, hcclSum, 0};
  return hccl_submit(comm, &o, stream);
}

hcclResult_t hcclSend(const void *sendbuff, size_t count, hcclDataType_t datatype, int peer, hcclComm_t comm,
                      hcclStream_t stream) {
  hccl_op_t o = {HCCL_K_SEND, sendbuff, NULL, count, datatype, hcclSum, peer};
  return hccl_submit(comm, &o, stream);
}

hcclResult_t hcclRecv(void *recvbuff, size_t count, hcclDataType_t datatype, int peer, hcclComm_t comm,
                      hcclStream_t stream) {
  hccl_op_t o = {HCCL_K_RECV, NULL, recvbuff, count, datatype, hcclSum, peer};
  return hccl_submit(comm, &o, stream);
}

hcclResult_t hcclBarrier(hcclComm_t comm, hcclStream_t stream) {
  hccl_op_t o = {HCCL_K_BARRIER, NULL, NULL, 0, hcclUint8, hcclSum, 0};
  return hccl_submit(comm, &o, stream);
}
