/* Direct forward convolution for stride 2 (float32, NCHW, one group,
 * dilation 1) on AVX-512: the GEMM's tile kernel reads each tap's input
 * straight from the input's phase planes through a table of row offsets
 * (hpu_gemm_tile_rows), where the implicit GEMM (conv_igemm.c) gathers
 * every patch into a packed panel first. That gather writes and reads the
 * input KH * KW times over: on ResNet-50's 3x3/2 128->128 at 56x56 it took
 * 2.6 ms beside the GEMM's 8.8 (perf, Zen 4 class), the whole convolution
 * 0.83-0.89 of oneDNN's speed.
 *
 * The planes: the zero-padded input split by row and column parity, plane
 * (py, px) row i column j holding x[2i + py - ph][2j + px - pw] (0 outside
 * the image), Hq x Wq each, [N, C, 4, Hq, Wq]. Tap (kh, kw) of output
 * (oh, ow) reads plane (kh & 1, kw & 1) at row oh + kh / 2, column
 * ow + kw / 2. Numbering the outputs of an image "wide", q = oh * Wq + ow
 * with Wq >= OW (the columns from OW on are computed and dropped), every
 * tap reads plane element q + (kh / 2) * Wq + kw / 2: consecutive outputs
 * read consecutive floats, across rows too, so one offset per (channel,
 * tap) describes a whole panel of 32 outputs. The dropped columns cost
 * (Wq - OW) / OW more products: 1/28 on the 3x3/2 at 56x56, 3/112 on the
 * 7x7/2 stem. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "hpu/device.h"
#include "hpu/parallel.h"
#include "kernels/avx512_regs.h"
#include "kernels/conv_igemm.h"
#include "kernels/conv_split.h"
#include "kernels/gemm.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/scratch.h"

#define PANEL HPU_GEMM_PANEL
/* k steps per slice (the output block is read back once per slice): 192,
 * 256 and 384 timed alike on the 3x3/2 128->128 at 56x56, 128 5-7%
 * slower (Zen 4 class) */
#define KC 384
#define MAX_PANELS 8 /* per task: 256 wide outputs */
#define SLACK 64     /* floats past the last plane: the last panel's reads run past its end */

typedef struct {
  int64_t Hq, Wq, Q, cs; /* plane rows and columns, floats per plane and per channel (4 planes) */
  int64_t es, os;        /* even input columns go to plane column es onwards of their phase, odd to os */
  int pe, po;            /* ... of phase (column parity) pe and po */
} planes_geo_t;

static planes_geo_t planes_geo(const hpu_conv_igemm_t *g) {
  planes_geo_t p;
  int64_t ne = (g->W + 1) / 2, no = g->W / 2;
  /* input column s lands in phase (s + pw) & 1 at column (s + pw) >> 1 */
  p.pe = (int)(g->pw & 1), p.po = (int)((g->pw + 1) & 1);
  p.es = g->pw >> 1, p.os = (g->pw + 1) >> 1;
  int64_t wq = g->OW + (g->KW - 1) / 2; /* what the taps of valid outputs read */
  if (wq < p.es + ne) wq = p.es + ne;   /* and room for the whole split row */
  if (wq < p.os + no) wq = p.os + no;
  p.Wq = wq;
  p.Hq = g->OH + (g->KH - 1) / 2;
  p.Q = p.Hq * p.Wq;
  p.cs = 4 * p.Q;
  return p;
}

int hpu_conv_direct_suits(const hpu_conv_igemm_t *g) {
  if (hpu_gemm_tile_kernel(HPU_FLOAT32) != HPU_GEMM_F32FMA) return 0;
  if (g->sh != 2 || g->sw != 2 || g->dh != 1 || g->dw != 1 || g->KH * g->KW == 1 || g->C <= 0) return 0;
  if (g->OH <= 0 || g->OW <= 0) return 0;
  planes_geo_t p = planes_geo(g);
  /* Images of at least 512 wide outputs (16 panels): on smaller ones a
   * task's last panel is partly empty (panels do not span images here, as
   * the gathers' do) and the dropped columns weigh more, and the gathers
   * over phase planes were faster (the CIFAR ResNet's 3x3/2 at 16x16
   * outputs and below: 0.80 of torch's speed against 0.83-0.88, at 4x4
   * 0.42). */
  if (g->OH * p.Wq < 16 * PANEL || (p.Wq - g->OW) * 8 > g->OW) return 0;
  /* row offsets are 32-bit */
  return g->C * p.cs < ((int64_t)1 << 31) - 1;
}

