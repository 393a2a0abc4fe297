/* Implicit-GEMM forward convolution (float32, NCHW, one group) on AVX-512
 * and AVX2: y[co, pixel] = W[co, :] @ patch(pixel), with the patches
 * gathered straight into the GEMM's packed B panels (32 output pixels x K =
 * C * KH * KW steps) by masked vector loads (vector gathers where the
 * pixels are not consecutive in the input), instead of an im2col panel that
 * the GEMM then packs again (conv_tmpl.h's route, whose copies took about
 * 40% of ResNet's 3x3 64->64 at 56x56: perf on the Zen 4 class). Both
 * tile kernels (F32FMA, F32AVX2) read the same 32-column panels. On the
 * AVX2 clones (Zen 4 class) the CIFAR ResNet-18's 3x3 32->32 at 16x16,
 * batch 64, took 1.9 ms this way against 3.1 ms by im2col and the GEMM.
 *
 * The output pixels of all images are numbered n * OH * OW + oh * OW + ow
 * and cut into panels of 32; a task takes a run of panels (which may span
 * images), gathers them, multiplies W by them on the GEMM's tile kernels
 * (gemm.h) into an fp32 block [Co, columns] in k slices of KC steps (a W
 * slice and the panels' slices stay in L2), then copies each image's
 * columns into y with the bias. Out-of-image taps gather nothing (masked)
 * and stay 0, so padding, stride and dilation cost no branches.
 *
 * Stride 2 (dilation 1): the input is first split into its four phase
 * planes (even / odd rows x even / odd columns, [N, C, 4, ceil(H/2),
 * ceil(W/2)]). Tap (kh, kw) of every output pixel then reads one plane, at
 * row oh + floor((kh - ph) / 2) and column ow + floor((kw - pw) / 2): a
 * stride-1 pattern, so consecutive output columns read consecutive floats
 * and take masked loads instead of gathers: the 7x7/2 stem at batch 8 went
 * from 13.9 to 12.5 ms on the Zen 4 class. Larger images go to
 * conv_direct.c instead, which reads the taps from phase planes without
 * gathering them (hpu_conv_direct_suits). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "hpu/device.h"
#include "hpu/parallel.h"
#include "kernels/conv_igemm.h"
#include "kernels/conv_split.h"
#include "kernels/gemm.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/scratch.h"

#define PANEL HPU_GEMM_PANEL
#define KC 256           /* k steps per slice */
#define MAX_PANELS 8     /* per task: 256 output pixels */

int hpu_conv_igemm_suits(const hpu_conv_igemm_t *g) {
  int kernel = hpu_gemm_tile_kernel(HPU_FLOAT32);
  if (kernel != HPU_GEMM_F32FMA && kernel != HPU_GEMM_F32AVX2) return 0;
  /* no input channels: y is the bias alone (conv_tmpl.h); gather offsets are 32-bit */
  return g->C > 0 && g->N * g->C * g->H * g->W < ((int64_t)1 << 31) - 1;
}

#if HPU_HAVE_ISA_CLONES

/* Where tap (kh, kw) reads, relative to an output pixel's (ih0, iw0):
 * row ih0 + dih, column iw0 + diw, valid below (hlim, wlim), at
 * off = dih * row stride + diw + its plane's offset from the pixel's base. */
typedef struct {
  int32_t dih, diw, hlim, wlim;
  int64_t off;
} tap_t;

typedef struct {
  const hpu_conv_igemm_t *g;
  const float *x, *w, *bias; /* x: the input, or its phase planes */
  float *y;
  int64_t P, K, cols, panels, per_task; /* pixels per image, patch length, all columns, panels per task */
  int64_t rs, cs;                       /* x's row and channel strides */
  int phases;                           /* x holds phase planes: ih0 = oh, iw0 = ow */
  const tap_t *taps;                    /* [KH * KW] */
  int kernel;                           /* the tile kernel: F32FMA or F32AVX2 */
  _Atomic int oom;
} igemm_t;

/* 16 output columns (global pixel numbers c0.. below `cols`) and where
 * their taps read. With stride 1, columns of one output row read
 * consecutive input elements: when the 16 fall in at most MAX_RUNS rows
 * they are read with one masked load per row (AVX-512 gathers cost several
 * times more on the Zen 4 class), else gathered. Masked-off lanes (taps
 * outside the image, columns past the end) are not read and stay 0. */
