/* Ranked mutexes: the checker of the lock hierarchy written in lock.h. */
#include "runtime/lock.h"

void hpu_mutex_init(hpu_mutex_t *m, int rank, const char *name) {
  pthread_mutex_init(&m->mu, NULL);
  m->rank = rank;
  m->name = name;
}

#ifdef HPU_LOCK_CHECK
#include <stdio.h>
#include <stdlib.h>

#define MAX_HELD 16

/* What this thread holds, in the order taken. A queue task's pseudo-lock
 * (QUEUE_WAIT) sits in the same list with no mutex. */
static _Thread_local struct {
  int rank;
  const char *name;
} held[MAX_HELD];
static _Thread_local int nheld;

static int top_rank(const char **name) {
  int best = 0;
  for (int i = 0; i < nheld; i++) {
    if (held[i].rank >= best) {
      best = held[i].rank;
      if (name) *name = held[i].name;
    }
  }
  return best;
}

static void violation(int rank, const char *name) {
  const char *top = "?";
  int have = top_rank(&top);
  fprintf(stderr,
          "habana_torch: lock order violated: taking '%s' (rank %d) while holding '%s' "
          "(rank %d); see csrc/runtime/lock.h\n",
          name, rank, top, have);
  abort();
}

static void push(int rank, const char *name) {
  if (nheld && rank <= top_rank(NULL)) violation(rank, name);
  if (nheld == MAX_HELD) violation(rank, name);
  held[nheld].rank = rank;
  held[nheld].name = name;
  nheld++;
}

/* Locks may be released in any order. */
static void pop(int rank, const char *name) {
  for (int i = nheld - 1; i >= 0; i--) {
    if (held[i].rank == rank && held[i].name == name) {
      for (int j = i; j + 1 < nheld; j++) held[j] = held[j + 1];
      nheld--;
      return;
    }
  }
  fprintf(stderr, "habana_torch: releasing '%s' (rank %d), which this thread does not hold\n", name,
          rank);
  abort();
}

void hpu_mutex_lock(hpu_mutex_t *m) {
  push(m->rank, m->name);
  pthread_mutex_lock(&m->mu);
}

void hpu_mutex_unlock(hpu_mutex_t *m) {
  pthread_mutex_unlock(&m->mu);
  pop(m->rank, m->name);
}

int hpu_mutex_trylock(hpu_mutex_t *m) {
  /* A try cannot deadlock, but holding it still orders what comes next. */
  int rc = pthread_mutex_trylock(&m->mu);
  if (rc == 0) {
    if (nheld == MAX_HELD) violation(m->rank, m->name);
    held[nheld].rank = m->rank;
    held[nheld].name = m->name;
    nheld++;
  }
  return rc;
}

void hpu_cond_wait(pthread_cond_t *cv, hpu_mutex_t *m) { pthread_cond_wait(cv, &m->mu); }

void hpu_lock_check_may_wait(const char *what) {
  const char *top = "?";
  int have = nheld ? top_rank(&top) : 0;
  if (have >= HPU_RANK_QUEUE_WAIT) {
    fprintf(stderr,
            "habana_torch: lock order violated: %s waits for a card queue while holding '%s' "
            "(rank %d); see csrc/runtime/lock.h\n",
            what, top, have);
    abort();
  }
}

static const char task_name[] = "queue task";

void hpu_lock_task_enter(void) { push(HPU_RANK_QUEUE_WAIT, task_name); }
void hpu_lock_task_leave(void) { pop(HPU_RANK_QUEUE_WAIT, task_name); }
int hpu_lock_held_rank(void) { return top_rank(NULL); }
#endif
