/* HCCL under failure: a rank killed in the middle of an allreduce, a rank
 * that never arrives (at init, at a collective), mismatched calls, an abort
 * from another thread, foreign connections to the bootstrap root. Each test
 * forks its own ranks (mpirun would tear the job down at the first death);
 * the survivors must return an error well within the timeout, and nothing of
 * ours may remain in /dev/shm. */
#include <CUnit/Basic.h>
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hccl.h"
#include "hccl_test_util.h"
#include "hpu/device.h"
#include "hpu/memory.h"
#include "hpu/stream.h"
#include "internal.h"   /* the unique id's layout, for the foreign-peer test */

enum { OK = 0, UNEXPECTED_SUCCESS = 10, TOO_SLOW = 11, SETUP_FAILED = 12, WRONG_DATA = 13 };

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef int (*rank_fn)(int rank, int n, hcclUniqueId id);

/* Forks n ranks; rank 0 makes the unique id and hands it over by pipe.
 * Returns each rank's exit code (128 + signal if killed). */
static void run_ranks(int n, rank_fn fn, int *codes, double limit_s) {
  int fds[64][2];
  pid_t pids[64];
  for (int i = 1; i < n; i++)
    if (pipe(fds[i]) != 0) abort();
  for (int i = 0; i < n; i++) {
    pid_t p = fork();
    if (p == 0) {
      hcclUniqueId id;
      if (i == 0) {
        if (hcclGetUniqueId(&id) != hcclSuccess) _exit(SETUP_FAILED);
        for (int j = 1; j < n; j++)
          if (write(fds[j][1], &id, sizeof id) != (ssize_t)sizeof id) _exit(SETUP_FAILED);
      } else if (read(fds[i][0], &id, sizeof id) != (ssize_t)sizeof id) {
        _exit(SETUP_FAILED);
      }
      fflush(stdout);
      _exit(fn(i, n, id));
    }
    pids[i] = p;
  }
  for (int i = 1; i < n; i++) { close(fds[i][0]); close(fds[i][1]); }
  double t0 = now_s();
  int left = n;
  for (int i = 0; i < n; i++) codes[i] = -1;
  while (left > 0) {
    int st;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      for (int i = 0; i < n; i++)
        if (pids[i] == p) codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      left--;
      continue;
    }
    if (now_s() - t0 > limit_s) {   /* a hang: kill everyone, the test fails */
      fprintf(stderr, "ranks still running after %.0f s: killing them\n", limit_s);
      for (int i = 0; i < n; i++)
        if (codes[i] < 0) kill(pids[i], SIGKILL);
      limit_s = 1e9;
    }
    usleep(2000);
  }
}

static void expect_codes(const char *name, int n, const int *codes, const int *want) {
  for (int i = 0; i < n; i++) {
    if (codes[i] != want[i]) fprintf(stderr, "%s: rank %d exited with %d, expected %d\n", name, i, codes[i], want[i]);
    CU_ASSERT_EQUAL(codes[i], want[i]);
  }
  CU_ASSERT(ht_shm_clean());
}

static hcclComm_t init(int rank, int n, hcclUniqueId id, int timeout_ms) {
  hcclConfig_t cfg = HCCL_CONFIG_INITIALIZER;
  cfg.timeoutMs = timeout_ms;
  hcclComm_t c = NULL;
  hcclResult_t r = hcclCommInitRankConfig(&c, n, id, rank, &cfg);
  if (r != hcclSuccess) {
    fprintf(stderr, "[rank %d] init failed: %s\n", rank, hcclGetLastError(NULL));
    _exit(SETUP_FAILED);
  }
  return c;
}

/* Reports how a survivor's failing call went: OK if it failed within max_s. */
static int survivor_verdict(const char *test, int rank, hcclResult_t r, double secs, double max_s, hcclComm_t c) {
  if (r == hcclSuccess) return UNEXPECTED_SUCCESS;
  fprintf(stderr, "  [%s rank %d] error after %.3f s: %s: %s\n", test, rank, secs, hcclGetErrorString(r),
          hcclGetLastError(c));
  return secs <= max_s ? OK : TOO_SLOW;
}

