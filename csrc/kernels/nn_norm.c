/* Softmax / log_softmax and their backward, layer norm and its backward,
 * nll_loss and its backward.
 *
 * Rows along the last dim (the transformer case) run row by row, split over
 * the thread pool, in float for fp32/bf16/fp16 (reduced types are converted
 * into a per-task float row buffer) and in double for fp64. The float row
 * loops keep their sums and maxima in lane groups of the ISA's registers
 * (kernels/v16.h), take exp from exp16 on AVX-512, exp8 on AVX2 and pw_expf
 * elsewhere (the same bits), and are compiled as AVX2/AVX-512 clones picked
 * at run time.
 * Softmax over another dim walks columns with a stride. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/parallel.h"
#include "kernels/bytes.h"
#include "kernels/cvt.h"
#include "kernels/vexp.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/nn_rows.h"
#include "kernels/nn_util.h"
#include "kernels/pw.h"
#include "kernels/pw_math.h"
#include "kernels/v16.h"
#include "runtime/schedule_policy.h" /* HPU_GRAIN */

/* Row reductions keep 64 float lanes as four lane groups a0..a3
 * (kernels/v16.h: four independent add chains of AVX-512 width, so the
 * loops run at load speed, not at add/max latency): lane j of a block of 64
 * goes to a(j/16), the 16-element blocks after the last whole 64 to a0, the
 * rest to a scalar. LANES_FOLD adds a2 into a0 and a3 into a1, then a1 into
 * a0, then a0's lanes in order into the scalar: the same order on every
 * ISA. V(VT, k) is the native vector of the elements k.. of the row. */
/* STEP(VT, j, k) for lane group j = 0..3 of the block of 64 from k (its
 * elements k + 16 j..), and LANE_BLOCKS over the row: the blocks of 64,
 * then the blocks of 16 into group 0. The steps name their groups a##j,
 * m##j, b##j. */
#define GROUPS64(VT, STEP, k) \
  STEP(VT, 0, k);             \
  STEP(VT, 1, (k) + 16);      \
  STEP(VT, 2, (k) + 32);      \
  STEP(VT, 3, (k) + 48)
#define LANE_BLOCKS(VT, STEP)                                 \
  for (; i + 64 <= n; i += 64) {                              \
    GROUPS64(VT, STEP, i);                                    \
  }                                                           \
  for (; i + 16 <= n; i += 16) STEP(VT, 0, i)
#define ADD_X(VT, j, k) G_ACC(VT, a##j, V_X, k)
#define ADD_Y(VT, j, k) G_ACC(VT, a##j, V_Y, k)
#define ADD_E(VT, j, k) G_ACC(VT, a##j, V_E, k)
#define ADD_XY(VT, j, k) G_ACC(VT, a##j, V_XY, k)
#define ADD_SQDEV(VT, j, k) G_ACC(VT, a##j, V_SQDEV, k)
#define MAX_X(VT, j, k) G_MAX(VT, m##j, V_X, k)
#define MAX_OF(h, g) VMAX_GT(h, g)
#define LNB(VT, j, k) LNB_STEP(VT, a##j, b##j, k)
#define DOTSUM_BF16(VT, j, k) DOTSUM_BF16_STEP(VT, a##j, b##j, k)
#define LANES_FOLD(VT, a0, a1, a2, a3, r)                         \
  do {                                                            \
    G_ADD(VT, a0, a2);                                            \
    G_ADD(VT, a1, a3);                                            \
    G_ADD(VT, a0, a1);                                            \
    for (int j_ = 0; j_ < 16; j_++) r += G_LANE(VT, a0, j_);      \
  } while (0)

/* d[0..N) = e^(s[j] - c), the same bits on every ISA: exp16 on AVX-512,
 * exp8 on AVX2 (kernels/vexp.h); the portable build takes pw_rowexp.c's
 * loop (vectorised there, see why in that file). N is a multiple of 16. */
#define EXP_BLOCK_generic hpu_pw_exp_row_generic
#define EXP_BLOCK_avx2(d, s, N, c)                                                    \
  for (int j_ = 0; j_ < (N); j_ += 8)                                                 \
  _mm256_storeu_ps((d) + j_, exp8(_mm256_sub_ps(_mm256_loadu_ps((s) + j_), _mm256_set1_ps(c))))
#define EXP_BLOCK_avx512(d, s, N, c)                                                  \
  for (int j_ = 0; j_ < (N); j_ += 16)                                                \
  _mm512_storeu_ps((d) + j_, exp16(_mm512_sub_ps(_mm512_loadu_ps((s) + j_), _mm512_set1_ps(c))))

/* The vectors the steps add (over the row function's x, y, e and c). */
#define V_X(VT, k) VLD_F32(VT, x + (k))
#define V_Y(VT, k) VLD_F32(VT, y + (k))
#define V_XY(VT, k) (VLD_F32(VT, x + (k)) * VLD_F32(VT, y + (k)))
#define V_SQDEV(VT, k)                   \
  ({                                     \
    VT d_ = VLD_F32(VT, x + (k)) - c;    \
    d_ * d_;                             \
  })
/* e holds the exp of the current block of 64 (or 16), k counts from i */
#define V_E(VT, k) VLD_F32(VT, e + ((k) - i))

/* layer norm backward: adds dy*w into sa and dy*w*xhat into sb for the 16
 * elements from k (over rlnb's x, dy, w, mean and rstd). */
/* sa += x * y, sb += y over bf16 x and y (rdot's and rsum's lanes) */
#define DOTSUM_BF16_STEP(VT, sa, sb, k)                                 \
  for (int gi_ = 0; gi_ < VNV(VT); gi_++) {                             \
    int64_t o_ = (k) + gi_ * VW(VT);                                    \
    VT y_ = VLD_BF16(VT, y + o_);                                       \
    sa[gi_] += VLD_BF16(VT, x + o_) * y_;                               \
    sb[gi_] += y_;                                                      \
  }
#define LNB_STEP(VT, sa, sb, k)                                         \
  for (int gi_ = 0; gi_ < VNV(VT); gi_++) {                             \
    int64_t o_ = (k) + gi_ * VW(VT);                                    \
    VT xh_ = (VLD_F32(VT, x + o_) - mean) * rstd;                       \
    VT g_ = VLD_F32(VT, dy + o_) * VLD_F32(VT, w + o_);                 \
    sa[gi_] += g_;                                                      \
    sb[gi_] += g_ * xh_;                                                \
  }

