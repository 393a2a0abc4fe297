/* Events: a marker task on the card's queue. Every record bumps a generation;
 * the event is complete once the worker has reached the latest recorded
 * generation. Queued markers and cross-card waits hold a reference, so an
 * event may be destroyed while work that mentions it is still queued. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "hpu/stream.h"
#include "runtime/runtime.h"
#include "runtime/lock.h"

struct hpu_event {
  hpu_mutex_t mu;
  pthread_cond_t cv;
  atomic_int refs;
  int timing;
  int device;         /* card of the latest record */
  uint64_t recorded;  /* generation of the latest record; 0 = never recorded */
  uint64_t completed; /* highest generation the worker has reached */
  uint64_t stamp_ns;  /* CLOCK_MONOTONIC when `completed` was reached */
};

typedef struct event_task {
  hpu_event_t ev;
  uint64_t gen;
} event_task_t;

static void event_unref(hpu_event_t e) {
  if (atomic_fetch_sub(&e->refs, 1) == 1) {
    pthread_mutex_destroy(&e->mu.mu);
    pthread_cond_destroy(&e->cv);
    free(e);
  }
}

static void release_task(void *p) {
  event_task_t *t = p;
  event_unref(t->ev);
  free(t);
}

hpu_status_t hpu_event_create(hpu_event_t *event, int enable_timing) {
  if (!event) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_event_create: event is NULL");
  *event = NULL;
  hpu_status_t st = hpu_rt_enter();
  if (st != HPU_SUCCESS) return st;
  hpu_event_t e = calloc(1, sizeof *e);
  if (!e) return hpu_error(HPU_ERROR_SYSTEM, "hpu_event_create: out of host memory");
  hpu_mutex_init(&e->mu, HPU_RANK_LEAF, "event");
  pthread_cond_init(&e->cv, NULL);
  atomic_init(&e->refs, 1);
  e->timing = enable_timing != 0;
  e->device = -1;
  *event = e;
  return HPU_SUCCESS;
}

hpu_status_t hpu_event_destroy(hpu_event_t event) {
  if (event) event_unref(event);
  return HPU_SUCCESS;
}

static hpu_status_t mark_task(void *p) {
  event_task_t *t = p;
  hpu_event_t e = t->ev;
  uint64_t now = e->timing ? hpu_now_ns() : 0;
  hpu_mutex_lock(&e->mu);
  if (t->gen > e->completed) { /* records on two cards may complete out of order */
    e->completed = t->gen;
    if (e->timing) e->stamp_ns = now;
    pthread_cond_broadcast(&e->cv);
  }
  hpu_mutex_unlock(&e->mu);
  return HPU_SUCCESS;
}

hpu_status_t hpu_event_record(hpu_event_t e, hpu_stream_t stream) {
  if (!e) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_event_record: event is NULL");
  hpu_stream_t checked;
  hpu_status_t st = hpu_stream_default(stream.device, &checked);
  if (st != HPU_SUCCESS) return st;
  event_task_t *t = malloc(sizeof *t);
  if (!t) return hpu_error(HPU_ERROR_SYSTEM, "hpu_event_record: out of host memory");
  /* Not enqueued under the event lock: after exit began, the queue runs
   * tasks inline and mark_task takes that lock. */
  hpu_mutex_lock(&e->mu);
  t->ev = e;
  t->gen = ++e->recorded;
  e->device = stream.device;
  atomic_fetch_add(&e->refs, 1);
  hpu_mutex_unlock(&e->mu);
  st = hpu_stream_enqueue(stream, mark_task, t, release_task);
  if (st != HPU_SUCCESS) {
    mark_task(t); /* never leave waiters hanging on a record that failed */
    release_task(t);
  }
  return st;
}

hpu_status_t hpu_event_query(hpu_event_t e) {
  if (!e) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_event_query: event is NULL");
  hpu_mutex_lock(&e->mu);
  int done = e->completed >= e->recorded;
  hpu_mutex_unlock(&e->mu);
  return done ? HPU_SUCCESS
              : hpu_error(HPU_ERROR_NOT_READY, "hpu event: the recorded work has not finished");
}

hpu_status_t hpu_event_synchronize(hpu_event_t e) {
  if (!e) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_event_synchronize: event is NULL");
  hpu_mutex_lock(&e->mu);
  uint64_t gen = e->recorded;
  if (e->completed < gen && hpu_queue_current_device() == e->device) {
    hpu_mutex_unlock(&e->mu);
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                     "hpu_event_synchronize: a task on hpu:%d cannot wait for an event "
                     "recorded later on the same card", e->device);
  }
  while (e->completed < gen) hpu_cond_wait(&e->cv, &e->mu);
  hpu_mutex_unlock(&e->mu);
  return HPU_SUCCESS;
}

hpu_status_t hpu_event_elapsed_ms(hpu_event_t start, hpu_event_t end, float *ms) {
  if (!start || !end || !ms)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_event_elapsed_ms: NULL argument");
  hpu_event_t ev[2] = {start, end};
  uint64_t stamp[2];
  for (int i = 0; i < 2; i++) {
    const char *which = i ? "end" : "start";
    hpu_mutex_lock(&ev[i]->mu);
    int timing = ev[i]->timing, recorded = ev[i]->recorded != 0;
    int done = ev[i]->completed >= ev[i]->recorded;
    stamp[i] = ev[i]->stamp_ns;
    hpu_mutex_unlock(&ev[i]->mu);
    if (!timing)
      return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                       "hpu_event_elapsed_ms: the %s event was created without timing "
                       "(enable_timing=True)", which);
    if (!recorded)
      return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                       "hpu_event_elapsed_ms: the %s event was never recorded", which);
    if (!done)
      return hpu_error(HPU_ERROR_NOT_READY,
                       "hpu_event_elapsed_ms: the %s event has not completed yet", which);
  }
  *ms = (float)(((double)stamp[1] - (double)stamp[0]) / 1e6);
  return HPU_SUCCESS;
}

static hpu_status_t wait_task(void *p) {
  event_task_t *t = p;
  hpu_mutex_lock(&t->ev->mu);
  while (t->ev->completed < t->gen) hpu_cond_wait(&t->ev->cv, &t->ev->mu);
  hpu_mutex_unlock(&t->ev->mu);
  return HPU_SUCCESS;
}

hpu_status_t hpu_stream_wait_event(hpu_stream_t stream, hpu_event_t e) {
  if (!e) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_stream_wait_event: event is NULL");
  hpu_stream_t checked;
  hpu_status_t st = hpu_stream_default(stream.device, &checked);
  if (st != HPU_SUCCESS) return st;
  hpu_mutex_lock(&e->mu);
  uint64_t gen = e->recorded;
  int device = e->device;
  int done = e->completed >= gen;
  hpu_mutex_unlock(&e->mu);
  /* Same card: the queue is in order already. */
  if (done || device == stream.device) return HPU_SUCCESS;
  event_task_t *t = malloc(sizeof *t);
  if (!t) return hpu_error(HPU_ERROR_SYSTEM, "hpu_stream_wait_event: out of host memory");
  t->ev = e;
  t->gen = gen;
  atomic_fetch_add(&e->refs, 1);
  st = hpu_stream_enqueue(stream, wait_task, t, release_task);
  if (st != HPU_SUCCESS) release_task(t);
  return st;
}