/* ---- a rank killed in the middle of an allreduce ---- */
static void *killer(void *arg) {
  usleep((useconds_t)(uintptr_t)arg);
  raise(SIGKILL);
  return NULL;
}

static int kill_mid_allreduce(int rank, int n, hcclUniqueId id) {
  hcclComm_t c = init(rank, n, id, 30000);
  size_t count = 4u << 20;
  float *buf = calloc(count, sizeof(float));
  if (rank == n - 1) {
    pthread_t t;
    pthread_create(&t, NULL, killer, (void *)(uintptr_t)50000);
  }
  for (int it = 0; it < 100000; it++) {
    double t0 = now_s();
    hcclResult_t r = hcclAllReduce(buf, buf, count, hcclFloat32, hcclSum, c, NULL);
    if (r != hcclSuccess) {
      int v = survivor_verdict("kill", rank, r, now_s() - t0, 5.0, c);
      hcclResult_t ae = hcclSuccess;
      hcclCommGetAsyncError(c, &ae);
      if (ae == hcclSuccess) v = UNEXPECTED_SUCCESS;
      /* the comm stays failed: later calls fail at once */
      if (hcclAllReduce(buf, buf, 1, hcclFloat32, hcclSum, c, NULL) == hcclSuccess) v = UNEXPECTED_SUCCESS;
      hcclCommAbort(c);
      free(buf);
      return v;
    }
  }
  return UNEXPECTED_SUCCESS;
}

static void test_kill_mid_allreduce(void) {
  int codes[4], want[4] = {OK, OK, OK, 128 + SIGKILL};
  run_ranks(4, kill_mid_allreduce, codes, 60);
  expect_codes("kill_mid_allreduce", 4, codes, want);
}

/* Same over the generic point-to-point path: send/recv ring. */
static int kill_mid_sendrecv(int rank, int n, hcclUniqueId id) {
  hcclComm_t c = init(rank, n, id, 30000);
  size_t count = 1u << 20;
  float *a = calloc(count, 4), *b = calloc(count, 4);
  if (rank == 1) {
    pthread_t t;
    pthread_create(&t, NULL, killer, (void *)(uintptr_t)30000);
  }
  for (int it = 0; it < 100000; it++) {
    double t0 = now_s();
    hcclGroupStart();
    hcclSend(a, count, hcclFloat32, (rank + 1) % n, c, NULL);
    hcclRecv(b, count, hcclFloat32, (rank + n - 1) % n, c, NULL);
    hcclResult_t r = hcclGroupEnd();
    if (r != hcclSuccess) {
      int v = survivor_verdict("kill-p2p", rank, r, now_s() - t0, 5.0, c);
      hcclCommDestroy(c);
      free(a); free(b);
      return v;
    }
  }
  return UNEXPECTED_SUCCESS;
}

static void test_kill_mid_sendrecv(void) {
  int codes[3], want[3] = {OK, 128 + SIGKILL, OK};
  run_ranks(3, kill_mid_sendrecv, codes, 60);
  expect_codes("kill_mid_sendrecv", 3, codes, want);
}

/* ---- a rank that never arrives ---- */
static int never_arrives_init(int rank, int n, hcclUniqueId id) {
  if (rank == n - 1) return OK;   /* leaves without calling init */
  hcclConfig_t cfg = HCCL_CONFIG_INITIALIZER;
  cfg.timeoutMs = 1500;
  hcclComm_t c = NULL;
  double t0 = now_s();
  hcclResult_t r = hcclCommInitRankConfig(&c, n, id, rank, &cfg);
  int v = survivor_verdict("never-arrives-init", rank, r, now_s() - t0, 4.0, NULL);
  if (r == hcclSuccess) hcclCommDestroy(c);
  return v;
}

static void test_never_arrives_init(void) {
  int codes[3], want[3] = {OK, OK, OK};
  run_ranks(3, never_arrives_init, codes, 30);
  expect_codes("never_arrives_init", 3, codes, want);
}

