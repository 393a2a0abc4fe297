/* What conv_winograd.c (the driver and the AVX-512 transforms) shares with
 * conv_winograd_avx2.c (the same transforms on AVX2): the call's state, the
 * layout of a span of tiles across rows, and the transforms' entry points. */
#ifndef HPU_KERNELS_CONV_WINOGRAD_PARTS_H
#define HPU_KERNELS_CONV_WINOGRAD_PARTS_H

#include <stdint.h>

#include "kernels/conv_winograd.h"
#include "kernels/gemm.h"

#define PANEL HPU_GEMM_PANEL
#define SPAN 16 /* tiles of a span: one AVX-512 vector, two AVX2 ones */

typedef struct {
  const hpu_conv_winograd_t *g;
  const float *x, *bias;
  const float *u; /* [16][Co][C] */
  float *y;
  int64_t TH, TW, tiles, per_task;
  int kernel; /* the GEMM's tile kernel: F32FMA (AVX-512) or F32AVX2, and the transforms' ISA with it */
  _Atomic int oom;
} hpu_wino_t;

typedef struct {
  const float *w;
  float *u;
  int64_t Co, C;
} hpu_wino_filter_t;

typedef struct {
  const float *m; /* [16][Co][C] */
  float *dw;      /* [Co][C][3][3] */
  int64_t Co, C;
} hpu_wino_dw_filter_t;

/* A span of up to SPAN tiles across tile rows (conv_winograd.c's
 * input_span says why and how), and where each tile row's in-image patch
 * columns come from and go to in the window. */
typedef struct {
  int64_t rows;      /* tile rows in the span */
  int64_t row0, tw0; /* the first tile's row (over all images) and column */
  int32_t pos[SPAN]; /* where tile k's patch row starts in the window */
  int64_t image[SPAN], dst[SPAN], cnt[SPAN]; /* tile row j: its image, window position, column count */
  int64_t src[SPAN][4]; /* ... and patch row r's offset in its plane (-1: outside the image) */
} hpu_wino_span_t;

void hpu_wino_span_layout(const hpu_wino_t *t, int64_t first, int64_t len, hpu_wino_span_t *sp);

/* A span's tiles, row by row, as blocks of an output plane (y's, or
 * dy's for the weight gradient): lanes k0.. of the span, image n, the
 * offset of the block's first pixel in its plane, and how many of its
 * columns (2 a tile) and rows (2) lie inside the plane. */
typedef struct {
  int64_t k0, n, off, cols;
  int rows;
} hpu_wino_block_t;

/* Fills b (SPAN entries at most); returns the count. */
int64_t hpu_wino_span_blocks(const hpu_wino_t *t, int64_t first, int64_t len, hpu_wino_block_t *b);

/* The AVX2 transforms (conv_winograd_avx2.c), each the AVX-512 one of the
 * same name in conv_winograd.c on 8-lane vectors, with the same results
 * bit for bit (the same adds in the same order). */
void hpu_wino_filter_range_avx2(void *vctx, int64_t begin, int64_t end);
void hpu_wino_input_segment_avx2(const hpu_wino_t *t, int64_t n, int64_t th, int64_t tw0, int64_t len, float *v,
                                 int64_t vs, int64_t cs);
void hpu_wino_input_span_avx2(const hpu_wino_t *t, int64_t first, int64_t len, float *v, int64_t vs, int64_t cs);
void hpu_wino_output_span_avx2(const hpu_wino_t *t, int64_t first, int64_t len, const float *m, int64_t ms,
                               int64_t ld);
void hpu_wino_dy_span_avx2(const hpu_wino_t *t, const float *dy, int64_t first, int64_t len, float *e, int64_t ms,
                           int64_t ld);
void hpu_wino_dw_filter_range_avx2(void *vctx, int64_t begin, int64_t end);

#endif
