/* The Winograd F(2x2, 3x3) transforms (conv_winograd.c) on AVX2, for CPUs
 * without AVX-512: the same arithmetic on 8 tiles to a vector instead of
 * 16. What AVX-512 does with masks and two-register permutes is done here
 * with whole-vector stores into a stack buffer for partial vectors
 * (VMASKMOVPS stores are slow on AMD), even/odd shuffles across a pair of
 * registers, and AVX2 gathers out of the span window in L1. */
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "kernels/avx2_regs.h"
#include "kernels/conv_winograd_parts.h"
#include "kernels/isa.h"

#if HPU_HAVE_ISA_CLONES

/* The first n (< 8 takes the slow way) lanes of v to dst. */
HPU_ATTR_avx2 static inline void store_n(float *dst, __m256 v, int64_t n) {
  if (n >= 8) {
    _mm256_storeu_ps(dst, v);
    return;
  }
  float tmp[8];
  _mm256_storeu_ps(tmp, v);
  for (int64_t i = 0; i < n; i++) dst[i] = tmp[i];
}

/* Lanes 0, 2, .., 14 (even) or 1, 3, .., 15 (odd) of the 16 floats a:b. */
HPU_ATTR_avx2 static inline __m256 even8(__m256 a, __m256 b) {
  __m256 t = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)); /* a0 a2 b0 b2 | a4 a6 b4 b6 */
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}
HPU_ATTR_avx2 static inline __m256 odd8(__m256 a, __m256 b) {
  __m256 t = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

/* V = (B^T d) B of 8 tiles' 4x4 patches d[r][s] into the 16 matrices. */
HPU_ATTR_avx2 static inline void store_v(__m256 d[4][4], float *dst, int64_t vs, int64_t n) {
  __m256 e[4][4];
  for (int s = 0; s < 4; s++) { /* B^T d */
    e[0][s] = _mm256_sub_ps(d[0][s], d[2][s]);
    e[1][s] = _mm256_add_ps(d[1][s], d[2][s]);
    e[2][s] = _mm256_sub_ps(d[2][s], d[1][s]);
    e[3][s] = _mm256_sub_ps(d[1][s], d[3][s]);
  }
  for (int r = 0; r < 4; r++) { /* (B^T d) B */
    store_n(dst + (4 * r + 0) * vs, _mm256_sub_ps(e[r][0], e[r][2]), n);
    store_n(dst + (4 * r + 1) * vs, _mm256_add_ps(e[r][1], e[r][2]), n);
    store_n(dst + (4 * r + 2) * vs, _mm256_sub_ps(e[r][2], e[r][1]), n);
    store_n(dst + (4 * r + 3) * vs, _mm256_sub_ps(e[r][1], e[r][3]), n);
  }
}

HPU_ATTR_avx2 void hpu_wino_filter_range_avx2(void *vctx, int64_t begin, int64_t end) {
  const hpu_wino_filter_t *ft = vctx;
  int64_t Co = ft->Co, C = ft->C;
  const __m256i step = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(9));
  const __m256 half = _mm256_set1_ps(0.5f);
  for (int64_t co = begin; co < end; co++)
    for (int64_t c = 0; c < C; c += 8) {
      int64_t n = C - c < 8 ? C - c : 8;
      const __m256 m = _mm256_castsi256_ps(hpu_mask8(n));
      const float *f = ft->w + (co * C + c) * 9;
      __m256 g[9], t[4][3];
      for (int j = 0; j < 9; j++) g[j] = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), f + j, step, m, 4);
      for (int j = 0; j < 3; j++) { /* G g */
        t[0][j] = g[j];
        t[1][j] = _mm256_mul_ps(half, _mm256_add_ps(_mm256_add_ps(g[j], g[3 + j]), g[6 + j]));
        t[2][j] = _mm256_mul_ps(half, _mm256_add_ps(_mm256_sub_ps(g[j], g[3 + j]), g[6 + j]));
        t[3][j] = g[6 + j];
      }
      float *u = ft->u + co * C + c;
      for (int r = 0; r < 4; r++) { /* (G g) G^T */
        store_n(u + (4 * r + 0) * Co * C, t[r][0], n);
        store_n(u + (4 * r + 1) * Co * C,
                _mm256_mul_ps(half, _mm256_add_ps(_mm256_add_ps(t[r][0], t[r][1]), t[r][2])), n);
        store_n(u + (4 * r + 2) * Co * C,
                _mm256_mul_ps(half, _mm256_add_ps(_mm256_sub_ps(t[r][0], t[r][1]), t[r][2])), n);
        store_n(u + (4 * r + 3) * Co * C, t[r][2], n);
      }
    }
}

