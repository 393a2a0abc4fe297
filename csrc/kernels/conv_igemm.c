/* Implicit-GEMM forward convolution (float32, NCHW, one group) on AVX-512:
 * y[co, pixel] = W[co, :] @ patch(pixel), with the patches gathered
 * straight into the GEMM's packed B panels (32 output pixels x K =
 * C * KH * KW steps) by AVX-512 gathers, instead of an im2col panel that
 * the GEMM then packs again (conv_tmpl.h's route, whose copies took about
 * 40% of ResNet's 3x3 64->64 at 56x56: perf on the Zen 4 class).
 *
 * The output pixels of all images are numbered n * OH * OW + oh * OW + ow
 * and cut into panels of 32; a task takes a run of panels (which may span
 * images), gathers them, multiplies W by them on the GEMM's tile kernels
 * (gemm.h) into an fp32 block [Co, columns] in k slices of KC steps (a W
 * slice and the panels' slices stay in L2), then copies each image's
 * columns into y with the bias. Out-of-image taps gather nothing (masked)
 * and stay 0, so padding, stride and dilation cost no branches. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "hpu/device.h"
#include "hpu/parallel.h"
#include "kernels/conv_igemm.h"
#include "kernels/gemm.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"

#define PANEL HPU_GEMM_PANEL
#define KC 256           /* k steps per slice */
#define MAX_PANELS 8     /* per task: 256 output pixels */

int hpu_conv_igemm_suits(const hpu_conv_igemm_t *g) {
  if (hpu_gemm_tile_kernel(HPU_FLOAT32) != HPU_GEMM_F32FMA) return 0;
  /* gather offsets are 32-bit */
  return g->N * g->C * g->H * g->W < ((int64_t)1 << 31) - 1;
}

#if HPU_HAVE_ISA_CLONES

typedef struct {
  const hpu_conv_igemm_t *g;
  const float *x, *w, *bias;
  float *y;
  int64_t P, K, cols, panels, per_task; /* pixels per image, patch length, all columns, panels per task */
  _Atomic int oom;
} igemm_t;

/* Panel of columns [c0, c0 + 32) (< cols) into dst [K][32], 16 columns at
 * a time. With stride 1, columns of one output row read consecutive input
 * elements: a half whose 16 columns fall in at most MAX_RUNS rows is read
 * with one masked load per row (AVX-512 gathers cost several times more on
 * the Zen 4 class); other halves (strided, or rows narrower than a few
 * lanes) are gathered. Masked-off lanes (taps outside the image, columns
 * past the end) are not read and stay 0. */
#define MAX_RUNS 3
HPU_ATTR_avx512 static void gather_panel(const igemm_t *t, int64_t c0, float *dst) {
  const hpu_conv_igemm_t *g = t->g;
  int32_t base[PANEL], ih0[PANEL], iw0[PANEL];
  for (int j = 0; j < PANEL; j++) {
    int64_t c = c0 + j;
    if (c >= t->cols) { /* past the end: never valid */
      base[j] = 0, ih0[j] = (int32_t)-(1 << 30), iw0[j] = 0;
      continue;
    }
    int64_t n = c / t->P, p = c % t->P, oh = p / g->OW, ow = p % g->OW;
    ih0[j] = (int32_t)(oh * g->sh - g->ph);
    iw0[j] = (int32_t)(ow * g->sw - g->pw);
    base[j] = (int32_t)(n * g->C * g->H * g->W);
  }
  const __m512i H = _mm512_set1_epi32((int32_t)g->H), W = _mm512_set1_epi32((int32_t)g->W);
  int64_t HW = g->H * g->W, KK = g->KH * g->KW;
  for (int half = 0; half < 2; half++) {
    const int j0 = 16 * half;
    __m512i vb = _mm512_loadu_si512(base + j0), vh = _mm512_loadu_si512(ih0 + j0);
    __m512i vw = _mm512_loadu_si512(iw0 + j0);
    /* runs of lanes in one output row: lane j of run r reads x[roff[r] + j] (+ the tap's offset) */
    int nruns = 0;
    __mmask16 rmask[16];
    int64_t roff[16];
    for (int j = 0; j < 16 && g->sw == 1; j++) {
      int a = j0 + j;
      if (j == 0 || base[a] != base[a - 1] || ih0[a] != ih0[a - 1]) {
        roff[nruns] = (int64_t)base[a] + (int64_t)ih0[a] * g->W + iw0[a] - j;
        rmask[nruns++] = 0;
      }
      rmask[nruns - 1] |= (__mmask16)(1u << j);
    }
    int loads = g->sw == 1 && nruns <= MAX_RUNS;
    for (int64_t kh = 0; kh < g->KH; kh++) {
      __m512i ih = _mm512_add_epi32(vh, _mm512_set1_epi32((int32_t)(kh * g->dh)));
      /* 0 <= ih < H as one unsigned compare */
      __mmask16 mh = _mm512_cmplt_epu32_mask(ih, H);
      for (int64_t kw = 0; kw < g->KW; kw++) {
        __m512i iw = _mm512_add_epi32(vw, _mm512_set1_epi32((int32_t)(kw * g->dw)));
        __mmask16 m = mh & _mm512_cmplt_epu32_mask(iw, W);
        float *d = dst + (kh * g->KW + kw) * PANEL + j0;
        if (loads) {
          int64_t tap = kh * g->dh * g->W + kw * g->dw;
          for (int64_t c = 0; c < g->C; c++, d += KK * PANEL) {
            __m512 v = _mm512_setzero_ps();
            for (int r = 0; r < nruns; r++) /* masked-off lanes are not read, wherever they point */
              v = _mm512_mask_loadu_ps(v, m & rmask[r], (const char *)t->x + (roff[r] + tap + c * HW) * 4);
            _mm512_storeu_ps(d, v);
          }
          continue;
        }
        __m512i off = _mm512_add_epi32(vb, _mm512_add_epi32(_mm512_mullo_epi32(ih, W), iw));
        const float *src = t->x;
        for (int64_t c = 0; c < g->C; c++, src += HW, d += KK * PANEL) {
          __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, off, src, 4);
          _mm512_storeu_ps(d, v);
        }
      }
    }
  }
}

