/* hcclCommInitAll: one process drives several cards, one communicator per
 * card, as NCCL's single-process multi-GPU mode. Exact results for group
 * calls from one thread (host and device buffers; the device ones take the
 * zero-copy path between cards of the same process), collectives enqueued
 * on each card's stream, a split, argument errors, and /dev/shm clean after.
 * No MPI: run it directly. */
#include <CUnit/Basic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hccl.h"
#include "hccl_test_util.h"
#include "hpu/device.h"
#include "hpu/memory.h"
#include "hpu/stream.h"

#define NDEV 4
static hcclComm_t g_comms[NDEV];
static int g_have_cards;

#define CHECK_HCCL(call)                                                                                      \
  do {                                                                                                        \
    hcclResult_t r_ = (call);                                                                                 \
    if (r_ != hcclSuccess) fprintf(stderr, "%s:%d %s -> %s: %s\n", __FILE__, __LINE__, #call,               \
                                   hcclGetErrorString(r_), hcclGetLastError(NULL));                          \
    CU_ASSERT_EQUAL_FATAL(r_, hcclSuccess);                                                                   \
  } while (0)

static void test_init(void) {
  int devs[NDEV] = {0, 1, 2, 3};
  CHECK_HCCL(hcclCommInitAll(g_comms, NDEV, devs));
  for (int i = 0; i < NDEV; i++) {
    int n = -1, r = -1;
    CHECK_HCCL(hcclCommCount(g_comms[i], &n));
    CHECK_HCCL(hcclCommUserRank(g_comms[i], &r));
    CU_ASSERT_EQUAL(n, NDEV);
    CU_ASSERT_EQUAL(r, i);
  }
  hcclComm_t bad[1];
  CU_ASSERT_EQUAL(hcclCommInitAll(bad, 0, NULL), hcclInvalidArgument);
  CU_ASSERT_EQUAL(hcclCommInitAll(NULL, 2, NULL), hcclInvalidArgument);
}

/* One thread, a group over every communicator (NULL stream). */
static void group_allreduce(char *send[NDEV], char *recv[NDEV], hcclDataType_t dt, hcclRedOp_t op, size_t count,
                            int inplace, const char *what) {
  size_t es = ht_size(dt);
  char *want = malloc(count * es);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  ht_expected(want, dt, op, NDEV, count, 0);
  for (int i = 0; i < NDEV; i++) {
    ht_fill(send[i], dt, op, i, count, 0);
    memset(recv[i], 0x5a, count * es);
  }
  CHECK_HCCL(hcclGroupStart());
  for (int i = 0; i < NDEV; i++)
    CHECK_HCCL(hcclAllReduce(send[i], inplace ? send[i] : recv[i], count, dt, op, g_comms[i], NULL));
  CHECK_HCCL(hcclGroupEnd());
  for (int i = 0; i < NDEV; i++) {
    size_t wrong = ht_count_wrong(inplace ? send[i] : recv[i], want, dt, count);
    if (wrong)
      fprintf(stderr, "%s %s %s count=%zu rank %d %s: %zu wrong\n", what, ht_type_name(dt), ht_op_name(op), count, i,
              inplace ? "in-place" : "out-of-place", wrong);
    CU_ASSERT_EQUAL(wrong, 0);
  }
  free(want);
}

static void test_group_host(void) {
  size_t counts[] = {1, 1000, (1u << 20) + 3};
  for (size_t c = 0; c < 3; c++)
    for (int o = 0; o < HT_NOPS; o++) {
      hcclDataType_t dt = o % 2 ? hcclFloat32 : hcclInt32;
      size_t bytes = counts[c] * ht_size(dt);
      char *s[NDEV], *r[NDEV];
      for (int i = 0; i < NDEV; i++) {
        s[i] = malloc(bytes);
        r[i] = malloc(bytes);
        CU_ASSERT_FATAL(s[i] && r[i]);
      }
      group_allreduce(s, r, dt, ht_all_ops[o], counts[c], o % 2, "host group allreduce");
      for (int i = 0; i < NDEV; i++) { free(s[i]); free(r[i]); }
    }
}

