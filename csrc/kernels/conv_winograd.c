/* Winograd F(2x2, 3x3) forward convolution (float32, NCHW, one group, 3x3
 * kernel, stride 1, dilation 1) on AVX-512 and AVX2 (conv_winograd_avx2.c
 * holds the AVX2 transforms; both give the same bits). Each 2x2 block of output
 * pixels (a tile) comes from a 4x4 input patch d; with U = G g G^T (the
 * 3x3 filter g made 4x4) and V = B^T d B, the tile is A^T (sum over input
 * channels of U . V) A: 16 products per tile and channel pair instead of
 * the direct form's 36, i.e. 16 GEMMs [Co x C] @ [C x tiles], one per
 * position of the 4x4. F(2, 3)'s transforms hold only 0, +-1 and 1/2, so
 * the rounding stays that of a sum of a few more terms (docs/NUMERICS.md);
 * larger tiles (F(4, 3)) would take 4x fewer products but scale errors by
 * their fractions.
 *
 * Tiles of all images are numbered (n * TH + th) * TW + tw and cut into
 * tasks of up to MAX_PANELS panels of 32. A task transforms its tiles'
 * patches straight into the GEMM's packed B layout (panel p: [C][32]),
 * runs the 16 products on the GEMM's tile kernel (gemm.h) into M [16][Co]
 * [tiles] in k slices of KC (a slice of U and of the panels stay in L2),
 * and transforms M into y with the bias. Both transforms work on 16
 * tiles to a vector (8 on AVX2): tiles of one row, or spans across rows
 * and images where rows are short (input_span). U is made once per call.
 * On the AVX2 clones (Zen 4 class) the CIFAR ResNet-18's 3x3 64->64 at
 * 8x8, batch 64, took 1.1 ms this way against 1.5 ms by the implicit GEMM. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "hpu/device.h"
#include "hpu/env.h"
#include "hpu/parallel.h"
#include "kernels/conv_winograd.h"
#include "kernels/conv_winograd_parts.h"
#include "kernels/gemm.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/scratch.h"

#define KC 256       /* k steps per slice */
#define MAX_PANELS 4 /* per task: 128 tiles, 512 output pixels */
#define DW_MAX_SIDE 16
#define DW_MIN_TILES 128
#define DW_MAX_FLOATS ((int64_t)8 << 20)

/* HPU_CONV_WINOGRAD: 1 (default) or 0, read once; like HPU_GEMM_KERNEL, a
 * kernel choice that is not an error to get wrong: any other value is said
 * once on stderr and means 1. */
static int enabled(void) {
  static _Atomic int state = -1; /* -1: not read yet */
  int s = atomic_load(&state);
  if (s < 0) {
    const char *e = getenv("HPU_CONV_WINOGRAD");
    long long v = 1;
    if (e && *e && hpu_parse_int("HPU_CONV_WINOGRAD", e, 0, 1, &v) != HPU_SUCCESS) {
      fprintf(stderr, "[habana_torch] HPU_CONV_WINOGRAD=%s is not 0 or 1; using 1\n", e);
      v = 1;
    }
    s = (int)v;
    atomic_store(&state, s);
  }
  return s;
}

int hpu_conv_winograd_suits(const hpu_conv_winograd_t *g) {
  int kernel = hpu_gemm_tile_kernel(HPU_FLOAT32);
  if (!enabled() || (kernel != HPU_GEMM_F32FMA && kernel != HPU_GEMM_F32AVX2)) return 0;
  /* Measured from 64 channels up (bench/conv.py); below 16 the direct form
   * is kept, not measured against this. */
  return g->C >= 16 && g->Co >= 16 && g->ph <= 2 && g->pw <= 2 && g->OH >= 2 && g->OW >= 2;
}

#if HPU_HAVE_ISA_CLONES

/* U = G g G^T for every (co, c): 16 matrices [Co][C], 16 channels at a
 * time (their filters gathered 9 floats apart). */
HPU_ATTR_avx512 static void filter_range(void *vctx, int64_t begin, int64_t end) {
  const hpu_wino_filter_t *ft = vctx;
  int64_t Co = ft->Co, C = ft->C;
  const __m512i step = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(9));
  const __m512 half = _mm512_set1_ps(0.5f);
  for (int64_t co = begin; co < end; co++)
    for (int64_t c = 0; c < C; c += 16) {
      __mmask16 m = C - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (C - c)) - 1);
      const float *f = ft->w + (co * C + c) * 9;
      __m512 g[9], t[4][3];
      for (int j = 0; j < 9; j++) g[j] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, step, f + j, 4);
      for (int j = 0; j < 3; j++) { /* G g */
        t[0][j] = g[j];
        t[1][j] = _mm512_mul_ps(half, _mm512_add_ps(_mm512_add_ps(g[j], g[3 + j]), g[6 + j]));
        t[2][j] = _mm512_mul_ps(half, _mm512_add_ps(_mm512_sub_ps(g[j], g[3 + j]), g[6 + j]));
        t[3][j] = g[6 + j];
      }
      float *u = ft->u + co * C + c;
      for (int r = 0; r < 4; r++) { /* (G g) G^T */
        _mm512_mask_storeu_ps(u + (4 * r + 0) * Co * C, m, t[r][0]);
        _mm512_mask_storeu_ps(u + (4 * r + 1) * Co * C, m,
                              _mm512_mul_ps(half, _mm512_add_ps(_mm512_add_ps(t[r][0], t[r][1]), t[r][2])));
        _mm512_mask_storeu_ps(u + (4 * r + 2) * Co * C, m,
                              _mm512_mul_ps(half, _mm512_add_ps(_mm512_sub_ps(t[r][0], t[r][1]), t[r][2])));
        _mm512_mask_storeu_ps(u + (4 * r + 3) * Co * C, m, t[r][2]);
      }
    }
}

