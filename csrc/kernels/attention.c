/* Fused scaled dot-product attention (HPU_OP_ATTENTION and its backward),
 * flash-attention style: queries in blocks of BQ rows against keys in
 * blocks of BK, with an online softmax (a running max and sum per row), so
 * the [L, S] score matrix never exists beyond one BQ x BK tile.
 *
 * The forward splits batch * heads * query blocks over the kernel pool; the
 * pool's chunks are runs of consecutive blocks, mostly of one head. On
 * AVX-512 and AVX2 (fwd_tiles) a task packs its head's K^T and V once into
 * the GEMM's panel layout (gemm.h, tiles) and runs every block's two
 * products against them, the queries read in place: bf16 with the
 * AVX512_BF16 dot kernel where the CPU has it (float32 accumulation; the
 * probabilities rounded to bf16 for P @ V, as torch's CPU kernel does),
 * everything else in float32 (bf16 and fp16 widened). Without AVX2
 * (fwd_range) every tile is widened to float32 scratch and multiplied by a
 * plain loop.
 *
 * The backward recomputes each tile's probabilities from the saved
 * log-sum-exp and splits batch * heads over the pool: one task owns a
 * head's dK and dV, so no two tasks add into the same rows. On AVX-512 and
 * AVX2 (bwd_tiles) its tiles are key-major (S^T = K Q^T, so that P^T and
 * dS^T need no transposing), bf16 on the dot kernel (P and dS rounded to
 * bf16); without AVX2 (bwd_range) it widens to float32 scratch. The tile
 * paths take their probabilities from exp16_nonpos (exp8_nonpos on AVX2,
 * the same bits), a 2-ulp exp (bwd_range, fwd_range and the softmax
 * kernels keep pw_expf's bits).
 *
 * Causal masking is top-left aligned as torch's SDPA (query i sees keys
 * j <= i, whatever L and S are). A row whose keys are all masked gives a
 * zero output, a log-sum-exp of -inf and zero gradients, as torch's math
 * path (_safe_softmax) does. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "hpu/parallel.h"
#include "kernels/avx2_regs.h"
#include "kernels/avx512_regs.h"
#include "kernels/cvt.h"
#include "kernels/gemm.h"
#include "kernels/isa.h"
#include "kernels/load16.h"
#include "kernels/nn_rows.h"
#include "kernels/nn_util.h"
#include "kernels/pw_math.h"
#include "kernels/vexp.h"

#define BQ 64
#define BK 64
/* keys per block of the tile path: a multiple of HPU_GEMM_PANEL; fewer
 * online-softmax corrections than BK, and a BQT x 128 score tile (60 KB)
 * stays in L2 beside the packed K and V */
#define BKT 128
/* query rows per block of the tile path: 10 of the AVX-512 GEMM's 12-row
 * blocks, 20 of the AVX2 one's 6-row strips (64-row blocks left a 4-row
 * edge block, its slowest kernel, in each) */
#define BQT 120

/* C[m, n] = alpha * A @ B + beta * C, float32, strided A and B, C row-major
 * with leading dimension ldc: the range paths' products, which run only
 * where the CPU (or HPU_KERNEL_ISA) has no AVX2, so a plain loop. */
static void mm(int64_t m, int64_t n, int64_t k, const float *a, int64_t ars, int64_t acs, const float *b,
               int64_t brs, int64_t bcs, float *c, int64_t ldc, float alpha, float beta) {
  for (int64_t i = 0; i < m; i++) {
    float *ci = c + i * ldc;
    for (int64_t j = 0; j < n; j++) ci[j] = beta == 0.0f ? 0.0f : beta * ci[j];
    for (int64_t p = 0; p < k; p++) {
      float av = alpha * a[i * ars + p * acs];
      for (int64_t j = 0; j < n; j++) ci[j] += av * b[p * brs + j * bcs];
    }
  }
}

/* The [B, H, rows, cols] operand t at (b, h): rows [r0, r0 + nr), columns
 * [c0, c0 + nc) widened into dst (row-major, nc columns). */
static void load_rows(float *dst, const hpu_tensor_t *t, int64_t b, int64_t h, int64_t r0, int64_t nr,
                      int64_t c0, int64_t nc) {
  const char *base = (const char *)hpu_tensor_data(t);
  int64_t es = hpu_dtype_size(t->dtype);
  for (int64_t r = 0; r < nr; r++) {
    const char *p = base + (b * t->strides[0] + h * t->strides[1] + (r0 + r) * t->strides[2] +
                            c0 * t->strides[3]) * es;
    float *d = dst + r * nc;
    if (t->strides[3] == 1) {
      hpu_nn_load_row(d, p, nc, t->dtype);
    } else {
      for (int64_t j = 0; j < nc; j++) d[j] = hpu_load_f32(p + j * t->strides[3] * es, t->dtype);
    }
  }
}

static void store_rows(const hpu_tensor_t *t, int64_t b, int64_t h, int64_t r0, int64_t nr, const float *src,
                       int64_t nc) {
  char *base = (char *)hpu_tensor_data(t);
  int64_t es = hpu_dtype_size(t->dtype);
  for (int64_t r = 0; r < nr; r++) {
    char *p = base + (b * t->strides[0] + h * t->strides[1] + (r0 + r) * t->strides[2]) * es;
    if (t->strides[3] == 1)
      hpu_nn_store_row(p, src + r * nc, nc, t->dtype);
    else
      for (int64_t j = 0; j < nc; j++) hpu_store_f32(p + j * t->strides[3] * es, t->dtype, src[r * nc + j]);
  }
}

typedef struct {
  const hpu_node_t *n;
  const hpu_nn_rows_t *R;
  int64_t B, H, L, S, D, Dv;
  int causal, has_mask;
  float scale;
  int64_t nqb; /* forward query blocks per head: of BQT rows on the tile path, else BQ */
  int kernel;  /* hpu_gemm_tile_kernel of the inputs, HPU_GEMM_NONE: fwd_range */
  _Atomic int oom; /* a task could not get its scratch */
} attn_t;

/* Adds the mask and the causal limit to the scores of query rows q0..
 * (nq) and key columns k0.. (nk), the score of query i and key j at
 * s[i * ldq + j * ldk]: query-major tiles [nq, nk] (ldq = nk, ldk = 1) and
 * the backward's key-major ones [nk, nq] (ldq = 1, ldk = nq). Masked
 * entries become -inf. */
static void mask_tile(const attn_t *c, int64_t b, int64_t h, int64_t q0, int64_t nq, int64_t k0, int64_t nk,
                      float *s, int64_t ldq, int64_t ldk) {
  const hpu_tensor_t *m = c->has_mask ? &c->n->inputs[3] : NULL;
  const char *mb = m ? (const char *)hpu_tensor_data(m) : NULL;
  int64_t es = m ? hpu_dtype_size(m->dtype) : 0;
  for (int64_t i = 0; i < nq; i++) {
    float *si = s + i * ldq;
    if (m) {
      const char *p = mb + (b * m->strides[0] + h * m->strides[1] + (q0 + i) * m->strides[2] +
                            k0 * m->strides[3]) * es;
      if (m->dtype == HPU_BOOL) {
        for (int64_t j = 0; j < nk; j++)
          if (!p[j * m->strides[3]]) si[j * ldk] = -INFINITY;
      } else {
        for (int64_t j = 0; j < nk; j++) si[j * ldk] += hpu_load_f32(p + j * m->strides[3] * es, m->dtype);
      }
    }
    if (c->causal) /* query q0 + i sees key k0 + j when k0 + j <= q0 + i */
      for (int64_t j = q0 + i + 1 - k0 < 0 ? 0 : q0 + i + 1 - k0; j < nk; j++) si[j * ldk] = -INFINITY;
  }
}