static int never_arrives_coll(int rank, int n, hcclUniqueId id) {
  hcclComm_t c = init(rank, n, id, 60000);
  hcclCommSetTimeout(c, 1000);   /* what a caller passes (ProcessGroup timeout) */
  if (rank == n - 1) {
    sleep(4);
    hcclCommDestroy(c);
    return OK;
  }
  float x = 1;
  double t0 = now_s();
  hcclResult_t r = hcclAllReduce(&x, &x, 1, hcclFloat32, hcclSum, c, NULL);
  double dt = now_s() - t0;
  int v = survivor_verdict("never-arrives-collective", rank, r, dt, 3.0, c);
  if (v == OK && dt < 0.9) v = TOO_SLOW + 100;   /* failed before the timeout: wrong reason */
  hcclCommDestroy(c);
  return v;
}

static void test_never_arrives_collective(void) {
  int codes[3], want[3] = {OK, OK, OK};
  run_ranks(3, never_arrives_coll, codes, 30);
  expect_codes("never_arrives_collective", 3, codes, want);
}

static int never_arrives_env_timeout(int rank, int n, hcclUniqueId id) {
  setenv("HCCL_TIMEOUT", "1", 1);   /* read by init when no timeout is passed */
  hcclComm_t c = NULL;
  if (hcclCommInitRank(&c, n, id, rank) != hcclSuccess) return SETUP_FAILED;
  if (rank == 0) {
    sleep(3);
    hcclCommDestroy(c);
    return OK;
  }
  int x = 1;
  double t0 = now_s();
  hcclResult_t r = hcclBroadcast(&x, &x, 1, hcclInt32, 0, c, NULL);
  int v = survivor_verdict("HCCL_TIMEOUT", rank, r, now_s() - t0, 2.5, c);
  hcclCommDestroy(c);
  return v;
}

static void test_env_timeout(void) {
  int codes[2], want[2] = {OK, OK};
  run_ranks(2, never_arrives_env_timeout, codes, 30);
  expect_codes("env_timeout", 2, codes, want);
}

/* ---- mismatched calls ---- */
static int mismatched_counts(int rank, int n, hcclUniqueId id) {
  hcclComm_t c = init(rank, n, id, 20000);
  size_t count = rank == 1 ? 1000 : 1001;
  float *buf = calloc(2000, 4);
  double t0 = now_s();
  hcclResult_t r = hcclAllReduce(buf, buf, count, hcclFloat32, hcclSum, c, NULL);
  int v = survivor_verdict("mismatch", rank, r, now_s() - t0, 2.0, c);
  free(buf);
  hcclCommDestroy(c);
  return v;
}

static void test_mismatched_counts(void) {
  int codes[4], want[4] = {OK, OK, OK, OK};
  run_ranks(4, mismatched_counts, codes, 30);
  expect_codes("mismatched_counts", 4, codes, want);
}

static int mismatched_p2p(int rank, int n, hcclUniqueId id) {
  (void)n;
  hcclComm_t c = init(rank, n, id, 20000);
  char buf[256] = {0};
  double t0 = now_s();
  hcclResult_t r = rank == 0 ? hcclSend(buf, 100, hcclUint8, 1, c, NULL) : hcclRecv(buf, 200, hcclUint8, 0, c, NULL);
  int v;
  if (rank == 0 && r == hcclSuccess) {
    /* the send fit the mailbox; the failure shows on the next call */
    r = hcclBarrier(c, NULL);
  }
  v = survivor_verdict("mismatch-p2p", rank, r, now_s() - t0, 2.0, c);
  hcclCommDestroy(c);
  return v;
}

static void test_mismatched_p2p(void) {
  int codes[2], want[2] = {OK, OK};
  run_ranks(2, mismatched_p2p, codes, 30);
  expect_codes("mismatched_p2p", 2, codes, want);
}

static int mismatched_kind(int rank, int n, hcclUniqueId id) {
  hcclComm_t c = init(rank, n, id, 20000);
  float buf[64] = {0};
  double t0 = now_s();
  hcclResult_t r = rank == 0 ? hcclBroadcast(buf, buf, 8, hcclFloat32, 0, c, NULL)
                             : hcclAllReduce(buf, buf, 8, hcclFloat32, hcclSum, c, NULL);
  int v = survivor_verdict("mismatch-kind", rank, r, now_s() - t0, 2.0, c);
  hcclCommDestroy(c);
  return v;
}

