/* Implicit-GEMM forward convolution (conv_igemm.c) and the direct one for
 * stride 2 (conv_direct.c): float32, NCHW, contiguous operands, one group. */
#ifndef HPU_KERNELS_CONV_IGEMM_H
#define HPU_KERNELS_CONV_IGEMM_H

#include <stdint.h>

#include "hpu/status.h"

typedef struct {
  int64_t N, C, H, W, Co, KH, KW, OH, OW;
  int64_t sh, sw, ph, pw, dh, dw;
} hpu_conv_igemm_t;

/* Whether this CPU (AVX2 or AVX-512, under the ISA cap) and these sizes
 * take it. */
int hpu_conv_igemm_suits(const hpu_conv_igemm_t *g);

/* y [N, Co, OH, OW] = conv(x [N, C, H, W], w [Co, C, KH, KW]) + bias (or
 * NULL). */
hpu_status_t hpu_conv_igemm(const hpu_conv_igemm_t *g, const float *x, const float *w, const float *bias,
                            float *y);

/* conv_direct.c: stride 2, dilation 1, more than one tap, read from the
 * input's phase planes without gathering patches. */
int hpu_conv_direct_suits(const hpu_conv_igemm_t *g);
hpu_status_t hpu_conv_direct(const hpu_conv_igemm_t *g, const float *x, const float *w, const float *bias,
                             float *y);

#endif