/* Keys a causal query block [q0, q0 + nq) can see: [0, q0 + nq). */
static int64_t key_end(const attn_t *c, int64_t q0, int64_t nq) {
  if (!c->causal) return c->S;
  return q0 + nq < c->S ? q0 + nq : c->S;
}

/* ---- forward ------------------------------------------------------------ */

/* One key block of the online softmax: the scores s [nq, nk] become
 * exp(s - running max) in place, each row's running max mx and sum are
 * updated, and its accumulated output acc [nq, Dv] is rescaled when the
 * max grew (if `rescale`: acc holds earlier blocks). */
static void online_softmax(const attn_t *c, float *s, int64_t nq, int64_t nk, float *mx, float *sum, float *acc,
                           int rescale) {
  for (int64_t i = 0; i < nq; i++) {
    float *si = s + i * nk, m = c->R->max(si, nk);
    m = m > mx[i] ? m : mx[i];
    if (m == -INFINITY) { /* every key so far masked: nothing to add */
      memset(si, 0, sizeof(float) * (size_t)nk);
      continue;
    }
    float corr = expf(mx[i] - m);
    sum[i] = sum[i] * corr + c->R->exp(si, si, nk, m);
    mx[i] = m;
    if (rescale && corr != 1.0f) c->R->scale(acc + i * c->Dv, c->Dv, corr, 0.0f);
  }
}

/* ---- the tile path's vector helpers -------------------------------------- */

#if HPU_HAVE_ISA_CLONES
/* The bf16 clones: AVX512_BF16's VCVTNE2PS2BF16 rounds 32 floats to
 * nearest even in one instruction, where rounding by integer arithmetic
 * took 6 per 16 (and a narrowing). It reads and writes denormals as 0, so
 * a probability or gradient below 2^-126 rounds to 0 where
 * hpu_cvt_f32_bf16 keeps a bf16 denormal; nothing else differs. Only the
 * bf16 tile kernel calls them, which needs AVX512_BF16 itself. */
#define ATTR_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,bmi2,prefer-vector-width=512")))

ATTR_BF16 static inline __m512i bf16x32(__m512 lo, __m512 hi) { return (__m512i)_mm512_cvtne2ps_pbh(hi, lo); }

/* y = exp(s - m) over a row of n scores, the sum returned: y over s
 * (float), or rounded to bf16 into yb with a 0 past n up to even. */
HPU_ATTR_avx512 static float exp_row_f32(float *s, int64_t n, float m) {
  __m512 vm = _mm512_set1_ps(m), a = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 k = hpu_mask16(n - j);
    __m512 e = _mm512_maskz_mov_ps(k, exp16_nonpos(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), vm)));
    a = _mm512_add_ps(a, e);
    _mm512_mask_storeu_ps(s + j, k, e);
  }
  return _mm512_reduce_add_ps(a);
}

ATTR_BF16 static float exp_row_bf16(const float *s, int64_t n, float m, uint16_t *yb) {
  __m512 vm = _mm512_set1_ps(m), a = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 32) {
    __mmask16 k0 = hpu_mask16(n - j), k1 = hpu_mask16(n - j - 16);
    __m512 e0 = _mm512_maskz_mov_ps(k0, exp16_nonpos(_mm512_sub_ps(_mm512_maskz_loadu_ps(k0, s + j), vm)));
    __m512 e1 = _mm512_maskz_mov_ps(k1, exp16_nonpos(_mm512_sub_ps(_mm512_maskz_loadu_ps(k1, s + j + 16), vm)));
    a = _mm512_add_ps(a, _mm512_add_ps(e0, e1));
    _mm512_mask_storeu_epi16(yb + j, hpu_mask32(((n + 1) & ~(int64_t)1) - j), bf16x32(e0, e1));
  }
  return _mm512_reduce_add_ps(a);
}

/* The dot product of two bf16 rows of n (the backward's delta = dO . O):
 * the row kernels' dotsum folded its lanes one by one, which at n = 64
 * cost more than the products. */
HPU_ATTR_avx512 static float dot_bf16(const uint16_t *x, const uint16_t *y, int64_t n) {
  __m512 a = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 k = hpu_mask16(n - j);
    a = _mm512_fmadd_ps(hpu_load16_f32((const char *)(x + j), HPU_BFLOAT16, k),
                        hpu_load16_f32((const char *)(y + j), HPU_BFLOAT16, k), a);
  }
  return _mm512_reduce_add_ps(a);
}

