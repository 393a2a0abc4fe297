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

/* Splits [0, n) into chunks of at least `grain` items, a few per thread
 * (HPU_PARALLEL_SPLIT in runtime/schedule_policy.h), and runs fn on each,
 * on the calling thread and the pool; returns when all are done. */
void hpu_parallel_for(int64_t n, int64_t grain, hpu_range_fn fn, void *ctx);

/* Runs unclaimed chunks of the job the pool is running, if any, on the
 * calling thread (a thread that would otherwise wait idle, e.g. the host in
 * synchronize). Returns the number of chunks it ran. */
int hpu_parallel_help(void);

/* Non-zero when the pool runs a job with chunks nobody has claimed yet that
 * the calling thread could help with (one atomic load: for spin loops). */
int hpu_parallel_pending(void);

/* Non-zero on a thread that is running a chunk of a parallel_for: a
 * parallel_for it calls runs inline, so a kernel sizing its work by the
 * thread count should plan for one thread. */
int hpu_parallel_inside(void);

#ifdef __cplusplus
}
#endif
#endif
