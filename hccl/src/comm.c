/* Communicators: creation through the bootstrap, topology (which ranks share
 * a host), lifetime (finalize, destroy, abort), split and queries. */

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "wait_policy.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

hcclResult_t hccl_comm_check(hcclComm_t comm) {
  if (!comm || comm->magic != HCCL_COMM_MAGIC) return hccl_err(hcclInvalidArgument, "invalid communicator");
  return hcclSuccess;
}

int64_t hccl_comm_deadline(hcclComm_t comm) {
  return hccl_now_ns() + atomic_load(&comm->timeout_ms) * 1000000;
}

static void wake_everyone(hcclComm_t comm) {
  if (!comm->shm.hdr) return;
  for (int i = 0; i < comm->local_n; i++) {
    atomic_fetch_add(&comm->shm.ctrl[i].wake, 1);
    syscall(SYS_futex, (unsigned *)&comm->shm.ctrl[i].wake, 1 /* FUTEX_WAKE */, 1 << 30, NULL, NULL, 0);
  }
}

static void shutdown_sockets(hcclComm_t comm) {
  for (int i = 0; comm->sock && i < comm->nranks; i++)
    if (comm->sock[i] >= 0) shutdown(comm->sock[i], SHUT_RDWR);
}

void hccl_comm_fail(hcclComm_t comm, hcclResult_t r, const char *msg) {
  pthread_mutex_lock(&comm->lock);
  if (comm->async_error == hcclSuccess) {
    comm->async_error = r;
    snprintf(comm->async_msg, sizeof comm->async_msg, "%s", msg);
  }
  pthread_mutex_unlock(&comm->lock);
  atomic_store(&comm->failed, 1);
  if (comm->shm.hdr) {
    int zero = 0;
    if (atomic_compare_exchange_strong(&comm->shm.hdr->abort, &zero, 1 + comm->rank))
      atomic_store(&comm->shm.hdr->abort_code, r);
  }
  wake_everyone(comm);
  shutdown_sockets(comm);
}

static void comm_free(hcclComm_t comm) {
  hccl_net_teardown(comm);
  hccl_zc_teardown(comm);
  free(comm->cma_tmp);
  hccl_shm_teardown(comm);
  for (int i = 0; comm->pidfd && i < comm->local_n; i++)
    if (comm->pidfd[i] >= 0) close(comm->pidfd[i]);
  if (comm->listen_fd >= 0) close(comm->listen_fd);
  if (comm->host_ranks) {
    for (int h = 0; h < comm->nhosts; h++) free(comm->host_ranks[h]);
    free(comm->host_ranks);
  }
  free(comm->pidfd);
  free(comm->info);
  free(comm->host_of);
  free(comm->local_of);
  free(comm->local_ranks);
  free(comm->sock);
  free(comm->send_seq);
  free(comm->recv_seq);
  pthread_mutex_destroy(&comm->lock);
  pthread_cond_destroy(&comm->cond);
  comm->magic = 0;
  free(comm);
}

void hccl_comm_unref(hcclComm_t comm) {
  pthread_mutex_lock(&comm->lock);
  int left = --comm->refs;
  pthread_mutex_unlock(&comm->lock);
  if (left == 0) comm_free(comm);
}