/* V = B^T d B of the len (<= 32) tiles (n, th, tw0 ..) for every channel:
 * tile k of channel c at v + c * cs + k in each of the 16 matrices (vs
 * floats apart). The 4 input rows of a channel are first
 * copied into zero-padded row buffers; then 16 tiles at a time, column s
 * of their patches is every other element from 2k + s, split out of two
 * loads by one permute. */
HPU_ATTR_avx512 static void input_segment(const hpu_wino_t *t, int64_t n, int64_t th, int64_t tw0, int64_t len,
                                          float *v, int64_t vs, int64_t cs) {
  const hpu_conv_winograd_t *g = t->g;
  /* 2 * 32 + 2 patch columns, and room for the last block's full-width loads */
  float rb[4][2 * PANEL + 2 + 2 * 16];
  int64_t width = 2 * len + 2, col0 = 2 * tw0 - g->pw;
  int64_t lo = col0 < 0 ? -col0 : 0, hi = g->W - col0 < width ? g->W - col0 : width; /* in-image columns */
  if (hi < lo) hi = lo;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  for (int r = 0; r < 4; r++) memset(rb[r], 0, sizeof rb[r]);
  for (int64_t c = 0; c < g->C; c++) {
    const float *plane = t->x + (n * g->C + c) * g->H * g->W;
    for (int r = 0; r < 4; r++) {
      int64_t ih = 2 * th - g->ph + r;
      if (ih < 0 || ih >= g->H) continue; /* stays zero: rows out of the image are the same for every c */
      memcpy(rb[r] + lo, plane + ih * g->W + col0 + lo, sizeof(float) * (size_t)(hi - lo));
    }
    float *dst = v + c * cs;
    for (int64_t k = 0; k < len; k += 16) {
      __mmask16 m = len - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (len - k)) - 1);
      __m512 d[4][4], e[4][4];
      for (int r = 0; r < 4; r++) {
        __m512 a = _mm512_loadu_ps(rb[r] + 2 * k), b = _mm512_loadu_ps(rb[r] + 2 * k + 16);
        __m512 a2 = _mm512_loadu_ps(rb[r] + 2 * k + 2), b2 = _mm512_loadu_ps(rb[r] + 2 * k + 18);
        d[r][0] = _mm512_permutex2var_ps(a, even, b);
        d[r][1] = _mm512_permutex2var_ps(a, odd, b);
        d[r][2] = _mm512_permutex2var_ps(a2, even, b2);
        d[r][3] = _mm512_permutex2var_ps(a2, odd, b2);
      }
      for (int s = 0; s < 4; s++) { /* B^T d */
        e[0][s] = _mm512_sub_ps(d[0][s], d[2][s]);
        e[1][s] = _mm512_add_ps(d[1][s], d[2][s]);
        e[2][s] = _mm512_sub_ps(d[2][s], d[1][s]);
        e[3][s] = _mm512_sub_ps(d[1][s], d[3][s]);
      }
      for (int r = 0; r < 4; r++) { /* (B^T d) B */
        _mm512_mask_storeu_ps(dst + (4 * r + 0) * vs + k, m, _mm512_sub_ps(e[r][0], e[r][2]));
        _mm512_mask_storeu_ps(dst + (4 * r + 1) * vs + k, m, _mm512_add_ps(e[r][1], e[r][2]));
        _mm512_mask_storeu_ps(dst + (4 * r + 2) * vs + k, m, _mm512_sub_ps(e[r][2], e[r][1]));
        _mm512_mask_storeu_ps(dst + (4 * r + 3) * vs + k, m, _mm512_sub_ps(e[r][1], e[r][3]));
      }
    }
  }
}

/* Tiles of short rows (under 14 tiles: transform_input) would fill a
 * fraction of the vector a row at a time, so spans of up to SPAN tiles cross rows and images: for
 * each of the 4 patch rows r, the span's tile rows are laid side by side
 * in one window of 64 floats (tile row j at j * (2 TW + 2), less the first
 * tile's column), zeros where the patch leaves the image. Tile k's patch
 * row starts at pos[k]; moving to the next tile adds 2 within a row and 4
 * across one, so pos[SPAN - 1] + 3 <= 63 and two permutes of the window's
 * halves fetch column s of 16 patches. */
