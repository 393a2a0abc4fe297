/* masked_scatter_: the elements of self where the mask is set, in row-major
 * order, take the source's elements in order. Two passes over blocks of
 * the mask, so that the threads can share the work: the set elements per
 * block, then (from their running total) each block's writes. A source
 * shorter than the mask's count fails the node before anything is
 * written (the CPU raises too, with the same message). */
#include <stdlib.h>
#include <string.h>

#include "hpu/parallel.h"
#include "hpu/status.h"
#include "kernels/nn_util.h"

#define BLOCK 65536

typedef struct {
  const uint8_t *mask;
  const char *src;
  char *out;
  size_t es;
  int64_t n;
  int64_t *count; /* per block; then the source offset of its first element */
} ms_t;

static void count_blocks(void *ctx, int64_t begin, int64_t end) {
  ms_t *c = ctx;
  for (int64_t b = begin; b < end; b++) {
    int64_t lo = b * BLOCK, hi = lo + BLOCK < c->n ? lo + BLOCK : c->n, k = 0;
    for (int64_t e = lo; e < hi; e++) k += c->mask[e] != 0;
    c->count[b] = k;
  }
}

static void write_blocks(void *ctx, int64_t begin, int64_t end) {
  ms_t *c = ctx;
  for (int64_t b = begin; b < end; b++) {
    int64_t lo = b * BLOCK, hi = lo + BLOCK < c->n ? lo + BLOCK : c->n, k = c->count[b];
    for (int64_t e = lo; e < hi; e++)
      if (c->mask[e]) memcpy(c->out + e * (int64_t)c->es, c->src + (k++) * (int64_t)c->es, c->es);
  }
}

hpu_status_t hpu_nn_masked_scatter(const hpu_node_t *node) {
  const hpu_tensor_t *out = &node->outputs[0];
  ms_t c = {hpu_tensor_data(&node->inputs[0]), hpu_tensor_data(&node->inputs[1]), hpu_tensor_data(out),
            hpu_dtype_size(out->dtype), hpu_tensor_numel(out), NULL};
  int64_t nb = (c.n + BLOCK - 1) / BLOCK, src_n = hpu_tensor_numel(&node->inputs[1]);
  if (c.n == 0) return HPU_SUCCESS;
  c.count = malloc((size_t)nb * sizeof(int64_t));
  if (!c.count)
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "masked_scatter: no host memory for %lld block counts", (long long)nb);
  hpu_parallel_for(nb, 1, count_blocks, &c);
  int64_t total = 0;
  for (int64_t b = 0; b < nb; b++) {
    int64_t k = c.count[b];
    c.count[b] = total;
    total += k;
  }
  hpu_status_t st = HPU_SUCCESS;
  if (total > src_n)
    st = hpu_error(HPU_ERROR_INVALID_ARGUMENT, "Number of elements of source < number of ones in mask");
  else
    hpu_parallel_for(nb, 1, write_blocks, &c);
  free(c.count);
  return st;
}
