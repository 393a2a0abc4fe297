/* HCCL collectives, exact results: run under mpirun (any number of ranks)
 * or, for the two-host test, with HCCL_TEST_RANK / HCCL_TEST_NRANKS and
 * HCCL_COMM_ID in the environment (no MPI then).
 *
 * Every collective x data type x reduction op x in place / out of place x
 * sizes from 0 and 1 element up; group calls, send/recv rings, split
 * communicators, device buffers on a card's stream. HCCL_TEST_LEVEL=quick
 * trims the size sweep (used at 8 oversubscribed ranks). */
#include <CUnit/Basic.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hccl.h"
#include "hccl_test_util.h"
#include "hpu/memory.h"
#include "hpu/stream.h"
#include "hpu/device.h"

static int g_rank, g_size, g_use_mpi, g_quick;
static hcclComm_t g_comm;
static long g_checks;

#define CHECK_HCCL(call)                                                                        \
  do {                                                                                          \
    hcclResult_t r_ = (call);                                                                   \
    if (r_ != hcclSuccess) {                                                                    \
      fprintf(stderr, "[rank %d] %s:%d %s -> %s: %s\n", g_rank, __FILE__, __LINE__, #call,      \
              hcclGetErrorString(r_), hcclGetLastError(g_comm));                                \
    }                                                                                           \
    CU_ASSERT_EQUAL_FATAL(r_, hcclSuccess);                                                     \
  } while (0)

static void report_wrong(const char *what, hcclDataType_t dt, int op, size_t count, int inplace, size_t wrong) {
  g_checks++;
  if (wrong)
    fprintf(stderr, "[rank %d] %s %s %s count=%zu %s: %zu wrong\n", g_rank, what, ht_type_name(dt),
            op >= 0 ? ht_op_name((hcclRedOp_t)op) : "-", count, inplace ? "in-place" : "out-of-place", wrong);
  CU_ASSERT_EQUAL(wrong, 0);
}

static size_t g_counts_full[] = {0, 1, 2, 7, 64, 1000, 4099, 65536 + 3};
static size_t g_counts_quick[] = {0, 1, 7, 1000, 4099};
static size_t *counts(size_t *n) {
  if (g_quick) { *n = sizeof g_counts_quick / sizeof g_counts_quick[0]; return g_counts_quick; }
  *n = sizeof g_counts_full / sizeof g_counts_full[0];
  return g_counts_full;
}

static void *xmalloc(size_t n) {
  void *p = calloc(1, n ? n : 1);
  if (!p) abort();
  return p;
}

/* ---------------- allreduce ---------------- */
static void do_allreduce(hcclComm_t comm, int rank, int nranks, hcclDataType_t dt, hcclRedOp_t op, size_t count,
                         int inplace) {
  size_t es = ht_size(dt);
  char *send = xmalloc(count * es), *recv = xmalloc(count * es), *want = xmalloc(count * es);
  ht_fill(send, dt, op, rank, count, 0);
  memset(recv, 0x5a, count * es);
  ht_expected(want, dt, op, nranks, count, 0);
  if (inplace) {
    CHECK_HCCL(hcclAllReduce(send, send, count, dt, op, comm, NULL));
    report_wrong("allreduce", dt, op, count, 1, ht_count_wrong(send, want, dt, count));
  } else {
    CHECK_HCCL(hcclAllReduce(send, recv, count, dt, op, comm, NULL));
    report_wrong("allreduce", dt, op, count, 0, ht_count_wrong(recv, want, dt, count));
  }
  free(send); free(recv); free(want);
}

static void test_allreduce(void) {
  size_t nc, *cs = counts(&nc);
  for (int t = 0; t < HT_NTYPES; t++)
    for (int o = 0; o < HT_NOPS; o++)
      for (int ip = 0; ip < 2; ip++)
        for (size_t c = 0; c < nc; c++) do_allreduce(g_comm, g_rank, g_size, ht_all_types[t], ht_all_ops[o], cs[c], ip);
}

static void test_allreduce_large(void) {
  /* Tens of MB: float sum out of place and bf16 avg in place, plus odd sizes
   * that do not split evenly into slices and chunks. */
  size_t big = g_quick ? (4u << 20) : (8u << 20);   /* elements: 16/32 MB of float */
  do_allreduce(g_comm, g_rank, g_size, hcclFloat32, hcclSum, big, 0);
  do_allreduce(g_comm, g_rank, g_size, hcclBfloat16, hcclAvg, big / 2 + 17, 1);
  do_allreduce(g_comm, g_rank, g_size, hcclInt64, hcclMax, (1u << 20) + 5, 0);
  do_allreduce(g_comm, g_rank, g_size, hcclUint8, hcclProd, (3u << 20) + 1, 1);
}