void hpu_wino_span_layout(const hpu_wino_t *t, int64_t first, int64_t len, hpu_wino_span_t *sp) {
  int64_t rw = 2 * t->TW + 2;
  sp->row0 = first / t->TW;
  sp->tw0 = first % t->TW;
  sp->rows = (first + len - 1) / t->TW - sp->row0 + 1;
  for (int64_t k = 0; k < SPAN; k++) { /* lanes past len repeat the last tile: loaded, never stored */
    int64_t i = first + (k < len ? k : len - 1);
    sp->pos[k] = (int32_t)((i / t->TW - sp->row0) * rw + 2 * (i % t->TW) - 2 * sp->tw0);
  }
  const hpu_conv_winograd_t *g = t->g;
  for (int64_t j = 0; j < sp->rows; j++) {
    int64_t row = sp->row0 + j, th = row % t->TH;
    int64_t start = j * rw - 2 * sp->tw0; /* window position of the row's column 0 (- pw in the image) */
    int64_t lo = g->pw, hi = g->pw + g->W < rw ? g->pw + g->W : rw; /* in-image patch columns */
    if (start + lo < 0) lo = -start;
    sp->dst[j] = start + lo;
    sp->cnt[j] = hi > lo ? hi - lo : 0;
    sp->image[j] = row / t->TH;
    for (int r = 0; r < 4; r++) {
      int64_t ih = 2 * th - g->ph + r;
      sp->src[j][r] = ih < 0 || ih >= g->H ? -1 : ih * g->W + lo - g->pw;
    }
  }
}

/* Copies n <= 32 floats (masked: no read or write past them). */
HPU_ATTR_avx512 static inline void copy_short(float *dst, const float *src, int64_t n) {
  __mmask16 m0 = n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
  _mm512_mask_storeu_ps(dst, m0, _mm512_maskz_loadu_ps(m0, src));
  if (n > 16) {
    __mmask16 m1 = n >= 32 ? (__mmask16)0xffff : (__mmask16)((1u << (n - 16)) - 1);
    _mm512_mask_storeu_ps(dst + 16, m1, _mm512_maskz_loadu_ps(m1, src + 16));
  }
}

/* V of the len <= SPAN tiles from `first` on, laid out as input_segment's. */
HPU_ATTR_avx512 static void input_span(const hpu_wino_t *t, int64_t first, int64_t len, float *v, int64_t vs,
                                       int64_t cs) {
  const hpu_conv_winograd_t *g = t->g;
  hpu_wino_span_t sp;
  hpu_wino_span_layout(t, first, len, &sp);
  float win[4][64 + 2 * 32] __attribute__((aligned(64)));
  memset(win, 0, sizeof win);
  __m512i idx[4];
  __mmask16 upper[4];
  const __m512i base = _mm512_loadu_si512(sp.pos);
  for (int s = 0; s < 4; s++) {
    idx[s] = _mm512_add_epi32(base, _mm512_set1_epi32(s));
    upper[s] = _mm512_cmpge_epi32_mask(idx[s], _mm512_set1_epi32(32));
  }
  __mmask16 m = len >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << len) - 1);
  for (int64_t c = 0; c < g->C; c++) {
    for (int64_t j = 0; j < sp.rows; j++) {
      const float *plane = t->x + (sp.image[j] * g->C + c) * g->H * g->W;
      for (int r = 0; r < 4; r++)
        if (sp.src[j][r] >= 0) copy_short(win[r] + sp.dst[j], plane + sp.src[j][r], sp.cnt[j]);
    }
    __m512 d[4][4], e[4][4];
    for (int r = 0; r < 4; r++) {
      __m512 w0 = _mm512_load_ps(win[r]), w1 = _mm512_load_ps(win[r] + 16);
      __m512 w2 = _mm512_load_ps(win[r] + 32), w3 = _mm512_load_ps(win[r] + 48);
      for (int s = 0; s < 4; s++)
        d[r][s] = _mm512_mask_blend_ps(upper[s], _mm512_permutex2var_ps(w0, idx[s], w1),
                                       _mm512_permutex2var_ps(w2, idx[s], w3));
    }
    for (int s = 0; s < 4; s++) { /* B^T d */
      e[0][s] = _mm512_sub_ps(d[0][s], d[2][s]);
      e[1][s] = _mm512_add_ps(d[1][s], d[2][s]);
      e[2][s] = _mm512_sub_ps(d[2][s], d[1][s]);
      e[3][s] = _mm512_sub_ps(d[1][s], d[3][s]);
    }
    float *o = v + c * cs;
    for (int r = 0; r < 4; r++) { /* (B^T d) B */
      _mm512_mask_storeu_ps(o + (4 * r + 0) * vs, m, _mm512_sub_ps(e[r][0], e[r][2]));
      _mm512_mask_storeu_ps(o + (4 * r + 1) * vs, m, _mm512_add_ps(e[r][1], e[r][2]));
      _mm512_mask_storeu_ps(o + (4 * r + 2) * vs, m, _mm512_sub_ps(e[r][2], e[r][1]));
      _mm512_mask_storeu_ps(o + (4 * r + 3) * vs, m, _mm512_sub_ps(e[r][1], e[r][3]));
    }
  }
}

/* A span's tiles, row by row, as blocks of an output plane (y's, or
 * dy's for the weight gradient): lanes k0.. of the span, image n, the
 * offset of the block's first pixel in its plane, and how many of its
 * columns (2 a tile) and rows (2) lie inside the plane. Returns the count. */