HPU_ATTR_avx2 static inline float hsum8(__m256 v) {
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

/* exp_row_f32 on AVX2: 8 lanes, exp8_nonpos (exp16_nonpos's bits). */
HPU_ATTR_avx2 static float exp_row_f32_avx2(float *s, int64_t n, float m) {
  __m256 vm = _mm256_set1_ps(m), a = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 e = exp8_nonpos(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
    a = _mm256_add_ps(a, e);
    _mm256_storeu_ps(s + j, e);
  }
  if (j < n) {
    __m256i k = hpu_mask8(n - j);
    __m256 e = exp8_nonpos(_mm256_sub_ps(_mm256_maskload_ps(s + j, k), vm));
    e = _mm256_and_ps(e, _mm256_castsi256_ps(k));
    a = _mm256_add_ps(a, e);
    _mm256_maskstore_ps(s + j, k, e);
  }
  return hsum8(a);
}
#else /* the tile path needs AVX2 or AVX-512 (hpu_gemm_tile_kernel): plain forms to compile */
static float exp_row_f32(float *s, int64_t n, float m) {
  float a = 0.0f;
  for (int64_t j = 0; j < n; j++) a += s[j] = pw_expf(s[j] - m);
  return a;
}

static float exp_row_bf16(const float *s, int64_t n, float m, uint16_t *yb) {
  float a = 0.0f;
  for (int64_t j = 0; j < n; j++) {
    float e = pw_expf(s[j] - m);
    a += e;
    yb[j] = hpu_cvt_f32_bf16(e);
  }
  if (n & 1) yb[n] = 0;
  return a;
}

static float dot_bf16(const uint16_t *x, const uint16_t *y, int64_t n) {
  float a = 0.0f;
  for (int64_t j = 0; j < n; j++) a += hpu_cvt_bf16_f32(x[j]) * hpu_cvt_bf16_f32(y[j]);
  return a;
}
#endif

static float exp_row(int kern, float *s, int64_t n, float m) {
#if HPU_HAVE_ISA_CLONES
  if (kern == HPU_GEMM_F32AVX2) return exp_row_f32_avx2(s, n, m);
#endif
  (void)kern;
  return exp_row_f32(s, n, m);
}

/* The tile path's online softmax over one key block: online_softmax with
 * exp16_nonpos (exp8_nonpos on AVX2), and for bf16 the probabilities
 * written rounded into pb [nq, kp] (kp: nk up to even) in the same pass
 * instead of back into s. */
static void softmax_tile(const attn_t *c, float *s, int64_t nq, int64_t nk, float *mx, float *sum, float *acc,
                         int rescale, uint16_t *pb, int64_t kp) {
  for (int64_t i = 0; i < nq; i++) {
    float *si = s + i * nk, m = c->R->max(si, nk);
    m = m > mx[i] ? m : mx[i];
    if (m == -INFINITY) { /* every key so far masked: nothing to add */
      if (pb) memset(pb + i * kp, 0, sizeof(uint16_t) * (size_t)kp);
      else memset(si, 0, sizeof(float) * (size_t)nk);
      continue;
    }
    float corr = expf(mx[i] - m);
    sum[i] = sum[i] * corr + (pb ? exp_row_bf16(si, nk, m, pb + i * kp) : exp_row(c->kernel, si, nk, m));
    mx[i] = m;
    if (rescale && corr != 1.0f) c->R->scale(acc + i * c->Dv, c->Dv, corr, 0.0f);
  }
}

/* The query block's output acc / sum into out0 and its log-sum-exp into
 * out1 (0 and -inf for a row with every key masked). */
static void finish_rows(const attn_t *c, int64_t bh, int64_t q0, int64_t nq, float *acc, const float *mx,
                        const float *sum) {
  const hpu_node_t *n = c->n;
  int64_t Dv = c->Dv;
  float *lse = (float *)hpu_tensor_data(&n->outputs[1]) + (bh * c->L + q0);
  for (int64_t i = 0; i < nq; i++) {
    c->R->scale(acc + i * Dv, Dv, sum[i] > 0.0f ? 1.0f / sum[i] : 0.0f, 0.0f);
    lse[i] = sum[i] > 0.0f ? mx[i] + logf(sum[i]) : -INFINITY;
  }
  store_rows(&n->outputs[0], bh / c->H, bh % c->H, q0, nq, acc, Dv);
}

/* The backward's probabilities: the scores p [nq, nk] become exp(p - lse)
 * per row (0 for a row with every key masked). */
static void probs_from_lse(const attn_t *c, float *p, int64_t nq, int64_t nk, const float *lse) {
  for (int64_t i = 0; i < nq; i++) {
    if (lse[i] == -INFINITY)
      memset(p + i * nk, 0, sizeof(float) * (size_t)nk);
    else
      c->R->exp(p + i * nk, p + i * nk, nk, lse[i]);
  }
}


static void fwd_range(void *vctx, int64_t begin, int64_t end) {
  const attn_t *c = vctx;
  const hpu_node_t *n = c->n;
  int64_t D = c->D, Dv = c->Dv;
  float *buf = malloc(sizeof(float) * (size_t)(BQ * D + BK * D + BK * Dv + BQ * BK + BQ * Dv + 2 * BQ));
  if (!buf) {
    atomic_store(&((attn_t *)vctx)->oom, 1);
    return;
  }
  float *q = buf, *k = q + BQ * D, *v = k + BK * D, *s = v + BK * Dv, *acc = s + BQ * BK;
  float *mx = acc + BQ * Dv, *sum = mx + BQ;
  for (int64_t t = begin; t < end; t++) {
    int64_t bh = t / c->nqb, b = bh / c->H, h = bh % c->H;
    int64_t q0 = (t % c->nqb) * BQ, nq = c->L - q0 < BQ ? c->L - q0 : BQ;
    load_rows(q, &n->inputs[0], b, h, q0, nq, 0, D);
    memset(acc, 0, sizeof(float) * (size_t)(nq * Dv));
    for (int64_t i = 0; i < nq; i++) mx[i] = -INFINITY, sum[i] = 0.0f;
    int64_t kend = key_end(c, q0, nq);
    for (int64_t k0 = 0; k0 < kend; k0 += BK) {
      int64_t nk = kend - k0 < BK ? kend - k0 : BK;
      load_rows(k, &n->inputs[1], b, h, k0, nk, 0, D);
      load_rows(v, &n->inputs[2], b, h, k0, nk, 0, Dv);
      mm(nq, nk, D, q, D, 1, k, 1, D, s, nk, c->scale, 0.0f); /* s = scale * q @ k^T */
      mask_tile(c, b, h, q0, nq, k0, nk, s, nk, 1);
      online_softmax(c, s, nq, nk, mx, sum, acc, 1);
      mm(nq, Dv, nk, s, nk, 1, v, Dv, 1, acc, Dv, 1.0f, 1.0f); /* acc += p @ v */
    }
    finish_rows(c, bh, q0, nq, acc, mx, sum);
  }
  free(buf);
}

/* Rows [r0, r0 + nr) of t at (b, h), columns [0, nc), copied as they are
 * (same dtype) into dst, row-major. */
static void copy_rows(void *dst, const hpu_tensor_t *t, int64_t b, int64_t h, int64_t r0, int64_t nr,
                      int64_t nc) {
  const char *base = (const char *)hpu_tensor_data(t);
  int64_t es = hpu_dtype_size(t->dtype);
  for (int64_t r = 0; r < nr; r++) {
    const char *p = base + (b * t->strides[0] + h * t->strides[1] + (r0 + r) * t->strides[2]) * es;
    char *d = (char *)dst + r * nc * es;
    for (int64_t j = 0; j < nc; j++) memcpy(d + j * es, p + j * t->strides[3] * es, (size_t)es);
  }
}

/* t at (b, h) as a strided [rows, cols] matrix, transposed if asked, for
 * hpu_gemm_pack_b. */
static hpu_gemm_t head_matrix(const hpu_tensor_t *t, int64_t b, int64_t h, int transpose) {
  hpu_gemm_t g;
  memset(&g, 0, sizeof g);
  int64_t es = hpu_dtype_size(t->dtype);
  g.b = (const char *)hpu_tensor_data(t) + (b * t->strides[0] + h * t->strides[1]) * es;
  g.dt = t->dtype;
  g.k = transpose ? t->sizes[3] : t->sizes[2];
  g.n = transpose ? t->sizes[2] : t->sizes[3];
  g.brs = transpose ? t->strides[3] : t->strides[2];
  g.bcs = transpose ? t->strides[2] : t->strides[3];
  return g;
}

static void fwd_tiles(void *vctx, int64_t begin, int64_t end) {
  const attn_t *c = vctx;
  const hpu_node_t *n = c->n;
  const hpu_tensor_t *tq = &n->inputs[0], *tk = &n->inputs[1], *tv = &n->inputs[2];
  int64_t D = c->D, Dv = c->Dv, S = c->S;
  int kern = c->kernel, bf = kern == HPU_GEMM_BF16DOT;
  hpu_dtype_t adt = bf ? HPU_BFLOAT16 : HPU_FLOAT32; /* the kernel's A */
  int64_t ksteps = hpu_gemm_panel_steps(kern, D), vsteps = hpu_gemm_panel_steps(kern, S);
  int64_t kwords = hpu_gemm_packed_words(kern, D, S), vwords = hpu_gemm_packed_words(kern, S, Dv);
  size_t words = (size_t)(kwords + vwords + BQT * D + BQT * BKT + BQT * BKT / 2 + BQT * Dv + 2 * BQT);
  uint32_t *buf = malloc(sizeof(uint32_t) * words);
  if (!buf) {
    atomic_store(&((attn_t *)vctx)->oom, 1);
    return;
  }
  uint32_t *kpack = buf, *vpack = kpack + kwords;
  void *qbuf = vpack + vwords;
  float *s = (float *)qbuf + BQT * D;
  uint16_t *pb = (uint16_t *)(s + BQT * BKT); /* bf16 probabilities, rows padded to even */
  float *acc = s + BQT * BKT + BQT * BKT / 2, *mx = acc + BQT * Dv, *sum = mx + BQT;
  int q_in_place = tq->strides[3] == 1 && tq->dtype == adt;
  int64_t es = hpu_dtype_size(tq->dtype), cur = -1;
  for (int64_t t = begin; t < end; t++) {
    int64_t bh = t / c->nqb, b = bh / c->H, h = bh % c->H;
    int64_t q0 = (t % c->nqb) * BQT, nq = c->L - q0 < BQT ? c->L - q0 : BQT;
    if (bh != cur) {
      hpu_gemm_t kt = head_matrix(tk, b, h, 1), v = head_matrix(tv, b, h, 0);
      hpu_gemm_pack_b(kern, &kt, kpack);
      hpu_gemm_pack_b(kern, &v, vpack);
      cur = bh;
    }
    const void *qa = qbuf;
    int64_t lda = D;
    if (q_in_place) {
      qa = (const char *)hpu_tensor_data(tq) + (b * tq->strides[0] + h * tq->strides[1] + q0 * tq->strides[2]) * es;
      lda = tq->strides[2];
    } else if (bf) {
      copy_rows(qbuf, tq, b, h, q0, nq, D);
    } else {
      load_rows(qbuf, tq, b, h, q0, nq, 0, D);
    }
    for (int64_t i = 0; i < nq; i++) mx[i] = -INFINITY, sum[i] = 0.0f;
    int64_t kend = key_end(c, q0, nq);
    for (int64_t k0 = 0; k0 < kend; k0 += BKT) {
      int64_t nk = kend - k0 < BKT ? kend - k0 : BKT;
      /* s = scale * q @ k^T, keys k0.. (panels from k0 / 32) */
      hpu_gemm_tile(kern, nq, nk, D, qa, lda, kpack + k0 / HPU_GEMM_PANEL * ksteps * HPU_GEMM_PANEL,
                    ksteps * HPU_GEMM_PANEL, s, nk, c->scale, 0.0f);
      mask_tile(c, b, h, q0, nq, k0, nk, s, nk, 1);
      /* acc (+)= p @ v, keys k0.. (steps from k0 in each panel) */
      int64_t kp = bf ? (nk + 1) & ~(int64_t)1 : nk;
      softmax_tile(c, s, nq, nk, mx, sum, acc, k0 > 0, bf ? pb : NULL, kp);
      const void *pa = bf ? (const void *)pb : s;
      hpu_gemm_tile(kern, nq, Dv, kp, pa, kp, vpack + (bf ? k0 / 2 : k0) * HPU_GEMM_PANEL,
                    vsteps * HPU_GEMM_PANEL, acc, Dv, 1.0f, k0 == 0 ? 0.0f : 1.0f);
    }
    if (kend == 0) memset(acc, 0, sizeof(float) * (size_t)(nq * Dv));
    finish_rows(c, bh, q0, nq, acc, mx, sum);
  }
  free(buf);
}

static void attn_setup(attn_t *c, const hpu_node_t *n, int64_t D, int64_t Dv) {
  const hpu_tensor_t *k = &n->inputs[1];
  c->n = n;
  c->B = k->sizes[0];
  c->H = k->sizes[1];
  c->S = k->sizes[2];
  c->L = n->inputs[0].sizes[2];
  c->R = hpu_nn_rows();
  c->D = D;
  c->Dv = Dv;
  c->causal = (int)n->params.nn.i[0];
  c->has_mask = n->num_inputs == 4;
  c->scale = (float)hpu_scalar_as_double(n->params.nn.s[0]);
  c->kernel = hpu_gemm_tile_kernel(n->inputs[0].dtype);
  int64_t bq = c->kernel == HPU_GEMM_NONE ? BQ : BQT;
  c->nqb = (c->L + bq - 1) / bq;
  atomic_init(&c->oom, 0);
}

static hpu_status_t attn_status(attn_t *c) {
  if (!atomic_load(&c->oom)) return HPU_SUCCESS;
  return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "%s: out of host memory for the kernel's tiles",
                   hpu_op_name(c->n->op));
}