HPU_ATTR_avx2 void hpu_wino_input_segment_avx2(const hpu_wino_t *t, int64_t n, int64_t th, int64_t tw0, int64_t len,
                                               float *v, int64_t vs, int64_t cs) {
  const hpu_conv_winograd_t *g = t->g;
  /* 2 * 32 + 2 patch columns, and room for the last block's full-width loads */
  float rb[4][2 * PANEL + 2 + 2 * 8];
  int64_t width = 2 * len + 2, col0 = 2 * tw0 - g->pw;
  int64_t lo = col0 < 0 ? -col0 : 0, hi = g->W - col0 < width ? g->W - col0 : width; /* in-image columns */
  if (hi < lo) hi = lo;
  for (int r = 0; r < 4; r++) memset(rb[r], 0, sizeof rb[r]);
  for (int64_t c = 0; c < g->C; c++) {
    const float *plane = t->x + (n * g->C + c) * g->H * g->W;
    for (int r = 0; r < 4; r++) {
      int64_t ih = 2 * th - g->ph + r;
      if (ih < 0 || ih >= g->H) continue; /* stays zero: rows out of the image are the same for every c */
      memcpy(rb[r] + lo, plane + ih * g->W + col0 + lo, sizeof(float) * (size_t)(hi - lo));
    }
    float *dst = v + c * cs;
    for (int64_t k = 0; k < len; k += 8) {
      __m256 d[4][4];
      for (int r = 0; r < 4; r++) {
        __m256 a = _mm256_loadu_ps(rb[r] + 2 * k), b = _mm256_loadu_ps(rb[r] + 2 * k + 8);
        __m256 a2 = _mm256_loadu_ps(rb[r] + 2 * k + 2), b2 = _mm256_loadu_ps(rb[r] + 2 * k + 10);
        d[r][0] = even8(a, b);
        d[r][1] = odd8(a, b);
        d[r][2] = even8(a2, b2);
        d[r][3] = odd8(a2, b2);
      }
      store_v(d, dst + k, vs, len - k);
    }
  }
}

HPU_ATTR_avx2 void hpu_wino_input_span_avx2(const hpu_wino_t *t, int64_t first, int64_t len, float *v, int64_t vs,
                                            int64_t cs) {
  const hpu_conv_winograd_t *g = t->g;
  hpu_wino_span_t sp;
  hpu_wino_span_layout(t, first, len, &sp);
  float win[4][64 + 2 * 32] __attribute__((aligned(32)));
  memset(win, 0, sizeof win);
  __m256i pos[2];
  for (int h = 0; h < 2; h++) pos[h] = _mm256_loadu_si256((const __m256i *)(sp.pos + 8 * h));
  for (int64_t c = 0; c < g->C; c++) {
    for (int64_t j = 0; j < sp.rows; j++) {
      const float *plane = t->x + (sp.image[j] * g->C + c) * g->H * g->W;
      for (int r = 0; r < 4; r++)
        if (sp.src[j][r] >= 0) memcpy(win[r] + sp.dst[j], plane + sp.src[j][r], sizeof(float) * (size_t)sp.cnt[j]);
    }
    for (int h = 0; h < 2 && 8 * h < len; h++) {
      __m256 d[4][4];
      for (int r = 0; r < 4; r++)
        for (int s = 0; s < 4; s++) d[r][s] = _mm256_i32gather_ps(win[r] + s, pos[h], 4);
      store_v(d, v + c * cs + 8 * h, vs, len - 8 * h);
    }
  }
}

HPU_ATTR_avx2 void hpu_wino_output_span_avx2(const hpu_wino_t *t, int64_t first, int64_t len, const float *m,
                                             int64_t ms, int64_t ld) {
  const hpu_conv_winograd_t *g = t->g;
  hpu_wino_block_t blk[SPAN];
  int64_t nr = hpu_wino_span_blocks(t, first, len, blk);
  float ob[2][2 * SPAN] __attribute__((aligned(32)));
  for (int64_t co = 0; co < g->Co; co++) {
    const float *src = m + co * ld;
    const __m256 b = _mm256_set1_ps(t->bias ? t->bias[co] : 0.0f);
    for (int h = 0; h < 2 && 8 * h < len; h++) {
      const __m256i mk = hpu_mask8(len - 8 * h); /* M's lanes past len are not read */
      __m256 q[16], r[2][4];
      for (int i = 0; i < 16; i++) q[i] = _mm256_maskload_ps(src + i * ms + 8 * h, mk);
      for (int s = 0; s < 4; s++) { /* A^T M */
        r[0][s] = _mm256_add_ps(_mm256_add_ps(q[s], q[4 + s]), q[8 + s]);
        r[1][s] = _mm256_sub_ps(_mm256_sub_ps(q[4 + s], q[8 + s]), q[12 + s]);
      }
      for (int a = 0; a < 2; a++) { /* (A^T M) A, each tile's two columns side by side */
        __m256 y0 = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(r[a][0], r[a][1]), r[a][2]), b);
        __m256 y1 = _mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(r[a][1], r[a][2]), r[a][3]), b);
        __m256 lo = _mm256_unpacklo_ps(y0, y1), hi = _mm256_unpackhi_ps(y0, y1);
        _mm256_store_ps(ob[a] + 16 * h, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_store_ps(ob[a] + 16 * h + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
      }
    }
    for (int64_t j = 0; j < nr; j++) {
      float *dst = t->y + (blk[j].n * g->Co + co) * g->OH * g->OW + blk[j].off;
      for (int a = 0; a < blk[j].rows; a++)
        memcpy(dst + a * g->OW, ob[a] + 2 * blk[j].k0, sizeof(float) * (size_t)blk[j].cols);
    }
  }
}