int64_t hpu_wino_span_blocks(const hpu_wino_t *t, int64_t first, int64_t len, hpu_wino_block_t *b) {
  const hpu_conv_winograd_t *g = t->g;
  int64_t nr = 0;
  for (int64_t k = 0; k < len; nr++) {
    int64_t i = first + k, row = i / t->TW, tw = i % t->TW, th = row % t->TH;
    int64_t c = t->TW - tw < len - k ? t->TW - tw : len - k;
    b[nr] = (hpu_wino_block_t){k, row / t->TH, 2 * th * g->OW + 2 * tw, 2 * c < g->OW - 2 * tw ? 2 * c : g->OW - 2 * tw,
                           2 * th + 1 < g->OH ? 2 : 1};
    k += c;
  }
  return nr;
}

/* y of the len <= SPAN tiles from `first` on = A^T M A + bias, 16 tiles
 * to a vector; M's tile k at m + k (16 matrices ms floats apart, rows of
 * ld). Each tile's 2x2 block is interleaved into two rows of output pairs,
 * then each tile row's part is copied to y. */
HPU_ATTR_avx512 static void output_span(const hpu_wino_t *t, int64_t first, int64_t len, const float *m, int64_t ms,
                                        int64_t ld) {
  const hpu_conv_winograd_t *g = t->g;
  const __m512i lo_pairs = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi_pairs = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  __mmask16 mk = len >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << len) - 1);
  hpu_wino_block_t blk[SPAN];
  int64_t nr = hpu_wino_span_blocks(t, first, len, blk);
  float ob[2][2 * SPAN] __attribute__((aligned(64)));
  for (int64_t co = 0; co < g->Co; co++) {
    const float *src = m + co * ld;
    __m512 q[16], r[2][4];
    for (int i = 0; i < 16; i++) q[i] = _mm512_maskz_loadu_ps(mk, src + i * ms);
    for (int s = 0; s < 4; s++) { /* A^T M */
      r[0][s] = _mm512_add_ps(_mm512_add_ps(q[s], q[4 + s]), q[8 + s]);
      r[1][s] = _mm512_sub_ps(_mm512_sub_ps(q[4 + s], q[8 + s]), q[12 + s]);
    }
    const __m512 b = _mm512_set1_ps(t->bias ? t->bias[co] : 0.0f);
    for (int a = 0; a < 2; a++) { /* (A^T M) A */
      __m512 y0 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(r[a][0], r[a][1]), r[a][2]), b);
      __m512 y1 = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(r[a][1], r[a][2]), r[a][3]), b);
      _mm512_store_ps(ob[a], _mm512_permutex2var_ps(y0, lo_pairs, y1));
      _mm512_store_ps(ob[a] + 16, _mm512_permutex2var_ps(y0, hi_pairs, y1));
    }
    for (int64_t j = 0; j < nr; j++) {
      float *dst = t->y + (blk[j].n * g->Co + co) * g->OH * g->OW + blk[j].off;
      for (int a = 0; a < blk[j].rows; a++) copy_short(dst + a * g->OW, ob[a] + 2 * blk[j].k0, blk[j].cols);
    }
  }
}

/* Calls fn for each run of tiles [t, t + len) of one tile row within
 * [t0, t0 + nt), cut also where a panel of 32 ends when `panels` is set. */
typedef void (*segment_fn)(const hpu_wino_t *t, void *arg, int64_t n, int64_t th, int64_t tw, int64_t len, int64_t off);

static void for_segments(const hpu_wino_t *t, int64_t t0, int64_t nt, int panels, segment_fn fn, void *arg) {
  for (int64_t i = t0; i < t0 + nt;) {
    int64_t row = i / t->TW, tw = i % t->TW, n = row / t->TH, th = row % t->TH;
    int64_t len = t->TW - tw < t0 + nt - i ? t->TW - tw : t0 + nt - i;
    int64_t off = i - t0;
    if (panels && PANEL - off % PANEL < len) len = PANEL - off % PANEL;
    fn(t, arg, n, th, tw, len, off);
    i += len;
  }
}

/* Where tile `off` of a run goes: packed (the GEMM's B panels [C][32]) or
 * row-major [C][ld]; stride = floats between the 16 matrices. */
typedef struct {
  float *buf;
  int64_t stride, ld;
  int packed;
} seg_arg_t;

/* The input transforms on this call's ISA. */
static void segment(const hpu_wino_t *t, int64_t n, int64_t th, int64_t tw0, int64_t len, float *v, int64_t vs,
                    int64_t cs) {
  if (t->kernel == HPU_GEMM_F32AVX2) hpu_wino_input_segment_avx2(t, n, th, tw0, len, v, vs, cs);
  else input_segment(t, n, th, tw0, len, v, vs, cs);
}

static void span(const hpu_wino_t *t, int64_t first, int64_t len, float *v, int64_t vs, int64_t cs) {
  if (t->kernel == HPU_GEMM_F32AVX2) hpu_wino_input_span_avx2(t, first, len, v, vs, cs);
  else input_span(t, first, len, v, vs, cs);
}