static void test_mismatched_kind(void) {
  int codes[3], want[3] = {OK, OK, OK};
  run_ranks(3, mismatched_kind, codes, 30);
  expect_codes("mismatched_kind", 3, codes, want);
}

/* ---- an error inside a collective queued on a card's stream ---- */
static int stream_async_error(int rank, int n, hcclUniqueId id) {
  hcclComm_t c = init(rank, n, id, 20000);
  hpu_stream_t st;
  float *d = NULL;
  if (hpu_init() != HPU_SUCCESS || hpu_stream_default(0, &st) != HPU_SUCCESS ||
      hpu_malloc(0, 4096 * sizeof(float), (void **)&d) != HPU_SUCCESS)
    return SETUP_FAILED;
  size_t count = rank == 1 ? 1000 : 1001;
  double t0 = now_s();
  /* enqueue succeeds and returns at once; the failure shows on the stream
   * and as the communicator's asynchronous error */
  if (hcclAllReduce(d, d, count, hcclFloat32, hcclSum, c, (hcclStream_t)&st) != hcclSuccess) return SETUP_FAILED;
  hpu_status_t s = hpu_stream_synchronize(st);
  hcclResult_t ae = hcclSuccess;
  hcclCommGetAsyncError(c, &ae);
  double dt = now_s() - t0;
  fprintf(stderr, "  [stream rank %d] stream status %s (%s), async error %s after %.3f s\n", rank,
          hpu_status_name(s), hpu_last_error(), hcclGetErrorString(ae), dt);
  int v = s != HPU_SUCCESS && ae != hcclSuccess ? (dt < 2.0 ? OK : TOO_SLOW) : UNEXPECTED_SUCCESS;
  hpu_free(0, d);
  hcclCommDestroy(c);
  return v;
}

static void test_stream_async_error(void) {
  int codes[2], want[2] = {OK, OK};
  run_ranks(2, stream_async_error, codes, 30);
  expect_codes("stream_async_error", 2, codes, want);
}

/* ---- a peer publishing a zero-copy offset outside its card memory ---- */
/* Rank 1 plays its part of an allgather's first round by hand (as the
 * library does) but publishes its send buffer at a bad offset: past the
 * end of its arena (first call, a fresh mapping) or near its end so that
 * offset + length overflows it (after a good allgather, the mapping
 * cached). Rank 0, in a normal allgather, must fail with an error naming
 * the offset instead of reading out of bounds; rank 1 then sees the
 * communicator failed. */
static int zc_offset_after_good_call; /* which case run_ranks runs */

static int zc_bad_offset(int rank, int n, hcclUniqueId id) {
  hcclComm_t c = init(rank, n, id, 20000);
  const size_t count = 1u << 20; /* 4 MiB per rank: past the small-message path */
  float *send = NULL, *recv = NULL;
  if (hpu_init() != HPU_SUCCESS || hpu_malloc(0, count * sizeof(float), (void **)&send) != HPU_SUCCESS ||
      hpu_malloc(0, (size_t)n * count * sizeof(float), (void **)&recv) != HPU_SUCCESS)
    return SETUP_FAILED;
  for (size_t i = 0; i < count; i++) send[i] = (float)(rank * 1000 + (int)(i % 1000));
  if (zc_offset_after_good_call) {
    if (hcclAllGather(send, recv, count, hcclFloat32, c, NULL) != hcclSuccess) return SETUP_FAILED;
    for (int k = 0; k < n; k++)
      if (recv[(size_t)k * count + 999] != (float)(k * 1000 + 999)) return WRONG_DATA;
  }
  hcclResult_t r;
  double t0 = now_s();
  if (rank == 0) {
    r = hcclAllGather(send, recv, count, hcclFloat32, c, NULL);
    int v = survivor_verdict("zc-offset", rank, r, now_s() - t0, 5.0, c);
    if (v == OK && !strstr(hcclGetLastError(c), "offset")) v = WRONG_DATA;
    hcclCommDestroy(c);
    return v;
  }
  hccl_op_t op = {HCCL_K_ALLGATHER, send, recv, count, hcclFloat32, hcclSum, 0};
  int b = hccl_round_next(c);
  hccl_desc_publish(c, &op, b);
  hccl_zc_desc_t *z = &c->shm.ctrl[c->local].zc[b];
  memset(z, 0, sizeof *z);
  if (!hccl_zc_offer_send(c, b, send, count * sizeof(float)) || !z->send.valid) return SETUP_FAILED;
  z->send.off = zc_offset_after_good_call ? z->send.arena_bytes - 16 : 1ull << 50;
  hccl_post(c);
  r = hccl_wait_all_posted(c, "allgather");           /* rank 0 posted its round */
  if (r == hcclSuccess) {
    hccl_post(c);                                     /* the closing barrier, which rank 0 never reaches */
    r = hccl_wait_all_posted(c, "allgather (closing)");
  }
  int v = survivor_verdict("zc-offset", rank, r, now_s() - t0, 5.0, c);
  hcclCommDestroy(c);
  return v;
}

