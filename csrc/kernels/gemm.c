/* GEMM microkernels: packing + register-blocked AVX-512 kernels, picked at
 * run time (the build stays generic x86-64; see isa.h).
 *
 * Layout (both kernels): the output is cut into MR x NR tiles (12 x 32).
 *  - BF16DOT: A packed per MR-row panel as [kp][MR] uint32 pairs
 *    (a[i][2p] | a[i][2p+1] << 16), B per NR-column panel as [kp][NR] pairs
 *    (b[2p][j] | b[2p+1][j] << 16), kp = ceil(k / 2), odd k padded with 0.
 *    One vdpbf16ps multiplies a broadcast A pair by 16 B pairs and adds both
 *    products into fp32 lanes.
 *  - F32FMA: the same with one float per (p, i) / (p, j), kp = k; packing
 *    widens bf16/fp16, so this is also the bf16 path on CPUs without
 *    AVX512_BF16 and the fp16 path.
 * The kernel runs the whole k with 24 zmm accumulators, stores the tile to
 * an fp32 scratch tile, and the epilogue writes alpha * tile + beta * C,
 * rounded once to the output dtype (fp32 accumulation, as PyTorch's CPU).
 *
 * Blocking: B is packed once per call for a chunk of NC columns (shared by the
 * threads, packed in parallel), A per MC-row block by the thread that uses it
 * (MC so that the block stays in L2). Work items are (MC block, column part)
 * pairs spread over hpu_parallel_for. No K blocking: the accumulators stay in
 * registers over all of k; the B panel (k x 32) streams from L1/L2, which
 * keeps up with the FMA rate for the k this library sees (checked to 8192).
 *
 * Dispatch (hpu_gemm_choose), from measurements on a 2-core AVX-512 EPYC
 * (Zen 4) with OpenBLAS 0.3.21 pinned to OPENBLAS_CORETYPE=Haswell:
 *  - bfloat16: BF16DOT when the CPU has AVX512_BF16, else F32FMA (AVX-512),
 *    else matmul.c's convert + sgemm path;
 *  - float16: F32FMA on AVX-512 (no full-size conversion copies);
 *  - float32: ours except tiny and matrix-vector shapes (f32_rule below). */
#include "kernels/gemm.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "hpu/device.h"
#include "hpu/parallel.h"
#include "kernels/cvt.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"

#define MR 12
#define NR 32

static _Atomic int forced = HPU_GEMM_AUTO;

int hpu_gemm_force(int kernel) { return atomic_exchange(&forced, kernel); }

#if HPU_HAVE_ISA_CLONES

#define ATTR_BF16                                                                               \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c,"         \
                        "prefer-vector-width=512")))
#define ATTR_512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,prefer-vector-width=512")))

static int cpu_bf16(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return 0;
  return (a >> 5) & 1; /* CPUID.(7,1):EAX.AVX512_BF16 */
}

int hpu_gemm_have_bf16dot(void) {
  static int have = -1;
  if (have < 0) have = cpu_bf16();
  return have && hpu_kernels_isa() >= HPU_ISA_AVX512;
}

/* float32 rule, measured (GFLOP/s, 2 threads, OpenBLAS Haswell vs ours).
 * Quiet machine, square: 256: 185 vs 180-220, 512: 230 vs 210-370,
 * 1024: 241 vs 362, 2048: 235 vs 392. Loaded by other jobs: square 64: 112 vs 134, 128: 101 vs 194, 256: 55 vs 111, 512: 63 vs 112,
 * 1024: 61 vs 110, 2048: 36 vs 109; 4096x4096 @ 4096x64: 48 vs 69;
 * 64x64 @ 64x4096: 108 vs 178. OpenBLAS wins only on tiny problems
 * (16^3: 38 vs 28; 4x2048 @ 2048x4: 17.6 vs 4.3, our 12-row tile is mostly
 * padding) and ties on matrix-vector shapes (m or n < 8: ~8 vs ~8, memory
 * bound). So: ours unless min(m, n) < 8 or m*n*k < 32^3 -- and always ours
 * when an operand has no unit stride (BLAS would need a gathered copy). */
static int f32_rule(const hpu_gemm_t *g) {
  int strided = (g->acs != 1 && g->ars != 1 && g->m > 1 && g->k > 1) ||
                (g->bcs != 1 && g->brs != 1 && g->k > 1 && g->n > 1) ||
                (g->ccs != 1 && g->n > 1);
  if (strided) return HPU_GEMM_F32FMA;
  if (g->m < 8 || g->n < 8 || (double)g->m * (double)g->n * (double)g->k < 32768.0) return HPU_GEMM_NONE;
  return HPU_GEMM_F32FMA;
}

