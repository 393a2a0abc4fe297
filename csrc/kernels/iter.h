/* The one strided N-d iterator of the kernel library.
 *
 * Operand 0 is the output and defines the iteration shape; inputs are
 * broadcast to it (missing leading dims and size-1 dims get stride 0).
 * Building the iterator:
 *   1. takes dims innermost-first, strides converted to bytes;
 *   2. drops size-1 dims;
 *   3. unless HPU_ITER_KEEP_ORDER, sorts dims so the output's strides grow
 *      outward (inputs break ties), so a transposed output is written in
 *      memory order;
 *   4. coalesces neighbouring dims that are contiguous for every operand.
 * An all-contiguous elementwise op ends up as one dim whose strides equal
 * the element sizes, which the typed inner loops detect (their fast path).
 *
 * hpu_iter_for_each splits the flat index range over hpu_parallel_for and
 * calls a 1-d inner loop per run along dim 0 with per-operand byte strides.
 * With HPU_ITER_KEEP_ORDER the `index` handed to the loop is the row-major
 * index of the run's first element in the output (the RNG kernels use it). */
#ifndef HPU_KERNELS_ITER_H
#define HPU_KERNELS_ITER_H

#include <stdint.h>

#include "hpu/op.h"
#include "runtime/schedule_policy.h" /* HPU_GRAIN */

#define HPU_ITER_MAX_OPS (HPU_MAX_OUTPUTS + HPU_MAX_INPUTS)
#define HPU_ITER_KEEP_ORDER 1


typedef struct hpu_iter {
  int ndim;    /* after coalescing; dim 0 is the innermost */
  int nops;    /* operand 0 = output */
  int64_t numel;
  int64_t shape[HPU_MAX_DIMS];
  int64_t strides[HPU_MAX_DIMS][HPU_ITER_MAX_OPS]; /* bytes, [dim][operand] */
  char *data[HPU_ITER_MAX_OPS];
  hpu_dtype_t dtypes[HPU_ITER_MAX_OPS];
} hpu_iter_t;

/* data: operand pointers at the run start; strides: their dim-0 byte strides;
 * n: run length; index: flat index of the run's first element. */
typedef void (*hpu_loop_fn)(void *ctx, char **data, const int64_t *strides, int64_t n,
                            int64_t index);

/* Shapes must have been validated (inputs broadcastable to out). NULL
 * entries in `inputs` are skipped. */
void hpu_iter_build(hpu_iter_t *it, const hpu_tensor_t *out, const hpu_tensor_t *const *inputs,
                    int ninputs, int flags);
void hpu_iter_for_each(const hpu_iter_t *it, hpu_loop_fn loop, void *ctx, int64_t grain);
/* True when the iterator is one run with every stride equal to its element
 * size (or nothing to do). */
int hpu_iter_is_contiguous(const hpu_iter_t *it);

#endif