/* ---------------- broadcast ---------------- */
static void test_broadcast(void) {
  size_t nc, *cs = counts(&nc);
  int roots[2] = {0, g_size - 1};
  for (int t = 0; t < HT_NTYPES; t++)
    for (int ri = 0; ri < 2; ri++)
      for (int ip = 0; ip < 2; ip++)
        for (size_t c = 0; c < nc; c++) {
          hcclDataType_t dt = ht_all_types[t];
          size_t count = cs[c], es = ht_size(dt);
          int root = roots[ri];
          char *send = xmalloc(count * es), *recv = xmalloc(count * es), *want = xmalloc(count * es);
          ht_fill(want, dt, hcclSum, root + 11, count, 0);
          if (g_rank == root) memcpy(send, want, count * es);
          else memset(send, 0x33, count * es);
          memset(recv, 0x5a, count * es);
          char *out = ip ? send : recv;
          CHECK_HCCL(hcclBroadcast(send, out, count, dt, root, g_comm, NULL));
          report_wrong("broadcast", dt, -1, count, ip, ht_count_wrong(out, want, dt, count));
          free(send); free(recv); free(want);
        }
  /* hcclBcast (in place) with a large buffer */
  size_t count = g_quick ? (1u << 20) : (5u << 20) + 3;
  char *b = xmalloc(count * 4), *want = xmalloc(count * 4);
  ht_fill(want, hcclInt32, hcclSum, 3, count, 0);
  if (g_rank == 1 % g_size) memcpy(b, want, count * 4); else memset(b, 0, count * 4);
  CHECK_HCCL(hcclBcast(b, count, hcclInt32, 1 % g_size, g_comm, NULL));
  report_wrong("bcast", hcclInt32, -1, count, 1, ht_count_wrong(b, want, hcclInt32, count));
  free(b); free(want);
}

/* ---------------- reduce ---------------- */
static void test_reduce(void) {
  size_t nc, *cs = counts(&nc);
  int roots[2] = {0, g_size - 1};
  for (int t = 0; t < HT_NTYPES; t++)
    for (int o = 0; o < HT_NOPS; o++)
      for (int ri = 0; ri < 2; ri++)
        for (int ip = 0; ip < 2; ip++)
          for (size_t c = 0; c < nc; c++) {
            if (c % 2 != (size_t)(ri ^ ip) && cs[c] > 1) continue;   /* half the matrix is plenty */
            hcclDataType_t dt = ht_all_types[t];
            hcclRedOp_t op = ht_all_ops[o];
            size_t count = cs[c], es = ht_size(dt);
            int root = roots[ri];
            char *send = xmalloc(count * es), *recv = xmalloc(count * es), *want = xmalloc(count * es);
            ht_fill(send, dt, op, g_rank, count, 0);
            memset(recv, 0x5a, count * es);
            ht_expected(want, dt, op, g_size, count, 0);
            char *out = ip ? send : recv;
            CHECK_HCCL(hcclReduce(send, out, count, dt, op, root, g_comm, NULL));
            if (g_rank == root) report_wrong("reduce", dt, op, count, ip, ht_count_wrong(out, want, dt, count));
            free(send); free(recv); free(want);
          }
  size_t count = (3u << 20) + 1;
  float *s = xmalloc(count * 4), *w = xmalloc(count * 4), *o = xmalloc(count * 4);
  ht_fill(s, hcclFloat32, hcclSum, g_rank, count, 0);
  ht_expected(w, hcclFloat32, hcclSum, g_size, count, 0);
  CHECK_HCCL(hcclReduce(s, o, count, hcclFloat32, hcclSum, g_size / 2, g_comm, NULL));
  if (g_rank == g_size / 2) report_wrong("reduce", hcclFloat32, hcclSum, count, 0, ht_count_wrong(o, w, hcclFloat32, count));
  free(s); free(w); free(o);
}

/* ---------------- allgather ---------------- */
static void test_allgather(void) {
  size_t nc, *cs = counts(&nc);
  for (int t = 0; t < HT_NTYPES; t++)
    for (int ip = 0; ip < 2; ip++)
      for (size_t c = 0; c < nc + 1; c++) {
        hcclDataType_t dt = ht_all_types[t];
        size_t count = c < nc ? cs[c] : (t == 0 ? (3u << 20) + 5 : 0), es = ht_size(dt);
        if (c == nc && count == 0) continue;
        char *recv = xmalloc(count * es * (size_t)g_size), *want = xmalloc(count * es * (size_t)g_size);
        char *send = ip ? recv + (size_t)g_rank * count * es : xmalloc(count * es);
        memset(recv, 0x5a, count * es * (size_t)g_size);
        ht_fill(send, dt, hcclSum, g_rank, count, 0);
        for (int r = 0; r < g_size; r++) ht_fill(want + (size_t)r * count * es, dt, hcclSum, r, count, 0);
        CHECK_HCCL(hcclAllGather(send, recv, count, dt, g_comm, NULL));
        report_wrong("allgather", dt, -1, count, ip, ht_count_wrong(recv, want, dt, count * (size_t)g_size));
        if (!ip) free(send);
        free(recv); free(want);
      }
}

