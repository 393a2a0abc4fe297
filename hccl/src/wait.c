/* Waiting between local ranks: spin a little (cheap when every rank has a
 * core), then sleep on this rank's futex word, which any poster bumps when
 * it sees a sleeper. Every wake-up, and every HCCL_ALIVE_CHECK_NS of
 * spinning, checks the abort words, the deadline and whether a local
 * peer's process is gone (wait_policy.h has the times). */
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "hpu/clock.h"
#include "internal.h"
#include "wait_policy.h"

static void futex_wait(atomic_uint *w, unsigned val, int64_t ns) {
  struct timespec ts = {ns / 1000000000, ns % 1000000000};
  syscall(SYS_futex, (unsigned *)w, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake(atomic_uint *w) { syscall(SYS_futex, (unsigned *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0); }

void hccl_wake(hcclComm_t comm, int li) {
  hccl_shm_ctrl_t *c = &comm->shm.ctrl[li];
  if (atomic_load(&c->sleeping) > 0) {
    atomic_fetch_add(&c->wake, 1);
    futex_wake(&c->wake);
  }
}

void hccl_wake_all(hcclComm_t comm) {
  if (!comm->shm.hdr) return;
  for (int i = 0; i < comm->local_n; i++)
    if (i != comm->local) hccl_wake(comm, i);
}

void hccl_post(hcclComm_t comm) {
  atomic_store(&comm->shm.ctrl[comm->local].step, ++comm->step);
  hccl_wake_all(comm);
}

/* The failure, if any, that ends every wait of this comm. */
static hcclResult_t check_abort(hcclComm_t comm) {
  if (atomic_load_explicit(&comm->aborted, memory_order_relaxed))
    return hccl_err(hcclRemoteError, "communicator aborted (hcclCommAbort) on rank %d", comm->rank);
  if (comm->shm.hdr) {
    int who = atomic_load_explicit(&comm->shm.hdr->abort, memory_order_relaxed);
    if (who) {
      if (who - 1 == comm->rank && atomic_load(&comm->failed))
        return hccl_err(hcclRemoteError, "communicator failed earlier on this rank: %s", comm->async_msg);
      return hccl_err(hcclRemoteError, "rank %d failed or aborted the communicator", who - 1);
    }
  }
  if (atomic_load_explicit(&comm->failed, memory_order_relaxed))
    return hccl_err(hcclRemoteError, "communicator failed earlier: %s", comm->async_msg);
  return hcclSuccess;
}

hcclResult_t hccl_check_alive(hcclComm_t comm, int64_t deadline, const char *what) {
  hcclResult_t r = check_abort(comm);
  if (r != hcclSuccess) return r;
  for (int i = 0; i < comm->local_n; i++) {
    if (i == comm->local || comm->pidfd[i] < 0) continue;
    struct pollfd p = {comm->pidfd[i], POLLIN, 0};
    if (poll(&p, 1, 0) > 0)
      return hccl_err(hcclRemoteError, "rank %d (pid %d) died while rank %d was waiting in %s",
                      comm->local_ranks[i], comm->info[comm->local_ranks[i]].pid, comm->rank, what);
  }
  if (hccl_now_ns() > deadline)
    return hccl_err(hcclRemoteError, "rank %d timed out after %lld ms in %s", comm->rank,
                    (long long)atomic_load(&comm->timeout_ms), what);
  return hcclSuccess;
}

hcclResult_t hccl_wait(hcclComm_t comm, hccl_cond_fn cond, void *arg, const char *what) {
  if (cond(comm, arg)) return hcclSuccess;
  hcclResult_t r;
  int64_t deadline = hccl_comm_deadline(comm);
  /* Spin for a bounded time, reading the clock once a burst and checking
   * peers' liveness and the deadline now and then, yielding between bursts
   * after a while (wait_policy.h says why). */
  int64_t spin_end = 0, next_check = 0, yield_after = 0;
  for (unsigned i = 1; comm->spin_ns > 0; i++) {
    hpu_cpu_relax();
    if (cond(comm, arg)) return hcclSuccess;
    if (i % HCCL_SPIN_BURST == 0) {
      int64_t t = hccl_now_ns();
      if (!spin_end) {
        spin_end = t + comm->spin_ns;
        next_check = t + HCCL_ALIVE_CHECK_NS;
        yield_after = t + HCCL_SPIN_YIELD_AFTER_NS;
      } else if (t > spin_end) {
        break;
      } else if (t > yield_after) {
        sched_yield();
      }
      if ((r = check_abort(comm)) != hcclSuccess) return r;
      if (t > next_check) {
        if ((r = hccl_check_alive(comm, deadline, what)) != hcclSuccess) return r;
        next_check = t + HCCL_ALIVE_CHECK_NS;
      }
    }
  }
  hccl_shm_ctrl_t *me = &comm->shm.ctrl[comm->local];
  int yields = 0;
  for (;;) {
    if ((r = hccl_check_alive(comm, deadline, what)) != hcclSuccess) return r;
    /* A few yields first (wait_policy.h). */
    if (yields < HCCL_SLEEP_YIELDS) {
      yields++;
      sched_yield();
      if (cond(comm, arg)) return hcclSuccess;
      continue;
    }
    atomic_fetch_add(&me->sleeping, 1);
    atomic_thread_fence(memory_order_seq_cst);
    unsigned v = atomic_load(&me->wake);
    if (cond(comm, arg)) {
      atomic_fetch_sub(&me->sleeping, 1);
      return hcclSuccess;
    }
    futex_wait(&me->wake, v, HCCL_FUTEX_SLICE_NS);   /* slices bound the reaction to death and timeouts */
    atomic_fetch_sub(&me->sleeping, 1);
    if (cond(comm, arg)) return hcclSuccess;
  }
}

static bool all_posted(hcclComm_t comm, void *arg) {
  (void)arg;
  const unsigned target = comm->step;
  for (int i = 0; i < comm->local_n; i++) {
    if (i == comm->local) continue;
    if ((int)(atomic_load_explicit(&comm->shm.ctrl[i].step, memory_order_acquire) - target) < 0) return false;
  }
  return true;
}

hcclResult_t hccl_wait_all_posted(hcclComm_t comm, const char *what) {
  return hccl_wait(comm, all_posted, NULL, what);
}