static void input_cb(const hpu_wino_t *t, void *arg, int64_t n, int64_t th, int64_t tw, int64_t len, int64_t off) {
  seg_arg_t *a = arg;
  if (a->packed)
    segment(t, n, th, tw, len, a->buf + off / PANEL * t->g->C * PANEL + off % PANEL, a->stride, PANEL);
  else
    segment(t, n, th, tw, len, a->buf + off, a->stride, a->ld);
}

/* Calls fn for runs of up to SPAN tiles [t0 + off, .. + len) within
 * [t0, t0 + nt), cut also where a panel of 32 ends when `panels` is set. */
typedef void (*span_fn)(const hpu_wino_t *t, void *arg, int64_t first, int64_t len, int64_t off);

static void for_spans(const hpu_wino_t *t, int64_t t0, int64_t nt, int panels, span_fn fn, void *arg) {
  for (int64_t off = 0; off < nt;) {
    int64_t len = nt - off < SPAN ? nt - off : SPAN;
    if (panels && PANEL - off % PANEL < len) len = PANEL - off % PANEL;
    fn(t, arg, t0 + off, len, off);
    off += len;
  }
}

static void input_span_cb(const hpu_wino_t *t, void *arg, int64_t first, int64_t len, int64_t off) {
  seg_arg_t *a = arg;
  if (a->packed)
    span(t, first, len, a->buf + off / PANEL * t->g->C * PANEL + off % PANEL, a->stride, PANEL);
  else
    span(t, first, len, a->buf + off, a->stride, a->ld);
}

static void output_span_cb(const hpu_wino_t *t, void *arg, int64_t first, int64_t len, int64_t off) {
  seg_arg_t *a = arg;
  if (t->kernel == HPU_GEMM_F32AVX2) hpu_wino_output_span_avx2(t, first, len, a->buf + off, a->stride, a->ld);
  else output_span(t, first, len, a->buf + off, a->stride, a->ld);
}

/* The input transform of tiles [t0, t0 + nt): by rows where a row fills
 * at least 7/8 of the vector, else by spans across rows. Measured
 * (whole forward convolutions, Zen 4): rows of 14 tiles ran 4% faster by
 * rows, rows of 12 8% faster by spans, rows of 8 14% faster. */
static void transform_input(const hpu_wino_t *t, int64_t t0, int64_t nt, seg_arg_t *a) {
  int lanes = t->kernel == HPU_GEMM_F32AVX2 ? 8 : 16;
  if (8 * t->TW >= 7 * lanes)
    for_segments(t, t0, nt, 1, input_cb, a);
  else
    for_spans(t, t0, nt, 1, input_span_cb, a);
}

static void wino_range(void *vctx, int64_t begin, int64_t end) {
  hpu_wino_t *t = vctx;
  const hpu_conv_winograd_t *g = t->g;
  int64_t C = g->C, Co = g->Co, most = t->per_task * PANEL;
  int64_t vs = t->per_task * C * PANEL; /* floats of one packed V matrix */
  int slot;
  float *v = hpu_scratch_get(sizeof(float) * (size_t)(16 * vs + 16 * Co * most), &slot);
  if (!v) {
    atomic_store(&t->oom, 1);
    return;
  }
  float *m = v + 16 * vs;
  for (int64_t task = begin; task < end; task++) {
    int64_t t0 = task * most, nt = t->tiles - t0 < most ? t->tiles - t0 : most;
    int64_t np = (nt + PANEL - 1) / PANEL;
    if (nt % PANEL) /* lanes past the last tile: zeros, not stale floats */
      for (int i = 0; i < 16; i++) memset(v + i * vs + (np - 1) * C * PANEL, 0, sizeof(float) * (size_t)(C * PANEL));
    seg_arg_t in = {v, vs, 0, 1};
    transform_input(t, t0, nt, &in);
    for (int i = 0; i < 16; i++)
      for (int64_t k0 = 0; k0 < C; k0 += KC) {
        int64_t kc = C - k0 < KC ? C - k0 : KC;
        hpu_gemm_tile(t->kernel, Co, nt, kc, t->u + i * Co * C + k0, C,
                      (const uint32_t *)(v + i * vs + k0 * PANEL), C * PANEL, m + i * Co * nt, nt, 1.0f,
                      k0 == 0 ? 0.0f : 1.0f);
      }
    seg_arg_t out = {m, Co * nt, nt, 0};
    for_spans(t, t0, nt, 0, output_span_cb, &out);
  }
  hpu_scratch_put(v, slot);
}

/* Few tiles and many channels: tasks would each read all of U (16 x Co x C
 * floats) for a thin product. Instead, in three passes: every tile into V
 * [16][C][tiles], the 16 products as one batch on the GEMM (each reads its
 * U once), M [16][Co][tiles] into y; rows of tiles in parallel. */
typedef struct {
  hpu_wino_t *t;
  float *v, *m;
} phases_t;

static void phase_input(void *vctx, int64_t begin, int64_t end) {
  phases_t *p = vctx;
  const hpu_wino_t *t = p->t;
  int64_t T = t->tiles;
  seg_arg_t in = {p->v + begin * t->TW, t->g->C * T, T, 0};
  transform_input(t, begin * t->TW, (end - begin) * t->TW, &in);
}