hpu_status_t hpu_nn_attention(const hpu_node_t *n) {
  attn_t c;
  attn_setup(&c, n, n->inputs[0].sizes[3], n->inputs[2].sizes[3]);
  hpu_parallel_for(c.B * c.H * c.nqb, 1, c.kernel == HPU_GEMM_NONE ? fwd_range : fwd_tiles, &c);
  return attn_status(&c);
}

/* ---- backward ----------------------------------------------------------- */

/* in0 = [B, H, L, D + 2 Dv]: q | dO | O; in1 = [B, H, S, D + Dv]: k | v. */
static void bwd_range(void *vctx, int64_t begin, int64_t end) {
  const attn_t *c = vctx;
  const hpu_node_t *n = c->n;
  int64_t D = c->D, Dv = c->Dv, S = c->S;
  size_t per = (size_t)(S * D + S * Dv + S * D + S * Dv + BQ * D + 2 * BQ * Dv + BQ * D + 2 * BQ * BK + BQ);
  float *buf = malloc(sizeof(float) * per);
  if (!buf) {
    atomic_store(&((attn_t *)vctx)->oom, 1);
    return;
  }
  float *kf = buf, *vf = kf + S * D, *dk = vf + S * Dv, *dv = dk + S * D;
  float *q = dv + S * Dv, *dout = q + BQ * D, *o = dout + BQ * Dv, *dq = o + BQ * Dv;
  float *p = dq + BQ * D, *dp = p + BQ * BK, *delta = dp + BQ * BK;
  for (int64_t bh = begin; bh < end; bh++) {
    int64_t b = bh / c->H, h = bh % c->H;
    load_rows(kf, &n->inputs[1], b, h, 0, S, 0, D);
    load_rows(vf, &n->inputs[1], b, h, 0, S, D, Dv);
    memset(dk, 0, sizeof(float) * (size_t)(S * D));
    memset(dv, 0, sizeof(float) * (size_t)(S * Dv));
    const float *lse = (const float *)hpu_tensor_data(&n->inputs[2]) + bh * c->L;
    for (int64_t q0 = 0; q0 < c->L; q0 += BQ) {
      int64_t nq = c->L - q0 < BQ ? c->L - q0 : BQ;
      load_rows(q, &n->inputs[0], b, h, q0, nq, 0, D);
      load_rows(dout, &n->inputs[0], b, h, q0, nq, D, Dv);
      load_rows(o, &n->inputs[0], b, h, q0, nq, D + Dv, Dv);
      for (int64_t i = 0; i < nq; i++) delta[i] = c->R->dot(dout + i * Dv, o + i * Dv, Dv);
      memset(dq, 0, sizeof(float) * (size_t)(nq * D));
      int64_t kend = key_end(c, q0, nq);
      for (int64_t k0 = 0; k0 < kend; k0 += BK) {
        int64_t nk = kend - k0 < BK ? kend - k0 : BK;
        const float *kb = kf + k0 * D, *vb = vf + k0 * Dv;
        mm(nq, nk, D, q, D, 1, kb, 1, D, p, nk, c->scale, 0.0f);
        mask_tile(c, b, h, q0, nq, k0, nk, p, nk, 1);
        probs_from_lse(c, p, nq, nk, lse + q0);
        mm(nq, nk, Dv, dout, Dv, 1, vb, 1, Dv, dp, nk, 1.0f, 0.0f); /* dp = dO @ v^T */
        for (int64_t i = 0; i < nq; i++)
          for (int64_t j = 0; j < nk; j++) dp[i * nk + j] = p[i * nk + j] * (dp[i * nk + j] - delta[i]);
        mm(nk, Dv, nq, p, 1, nk, dout, Dv, 1, dv + k0 * Dv, Dv, 1.0f, 1.0f);    /* dv += p^T dO */
        mm(nk, D, nq, dp, 1, nk, q, D, 1, dk + k0 * D, D, c->scale, 1.0f);      /* dk += s ds^T q */
        mm(nq, D, nk, dp, nk, 1, kb, D, 1, dq, D, c->scale, 1.0f);              /* dq += s ds k */
      }
      store_rows(&n->outputs[0], b, h, q0, nq, dq, D);
    }
    store_rows(&n->outputs[1], b, h, 0, S, dk, D);
    store_rows(&n->outputs[2], b, h, 0, S, dv, Dv);
  }
  free(buf);
}

