/* Philox4x32-10 and the RNG kernels (UNIFORM, NORMAL, BERNOULLI, RANDOM).
 * The stream layout is specified in hpu/rng.h: element i of the output
 * (row-major) consumes words i*w .. i*w+w-1 of the (seed, offset) stream, so
 * results do not depend on how the work is split over threads. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "hpu/rng.h"
#include "kernels/cvt.h"
#include "kernels/isa.h"
#include "kernels/iter.h"
#include "kernels/kernels.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static inline void philox_block(uint32_t k0, uint32_t k1, uint64_t counter, uint32_t out[4]) {
  uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += PHILOX_W0;
    k1 += PHILOX_W1;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/* nb consecutive blocks from `counter` into out[4 nb]. */
static void philox_many_scalar(uint32_t k0, uint32_t k1, uint64_t counter, int64_t nb, uint32_t *out) {
  for (int64_t b = 0; b < nb; b++) philox_block(k0, k1, counter + (uint64_t)b, out + 4 * b);
}

#if HPU_HAVE_ISA_CLONES
/* The same rounds on 16 counters at once (dropout masks spent ~7% of a BERT
 * training step in the scalar block function): VPMULLD gives the low words
 * of the 16 products, two VPMULUDQ the high words of the even and odd
 * lanes. */
static HPU_ATTR_avx512 inline __m512i mulhi_epu32(__m512i a, __m512i m) {
  __m512i even = _mm512_srli_epi64(_mm512_mul_epu32(a, m), 32);
  __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  return _mm512_mask_blend_epi32(0xAAAA, even, odd);
}

static HPU_ATTR_avx512 void philox_many_avx512(uint32_t k0, uint32_t k1, uint64_t counter, int64_t nb,
                                                uint32_t *out) {
  const __m512i m0 = _mm512_set1_epi32((int)PHILOX_M0), m1 = _mm512_set1_epi32((int)PHILOX_M1);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int64_t b0 = 0;
  for (; b0 + 16 <= nb; b0 += 16) {
    uint64_t base = counter + (uint64_t)b0;
    /* counters base .. base + 15: the low word, and the high word plus a
     * carry where the low word wrapped */
    __m512i blo = _mm512_set1_epi32((int)(uint32_t)base), bhi = _mm512_set1_epi32((int)(uint32_t)(base >> 32));
    __m512i c0 = _mm512_add_epi32(blo, lane);
    __mmask16 carry = _mm512_cmplt_epu32_mask(c0, blo);
    __m512i c1 = _mm512_mask_add_epi32(bhi, carry, bhi, _mm512_set1_epi32(1));
    __m512i c2 = _mm512_setzero_si512(), c3 = _mm512_setzero_si512();
    uint32_t a = k0, b = k1;
    for (int r = 0; r < 10; r++) {
      __m512i h0 = mulhi_epu32(c0, m0), l0 = _mm512_mullo_epi32(c0, m0);
      __m512i h1 = mulhi_epu32(c2, m1), l1 = _mm512_mullo_epi32(c2, m1);
      c0 = _mm512_xor_si512(_mm512_xor_si512(h1, c1), _mm512_set1_epi32((int)a));
      c1 = l1;
      c2 = _mm512_xor_si512(_mm512_xor_si512(h0, c3), _mm512_set1_epi32((int)b));
      c3 = l0;
      a += PHILOX_W0;
      b += PHILOX_W1;
    }
    /* 16 lanes x 4 words -> 16 blocks of 4 consecutive words: u[q] holds,
     * in 128-bit lane L, block 4L + q */
    __m512i t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
    __m512i t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
    uint32_t u[4][16];
    _mm512_storeu_si512(u[0], _mm512_unpacklo_epi64(t0, t2));
    _mm512_storeu_si512(u[1], _mm512_unpackhi_epi64(t0, t2));
    _mm512_storeu_si512(u[2], _mm512_unpacklo_epi64(t1, t3));
    _mm512_storeu_si512(u[3], _mm512_unpackhi_epi64(t1, t3));
    for (int L = 0; L < 4; L++)
      for (int q = 0; q < 4; q++) memcpy(out + 4 * (b0 + 4 * L + q), &u[q][4 * L], 16);
  }
  philox_many_scalar(k0, k1, counter + (uint64_t)b0, nb - b0, out + 4 * b0);
}

/* The same on 8 counters with AVX2 (no unsigned compare: the carry into the
 * high word is a signed compare of sign-flipped words). */
static HPU_ATTR_avx2 inline __m256i mulhi_epu32_avx2(__m256i a, __m256i m) {
  __m256i even = _mm256_srli_epi64(_mm256_mul_epu32(a, m), 32);
  __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  return _mm256_blend_epi32(even, odd, 0xAA);
}