static void igemm_range(void *vctx, int64_t begin, int64_t end) {
  igemm_t *t = vctx;
  const hpu_conv_igemm_t *g = t->g;
  int64_t K = t->K, Co = g->Co;
  int64_t most = t->per_task * PANEL;
  float *bp = malloc(sizeof(float) * (size_t)(K * most + Co * most));
  if (!bp) {
    atomic_store(&t->oom, 1);
    return;
  }
  float *cblk = bp + K * most;
  for (int64_t task = begin; task < end; task++) {
    int64_t p0 = task * t->per_task, np = t->panels - p0 < t->per_task ? t->panels - p0 : t->per_task;
    int64_t c0 = p0 * PANEL, ncols = t->cols - c0 < np * PANEL ? t->cols - c0 : np * PANEL;
    for (int64_t p = 0; p < np; p++) gather_panel(t, c0 + p * PANEL, bp + p * K * PANEL);
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
      int64_t kc = K - k0 < KC ? K - k0 : KC;
      hpu_gemm_tile(HPU_GEMM_F32FMA, Co, ncols, kc, t->w + k0, K, (const uint32_t *)(bp + k0 * PANEL), K * PANEL,
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
  free(bp);
}

hpu_status_t hpu_conv_igemm(const hpu_conv_igemm_t *g, const float *x, const float *w, const float *bias,
                            float *y) {
  igemm_t t = {g, x, w, bias, y, g->OH * g->OW, g->C * g->KH * g->KW, 0, 0, 0, 0};
  t.cols = g->N * t.P;
  t.panels = (t.cols + PANEL - 1) / PANEL;
  /* at least 4 tasks per thread where the panels allow */
  int nt = hpu_get_num_threads();
  int64_t per = t.panels / (4 * (int64_t)(nt > 0 ? nt : 1));
  t.per_task = per < 1 ? 1 : per > MAX_PANELS ? MAX_PANELS : per;
  int64_t tasks = (t.panels + t.per_task - 1) / t.per_task;
  atomic_init(&t.oom, 0);
  hpu_parallel_for(tasks, 1, igemm_range, &t);
  if (atomic_load(&t.oom))
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "convolution: out of host memory for the packed patches");
  return HPU_SUCCESS;
}

#else

hpu_status_t hpu_conv_igemm(const hpu_conv_igemm_t *g, const float *x, const float *w, const float *bias,
                            float *y) {
  (void)g, (void)x, (void)w, (void)bias, (void)y;
  return hpu_error(HPU_ERROR_UNSUPPORTED, "convolution: the implicit-GEMM path needs AVX-512");
}

#endif