/* Rows [r0, r0 + nr), columns [c0, c0 + nc) of t at (b, h) as the bf16
 * kernel's A: in place with a unit column stride, else copied into dst. */
static const void *bf16_rows(const hpu_tensor_t *t, int64_t b, int64_t h, int64_t r0, int64_t nr, int64_t c0,
                             int64_t nc, uint16_t *dst, int64_t *lda) {
  const char *p = (const char *)hpu_tensor_data(t) +
                  (b * t->strides[0] + h * t->strides[1] + r0 * t->strides[2] + c0 * t->strides[3]) * 2;
  if (t->strides[3] == 1) {
    *lda = t->strides[2];
    return p;
  }
  for (int64_t r = 0; r < nr; r++)
    for (int64_t j = 0; j < nc; j++) memcpy(dst + r * nc + j, p + (r * t->strides[2] + j * t->strides[3]) * 2, 2);
  *lda = nc;
  return dst;
}

/* The backward on the tile path computes its tiles key-major: S^T = scale
 * K Q^T and dP^T = V dO^T, [keys, queries], so that P^T and dS^T, the A of
 * the dV and dK products, come out of the elementwise pass as rows, and dQ
 * is accumulated transposed, dQ^T += K^T dS^T, with dS^T written straight
 * into the packed B layout. Query-major tiles needed two 16 x 16 transposes
 * and a second rounding of every tile element; this way only K (once per
 * head) and dQ (once per query block) are transposed. Query blocks are
 * BQB columns, a multiple of HPU_GEMM_PANEL so that a block starts a panel
 * of the packed Q^T and dO^T; key blocks (key_block) are rows of the
 * products, up to BKB_MAX. */
#define BQB 128
#define BKB_MAX 144

/* Key rows per block: as many as fit BKB_MAX, evened out over the blocks
 * (S = 128 one block, 512 four of 128), even so that a block starts a pair
 * of the bf16 operands. */
static int64_t key_block(int64_t S) {
  int64_t nb = (S + BKB_MAX - 1) / BKB_MAX, kb = nb ? (S + nb - 1) / nb : 2;
  return (kb + 1) & ~(int64_t)1;
}

#if HPU_HAVE_ISA_CLONES
/* The elementwise work of one key-major tile, in one pass: for key row j
 * and query column i of st = S^T [nk, nq] (masked) and dpt = dP^T,
 * p = exp(st - lse[i]) (0 in a column whose keys are all masked) and
 * ds = p * (dpt - delta[i]) (rsmb's product of a difference). p and ds go
 * to pt and dst [nk, nq] (the A of dV and dK; bf16 or float), ds also to
 * dsp, the packed B [nk, nq] of dQ^T (hpu_gemm_pack_b's layout, panels
 * pstride words apart). Rows go in pairs, a pair of keys being one step
 * of the bf16 packing; columns in 16s. */
HPU_ATTR_avx512 static inline void grads16(const float *sr, const float *gr, __mmask16 m, __m512 l, __m512 dl,
                                           __mmask16 live, __m512 *p, __m512 *d) {
  *p = _mm512_maskz_mov_ps(live, exp16_nonpos(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, sr), l)));
  *d = _mm512_mul_ps(*p, _mm512_sub_ps(_mm512_maskz_loadu_ps(m, gr), dl));
}

/* lse and delta of columns c.., and which of them have a key to see */
#define GRADS_COLUMNS(c)                                                                      \
  __mmask16 m = hpu_mask16(nq - (c));                                                             \
  __m512 l = _mm512_maskz_loadu_ps(m, lse + (c)), dl = _mm512_maskz_loadu_ps(m, delta + (c)); \
  __mmask16 live = _mm512_mask_cmp_ps_mask(m, l, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ)

HPU_ATTR_avx512 static void tile_grads_f32(const float *st, const float *dpt, int64_t nk, int64_t nq,
                                           const float *lse, const float *delta, float *pt, float *dst,
                                           uint32_t *dsp, int64_t pstride) {
  const int64_t W = HPU_GEMM_PANEL;
  for (int64_t j = 0; j < nk; j++)
    for (int64_t c = 0; c < nq; c += 16) {
      GRADS_COLUMNS(c);
      __m512 p, d;
      grads16(st + j * nq + c, dpt + j * nq + c, m, l, dl, live, &p, &d);
      _mm512_mask_storeu_ps(pt + j * nq + c, m, p);
      _mm512_mask_storeu_ps(dst + j * nq + c, m, d);
      _mm512_storeu_ps(dsp + c / W * pstride + c % W + j * W, d);
    }
}

ATTR_BF16 static void tile_grads_bf16(const float *st, const float *dpt, int64_t nk, int64_t nq, const float *lse,
                                      const float *delta, uint16_t *pt, uint16_t *dst, uint32_t *dsp,
                                      int64_t pstride) {
  const int64_t W = HPU_GEMM_PANEL;
  /* words t = (row j, row j + 1) of column t from [16 of row j, 16 of row j + 1] */
  const __m512i pairs = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int64_t j = 0; j < nk; j += 2) {
    int rows = j + 1 < nk ? 2 : 1;
    for (int64_t i = 0; i < nq; i += 32) {
      __m512 p[2][2], d[2][2]; /* [row][16 columns] */
      for (int hf = 0; hf < 2; hf++) {
        int64_t c = i + 16 * hf;
        GRADS_COLUMNS(c);
        for (int r = 0; r < 2; r++) {
          if (r < rows) grads16(st + (j + r) * nq + c, dpt + (j + r) * nq + c, m, l, dl, live, &p[r][hf], &d[r][hf]);
          else p[r][hf] = d[r][hf] = _mm512_setzero_ps();
        }
        _mm512_storeu_si512(dsp + c / W * pstride + c % W + j / 2 * W,
                            _mm512_permutexvar_epi16(pairs, bf16x32(d[0][hf], d[1][hf])));
      }
      __mmask32 m = hpu_mask32(nq - i);
      for (int r = 0; r < rows; r++) {
        _mm512_mask_storeu_epi16(pt + (j + r) * nq + i, m, bf16x32(p[r][0], p[r][1]));
        _mm512_mask_storeu_epi16(dst + (j + r) * nq + i, m, bf16x32(d[r][0], d[r][1]));
      }
    }
  }
}