static void test_zc_offset_out_of_range(void) {
  int codes[2], want[2] = {OK, OK};
  zc_offset_after_good_call = 0;
  run_ranks(2, zc_bad_offset, codes, 30);
  expect_codes("zc_offset_past_arena", 2, codes, want);
  zc_offset_after_good_call = 1;
  run_ranks(2, zc_bad_offset, codes, 30);
  expect_codes("zc_offset_plus_length_past_arena", 2, codes, want);
}

/* ---- bad numeric settings fail init, naming them ---- */
static const char *bad_setting[][2] = {
    {"HCCL_SHM_SLOT_BYTES", "-1"}, /* was a slot of 0 bytes: every staged loop endless */
    {"HCCL_SHM_SLOT_BYTES", "100"},   {"HCCL_SHM_MBOX_BYTES", "abc"}, {"HCCL_SMALL_BYTES", "1x"},
    {"HCCL_SPIN_US", "-5"},           {"HCCL_ZERO_COPY", "2"},        {"HCCL_CMA", "on"},
    {"HCCL_TIMEOUT", "soon"},
};
static int bad_setting_case;

static int init_with_bad_setting(int rank, int n, hcclUniqueId id) {
  const char *name = bad_setting[bad_setting_case][0], *value = bad_setting[bad_setting_case][1];
  setenv(name, value, 1);
  hcclComm_t c = NULL;
  double t0 = now_s();
  hcclResult_t r = hcclCommInitRank(&c, n, id, rank);
  char quoted[64];
  snprintf(quoted, sizeof quoted, "%s='%s'", name, value);
  if (r == hcclSuccess) {
    fprintf(stderr, "  %s: init succeeded\n", quoted);
    hcclCommDestroy(c);
    return UNEXPECTED_SUCCESS;
  }
  int named = r == hcclInvalidArgument && strstr(hcclGetLastError(NULL), quoted) != NULL;
  if (!named) fprintf(stderr, "  %s: %s: %s\n", quoted, hcclGetErrorString(r), hcclGetLastError(NULL));
  return !named ? WRONG_DATA : now_s() - t0 < 2.0 ? OK : TOO_SLOW;
}

static void test_bad_settings(void) {
  for (bad_setting_case = 0; bad_setting_case < (int)(sizeof bad_setting / sizeof bad_setting[0]); bad_setting_case++) {
    int codes[1], want[1] = {OK};
    run_ranks(1, init_with_bad_setting, codes, 20);
    expect_codes(bad_setting[bad_setting_case][0], 1, codes, want);
  }
}

/* ---- abort from another thread ---- */
static void *aborter(void *arg) {
  usleep(300000);
  hcclCommAbort((hcclComm_t)arg);
  return NULL;
}

static int abort_from_thread(int rank, int n, hcclUniqueId id) {
  hcclComm_t c = init(rank, n, id, 20000);
  if (rank == n - 1) {   /* never joins; then finds the comm failed */
    usleep(1500000);
    float x = 0;
    hcclResult_t r = hcclAllReduce(&x, &x, 1, hcclFloat32, hcclSum, c, NULL);
    hcclCommDestroy(c);
    return r == hcclSuccess ? UNEXPECTED_SUCCESS : OK;
  }
  pthread_t t;
  if (rank == 0) pthread_create(&t, NULL, aborter, c);
  float x = 1;
  double t0 = now_s();
  hcclResult_t r = hcclAllReduce(&x, &x, 1, hcclFloat32, hcclSum, c, NULL);
  int v = survivor_verdict("abort", rank, r, now_s() - t0, 2.0, rank == 0 ? NULL : c);
  if (rank == 0) pthread_join(t, NULL);   /* the aborter freed the comm */
  else hcclCommDestroy(c);
  return v;
}

