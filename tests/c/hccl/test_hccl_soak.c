/* Soak: thousands of collectives of random kinds, types and sizes (the same
 * pseudo-random sequence on every rank), each checked exactly; split
 * communicators made and destroyed along the way. Leak checks: file
 * descriptors and resident memory must not grow after the warm-up (run it
 * under ASan or valgrind for the rest). HCCL_SOAK_ITERS sets the length. */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hccl.h"
#include "hccl_test_util.h"

static int g_rank, g_size;
static hcclComm_t g_comm;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static int count_fds(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, res = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
    fclose(f);
  }
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static size_t rand_count(void) {
  /* log-uniform from 0 to ~1M elements, mostly small */
  int bits = (int)(rnd() % 21);
  return bits == 0 ? 0 : (size_t)(rnd() % ((size_t)1 << bits)) + 1;
}

static long g_wrong, g_ops;

#define OK(call)                                                                                   \
  do {                                                                                             \
    hcclResult_t r_ = (call);                                                                      \
    if (r_ != hcclSuccess) {                                                                       \
      fprintf(stderr, "[rank %d] op %ld: %s: %s\n", g_rank, g_ops, #call, hcclGetLastError(comm)); \
      CU_FAIL_FATAL("hccl call failed");                                                           \
    }                                                                                              \
  } while (0)

static void one_op(hcclComm_t comm, int rank, int n) {
  int kind = (int)(rnd() % 8);
  hcclDataType_t dt = ht_all_types[rnd() % HT_NTYPES];
  hcclRedOp_t op = ht_all_ops[rnd() % HT_NOPS];
  size_t count = rand_count(), es = ht_size(dt);
  int inplace = (int)(rnd() % 2), root = (int)(rnd() % (uint64_t)n);
  if (count > (4u << 20) / es) count = (4u << 20) / es;
  size_t tot = count * (size_t)n;
  char *a = calloc(tot * es + 1, 1), *b = calloc(tot * es + 1, 1), *w = calloc(tot * es + 1, 1);
  size_t bad = 0;
  switch (kind) {
    case 0: case 1:   /* allreduce twice as often */
      ht_fill(a, dt, op, rank, count, 0);
      ht_expected(w, dt, op, n, count, 0);
      OK(hcclAllReduce(a, inplace ? a : b, count, dt, op, comm, NULL));
      bad = ht_count_wrong(inplace ? a : b, w, dt, count);
      break;
    case 2:
      ht_fill(w, dt, hcclSum, root + 5, count, 0);
      if (rank == root) memcpy(a, w, count * es);
      OK(hcclBroadcast(a, inplace ? a : b, count, dt, root, comm, NULL));
      bad = ht_count_wrong(inplace ? a : b, w, dt, count);
      break;
    case 3:
      ht_fill(a, dt, op, rank, count, 0);
      ht_expected(w, dt, op, n, count, 0);
      OK(hcclReduce(a, inplace ? a : b, count, dt, op, root, comm, NULL));
      if (rank == root) bad = ht_count_wrong(inplace ? a : b, w, dt, count);
      break;
    case 4:
      for (int r = 0; r < n; r++) ht_fill(w + (size_t)r * count * es, dt, hcclSum, r, count, 0);
      ht_fill(inplace ? b + (size_t)rank * count * es : a, dt, hcclSum, rank, count, 0);
      OK(hcclAllGather(inplace ? b + (size_t)rank * count * es : a, b, count, dt, comm, NULL));
      bad = ht_count_wrong(b, w, dt, tot);
      break;
    case 5:
      ht_fill(a, dt, op, rank, tot, 0);
      ht_expected(w, dt, op, n, count, (size_t)rank * count);
      OK(hcclReduceScatter(a, inplace ? a + (size_t)rank * count * es : b, count, dt, op, comm, NULL));
      bad = ht_count_wrong(inplace ? a + (size_t)rank * count * es : b, w, dt, count);
      break;
    case 6:
      for (int j = 0; j < n; j++) {
        ht_fill(a + (size_t)j * count * es, dt, hcclSum, rank * 31 + j, count, (size_t)j);
        ht_fill(w + (size_t)j * count * es, dt, hcclSum, j * 31 + rank, count, (size_t)rank);
      }
      OK(hcclAlltoAll(a, b, count, dt, comm, NULL));
      bad = ht_count_wrong(b, w, dt, tot);
      break;
    default: {
      int shift = 1 + (int)(rnd() % (uint64_t)(n > 1 ? n - 1 : 1));
      int to = (rank + shift) % n, from = (rank + n - shift) % n;
      ht_fill(a, dt, hcclSum, rank, count, 0);
      ht_fill(w, dt, hcclSum, from, count, 0);
      OK(hcclGroupStart());
      OK(hcclSend(a, count, dt, to, comm, NULL));
      OK(hcclRecv(b, count, dt, from, comm, NULL));
      OK(hcclGroupEnd());
      bad = ht_count_wrong(b, w, dt, count);
    }
  }
  if (bad) fprintf(stderr, "[rank %d] op %ld kind %d %s count %zu: %zu wrong\n", rank, g_ops, kind, ht_type_name(dt), count, bad);
  g_wrong += bad != 0;
  g_ops++;
  free(a); free(b); free(w);
}

static void test_soak(void) {
  const char *e = getenv("HCCL_SOAK_ITERS");
  long iters = e ? atol(e) : 3000;
  int fds0 = 0;
  long rss0 = 0;
  for (long i = 0; i < iters; i++) {
    one_op(g_comm, g_rank, g_size);
    if (i % 500 == 250) {
      /* a split communicator lives for a few operations */
      hcclComm_t sub = NULL;
      hcclComm_t comm = g_comm;
      OK(hcclCommSplit(g_comm, g_rank % 2, g_rank, &sub, NULL));
      int n, r;
      hcclCommCount(sub, &n);
      hcclCommUserRank(sub, &r);
      for (int k = 0; k < 5; k++) one_op(sub, r, n);
      OK(hcclCommDestroy(sub));
    }
    if (i == iters / 4) { fds0 = count_fds(); rss0 = rss_kb(); }
  }
  int fds1 = count_fds();
  long rss1 = rss_kb();
  if (g_rank == 0)
    printf("\nsoak: %ld ops on %d ranks, fds %d -> %d, RSS %ld -> %ld kB\n", g_ops, g_size, fds0, fds1, rss0, rss1);
  CU_ASSERT_EQUAL(g_wrong, 0);
  CU_ASSERT(fds1 <= fds0);
#if !defined(__SANITIZE_ADDRESS__)   /* ASan's quarantine grows RSS; it checks leaks itself */
  CU_ASSERT(rss1 <= rss0 + 64 * 1024);   /* allocator noise, not per-op growth */
#endif
}

/* Under mpirun, or (for sanitizer runs without MPI's own allocations)
 * with HCCL_TEST_RANK, HCCL_TEST_NRANKS and HCCL_COMM_ID. */
int main(int argc, char **argv) {
  const char *er = getenv("HCCL_TEST_RANK");
  int use_mpi = !er;
  hcclUniqueId id;
  if (use_mpi) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (g_rank == 0 && hcclGetUniqueId(&id) != hcclSuccess) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  } else {
    g_rank = atoi(er);
    g_size = getenv("HCCL_TEST_NRANKS") ? atoi(getenv("HCCL_TEST_NRANKS")) : 1;
    if (hcclGetUniqueId(&id) != hcclSuccess) return 1;
  }
  if (hcclCommInitRank(&g_comm, g_size, id, g_rank) != hcclSuccess) {
    fprintf(stderr, "init: %s\n", hcclGetLastError(NULL));
    if (use_mpi) MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("hccl_soak", NULL, NULL);
  CU_add_test(s, "random_collectives", test_soak);
  if (g_rank != 0 && !freopen("/dev/null", "w", stdout)) return 1;   /* rank 0 reports */
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int64_t failed = (int64_t)(CU_get_number_of_failures() + CU_get_number_of_tests_failed()), all = 0;
  CU_cleanup_registry();
  if (hcclAllReduce(&failed, &all, 1, hcclInt64, hcclSum, g_comm, NULL) != hcclSuccess) all = 1;
  hcclCommDestroy(g_comm);
  if (g_rank == 0) printf("HCCL soak: %lld failures on all ranks%s\n", (long long)all, all ? "  FAILED" : "");
  if (use_mpi) MPI_Finalize();
  return all ? 1 : 0;
}