/* Hosts in order of their first rank; local ranks in rank order. */
static hcclResult_t build_topology(hcclComm_t comm) {
  const int n = comm->nranks;
  comm->host_of = malloc(sizeof(int) * (size_t)n);
  comm->local_of = malloc(sizeof(int) * (size_t)n);
  int *first = malloc(sizeof(int) * (size_t)n);   /* first rank of each host */
  int *count = calloc((size_t)n, sizeof(int));
  if (!comm->host_of || !comm->local_of || !first || !count) {
    free(first);
    free(count);
    return hccl_err(hcclSystemError, "out of memory");
  }
  int nh = 0;
  for (int i = 0; i < n; i++) {
    int h;
    for (h = 0; h < nh; h++) {
      const hccl_rank_info_t *a = &comm->info[first[h]], *b = &comm->info[i];
      if (a->host_hash == b->host_hash && strcmp(a->host_id, b->host_id) == 0) break;
    }
    if (h == nh) first[nh++] = i;
    comm->host_of[i] = h;
    comm->local_of[i] = -1;
  }
  comm->nhosts = nh;
  comm->host = comm->host_of[comm->rank];
  for (int i = 0; i < n; i++) count[comm->host_of[i]]++;
  comm->local_n = count[comm->host];
  comm->local_ranks = malloc(sizeof(int) * (size_t)comm->local_n);
  if (!comm->local_ranks) { free(first); free(count); return hccl_err(hcclSystemError, "out of memory"); }
  int k = 0;
  for (int i = 0; i < n; i++)
    if (comm->host_of[i] == comm->host) {
      comm->local_of[i] = k;
      comm->local_ranks[k++] = i;
    }
  comm->local = comm->local_of[comm->rank];
  comm->uniform = true;
  for (int h = 0; h < nh; h++)
    if (count[h] != comm->local_n) comm->uniform = false;
  if (comm->uniform && nh > 1) {
    comm->host_ranks = calloc((size_t)nh, sizeof(int *));
    for (int h = 0; comm->host_ranks && h < nh; h++) {
      comm->host_ranks[h] = malloc(sizeof(int) * (size_t)comm->local_n);
      if (!comm->host_ranks[h]) break;
      int j = 0;
      for (int i = 0; i < n; i++)
        if (comm->host_of[i] == h) comm->host_ranks[h][j++] = i;
    }
  }
  free(first);
  free(count);
  return hcclSuccess;
}

/* How long this rank's waits spin before they sleep: HCCL_SPIN_US if set,
 * else by whether every local rank can own a core and whether the ranks
 * span hosts (wait_policy.h says why). */
static int64_t default_spin_ns(int local_n, int nhosts, int64_t env_us) {
  if (env_us >= 0) return env_us * 1000;
  cpu_set_t set;
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
  int64_t ns = local_n <= cpus ? HCCL_SPIN_NS : HCCL_SPIN_NS_OVERSUBSCRIBED;
  if (nhosts > 1 && ns > HCCL_SPIN_NS_MULTIHOST) ns = HCCL_SPIN_NS_MULTIHOST;
  return ns;
}

