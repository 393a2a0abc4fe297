/* The vision op family (ops_vision.def): validators and kernels, called
 * from nn.c's dispatch. */
#ifndef HPU_KERNELS_VISION_H
#define HPU_KERNELS_VISION_H

#include <stdint.h>

#include "hpu/op.h"

hpu_status_t hpu_vision_validate(const hpu_node_t *node);
hpu_status_t hpu_vision_execute(const hpu_node_t *node);

/* Shared by the validators (vision_check.c): one input, one output, both
 * [P, D, H, W] contiguous with the same P; dtypes equal, and float32 (or
 * float64 when `f64`: the kernel has a double copy) when `arith` (the op
 * does arithmetic, as every backward does). */
hpu_status_t hpu_vision_check_planes(const hpu_node_t *n, int arith, int f64);

/* t is [planes, D, H, W] and contiguous, with `planes` planes unless
 * planes < 0; `role` names it in the message. */
hpu_status_t hpu_vision_check_4d(const char *name, const char *role, const hpu_tensor_t *t, int64_t planes);

hpu_status_t hpu_upsample_validate(const hpu_node_t *node);
hpu_status_t hpu_upsample_execute(const hpu_node_t *node);
hpu_status_t hpu_adaptive_pool_validate(const hpu_node_t *node);
hpu_status_t hpu_adaptive_pool_execute(const hpu_node_t *node);
hpu_status_t hpu_adaptive_max_pool_validate(const hpu_node_t *node);
hpu_status_t hpu_adaptive_max_pool_execute(const hpu_node_t *node);
hpu_status_t hpu_max_unpool_validate(const hpu_node_t *node);
hpu_status_t hpu_max_unpool_execute(const hpu_node_t *node);
hpu_status_t hpu_fold_validate(const hpu_node_t *node); /* im2col, col2im */
hpu_status_t hpu_fold_execute(const hpu_node_t *node);
hpu_status_t hpu_spatial_pad_validate(const hpu_node_t *node);
hpu_status_t hpu_spatial_pad_execute(const hpu_node_t *node);

/* Adaptive pooling's window along one dim: output o of `out` covers input
 * [start, end) of `in` (the CPU's start_index / end_index). */
static inline int64_t hpu_adaptive_win_start(int64_t o, int64_t out, int64_t in) { return (o * in) / out; }
static inline int64_t hpu_adaptive_win_end(int64_t o, int64_t out, int64_t in) {
  return ((o + 1) * in + out - 1) / out;
}

#endif