#define MAX_RUNS 3
typedef struct {
  __m512i base, ih0, iw0;
  int nruns, loads;
  __mmask16 rmask[16];
  int64_t roff[16]; /* lane j of run r reads x[roff[r] + j] (+ the tap's and channel's offsets) */
} cols16_t;

/* Where output column c's patch starts: its image's offset in x, and the
 * input row and column (or plane row and column) of its tap (0, 0); a
 * column past the end is never valid. */
static void col_origin(const igemm_t *t, int64_t c, int32_t *base, int32_t *ih0, int32_t *iw0) {
  const hpu_conv_igemm_t *g = t->g;
  if (c >= t->cols) {
    *base = 0, *ih0 = (int32_t)-(1 << 30), *iw0 = 0;
    return;
  }
  int64_t n = c / t->P, p = c % t->P, oh = p / g->OW, ow = p % g->OW;
  *ih0 = (int32_t)(t->phases ? oh : oh * g->sh - g->ph);
  *iw0 = (int32_t)(t->phases ? ow : ow * g->sw - g->pw);
  *base = (int32_t)(n * g->C * t->cs);
}

HPU_ATTR_avx512 static void cols16(const igemm_t *t, int64_t c0, cols16_t *h) {
  const hpu_conv_igemm_t *g = t->g;
  int32_t base[16], ih0[16], iw0[16];
  int unit = t->phases || g->sw == 1; /* consecutive columns read consecutive floats */
  h->nruns = 0;
  for (int j = 0; j < 16; j++) {
    col_origin(t, c0 + j, &base[j], &ih0[j], &iw0[j]);
    if (!unit) continue;
    if (j == 0 || base[j] != base[j - 1] || ih0[j] != ih0[j - 1]) {
      h->roff[h->nruns] = (int64_t)base[j] + (int64_t)ih0[j] * t->rs + iw0[j] - j;
      h->rmask[h->nruns++] = 0;
    }
    h->rmask[h->nruns - 1] |= (__mmask16)(1u << j);
  }
  h->base = _mm512_loadu_si512(base);
  h->ih0 = _mm512_loadu_si512(ih0);
  h->iw0 = _mm512_loadu_si512(iw0);
  h->loads = unit && h->nruns <= MAX_RUNS;
}

/* Which of the 16 columns tap tp finds inside the image, and their
 * offsets (gather route). */
HPU_ATTR_avx512 static __mmask16 tap16(const igemm_t *t, const cols16_t *h, const tap_t *tp, __m512i *off) {
  const __m512i H = _mm512_set1_epi32(tp->hlim), W = _mm512_set1_epi32(tp->wlim);
  __m512i ih = _mm512_add_epi32(h->ih0, _mm512_set1_epi32(tp->dih));
  __m512i iw = _mm512_add_epi32(h->iw0, _mm512_set1_epi32(tp->diw));
  /* 0 <= i < n as one unsigned compare */
  __mmask16 m = _mm512_cmplt_epu32_mask(ih, H) & _mm512_cmplt_epu32_mask(iw, W);
  __m512i at = _mm512_add_epi32(h->base, _mm512_add_epi32(_mm512_mullo_epi32(h->ih0, _mm512_set1_epi32((int32_t)t->rs)),
                                                          h->iw0));
  *off = _mm512_add_epi32(at, _mm512_set1_epi32((int32_t)tp->off));
  return m;
}

/* The 16 columns' values of tap tp for channels [0, C), channel c stored
 * at dst + c * stride. */
HPU_ATTR_avx512 static void load16(const igemm_t *t, const cols16_t *h, const tap_t *tp, float *dst,
                                   int64_t stride) {
  __m512i off;
  __mmask16 m = tap16(t, h, tp, &off);
  int64_t C = t->g->C, cs = t->cs;
  if (h->loads) {
    for (int64_t c = 0; c < C; c++, dst += stride) {
      __m512 v = _mm512_setzero_ps();
      for (int r = 0; r < h->nruns; r++) /* masked-off lanes are not read, wherever they point */
        v = _mm512_mask_loadu_ps(v, m & h->rmask[r], (const char *)t->x + (h->roff[r] + tp->off + c * cs) * 4);
      _mm512_storeu_ps(dst, v);
    }
    return;
  }
  const float *src = t->x;
  for (int64_t c = 0; c < C; c++, src += cs, dst += stride)
    _mm512_storeu_ps(dst, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, off, src, 4));
}