hcclResult_t hcclCommInitRankConfig(hcclComm_t *out, int nranks, hcclUniqueId commId, int rank,
                                    hcclConfig_t *config) {
  hccl_clear_error();
  if (!out) return hccl_err(hcclInvalidArgument, "hcclCommInitRank: comm is NULL");
  *out = NULL;
  if (nranks <= 0 || nranks > HCCL_MAX_RANKS) return hccl_err(hcclInvalidArgument, "hcclCommInitRank: nranks %d", nranks);
  if (rank < 0 || rank >= nranks)
    return hccl_err(hcclInvalidArgument, "hcclCommInitRank: rank %d not in [0, %d)", rank, nranks);
  hccl_id_t id;
  memcpy(&id, commId.internal, sizeof id);
  if (id.magic != HCCL_ID_MAGIC) return hccl_err(hcclInvalidArgument, "hcclCommInitRank: not an hccl unique id");
  if (id.version != HCCL_PROTO_VERSION)
    return hccl_err(hcclInvalidUsage, "hcclCommInitRank: unique id of protocol version %u, this library speaks %u",
                    id.version, HCCL_PROTO_VERSION);
  int64_t timeout_ms, spin_us, zero_copy, cma;
  hcclResult_t r = hccl_default_timeout_ms(&timeout_ms);
  /* The numeric settings, checked before anything is set up (or any peer
   * contacted): a bad value fails init with a message naming it. */
  if (r == hcclSuccess) r = hccl_env_int("HCCL_SPIN_US", -1, 0, 10000000, &spin_us);
  if (r == hcclSuccess) r = hccl_env_int("HCCL_ZERO_COPY", 1, 0, 1, &zero_copy);
  if (r == hcclSuccess) r = hccl_env_int("HCCL_CMA", 0, 0, 1, &cma);
  uint64_t small = UINT64_MAX, slot = 0, mbox = 0;
  if (r == hcclSuccess) r = hccl_env_size("HCCL_SMALL_BYTES", UINT64_MAX, 0, 1ULL << 40, &small);
  /* Staging slots and mailboxes: a size of 0 would make the staged loops
   * endless; at least a page, at most 1 GiB (the shared segment holds two
   * slots per local rank and two mailboxes per pair of them). */
  if (r == hcclSuccess) r = hccl_env_size("HCCL_SHM_SLOT_BYTES", 1 << 20, 4096, 1 << 30, &slot);
  if (r == hcclSuccess) r = hccl_env_size("HCCL_SHM_MBOX_BYTES", 256 << 10, 4096, 1 << 30, &mbox);
  if (r != hcclSuccess) return r;
  int device = -1;
  if (config && config->size >= offsetof(hcclConfig_t, timeoutMs) + sizeof(int) &&
      config->timeoutMs != HCCL_CONFIG_UNDEF_INT && config->timeoutMs > 0)
    timeout_ms = config->timeoutMs;

  hcclComm_t comm = calloc(1, sizeof *comm);
  if (!comm) return hccl_err(hcclSystemError, "out of memory");
  comm->magic = HCCL_COMM_MAGIC;
  comm->rank = rank;
  comm->nranks = nranks;
  comm->device = device;
  comm->listen_fd = -1;
  comm->refs = 1;
  atomic_store(&comm->timeout_ms, timeout_ms);
  pthread_mutex_init(&comm->lock, NULL);
  pthread_cond_init(&comm->cond, NULL);
  comm->zero_copy = zero_copy != 0;
  comm->cma_env = cma != 0;
  comm->small_bytes = small;
  comm->shm.slot_bytes = (size_t)slot;
  comm->shm.mbox_bytes = (size_t)mbox;
  comm->info = calloc((size_t)nranks, sizeof *comm->info);
  comm->sock = malloc(sizeof(int) * (size_t)nranks);
  comm->send_seq = calloc((size_t)nranks, sizeof(uint64_t));
  comm->recv_seq = calloc((size_t)nranks, sizeof(uint64_t));
  if (!comm->info || !comm->sock || !comm->send_seq || !comm->recv_seq) { r = hccl_err(hcclSystemError, "out of memory"); goto fail; }
  for (int i = 0; i < nranks; i++) comm->sock[i] = -1;
  if ((r = hccl_bootstrap_exchange(&id, nranks, rank, device, timeout_ms, &comm->listen_fd, &comm->session,
                                   comm->info)) != hcclSuccess)
    goto fail;
  if ((r = build_topology(comm)) != hcclSuccess) goto fail;
  comm->pidfd = malloc(sizeof(int) * (size_t)comm->local_n);
  if (!comm->pidfd) { r = hccl_err(hcclSystemError, "out of memory"); goto fail; }
  for (int i = 0; i < comm->local_n; i++) {
    int pid = comm->info[comm->local_ranks[i]].pid;
    comm->pidfd[i] = pid == getpid() ? -1 : (int)syscall(SYS_pidfd_open, pid, 0);
  }
  comm->spin_ns = default_spin_ns(comm->local_n, comm->nhosts, spin_us);
  if ((r = hccl_shm_setup(comm)) != hcclSuccess) goto fail;
  if (comm->nhosts > 1 && (r = hccl_net_setup(comm, hccl_comm_deadline(comm))) != hcclSuccess) goto fail;
  hccl_debug("rank %d/%d: %d hosts, %d local ranks, segment %s", rank, nranks, comm->nhosts, comm->local_n,
             comm->shm.name);
  *out = comm;
  return hcclSuccess;
fail:;
  char keep[512];
  snprintf(keep, sizeof keep, "%s", hccl_thread_error());
  if (comm->shm.hdr) atomic_store(&comm->shm.hdr->abort, 1 + rank);
  comm_free(comm);
  return hccl_err(r, "%s", keep);
}

hcclResult_t hcclCommInitRank(hcclComm_t *comm, int nranks, hcclUniqueId commId, int rank) {
  return hcclCommInitRankConfig(comm, nranks, commId, rank, NULL);
}

typedef struct init_all_arg {
  hcclComm_t *comm;
  int nranks, rank, device;
  hcclUniqueId id;
  hcclResult_t r;
  char msg[512];
} init_all_arg_t;