static void test_group_device(void) {
  if (!g_have_cards) return;
  size_t counts[] = {1000, 300001, (2u << 20) + 5};
  for (size_t c = 0; c < 3; c++)
    for (int ip = 0; ip < 2; ip++) {
      hcclDataType_t dt = c == 1 ? hcclBfloat16 : hcclFloat32;
      hcclRedOp_t op = c == 1 ? hcclAvg : hcclSum;
      size_t bytes = counts[c] * ht_size(dt);
      char *s[NDEV], *r[NDEV];
      for (int i = 0; i < NDEV; i++) {
        CU_ASSERT_EQUAL_FATAL(hpu_malloc(i, bytes, (void **)&s[i]), HPU_SUCCESS);
        CU_ASSERT_EQUAL_FATAL(hpu_malloc(i, bytes, (void **)&r[i]), HPU_SUCCESS);
      }
      group_allreduce(s, r, dt, op, counts[c], ip, "device group allreduce");
      for (int i = 0; i < NDEV; i++) { hpu_free(i, s[i]); hpu_free(i, r[i]); }
    }
}

/* Each card's stream: enqueue returns at once, one thread enqueues all. */
static void test_streams(void) {
  if (!g_have_cards) return;
  size_t count = (1u << 20) + 1;
  float *d[NDEV];
  hpu_stream_t st[NDEV];
  float *want = malloc(count * 4);
  ht_expected(want, hcclFloat32, hcclMax, NDEV, count, 0);
  for (int i = 0; i < NDEV; i++) {
    CU_ASSERT_EQUAL_FATAL(hpu_stream_default(i, &st[i]), HPU_SUCCESS);
    CU_ASSERT_EQUAL_FATAL(hpu_malloc(i, count * 4, (void **)&d[i]), HPU_SUCCESS);
    ht_fill(d[i], hcclFloat32, hcclMax, i, count, 0);
  }
  for (int i = 0; i < NDEV; i++)
    CHECK_HCCL(hcclAllReduce(d[i], d[i], count, hcclFloat32, hcclMax, g_comms[i], (hcclStream_t)&st[i]));
  for (int i = 0; i < NDEV; i++) CU_ASSERT_EQUAL(hpu_stream_synchronize(st[i]), HPU_SUCCESS);
  for (int i = 0; i < NDEV; i++) {
    CU_ASSERT_EQUAL(ht_count_wrong(d[i], want, hcclFloat32, count), 0);
    hpu_free(i, d[i]);
  }
  free(want);
}

/* Split the InitAll communicators in two halves: a split is synchronous,
 * so one thread per communicator (as with NCCL outside a group). */
typedef struct split_arg {
  int i;
  hcclComm_t sub;
  int64_t v;
  hcclResult_t r;
} split_arg_t;

static void *split_thread(void *p) {
  split_arg_t *a = p;
  a->r = hcclCommSplit(g_comms[a->i], a->i % 2, a->i, &a->sub, NULL);
  a->v = a->i + 1;
  if (a->r == hcclSuccess) a->r = hcclAllReduce(&a->v, &a->v, 1, hcclInt64, hcclSum, a->sub, NULL);
  return NULL;
}

static void test_split(void) {
  split_arg_t a[NDEV];
  pthread_t t[NDEV];
  for (int i = 0; i < NDEV; i++) {
    a[i] = (split_arg_t){i, NULL, 0, hcclSuccess};
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, split_thread, &a[i]), 0);
  }
  for (int i = 0; i < NDEV; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < NDEV; i++) {
    CU_ASSERT_EQUAL(a[i].r, hcclSuccess);
    if (a[i].r != hcclSuccess) continue;
    int n = -1;
    CHECK_HCCL(hcclCommCount(a[i].sub, &n));
    CU_ASSERT_EQUAL(n, NDEV / 2);
    CU_ASSERT_EQUAL(a[i].v, i % 2 ? 2 + 4 : 1 + 3);
    CHECK_HCCL(hcclCommDestroy(a[i].sub));
  }
}

static void test_destroy(void) {
  for (int i = 0; i < NDEV; i++) CHECK_HCCL(hcclCommDestroy(g_comms[i]));
  CU_ASSERT(ht_shm_clean());
}

int main(void) {
  int n = 0;
  g_have_cards = hpu_init() == HPU_SUCCESS && hpu_device_count(&n) == HPU_SUCCESS && n >= NDEV;
  if (!g_have_cards) fprintf(stderr, "device parts skipped: fewer than %d cards\n", NDEV);
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("hccl_initall", NULL, NULL);
  CU_add_test(s, "init", test_init);
  CU_add_test(s, "group_host", test_group_host);
  CU_add_test(s, "group_device", test_group_device);
  CU_add_test(s, "streams", test_streams);
  CU_add_test(s, "split", test_split);
  CU_add_test(s, "destroy", test_destroy);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