/* Row conversions --------------------------------------------------------------- */

/* bf16 <-> float: the scalar code vectorises in each ISA clone. fp16 takes
 * F16C on AVX2 / AVX-512 CPUs (gemv.c relies on it there too): the scalar
 * conversion's branches kept it scalar, and a bf16 / fp16 group norm spent
 * most of its time converting. F16C rounds to nearest even like
 * hpu_cvt_f32_half; only NaN payloads may differ. */
#define DEF_CONVERT(ISA)                                                                \
  static HPU_ATTR_##ISA void ld_bf16_##ISA(float *d, const uint16_t *s, int64_t n) {     \
    for (int64_t i = 0; i < n; i++) d[i] = hpu_cvt_bf16_f32(s[i]);                       \
  }                                                                                     \
  static HPU_ATTR_##ISA void st_bf16_##ISA(uint16_t *d, const float *s, int64_t n) {     \
    for (int64_t i = 0; i < n; i++) d[i] = hpu_cvt_f32_bf16(s[i]);                       \
  }                                                                                     \
  static HPU_ATTR_##ISA void rd_bf16_##ISA(float *x, uint16_t *d, int64_t n) {           \
    if (d) {                                                                            \
      for (int64_t i = 0; i < n; i++) {                                                 \
        uint16_t h = hpu_cvt_f32_bf16(x[i]);                                            \
        d[i] = h;                                                                       \
        x[i] = hpu_cvt_bf16_f32(h);                                                     \
      }                                                                                 \
    } else {                                                                            \
      for (int64_t i = 0; i < n; i++) x[i] = hpu_round_bf16(x[i]);                      \
    }                                                                                   \
  }

DEF_CONVERT(generic)

static void ld_f16_generic(float *d, const uint16_t *s, int64_t n) {
  for (int64_t i = 0; i < n; i++) d[i] = hpu_cvt_half_f32(s[i]);
}
static void st_f16_generic(uint16_t *d, const float *s, int64_t n) {
  for (int64_t i = 0; i < n; i++) d[i] = hpu_cvt_f32_half(s[i]);
}
static void rd_f16_generic(float *x, uint16_t *d, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint16_t h = hpu_cvt_f32_half(x[i]);
    if (d) d[i] = h;
    x[i] = hpu_cvt_half_f32(h);
  }
}

#if HPU_HAVE_ISA_CLONES
DEF_CONVERT(avx2)
DEF_CONVERT(avx512)
#define ATTR_F16C __attribute__((target("avx2,f16c")))
ATTR_F16C static void ld_f16_f16c(float *d, const uint16_t *s, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
  for (; i < n; i++) d[i] = hpu_cvt_half_f32(s[i]);
}
ATTR_F16C static void st_f16_f16c(uint16_t *d, const float *s, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++) d[i] = hpu_cvt_f32_half(s[i]);
}
ATTR_F16C static void rd_f16_f16c(float *x, uint16_t *d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    if (d) _mm_storeu_si128((__m128i *)(d + i), h);
    _mm256_storeu_ps(x + i, _mm256_cvtph_ps(h));
  }
  rd_f16_generic(x + i, d ? d + i : NULL, n - i);
}
#endif

/* The converters of a 16-bit float dtype for this CPU. */
typedef struct {
  void (*ld)(float *d, const uint16_t *s, int64_t n);
  void (*st)(uint16_t *d, const float *s, int64_t n);
  void (*rd)(float *x, uint16_t *d, int64_t n);
} conv16_t;

static const conv16_t *conv16(hpu_dtype_t dt) {
  static const conv16_t bf16_generic = {ld_bf16_generic, st_bf16_generic, rd_bf16_generic};
  static const conv16_t f16_generic = {ld_f16_generic, st_f16_generic, rd_f16_generic};
#if HPU_HAVE_ISA_CLONES
  static const conv16_t bf16_avx2 = {ld_bf16_avx2, st_bf16_avx2, rd_bf16_avx2};
  static const conv16_t bf16_avx512 = {ld_bf16_avx512, st_bf16_avx512, rd_bf16_avx512};
  static const conv16_t f16_f16c = {ld_f16_f16c, st_f16_f16c, rd_f16_f16c};
  hpu_isa_t isa = hpu_kernels_isa();
  if (isa == HPU_ISA_AVX512) return dt == HPU_BFLOAT16 ? &bf16_avx512 : &f16_f16c;
  if (isa == HPU_ISA_AVX2) return dt == HPU_BFLOAT16 ? &bf16_avx2 : &f16_f16c;
#endif
  return dt == HPU_BFLOAT16 ? &bf16_generic : &f16_generic;
}

void hpu_nn_load_row(float *dst, const char *src, int64_t n, hpu_dtype_t dt) {
  if (dt == HPU_FLOAT32) {
    hpu_copy_bytes(dst, src, (size_t)n * 4);
  } else if (dt == HPU_BFLOAT16 || dt == HPU_FLOAT16) {
    conv16(dt)->ld(dst, (const uint16_t *)src, n);
  } else {
    int64_t es = (int64_t)hpu_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) dst[i] = hpu_load_f32(src + i * es, dt);
  }
}

void hpu_nn_round_row(float *x, char *dst, int64_t n, hpu_dtype_t dt) {
  if (dt == HPU_BFLOAT16 || dt == HPU_FLOAT16) conv16(dt)->rd(x, (uint16_t *)dst, n);
}

void hpu_nn_store_row(char *dst, const float *src, int64_t n, hpu_dtype_t dt) {
  if (dt == HPU_FLOAT32) {
    hpu_copy_bytes(dst, src, (size_t)n * 4);
  } else if (dt == HPU_BFLOAT16 || dt == HPU_FLOAT16) {
    conv16(dt)->st((uint16_t *)dst, src, n);
  } else {
    int64_t es = (int64_t)hpu_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) hpu_store_f32(dst + i * es, dt, src[i]);
  }
}

/* Float row kernels (per ISA) -------------------------------------------------- */