static void test_abort_from_thread(void) {
  int codes[3], want[3] = {OK, OK, OK};
  run_ranks(3, abort_from_thread, codes, 30);
  expect_codes("abort_from_thread", 3, codes, want);
}

/* ---- foreign and malformed peers at the bootstrap root ---- */
static int foreign_peer(int rank, int n, hcclUniqueId id) {
  if (rank == 0) {
    hccl_id_t in;
    memcpy(&in, id.internal, sizeof in);
    /* garbage, a truncated hello, a wrong version: each is refused, the job goes on */
    for (int k = 0; k < 3; k++) {
      int s = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(s, (struct sockaddr *)&in.root, sizeof in.root) != 0) return SETUP_FAILED;
      hccl_rank_info_t bad;
      memset(&bad, 0x41, sizeof bad);
      if (k == 2) { bad.magic = HCCL_MAGIC; bad.version = HCCL_PROTO_VERSION + 7; bad.size = sizeof bad; }
      size_t len = k == 1 ? 5 : sizeof bad;
      if (write(s, &bad, len) != (ssize_t)len) return SETUP_FAILED;
      if (k == 1) { close(s); continue; }
      hccl_boot_reply_t rep;
      memset(&rep, 0, sizeof rep);
      ssize_t got = recv(s, &rep, sizeof rep, MSG_WAITALL);
      close(s);
      if (got != (ssize_t)sizeof rep || rep.status == hcclSuccess) {
        fprintf(stderr, "foreign peer %d was not refused (got %zd bytes, status %d)\n", k, got, rep.status);
        return UNEXPECTED_SUCCESS;
      }
    }
  }
  hcclComm_t c = init(rank, n, id, 20000);
  int32_t x = rank + 1, sum = 0;
  hcclResult_t r = hcclAllReduce(&x, &sum, 1, hcclInt32, hcclSum, c, NULL);
  hcclCommDestroy(c);
  return r == hcclSuccess && sum == n * (n + 1) / 2 ? OK : WRONG_DATA;
}

static void test_foreign_peer(void) {
  int codes[3], want[3] = {OK, OK, OK};
  run_ranks(3, foreign_peer, codes, 30);
  expect_codes("foreign_peer", 3, codes, want);
}

/* A unique id from another library version or garbage is refused. */
static void test_bad_unique_id(void) {
  hcclUniqueId id;
  memset(&id, 0x7f, sizeof id);
  hcclComm_t c = NULL;
  CU_ASSERT_EQUAL(hcclCommInitRank(&c, 2, id, 0), hcclInvalidArgument);
  CU_ASSERT_PTR_NULL(c);
  CU_ASSERT_EQUAL(hcclCommInitRank(&c, 0, id, 0), hcclInvalidArgument);
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("hccl_faults", NULL, NULL);
  CU_add_test(s, "bad_unique_id", test_bad_unique_id);
  CU_add_test(s, "kill_mid_allreduce", test_kill_mid_allreduce);
  CU_add_test(s, "kill_mid_sendrecv", test_kill_mid_sendrecv);
  CU_add_test(s, "never_arrives_init", test_never_arrives_init);
  CU_add_test(s, "never_arrives_collective", test_never_arrives_collective);
  CU_add_test(s, "env_timeout", test_env_timeout);
  CU_add_test(s, "mismatched_counts", test_mismatched_counts);
  CU_add_test(s, "mismatched_p2p", test_mismatched_p2p);
  CU_add_test(s, "mismatched_kind", test_mismatched_kind);
  CU_add_test(s, "abort_from_thread", test_abort_from_thread);
  CU_add_test(s, "stream_async_error", test_stream_async_error);
  CU_add_test(s, "foreign_peer", test_foreign_peer);
  CU_add_test(s, "bad_settings", test_bad_settings);
  CU_add_test(s, "zc_offset_out_of_range", test_zc_offset_out_of_range);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