/* ---------------- reducescatter ---------------- */
static void test_reducescatter(void) {
  size_t nc, *cs = counts(&nc);
  for (int t = 0; t < HT_NTYPES; t++)
    for (int o = 0; o < HT_NOPS; o++)
      for (int ip = 0; ip < 2; ip++)
        for (size_t c = 0; c < nc; c++) {
          if (c % 2 != (size_t)ip && cs[c] > 1) continue;
          hcclDataType_t dt = ht_all_types[t];
          hcclRedOp_t op = ht_all_ops[o];
          size_t count = cs[c], es = ht_size(dt), total = count * (size_t)g_size;
          char *send = xmalloc(total * es), *recv = xmalloc(count * es), *want = xmalloc(count * es);
          ht_fill(send, dt, op, g_rank, total, 0);
          ht_expected(want, dt, op, g_size, count, (size_t)g_rank * count);
          memset(recv, 0x5a, count * es);
          char *out = ip ? send + (size_t)g_rank * count * es : recv;
          CHECK_HCCL(hcclReduceScatter(send, out, count, dt, op, g_comm, NULL));
          report_wrong("reducescatter", dt, op, count, ip, ht_count_wrong(out, want, dt, count));
          free(send); free(recv); free(want);
        }
  size_t count = (2u << 20) + 7;
  size_t total = count * (size_t)g_size;
  float *s = xmalloc(total * 4), *w = xmalloc(count * 4), *o = xmalloc(count * 4);
  ht_fill(s, hcclFloat32, hcclSum, g_rank, total, 0);
  ht_expected(w, hcclFloat32, hcclSum, g_size, count, (size_t)g_rank * count);
  CHECK_HCCL(hcclReduceScatter(s, o, count, hcclFloat32, hcclSum, g_comm, NULL));
  report_wrong("reducescatter", hcclFloat32, hcclSum, count, 0, ht_count_wrong(o, w, hcclFloat32, count));
  free(s); free(w); free(o);
}

/* ---------------- alltoall ---------------- */
static void alltoall_fill(void *buf, hcclDataType_t dt, int from, int to, size_t count) {
  ht_fill(buf, dt, hcclSum, from * 31 + to, count, (size_t)to);
}

static void test_alltoall(void) {
  size_t nc, *cs = counts(&nc);
  for (int t = 0; t < HT_NTYPES; t++)
    for (int ip = 0; ip < 2; ip++)
      for (size_t c = 0; c < nc; c++) {
        hcclDataType_t dt = ht_all_types[t];
        size_t count = cs[c], es = ht_size(dt), block = count * es;
        char *send = xmalloc(block * (size_t)g_size), *recv = xmalloc(block * (size_t)g_size),
             *want = xmalloc(block * (size_t)g_size);
        for (int j = 0; j < g_size; j++) {
          alltoall_fill(send + (size_t)j * block, dt, g_rank, j, count);
          alltoall_fill(want + (size_t)j * block, dt, j, g_rank, count);
        }
        char *out = ip ? send : recv;
        CHECK_HCCL(hcclAlltoAll(send, out, count, dt, g_comm, NULL));
        report_wrong("alltoall", dt, -1, count, ip, ht_count_wrong(out, want, dt, count * (size_t)g_size));
        free(send); free(recv); free(want);
      }
}