static HPU_ATTR_avx2 void philox_many_avx2(uint32_t k0, uint32_t k1, uint64_t counter, int64_t nb,
                                            uint32_t *out) {
  const __m256i m0 = _mm256_set1_epi32((int)PHILOX_M0), m1 = _mm256_set1_epi32((int)PHILOX_M1);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i sign = _mm256_set1_epi32(INT32_MIN);
  int64_t b0 = 0;
  for (; b0 + 8 <= nb; b0 += 8) {
    uint64_t base = counter + (uint64_t)b0;
    __m256i blo = _mm256_set1_epi32((int)(uint32_t)base), bhi = _mm256_set1_epi32((int)(uint32_t)(base >> 32));
    __m256i c0 = _mm256_add_epi32(blo, lane);
    /* all ones where c0 < blo unsigned (the low word wrapped) */
    __m256i wrapped = _mm256_cmpgt_epi32(_mm256_xor_si256(blo, sign), _mm256_xor_si256(c0, sign));
    __m256i c1 = _mm256_sub_epi32(bhi, wrapped);
    __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
    uint32_t a = k0, b = k1;
    for (int r = 0; r < 10; r++) {
      __m256i h0 = mulhi_epu32_avx2(c0, m0), l0 = _mm256_mullo_epi32(c0, m0);
      __m256i h1 = mulhi_epu32_avx2(c2, m1), l1 = _mm256_mullo_epi32(c2, m1);
      c0 = _mm256_xor_si256(_mm256_xor_si256(h1, c1), _mm256_set1_epi32((int)a));
      c1 = l1;
      c2 = _mm256_xor_si256(_mm256_xor_si256(h0, c3), _mm256_set1_epi32((int)b));
      c3 = l0;
      a += PHILOX_W0;
      b += PHILOX_W1;
    }
    /* u[q] holds, in 128-bit lane L, block 4L + q (as in the AVX-512 form) */
    __m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpackhi_epi32(c0, c1);
    __m256i t2 = _mm256_unpacklo_epi32(c2, c3), t3 = _mm256_unpackhi_epi32(c2, c3);
    uint32_t u[4][8];
    _mm256_storeu_si256((__m256i *)u[0], _mm256_unpacklo_epi64(t0, t2));
    _mm256_storeu_si256((__m256i *)u[1], _mm256_unpackhi_epi64(t0, t2));
    _mm256_storeu_si256((__m256i *)u[2], _mm256_unpacklo_epi64(t1, t3));
    _mm256_storeu_si256((__m256i *)u[3], _mm256_unpackhi_epi64(t1, t3));
    for (int L = 0; L < 2; L++)
      for (int q = 0; q < 4; q++) memcpy(out + 4 * (b0 + 4 * L + q), &u[q][4 * L], 16);
  }
  philox_many_scalar(k0, k1, counter + (uint64_t)b0, nb - b0, out + 4 * b0);
}
#endif

typedef void (*philox_many_fn)(uint32_t, uint32_t, uint64_t, int64_t, uint32_t *);

static philox_many_fn pick_philox_many(void) {
#if HPU_HAVE_ISA_CLONES
  if (hpu_kernels_isa() == HPU_ISA_AVX512) return philox_many_avx512;
  if (hpu_kernels_isa() == HPU_ISA_AVX2) return philox_many_avx2;
#endif
  return philox_many_scalar;
}

void hpu_philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]) {
  philox_block((uint32_t)seed, (uint32_t)(seed >> 32), counter, out);
}

int hpu_rng_words_per_element(hpu_op_t op, hpu_dtype_t dtype) {
  switch (op) {
    case HPU_OP_RNG_UNIFORM: return dtype == HPU_FLOAT64 ? 2 : 1;
    case HPU_OP_RNG_NORMAL: return dtype == HPU_FLOAT64 ? 4 : 2;
    case HPU_OP_RNG_BERNOULLI: return 1;
    case HPU_OP_RNG_RANDOM: return 2;
    default: return 0;
  }
}

typedef struct {
  hpu_op_t op;
  hpu_dtype_t dt, pdt;
  int w;
  uint32_t k0, k1;
  uint64_t offset;
  double a, b;
  float af, bf;
  int has_p;
  int64_t bern_t;  /* BERNOULLI with one p into float32: ceil(p 2^24), else -1 */
  uint64_t range; /* RANDOM */
  int64_t from;   /* RANDOM */
} rng_ctx_t;

#define BATCH 256 /* elements per block of generated words */

static inline float u24(uint32_t w) { return (float)(w >> 8) * 0x1p-24f; }
static inline double u53(uint32_t lo, uint32_t hi) {
  return (double)((((uint64_t)hi << 32) | lo) >> 11) * 0x1p-53;
}

