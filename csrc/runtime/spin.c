/* Bounded spinning before a thread sleeps on a condvar. Waking a sleeping
 * thread costs a futex call and a few microseconds of latency, which
 * dominates small ops; spinning costs a CPU. So: spin in short bursts of
 * pause instructions, yield between bursts (another thread on this CPU may be
 * the one we wait for), and give up after a small budget. A process limited
 * to one CPU never spins. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "runtime/runtime.h"
#include "runtime/schedule_policy.h"

static int single_cpu = -1;
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

static void detect_cpus(void) {
  cpu_set_t set;
  int n = 2;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  single_cpu = n <= 1;
}

int hpu_spin_until(int (*cond)(void *), void *arg, uint64_t budget_ns) {
  int r = cond(arg);
  if (r) return r;
  pthread_once(&cpu_once, detect_cpus);
  if (single_cpu || budget_ns == 0) return 0;
  uint64_t deadline = hpu_now_ns() + budget_ns;
  for (;;) {
    for (int i = 0; i < HPU_SPIN_BURST; i++) {
      if ((r = cond(arg))) return r;
      hpu_cpu_relax();
    }
    if (hpu_now_ns() > deadline) return cond(arg);
    sched_yield();
  }
}

int hpu_spin_enabled(void) {
  pthread_once(&cpu_once, detect_cpus);
  return !single_cpu;
}

typedef struct {
  const _Atomic uint64_t *word;
  uint64_t v;
} word_wait_t;

static int word_reached(void *p) {
  const word_wait_t *w = p;
  return atomic_load_explicit(w->word, memory_order_acquire) >= w->v;
}

int hpu_spin_wait_ge_u64(const void *word, uint64_t target, uint64_t budget_ns) {
  word_wait_t w = {(const _Atomic uint64_t *)word, target};
  return hpu_spin_until(word_reached, &w, budget_ns);
}