/* tile_grads_f32 on AVX2: 8 columns at a time down the whole tile, so
 * that their lse, delta and mask stay in registers (AVX2 has too few to
 * hold a row's worth, as the AVX-512 form does row by row). */
HPU_ATTR_avx2 static void tile_grads_f32_avx2(const float *st, const float *dpt, int64_t nk, int64_t nq,
                                              const float *lse, const float *delta, float *pt, float *dst,
                                              uint32_t *dsp, int64_t pstride) {
  const int64_t W = HPU_GEMM_PANEL;
  for (int64_t c = 0; c < nq; c += 8) {
    __m256i m = hpu_mask8(nq - c);
    __m256 l = _mm256_maskload_ps(lse + c, m), dl = _mm256_maskload_ps(delta + c, m);
    __m256 live = _mm256_and_ps(_mm256_cmp_ps(l, _mm256_set1_ps(-INFINITY), _CMP_NEQ_OQ), _mm256_castsi256_ps(m));
    float *pk = (float *)(dsp + c / W * pstride + c % W);
    if (nq - c >= 8) {
      for (int64_t j = 0, at = c; j < nk; j++, at += nq) {
        __m256 p = _mm256_and_ps(live, exp8_nonpos(_mm256_sub_ps(_mm256_loadu_ps(st + at), l)));
        __m256 d = _mm256_mul_ps(p, _mm256_sub_ps(_mm256_loadu_ps(dpt + at), dl));
        _mm256_storeu_ps(pt + at, p);
        _mm256_storeu_ps(dst + at, d);
        _mm256_storeu_ps(pk + j * W, d);
      }
      continue;
    }
    for (int64_t j = 0, at = c; j < nk; j++, at += nq) {
      __m256 p = _mm256_and_ps(live, exp8_nonpos(_mm256_sub_ps(_mm256_maskload_ps(st + at, m), l)));
      __m256 d = _mm256_mul_ps(p, _mm256_sub_ps(_mm256_maskload_ps(dpt + at, m), dl));
      _mm256_maskstore_ps(pt + at, m, p);
      _mm256_maskstore_ps(dst + at, m, d);
      _mm256_storeu_ps(pk + j * W, d);
    }
  }
}

static void tile_grads(const float *st, const float *dpt, int64_t nk, int64_t nq, const float *lse,
                       const float *delta, void *pt, void *dst, uint32_t *dsp, int64_t pstride, int kern) {
  if (kern == HPU_GEMM_BF16DOT) tile_grads_bf16(st, dpt, nk, nq, lse, delta, pt, dst, dsp, pstride);
  else if (kern == HPU_GEMM_F32AVX2) tile_grads_f32_avx2(st, dpt, nk, nq, lse, delta, pt, dst, dsp, pstride);
  else tile_grads_f32(st, dpt, nk, nq, lse, delta, pt, dst, dsp, pstride);
}

/* dst [cols, rows] = src [rows, cols] (rows lds elements apart), 32-bit
 * floats or bf16 bits, by 16 x 16 register transposes. */
HPU_ATTR_avx512 static void transpose_512(void *dst, const void *src, int64_t rows, int64_t cols, int64_t lds,
                                          int bf) {
  for (int64_t i0 = 0; i0 < rows; i0 += 16)
    for (int64_t j0 = 0; j0 < cols; j0 += 16) {
      int64_t ni = rows - i0 < 16 ? rows - i0 : 16, nj = cols - j0 < 16 ? cols - j0 : 16;
      __mmask16 mj = hpu_mask16(nj), mi = hpu_mask16(ni);
      __m512i r[16];
      for (int64_t i = 0; i < 16; i++) {
        int64_t at = (i0 + i) * lds + j0;
        if (i >= ni) r[i] = _mm512_setzero_si512();
        else if (bf) r[i] = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mj, (const uint16_t *)src + at));
        else r[i] = _mm512_maskz_loadu_epi32(mj, (const float *)src + at);
      }
      hpu_tr16_epi32(r);
      for (int64_t j = 0; j < nj; j++) {
        int64_t at = (j0 + j) * rows + i0;
        if (bf) _mm256_mask_storeu_epi16((uint16_t *)dst + at, mi, _mm512_cvtepi32_epi16(r[j]));
        else _mm512_mask_storeu_epi32((float *)dst + at, mi, r[j]);
      }
    }
}

/* The same for floats on AVX2, by 8 x 8 blocks (edges element by element). */
HPU_ATTR_avx2 static void transpose_f32_avx2(float *dst, const float *src, int64_t rows, int64_t cols, int64_t lds) {
  int64_t i0 = 0;
  for (; i0 + 8 <= rows; i0 += 8) {
    int64_t j0 = 0;
    for (; j0 + 8 <= cols; j0 += 8) hpu_tr8_ps(src + i0 * lds + j0, lds, dst + j0 * rows + i0, rows);
    for (; j0 < cols; j0++)
      for (int64_t i = i0; i < i0 + 8; i++) dst[j0 * rows + i] = src[i * lds + j0];
  }
  for (; i0 < rows; i0++)
    for (int64_t j = 0; j < cols; j++) dst[j * rows + i0] = src[i0 * lds + j];
}

/* bf16 bits on the bf16 kernel, else floats */
static void transpose(void *dst, const void *src, int64_t rows, int64_t cols, int64_t lds, int kern) {
  if (kern == HPU_GEMM_F32AVX2) transpose_f32_avx2(dst, src, rows, cols, lds);
  else transpose_512(dst, src, rows, cols, lds, kern == HPU_GEMM_BF16DOT);
}
#else /* the tile path needs AVX2 or AVX-512 (hpu_gemm_tile_kernel); plain loops to compile */
static void tile_grads(const float *st, const float *dpt, int64_t nk, int64_t nq, const float *lse,
                       const float *delta, void *pt, void *dst, uint32_t *dsp, int64_t pstride, int kern) {
  const int64_t W = HPU_GEMM_PANEL;
  int bf = kern == HPU_GEMM_BF16DOT;
  for (int64_t j = 0; j < nk; j++)
    for (int64_t i = 0; i < nq; i++) {
      int64_t at = j * nq + i;
      float p = lse[i] == -INFINITY ? 0.0f : pw_expf(st[at] - lse[i]);
      float d = p * (dpt[at] - delta[i]);
      uint32_t *pk = dsp + i / W * pstride + i % W;
      if (bf) {
        ((uint16_t *)pt)[at] = hpu_cvt_f32_bf16(p);
        ((uint16_t *)dst)[at] = hpu_cvt_f32_bf16(d);
        ((uint16_t *)(pk + j / 2 * W))[j & 1] = hpu_cvt_f32_bf16(d);
        if (j + 1 == nk && !(j & 1)) ((uint16_t *)(pk + j / 2 * W))[1] = 0;
      } else {
        ((float *)pt)[at] = p;
        ((float *)dst)[at] = d;
        memcpy(pk + j * W, &d, sizeof d);
      }
    }
}