/* ---------------- group, send/recv ---------------- */
static void test_sendrecv_ring(void) {
  size_t sizes[] = {1, 100, 65536, (1u << 20) + 3, g_quick ? 0 : (5u << 20) + 1};
  int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t count = sizes[s];
    if (!count) continue;
    int32_t *out = xmalloc(count * 4), *in = xmalloc(count * 4), *want = xmalloc(count * 4);
    ht_fill(out, hcclInt32, hcclSum, g_rank, count, 0);
    ht_fill(want, hcclInt32, hcclSum, prev, count, 0);
    memset(in, 0, count * 4);
    CHECK_HCCL(hcclGroupStart());
    CHECK_HCCL(hcclSend(out, count, hcclInt32, next, g_comm, NULL));
    CHECK_HCCL(hcclRecv(in, count, hcclInt32, prev, g_comm, NULL));
    CHECK_HCCL(hcclGroupEnd());
    report_wrong("send/recv ring", hcclInt32, -1, count, 0, ht_count_wrong(in, want, hcclInt32, count));
    /* the other direction, receive posted first */
    memset(in, 0, count * 4);
    ht_fill(want, hcclInt32, hcclSum, next, count, 0);
    CHECK_HCCL(hcclGroupStart());
    CHECK_HCCL(hcclRecv(in, count, hcclInt32, next, g_comm, NULL));
    CHECK_HCCL(hcclSend(out, count, hcclInt32, prev, g_comm, NULL));
    CHECK_HCCL(hcclGroupEnd());
    report_wrong("send/recv ring reverse", hcclInt32, -1, count, 0, ht_count_wrong(in, want, hcclInt32, count));
    free(out); free(in); free(want);
  }
  /* Unpaired blocking send/recv between 0 and 1 (small: fits the mailbox). */
  if (g_size >= 2 && g_rank < 2) {
    double v = g_rank == 0 ? 3.5 : 0;
    if (g_rank == 0) CHECK_HCCL(hcclSend(&v, 1, hcclDouble, 1, g_comm, NULL));
    else CHECK_HCCL(hcclRecv(&v, 1, hcclDouble, 0, g_comm, NULL));
    CU_ASSERT_EQUAL(v, 3.5);
  }
  /* Send/recv to self in a group. */
  int64_t a = 42 + g_rank, b = 0;
  CHECK_HCCL(hcclGroupStart());
  CHECK_HCCL(hcclSend(&a, 1, hcclInt64, g_rank, g_comm, NULL));
  CHECK_HCCL(hcclRecv(&b, 1, hcclInt64, g_rank, g_comm, NULL));
  CHECK_HCCL(hcclGroupEnd());
  CU_ASSERT_EQUAL(b, a);
}

static void test_group_alltoall_p2p(void) {
  /* alltoall written as grouped sends and receives, as PyTorch does for
   * all_to_all_single with uneven splits. */
  size_t count = 3000;
  char *send = xmalloc(count * 4 * (size_t)g_size), *recv = xmalloc(count * 4 * (size_t)g_size),
       *want = xmalloc(count * 4 * (size_t)g_size);
  for (int j = 0; j < g_size; j++) {
    alltoall_fill(send + (size_t)j * count * 4, hcclFloat32, g_rank, j, count);
    alltoall_fill(want + (size_t)j * count * 4, hcclFloat32, j, g_rank, count);
  }
  CHECK_HCCL(hcclGroupStart());
  for (int j = 0; j < g_size; j++) {
    CHECK_HCCL(hcclSend(send + (size_t)j * count * 4, count, hcclFloat32, j, g_comm, NULL));
    CHECK_HCCL(hcclRecv(recv + (size_t)j * count * 4, count, hcclFloat32, j, g_comm, NULL));
  }
  CHECK_HCCL(hcclGroupEnd());
  report_wrong("grouped alltoall", hcclFloat32, -1, count, 0, ht_count_wrong(recv, want, hcclFloat32, count * (size_t)g_size));
  free(send); free(recv); free(want);
}

static void test_group_collectives(void) {
  /* Several collectives in one group, then a barrier. */
  enum { K = 5 };
  size_t count = 777;
  float *in[K], *out[K], *want = xmalloc(count * 4);
  ht_expected(want, hcclFloat32, hcclSum, g_size, count, 0);
  CHECK_HCCL(hcclGroupStart());
  for (int k = 0; k < K; k++) {
    in[k] = xmalloc(count * 4);
    out[k] = xmalloc(count * 4);
    ht_fill(in[k], hcclFloat32, hcclSum, g_rank, count, 0);
    CHECK_HCCL(hcclAllReduce(in[k], out[k], count, hcclFloat32, hcclSum, g_comm, NULL));
  }
  CHECK_HCCL(hcclGroupEnd());
  for (int k = 0; k < K; k++) {
    report_wrong("grouped allreduce", hcclFloat32, hcclSum, count, 0, ht_count_wrong(out[k], want, hcclFloat32, count));
    free(in[k]); free(out[k]);
  }
  free(want);
  CHECK_HCCL(hcclBarrier(g_comm, NULL));
  /* nested groups */
  CHECK_HCCL(hcclGroupStart());
  CHECK_HCCL(hcclGroupStart());
  CHECK_HCCL(hcclBarrier(g_comm, NULL));
  CHECK_HCCL(hcclGroupEnd());
  CHECK_HCCL(hcclGroupEnd());
}