/* Panel of columns [c0, c0 + 32) into dst [K][32]. */
HPU_ATTR_avx512 static void gather_panel(const igemm_t *t, int64_t c0, float *dst) {
  const hpu_conv_igemm_t *g = t->g;
  int64_t KK = g->KH * g->KW;
  for (int half = 0; half < 2; half++) {
    cols16_t h;
    cols16(t, c0 + 16 * half, &h);
    for (int64_t k = 0; k < KK; k++) load16(t, &h, &t->taps[k], dst + k * PANEL + 16 * half, KK * PANEL);
  }
}

/* The same on AVX2, 8 columns at a time: VMASKMOVPS loads per run of
 * consecutive columns (masked-off lanes are not read), AVX2 gathers
 * otherwise. */
typedef struct {
  __m256i base, ih0, iw0;
  int nruns, loads;
  __m256i rmask[8];
  int64_t roff[8];
} cols8_t;

HPU_ATTR_avx2 static void cols8(const igemm_t *t, int64_t c0, cols8_t *h) {
  const hpu_conv_igemm_t *g = t->g;
  int32_t base[8], ih0[8], iw0[8], rmask[8][8] = {{0}};
  int unit = t->phases || g->sw == 1;
  h->nruns = 0;
  for (int j = 0; j < 8; j++) {
    col_origin(t, c0 + j, &base[j], &ih0[j], &iw0[j]);
    if (!unit) continue;
    if (j == 0 || base[j] != base[j - 1] || ih0[j] != ih0[j - 1])
      h->roff[h->nruns++] = (int64_t)base[j] + (int64_t)ih0[j] * t->rs + iw0[j] - j;
    rmask[h->nruns - 1][j] = -1;
  }
  for (int r = 0; r < h->nruns; r++) h->rmask[r] = _mm256_loadu_si256((const __m256i *)rmask[r]);
  h->base = _mm256_loadu_si256((const __m256i *)base);
  h->ih0 = _mm256_loadu_si256((const __m256i *)ih0);
  h->iw0 = _mm256_loadu_si256((const __m256i *)iw0);
  h->loads = unit && h->nruns <= MAX_RUNS;
}

/* a < b as unsigned 32-bit lanes (AVX2 compares signed only) */
HPU_ATTR_avx2 static inline __m256i below8(__m256i a, __m256i b) {
  const __m256i sign = _mm256_set1_epi32(INT32_MIN);
  return _mm256_cmpgt_epi32(_mm256_xor_si256(b, sign), _mm256_xor_si256(a, sign));
}

HPU_ATTR_avx2 static void load8(const igemm_t *t, const cols8_t *h, const tap_t *tp, float *dst, int64_t stride) {
  __m256i ih = _mm256_add_epi32(h->ih0, _mm256_set1_epi32(tp->dih));
  __m256i iw = _mm256_add_epi32(h->iw0, _mm256_set1_epi32(tp->diw));
  __m256i m = _mm256_and_si256(below8(ih, _mm256_set1_epi32(tp->hlim)), below8(iw, _mm256_set1_epi32(tp->wlim)));
  int64_t C = t->g->C, cs = t->cs;
  if (h->loads) {
    __m256i rm[MAX_RUNS];
    for (int r = 0; r < h->nruns; r++) rm[r] = _mm256_and_si256(m, h->rmask[r]);
    for (int64_t c = 0; c < C; c++, dst += stride) {
      __m256 v = _mm256_setzero_ps();
      for (int r = 0; r < h->nruns; r++) /* masked-off lanes are not read, wherever they point */
        v = _mm256_or_ps(v, _mm256_maskload_ps((const float *)((const char *)t->x + (h->roff[r] + tp->off + c * cs) * 4),
                                               rm[r]));
      _mm256_storeu_ps(dst, v);
    }
    return;
  }
  __m256i at = _mm256_add_epi32(h->base, _mm256_add_epi32(_mm256_mullo_epi32(h->ih0, _mm256_set1_epi32((int32_t)t->rs)),
                                                          h->iw0));
  __m256i off = _mm256_add_epi32(at, _mm256_set1_epi32((int32_t)tp->off));
  const __m256 mf = _mm256_castsi256_ps(m);
  const float *src = t->x;
  for (int64_t c = 0; c < C; c++, src += cs, dst += stride)
    _mm256_storeu_ps(dst, _mm256_mask_i32gather_ps(_mm256_setzero_ps(), src, off, mf, 4));
}