static void phase_output(void *vctx, int64_t begin, int64_t end) {
  phases_t *p = vctx;
  const hpu_wino_t *t = p->t;
  int64_t T = t->tiles;
  seg_arg_t out = {p->m + begin * t->TW, t->g->Co * T, T, 0};
  for_spans(t, begin * t->TW, (end - begin) * t->TW, 0, output_span_cb, &out);
}

static hpu_status_t run_phases(hpu_wino_t *t) {
  const hpu_conv_winograd_t *g = t->g;
  int64_t T = t->tiles;
  int slot;
  float *v = hpu_scratch_get(sizeof(float) * (size_t)(16 * T * (g->C + g->Co)), &slot);
  if (!v) return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "convolution: out of host memory for the Winograd tiles");
  phases_t p = {t, v, v + 16 * g->C * T};
  int64_t rows = g->N * t->TH;
  hpu_parallel_for(rows, 1, phase_input, &p);
  hpu_gemm_t mm = {.m = g->Co, .n = T, .k = g->C, .a = t->u, .ars = g->C, .acs = 1, .b = p.v, .brs = T, .bcs = 1,
                   .c = p.m, .crs = T, .ccs = 1, .dt = HPU_FLOAT32, .alpha = 1.0f, .beta = 0.0f};
  int64_t offs[3 * 16];
  for (int i = 0; i < 16; i++) {
    offs[3 * i] = (int64_t)sizeof(float) * i * g->Co * g->C;
    offs[3 * i + 1] = (int64_t)sizeof(float) * i * g->C * T;
    offs[3 * i + 2] = (int64_t)sizeof(float) * i * g->Co * T;
  }
  if (hpu_gemm_run_batched(&mm, t->kernel, 16, offs) != 0) {
    hpu_scratch_put(v, slot);
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "convolution: out of host memory for the Winograd products");
  }
  hpu_parallel_for(rows, 1, phase_output, &p);
  hpu_scratch_put(v, slot);
  return HPU_SUCCESS;
}

/* ---- weight gradient --------------------------------------------------- */

/* dW by the same tiles (F(3x3, 2x2), the transpose of F(2x2, 3x3)): with
 * dy's 2x2 block e of a tile and the tile's input patch d,
 * dW[co][c] = G^T (sum over tiles of (A e A^T) . (B^T d B)) G, where A,
 * B, G are the forward's matrices. So: V = B^T d B as the forward makes
 * it, E = A e A^T per output channel, the 16 products M_i [Co x C] =
 * E_i [Co x T] @ V_i^T [T x C] as one batch on the GEMM (each a sum over
 * all T tiles), and G^T M G per (co, c). 16 multiply-adds per tile and
 * channel pair instead of the direct form's 36, and no im2col. */

typedef struct {
  hpu_wino_t *t;
  const float *dy;
  float *e; /* [16][Co][T] */
} dy_arg_t;

/* E of the len <= SPAN tiles from `first` on: the 2x2 blocks of dy (zeros
 * past OH and OW) in a window of 2 rows x 32 floats (the span's tile rows
 * side by side: tile k's block at 2k), split into columns by two permutes. */
HPU_ATTR_avx512 static void dy_span(const hpu_wino_t *t, const float *dy, int64_t first, int64_t len, float *e,
                                    int64_t ms, int64_t ld) {
  const hpu_conv_winograd_t *g = t->g;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  hpu_wino_block_t blk[SPAN];
  int64_t nr = hpu_wino_span_blocks(t, first, len, blk);
  /* zeroed once: every channel writes the same in-image positions */
  float win[2][2 * SPAN] __attribute__((aligned(64)));
  memset(win, 0, sizeof win);
  __mmask16 m = len >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << len) - 1);
  for (int64_t co = 0; co < g->Co; co++) {
    for (int64_t j = 0; j < nr; j++) {
      const float *plane = dy + (blk[j].n * g->Co + co) * g->OH * g->OW + blk[j].off;
      for (int a = 0; a < blk[j].rows; a++) copy_short(win[a] + 2 * blk[j].k0, plane + a * g->OW, blk[j].cols);
    }
    __m512 u[2][4];
    for (int a = 0; a < 2; a++) { /* e A^T along the block's columns */
      __m512 lo = _mm512_load_ps(win[a]), hi = _mm512_load_ps(win[a] + 16);
      __m512 d0 = _mm512_permutex2var_ps(lo, even, hi), d1 = _mm512_permutex2var_ps(lo, odd, hi);
      u[a][0] = d0;
      u[a][1] = _mm512_add_ps(d0, d1);
      u[a][2] = _mm512_sub_ps(d0, d1);
      u[a][3] = _mm512_sub_ps(_mm512_setzero_ps(), d1);
    }
    float *o = e + co * ld;
    for (int s = 0; s < 4; s++) { /* A (e A^T) along its rows */
      _mm512_mask_storeu_ps(o + (0 + s) * ms, m, u[0][s]);
      _mm512_mask_storeu_ps(o + (4 + s) * ms, m, _mm512_add_ps(u[0][s], u[1][s]));
      _mm512_mask_storeu_ps(o + (8 + s) * ms, m, _mm512_sub_ps(u[0][s], u[1][s]));
      _mm512_mask_storeu_ps(o + (12 + s) * ms, m, _mm512_sub_ps(_mm512_setzero_ps(), u[1][s]));
    }
  }
}