/* ---------------- split ---------------- */
static void test_split(void) {
  /* Two colors, keys reversing the order; and one rank left out. */
  hcclComm_t sub = NULL;
  int color = g_rank % 2, key = -g_rank;
  CHECK_HCCL(hcclCommSplit(g_comm, color, key, &sub, NULL));
  CU_ASSERT_PTR_NOT_NULL_FATAL(sub);
  int n = 0, r = -1;
  CHECK_HCCL(hcclCommCount(sub, &n));
  CHECK_HCCL(hcclCommUserRank(sub, &r));
  int expect_n = (g_size + 1 - color) / 2;
  CU_ASSERT_EQUAL(n, expect_n);
  /* key = -rank: the highest parent rank of the color gets rank 0 */
  int higher = 0;
  for (int q = g_rank + 2; q < g_size; q += 2) higher++;
  CU_ASSERT_EQUAL(r, higher);
  for (int t = 0; t < HT_NTYPES; t += 3)
    for (int o = 0; o < HT_NOPS; o++) do_allreduce(sub, r, n, ht_all_types[t], ht_all_ops[o], 1001, o & 1);
  /* and allgather of parent ranks in sub-rank order */
  int32_t mine = g_rank, *all = xmalloc(sizeof(int32_t) * (size_t)n);
  CHECK_HCCL(hcclAllGather(&mine, all, 1, hcclInt32, sub, NULL));
  for (int i = 0; i < n; i++) CU_ASSERT_EQUAL(all[i], (g_size - 1 - ((g_size - 1 - color) % 2)) - 2 * i);
  free(all);
  CHECK_HCCL(hcclCommDestroy(sub));

  hcclComm_t sub2 = NULL;
  int c2 = g_rank == 0 ? HCCL_SPLIT_NOCOLOR : 7;
  CHECK_HCCL(hcclCommSplit(g_comm, c2, g_rank, &sub2, NULL));
  if (g_rank == 0) {
    CU_ASSERT_PTR_NULL(sub2);
  } else {
    CU_ASSERT_PTR_NOT_NULL_FATAL(sub2);
    int n2 = 0;
    CHECK_HCCL(hcclCommCount(sub2, &n2));
    CU_ASSERT_EQUAL(n2, g_size - 1);
    do_allreduce(sub2, g_rank - 1, n2, hcclFloat32, hcclSum, 100000, 0);
    CHECK_HCCL(hcclCommDestroy(sub2));
  }
}

/* ---------------- API basics ---------------- */
static void test_api(void) {
  int v = 0;
  CHECK_HCCL(hcclGetVersion(&v));
  CU_ASSERT_EQUAL(v, HCCL_VERSION_CODE);
  int n = 0, r = -1;
  CHECK_HCCL(hcclCommCount(g_comm, &n));
  CHECK_HCCL(hcclCommUserRank(g_comm, &r));
  CU_ASSERT_EQUAL(n, g_size);
  CU_ASSERT_EQUAL(r, g_rank);
  hcclResult_t ae = hcclInternalError;
  CHECK_HCCL(hcclCommGetAsyncError(g_comm, &ae));
  CU_ASSERT_EQUAL(ae, hcclSuccess);
  float x = 1;
  CU_ASSERT_EQUAL(hcclAllReduce(&x, &x, 1, hcclFloat32, hcclSum, NULL, NULL), hcclInvalidArgument);
  CU_ASSERT_EQUAL(hcclAllReduce(&x, &x, 1, (hcclDataType_t)42, hcclSum, g_comm, NULL), hcclInvalidArgument);
  CU_ASSERT_EQUAL(hcclAllReduce(&x, &x, 1, hcclFloat32, (hcclRedOp_t)9, g_comm, NULL), hcclInvalidArgument);
  CU_ASSERT_EQUAL(hcclBroadcast(&x, &x, 1, hcclFloat32, g_size, g_comm, NULL), hcclInvalidArgument);
  CU_ASSERT_EQUAL(hcclAllReduce(NULL, &x, 1, hcclFloat32, hcclSum, g_comm, NULL), hcclInvalidArgument);
  CU_ASSERT(strlen(hcclGetLastError(g_comm)) > 0);
  CU_ASSERT_STRING_EQUAL(hcclGetErrorString(hcclSuccess), "no error");
  CU_ASSERT_EQUAL(hcclGroupEnd(), hcclInvalidUsage);
  /* the communicator is still healthy after argument errors */
  do_allreduce(g_comm, g_rank, g_size, hcclFloat32, hcclSum, 5, 0);
  CHECK_HCCL(hcclBarrier(g_comm, NULL));
  int nr = 0;
  CU_ASSERT_EQUAL(hcclCommCount(NULL, &nr), hcclInvalidArgument);
}