int hpu_gemm_choose(const hpu_gemm_t *g) {
  if (g->m <= 0 || g->n <= 0 || g->k <= 0) return HPU_GEMM_NONE;
  if (hpu_kernels_isa() < HPU_ISA_AVX512) return HPU_GEMM_NONE;
  int f = atomic_load(&forced);
  if (f == HPU_GEMM_BF16DOT && (g->dt != HPU_BFLOAT16 || !hpu_gemm_have_bf16dot())) f = HPU_GEMM_F32FMA;
  if (f != HPU_GEMM_AUTO) return f;
  switch (g->dt) {
    case HPU_BFLOAT16: return hpu_gemm_have_bf16dot() ? HPU_GEMM_BF16DOT : HPU_GEMM_F32FMA;
    case HPU_FLOAT16: return HPU_GEMM_F32FMA;
    case HPU_FLOAT32: return f32_rule(g);
    default: return HPU_GEMM_NONE;
  }
}

/* Microkernels -------------------------------------------------------------- */

ATTR_BF16 static void ukr_bf16(int64_t kp, const uint32_t *A, const uint32_t *B, float *tile) {
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++) c0[i] = c1[i] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kp; p++) {
    __m512bh b0 = (__m512bh)_mm512_loadu_si512(B);
    __m512bh b1 = (__m512bh)_mm512_loadu_si512(B + 16);
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
      __m512bh a = (__m512bh)_mm512_set1_epi32((int)A[i]);
      c0[i] = _mm512_dpbf16_ps(c0[i], a, b0);
      c1[i] = _mm512_dpbf16_ps(c1[i], a, b1);
    }
    A += MR;
    B += NR;
  }
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++) {
    _mm512_storeu_ps(tile + i * NR, c0[i]);
    _mm512_storeu_ps(tile + i * NR + 16, c1[i]);
  }
}

ATTR_512 static void ukr_f32(int64_t k, const float *A, const float *B, float *tile) {
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++) c0[i] = c1[i] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; p++) {
    __m512 b0 = _mm512_loadu_ps(B), b1 = _mm512_loadu_ps(B + 16);
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
      __m512 a = _mm512_set1_ps(A[i]);
      c0[i] = _mm512_fmadd_ps(a, b0, c0[i]);
      c1[i] = _mm512_fmadd_ps(a, b1, c1[i]);
    }
    A += MR;
    B += NR;
  }
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++) {
    _mm512_storeu_ps(tile + i * NR, c0[i]);
    _mm512_storeu_ps(tile + i * NR + 16, c1[i]);
  }
}