static void dy_span_cb(const hpu_wino_t *t, void *arg, int64_t first, int64_t len, int64_t off) {
  (void)off;
  dy_arg_t *a = arg;
  if (t->kernel == HPU_GEMM_F32AVX2)
    hpu_wino_dy_span_avx2(t, a->dy, first, len, a->e + first, t->g->Co * t->tiles, t->tiles);
  else
    dy_span(t, a->dy, first, len, a->e + first, t->g->Co * t->tiles, t->tiles);
}

static void dy_rows(void *vctx, int64_t begin, int64_t end) {
  dy_arg_t *a = vctx;
  for_spans(a->t, begin * a->t->TW, (end - begin) * a->t->TW, 0, dy_span_cb, a);
}

/* dW = G^T M G for every (co, c), 16 channels to a vector. */
HPU_ATTR_avx512 static void dw_filter_range(void *vctx, int64_t begin, int64_t end) {
  const hpu_wino_dw_filter_t *f = vctx;
  int64_t Co = f->Co, C = f->C;
  const __m512 half = _mm512_set1_ps(0.5f);
  for (int64_t co = begin; co < end; co++)
    for (int64_t c = 0; c < C; c += 16) {
      int64_t nc = C - c < 16 ? C - c : 16;
      __mmask16 msk = nc == 16 ? (__mmask16)0xffff : (__mmask16)((1u << nc) - 1);
      __m512 q[16], t[3][4];
      for (int i = 0; i < 16; i++) q[i] = _mm512_maskz_loadu_ps(msk, f->m + (i * Co + co) * C + c);
      for (int s = 0; s < 4; s++) { /* G^T M */
        __m512 p = _mm512_mul_ps(half, _mm512_add_ps(q[4 + s], q[8 + s]));
        t[0][s] = _mm512_add_ps(q[s], p);
        t[1][s] = _mm512_mul_ps(half, _mm512_sub_ps(q[4 + s], q[8 + s]));
        t[2][s] = _mm512_add_ps(p, q[12 + s]);
      }
      float o[9][16] __attribute__((aligned(64)));
      for (int p = 0; p < 3; p++) { /* (G^T M) G */
        __m512 h = _mm512_mul_ps(half, _mm512_add_ps(t[p][1], t[p][2]));
        _mm512_store_ps(o[3 * p + 0], _mm512_add_ps(t[p][0], h));
        _mm512_store_ps(o[3 * p + 1], _mm512_mul_ps(half, _mm512_sub_ps(t[p][1], t[p][2])));
        _mm512_store_ps(o[3 * p + 2], _mm512_add_ps(h, t[p][3]));
      }
      for (int64_t l = 0; l < nc; l++) {
        float *d = f->dw + ((co * C) + c + l) * 9;
        for (int k = 0; k < 9; k++) d[k] = o[k][l];
      }
    }
}

int hpu_conv_winograd_dw_suits(const hpu_conv_winograd_t *g) {
  if (!hpu_conv_winograd_suits(g)) return 0;
  /* Measured against the im2col product (weight gradient alone, Zen 4
   * class, ms): 4x4 128->128 batch 64 1.3 / 2.3, 8x8 64->64 1.1 / 2.2,
   * 16x16 32->32 1.7-1.8 / 2.3, 14x14 256->256 batch 8 5.7 / 10.2, 7x7
   * 512->512 6.3 / 9.9; slower where V and E (16 x (C + Co) floats a
   * tile, all tiles at once) grow past a few tens of MB: 56x56 64->64
   * batch 8 (51 MB) 25.9 / 10.6, 32x32 16->16 batch 64 (34 MB, and
   * 16-channel products) 15.0 / 2.9. With few tiles (below 128, the
   * smallest measured: 7x7 batch 8) the 16 products are shallow (k =
   * tiles) and M costs as much as the products; there its rounding, up to
   * 2.4x the CPU's own on random data, also showed: on torchvision's
   * ResNet-18 at 64x64, batch 4 (2x2 outputs, 4 tiles), one AdamW step
   * (which moves a weight by about lr times its gradient's sign) left
   * layer4's weights 6.5e-4 from the float64 step against the CPU's
   * 9.1e-5. On the AVX2 clones (Zen 4 class, weight gradient alone, ms),
   * from 64 channels: 4x4 128->128 batch 64 1.3 / 2.2, 8x8 64->64 1.6 /
   * 2.2, 14x14 256->256 batch 16 13.2 / 18.5, 7x7 512->512 15.0 / 20.1;
   * but 16x16 32->32 2.5 / 2.3 (AVX2's 6-row strips fit 32 rows worse). */
  int64_t tiles = g->N * ((g->OH + 1) / 2) * ((g->OW + 1) / 2);
  int64_t least = hpu_gemm_tile_kernel(HPU_FLOAT32) == HPU_GEMM_F32AVX2 ? 64 : 32;
  return g->C >= least && g->Co >= least && g->OH <= DW_MAX_SIDE && g->OW <= DW_MAX_SIDE && tiles >= DW_MIN_TILES &&
         16 * tiles * (g->C + g->Co) <= DW_MAX_FLOATS;
}