#if HPU_HAVE_ISA_CLONES

typedef struct {
  const hpu_conv_igemm_t *g;
  planes_geo_t p;
  const float *x, *bias;
  float *planes, *y;
  int64_t K, QW, panels, per_task, tasks_per_image; /* wide outputs and their panels, per image */
  float *wp;                                          /* w packed (hpu_gemm_pack_a_rows) */
  const int32_t *boff;                               /* [K]: tap k's offset in a channel block */
  _Atomic int oom;
} direct_t;

HPU_ATTR_avx512 static inline void zero_row(float *r, int64_t n) {
  for (int64_t j = 0; j < n; j += 16) _mm512_mask_storeu_ps(r + j, hpu_mask16(n - j), _mm512_setzero_ps());
}

/* Planes of images-and-channels [begin, end). Rows are zeroed whole, then
 * split over: a row is a few vectors, and memset calls for its one or two
 * border columns had cost more than the split. (Building each task's band
 * of plane rows just before its products, to keep it in L2, was no faster:
 * the bands overlap by a tap row and a partial output row, half again the
 * split's work, and their reads of the input, a few rows of each channel,
 * stall on memory.) */
HPU_ATTR_avx512 static void planes_range(void *vctx, int64_t begin, int64_t end) {
  const direct_t *t = vctx;
  const hpu_conv_igemm_t *g = t->g;
  const planes_geo_t *p = &t->p;
  for (int64_t nc = begin; nc < end; nc++) {
    const float *src = t->x + nc * g->H * g->W;
    float *dst = t->planes + nc * p->cs;
    for (int py = 0; py < 2; py++)
      for (int64_t i = 0; i < p->Hq; i++) {
        int64_t r = 2 * i + py - g->ph;
        float *re = dst + (2 * py + p->pe) * p->Q + i * p->Wq, *ro = dst + (2 * py + p->po) * p->Q + i * p->Wq;
        zero_row(re, p->Wq);
        zero_row(ro, p->Wq);
        if (r >= 0 && r < g->H) hpu_conv_split_row_avx512(src + r * g->W, g->W, re + p->es, ro + p->os);
      }
  }
}

/* dst[0..n) = src[0..n) + b, inline: the valid part of an output row is
 * often 4-16 floats, where a memcpy call per row and channel had cost as
 * much as the products (the CIFAR ResNet's stride-2 layers). */
HPU_ATTR_avx512 static inline void row_out(float *dst, const float *src, int64_t n, __m512 b) {
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = hpu_mask16(n - i);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, src + i), b));
  }
}

/* Columns [q0, q0 + ncols) of image n's wide outputs, cblk [Co, ncols],
 * into y with the bias: the first OW of each row of Wq. */
HPU_ATTR_avx512 static void store_wide(const direct_t *t, int64_t n, int64_t q0, int64_t ncols, const float *cblk) {
  const hpu_conv_igemm_t *g = t->g;
  int64_t Wq = t->p.Wq, P = g->OH * g->OW;
  for (int64_t co = 0; co < g->Co; co++) {
    __m512 b = _mm512_set1_ps(t->bias ? t->bias[co] : 0.0f);
    const float *src = cblk + co * ncols;
    float *y = t->y + (n * g->Co + co) * P;
    for (int64_t q = q0; q < q0 + ncols;) {
      int64_t oh = q / Wq, ow = q % Wq, run = Wq - ow < q0 + ncols - q ? Wq - ow : q0 + ncols - q;
      if (ow < g->OW) row_out(y + oh * g->OW + ow, src + (q - q0), g->OW - ow < run ? g->OW - ow : run, b);
      q += run;
    }
  }
}

