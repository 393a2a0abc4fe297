/* The process-wide kernel thread pool. Kernels split work with
 * hpu_parallel_for; the calling thread takes part, so a pool of size 1 runs
 * everything inline. Nested calls run inline. */
#ifndef HPU_PARALLEL_H
#define HPU_PARALLEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*hpu_range_fn)(void *ctx, int64_t begin, int64_t end);

/* Splits [0, n) into at most hpu_get_num_threads() chunks of at least
 * `grain` items and runs fn on each; returns when all are done. */
void hpu_parallel_for(int64_t n, int64_t grain, hpu_range_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