hpu_status_t hpu_conv_winograd_dw(const hpu_conv_winograd_t *g, const float *x, const float *dy, float *dw) {
  hpu_wino_t t = {g, x, NULL, NULL, NULL, (g->OH + 1) / 2, (g->OW + 1) / 2, 0, 0, hpu_gemm_tile_kernel(HPU_FLOAT32), 0};
  t.tiles = g->N * t.TH * t.TW;
  int64_t T = t.tiles;
  hpu_scratch_buf_t vb = {0}, mb = {0};
  float *v = hpu_scratch_take(&vb, sizeof(float) * (size_t)(16 * T * (g->C + g->Co)));
  float *m = hpu_scratch_take(&mb, sizeof(float) * (size_t)(16 * g->Co * g->C));
  if (!v || !m) {
    hpu_scratch_give(&vb);
    hpu_scratch_give(&mb);
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "convolution: out of host memory for the Winograd tiles");
  }
  float *e = v + 16 * g->C * T;
  phases_t p = {&t, v, NULL};
  int64_t rows = g->N * t.TH;
  hpu_parallel_for(rows, 1, phase_input, &p);
  dy_arg_t da = {&t, dy, e};
  hpu_parallel_for(rows, 1, dy_rows, &da);
  hpu_gemm_t mm = {.m = g->Co, .n = g->C, .k = T, .a = e, .ars = T, .acs = 1, .b = v, .brs = 1, .bcs = T,
                   .c = m, .crs = g->C, .ccs = 1, .dt = HPU_FLOAT32, .alpha = 1.0f, .beta = 0.0f};
  int64_t offs[3 * 16];
  for (int i = 0; i < 16; i++) {
    offs[3 * i] = (int64_t)sizeof(float) * i * g->Co * T;
    offs[3 * i + 1] = (int64_t)sizeof(float) * i * g->C * T;
    offs[3 * i + 2] = (int64_t)sizeof(float) * i * g->Co * g->C;
  }
  hpu_status_t st = HPU_SUCCESS;
  if (hpu_gemm_run_batched(&mm, t.kernel, 16, offs) != 0) {
    st = hpu_error(HPU_ERROR_OUT_OF_MEMORY, "convolution: out of host memory for the Winograd products");
  } else {
    hpu_wino_dw_filter_t f = {m, dw, g->Co, g->C};
    hpu_parallel_for(g->Co, 8, t.kernel == HPU_GEMM_F32AVX2 ? hpu_wino_dw_filter_range_avx2 : dw_filter_range, &f);
  }
  hpu_scratch_give(&vb);
  hpu_scratch_give(&mb);
  return st;
}

hpu_status_t hpu_conv_winograd(const hpu_conv_winograd_t *g, const float *x, const float *w, const float *bias,
                               float *y) {
  int uslot;
  float *u = hpu_scratch_get(sizeof(float) * (size_t)(16 * g->Co * g->C), &uslot);
  if (!u) return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "convolution: out of host memory for the Winograd filters");
  hpu_wino_filter_t ft = {w, u, g->Co, g->C};
  hpu_wino_t t = {g, x, bias, u, y, (g->OH + 1) / 2, (g->OW + 1) / 2, 0, 0, hpu_gemm_tile_kernel(HPU_FLOAT32), 0};
  hpu_parallel_for(g->Co, 8, t.kernel == HPU_GEMM_F32AVX2 ? hpu_wino_filter_range_avx2 : filter_range, &ft);
  t.tiles = g->N * t.TH * t.TW;
  int64_t panels = (t.tiles + PANEL - 1) / PANEL;
  /* at least 4 tasks per thread where the panels allow */
  int nt = hpu_get_num_threads();
  int64_t per = panels / (4 * (int64_t)(nt > 0 ? nt : 1));
  t.per_task = per < 1 ? 1 : per > MAX_PANELS ? MAX_PANELS : per;
  int64_t tasks = (panels + t.per_task - 1) / t.per_task;
  atomic_init(&t.oom, 0);
  /* tasks read U once each; the passes write and read V and M once more */
  if (tasks * g->Co * g->C > 2 * t.tiles * (g->C + g->Co)) {
    hpu_status_t st = run_phases(&t);
    hpu_scratch_put(u, uslot);
    return st;
  }
  hpu_parallel_for(tasks, 1, wino_range, &t);
  hpu_scratch_put(u, uslot);
  if (atomic_load(&t.oom))
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "convolution: out of host memory for the Winograd tiles");
  return HPU_SUCCESS;
}

#else

int hpu_conv_winograd_dw_suits(const hpu_conv_winograd_t *g) {
  (void)g;
  return 0;
}

hpu_status_t hpu_conv_winograd_dw(const hpu_conv_winograd_t *g, const float *x, const float *dy, float *dw) {
  (void)g, (void)x, (void)dy, (void)dw;
  return hpu_error(HPU_ERROR_UNSUPPORTED, "convolution: the Winograd path needs AVX2 or AVX-512");
}

hpu_status_t hpu_conv_winograd(const hpu_conv_winograd_t *g, const float *x, const float *w, const float *bias,
                               float *y) {
  (void)g, (void)x, (void)w, (void)bias, (void)y;
  return hpu_error(HPU_ERROR_UNSUPPORTED, "convolution: the Winograd path needs AVX2 or AVX-512");
}

#endif