static void direct_range(void *vctx, int64_t begin, int64_t end) {
  direct_t *t = vctx;
  const hpu_conv_igemm_t *g = t->g;
  int64_t K = t->K, Co = g->Co;
  int slot;
  float *cblk = hpu_scratch_get(sizeof(float) * (size_t)(Co * t->per_task * PANEL), &slot);
  if (!cblk) {
    atomic_store(&t->oom, 1);
    return;
  }
  for (int64_t task = begin; task < end; task++) {
    int64_t n = task / t->tasks_per_image, p0 = task % t->tasks_per_image * t->per_task;
    int64_t q0 = p0 * PANEL, ncols = t->QW - q0 < t->per_task * PANEL ? t->QW - q0 : t->per_task * PANEL;
    const float *b = t->planes + n * g->C * t->p.cs + q0;
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
      int64_t kc = K - k0 < KC ? K - k0 : KC;
      hpu_gemm_tile_rows(Co, ncols, kc, t->wp + k0 * HPU_GEMM_TILE_ROWS, K * HPU_GEMM_TILE_ROWS, b, t->boff + k0, cblk,
                         ncols, 1.0f, k0 == 0 ? 0.0f : 1.0f);
    }
    store_wide(t, n, q0, ncols, cblk);
  }
  hpu_scratch_put(cblk, slot);
}

hpu_status_t hpu_conv_direct(const hpu_conv_igemm_t *g, const float *x, const float *w, const float *bias,
                             float *y) {
  direct_t t;
  memset(&t, 0, sizeof t);
  t.g = g, t.p = planes_geo(g), t.x = x, t.bias = bias, t.y = y;
  int64_t KK = g->KH * g->KW;
  t.K = g->C * KK;
  t.QW = g->OH * t.p.Wq;
  t.panels = (t.QW + PANEL - 1) / PANEL;
  const int64_t MRW = HPU_GEMM_TILE_ROWS;
  int32_t *boff = malloc(sizeof(int32_t) * (size_t)t.K);
  t.wp = malloc(sizeof(float) * (size_t)((g->Co + MRW - 1) / MRW * MRW * t.K));
  int pslot = -1;
  t.planes = hpu_scratch_get(sizeof(float) * (size_t)(g->N * g->C * t.p.cs + SLACK), &pslot);
  if (!boff || !t.wp || !t.planes) {
    free(boff);
    free(t.wp);
    if (t.planes) hpu_scratch_put(t.planes, pslot);
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "convolution: out of host memory for the input's phase planes");
  }
  for (int64_t c = 0; c < g->C; c++)
    for (int64_t kh = 0; kh < g->KH; kh++)
      for (int64_t kw = 0; kw < g->KW; kw++)
        boff[c * KK + kh * g->KW + kw] =
            (int32_t)(c * t.p.cs + ((kh & 1) * 2 + (kw & 1)) * t.p.Q + (kh >> 1) * t.p.Wq + (kw >> 1));
  t.boff = boff;
  hpu_gemm_pack_a_rows(g->Co, t.K, w, t.K, t.wp);
  memset(t.planes + g->N * g->C * t.p.cs, 0, sizeof(float) * SLACK);
  hpu_parallel_for(g->N * g->C, 16, planes_range, &t);
  /* at least 4 tasks per thread where the panels allow */
  int nt = hpu_get_num_threads();
  int64_t per = g->N * t.panels / (4 * (int64_t)(nt > 0 ? nt : 1));
  t.per_task = per < 1 ? 1 : per > MAX_PANELS ? MAX_PANELS : per;
  t.tasks_per_image = (t.panels + t.per_task - 1) / t.per_task;
  atomic_init(&t.oom, 0);
  hpu_parallel_for(g->N * t.tasks_per_image, 1, direct_range, &t);
  free(boff);
  free(t.wp);
  hpu_scratch_put(t.planes, pslot);
  if (atomic_load(&t.oom))
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "convolution: out of host memory for the output tiles");
  return HPU_SUCCESS;
}

#else

hpu_status_t hpu_conv_direct(const hpu_conv_igemm_t *g, const float *x, const float *w, const float *bias,
                             float *y) {
  (void)g, (void)x, (void)w, (void)bias, (void)y;
  return hpu_error(HPU_ERROR_UNSUPPORTED, "convolution: the direct path needs AVX-512");
}

#endif
