/* PLACEHOLDER: serial hpu_parallel_for until the thread pool lands
 * (replaced by the runtime work; do not build on this). */
#include "hpu/parallel.h"

void hpu_parallel_for(int64_t n, int64_t grain, hpu_range_fn fn, void *ctx) {
  (void)grain;
  if (n > 0) fn(ctx, 0, n);
}
