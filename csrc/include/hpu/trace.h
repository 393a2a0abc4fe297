/* Device-side trace events for a profiler (torch.profiler through
 * backend/hpu_profiler.cpp): what each card's engines ran, when, for which
 * host op.
 *
 * Recording is off unless a profiler started it: every recording site first
 * reads one relaxed atomic word (hpu_trace_active), so the hot paths pay a
 * load and a predictable branch. While on, the worker (or whichever thread
 * runs a card's task) appends events to that card's buffer.
 *
 * The host op that caused an event is named by a correlation id: the
 * profiler sets the calling thread's current id (hpu_trace_set_correlation)
 * around each host op; the node, or the collective's task, carries the id
 * taken when it was recorded or enqueued on the host, to the thread that
 * runs it later. */
#ifndef HPU_TRACE_H
#define HPU_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "hpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The lanes of a card, as on a Gaudi: matrix engine (matmuls), tensor
 * processor cores (every other kernel, fused groups included), DMA (copies)
 * and the collective engine. */
typedef enum hpu_engine {
  HPU_ENGINE_MME = 0,
  HPU_ENGINE_TPC,
  HPU_ENGINE_DMA,
  HPU_ENGINE_HCCL,
  HPU_ENGINE_COUNT
} hpu_engine_t;

#define HPU_TRACE_NAME_LEN 80

typedef struct hpu_trace_event {
  uint64_t start_ns, end_ns; /* hpu_now_ns (CLOCK_MONOTONIC) */
  uint64_t bytes;            /* read + written */
  uint64_t flops;            /* matmuls only, else 0 */
  uint64_t correlation;      /* the host op's id, 0 when unknown */
  int32_t device;
  int32_t engine;            /* hpu_engine_t */
  char name[HPU_TRACE_NAME_LEN];
} hpu_trace_event_t;

/* Non-zero while a profiler records (one relaxed load). */
extern int hpu_trace_flag;
static inline int hpu_trace_active(void) { return __atomic_load_n(&hpu_trace_flag, __ATOMIC_RELAXED); }

/* Reads HPU_TRACE_MAX_EVENTS, the events kept per card (later ones are
 * counted as dropped); hpu_init calls it. */
hpu_status_t hpu_trace_configure(void);
/* Drops any old events and starts recording. */
hpu_status_t hpu_trace_start(void);
/* Waits for the work already queued on the cards (ops lazy mode has
 * recorded but not launched are not waited for), then stops recording;
 * events stay until collected. */
void hpu_trace_stop(void);
/* Moves every recorded event (all cards, each card's in order) into a new
 * malloc'd array owned by the caller (free() it; NULL when none) and
 * returns how many; *dropped (if given) gets how many did not fit. */
size_t hpu_trace_collect(hpu_trace_event_t **events, uint64_t *dropped);

/* The calling thread's current host op (0: none). */
void hpu_trace_set_correlation(uint64_t id);
uint64_t hpu_trace_correlation(void);

/* Appends one event to ev->device's buffer (no-op when not recording or
 * the device index is out of range). */
void hpu_trace_record(const hpu_trace_event_t *ev);

const char *hpu_engine_name(int engine); /* "MME", "TPC", "DMA", "HCCL" */

#ifdef __cplusplus
}
#endif
#endif