static void *init_all_thread(void *p) {
  init_all_arg_t *a = p;
  a->r = hcclCommInitRank(a->comm, a->nranks, a->id, a->rank);
  if (a->r == hcclSuccess) (*a->comm)->device = a->device;
  else snprintf(a->msg, sizeof a->msg, "%s", hccl_thread_error());
  return NULL;
}

hcclResult_t hcclCommInitAll(hcclComm_t *comms, int ndev, const int *devlist) {
  hccl_clear_error();
  if (!comms || ndev <= 0) return hccl_err(hcclInvalidArgument, "hcclCommInitAll: bad arguments");
  hcclUniqueId id;
  hcclResult_t r = hcclGetUniqueId(&id);
  if (r != hcclSuccess) return r;
  pthread_t *t = calloc((size_t)ndev, sizeof *t);
  init_all_arg_t *a = calloc((size_t)ndev, sizeof *a);
  if (!t || !a) { free(t); free(a); return hccl_err(hcclSystemError, "out of memory"); }
  for (int i = 0; i < ndev; i++) {
    a[i] = (init_all_arg_t){&comms[i], ndev, i, devlist ? devlist[i] : i, id, hcclSuccess, ""};
    pthread_create(&t[i], NULL, init_all_thread, &a[i]);
  }
  r = hcclSuccess;
  int bad = -1;
  for (int i = 0; i < ndev; i++) {
    pthread_join(t[i], NULL);
    if (a[i].r != hcclSuccess && r == hcclSuccess) { r = a[i].r; bad = i; }
  }
  if (r != hcclSuccess) {
    for (int i = 0; i < ndev; i++)
      if (a[i].r == hcclSuccess) hcclCommDestroy(comms[i]);
    hccl_err(r, "hcclCommInitAll: rank %d: %s", bad, a[bad].msg);
  }
  free(t);
  free(a);
  return r;
}

/* Waits for every issued operation to finish (it fails fast once aborted). */
static void drain(hcclComm_t comm) {
  pthread_mutex_lock(&comm->lock);
  while (comm->done_ticket != comm->issue_ticket) pthread_cond_wait(&comm->cond, &comm->lock);
  pthread_mutex_unlock(&comm->lock);
}

hcclResult_t hcclCommFinalize(hcclComm_t comm) {
  hcclResult_t r = hccl_comm_check(comm);
  if (r != hcclSuccess) return r;
  drain(comm);
  return comm->async_error;
}

hcclResult_t hcclCommDestroy(hcclComm_t comm) {
  if (!comm) return hcclSuccess;
  hcclResult_t r = hccl_comm_check(comm);
  if (r != hcclSuccess) return r;
  drain(comm);
  pthread_mutex_lock(&comm->lock);
  comm->destroying = true;
  pthread_mutex_unlock(&comm->lock);
  hccl_comm_unref(comm);
  return hcclSuccess;
}

hcclResult_t hcclCommAbort(hcclComm_t comm) {
  if (!comm) return hcclSuccess;
  hcclResult_t r = hccl_comm_check(comm);
  if (r != hcclSuccess) return r;
  atomic_store(&comm->aborted, 1);
  char msg[96];
  snprintf(msg, sizeof msg, "communicator aborted by rank %d", comm->rank);
  hccl_comm_fail(comm, hcclRemoteError, msg);
  drain(comm);
  pthread_mutex_lock(&comm->lock);
  comm->destroying = true;
  pthread_mutex_unlock(&comm->lock);
  hccl_comm_unref(comm);
  return hcclSuccess;
}

hcclResult_t hcclCommGetAsyncError(hcclComm_t comm, hcclResult_t *err) {
  hcclResult_t r = hccl_comm_check(comm);
  if (r != hcclSuccess) return r;
  if (!err) return hccl_err(hcclInvalidArgument, "hcclCommGetAsyncError: NULL result pointer");
  pthread_mutex_lock(&comm->lock);
  *err = comm->async_error;
  pthread_mutex_unlock(&comm->lock);
  if (*err == hcclSuccess && comm->shm.hdr && atomic_load(&comm->shm.hdr->abort)) *err = hcclRemoteError;
  return hcclSuccess;
}

