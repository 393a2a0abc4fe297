/* Streams and events.
 *
 * Each card has one in-order hardware queue served by a worker thread
 * (started on first use). Streams are logical handles on that queue: work
 * from every stream of a card runs in submission order, which is stronger
 * ordering than CUDA promises and keeps stream-ordered memory reuse trivially
 * safe. Streams have ids (0 = the default stream) so PyTorch's stream API
 * round-trips through c10::Stream. */
#ifndef HPU_STREAM_H
#define HPU_STREAM_H

#include <stdint.h>
#include "hpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hpu_stream {
  int device;
  int64_t id;   /* 0 = default; others from hpu_stream_create */
} hpu_stream_t;

hpu_status_t hpu_stream_default(int device, hpu_stream_t *stream);
/* A new logical stream id on the card (ids are never reused). */
hpu_status_t hpu_stream_create(int device, hpu_stream_t *stream);

/* A unit of work run by the card's worker. Returns a status; a failure is
 * stored on the card (first error wins, with hpu_last_error's text) and
 * returned by the next synchronize/query, which then clears it. */
typedef hpu_status_t (*hpu_task_fn)(void *arg);

/* Enqueues fn(arg); then release(arg) is called by the worker (release may
 * be NULL). Returns at once. */
hpu_status_t hpu_stream_enqueue(hpu_stream_t stream, hpu_task_fn fn, void *arg,
                                void (*release)(void *arg));

/* Waits until everything queued on the card before this call has run. */
hpu_status_t hpu_stream_synchronize(hpu_stream_t stream);
/* HPU_SUCCESS if idle, HPU_ERROR_NOT_READY if work is pending. */
hpu_status_t hpu_stream_query(hpu_stream_t stream);

/* Events. */
typedef struct hpu_event *hpu_event_t;
hpu_status_t hpu_event_create(hpu_event_t *event, int enable_timing);
hpu_status_t hpu_event_destroy(hpu_event_t event);
/* Marks the point in the stream; the event completes when the worker gets
 * there (and takes a CLOCK_MONOTONIC timestamp if timing is enabled).
 * Recording again re-arms it. */
hpu_status_t hpu_event_record(hpu_event_t event, hpu_stream_t stream);
/* SUCCESS if complete (or never recorded), NOT_READY otherwise. */
hpu_status_t hpu_event_query(hpu_event_t event);
hpu_status_t hpu_event_synchronize(hpu_event_t event);
/* Milliseconds between two completed, timing-enabled events. */
hpu_status_t hpu_event_elapsed_ms(hpu_event_t start, hpu_event_t end, float *ms);
/* Work queued on `stream` after this call starts only after `event`
 * completed (needed across cards; a no-op on the same card). */
hpu_status_t hpu_stream_wait_event(hpu_stream_t stream, hpu_event_t event);

#ifdef __cplusplus
}
#endif
#endif
