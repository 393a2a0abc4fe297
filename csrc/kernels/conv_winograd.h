/* Winograd F(2x2, 3x3) forward convolution (conv_winograd.c): float32,
 * NCHW, contiguous operands, one group, 3x3 kernel, stride 1, dilation 1. */
#ifndef HPU_KERNELS_CONV_WINOGRAD_H
#define HPU_KERNELS_CONV_WINOGRAD_H

#include <stdint.h>

#include "hpu/status.h"

typedef struct {
  int64_t N, C, H, W, Co, OH, OW, ph, pw;
} hpu_conv_winograd_t;

/* Whether this CPU (AVX2 or AVX-512, under the ISA cap),
 * HPU_CONV_WINOGRAD (0 turns it off) and these sizes take it. */
int hpu_conv_winograd_suits(const hpu_conv_winograd_t *g);

/* y [N, Co, OH, OW] = conv(x [N, C, H, W], w [Co, C, 3, 3]) + bias (or NULL). */
hpu_status_t hpu_conv_winograd(const hpu_conv_winograd_t *g, const float *x, const float *w, const float *bias,
                               float *y);

/* The sizes dw takes this path for (within hpu_conv_winograd_suits). */
int hpu_conv_winograd_dw_suits(const hpu_conv_winograd_t *g);

/* dw [Co, C, 3, 3] of y = conv(x, w) from dy [N, Co, OH, OW] and x. */
hpu_status_t hpu_conv_winograd_dw(const hpu_conv_winograd_t *g, const float *x, const float *dy, float *dw);

#endif