#define DEF_ROWS(ISA)                                                                   \
  static HPU_ATTR_##ISA float rmax_##ISA(const float *x, int64_t n) {                   \
    G_DECL4(VT_##ISA, m, -INFINITY);                                                    \
    int64_t i = 0;                                                                      \
    LANE_BLOCKS(VT_##ISA, MAX_X);                                                       \
    float r = G_FOLD4(VT_##ISA, m, MAX_OF);                                             \
    for (; i < n; i++) r = x[i] > r ? x[i] : r;                                         \
    return r;                                                                           \
  }                                                                                     \
  /* y = exp(x - c); returns sum(y) */                                                  \
  static HPU_ATTR_##ISA float rexp_##ISA(const float *x, float *y, int64_t n, float c) { \
    G_DECL4(VT_##ISA, a, 0);                                                            \
    int64_t i = 0;                                                                      \
    for (; i + 64 <= n; i += 64) {                                                      \
      EXP_BLOCK_##ISA(y + i, x + i, 64, c);                                             \
      GROUPS64(VT_##ISA, ADD_Y, i);                                                     \
    }                                                                                   \
    for (; i + 16 <= n; i += 16) {                                                      \
      EXP_BLOCK_##ISA(y + i, x + i, 16, c);                                             \
      ADD_Y(VT_##ISA, 0, i);                                                            \
    }                                                                                   \
    float r = 0;                                                                        \
    for (; i < n; i++) {                                                                \
      float v = pw_expf(x[i] - c);                                                      \
      y[i] = v;                                                                         \
      r += v;                                                                           \
    }                                                                                   \
    LANES_FOLD(VT_##ISA, a0, a1, a2, a3, r);                                            \
    return r;                                                                           \
  }                                                                                     \
  /* sum(exp(x - c)) without storing (each block's exp in e) */                         \
  static HPU_ATTR_##ISA float rexpsum_##ISA(const float *x, int64_t n, float c) {       \
    G_DECL4(VT_##ISA, a, 0);                                                            \
    float e[64];                                                                        \
    int64_t i = 0;                                                                      \
    for (; i + 64 <= n; i += 64) {                                                      \
      EXP_BLOCK_##ISA(e, x + i, 64, c);                                                 \
      GROUPS64(VT_##ISA, ADD_E, i);                                                     \
    }                                                                                   \
    for (; i + 16 <= n; i += 16) {                                                      \
      EXP_BLOCK_##ISA(e, x + i, 16, c);                                                 \
      ADD_E(VT_##ISA, 0, i);                                                            \
    }                                                                                   \
    float r = 0;                                                                        \
    for (; i < n; i++) r += pw_expf(x[i] - c);                                          \
    LANES_FOLD(VT_##ISA, a0, a1, a2, a3, r);                                            \
    return r;                                                                           \
  }                                                                                     \
  static HPU_ATTR_##ISA void rscale_##ISA(float *y, int64_t n, float a, float b) {      \
    for (int64_t i = 0; i < n; i++) y[i] = y[i] * a + b;                                \
  }                                                                                     \
  static HPU_ATTR_##ISA void raffine_##ISA(const float *x, float *y, int64_t n, float a, \
                                           float b) {                                   \
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * a + b;                                \
  }                                                                                     \
  static HPU_ATTR_##ISA float rsum_##ISA(const float *x, int64_t n) {                   \
    G_DECL4(VT_##ISA, a, 0);                                                            \
    int64_t i = 0;                                                                      \
    LANE_BLOCKS(VT_##ISA, ADD_X);                                                       \
    float r = 0;                                                                        \
    for (; i < n; i++) r += x[i];                                                       \
    LANES_FOLD(VT_##ISA, a0, a1, a2, a3, r);                                            \
    return r;                                                                           \
  }                                                                                     \
  /* sum((x - c)^2) */                                                                  \
  static HPU_ATTR_##ISA float rssd_##ISA(const float *x, int64_t n, float c) {          \
    G_DECL4(VT_##ISA, a, 0);                                                            \
    int64_t i = 0;                                                                      \
    LANE_BLOCKS(VT_##ISA, ADD_SQDEV);                                                   \
    float r = 0;                                                                        \
    for (; i < n; i++) r += (x[i] - c) * (x[i] - c);                                    \
    LANES_FOLD(VT_##ISA, a0, a1, a2, a3, r);                                            \
    return r;                                                                           \
  }                                                                                     \
  static HPU_ATTR_##ISA float rdot_##ISA(const float *x, const float *y, int64_t n) {   \
    G_DECL4(VT_##ISA, a, 0);                                                            \
    int64_t i = 0;                                                                      \
    LANE_BLOCKS(VT_##ISA, ADD_XY);                                                      \
    float r = 0;                                                                        \
    for (; i < n; i++) r += x[i] * y[i];                                                \
    LANES_FOLD(VT_##ISA, a0, a1, a2, a3, r);                                            \
    return r;                                                                           \
  }                                                                                     \
  /* y = (x - mean) * rstd */                                                           \
  static HPU_ATTR_##ISA void rcenter_##ISA(const float *x, float *y, int64_t n, float mean, \
                                           float rstd) {                                \
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] - mean) * rstd;                        \
  }                                                                                     \
  /* y = a * u + b * v + c */                                                           \
  static HPU_ATTR_##ISA void raxpby_##ISA(const float *u, const float *v, float *y,     \
                                          int64_t n, float a, float b, float c) {       \
    for (int64_t i = 0; i < n; i++) y[i] = a * u[i] + b * v[i] + c;                     \
  }                                                                                     \
  /* bf16 rows read as they are: sum(x * y), and sum(y) into *sy, each the  \
   * same bits as rdot / rsum over the rows converted to float */                       \
  static HPU_ATTR_##ISA float rdotsum_bf16_##ISA(const uint16_t *x, const uint16_t *y,  \
                                                 int64_t n, float *sy) {                \
    G_DECL4(VT_##ISA, a, 0);                                                            \
    G_DECL4(VT_##ISA, b, 0);                                                            \
    int64_t i = 0;                                                                      \
    LANE_BLOCKS(VT_##ISA, DOTSUM_BF16);                                                 \
    float r = 0, s = 0;                                                                 \
    for (; i < n; i++) {                                                                \
      float yv = LD_BF16(y[i]);                                                         \
      r += LD_BF16(x[i]) * yv;                                                          \
      s += yv;                                                                          \
    }                                                                                   \
    LANES_FOLD(VT_##ISA, a0, a1, a2, a3, r);                                            \
    LANES_FOLD(VT_##ISA, b0, b1, b2, b3, s);                                            \
    *sy = s;                                                                            \
    return r;                                                                           \
  }                                                                                     \
  /* y = a * u + b * v + c over bf16 rows, rounded once to bf16 */                      \
  static HPU_ATTR_##ISA void raxpby_bf16_##ISA(const uint16_t *u, const uint16_t *v,    \
                                               uint16_t *y, int64_t n, float a, float b, \
                                               float c) {                               \
    for (int64_t i = 0; i < n; i++)                                                     \
      y[i] = hpu_cvt_f32_bf16(a * LD_BF16(u[i]) + b * LD_BF16(v[i]) + c);               \
  }                                                                                     \
  /* y = x * a + b rounded to bf16: raffine and the bf16 store in one pass */           \
  static HPU_ATTR_##ISA void raffine_bf16_##ISA(const float *x, uint16_t *y, int64_t n, \
                                                float a, float b) {                     \
    for (int64_t i = 0; i < n; i++) y[i] = hpu_cvt_f32_bf16(x[i] * a + b);              \
  }                                                                                     \
  /* rsmb over bf16 rows, rounded to bf16 (no float copies of the rows) */              \
  static HPU_ATTR_##ISA void rsmb_bf16_##ISA(const uint16_t *g, const uint16_t *y,      \
                                             uint16_t *dx, int64_t n, float dot) {      \
    for (int64_t i = 0; i < n; i++)                                                     \
      dx[i] = hpu_cvt_f32_bf16(LD_BF16(y[i]) * (LD_BF16(g[i]) - dot));                  \
  }                                                                                     \
  /* y = (x - mean) * rstd * w + b */                                                   \
  static HPU_ATTR_##ISA void rnorm_##ISA(const float *x, float *y, int64_t n, float mean, \
                                         float rstd, const float *w, const float *b) {  \
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] - mean) * rstd * w[i] + b[i];          \
  }                                                                                     \
  /* softmax backward: dx = y * (g - dot) */                                            \
  static HPU_ATTR_##ISA void rsmb_##ISA(const float *g, const float *y, float *dx,      \
                                        int64_t n, float dot) {                         \
    for (int64_t i = 0; i < n; i++) dx[i] = y[i] * (g[i] - dot);                        \
  }                                                                                     \
  /* log_softmax backward: dx = g - exp(y) * s */                                       \
  static HPU_ATTR_##ISA void rlsmb_##ISA(const float *g, const float *y, float *dx,     \
                                         int64_t n, float s) {                          \
    float e[16];                                                                        \
    int64_t i = 0;                                                                      \
    for (; i + 16 <= n; i += 16) {                                                      \
      EXP_BLOCK_##ISA(e, y + i, 16, 0.0f);                                              \
      for (int gi = 0; gi < VNV(VT_##ISA); gi++) {                                      \
        int64_t k = i + gi * VW(VT_##ISA);                                              \
        VT_##ISA ev = VLD_F32(VT_##ISA, e + gi * VW(VT_##ISA));                         \
        VST_F32(dx + k, VLD_F32(VT_##ISA, g + k) - ev * s);                             \
      }                                                                                 \
    }                                                                                   \
    for (; i < n; i++) dx[i] = g[i] - pw_expf(y[i]) * s;                                \
  }                                                                                     \
  /* layer norm backward row: accumulates dgamma/dbeta, writes dx */                    \
  static HPU_ATTR_##ISA void rlnb_##ISA(const float *dy, const float *x, const float *w, \
                                        float *dx, float *dg, float *db, int64_t n,     \
                                        float mean, float rstd, int want_dx) {          \
    G_DECL4(VT_##ISA, a, 0);                                                            \
    G_DECL4(VT_##ISA, b, 0);                                                            \
    int64_t i = 0;                                                                      \
    LANE_BLOCKS(VT_##ISA, LNB);                                                         \
    float a = 0, b = 0;                                                                 \
    for (; i < n; i++) {                                                                \
      float xh = (x[i] - mean) * rstd, g = dy[i] * w[i];                                \
      a += g;                                                                           \
      b += g * xh;                                                                      \
    }                                                                                   \
    LANES_FOLD(VT_##ISA, a0, a1, a2, a3, a);                                            \
    LANES_FOLD(VT_##ISA, b0, b1, b2, b3, b);                                            \
    if (dg)                                                                             \
      for (i = 0; i < n; i++) dg[i] += dy[i] * ((x[i] - mean) * rstd);                  \
    if (db)                                                                             \
      for (i = 0; i < n; i++) db[i] += dy[i];                                           \
    if (want_dx) {                                                                      \
      float ma = a / (float)n, mb = b / (float)n;                                       \
      for (i = 0; i < n; i++) {                                                         \
        float xh = (x[i] - mean) * rstd;                                                \
        dx[i] = rstd * (dy[i] * w[i] - ma - xh * mb);                                   \
      }                                                                                 \
    }                                                                                   \
  }

DEF_ROWS(generic)
#if HPU_HAVE_ISA_CLONES
DEF_ROWS(avx2)
DEF_ROWS(avx512)
#endif

#define ROWS_OF(ISA)                                                                     \
  {rmax_##ISA, rexp_##ISA, rexpsum_##ISA, rscale_##ISA, raffine_##ISA, rsum_##ISA,       \
   rssd_##ISA, rdot_##ISA, rnorm_##ISA, rsmb_##ISA, rlsmb_##ISA, rlnb_##ISA,             \
   rcenter_##ISA, raxpby_##ISA, rdotsum_bf16_##ISA, raxpby_bf16_##ISA, raffine_bf16_##ISA, \
   rsmb_bf16_##ISA}

static const hpu_nn_rows_t rows_generic = ROWS_OF(generic);
#if HPU_HAVE_ISA_CLONES
static const hpu_nn_rows_t rows_avx2 = ROWS_OF(avx2);
static const hpu_nn_rows_t rows_avx512 = ROWS_OF(avx512);
#endif

const hpu_nn_rows_t *hpu_nn_rows(void) {
#if HPU_HAVE_ISA_CLONES
  hpu_isa_t isa = hpu_kernels_isa();
  if (isa == HPU_ISA_AVX512) return &rows_avx512;
  if (isa == HPU_ISA_AVX2) return &rows_avx2;
#endif
  return &rows_generic;
}

/* Softmax ------------------------------------------------------------------------ */

typedef struct {
  const hpu_node_t *node;
  const hpu_nn_rows_t *R;
  int64_t outer, D, inner;
  int log;
} sm_t;

static void geometry(const hpu_tensor_t *t, int64_t dim, int64_t *outer, int64_t *D,
                     int64_t *inner) {
  *outer = 1;
  *inner = 1;
  *D = t->ndim ? t->sizes[dim] : 1;
  for (int d = 0; d < t->ndim; d++) {
    if (d < dim) *outer *= t->sizes[d];
    if (d > dim) *inner *= t->sizes[d];
  }
}

/* One float row: y = softmax(x) (x may alias y). With yb set, the last pass
 * writes the row rounded to bf16 into yb instead of y (one pass fewer over
 * a bf16 row; the same bits as the float row stored as bf16). The rows of a
 * bf16 / fp16 log_softmax round their sum and its log to that dtype (dt), as
 * PyTorch's CPU keeps them in the tensor's type (else 1 element in 5 is 1
 * ulp off). */
static void softmax_row_f(const hpu_nn_rows_t *R, const float *x, float *y, uint16_t *yb, int64_t n,
                          int log, hpu_dtype_t dt) {
  float mx = R->max(x, n);
  if (mx == -INFINITY) mx = 0; /* all -inf: exp gives 0s, as PyTorch */
  if (log) {
    float s = hpu_round_to(R->expsum(x, n, mx), dt);
    float b = -mx - hpu_round_to(logf(s), dt);
    if (yb) R->affine_bf16(x, yb, n, 1.0f, b);
    else R->affine(x, y, n, 1.0f, b);
  } else {
    float s = R->exp(x, y, n, mx);
    if (yb) R->affine_bf16(y, yb, n, 1.0f / s, 0.0f);
    else R->scale(y, n, 1.0f / s, 0.0f);
  }
}

static void softmax_row_d(const double *x, double *y, int64_t n, int64_t sx, int64_t sy, int lg) {
  double mx = -INFINITY;
  int nan = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = x[i * sx];
    if (v != v) nan = 1;
    if (v > mx) mx = v;
  }
  if (nan) mx = NAN;
  if (mx == -INFINITY) mx = 0;
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += exp(x[i * sx] - mx);
  if (lg) {
    double ls = log(s);
    for (int64_t i = 0; i < n; i++) y[i * sy] = x[i * sx] - mx - ls;
  } else {
    for (int64_t i = 0; i < n; i++) y[i * sy] = exp(x[i * sx] - mx) / s;
  }
}

static void softmax_rows(void *ctx, int64_t begin, int64_t end) {
  const sm_t *c = ctx;
  const hpu_tensor_t *in = &c->node->inputs[0], *out = &c->node->outputs[0];
  hpu_dtype_t dt = in->dtype;
  int64_t es = (int64_t)hpu_dtype_size(dt), D = c->D;
  const char *x = hpu_tensor_data(in);
  char *y = hpu_tensor_data(out);
  if (c->inner == 1) {
    if (dt == HPU_FLOAT64) {
      for (int64_t r = begin; r < end; r++)
        softmax_row_d((const double *)x + r * D, (double *)y + r * D, D, 1, 1, c->log);
      return;
    }
    if (dt == HPU_FLOAT32) {
      for (int64_t r = begin; r < end; r++)
        softmax_row_f(c->R, (const float *)x + r * D, (float *)y + r * D, NULL, D, c->log, dt);
      return;
    }
    float *buf = malloc((size_t)D * sizeof(float));
    if (!buf) abort();
    for (int64_t r = begin; r < end; r++) {
      hpu_nn_load_row(buf, x + r * D * es, D, dt);
      if (dt == HPU_BFLOAT16) {
        softmax_row_f(c->R, buf, buf, (uint16_t *)(y + r * D * es), D, c->log, dt);
        continue;
      }
      softmax_row_f(c->R, buf, buf, NULL, D, c->log, dt);
      hpu_nn_store_row(y + r * D * es, buf, D, dt);
    }
    free(buf);
    return;
  }
  /* columns: r indexes (outer, inner) pairs */
  double *bx = malloc((size_t)D * 2 * sizeof(double));
  if (!bx) abort();
  double *by = bx + D;
  for (int64_t r = begin; r < end; r++) {
    int64_t o = r / c->inner, i = r % c->inner;
    int64_t base = o * D * c->inner + i;
    for (int64_t k = 0; k < D; k++) bx[k] = hpu_load_f64(x + (base + k * c->inner) * es, dt);
    softmax_row_d(bx, by, D, 1, 1, c->log);
    if (dt != HPU_FLOAT64) /* float math semantics: round through float */
      for (int64_t k = 0; k < D; k++) hpu_store_f32(y + (base + k * c->inner) * es, dt, (float)by[k]);
    else
      for (int64_t k = 0; k < D; k++) hpu_store_f64(y + (base + k * c->inner) * es, dt, by[k]);
  }
  free(bx);
}

/* Elements per chunk. A softmax element costs about six times an add's
 * (an exp), so the elementwise grain (HPU_GRAIN, 32768) left [256 x 128]
 * and [16 x 1024] on one thread, below torch's speed; with 8192 they match
 * it, and larger inputs are unchanged. */
#define SOFTMAX_GRAIN 8192

void hpu_nn_softmax(const hpu_node_t *node) {
  sm_t c = {node, hpu_nn_rows(), 0, 0, 0, (int)node->params.nn.i[1]};
  geometry(&node->inputs[0], node->params.nn.i[0], &c.outer, &c.D, &c.inner);
  int64_t nrows = c.outer * c.inner;
  if (nrows == 0 || c.D == 0) return;
  int64_t grain = SOFTMAX_GRAIN / c.D;
  hpu_parallel_for(nrows, grain > 0 ? grain : 1, softmax_rows, &c);
}

static void softmax_bw_rows(void *ctx, int64_t begin, int64_t end) {
  const sm_t *c = ctx;
  const hpu_tensor_t *g = &c->node->inputs[0], *y = &c->node->inputs[1];
  const hpu_tensor_t *dx = &c->node->outputs[0];
  hpu_dtype_t dg = g->dtype, dy = y->dtype, dd = dx->dtype;
  int64_t D = c->D, inner = c->inner;
  const char *pg = hpu_tensor_data(g), *py = hpu_tensor_data(y);
  char *pd = hpu_tensor_data(dx);
  int64_t eg = (int64_t)hpu_dtype_size(dg), ey = (int64_t)hpu_dtype_size(dy),
          ed = (int64_t)hpu_dtype_size(dd);
  int dbl = dg == HPU_FLOAT64 || dy == HPU_FLOAT64 || dd == HPU_FLOAT64 || inner != 1;
  if (!dbl && !c->log && dg == HPU_BFLOAT16 && dy == HPU_BFLOAT16 && dd == HPU_BFLOAT16) {
    /* bf16 rows read and written as they are: two passes, not five */
    for (int64_t r = begin; r < end; r++) {
      const uint16_t *g16 = (const uint16_t *)pg + r * D, *y16 = (const uint16_t *)py + r * D;
      float sy;
      c->R->smb_bf16(g16, y16, (uint16_t *)pd + r * D, D, c->R->dotsum_bf16(g16, y16, D, &sy));
    }
    return;
  }
  if (!dbl) {
    float *buf = malloc((size_t)D * 3 * sizeof(float));
    if (!buf) abort();
    float *bg = buf, *by = buf + D, *bd = buf + 2 * D;
    for (int64_t r = begin; r < end; r++) {
      const float *fg = bg, *fy = by;
      if (dg == HPU_FLOAT32) fg = (const float *)(pg + r * D * eg);
      else hpu_nn_load_row(bg, pg + r * D * eg, D, dg);
      if (dy == HPU_FLOAT32) fy = (const float *)(py + r * D * ey);
      else hpu_nn_load_row(by, py + r * D * ey, D, dy);
      float *fd = dd == HPU_FLOAT32 ? (float *)(pd + r * D * ed) : bd;
      if (c->log) c->R->lsmb(fg, fy, fd, D, c->R->sum(fg, D));
      else c->R->smb(fg, fy, fd, D, c->R->dot(fg, fy, D));
      if (dd != HPU_FLOAT32) hpu_nn_store_row(pd + r * D * ed, fd, D, dd);
    }
    free(buf);
    return;
  }
  for (int64_t r = begin; r < end; r++) {
    int64_t o = r / inner, i = r % inner, base = o * D * inner + i;
    double s = 0;
    for (int64_t k = 0; k < D; k++) {
      int64_t e = base + k * inner;
      double gv = hpu_load_f64(pg + e * eg, dg);
      s += c->log ? gv : gv * hpu_load_f64(py + e * ey, dy);
    }
    for (int64_t k = 0; k < D; k++) {
      int64_t e = base + k * inner;
      double gv = hpu_load_f64(pg + e * eg, dg), yv = hpu_load_f64(py + e * ey, dy);
      hpu_store_f64(pd + e * ed, dd, c->log ? gv - exp(yv) * s : yv * (gv - s));
    }
  }
}

void hpu_nn_softmax_backward(const hpu_node_t *node) {
  sm_t c = {node, hpu_nn_rows(), 0, 0, 0, (int)node->params.nn.i[1]};
  geometry(&node->inputs[0], node->params.nn.i[0], &c.outer, &c.D, &c.inner);
  int64_t nrows = c.outer * c.inner;
  if (nrows == 0 || c.D == 0) return;
  int64_t grain = HPU_GRAIN / c.D;
  hpu_parallel_for(nrows, grain > 0 ? grain : 1, softmax_bw_rows, &c);
}

/* Layer norm ------------------------------------------------------------------------ */

typedef struct {
  const hpu_node_t *node;
  const hpu_nn_rows_t *R;
  int64_t M, N;
  float *w, *b;      /* float copies of weight / bias (1 / 0 when absent) */
  double *wd, *bd;   /* fp64 */
  double eps;
  float *parts;      /* layer norm backward: [nblocks][2][N] */
  int64_t nblocks, rows_per_block;
} ln_t;

static void ln_rows(void *ctx, int64_t begin, int64_t end) {
  const ln_t *c = ctx;
  const hpu_node_t *n = c->node;
  const hpu_tensor_t *x = &n->inputs[0], *y = &n->outputs[0];
  hpu_dtype_t dt = x->dtype;
  int64_t N = c->N, es = (int64_t)hpu_dtype_size(dt);
  const char *px = hpu_tensor_data(x);
  char *py = hpu_tensor_data(y);
  if (dt == HPU_FLOAT64) {
    for (int64_t r = begin; r < end; r++) {
      const double *xr = (const double *)px + r * N;
      double *yr = (double *)py + r * N;
      double s = 0, v = 0;
      for (int64_t i = 0; i < N; i++) s += xr[i];
      double mean = s / (double)N;
      for (int64_t i = 0; i < N; i++) v += (xr[i] - mean) * (xr[i] - mean);
      double rstd = 1.0 / sqrt(v / (double)N + c->eps);
      for (int64_t i = 0; i < N; i++) yr[i] = (xr[i] - mean) * rstd * c->wd[i] + c->bd[i];
      hpu_store_f64(hpu_nn_elem(&n->outputs[1], r), n->outputs[1].dtype, mean);
      hpu_store_f64(hpu_nn_elem(&n->outputs[2], r), n->outputs[2].dtype, rstd);
    }
    return;
  }
  float *buf = dt == HPU_FLOAT32 ? NULL : malloc((size_t)N * sizeof(float));
  if (dt != HPU_FLOAT32 && !buf) abort();
  for (int64_t r = begin; r < end; r++) {
    const float *xr;
    float *yr;
    if (buf) {
      hpu_nn_load_row(buf, px + r * N * es, N, dt);
      xr = yr = buf;
    } else {
      xr = (const float *)px + r * N;
      yr = (float *)py + r * N;
    }
    float mean = c->R->sum(xr, N) / (float)N;
    float var = c->R->ssd(xr, N, mean) / (float)N;
    float rstd = 1.0f / sqrtf(var + (float)c->eps);
    c->R->norm(xr, yr, N, mean, rstd, c->w, c->b);
    if (buf) hpu_nn_store_row(py + r * N * es, buf, N, dt);
    hpu_store_f32(hpu_nn_elem(&n->outputs[1], r), n->outputs[1].dtype, mean);
    hpu_store_f32(hpu_nn_elem(&n->outputs[2], r), n->outputs[2].dtype, rstd);
  }
  free(buf);
}

int hpu_nn_param_copy(const hpu_tensor_t *t, int64_t N, float fill, float **f, double **d) {
  *f = malloc((size_t)(N ? N : 1) * sizeof(float));
  *d = malloc((size_t)(N ? N : 1) * sizeof(double));
  if (!*f || !*d) {
    free(*f);
    free(*d);
    *f = NULL;
    *d = NULL;
    return -1;
  }
  int reduced = t && (t->dtype == HPU_FLOAT32 || t->dtype == HPU_BFLOAT16 || t->dtype == HPU_FLOAT16);
  if (reduced && hpu_tensor_is_contiguous(t)) {
    /* the usual case, converted as a row (exactly, float fits them all):
     * an address and a dtype switch per element made a [8 x 1024] layer
     * norm 3x slower than torch's */
    hpu_nn_load_row(*f, hpu_tensor_data(t), N, t->dtype);
    for (int64_t i = 0; i < N; i++) (*d)[i] = (*f)[i];
    return 0;
  }
  for (int64_t i = 0; i < N; i++) {
    double v = t ? hpu_load_f64(hpu_nn_elem(t, i), t->dtype) : fill;
    (*f)[i] = (float)v;
    (*d)[i] = v;
  }
  return 0;
}

void hpu_nn_layer_norm(const hpu_node_t *node) {
  ln_t c;
  memset(&c, 0, sizeof c);
  c.node = node;
  c.R = hpu_nn_rows();
  c.M = node->inputs[0].sizes[0];
  c.N = node->inputs[0].sizes[1];
  c.eps = hpu_scalar_as_double(node->params.nn.s[0]);
  int64_t flags = node->params.nn.i[0];
  const hpu_tensor_t *w = (flags & 1) ? &node->inputs[1] : NULL;
  const hpu_tensor_t *b = (flags & 2) ? &node->inputs[(flags & 1) ? 2 : 1] : NULL;
  if (c.M == 0) return;
  if (c.N == 0) { /* normalising nothing: mean and rstd are NaN (0/0), as PyTorch */
    for (int64_t r = 0; r < c.M; r++) {
      hpu_store_f64(hpu_nn_elem(&node->outputs[1], r), node->outputs[1].dtype, NAN);
      hpu_store_f64(hpu_nn_elem(&node->outputs[2], r), node->outputs[2].dtype, NAN);
    }
    return;
  }
  if (hpu_nn_param_copy(w, c.N, 1.0f, &c.w, &c.wd) || hpu_nn_param_copy(b, c.N, 0.0f, &c.b, &c.bd)) abort();
  int64_t grain = HPU_GRAIN / c.N;
  hpu_parallel_for(c.M, grain > 0 ? grain : 1, ln_rows, &c);
  free(c.w); free(c.wd); free(c.b); free(c.bd);
}

static void lnb_blocks(void *ctx, int64_t begin, int64_t end) {
  const ln_t *c = ctx;
  const hpu_node_t *n = c->node;
  int64_t N = c->N, mask = n->params.nn.i[0];
  const hpu_tensor_t *dy = &n->inputs[0], *x = &n->inputs[1], *st = &n->inputs[2];
  const hpu_tensor_t *dx = &n->outputs[0];
  hpu_dtype_t dt = x->dtype, dtg = dy->dtype, dtd = (mask & 1) ? dx->dtype : HPU_FLOAT32;
  int64_t es = (int64_t)hpu_dtype_size(dt), esg = (int64_t)hpu_dtype_size(dtg),
          esd = (int64_t)hpu_dtype_size(dtd);
  const char *px = hpu_tensor_data(x), *pg = hpu_tensor_data(dy);
  char *pd = (mask & 1) ? hpu_tensor_data(dx) : NULL;
  float *buf = malloc((size_t)N * 3 * sizeof(float));
  if (!buf) abort();
  float *bx = buf, *bg = buf + N, *bd = buf + 2 * N;
  for (int64_t blk = begin; blk < end; blk++) {
    float *dg = c->parts + blk * 2 * N, *db = dg + N;
    memset(dg, 0, (size_t)N * 2 * sizeof(float));
    int64_t r0 = blk * c->rows_per_block, r1 = r0 + c->rows_per_block;
    if (r1 > c->M) r1 = c->M;
    for (int64_t r = r0; r < r1; r++) {
      const float *fx = bx, *fg = bg;
      if (dt == HPU_FLOAT32) fx = (const float *)px + r * N;
      else hpu_nn_load_row(bx, px + r * N * es, N, dt);
      if (dtg == HPU_FLOAT32) fg = (const float *)pg + r * N;
      else hpu_nn_load_row(bg, pg + r * N * esg, N, dtg);
      float *fd = (pd && dtd == HPU_FLOAT32) ? (float *)pd + r * N : bd;
      float mean = hpu_load_f32(hpu_nn_elem(st, r), st->dtype);
      float rstd = hpu_load_f32(hpu_nn_elem(st, c->M + r), st->dtype);
      c->R->lnb(fg, fx, c->w, fd, (mask & 2) ? dg : NULL, (mask & 4) ? db : NULL, N, mean, rstd,
                (int)(mask & 1));
      if (pd && dtd != HPU_FLOAT32) hpu_nn_store_row(pd + r * N * esd, bd, N, dtd);
    }
  }
  free(buf);
}

static void lnb_rows_f64(void *ctx, int64_t begin, int64_t end) {
  const ln_t *c = ctx;
  const hpu_node_t *n = c->node;
  int64_t N = c->N;
  const double *x = hpu_tensor_data(&n->inputs[1]), *dy = hpu_tensor_data(&n->inputs[0]);
  const hpu_tensor_t *st = &n->inputs[2];
  double *dx = hpu_tensor_data(&n->outputs[0]);
  for (int64_t r = begin; r < end; r++) {
    double mean = hpu_load_f64(hpu_nn_elem(st, r), st->dtype);
    double rstd = hpu_load_f64(hpu_nn_elem(st, c->M + r), st->dtype);
    const double *xr = x + r * N, *gr = dy + r * N;
    double a = 0, b = 0;
    for (int64_t i = 0; i < N; i++) {
      double g = gr[i] * c->wd[i];
      a += g;
      b += g * (xr[i] - mean) * rstd;
    }
    a /= (double)N;
    b /= (double)N;
    for (int64_t i = 0; i < N; i++)
      dx[r * N + i] = rstd * (gr[i] * c->wd[i] - a - (xr[i] - mean) * rstd * b);
  }
}

void hpu_nn_layer_norm_backward(const hpu_node_t *node) {
  ln_t c;
  memset(&c, 0, sizeof c);
  c.node = node;
  c.R = hpu_nn_rows();
  const hpu_tensor_t *x = &node->inputs[1];
  c.M = x->sizes[0];
  c.N = x->sizes[1];
  int64_t mask = node->params.nn.i[0];
  const hpu_tensor_t *w = node->params.nn.i[1] ? &node->inputs[3] : NULL;
  int64_t N = c.N;
  if (N == 0) return;
  if (hpu_nn_param_copy(w, N, 1.0f, &c.w, &c.wd)) abort();
  if (x->dtype == HPU_FLOAT64) {
    /* fp64: dx by rows, dgamma/dbeta by columns, all in double */
    const hpu_tensor_t *st = &node->inputs[2];
    const double *px = hpu_tensor_data(x), *pg = hpu_tensor_data(&node->inputs[0]);
    if ((mask & 1) && c.M) hpu_parallel_for(c.M, HPU_GRAIN / N + 1, lnb_rows_f64, &c);
    for (int k = 1; k < 3; k++) {
      if (!((mask >> k) & 1)) continue;
      for (int64_t i = 0; i < N; i++) {
        double s = 0;
        for (int64_t r = 0; r < c.M; r++) {
          double g = pg[r * N + i];
          if (k == 1) {
            double mean = hpu_load_f64(hpu_nn_elem(st, r), st->dtype);
            double rstd = hpu_load_f64(hpu_nn_elem(st, c.M + r), st->dtype);
            g *= (px[r * N + i] - mean) * rstd;
          }
          s += g;
        }
        hpu_store_f64(hpu_nn_elem(&node->outputs[k], i), node->outputs[k].dtype, s);
      }
    }
    free(c.w); free(c.wd);
    return;
  }
  c.rows_per_block = 64;
  c.nblocks = (c.M + c.rows_per_block - 1) / c.rows_per_block;
  c.parts = malloc((size_t)(c.nblocks ? c.nblocks : 1) * 2 * (size_t)N * sizeof(float));
  if (!c.parts) abort();
  if (c.nblocks) hpu_parallel_for(c.nblocks, 1, lnb_blocks, &c);
  for (int k = 1; k < 3; k++) {
    if (!((mask >> k) & 1)) continue;
    const hpu_tensor_t *o = &node->outputs[k];
    for (int64_t i = 0; i < N; i++) {
      double s = 0;
      for (int64_t b = 0; b < c.nblocks; b++) s += c.parts[(b * 2 + (k - 1)) * N + i];
      hpu_store_f64(hpu_nn_elem(o, i), o->dtype, s);
    }
  }
  free(c.parts);
  free(c.w); free(c.wd);
}

/* nll_loss ------------------------------------------------------------------------------ */

hpu_status_t hpu_nn_nll_loss(const hpu_node_t *node) {
  const hpu_tensor_t *x = &node->inputs[0], *t = &node->inputs[1];
  const hpu_tensor_t *w = node->params.nn.i[2] ? &node->inputs[2] : NULL;
  int64_t red = node->params.nn.i[0], ignore = node->params.nn.i[1];
  int64_t N = x->sizes[0], C = x->sizes[1];
  const hpu_tensor_t *out = &node->outputs[0], *tw = &node->outputs[1];
  double sum = 0, wsum = 0;
  for (int64_t i = 0; i < N; i++) {
    int64_t c = hpu_load_i64(hpu_nn_elem(t, i), t->dtype);
    double l = 0, wt = 0;
    if (c != ignore) {
      if (c < 0 || c >= C)
        return hpu_error(HPU_ERROR_OUT_OF_RANGE, "Target %lld is out of bounds.", (long long)c);
      wt = w ? hpu_load_f64(hpu_nn_elem(w, c), w->dtype) : 1.0;
      l = -wt * hpu_load_f64(hpu_nn_elem(x, i * C + c), x->dtype);
    }
    if (red == 0) hpu_store_f64(hpu_nn_elem(out, i), out->dtype, l);
    sum += l;
    wsum += wt;
  }
  if (red != 0) hpu_store_f64(hpu_tensor_data(out), out->dtype, red == 1 ? sum / wsum : sum);
  hpu_store_f64(hpu_tensor_data(tw), tw->dtype, red == 0 ? 0.0 : wsum);
  return HPU_SUCCESS;
}

hpu_status_t hpu_nn_nll_loss_backward(const hpu_node_t *node) {
  const hpu_tensor_t *g = &node->inputs[0], *t = &node->inputs[1], *tw = &node->inputs[2];
  const hpu_tensor_t *w = node->params.nn.i[2] ? &node->inputs[3] : NULL;
  const hpu_tensor_t *gi = &node->outputs[0];
  int64_t red = node->params.nn.i[0], ignore = node->params.nn.i[1];
  int64_t N = gi->sizes[0], C = gi->sizes[1];
  if (hpu_tensor_is_contiguous(gi)) /* all-zero bits are 0 in every float dtype */
    memset(hpu_tensor_data(gi), 0, (size_t)(N * C) * hpu_dtype_size(gi->dtype));
  else
    for (int64_t i = 0; i < N * C; i++) hpu_store_f64(hpu_nn_elem(gi, i), gi->dtype, 0.0);
  double total = hpu_load_f64(hpu_tensor_data(tw), tw->dtype);
  double g0 = red != 0 ? hpu_load_f64(hpu_tensor_data(g), g->dtype) : 0;
  for (int64_t i = 0; i < N; i++) {
    int64_t c = hpu_load_i64(hpu_nn_elem(t, i), t->dtype);
    if (c == ignore) continue;
    if (c < 0 || c >= C)
      return hpu_error(HPU_ERROR_OUT_OF_RANGE, "Target %lld is out of bounds.", (long long)c);
    double wt = w ? hpu_load_f64(hpu_nn_elem(w, c), w->dtype) : 1.0;
    double gv = red == 0 ? hpu_load_f64(hpu_nn_elem(g, i), g->dtype) : red == 1 ? g0 / total : g0;
    hpu_store_f64(hpu_nn_elem(gi, i * C + c), gi->dtype, -wt * gv);
  }
  return HPU_SUCCESS;
}