static void rng_loop(void *vctx, char **data, const int64_t *st, int64_t n, int64_t index) {
  const rng_ctx_t *c = vctx;
  uint32_t words[BATCH * 4 + 8];
  const int w = c->w;
  philox_many_fn many = pick_philox_many();
  const float twopi = 6.283185307179586f;
  for (int64_t done = 0; done < n; done += BATCH) {
    int64_t cnt = n - done < BATCH ? n - done : BATCH;
    /* Words [first, first + cnt*w) of the stream, block-aligned start. */
    uint64_t first = (uint64_t)(index + done) * (uint64_t)w;
    uint64_t blk0 = first / 4, blk1 = (first + (uint64_t)cnt * (uint64_t)w + 3) / 4;
    many(c->k0, c->k1, c->offset + blk0, (int64_t)(blk1 - blk0), words);
    const uint32_t *wp = words + (first - blk0 * 4);
    if (c->bern_t >= 0 && st[0] == 4) {
      /* dropout's mask: u < p on the 24-bit grid is (word >> 8) < ceil(p 2^24) */
      float *o = (float *)(data[0] + done * 4);
      const uint32_t t = (uint32_t)c->bern_t;
      for (int64_t i = 0; i < cnt; i++) o[i] = (wp[i] >> 8) < t ? 1.0f : 0.0f;
      continue;
    }
    for (int64_t i = 0; i < cnt; i++, wp += w) {
      char *o = data[0] + (done + i) * st[0];
      switch (c->op) {
        case HPU_OP_RNG_UNIFORM:
          if (c->dt == HPU_FLOAT64) {
            double v = u53(wp[0], wp[1]) * (c->b - c->a) + c->a;
            if (v >= c->b && c->b > c->a) v = c->a;
            *(double *)o = v;
          } else {
            float v = hpu_round_to(u24(wp[0]) * (c->bf - c->af) + c->af, c->dt);
            if (v >= c->bf && c->bf > c->af) v = c->af; /* rounding reached `to` */
            hpu_store_f32(o, c->dt, v);
          }
          break;
        case HPU_OP_RNG_NORMAL:
          if (c->dt == HPU_FLOAT64) {
            double u1 = u53(wp[0], wp[1]), u2 = u53(wp[2], wp[3]);
            double z = sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
            *(double *)o = c->a + c->b * z;
          } else {
            float u1 = u24(wp[0]), u2 = u24(wp[1]);
            float z = sqrtf(-2.0f * logf(1.0f - u1)) * cosf(twopi * u2);
            hpu_store_f32(o, c->dt, c->af + c->bf * z);
          }
          break;
        case HPU_OP_RNG_BERNOULLI: {
          double p = c->has_p ? hpu_load_f64(data[1] + (done + i) * st[1], c->pdt) : c->a;
          hpu_store_i64(o, c->dt, (double)u24(wp[0]) < p);
          break;
        }
        default: { /* RANDOM */
          uint64_t x = ((uint64_t)wp[1] << 32) | wp[0];
          uint64_t r = c->range ? x % c->range : x;
          hpu_store_i64(o, c->dt, (int64_t)((uint64_t)c->from + r));
          break;
        }
      }
    }
  }
}

void hpu_kernel_rng(const hpu_node_t *node) {
  const hpu_tensor_t *out = &node->outputs[0];
  rng_ctx_t c = {0};
  c.op = node->op;
  c.dt = out->dtype;
  c.w = hpu_rng_words_per_element(node->op, out->dtype);
  c.k0 = (uint32_t)node->params.rng.seed;
  c.k1 = (uint32_t)(node->params.rng.seed >> 32);
  c.offset = node->params.rng.offset;
  c.a = node->params.rng.a;
  c.b = node->params.rng.b;
  c.af = (float)c.a;
  c.bf = (float)c.b;
  if (node->op == HPU_OP_RNG_RANDOM) {
    /* b - a <= 2^64 (validated); 2^64 itself wraps to 0 = "no modulo". */
    double span = c.b - c.a;
    c.range = span >= 18446744073709551616.0 ? 0 : (uint64_t)span;
    c.from = hpu_f2i(c.a);
  }
  c.bern_t = -1;
  if (node->op == HPU_OP_RNG_BERNOULLI && node->num_inputs == 0 && c.dt == HPU_FLOAT32 && c.a >= 0 && c.a <= 1)
    c.bern_t = (int64_t)ceil(c.a * 16777216.0);
  const hpu_tensor_t *ins[1] = {NULL};
  if (node->op == HPU_OP_RNG_BERNOULLI && node->num_inputs == 1) {
    c.has_p = 1;
    c.pdt = node->inputs[0].dtype;
    ins[0] = &node->inputs[0];
  }
  hpu_iter_t it;
  hpu_iter_build(&it, out, ins, 1, HPU_ITER_KEEP_ORDER);
  hpu_iter_for_each(&it, rng_loop, &c, 4096);
}
