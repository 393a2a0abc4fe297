/* Streams: logical handles {device, id} on the card's single in-order queue.
 * Ids are handed out per card and never reused; 0 is the default stream. */
#include <stdatomic.h>

#include "hpu/lazy.h"
#include "hpu/stream.h"
#include "runtime/runtime.h"

static _Atomic int64_t last_id[HPU_MAX_CARDS];

hpu_status_t hpu_rt_check_stream(hpu_stream_t s) {
  hpu_status_t st = hpu_rt_enter_device(s.device);
  if (st != HPU_SUCCESS) return st;
  if (s.id < 0 || s.id > atomic_load_explicit(&last_id[s.device], memory_order_relaxed))
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                     "invalid hpu stream id %lld on hpu:%d (not created by hpu_stream_create)",
                     (long long)s.id, s.device);
  return HPU_SUCCESS;
}

hpu_status_t hpu_stream_default(int device, hpu_stream_t *stream) {
  if (!stream) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_stream_default: stream is NULL");
  hpu_status_t st = hpu_rt_enter_device(device);
  if (st != HPU_SUCCESS) return st;
  stream->device = device;
  stream->id = 0;
  return HPU_SUCCESS;
}

hpu_status_t hpu_stream_create(int device, hpu_stream_t *stream) {
  if (!stream) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_stream_create: stream is NULL");
  hpu_status_t st = hpu_rt_enter_device(device);
  if (st != HPU_SUCCESS) return st;
  stream->device = device;
  stream->id = atomic_fetch_add(&last_id[device], 1) + 1;
  return HPU_SUCCESS;
}

hpu_status_t hpu_stream_enqueue(hpu_stream_t stream, hpu_task_fn fn, void *arg,
                                void (*release)(void *arg)) {
  if (!fn) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_stream_enqueue: fn is NULL");
  hpu_status_t st = hpu_rt_check_stream(stream);
  if (st != HPU_SUCCESS) return st;
  /* Work recorded by lazy mode goes first (collectives, events, host tasks
   * are flush points). */
  if ((st = hpu_lazy_flush(stream.device)) != HPU_SUCCESS) return st;
  return hpu_queue_push(stream.device, fn, arg, release);
}

hpu_status_t hpu_stream_synchronize(hpu_stream_t stream) {
  hpu_status_t st = hpu_rt_check_stream(stream);
  if (st != HPU_SUCCESS) return st;
  if ((st = hpu_queue_check_wait(stream.device)) != HPU_SUCCESS) return st;
  if ((st = hpu_lazy_flush_to_wait(stream.device)) != HPU_SUCCESS) return st;
  return hpu_queue_sync(stream.device);
}

hpu_status_t hpu_stream_query(hpu_stream_t stream) {
  hpu_status_t st = hpu_rt_check_stream(stream);
  if (st != HPU_SUCCESS) return st;
  if (hpu_lazy_pending(stream.device)) return hpu_error(HPU_ERROR_NOT_READY, "hpu:%d: recorded work has not been launched", stream.device);
  return hpu_queue_query(stream.device);
}