/* ---------------- device buffers on a stream ---------------- */
static void test_device_stream(void) {
  if (hpu_init() != HPU_SUCCESS) {
    fprintf(stderr, "[rank %d] device test skipped: hpu_init: %s\n", g_rank, hpu_last_error());
    return;
  }
  hpu_stream_t st;
  CU_ASSERT_EQUAL_FATAL(hpu_stream_default(0, &st), HPU_SUCCESS);
  size_t count = (1u << 20) + 11;
  float *d = NULL, *d2 = NULL;
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, count * 4, (void **)&d), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, count * 4, (void **)&d2), HPU_SUCCESS);
  int dev = -2;
  CU_ASSERT_EQUAL(hpu_pointer_get_device(d, &dev), HPU_SUCCESS);
  CU_ASSERT_EQUAL(dev, 0);
  float *want = xmalloc(count * 4);
  ht_expected(want, hcclFloat32, hcclSum, g_size, count, 0);
  ht_fill(d, hcclFloat32, hcclSum, g_rank, count, 0);   /* the card is idle: the host may write */
  /* several collectives queued back to back, then one sync */
  CHECK_HCCL(hcclAllReduce(d, d2, count, hcclFloat32, hcclSum, g_comm, (hcclStream_t)&st));
  CHECK_HCCL(hcclAllReduce(d, d, count, hcclFloat32, hcclSum, g_comm, (hcclStream_t)&st));
  CHECK_HCCL(hcclBroadcast(d2, d2, count, hcclFloat32, 0, g_comm, (hcclStream_t)&st));
  CU_ASSERT_EQUAL(hpu_stream_synchronize(st), HPU_SUCCESS);
  report_wrong("device allreduce (stream)", hcclFloat32, hcclSum, count, 0, ht_count_wrong(d2, want, hcclFloat32, count));
  report_wrong("device allreduce in place (stream)", hcclFloat32, hcclSum, count, 1, ht_count_wrong(d, want, hcclFloat32, count));
  /* device buffers with the NULL stream (synchronous) */
  ht_fill(d, hcclFloat32, hcclSum, g_rank, count, 0);
  CHECK_HCCL(hcclAllReduce(d, d2, count, hcclFloat32, hcclSum, g_comm, NULL));
  report_wrong("device allreduce (NULL stream)", hcclFloat32, hcclSum, count, 0, ht_count_wrong(d2, want, hcclFloat32, count));
  hcclResult_t ae;
  CHECK_HCCL(hcclCommGetAsyncError(g_comm, &ae));
  CU_ASSERT_EQUAL(ae, hcclSuccess);
  hpu_free(0, d);
  hpu_free(0, d2);
  free(want);
}

/* ---------------- zero-copy: device buffers read in place by peers ---------------- */
/* Device buffers on the NULL stream: past the small-message size they take
 * the zero-copy path (peers map each other's card memory). Every dtype x op,
 * in place and not, sizes that do not slice evenly; reduce to two roots;
 * and a mixed call (rank 0 on host memory, the others on device memory)
 * that must fall back to staging. */
static void do_zc_allreduce(hcclDataType_t dt, hcclRedOp_t op, size_t count, int inplace, int host_rank) {
  size_t es = ht_size(dt);
  char *send, *recv, *want = xmalloc(count * es);
  int host = g_rank == host_rank;
  if (host) {
    send = xmalloc(count * es);
    recv = xmalloc(count * es);
  } else {
    CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, count * es, (void **)&send), HPU_SUCCESS);
    CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, count * es, (void **)&recv), HPU_SUCCESS);
  }
  ht_fill(send, dt, op, g_rank, count, 0);
  memset(recv, 0x5a, count * es);
  ht_expected(want, dt, op, g_size, count, 0);
  char *out = inplace ? send : recv;
  CHECK_HCCL(hcclAllReduce(send, out, count, dt, op, g_comm, NULL));
  report_wrong(host_rank >= 0 ? "mixed host/device allreduce" : "zero-copy allreduce", dt, op, count, inplace,
               ht_count_wrong(out, want, dt, count));
  if (host) { free(send); free(recv); } else { hpu_free(0, send); hpu_free(0, recv); }
  free(want);
}