static void transpose(void *dst, const void *src, int64_t rows, int64_t cols, int64_t lds, int kern) {
  int bf = kern == HPU_GEMM_BF16DOT;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      if (bf) ((uint16_t *)dst)[j * rows + i] = ((const uint16_t *)src)[i * lds + j];
      else ((float *)dst)[j * rows + i] = ((const float *)src)[i * lds + j];
    }
}
#endif

/* Columns [c0, c0 + nc) of every row of t at (b, h) as the tile kernel's A
 * (float, or bf16 for the bf16 kernel): in place when they are unit-stride
 * rows of that dtype, else copied into dst. */
static const void *a_rows(const hpu_tensor_t *t, int64_t b, int64_t h, int64_t c0, int64_t nc, int bf, void *dst,
                          int64_t *lda) {
  int64_t rows = t->sizes[2];
  if (bf) return bf16_rows(t, b, h, 0, rows, c0, nc, dst, lda);
  if (t->strides[3] == 1 && t->dtype == HPU_FLOAT32) {
    *lda = t->strides[2];
    return (const float *)hpu_tensor_data(t) + b * t->strides[0] + h * t->strides[1] + c0;
  }
  load_rows(dst, t, b, h, 0, rows, c0, nc);
  *lda = nc;
  return dst;
}

/* t's columns [c0, c0 + nc) at (b, h), transposed if asked, packed as B. */
static void pack_head(int kern, const hpu_tensor_t *t, int64_t b, int64_t h, int64_t c0, int64_t nc, int transpose,
                      uint32_t *dst) {
  hpu_gemm_t g = head_matrix(t, b, h, transpose);
  g.b = (const char *)g.b + c0 * t->strides[3] * hpu_dtype_size(t->dtype);
  if (transpose) g.k = nc;
  else g.n = nc;
  hpu_gemm_pack_b(kern, &g, dst);
}

/* The backward on AVX-512 and AVX2 (see above). bf16 on the AVX512_BF16 dot kernel:
 * the products' operands in bf16 (P and dS rounded to bf16, as torch's CPU
 * kernel does), float32 accumulation; float32 and fp16 in float32. */
static void bwd_tiles(void *vctx, int64_t begin, int64_t end) {
  const attn_t *c = vctx;
  const hpu_node_t *n = c->n;
  const hpu_tensor_t *in0 = &n->inputs[0], *in1 = &n->inputs[1];
  int64_t D = c->D, Dv = c->Dv, S = c->S, L = c->L, es = hpu_dtype_size(in0->dtype);
  int kern = c->kernel, bf = kern == HPU_GEMM_BF16DOT;
  const int64_t W = HPU_GEMM_PANEL, aes = bf ? 2 : 4;
  int64_t qst = hpu_gemm_panel_steps(kern, D), ost = hpu_gemm_panel_steps(kern, Dv);
  int64_t lst = hpu_gemm_panel_steps(kern, L), tst = hpu_gemm_panel_steps(kern, BKB_MAX), bk = key_block(S);
  int64_t qtw = hpu_gemm_packed_words(kern, D, L), otw = hpu_gemm_packed_words(kern, Dv, L);
  int64_t qnw = hpu_gemm_packed_words(kern, L, D), onw = hpu_gemm_packed_words(kern, L, Dv);
  int64_t dsw = hpu_gemm_packed_words(kern, BKB_MAX, BQB);
  /* packs; K, V, K^T (A copies); dK, dV; st, dpt, pt, dst; dS^T packed; dQ^T, dQ; dO, O rows; delta */
  size_t words = (size_t)(qtw + otw + qnw + onw + 2 * S * D + S * Dv + S * D + S * Dv + 4 * BKB_MAX * BQB + dsw +
                          2 * D * BQB + 2 * BQB * Dv + BQB);
  uint32_t *buf = malloc(sizeof(uint32_t) * words);
  if (!buf) {
    atomic_store(&((attn_t *)vctx)->oom, 1);
    return;
  }
  uint32_t *qtp = buf, *otp = qtp + qtw, *qnp = otp + otw, *onp = qnp + qnw;
  float *kbuf = (float *)(onp + onw), *vbuf = kbuf + S * D, *ktb = vbuf + S * Dv;
  float *dk = ktb + S * D, *dv = dk + S * D;
  float *st = dv + S * Dv, *dpt = st + BKB_MAX * BQB, *pt = dpt + BKB_MAX * BQB, *dst = pt + BKB_MAX * BQB;
  uint32_t *dsp = (uint32_t *)(dst + BKB_MAX * BQB);
  float *dqt = (float *)(dsp + dsw), *dq = dqt + D * BQB, *df = dq + BQB * D, *of = df + BQB * Dv;
  float *delta = of + BQB * Dv;
  int in_place = in0->strides[3] == 1 && in0->dtype == (bf ? HPU_BFLOAT16 : HPU_FLOAT32);
  for (int64_t bh = begin; bh < end; bh++) {
    int64_t b = bh / c->H, h = bh % c->H, klda, vlda;
    /* in0 = q | dO | O: Q^T and dO^T for S^T and dP^T, Q and dO for dK and dV */
    pack_head(kern, in0, b, h, 0, D, 1, qtp);
    pack_head(kern, in0, b, h, D, Dv, 1, otp);
    pack_head(kern, in0, b, h, 0, D, 0, qnp);
    pack_head(kern, in0, b, h, D, Dv, 0, onp);
    /* in1 = k | v: K and V as A, K^T as dQ^T's A */
    const char *ka = a_rows(in1, b, h, 0, D, bf, kbuf, &klda), *va = a_rows(in1, b, h, D, Dv, bf, vbuf, &vlda);
    transpose(ktb, ka, S, D, klda, kern);
    memset(dk, 0, sizeof(float) * (size_t)(S * D));
    memset(dv, 0, sizeof(float) * (size_t)(S * Dv));
    const float *lse = (const float *)hpu_tensor_data(&n->inputs[2]) + bh * L;
    for (int64_t q0 = 0; q0 < L; q0 += BQB) {
      int64_t nq = L - q0 < BQB ? L - q0 : BQB;
      if (in_place) {
        const char *row = (const char *)hpu_tensor_data(in0) +
                          (b * in0->strides[0] + h * in0->strides[1] + q0 * in0->strides[2]) * es;
        for (int64_t i = 0; i < nq; i++) {
          const char *r = row + i * in0->strides[2] * es;
          const char *go = r + D * es, *o = r + (D + Dv) * es;
          delta[i] = bf ? dot_bf16((const uint16_t *)go, (const uint16_t *)o, Dv)
                        : c->R->dot((const float *)go, (const float *)o, Dv);
        }
      } else {
        load_rows(df, in0, b, h, q0, nq, D, Dv);
        load_rows(of, in0, b, h, q0, nq, D + Dv, Dv);
        for (int64_t i = 0; i < nq; i++) delta[i] = c->R->dot(df + i * Dv, of + i * Dv, Dv);
      }
      int64_t kend = key_end(c, q0, nq), qoff = (bf ? q0 / 2 : q0) * W;
      for (int64_t k0 = 0; k0 < kend; k0 += bk) {
        int64_t nk = kend - k0 < bk ? kend - k0 : bk;
        hpu_gemm_tile(kern, nk, nq, D, ka + k0 * klda * aes, klda, qtp + q0 / W * qst * W, qst * W, st, nq,
                      c->scale, 0.0f);
        mask_tile(c, b, h, q0, nq, k0, nk, st, 1, nq);
        hpu_gemm_tile(kern, nk, nq, Dv, va + k0 * vlda * aes, vlda, otp + q0 / W * ost * W, ost * W, dpt, nq, 1.0f,
                      0.0f);
        tile_grads(st, dpt, nk, nq, lse + q0, delta, pt, dst, dsp, tst * W, kern);
        /* dv += p^T dO; dk += scale ds^T q; dq^T (+)= scale k^T ds^T */
        hpu_gemm_tile(kern, nk, Dv, nq, pt, nq, onp + qoff, lst * W, dv + k0 * Dv, Dv, 1.0f, 1.0f);
        hpu_gemm_tile(kern, nk, D, nq, dst, nq, qnp + qoff, lst * W, dk + k0 * D, D, c->scale, 1.0f);
        hpu_gemm_tile(kern, D, nq, nk, (const char *)ktb + k0 * aes, S, dsp, tst * W, dqt, nq, c->scale,
                      k0 == 0 ? 0.0f : 1.0f);
      }
      if (kend == 0) memset(dqt, 0, sizeof(float) * (size_t)(D * nq));
      transpose(dq, dqt, D, nq, nq, kern == HPU_GEMM_BF16DOT ? HPU_GEMM_F32FMA : kern);
      store_rows(&n->outputs[0], b, h, q0, nq, dq, D);
    }
    store_rows(&n->outputs[1], b, h, 0, S, dk, D);
    store_rows(&n->outputs[2], b, h, 0, S, dv, Dv);
  }
  free(buf);
}