HPU_ATTR_avx2 static void gather_panel_avx2(const igemm_t *t, int64_t c0, float *dst) {
  const hpu_conv_igemm_t *g = t->g;
  int64_t KK = g->KH * g->KW;
  for (int q = 0; q < PANEL / 8; q++) {
    cols8_t h;
    cols8(t, c0 + 8 * q, &h);
    for (int64_t k = 0; k < KK; k++) load8(t, &h, &t->taps[k], dst + k * PANEL + 8 * q, KK * PANEL);
  }
}

static void igemm_range(void *vctx, int64_t begin, int64_t end) {
  igemm_t *t = vctx;
  const hpu_conv_igemm_t *g = t->g;
  int64_t K = t->K, Co = g->Co;
  int64_t most = t->per_task * PANEL;
  int slot;
  float *bp = hpu_scratch_get(sizeof(float) * (size_t)(K * most + Co * most), &slot);
  if (!bp) {
    atomic_store(&t->oom, 1);
    return;
  }
  float *cblk = bp + K * most;
  for (int64_t task = begin; task < end; task++) {
    int64_t p0 = task * t->per_task, np = t->panels - p0 < t->per_task ? t->panels - p0 : t->per_task;
    int64_t c0 = p0 * PANEL, ncols = t->cols - c0 < np * PANEL ? t->cols - c0 : np * PANEL;
    for (int64_t p = 0; p < np; p++) {
      if (t->kernel == HPU_GEMM_F32FMA) gather_panel(t, c0 + p * PANEL, bp + p * K * PANEL);
      else gather_panel_avx2(t, c0 + p * PANEL, bp + p * K * PANEL);
    }
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
      int64_t kc = K - k0 < KC ? K - k0 : KC;
      hpu_gemm_tile(t->kernel, Co, ncols, kc, t->w + k0, K, (const uint32_t *)(bp + k0 * PANEL), K * PANEL,
                    cblk, ncols, 1.0f, k0 == 0 ? 0.0f : 1.0f);
    }
    /* columns to y, image by image, with the bias */
    for (int64_t c = c0; c < c0 + ncols;) {
      int64_t n = c / t->P, p = c % t->P, run = t->P - p < c0 + ncols - c ? t->P - p : c0 + ncols - c;
      for (int64_t co = 0; co < Co; co++) {
        const float *src = cblk + co * ncols + (c - c0);
        float *dst = t->y + (n * Co + co) * t->P + p;
        float b = t->bias ? t->bias[co] : 0.0f;
        if (t->bias)
          for (int64_t i = 0; i < run; i++) dst[i] = src[i] + b;
        else
          memcpy(dst, src, sizeof(float) * (size_t)run);
      }
      c += run;
    }
  }
  hpu_scratch_put(bp, slot);
}

static int64_t floor_half(int64_t a) { return a >= 0 ? a / 2 : -((-a + 1) / 2); }

typedef struct {
  const hpu_conv_igemm_t *g;
  const float *x;
  float *planes;
  int64_t H2, W2;
  int kernel; /* the tile kernel's ISA is the split's */
} split_t;

/* Phase planes of images-and-channels [begin, end): plane (py, px) row i
 * holds x's row 2i + py, its columns px, px + 2, ... (each input row read
 * once, by hpu_conv_split_row_*). */
