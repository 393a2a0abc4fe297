/* The pointwise family's float kernels on caller-owned tiles, for lazy-mode
 * fusion (csrc/graph/fusion_exec.c): a fused group evaluates a pointwise node on
 * a tile with the very kernel eager mode runs (same ISA clone, same scalar
 * rounding), so fused results are bitwise those of eager mode. */
#ifndef HPU_KERNELS_PW_TILE_H
#define HPU_KERNELS_PW_TILE_H

#include <stdint.h>

#include "hpu/op.h"

#define HPU_PW_TILE_CTX_BYTES 320

typedef struct hpu_pw_tile {
  int arity;          /* math operands */
  int input_of[3];    /* math operand k: the node input holding it, or -1: a scalar */
  float scalar[3];    /* the value of scalar operands, rounded as eager mode rounds it */
  _Alignas(16) unsigned char ctx[HPU_PW_TILE_CTX_BYTES]; /* the kernel's context */
} hpu_pw_tile_t;

/* 1 when the node is a float-family elementwise op (not ARANGE) whose tensor
 * operands and output all have the compute dtype (float32, bfloat16 or
 * float16): then its math is a function of float operands per element. */
int hpu_pw_tile_supported(const hpu_node_t *node);
/* Fills t for a supported node. */
void hpu_pw_tile_prepare(const hpu_node_t *node, hpu_pw_tile_t *t);
/* out[i] = f(a[i], b[i], c[i]) for i < n, in float, unrounded: operands the
 * op does not have may be NULL. */
void hpu_pw_tile_run(const hpu_pw_tile_t *t, int64_t n, float *out, const float *a,
                     const float *b, const float *c);

#endif