static void test_device_zerocopy(void) {
  if (hpu_init() != HPU_SUCCESS) {
    fprintf(stderr, "[rank %d] zero-copy test skipped: hpu_init: %s\n", g_rank, hpu_last_error());
    return;
  }
  size_t counts_zc[] = {70001, 262144 + 5, (1u << 20) + 3};
  size_t ncz = g_quick ? 2 : 3;
  for (int t = 0; t < HT_NTYPES; t++)
    for (int o = 0; o < HT_NOPS; o++)
      for (int ip = 0; ip < 2; ip++)
        for (size_t c = 0; c < ncz; c++) {
          if (c == 2 && (t + o + ip) % 3) continue;   /* the largest size on a third of the matrix */
          do_zc_allreduce(ht_all_types[t], ht_all_ops[o], counts_zc[c], ip, -1);
        }
  do_zc_allreduce(hcclFloat32, hcclSum, (3u << 20) + 1, 0, 0);
  do_zc_allreduce(hcclBfloat16, hcclAvg, (1u << 20) + 9, 1, g_size - 1);
  do_zc_allreduce(hcclFloat32, hcclSum, (4u << 20) + 7, 1, -1);
  /* allgather and broadcast of device buffers, in place and not, and with
   * rank 0 on host memory (the mixed fallback) */
  for (int host_rank = -1; host_rank <= 0; host_rank++)
    for (int ip = 0; ip < 2; ip++) {
      size_t count = (1u << 18) + 3, total = count * (size_t)g_size;
      int host = g_rank == host_rank;
      float *s = NULL, *o = NULL, *w = xmalloc(total * 4);
      if (host) o = xmalloc(total * 4);
      else CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, total * 4, (void **)&o), HPU_SUCCESS);
      if (ip) s = o + (size_t)g_rank * count;
      else if (host) s = xmalloc(count * 4);
      else CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, count * 4, (void **)&s), HPU_SUCCESS);
      for (int k = 0; k < g_size; k++) ht_fill(w + (size_t)k * count, hcclFloat32, hcclSum, k, count, 0);
      memset(o, 0x5a, total * 4);
      ht_fill(s, hcclFloat32, hcclSum, g_rank, count, 0);
      CHECK_HCCL(hcclAllGather(s, o, count, hcclFloat32, g_comm, NULL));
      report_wrong(host_rank < 0 ? "zero-copy allgather" : "mixed allgather", hcclFloat32, -1, total, ip,
                   ht_count_wrong(o, w, hcclFloat32, total));
      /* broadcast from the last rank, in place on the gathered buffer */
      ht_fill(w, hcclFloat32, hcclSum, 77, total, 0);
      if (g_rank == g_size - 1) memcpy(o, w, total * 4);
      CHECK_HCCL(hcclBroadcast(o, o, total, hcclFloat32, g_size - 1, g_comm, NULL));
      report_wrong(host_rank < 0 ? "zero-copy broadcast" : "mixed broadcast", hcclFloat32, -1, total, 1,
                   ht_count_wrong(o, w, hcclFloat32, total));
      if (!ip) { if (host) free(s); else hpu_free(0, s); }
      if (host) free(o); else hpu_free(0, o);
      free(w);
    }
  /* reducescatter of device buffers, in place and not, and mixed */
  for (int host_rank = -1; host_rank <= 0; host_rank++)
    for (int ip = 0; ip < 2; ip++) {
      size_t count = (1u << 17) + 5, total = count * (size_t)g_size;
      int host = g_rank == host_rank;
      int32_t *s = NULL, *o = NULL, *w = xmalloc(total * 4);
      if (host) s = xmalloc(total * 4);
      else CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, total * 4, (void **)&s), HPU_SUCCESS);
      if (ip) o = s + (size_t)g_rank * count;
      else if (host) o = xmalloc(count * 4);
      else CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, count * 4, (void **)&o), HPU_SUCCESS);
      ht_fill(s, hcclInt32, hcclSum, g_rank, total, 0);
      ht_expected(w, hcclInt32, hcclSum, g_size, total, 0);
      if (!ip) memset(o, 0x5a, count * 4);
      CHECK_HCCL(hcclReduceScatter(s, o, count, hcclInt32, hcclSum, g_comm, NULL));
      report_wrong(host_rank < 0 ? "zero-copy reducescatter" : "mixed reducescatter", hcclInt32, hcclSum, count, ip,
                   ht_count_wrong(o, w + (size_t)g_rank * count, hcclInt32, count));
      if (!ip) { if (host) free(o); else hpu_free(0, o); }
      if (host) free(s); else hpu_free(0, s);
      free(w);
    }
  /* reduce: only the root's output is written */
  for (int ri = 0; ri < 2; ri++)
    for (int ip = 0; ip < 2; ip++) {
      int root = ri ? g_size - 1 : 0;
      size_t count = (1u << 20) + 13;
      float *s, *o, *w = xmalloc(count * 4);
      CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, count * 4, (void **)&s), HPU_SUCCESS);
      CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, count * 4, (void **)&o), HPU_SUCCESS);
      ht_fill(s, hcclFloat32, hcclMax, g_rank, count, 0);
      ht_expected(w, hcclFloat32, hcclMax, g_size, count, 0);
      float *out = ip ? s : o;
      CHECK_HCCL(hcclReduce(s, g_rank == root ? out : NULL, count, hcclFloat32, hcclMax, root, g_comm, NULL));
      if (g_rank == root) report_wrong("zero-copy reduce", hcclFloat32, hcclMax, count, ip, ht_count_wrong(out, w, hcclFloat32, count));
      hpu_free(0, s);
      hpu_free(0, o);
      free(w);
    }
}