hcclResult_t hcclCommCount(const hcclComm_t comm, int *count) {
  hcclResult_t r = hccl_comm_check(comm);
  if (r != hcclSuccess) return r;
  if (!count) return hccl_err(hcclInvalidArgument, "hcclCommCount: NULL");
  *count = comm->nranks;
  return hcclSuccess;
}

hcclResult_t hcclCommUserRank(const hcclComm_t comm, int *rank) {
  hcclResult_t r = hccl_comm_check(comm);
  if (r != hcclSuccess) return r;
  if (!rank) return hccl_err(hcclInvalidArgument, "hcclCommUserRank: NULL");
  *rank = comm->rank;
  return hcclSuccess;
}

hcclResult_t hcclCommCuDevice(const hcclComm_t comm, int *device) {
  hcclResult_t r = hccl_comm_check(comm);
  if (r != hcclSuccess) return r;
  if (!device) return hccl_err(hcclInvalidArgument, "hcclCommCuDevice: NULL");
  *device = comm->device;
  return hcclSuccess;
}

hcclResult_t hcclCommSetTimeout(hcclComm_t comm, int timeout_ms) {
  hcclResult_t r = hccl_comm_check(comm);
  if (r != hcclSuccess) return r;
  int64_t t = timeout_ms;
  if (t <= 0 && (r = hccl_default_timeout_ms(&t)) != hcclSuccess) return r;
  atomic_store(&comm->timeout_ms, t);
  return hcclSuccess;
}

/* Split: gather (color, key) over the parent; the lowest rank of each color
 * makes the new unique id and everyone gathers the ids; then a normal init. */
typedef struct split_entry {
  int32_t color, key, rank, pad;
  hcclUniqueId id;
} split_entry_t;

hcclResult_t hcclCommSplit(hcclComm_t comm, int color, int key, hcclComm_t *newcomm, hcclConfig_t *config) {
  hccl_clear_error();
  hcclResult_t r = hccl_comm_check(comm);
  if (r != hcclSuccess) return r;
  if (!newcomm) return hccl_err(hcclInvalidArgument, "hcclCommSplit: newcomm is NULL");
  if (color < 0 && color != HCCL_SPLIT_NOCOLOR) return hccl_err(hcclInvalidArgument, "hcclCommSplit: color %d", color);
  *newcomm = NULL;
  const int n = comm->nranks;
  split_entry_t *all = calloc((size_t)n, sizeof *all);
  if (!all) return hccl_err(hcclSystemError, "out of memory");
  split_entry_t mine;
  memset(&mine, 0, sizeof mine);
  mine.color = color;
  mine.key = key;
  mine.rank = comm->rank;
  if ((r = hcclAllGather(&mine, all, sizeof mine, hcclUint8, comm, NULL)) != hcclSuccess) goto out;
  int leader = -1, size = 0, myrank = 0;
  for (int i = 0; i < n && color != HCCL_SPLIT_NOCOLOR; i++) {
    if (all[i].color != color) continue;
    if (leader < 0) leader = i;
    size++;
    if (all[i].key < key || (all[i].key == key && i < comm->rank)) myrank++;
  }
  /* The new root listens where this rank's peers already reach it. */
  if (leader == comm->rank &&
      (r = hccl_make_unique_id(&comm->info[comm->rank].listen_addr, atomic_load(&comm->timeout_ms), &mine.id)) !=
          hcclSuccess) {
    /* Still take part in the gather so the others do not hang. */
    memset(&mine.id, 0, sizeof mine.id);
  }
  hcclResult_t gr = hcclAllGather(&mine, all, sizeof mine, hcclUint8, comm, NULL);
  if (r == hcclSuccess) r = gr;
  if (r != hcclSuccess || color == HCCL_SPLIT_NOCOLOR) goto out;
  hcclConfig_t cfg = HCCL_CONFIG_INITIALIZER;
  if (!config) {
    cfg.timeoutMs = (int)atomic_load(&comm->timeout_ms);
    config = &cfg;
  }
  r = hcclCommInitRankConfig(newcomm, size, all[leader].id, myrank, config);
  if (r == hcclSuccess) (*newcomm)->device = comm->device;
out:
  free(all);
  return r;
}