static void split_range(void *vctx, int64_t begin, int64_t end) {
  const split_t *s = vctx;
  const hpu_conv_igemm_t *g = s->g;
  int64_t Q = s->H2 * s->W2;
  for (int64_t nc = begin; nc < end; nc++) {
    const float *src = s->x + nc * g->H * g->W;
    float *dst = s->planes + nc * 4 * Q;
    for (int64_t r = 0; r < g->H; r++) { /* planes (py, 0) and (py, 1), row r / 2 */
      float *even = dst + (r & 1) * 2 * Q + (r / 2) * s->W2;
      if (s->kernel == HPU_GEMM_F32FMA) hpu_conv_split_row_avx512(src + r * g->W, g->W, even, even + Q);
      else hpu_conv_split_row_avx2(src + r * g->W, g->W, even, even + Q);
    }
  }
}

hpu_status_t hpu_conv_igemm(const hpu_conv_igemm_t *g, const float *x, const float *w, const float *bias,
                            float *y) {
  igemm_t t = {g, x, w, bias, y, g->OH * g->OW, g->C * g->KH * g->KW, 0, 0, 0, g->W, g->H * g->W, 0, NULL,
               hpu_gemm_tile_kernel(HPU_FLOAT32), 0};
  int64_t KK = g->KH * g->KW, H2 = (g->H + 1) / 2, W2 = (g->W + 1) / 2;
  tap_t *taps = malloc(sizeof(tap_t) * (size_t)KK);
  float *planes = NULL;
  int pslot = -1;
  t.phases = g->sh == 2 && g->sw == 2 && g->dh == 1 && g->dw == 1 && KK > 1 &&
             g->N * g->C * 4 * H2 * W2 < ((int64_t)1 << 31) - 1;
  if (t.phases) planes = hpu_scratch_get(sizeof(float) * (size_t)(g->N * g->C * 4 * H2 * W2), &pslot);
  if (!taps || (t.phases && !planes)) {
    free(taps);
    if (planes) hpu_scratch_put(planes, pslot);
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "convolution: out of host memory for the packed patches");
  }
  for (int64_t kh = 0; kh < g->KH; kh++)
    for (int64_t kw = 0; kw < g->KW; kw++) {
      tap_t *tp = &taps[kh * g->KW + kw];
      if (t.phases) {
        int64_t a = kh - g->ph, b = kw - g->pw, py = a & 1, px = b & 1;
        tp->dih = (int32_t)floor_half(a), tp->diw = (int32_t)floor_half(b);
        tp->hlim = (int32_t)((g->H - py + 1) / 2), tp->wlim = (int32_t)((g->W - px + 1) / 2);
        tp->off = (py * 2 + px) * H2 * W2 + tp->dih * W2 + tp->diw;
      } else {
        tp->dih = (int32_t)(kh * g->dh), tp->diw = (int32_t)(kw * g->dw);
        tp->hlim = (int32_t)g->H, tp->wlim = (int32_t)g->W;
        tp->off = tp->dih * g->W + tp->diw;
      }
    }
  t.taps = taps;
  if (t.phases) {
    split_t s = {g, x, planes, H2, W2, t.kernel};
    hpu_parallel_for(g->N * g->C, 16, split_range, &s);
    t.x = planes, t.rs = W2, t.cs = 4 * H2 * W2;
  }
  t.cols = g->N * t.P;
  t.panels = (t.cols + PANEL - 1) / PANEL;
  /* at least 4 tasks per thread where the panels allow */
  int nt = hpu_get_num_threads();
  int64_t per = t.panels / (4 * (int64_t)(nt > 0 ? nt : 1));
  t.per_task = per < 1 ? 1 : per > MAX_PANELS ? MAX_PANELS : per;
  int64_t tasks = (t.panels + t.per_task - 1) / t.per_task;
  atomic_init(&t.oom, 0);
  hpu_parallel_for(tasks, 1, igemm_range, &t);
  free(taps);
  if (planes) hpu_scratch_put(planes, pslot);
  if (atomic_load(&t.oom))
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "convolution: out of host memory for the packed patches");
  return HPU_SUCCESS;
}

#else

hpu_status_t hpu_conv_igemm(const hpu_conv_igemm_t *g, const float *x, const float *w, const float *bias,
                            float *y) {
  (void)g, (void)x, (void)w, (void)bias, (void)y;
  return hpu_error(HPU_ERROR_UNSUPPORTED, "convolution: the implicit-GEMM path needs AVX2 or AVX-512");
}

#endif