hpu_status_t hpu_nn_attention_backward(const hpu_node_t *n) {
  attn_t c;
  int64_t D = n->outputs[0].sizes[3], Dv = n->outputs[2].sizes[3];
  attn_setup(&c, n, D, Dv);
  hpu_parallel_for(c.B * c.H, 1, c.kernel == HPU_GEMM_NONE ? bwd_range : bwd_tiles, &c);
  return attn_status(&c);
}

/* ---- validation ---------------------------------------------------------- */

static int attn_float(hpu_dtype_t dt) { return dt == HPU_FLOAT32 || dt == HPU_BFLOAT16 || dt == HPU_FLOAT16; }

static hpu_status_t check4(const char *name, const char *what, const hpu_tensor_t *t, int64_t b, int64_t h,
                           int64_t r, int64_t cols, hpu_dtype_t dt) {
  if (t->ndim != 4)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "%s: %s must have 4 dims [B, H, rows, cols], got %d", name, what,
                     t->ndim);
  if (t->sizes[0] != b || t->sizes[1] != h || t->sizes[2] != r || (cols >= 0 && t->sizes[3] != cols))
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                     "%s: %s is [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld, %lld]", name, what,
                     (long long)t->sizes[0], (long long)t->sizes[1], (long long)t->sizes[2], (long long)t->sizes[3],
                     (long long)b, (long long)h, (long long)r, (long long)(cols >= 0 ? cols : t->sizes[3]));
  if (t->dtype != dt)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "%s: %s is %s, expected %s", name, what, hpu_dtype_name(t->dtype),
                     hpu_dtype_name(dt));
  return HPU_SUCCESS;
}

static hpu_status_t check_mask(const char *name, const hpu_node_t *n, int64_t B, int64_t H, int64_t L,
                               int64_t S, hpu_dtype_t dt) {
  if (n->num_inputs < 4) return HPU_SUCCESS;
  const hpu_tensor_t *m = &n->inputs[3];
  if (m->dtype != HPU_BOOL && m->dtype != HPU_FLOAT32 && m->dtype != dt)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "%s: the mask must be bool, float32 or %s, got %s", name,
                     hpu_dtype_name(dt), hpu_dtype_name(m->dtype));
  return check4(name, "the mask (broadcast by strides)", m, B, H, L, S, m->dtype);
}

static hpu_status_t check_lse(const char *name, const hpu_tensor_t *t, int64_t B, int64_t H, int64_t L) {
  if (t->dtype != HPU_FLOAT32 || t->ndim != 3 || t->sizes[0] != B || t->sizes[1] != H || t->sizes[2] != L ||
      !hpu_tensor_is_contiguous(t))
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "%s: the log-sum-exp must be a contiguous float32 [B, H, L]",
                     name);
  return HPU_SUCCESS;
}

hpu_status_t hpu_validate_attention(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  hpu_status_t st;
  int bwd = n->op == HPU_OP_ATTENTION_BACKWARD;
  if (n->num_inputs < 3 || n->num_inputs > 4 || n->num_outputs != (bwd ? 3 : 2))
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "%s: takes 3 or 4 inputs and %d outputs, got %d and %d", name,
                     bwd ? 3 : 2, n->num_inputs, n->num_outputs);
  const hpu_tensor_t *in0 = &n->inputs[0], *in1 = &n->inputs[1];
  const hpu_tensor_t *fourd[3] = {in0, in1, bwd ? &n->outputs[0] : &n->inputs[2]};
  const hpu_tensor_t *dv4 = bwd ? &n->outputs[2] : &n->outputs[0];
  if (fourd[0]->ndim != 4 || fourd[1]->ndim != 4 || fourd[2]->ndim != 4 || dv4->ndim != 4)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "%s: operands must have 4 dims [B, H, seq, head_dim]", name);
  hpu_dtype_t dt = in0->dtype;
  if (!attn_float(dt))
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: dtype %s is not supported (float32, bfloat16, float16)", name,
                     hpu_dtype_name(dt));
  int64_t B = in0->sizes[0], H = in0->sizes[1], L = in0->sizes[2], S = in1->sizes[2];
  int64_t hd = bwd ? n->outputs[0].sizes[3] : in0->sizes[3], hdv = bwd ? n->outputs[2].sizes[3] : n->inputs[2].sizes[3];
  if (hd < 1 || hdv < 1)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "%s: head dims must be positive, got %lld and %lld", name,
                     (long long)hd, (long long)hdv);
  if (!bwd) {
    int64_t D = in0->sizes[3], Dv = n->inputs[2].sizes[3];
    if ((st = check4(name, "key", in1, B, H, S, D, dt)) || (st = check4(name, "value", &n->inputs[2], B, H, S, -1, dt)))
      return st;
    if ((st = check_mask(name, n, B, H, L, S, dt))) return st;
    if ((st = check4(name, "the output", &n->outputs[0], B, H, L, Dv, dt))) return st;
    return check_lse(name, &n->outputs[1], B, H, L);
  }
  const hpu_tensor_t *dq = &n->outputs[0], *dv = &n->outputs[2];
  int64_t D = dq->sizes[3], Dv = dv->sizes[3];
  if ((st = check4(name, "q | dO | O", in0, B, H, L, D + 2 * Dv, dt)) ||
      (st = check4(name, "k | v", in1, B, H, S, D + Dv, dt)) || (st = check_lse(name, &n->inputs[2], B, H, L)) ||
      (st = check_mask(name, n, B, H, L, S, dt)) || (st = check4(name, "dq", dq, B, H, L, D, dt)) ||
      (st = check4(name, "dk", &n->outputs[1], B, H, S, D, dt)) || (st = check4(name, "dv", dv, B, H, S, Dv, dt)))
    return st;
  return HPU_SUCCESS;
}