HPU_ATTR_avx2 void hpu_wino_dy_span_avx2(const hpu_wino_t *t, const float *dy, int64_t first, int64_t len, float *e,
                                         int64_t ms, int64_t ld) {
  const hpu_conv_winograd_t *g = t->g;
  hpu_wino_block_t blk[SPAN];
  int64_t nr = hpu_wino_span_blocks(t, first, len, blk);
  /* zeroed once: every channel writes the same in-image positions */
  float win[2][2 * SPAN] __attribute__((aligned(32)));
  memset(win, 0, sizeof win);
  for (int64_t co = 0; co < g->Co; co++) {
    for (int64_t j = 0; j < nr; j++) {
      const float *plane = dy + (blk[j].n * g->Co + co) * g->OH * g->OW + blk[j].off;
      for (int a = 0; a < blk[j].rows; a++)
        memcpy(win[a] + 2 * blk[j].k0, plane + a * g->OW, sizeof(float) * (size_t)blk[j].cols);
    }
    float *o = e + co * ld;
    for (int h = 0; h < 2 && 8 * h < len; h++) {
      int64_t n = len - 8 * h;
      __m256 u[2][4];
      for (int a = 0; a < 2; a++) { /* e A^T along the block's columns */
        __m256 lo = _mm256_load_ps(win[a] + 16 * h), hi = _mm256_load_ps(win[a] + 16 * h + 8);
        __m256 d0 = even8(lo, hi), d1 = odd8(lo, hi);
        u[a][0] = d0;
        u[a][1] = _mm256_add_ps(d0, d1);
        u[a][2] = _mm256_sub_ps(d0, d1);
        u[a][3] = _mm256_sub_ps(_mm256_setzero_ps(), d1);
      }
      for (int s = 0; s < 4; s++) { /* A (e A^T) along its rows */
        store_n(o + (0 + s) * ms + 8 * h, u[0][s], n);
        store_n(o + (4 + s) * ms + 8 * h, _mm256_add_ps(u[0][s], u[1][s]), n);
        store_n(o + (8 + s) * ms + 8 * h, _mm256_sub_ps(u[0][s], u[1][s]), n);
        store_n(o + (12 + s) * ms + 8 * h, _mm256_sub_ps(_mm256_setzero_ps(), u[1][s]), n);
      }
    }
  }
}

HPU_ATTR_avx2 void hpu_wino_dw_filter_range_avx2(void *vctx, int64_t begin, int64_t end) {
  const hpu_wino_dw_filter_t *f = vctx;
  int64_t Co = f->Co, C = f->C;
  const __m256 half = _mm256_set1_ps(0.5f);
  for (int64_t co = begin; co < end; co++)
    for (int64_t c = 0; c < C; c += 8) {
      int64_t nc = C - c < 8 ? C - c : 8;
      const __m256i msk = hpu_mask8(nc);
      __m256 q[16], t[3][4];
      for (int i = 0; i < 16; i++) q[i] = _mm256_maskload_ps(f->m + (i * Co + co) * C + c, msk);
      for (int s = 0; s < 4; s++) { /* G^T M */
        __m256 p = _mm256_mul_ps(half, _mm256_add_ps(q[4 + s], q[8 + s]));
        t[0][s] = _mm256_add_ps(q[s], p);
        t[1][s] = _mm256_mul_ps(half, _mm256_sub_ps(q[4 + s], q[8 + s]));
        t[2][s] = _mm256_add_ps(p, q[12 + s]);
      }
      float o[9][8] __attribute__((aligned(32)));
      for (int p = 0; p < 3; p++) { /* (G^T M) G */
        __m256 h = _mm256_mul_ps(half, _mm256_add_ps(t[p][1], t[p][2]));
        _mm256_store_ps(o[3 * p + 0], _mm256_add_ps(t[p][0], h));
        _mm256_store_ps(o[3 * p + 1], _mm256_mul_ps(half, _mm256_sub_ps(t[p][1], t[p][2])));
        _mm256_store_ps(o[3 * p + 2], _mm256_add_ps(h, t[p][3]));
      }
      for (int64_t l = 0; l < nc; l++) {
        float *d = f->dw + ((co * C) + c + l) * 9;
        for (int k = 0; k < 9; k++) d[k] = o[k][l];
      }
    }
}

#endif