/* Epilogue: C[0..mr, 0..nr) = alpha * tile + beta * C, rounded once. */
ATTR_512 static __m512 load16(const char *p, hpu_dtype_t dt, __mmask16 mk) {
  if (dt == HPU_FLOAT32) return _mm512_maskz_loadu_ps(mk, p);
  __m256i h = _mm256_maskz_loadu_epi16(mk, p);
  if (dt == HPU_FLOAT16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

ATTR_512 static void store16(char *p, hpu_dtype_t dt, __mmask16 mk, __m512 v) {
  if (dt == HPU_FLOAT32) {
    _mm512_mask_storeu_ps(p, mk, v);
    return;
  }
  __m256i h;
  if (dt == HPU_FLOAT16) {
    h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  } else { /* round to nearest even, NaN -> 0x7fc0: exactly hpu_cvt_f32_bf16 */
    __m512i u = _mm512_castps_si512(v);
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    u = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
    u = _mm512_srli_epi32(u, 16);
    u = _mm512_mask_mov_epi32(u, nan, _mm512_set1_epi32(0x7fc0));
    h = _mm512_cvtepi32_epi16(u);
  }
  _mm256_mask_storeu_epi16(p, mk, h);
}

ATTR_512 static void epilogue(const hpu_gemm_t *g, const float *tile, int64_t i0, int64_t j0, int mr,
                              int nr) {
  hpu_dtype_t dt = g->dt;
  int64_t es = (int64_t)hpu_dtype_size(dt);
  char *cb = (char *)g->c + (i0 * g->crs + j0 * g->ccs) * es;
  if (g->ccs == 1 || nr == 1) {
    __m512 va = _mm512_set1_ps(g->alpha), vb = _mm512_set1_ps(g->beta);
    __mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
    __mmask16 m1 = nr >= 32 ? 0xffff : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
    for (int i = 0; i < mr; i++) {
      char *row = cb + i * g->crs * es;
      __m512 v0 = _mm512_mul_ps(va, _mm512_loadu_ps(tile + i * NR));
      __m512 v1 = _mm512_mul_ps(va, _mm512_loadu_ps(tile + i * NR + 16));
      if (g->beta != 0) {
        v0 = _mm512_fmadd_ps(vb, load16(row, dt, m0), v0);
        if (m1) v1 = _mm512_fmadd_ps(vb, load16(row + 16 * es, dt, m1), v1);
      }
      store16(row, dt, m0, v0);
      if (m1) store16(row + 16 * es, dt, m1, v1);
    }
    return;
  }
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nr; j++) {
      char *p = cb + (i * g->crs + j * g->ccs) * es;
      float v = g->alpha * tile[i * NR + j];
      if (g->beta != 0) v = fmaf(g->beta, hpu_load_f32(p, dt), v);
      hpu_store_f32(p, dt, v);
    }
}

/* Packing ------------------------------------------------------------------- */

/* Element x[r * rs + c * cs] as bf16 bits (bf16 sources only). */
static inline uint32_t pair16(const uint16_t *x, int64_t lo, int64_t hi, int has_hi) {
  return (uint32_t)x[lo] | (has_hi ? (uint32_t)x[hi] << 16 : 0u);
}

/* A rows [i0, i0 + mc) into MR-row panels of [kp][MR] pairs. */
static void pack_a_bf16(const hpu_gemm_t *g, int64_t i0, int64_t mc, uint32_t *dst) {
  const uint16_t *a = g->a;
  int64_t k = g->k, kp = (k + 1) / 2, rs = g->ars, cs = g->acs;
  for (int64_t ip = 0; ip < mc; ip += MR, dst += kp * MR) {
    int64_t rows = mc - ip < MR ? mc - ip : MR;
    if (cs == 1 || rs != 1) { /* along k is the cheap direction */
      for (int64_t i = 0; i < rows; i++) {
        const uint16_t *r = a + (i0 + ip + i) * rs;
        if (cs == 1) {
          for (int64_t p = 0; p < k / 2; p++) {
            uint32_t v;
            memcpy(&v, r + 2 * p, 4);
            dst[p * MR + i] = v;
          }
          if (k & 1) dst[(kp - 1) * MR + i] = r[k - 1];
        } else {
          for (int64_t p = 0; p < kp; p++)
            dst[p * MR + i] = pair16(r, 2 * p * cs, (2 * p + 1) * cs, 2 * p + 1 < k);
        }
      }
    } else { /* rs == 1: rows contiguous at fixed k */
      for (int64_t p = 0; p < kp; p++) {
        const uint16_t *r0 = a + 2 * p * cs + i0 + ip, *r1 = r0 + cs;
        int hh = 2 * p + 1 < k;
        for (int64_t i = 0; i < rows; i++) dst[p * MR + i] = (uint32_t)r0[i] | (hh ? (uint32_t)r1[i] << 16 : 0u);
      }
    }
    for (int64_t i = rows; i < MR; i++)
      for (int64_t p = 0; p < kp; p++) dst[p * MR + i] = 0;
  }
}

/* B columns [j0, j0 + nc) into NR-column panels of [kp][NR] pairs. */
static void pack_b_bf16(const hpu_gemm_t *g, int64_t j0, int64_t nc, uint32_t *dst) {
  const uint16_t *b = g->b;
  int64_t k = g->k, kp = (k + 1) / 2, rs = g->brs, cs = g->bcs;
  int64_t cols = nc < NR ? nc : NR;
  if (cs == 1 || rs != 1) {
    for (int64_t p = 0; p < kp; p++) {
      const uint16_t *r0 = b + 2 * p * rs + j0 * cs, *r1 = r0 + rs;
      uint32_t *d = dst + p * NR;
      if (2 * p + 1 < k) {
        if (cs == 1)
          for (int64_t j = 0; j < cols; j++) d[j] = (uint32_t)r0[j] | (uint32_t)r1[j] << 16;
        else
          for (int64_t j = 0; j < cols; j++) d[j] = (uint32_t)r0[j * cs] | (uint32_t)r1[j * cs] << 16;
      } else {
        for (int64_t j = 0; j < cols; j++) d[j] = r0[j * cs];
      }
      for (int64_t j = cols; j < NR; j++) d[j] = 0;
    }
  } else { /* rs == 1: each column contiguous along k */
    for (int64_t j = 0; j < cols; j++) {
      const uint16_t *col = b + (j0 + j) * cs;
      for (int64_t p = 0; p < k / 2; p++) {
        uint32_t v;
        memcpy(&v, col + 2 * p, 4);
        dst[p * NR + j] = v;
      }
      if (k & 1) dst[(kp - 1) * NR + j] = col[k - 1];
    }
    for (int64_t p = 0; p < kp; p++)
      for (int64_t j = cols; j < NR; j++) dst[p * NR + j] = 0;
  }
}

static inline float ldf(const char *base, int64_t idx, hpu_dtype_t dt) {
  if (dt == HPU_FLOAT32) return ((const float *)base)[idx];
  uint16_t h = ((const uint16_t *)base)[idx];
  return dt == HPU_BFLOAT16 ? hpu_cvt_bf16_f32(h) : hpu_cvt_half_f32(h);
}

static void pack_a_f32(const hpu_gemm_t *g, int64_t i0, int64_t mc, float *dst) {
  const char *a = g->a;
  hpu_dtype_t dt = g->dt;
  int64_t k = g->k, rs = g->ars, cs = g->acs;
  for (int64_t ip = 0; ip < mc; ip += MR, dst += k * MR) {
    int64_t rows = mc - ip < MR ? mc - ip : MR;
    if (rs == 1 && cs != 1) {
      for (int64_t p = 0; p < k; p++)
        for (int64_t i = 0; i < rows; i++) dst[p * MR + i] = ldf(a, p * cs + i0 + ip + i, dt);
    } else {
      for (int64_t i = 0; i < rows; i++) {
        int64_t r = (i0 + ip + i) * rs;
        for (int64_t p = 0; p < k; p++) dst[p * MR + i] = ldf(a, r + p * cs, dt);
      }
    }
    for (int64_t i = rows; i < MR; i++)
      for (int64_t p = 0; p < k; p++) dst[p * MR + i] = 0;
  }
}

static void pack_b_f32(const hpu_gemm_t *g, int64_t j0, int64_t nc, float *dst) {
  const char *b = g->b;
  hpu_dtype_t dt = g->dt;
  int64_t k = g->k, rs = g->brs, cs = g->bcs;
  int64_t cols = nc < NR ? nc : NR;
  if (rs == 1 && cs != 1) {
    for (int64_t j = 0; j < cols; j++)
      for (int64_t p = 0; p < k; p++) dst[p * NR + j] = ldf(b, (j0 + j) * cs + p, dt);
    for (int64_t p = 0; p < k; p++)
      for (int64_t j = cols; j < NR; j++) dst[p * NR + j] = 0;
  } else {
    for (int64_t p = 0; p < k; p++) {
      float *d = dst + p * NR;
      int64_t r = p * rs + j0 * cs;
      if (cs == 1 && dt == HPU_FLOAT32)
        memcpy(d, (const float *)b + r, (size_t)cols * 4);
      else
        for (int64_t j = 0; j < cols; j++) d[j] = ldf(b, r + j * cs, dt);
      for (int64_t j = cols; j < NR; j++) d[j] = 0;
    }
  }
}

/* Driver -------------------------------------------------------------------- */

typedef struct {
  const hpu_gemm_t *g;
  int kernel;
  int64_t kp;         /* packed k: pairs (BF16DOT) or k (F32FMA); 4 bytes each */
  int64_t j0, nc;     /* current column chunk */
  int64_t nbp;        /* NR panels in the chunk */
  void *bpack;        /* nbp panels of kp * NR */
  char *apacks;       /* one A block per range call (at most nt a loop) */
  size_t abytes;
  _Atomic int slot;
  int nslots;
  int64_t mc, nmb;    /* row block size and count */
  int64_t nparts, ppp;/* column parts per row block, panels per part */
} drv_t;

static void pack_b_range(void *ctx, int64_t begin, int64_t end) {
  drv_t *d = ctx;
  for (int64_t jp = begin; jp < end; jp++) {
    int64_t j = d->j0 + jp * NR, cols = d->j0 + d->nc - j;
    uint32_t *dst = (uint32_t *)d->bpack + jp * d->kp * NR;
    if (d->kernel == HPU_GEMM_BF16DOT) pack_b_bf16(d->g, j, cols, dst);
    else pack_b_f32(d->g, j, cols, (float *)dst);
  }
}

static void compute_range(void *ctx, int64_t begin, int64_t end) {
  drv_t *d = ctx;
  const hpu_gemm_t *g = d->g;
  float tile[MR * NR] __attribute__((aligned(64)));
  int slot = atomic_fetch_add(&d->slot, 1);
  void *own = NULL, *apack = d->apacks + (size_t)slot * d->abytes;
  if (slot >= d->nslots) { /* the pool grew since hpu_gemm_run looked */
    apack = own = malloc(d->abytes);
    if (!apack) abort();
  }
  int64_t cur_ib = -1;
  for (int64_t it = begin; it < end; it++) {
    int64_t ib = it / d->nparts, part = it % d->nparts;
    int64_t i0 = ib * d->mc, mc = g->m - i0 < d->mc ? g->m - i0 : d->mc;
    if (ib != cur_ib) {
      if (d->kernel == HPU_GEMM_BF16DOT) pack_a_bf16(g, i0, mc, apack);
      else pack_a_f32(g, i0, mc, apack);
      cur_ib = ib;
    }
    int64_t jp0 = part * d->ppp, jp1 = jp0 + d->ppp < d->nbp ? jp0 + d->ppp : d->nbp;
    for (int64_t jp = jp0; jp < jp1; jp++) {
      const uint32_t *bp = (const uint32_t *)d->bpack + jp * d->kp * NR;
      int64_t j = d->j0 + jp * NR, nr = d->j0 + d->nc - j;
      if (nr > NR) nr = NR;
      for (int64_t ip = 0; ip < mc; ip += MR) {
        const uint32_t *ap = (const uint32_t *)apack + ip * d->kp;
        int64_t mr = mc - ip < MR ? mc - ip : MR;
        if (d->kernel == HPU_GEMM_BF16DOT) ukr_bf16(d->kp, ap, bp, tile);
        else ukr_f32(d->kp, (const float *)ap, (const float *)bp, tile);
        epilogue(g, tile, i0 + ip, j, (int)mr, (int)nr);
      }
    }
  }
  free(own);
}

int hpu_gemm_run(const hpu_gemm_t *g, int kernel) {
  drv_t d;
  memset(&d, 0, sizeof d);
  d.g = g;
  d.kernel = kernel;
  d.kp = kernel == HPU_GEMM_BF16DOT ? (g->k + 1) / 2 : g->k;
  int nt = hpu_get_num_threads();
  if (nt < 1) nt = 1;
  double flops = 2.0 * (double)g->m * (double)g->n * (double)g->k;
  int serial = flops < 2e6 || nt == 1;
  /* A block in about half of L2, a multiple of MR. */
  int64_t mc = (512 * 1024) / (d.kp * 4) / MR * MR;
  if (mc > 192) mc = 192;
  if (mc < MR) mc = MR;
  if (mc > g->m) mc = g->m;
  d.mc = mc;
  d.nmb = (g->m + mc - 1) / mc;
  /* B chunk up to 8 MB packed (of 32 MB L3). */
  int64_t nc = (8 << 20) / (d.kp * 4 * NR) * NR;
  if (nc < NR) nc = NR;
  if (nc > g->n) nc = g->n;
  size_t bbytes = (size_t)((nc + NR - 1) / NR) * (size_t)d.kp * NR * 4;
  d.abytes = ((size_t)((mc + MR - 1) / MR * MR) * (size_t)d.kp * 4 + 63) / 64 * 64;
  /* All scratch up front, so running out of memory writes nothing. */
  char *buf = malloc(bbytes + (size_t)nt * d.abytes + 64);
  if (!buf) return -1;
  d.apacks = buf;
  d.nslots = nt;
  d.bpack = buf + (size_t)nt * d.abytes;
  for (int64_t j0 = 0; j0 < g->n; j0 += nc) {
    d.j0 = j0;
    d.nc = g->n - j0 < nc ? g->n - j0 : nc;
    d.nbp = (d.nc + NR - 1) / NR;
    hpu_parallel_for(d.nbp, serial ? d.nbp : 1, pack_b_range, &d);
    /* Enough items for every thread; a part keeps >= 4 panels so the A pack
     * (one per item) stays cheap next to the item's flops. */
    int64_t parts = 1;
    if (!serial && d.nmb < 2 * nt) {
      parts = (2 * nt + d.nmb - 1) / d.nmb;
      int64_t maxp = d.nbp / 4 > 0 ? d.nbp / 4 : 1;
      if (parts > maxp) parts = maxp;
    }
    d.ppp = (d.nbp + parts - 1) / parts;
    d.nparts = (d.nbp + d.ppp - 1) / d.ppp;
    int64_t items = d.nmb * d.nparts;
    atomic_store(&d.slot, 0);
    hpu_parallel_for(items, serial ? items : 1, compute_range, &d);
  }
  free(buf);
  return 0;
}

#else /* no x86 clones: matmul.c's path for everything */

int hpu_gemm_have_bf16dot(void) { return 0; }
int hpu_gemm_choose(const hpu_gemm_t *g) {
  (void)g;
  return HPU_GEMM_NONE;
}
int hpu_gemm_run(const hpu_gemm_t *g, int kernel) {
  (void)g;
  (void)kernel;
  return -1;
}

#endif