static void test_finalize(void) {
  CHECK_HCCL(hcclCommFinalize(g_comm));
}

/* ---------------- main ---------------- */
static int env_int(const char *n, int d) {
  const char *v = getenv(n);
  return v && *v ? atoi(v) : d;
}

int main(int argc, char **argv) {
  g_rank = env_int("HCCL_TEST_RANK", -1);
  g_size = env_int("HCCL_TEST_NRANKS", -1);
  g_use_mpi = g_rank < 0;
  g_quick = getenv("HCCL_TEST_LEVEL") && strcmp(getenv("HCCL_TEST_LEVEL"), "quick") == 0;
  hcclUniqueId id;
  if (g_use_mpi) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (g_rank == 0 && hcclGetUniqueId(&id) != hcclSuccess) {
      fprintf(stderr, "hcclGetUniqueId: %s\n", hcclGetLastError(NULL));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  } else if (hcclGetUniqueId(&id) != hcclSuccess) {   /* HCCL_COMM_ID */
    fprintf(stderr, "hcclGetUniqueId: %s\n", hcclGetLastError(NULL));
    return 1;
  }
  hcclResult_t r = hcclCommInitRank(&g_comm, g_size, id, g_rank);
  if (r != hcclSuccess) {
    fprintf(stderr, "[rank %d] hcclCommInitRank: %s: %s\n", g_rank, hcclGetErrorString(r), hcclGetLastError(NULL));
    if (g_use_mpi) MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("hccl_collectives", NULL, NULL);
  CU_add_test(s, "api", test_api);
  CU_add_test(s, "allreduce", test_allreduce);
  CU_add_test(s, "allreduce_large", test_allreduce_large);
  CU_add_test(s, "broadcast", test_broadcast);
  CU_add_test(s, "reduce", test_reduce);
  CU_add_test(s, "allgather", test_allgather);
  CU_add_test(s, "reducescatter", test_reducescatter);
  CU_add_test(s, "alltoall", test_alltoall);
  CU_add_test(s, "sendrecv_ring", test_sendrecv_ring);
  CU_add_test(s, "group_alltoall_p2p", test_group_alltoall_p2p);
  CU_add_test(s, "group_collectives", test_group_collectives);
  CU_add_test(s, "split", test_split);
  if (!getenv("HCCL_TEST_NO_DEVICE")) CU_add_test(s, "device_stream", test_device_stream);
  if (!getenv("HCCL_TEST_NO_DEVICE")) CU_add_test(s, "device_zerocopy", test_device_zerocopy);
  CU_add_test(s, "finalize", test_finalize);
  /* Rank 0 prints CUnit's report; the others print only their failures
   * (stderr), and the verdict below counts everyone's. */
  int saved_stdout = -1;
  if (g_rank != 0) {
    fflush(stdout);
    saved_stdout = dup(1);
    if (!freopen("/dev/null", "w", stdout)) saved_stdout = -1;
  }
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  if (saved_stdout >= 0) {
    fflush(stdout);
    dup2(saved_stdout, 1);
    close(saved_stdout);
  }
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
  clock_gettime(CLOCK_MONOTONIC, &t1);
  CU_cleanup_registry();
  /* Every rank's verdict, through hccl itself (works without MPI too). */
  int64_t tot[2] = {(int64_t)failed, g_checks}, sum[2] = {0, 0};
  if (hcclAllReduce(tot, sum, 2, hcclInt64, hcclSum, g_comm, NULL) != hcclSuccess) sum[0] = 1;
  hcclCommDestroy(g_comm);
  if (g_rank == 0)
    printf("HCCL collectives: %d ranks: %lld checks, %lld failures on all ranks (%.1f s)%s\n", g_size,
           (long long)sum[1], (long long)sum[0],
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, sum[0] ? "  FAILED" : "");
  if (g_use_mpi) MPI_Finalize();
  return sum[0] ? 1 : 0;
}
