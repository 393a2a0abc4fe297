/* hpu/trace.h: per-card buffers of device trace events.
 *
 * A buffer is a growing array under its own leaf mutex. Only a recording
 * profiler takes it (one writer per card in the common case, the card's
 * task runner, plus a collector at the end), so a lock is simpler than a
 * lock-free ring and costs nothing while recording is off. */
#include "hpu/trace.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/device.h"
#include "hpu/env.h"

#include "runtime/lock.h"
#include "runtime/runtime.h"

#define DEFAULT_MAX_EVENTS (1 << 18) /* per card: 32 MB of events at most */

int hpu_trace_flag;

typedef struct {
  hpu_mutex_t mu;
  hpu_trace_event_t *events;
  size_t count, cap;
  uint64_t dropped;
} buffer_t;

static buffer_t buffers[HPU_MAX_CARDS];
static pthread_once_t buffers_once = PTHREAD_ONCE_INIT;
static _Atomic size_t max_events = DEFAULT_MAX_EVENTS;
static _Thread_local uint64_t current_correlation;

static void init_buffers(void) {
  for (int i = 0; i < HPU_MAX_CARDS; i++) hpu_mutex_init(&buffers[i].mu, HPU_RANK_LEAF, "trace buffer");
}

const char *hpu_engine_name(int engine) {
  static const char *const names[HPU_ENGINE_COUNT] = {"MME", "TPC", "DMA", "HCCL"};
  return engine >= 0 && engine < HPU_ENGINE_COUNT ? names[engine] : "?";
}

void hpu_trace_set_correlation(uint64_t id) { current_correlation = id; }
uint64_t hpu_trace_correlation(void) { return current_correlation; }

static void clear(buffer_t *b) {
  free(b->events);
  b->events = NULL;
  b->count = b->cap = 0;
  b->dropped = 0;
}

hpu_status_t hpu_trace_configure(void) {
  long long cap;
  hpu_status_t st = hpu_env_int("HPU_TRACE_MAX_EVENTS", DEFAULT_MAX_EVENTS, 1, 1LL << 26, &cap);
  if (st == HPU_SUCCESS) atomic_store(&max_events, (size_t)cap);
  return st;
}

hpu_status_t hpu_trace_start(void) {
  pthread_once(&buffers_once, init_buffers);
  for (int i = 0; i < HPU_MAX_CARDS; i++) {
    hpu_mutex_lock(&buffers[i].mu);
    clear(&buffers[i]);
    hpu_mutex_unlock(&buffers[i].mu);
  }
  __atomic_store_n(&hpu_trace_flag, 1, __ATOMIC_SEQ_CST);
  return HPU_SUCCESS;
}

/* Work already queued on the cards belongs to the profiled region: wait for
 * it (without taking the cards' sticky errors, which stay for the user's
 * next synchronize), as a CUDA profiler flushes its device buffers. */
void hpu_trace_stop(void) {
  if (hpu_is_initialized() && hpu_queue_current_device() < 0)
    for (int i = 0; i < HPU_MAX_CARDS; i++) hpu_queue_drain(i);
  __atomic_store_n(&hpu_trace_flag, 0, __ATOMIC_SEQ_CST);
}

void hpu_trace_record(const hpu_trace_event_t *ev) {
  if (!hpu_trace_active() || ev->device < 0 || ev->device >= HPU_MAX_CARDS) return;
  pthread_once(&buffers_once, init_buffers);
  buffer_t *b = &buffers[ev->device];
  hpu_mutex_lock(&b->mu);
  if (b->count == b->cap) {
    size_t limit = atomic_load_explicit(&max_events, memory_order_relaxed);
    size_t cap = b->cap ? b->cap * 2 : 1024;
    if (cap > limit) cap = limit;
    hpu_trace_event_t *grown = cap > b->cap ? realloc(b->events, cap * sizeof *grown) : NULL;
    if (!grown) { /* at the limit, or out of host memory: count it, keep going */
      b->dropped++;
      hpu_mutex_unlock(&b->mu);
      return;
    }
    b->events = grown;
    b->cap = cap;
  }
  b->events[b->count++] = *ev;
  hpu_mutex_unlock(&b->mu);
}

size_t hpu_trace_collect(hpu_trace_event_t **events, uint64_t *dropped) {
  pthread_once(&buffers_once, init_buffers);
  *events = NULL;
  if (dropped) *dropped = 0;
  size_t total = 0, filled = 0;
  for (int i = 0; i < HPU_MAX_CARDS; i++) {
    hpu_mutex_lock(&buffers[i].mu);
    total += buffers[i].count;
    hpu_mutex_unlock(&buffers[i].mu);
  }
  hpu_trace_event_t *all = total ? malloc(total * sizeof *all) : NULL;
  for (int i = 0; i < HPU_MAX_CARDS; i++) {
    buffer_t *b = &buffers[i];
    hpu_mutex_lock(&b->mu);
    /* A task still running may have appended since the count above. */
    size_t n = all ? (b->count < total - filled ? b->count : total - filled) : 0;
    if (n) memcpy(all + filled, b->events, n * sizeof *all);
    filled += n;
    if (dropped) *dropped += b->dropped + (b->count - n);
    clear(b);
    hpu_mutex_unlock(&b->mu);
  }
  *events = all;
  return filled;
}
