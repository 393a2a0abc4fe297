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
 * A is read in place when it has unit column stride (and stays in L2 or is
 * read once): the kernel broadcasts each row's pair straight from memory,
 * bottom-edge panels included, and transposed A is packed. The kernel
 * keeps 24 zmm accumulators over a k block of <= 192 steps (A block 9 KB + B block 24 KB
 * in the 48 KB L1), parks partial sums in a small fp32 buffer between k
 * blocks, and writes full tiles of a row-major C straight from the
 * registers (alpha * acc + beta * C, rounded once to C's dtype: fp32
 * accumulation, as PyTorch's CPU); the R < MR rows of the bottom edge have
 * kernels of their own (R accumulator pairs, same store), column-edge
 * tiles and strided C go through an fp32 tile.
 *
 * Threads: one parallel region per product. The output is cut into up to
 * 4 parts per thread by columns (each part packs only its own B panels,
 * ~512 KB blocks that stay in L2) or by rows when that balances better;
 * the workers claim parts from a counter, so one that wakes late or is
 * preempted on the shared machine leaves its share to the others. A batch
 * of products (bmm) with enough members runs whole products per claim
 * instead. fp32 products with a small C and a long k (weight gradients) are
 * split in k instead (splitk_chunks): two chunks, the second's sum added to
 * C afterwards in a fixed order. When A is not read in place and a part spans several B blocks,
 * A is packed once per product (in parallel, before the parts), not once
 * per B block. Packing buffers are cached between calls (a fresh malloc of
 * that size is an mmap whose pages fault in on every call).
 *
 * Dispatch (hpu_gemm_choose), from measurements on a 2-core AVX-512 EPYC
 * (family 26, Zen 5 class) with OpenBLAS 0.3.21 pinned to
 * OPENBLAS_CORETYPE=Haswell, and for AMX on a 2-core Xeon:
 *  - bfloat16: AMXBF16 (section AMX below) when the CPU has AMX_BF16 and A
 *    has a unit stride, else BF16DOT when it has AVX512_BF16, else
 *    F32FMA (AVX-512), else matmul.c's convert + sgemm path;
 *  - float16: F32FMA on AVX-512 (no full-size conversion copies);
 *  - float32: ours except tiny and matrix-vector shapes (f32_rule below). */
#include "kernels/gemm.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "hpu/device.h"
#include "hpu/parallel.h"
#include "kernels/avx512_regs.h"
#include "kernels/cvt.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/load16.h"
#include "kernels/scratch.h"

#define MR 12
#define NR 32

static _Atomic int forced = HPU_GEMM_AUTO - 1; /* below AUTO: HPU_GEMM_KERNEL not read yet */

/* HPU_GEMM_KERNEL=auto|blas|f32fma|bf16dot|amx|f32avx2: one kernel for every product
 * (a kernel the CPU lacks falls back as in hpu_gemm_choose), to measure one
 * against another in a whole model. Anything else means auto, said once on
 * stderr so that a misspelt name does not measure the wrong thing quietly. */
static int env_kernel(void) {
  const char *e = getenv("HPU_GEMM_KERNEL");
  if (!e || !*e || !strcmp(e, "auto")) return HPU_GEMM_AUTO;
  if (!strcmp(e, "blas")) return HPU_GEMM_NONE;
  if (!strcmp(e, "f32fma")) return HPU_GEMM_F32FMA;
  if (!strcmp(e, "bf16dot")) return HPU_GEMM_BF16DOT;
  if (!strcmp(e, "amx")) return HPU_GEMM_AMXBF16;
  if (!strcmp(e, "f32avx2")) return HPU_GEMM_F32AVX2;
  fprintf(stderr,
          "[habana_torch] HPU_GEMM_KERNEL=%s is not one of auto, blas, f32fma, bf16dot, amx, f32avx2; using auto\n",
          e);
  return HPU_GEMM_AUTO;
}

static int forced_kernel(void) {
  int f = atomic_load(&forced);
  if (f < HPU_GEMM_AUTO) {
    atomic_compare_exchange_strong(&forced, &f, env_kernel());
    f = atomic_load(&forced);
  }
  return f;
}

int hpu_gemm_force(int kernel) {
  int old = forced_kernel();
  atomic_store(&forced, kernel);
  return old;
}

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

/* float32 rule, measured (2 threads, OpenBLAS's Haswell kernels against
 * ours): on a quiet machine ours ties at 256^3 and is 1.5-1.7x faster from
 * 1024^3; with other jobs loading the machine ours was 1.2-3x faster on
 * every square size from 64^3 and 1.4-1.6x on tall or wide shapes
 * (4096x4096 @ 4096x64, 64x64 @ 64x4096). OpenBLAS wins only on tiny
 * problems (16^3; 4x2048 @ 2048x4, where our 12-row tile is mostly
 * padding) and ties on matrix-vector shapes (m or n < 8, memory bound).
 * So: ours unless min(m, n) < 8 or m*n*k < 32^3 -- and always ours when an
 * operand has no unit stride (BLAS would need a gathered copy). */
static int f32_rule(const hpu_gemm_t *g) {
  int strided = (g->acs != 1 && g->ars != 1 && g->m > 1 && g->k > 1) ||
                (g->bcs != 1 && g->brs != 1 && g->k > 1 && g->n > 1) ||
                (g->ccs != 1 && g->n > 1);
  if (strided) return HPU_GEMM_F32FMA;
  if (g->m < 8 || g->n < 8 || (double)g->m * (double)g->n * (double)g->k < 32768.0) return HPU_GEMM_NONE;
  return HPU_GEMM_F32FMA;
}

/* Without AVX-512: gemm_avx2.c for float32 where it measured faster, else
 * matmul.c's BLAS path. Forced, the AVX2 kernel runs on any host with AVX2
 * (tests reach it on AVX-512 machines too). */
static int choose_avx2(const hpu_gemm_t *g, int f) {
  int ok = g->dt == HPU_FLOAT32 && hpu_kernels_isa() >= HPU_ISA_AVX2;
  if (f == HPU_GEMM_F32AVX2) return ok ? HPU_GEMM_F32AVX2 : HPU_GEMM_NONE;
  if (f != HPU_GEMM_AUTO) return HPU_GEMM_NONE;
  return ok && hpu_gemm_avx2_suits(g) ? HPU_GEMM_F32AVX2 : HPU_GEMM_NONE;
}

int hpu_gemm_choose(const hpu_gemm_t *g) {
  if (g->m <= 0 || g->n <= 0 || g->k <= 0) return HPU_GEMM_NONE;
  int f = forced_kernel();
  if (hpu_kernels_isa() < HPU_ISA_AVX512 || f == HPU_GEMM_F32AVX2) return choose_avx2(g, f);
  int amx = g->dt == HPU_BFLOAT16 && (g->acs == 1 || g->ars == 1 || g->k == 1) && hpu_gemm_have_amx();
  if (f == HPU_GEMM_AMXBF16 && !amx) f = HPU_GEMM_BF16DOT;
  if (f == HPU_GEMM_BF16DOT && (g->dt != HPU_BFLOAT16 || !hpu_gemm_have_bf16dot())) f = HPU_GEMM_F32FMA;
  if (f != HPU_GEMM_AUTO) return f;
  switch (g->dt) {
    case HPU_BFLOAT16:
      if (amx) return HPU_GEMM_AMXBF16;
      return hpu_gemm_have_bf16dot() ? HPU_GEMM_BF16DOT : HPU_GEMM_F32FMA;
    case HPU_FLOAT16: return HPU_GEMM_F32FMA;
    case HPU_FLOAT32: return f32_rule(g);
    default: return HPU_GEMM_NONE;
  }
}

/* Microkernels -------------------------------------------------------------- */

/* Where a finished R x NR tile goes (R = MR, or the R < MR rows left at the
 * bottom edge, which have their own kernels below). Tiles of NR columns of a
 * row-major C are written straight from the accumulators (alpha, beta and
 * the rounding to C's dtype fused into the store); column edges and strided
 * C go through an fp32 tile. */
typedef struct {
  const hpu_gemm_t *g;
  int64_t i0, j0;
  int mr, nr;
  /* C's element size, looked up once per block: no call may happen inside a
   * kernel while its accumulators are live (every zmm register is
   * caller-saved, so one out-of-line hpu_dtype_size spilled all 24) */
  int64_t es;
  float *tile; /* MR * NR scratch for the slow path */
  float *acc;  /* MR x NR fp32 partial sums of earlier k blocks (with `first` == 0) */
  int first, last;
} fin_t;

/* Epilogue: C[0..mr, 0..nr) = alpha * tile + beta * C, rounded once. */

ATTR_512 static inline void store16(char *p, hpu_dtype_t dt, __mmask16 mk, __m512 v) {
  if (dt == HPU_FLOAT32) {
    _mm512_mask_storeu_ps(p, mk, v);
    return;
  }
  __m256i h;
  if (dt == HPU_FLOAT16) {
    h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  } else {
    h = hpu_f32_to_bf16_512(v);
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
        v0 = _mm512_fmadd_ps(vb, hpu_load16_f32(row, dt, m0), v0);
        if (m1) v1 = _mm512_fmadd_ps(vb, hpu_load16_f32(row + 16 * es, dt, m1), v1);
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

/* A full row of a tile: 32 values at p in C's dtype. */
ATTR_512 static inline void store_row(char *p, hpu_dtype_t dt, int64_t es, __m512 v0, __m512 v1) {
  store16(p, dt, 0xffff, v0);
  store16(p + 16 * es, dt, 0xffff, v1);
}

/* The same in the AVX512_BF16 kernels: a bf16 row is one VCVTNE2PS2BF16
 * (round to nearest even, as store16) unless a lane is NaN or an fp32
 * denormal, which that instruction does not round as PyTorch does (NaN
 * payloads, denormals flushed); those rows take store16's integer path. */
ATTR_BF16 static inline void store_row_bf16(char *p, hpu_dtype_t dt, int64_t es, __m512 v0, __m512 v1) {
  if (dt == HPU_BFLOAT16) {
    /* fpclass 0x01 QNaN | 0x20 denormal | 0x80 SNaN */
    if (!(_mm512_fpclass_ps_mask(v0, 0xa1) | _mm512_fpclass_ps_mask(v1, 0xa1))) {
      _mm512_storeu_si512(p, (__m512i)_mm512_cvtne2ps_pbh(v1, v0));
      return;
    }
  }
  store16(p, dt, 0xffff, v0);
  store16(p + 16 * es, dt, 0xffff, v1);
}

/* Writes the accumulators of R rows (c0: columns 0..15, c1: 16..31 of each
 * row); STORE_ROW is store_row or store_row_bf16 (by the kernel's ISA). The
 * full-width path is inline code only (see fin_t.es). */
#define FINISH(f, c0, c1, STORE_ROW, R)                                                      \
  do {                                                                                       \
    const hpu_gemm_t *g_ = (f)->g;                                                           \
    if ((f)->nr == NR && g_->ccs == 1) {                                                     \
      int64_t es_ = (f)->es, rs_ = g_->crs * es_;                                            \
      hpu_dtype_t dt_ = g_->dt;                                                              \
      char *row_ = (char *)g_->c + ((f)->i0 * g_->crs + (f)->j0) * es_;                      \
      __m512 va_ = _mm512_set1_ps(g_->alpha), vb_ = _mm512_set1_ps(g_->beta);                \
      int beta_ = g_->beta != 0;                                                             \
      _Pragma("GCC unroll 12") for (int i_ = 0; i_ < (R); i_++) {                            \
        __m512 v0_ = _mm512_mul_ps(va_, c0[i_]), v1_ = _mm512_mul_ps(va_, c1[i_]);           \
        if (beta_) {                                                                         \
          v0_ = _mm512_fmadd_ps(vb_, hpu_load16_f32(row_, dt_, 0xffff), v0_);                \
          v1_ = _mm512_fmadd_ps(vb_, hpu_load16_f32(row_ + 16 * es_, dt_, 0xffff), v1_);     \
        }                                                                                    \
        STORE_ROW(row_, dt_, es_, v0_, v1_);                                                 \
        row_ += rs_;                                                                         \
      }                                                                                      \
    } else {                                                                                 \
      _Pragma("GCC unroll 12") for (int i_ = 0; i_ < (R); i_++) {                            \
        _mm512_storeu_ps((f)->tile + i_ * NR, c0[i_]);                                       \
        _mm512_storeu_ps((f)->tile + i_ * NR + 16, c1[i_]);                                  \
      }                                                                                      \
      epilogue(g_, (f)->tile, (f)->i0, (f)->j0, (R), (f)->nr);                               \
    }                                                                                        \
  } while (0)

/* Starts from zero (first k block) or from the partial sums in f->acc. */
#define INIT(f, c0, c1, R)                                                                   \
  do {                                                                                       \
    if ((f)->first) {                                                                        \
      _Pragma("GCC unroll 12") for (int i_ = 0; i_ < (R); i_++) c0[i_] = c1[i_] = _mm512_setzero_ps(); \
    } else {                                                                                 \
      _Pragma("GCC unroll 12") for (int i_ = 0; i_ < (R); i_++) {                            \
        c0[i_] = _mm512_loadu_ps((f)->acc + i_ * NR);                                        \
        c1[i_] = _mm512_loadu_ps((f)->acc + i_ * NR + 16);                                   \
      }                                                                                      \
    }                                                                                        \
  } while (0)

#define SAVE(f, c0, c1, R)                                                                   \
  do {                                                                                       \
    _Pragma("GCC unroll 12") for (int i_ = 0; i_ < (R); i_++) {                              \
      _mm512_storeu_ps((f)->acc + i_ * NR, c0[i_]);                                          \
      _mm512_storeu_ps((f)->acc + i_ * NR + 16, c1[i_]);                                     \
    }                                                                                        \
  } while (0)

static inline uint32_t ld32(const void *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
static inline float ldf32(const void *p) {
  float v;
  memcpy(&v, p, 4);
  return v;
}

/* Kernel bodies for R rows (R a constant after inlining, so the row loops
 * unroll and the accumulator arrays live in registers); instantiated for
 * R = MR and for every bottom-edge height below, which used to run the full
 * MR-row kernel on a zero-padded packed panel and store through the fp32
 * tile (8 of BERT's 128-row attention products' rows). */
#define BODY __attribute__((always_inline)) inline

/* bf16, A packed as [kp][MR] pairs. */
ATTR_BF16 static BODY void bf16_packed_body(const int R, int64_t kp, const uint32_t *A, const uint32_t *B,
                                            const fin_t *f) {
  __m512 c0[MR], c1[MR];
  INIT(f, c0, c1, R);
  for (int64_t p = 0; p < kp; p++) {
    __m512bh b0 = (__m512bh)_mm512_loadu_si512(B);
    __m512bh b1 = (__m512bh)_mm512_loadu_si512(B + 16);
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
      __m512bh a = (__m512bh)_mm512_set1_epi32((int)A[i]);
      c0[i] = _mm512_dpbf16_ps(c0[i], a, b0);
      c1[i] = _mm512_dpbf16_ps(c1[i], a, b1);
    }
    A += MR;
    B += NR;
  }
  if (f->last) FINISH(f, c0, c1, store_row_bf16, R);
  else SAVE(f, c0, c1, R);
}

/* bf16, A read in place: R rows `lda` elements apart, unit column stride.
 * k/2 full pairs, then (odd k) the last element alone, so nothing past a
 * row's end is read. Rows by threes from four bases (base + 0, L, 2L are
 * plain addressing modes). */
ATTR_BF16 static BODY void bf16_direct_body(const int R, int64_t k, const uint16_t *A, int64_t lda,
                                            const uint32_t *B, const fin_t *f) {
  __m512 c0[MR], c1[MR];
  INIT(f, c0, c1, R);
  int64_t L = 2 * lda; /* bytes */
  const char *r0 = (const char *)A;
  const char *r3 = R > 3 ? r0 + 3 * L : r0, *r6 = R > 6 ? r0 + 6 * L : r0, *r9 = R > 9 ? r0 + 9 * L : r0;
  int64_t kf = k / 2;
  for (int64_t p = 0; p < kf; p++) {
    __m512bh b0 = (__m512bh)_mm512_loadu_si512(B);
    __m512bh b1 = (__m512bh)_mm512_loadu_si512(B + 16);
    const char *rows[MR] = {r0, r0 + L, r0 + 2 * L, r3, r3 + L, r3 + 2 * L,
                            r6, r6 + L, r6 + 2 * L, r9, r9 + L, r9 + 2 * L};
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
      __m512bh a = (__m512bh)_mm512_set1_epi32((int)ld32(rows[i]));
      c0[i] = _mm512_dpbf16_ps(c0[i], a, b0);
      c1[i] = _mm512_dpbf16_ps(c1[i], a, b1);
    }
    r0 += 4;
    r3 += 4;
    r6 += 4;
    r9 += 4;
    B += NR;
  }
  if (k & 1) {
    __m512bh b0 = (__m512bh)_mm512_loadu_si512(B);
    __m512bh b1 = (__m512bh)_mm512_loadu_si512(B + 16);
    const char *rows[MR] = {r0, r0 + L, r0 + 2 * L, r3, r3 + L, r3 + 2 * L,
                            r6, r6 + L, r6 + 2 * L, r9, r9 + L, r9 + 2 * L};
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
      uint16_t h;
      memcpy(&h, rows[i], 2);
      __m512bh a = (__m512bh)_mm512_set1_epi32((int)h);
      c0[i] = _mm512_dpbf16_ps(c0[i], a, b0);
      c1[i] = _mm512_dpbf16_ps(c1[i], a, b1);
    }
  }
  if (f->last) FINISH(f, c0, c1, store_row_bf16, R);
  else SAVE(f, c0, c1, R);
}

/* fp32 FMA; A either packed [k][MR] or fp32 rows in place. With A packed,
 * B is packed too (boff NULL, a constant in those kernels) or its rows are
 * found through a table: step p reads 32 floats at B + boff[p] (a direct
 * convolution's taps, read from the input's planes where an implicit GEMM
 * would gather them into a panel; A packed there because its 12 rows, a
 * 3x3 layer's weights read in place 4.6 KB apart, ran the 3x3/2 128->128
 * at 56x56 3-4% slower on the Zen 4 class). */
ATTR_512 static BODY void f32_packed_body(const int R, int64_t k, const float *A, const float *B,
                                          const int32_t *boff, const fin_t *f) {
  __m512 c0[MR], c1[MR];
  INIT(f, c0, c1, R);
  for (int64_t p = 0; p < k; p++) {
    const float *bp = boff ? B + boff[p] : B + p * NR;
    __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
      __m512 a = _mm512_set1_ps(A[i]);
      c0[i] = _mm512_fmadd_ps(a, b0, c0[i]);
      c1[i] = _mm512_fmadd_ps(a, b1, c1[i]);
    }
    A += MR;
  }
  if (f->last) FINISH(f, c0, c1, store_row, R);
  else SAVE(f, c0, c1, R);
}

ATTR_512 static BODY void f32_direct_body(const int R, int64_t k, const float *A, int64_t lda, const float *B,
                                          const fin_t *f) {
  __m512 c0[MR], c1[MR];
  INIT(f, c0, c1, R);
  int64_t L = 4 * lda; /* bytes */
  const char *r0 = (const char *)A;
  const char *r3 = R > 3 ? r0 + 3 * L : r0, *r6 = R > 6 ? r0 + 6 * L : r0, *r9 = R > 9 ? r0 + 9 * L : r0;
  for (int64_t p = 0; p < k; p++) {
    __m512 b0 = _mm512_loadu_ps(B), b1 = _mm512_loadu_ps(B + 16);
    const char *rows[MR] = {r0, r0 + L, r0 + 2 * L, r3, r3 + L, r3 + 2 * L,
                            r6, r6 + L, r6 + 2 * L, r9, r9 + L, r9 + 2 * L};
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
      __m512 a = _mm512_set1_ps(ldf32(rows[i]));
      c0[i] = _mm512_fmadd_ps(a, b0, c0[i]);
      c1[i] = _mm512_fmadd_ps(a, b1, c1[i]);
    }
    r0 += 4;
    r3 += 4;
    r6 += 4;
    r9 += 4;
    B += NR;
  }
  if (f->last) FINISH(f, c0, c1, store_row, R);
  else SAVE(f, c0, c1, R);
}

typedef void (*ukr_bf16_packed_t)(int64_t, const uint32_t *, const uint32_t *, const fin_t *);
typedef void (*ukr_bf16_direct_t)(int64_t, const uint16_t *, int64_t, const uint32_t *, const fin_t *);
typedef void (*ukr_f32_packed_t)(int64_t, const float *, const float *, const fin_t *);
typedef void (*ukr_f32_direct_t)(int64_t, const float *, int64_t, const float *, const fin_t *);
typedef void (*ukr_f32_rows_t)(int64_t, const float *, const float *, const int32_t *, const fin_t *);

#define KERNELS(R)                                                                                    \
  ATTR_BF16 static void ukr_bf16_packed_##R(int64_t kp, const uint32_t *A, const uint32_t *B,        \
                                            const fin_t *f) {                                         \
    bf16_packed_body(R, kp, A, B, f);                                                                 \
  }                                                                                                   \
  ATTR_BF16 static void ukr_bf16_direct_##R(int64_t k, const uint16_t *A, int64_t lda, const uint32_t *B, \
                                            const fin_t *f) {                                         \
    bf16_direct_body(R, k, A, lda, B, f);                                                             \
  }                                                                                                   \
  ATTR_512 static void ukr_f32_packed_##R(int64_t k, const float *A, const float *B, const fin_t *f) { \
    f32_packed_body(R, k, A, B, NULL, f);                                                             \
  }                                                                                                   \
  ATTR_512 static void ukr_f32_direct_##R(int64_t k, const float *A, int64_t lda, const float *B,    \
                                          const fin_t *f) {                                           \
    f32_direct_body(R, k, A, lda, B, f);                                                              \
  }                                                                                                   \
  ATTR_512 static void ukr_f32_rows_##R(int64_t k, const float *A, const float *B, const int32_t *boff, \
                                        const fin_t *f) {                                             \
    f32_packed_body(R, k, A, B, boff, f);                                                             \
  }

KERNELS(1)
KERNELS(2)
KERNELS(3)
KERNELS(4)
KERNELS(5)
KERNELS(6)
KERNELS(7)
KERNELS(8)
KERNELS(9)
KERNELS(10)
KERNELS(11)
KERNELS(12)

/* By row count (index mr, 1..MR). */
#define ROWS_TABLE(kind)                                                                        \
  {NULL,          ukr_##kind##_1, ukr_##kind##_2, ukr_##kind##_3, ukr_##kind##_4, ukr_##kind##_5, \
   ukr_##kind##_6, ukr_##kind##_7, ukr_##kind##_8, ukr_##kind##_9, ukr_##kind##_10,                \
   ukr_##kind##_11, ukr_##kind##_12}
static const ukr_bf16_packed_t ukr_bf16_packed[MR + 1] = ROWS_TABLE(bf16_packed);
static const ukr_bf16_direct_t ukr_bf16_direct[MR + 1] = ROWS_TABLE(bf16_direct);
static const ukr_f32_packed_t ukr_f32_packed[MR + 1] = ROWS_TABLE(f32_packed);
static const ukr_f32_direct_t ukr_f32_direct[MR + 1] = ROWS_TABLE(f32_direct);
static const ukr_f32_rows_t ukr_f32_rows[MR + 1] = ROWS_TABLE(f32_rows);

/* Packing ------------------------------------------------------------------- */


/* Transposes a k-contiguous operand into [kq][W] 32-bit panels (W = 16 or 32
 * columns): column j (cols of them, at src + j * cs elements of `es` bytes)
 * holds kq 32-bit words (for bf16: element pairs; `kel` elements in all, an
 * odd tail padded with 0). */
ATTR_512 static void pack_t32(const char *src, int64_t cs, int es, int64_t kel, int64_t cols, int W,
                              uint32_t *dst) {
  int64_t kq = es == 2 ? (kel + 1) / 2 : kel;
  int per = 64 / es; /* elements in 16 words */
  for (int64_t jg = 0; jg < W; jg += 16)
    for (int64_t q0 = 0; q0 < kq; q0 += 16) {
      __m512i r[16];
      int64_t left = kel - q0 * (4 / es); /* elements from word q0 on */
      for (int j = 0; j < 16; j++) {
        if (jg + j >= cols) {
          r[j] = _mm512_setzero_si512();
          continue;
        }
        const char *p = src + ((jg + j) * cs) * es + q0 * 4;
        if (left >= per) r[j] = _mm512_loadu_si512(p);
        else if (es == 2) r[j] = _mm512_maskz_loadu_epi16(hpu_mask32(left), p);
        else r[j] = _mm512_maskz_loadu_epi32(hpu_mask16(left), p);
      }
      hpu_tr16_epi32(r);
      int64_t nq = kq - q0 < 16 ? kq - q0 : 16;
      __mmask16 wm = hpu_mask16(W - jg);
      for (int q = 0; q < nq; q++) _mm512_mask_storeu_epi32(dst + (q0 + q) * W + jg, wm, r[q]);
    }
}

/* Pair q of a VPERMT2W result: element q of the first source, then element
 * q of the second (indices 32.. select the second); +16 for q = 16..31. */
static const uint16_t pair_lo[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                     8,  40, 9,  41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};

/* bf16 A rows [i0, i0 + mr) into a [kp][MR] pair panel. */
ATTR_512 static void pack_a_bf16(const hpu_gemm_t *g, int64_t i0, int64_t mr, uint32_t *dst) {
  const uint16_t *a = g->a;
  int64_t k = g->k, kp = (k + 1) / 2, rs = g->ars, cs = g->acs;
  if (rs == 1 && cs != 1) {
    /* transposed: rows 2p, 2p+1 of memory are contiguous over i; one
     * VPERMT2W interleaves their 12 elements into the panel's 12 pairs
     * (instead of two widenings, a shift and an OR). Only the low 16
     * elements of each source are selected. */
    __mmask16 mk = hpu_mask16(mr);
    __m512i ilo = _mm512_loadu_si512(pair_lo);
    const uint16_t *q = a + i0;
    int64_t kf = k / 2;
    for (int64_t p = 0; p < kf; p++, q += 2 * cs) {
      __m512i x0 = _mm512_castsi256_si512(_mm256_maskz_loadu_epi16(mk, q));
      __m512i x1 = _mm512_castsi256_si512(_mm256_maskz_loadu_epi16(mk, q + cs));
      _mm512_mask_storeu_epi32(dst + p * MR, 0xfff, _mm512_permutex2var_epi16(x0, ilo, x1));
    }
    if (k & 1) { /* the last row pairs with 0 */
      __m512i x0 = _mm512_castsi256_si512(_mm256_maskz_loadu_epi16(mk, q));
      _mm512_mask_storeu_epi32(dst + kf * MR, 0xfff, _mm512_permutex2var_epi16(x0, ilo, _mm512_setzero_si512()));
    }
    return;
  }
  if (cs == 1) { /* rows contiguous along k: a transpose of 32-bit pairs */
    pack_t32((const char *)(a + i0 * rs), rs, 2, k, mr, MR, dst);
    return;
  }
  for (int64_t i = 0; i < MR; i++) {
    if (i >= mr) {
      for (int64_t p = 0; p < kp; p++) dst[p * MR + i] = 0;
      continue;
    }
    const uint16_t *r = a + (i0 + i) * rs;
    for (int64_t p = 0; p < kp; p++) {
      uint32_t lo = r[2 * p * cs], hi = 2 * p + 1 < k ? r[(2 * p + 1) * cs] : 0;
      dst[p * MR + i] = lo | hi << 16;
    }
  }
}

/* Four full panels of a transposed bf16 A (unit row stride) at once: rows
 * i0..i0+47 of A are 48 contiguous elements in each of memory rows 2p and
 * 2p+1; three VPERMT2W interleave them into 48 pairs in row order, and six
 * masked stores place 12 pairs in each panel (panel t at dst + t * pstride
 * words). Half the instructions of packing the panels one by one (whose
 * 24-byte masked loads and two widenings per step took ~19% of a
 * [1024x2048]^T @ [2048x256] product, perf). */
ATTR_512 static void pack_a_bf16_t4(const hpu_gemm_t *g, int64_t i0, uint32_t *dst, int64_t pstride) {
  const uint16_t *a = g->a;
  int64_t k = g->k, kp = (k + 1) / 2, cs = g->acs;
  __m512i ilo = _mm512_loadu_si512(pair_lo);
  __m512i ihi = _mm512_add_epi16(ilo, _mm512_set1_epi16(16));
  uint32_t *d0 = dst, *d1 = dst + pstride, *d2 = dst + 2 * pstride, *d3 = dst + 3 * pstride;
  for (int64_t p = 0; p < kp; p++) {
    const uint16_t *q0 = a + 2 * p * cs + i0;
    __m512i x0 = _mm512_loadu_si512(q0);                              /* rows i0..i0+31 */
    __m512i y0 = _mm512_castsi256_si512(_mm256_loadu_si256((const void *)(q0 + 32))); /* +32..+47 */
    __m512i x1 = _mm512_setzero_si512(), y1 = _mm512_setzero_si512(); /* odd k: pad with 0 */
    if (2 * p + 1 < k) {
      x1 = _mm512_loadu_si512(q0 + cs);
      y1 = _mm512_castsi256_si512(_mm256_loadu_si256((const void *)(q0 + cs + 32)));
    }
    __m512i v0 = _mm512_permutex2var_epi16(x0, ilo, x1); /* pairs of rows 0..15 */
    __m512i v1 = _mm512_permutex2var_epi16(x0, ihi, x1); /* 16..31 */
    __m512i v2 = _mm512_permutex2var_epi16(y0, ilo, y1); /* 32..47 */
    uint32_t *o0 = d0 + p * MR, *o1 = d1 + p * MR, *o2 = d2 + p * MR, *o3 = d3 + p * MR;
    /* rows 0..11 -> panel 0; 12..23 -> 1; 24..35 -> 2; 36..47 -> 3 (lanes
     * outside the mask are not written, so the shifted bases are never touched) */
    _mm512_mask_storeu_epi32(o0, 0x0fff, v0);
    _mm512_mask_storeu_epi32(o1 - 12, 0xf000, v0);
    _mm512_mask_storeu_epi32(o1 + 4, 0x00ff, v1);
    _mm512_mask_storeu_epi32(o2 - 8, 0xff00, v1);
    _mm512_mask_storeu_epi32(o2 + 8, 0x000f, v2);
    _mm512_mask_storeu_epi32(o3 - 4, 0xfff0, v2);
  }
}

/* bf16 B columns [j0, j0 + cols) (cols <= NR) into a [kp][NR] pair panel. */
ATTR_512 static void pack_b_bf16(const hpu_gemm_t *g, int64_t j0, int64_t cols, uint32_t *dst) {
  const uint16_t *b = g->b;
  int64_t k = g->k, kp = (k + 1) / 2, rs = g->brs, cs = g->bcs;
  if (cs == 1) {
    /* Rows 2p and 2p+1 (32 columns each, one load apiece) interleaved by two
     * VPERMT2W into the pairs of columns 0..15 and 16..31: 2 loads, 2
     * permutes and 2 stores per step instead of 4 widening loads, 2 shifts
     * and 2 ORs. Columns past `cols` load as 0. */
    __m512i ilo = _mm512_loadu_si512(pair_lo);
    __m512i ihi = _mm512_add_epi16(ilo, _mm512_set1_epi16(16));
    __mmask32 mk = hpu_mask32(cols);
    const uint16_t *q = b + j0;
    int64_t kf = k / 2;
    for (int64_t p = 0; p < kf; p++, q += 2 * rs) {
      __m512i x0 = _mm512_maskz_loadu_epi16(mk, q), x1 = _mm512_maskz_loadu_epi16(mk, q + rs);
      _mm512_storeu_si512(dst + p * NR, _mm512_permutex2var_epi16(x0, ilo, x1));
      _mm512_storeu_si512(dst + p * NR + 16, _mm512_permutex2var_epi16(x0, ihi, x1));
    }
    if (k & 1) { /* the last row pairs with 0 */
      __m512i x0 = _mm512_maskz_loadu_epi16(mk, q), z = _mm512_setzero_si512();
      _mm512_storeu_si512(dst + kf * NR, _mm512_permutex2var_epi16(x0, ilo, z));
      _mm512_storeu_si512(dst + kf * NR + 16, _mm512_permutex2var_epi16(x0, ihi, z));
    }
    return;
  }
  if (rs == 1) {
    pack_t32((const char *)(b + j0 * cs), cs, 2, k, cols, NR, dst);
    return;
  }
  for (int64_t p = 0; p < kp; p++)
    for (int64_t j = 0; j < NR; j++) {
      uint32_t v = 0;
      if (j < cols) {
        const uint16_t *q = b + 2 * p * rs + (j0 + j) * cs;
        v = (uint32_t)q[0] | (2 * p + 1 < k ? (uint32_t)q[rs] << 16 : 0u);
      }
      dst[p * NR + j] = v;
    }
}

static inline float ldf(const char *base, int64_t idx, hpu_dtype_t dt) {
  if (dt == HPU_FLOAT32) return ((const float *)base)[idx];
  uint16_t h = ((const uint16_t *)base)[idx];
  return dt == HPU_BFLOAT16 ? hpu_cvt_bf16_f32(h) : hpu_cvt_half_f32(h);
}

/* F32FMA panels (widening bf16/fp16). */
ATTR_512 static void pack_a_f32(const hpu_gemm_t *g, int64_t i0, int64_t mr, float *dst) {
  const char *a = g->a;
  hpu_dtype_t dt = g->dt;
  int64_t k = g->k, rs = g->ars, cs = g->acs;
  if (rs == 1 && cs != 1 && dt == HPU_FLOAT32) {
    __mmask16 mk = hpu_mask16(mr);
    for (int64_t p = 0; p < k; p++)
      _mm512_mask_storeu_ps(dst + p * MR, 0xfff, _mm512_maskz_loadu_ps(mk, (const float *)a + p * cs + i0));
    return;
  }
  if (cs == 1 && dt == HPU_FLOAT32) {
    pack_t32((const char *)((const float *)a + i0 * rs), rs, 4, k, mr, MR, (uint32_t *)dst);
    return;
  }
  for (int64_t i = 0; i < MR; i++) {
    if (i >= mr) {
      for (int64_t p = 0; p < k; p++) dst[p * MR + i] = 0;
      continue;
    }
    int64_t r = (i0 + i) * rs;
    for (int64_t p = 0; p < k; p++) dst[p * MR + i] = ldf(a, r + p * cs, dt);
  }
}

ATTR_512 static void pack_b_f32(const hpu_gemm_t *g, int64_t j0, int64_t cols, float *dst) {
  const char *b = g->b;
  hpu_dtype_t dt = g->dt;
  int64_t k = g->k, rs = g->brs, cs = g->bcs;
  if (dt == HPU_FLOAT32 && cs == 1) {
    __mmask16 m0 = hpu_mask16(cols), m1 = hpu_mask16(cols - 16);
    for (int64_t p = 0; p < k; p++) {
      const float *q = (const float *)b + p * rs + j0;
      _mm512_storeu_ps(dst + p * NR, _mm512_maskz_loadu_ps(m0, q));
      _mm512_storeu_ps(dst + p * NR + 16, _mm512_maskz_loadu_ps(m1, q + 16));
    }
    return;
  }
  if (dt == HPU_FLOAT32 && rs == 1) {
    pack_t32((const char *)((const float *)b + j0 * cs), cs, 4, k, cols, NR, (uint32_t *)dst);
    return;
  }
  for (int64_t p = 0; p < k; p++)
    for (int64_t j = 0; j < NR; j++) dst[p * NR + j] = j < cols ? ldf(b, p * rs + (j0 + j) * cs, dt) : 0.0f;
}

/* Driver -------------------------------------------------------------------- */

typedef struct plan_claims {
  _Atomic int next;         /* workers that took their scratch */
  _Atomic int64_t nextpart; /* next part or batch to claim */
} plan_claims_t;

typedef struct {
  const hpu_gemm_t *g;
  int kernel;
  int64_t kp;          /* packed k: pairs (BF16DOT) or k (F32FMA); 4 bytes each */
  int adirect;         /* A read in place (unit column stride, kernel's own dtype) */
  int64_t nc;          /* columns per packed B block, multiple of NR */
  size_t per;          /* scratch bytes per worker */
  size_t boff, toff, accoff; /* B block, fp32 tile, partial sums in a worker's scratch */
  int64_t kc;          /* k block, in packed steps */
  char *scratch;
  int nwork;           /* workers the scratch was sized for */
  /* The workers' counters, outside the plan: splitk_unit copies the plan
   * while other workers bump them. */
  struct plan_claims *claims;
  /* one GEMM split into parts over rows or columns */
  int split_n;
  int64_t nparts;
  /* batches */
  int64_t nbatch;
  const int64_t *offs; /* 3 byte offsets (a, b, c) per batch, or NULL */
  /* A packed once per product (apanels panels of kp * MR words), or NULL */
  uint32_t *apre;
  int64_t apanels;
  /* split-K (fp32, see splitk_chunks): chunks of kchunk steps, each cut into
   * cparts column parts; chunk s > 0 writes alpha * its sum into
   * part + (s - 1) * m * n (fp32, row-major), added to C afterwards */
  int64_t nchunk, kchunk, cparts;
  float *part;
  uint32_t *askt; /* per chunk: its transposed A packed row by row, or NULL */
} plan_t;

/* Batch bi of a batched product: g with its operands moved by offs[3 bi..]. */
static hpu_gemm_t batch_view(const hpu_gemm_t *g, const int64_t *offs, int64_t bi) {
  hpu_gemm_t gb = *g;
  if (offs) {
    gb.a = (const char *)gb.a + offs[3 * bi];
    gb.b = (const char *)gb.b + offs[3 * bi + 1];
    gb.c = (char *)gb.c + offs[3 * bi + 2];
  }
  return gb;
}

/* MR-row panels [t0, t1) of an fp32 A stored transposed (element (i, p) at
 * a[p * acs + i]), panel t at dst + t * kstride * MR, walking A's stored
 * rows: one contiguous read per k step instead of a 48-byte piece of every
 * row per panel (pack_a_f32), whose 1 KB-apart reads the prefetchers did not
 * follow: a few percent faster on [256 x 2048]^T @ [2048 x 256] (split-K),
 * on one thread and on two. */
ATTR_512 static void pack_a_f32_trows(const hpu_gemm_t *g, int64_t t0, int64_t t1, float *dst, int64_t kstride) {
  for (int64_t p = 0; p < g->k; p++) {
    const float *row = (const float *)g->a + p * g->acs;
    for (int64_t t = t0; t < t1; t++)
      _mm512_mask_storeu_ps(dst + (t * kstride + p) * MR, 0xfff,
                            _mm512_maskz_loadu_ps(hpu_mask16(g->m - t * MR), row + t * MR));
  }
}

/* Packs A's MR-row panels [p0, p1) of g into P->apre. */
static void prepack_a(const plan_t *P, const hpu_gemm_t *g, int64_t p0, int64_t p1) {
  int t4 = P->kernel == HPU_GEMM_BF16DOT && g->ars == 1 && g->acs != 1;
  if (P->kernel == HPU_GEMM_F32FMA && g->dt == HPU_FLOAT32 && g->ars == 1 && g->acs != 1) {
    pack_a_f32_trows(g, p0, p1, (float *)P->apre, P->kp);
    return;
  }
  for (int64_t t = p0; t < p1; t++) {
    if (t4 && t + 4 <= p1 && (t + 4) * MR <= g->m) {
      pack_a_bf16_t4(g, t * MR, P->apre + t * P->kp * MR, P->kp * MR);
      t += 3;
      continue;
    }
    int64_t i0 = t * MR, mr = g->m - i0 < MR ? g->m - i0 : MR;
    uint32_t *dst = P->apre + t * P->kp * MR;
    if (P->kernel == HPU_GEMM_BF16DOT) pack_a_bf16(g, i0, mr, dst);
    else pack_a_f32(g, i0, mr, (float *)dst);
  }
}

static void prepack_range(void *ctx, int64_t begin, int64_t end) {
  const plan_t *P = ctx;
  prepack_a(P, P->g, begin, end);
}

/* C[i0:i1, j0:j1] of g, serially, with one worker's scratch. */
static void run_block(const plan_t *P, const hpu_gemm_t *g, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                      char *scr) {
  uint32_t *apack = (uint32_t *)scr, *bpack = (uint32_t *)(scr + P->boff);
  float *acc = (float *)(scr + P->accoff);
  fin_t f;
  f.g = g;
  f.tile = (float *)(scr + P->toff);
  /* kp: panel stride (the plan's k); kend: this g's steps, fewer in the
   * last split-K chunk */
  int64_t kp = P->kp, es = (int64_t)hpu_dtype_size(g->dt);
  f.es = es;
  int bf = P->kernel == HPU_GEMM_BF16DOT;
  int64_t kend = bf ? (g->k + 1) / 2 : g->k;
  for (int64_t jc = j0; jc < j1; jc += P->nc) {
    int64_t ncur = j1 - jc < P->nc ? j1 - jc : P->nc, npan = (ncur + NR - 1) / NR;
    for (int64_t jp = 0; jp < npan; jp++) {
      int64_t cols = ncur - jp * NR < NR ? ncur - jp * NR : NR;
      if (bf) pack_b_bf16(g, jc + jp * NR, cols, bpack + jp * kp * NR);
      else pack_b_f32(g, jc + jp * NR, cols, (float *)(bpack + jp * kp * NR));
    }
    for (int64_t ip = i0; ip < i1; ip += MR) {
      int64_t mr = i1 - ip < MR ? i1 - ip : MR;
      /* the bottom edge too: its kernel reads only its mr rows */
      int direct = P->adirect && !P->apre;
      const char *arow = (const char *)g->a + ip * g->ars * es;
      if (P->apre) {
        apack = P->apre + ip / MR * kp * MR;
      } else if (!direct) {
        if (bf) pack_a_bf16(g, ip, mr, apack);
        else pack_a_f32(g, ip, mr, (float *)apack);
      }
      f.i0 = ip;
      f.mr = (int)mr;
      /* k in blocks of kc steps: the A panel's block stays in L1 while the
       * B panels' blocks stream from L2; partial sums wait in acc. */
      for (int64_t kb = 0; kb < kend; kb += P->kc) {
        int64_t kcur = kend - kb < P->kc ? kend - kb : P->kc;
        f.first = kb == 0;
        f.last = kb + kcur == kend;
        for (int64_t jp = 0; jp < npan; jp++) {
          const uint32_t *bp = bpack + jp * kp * NR + kb * NR;
          int64_t nr = ncur - jp * NR < NR ? ncur - jp * NR : NR;
          f.j0 = jc + jp * NR;
          f.nr = (int)nr;
          f.acc = acc + jp * MR * NR;
          if (bf) {
            if (direct) {
              int64_t kel = f.last ? g->k - 2 * kb : 2 * kcur;
              ukr_bf16_direct[mr](kel, (const uint16_t *)arow + 2 * kb, g->ars, bp, &f);
            } else {
              ukr_bf16_packed[mr](kcur, apack + kb * MR, bp, &f);
            }
          } else {
            if (direct) ukr_f32_direct[mr](kcur, (const float *)arow + kb, g->ars, (const float *)bp, &f);
            else ukr_f32_packed[mr](kcur, (const float *)apack + kb * MR, (const float *)bp, &f);
          }
        }
      }
    }
  }
}

static char *worker_scratch(plan_t *P, void **own) {
  int w = atomic_fetch_add(&P->claims->next, 1);
  *own = NULL;
  if (w < P->nwork) return P->scratch + (size_t)w * P->per;
  *own = malloc(P->per); /* the pool grew since the plan was made */
  if (!*own) abort();
  return *own;
}

/* Split-K unit t: column part t % cparts of k chunk t / cparts. Chunk 0
 * applies alpha and beta to C itself; chunk s > 0 stores alpha times its
 * own sum (beta 0) in its fp32 partial, which splitk_reduce adds to C. */
static void splitk_unit(const plan_t *P, int64_t t, char *scr) {
  const hpu_gemm_t *g = P->g;
  int64_t s = t / P->cparts, cp = t % P->cparts;
  int64_t k0 = s * P->kchunk, kc = g->k - k0 < P->kchunk ? g->k - k0 : P->kchunk;
  int64_t es = (int64_t)hpu_dtype_size(g->dt);
  hpu_gemm_t gs = *g;
  gs.k = kc;
  gs.a = (const char *)g->a + k0 * g->acs * es;
  gs.b = (const char *)g->b + k0 * g->brs * es;
  if (s > 0) {
    gs.c = P->part + (s - 1) * g->m * g->n;
    gs.crs = g->n;
    gs.ccs = 1;
    gs.beta = 0.0f;
  }
  int64_t np = (g->n + NR - 1) / NR;
  int64_t u0 = np * cp / P->cparts, u1 = np * (cp + 1) / P->cparts;
  if (u0 == u1) return;
  int64_t j1 = u1 * NR < g->n ? u1 * NR : g->n;
  if (P->askt) {
    plan_t Pc = *P;
    Pc.apre = P->askt + s * ((g->m + MR - 1) / MR) * P->kp * MR;
    pack_a_f32_trows(&gs, 0, (g->m + MR - 1) / MR, (float *)Pc.apre, P->kp);
    run_block(&Pc, &gs, 0, g->m, u0 * NR, j1, scr);
    return;
  }
  run_block(P, &gs, 0, g->m, u0 * NR, j1, scr);
}

/* C[i, :] += partial_1[i, :] + ... for rows [begin, end), the partials added
 * one after another in chunk order: the same sums whatever the threads. */
ATTR_512 static void splitk_reduce(void *ctx, int64_t begin, int64_t end) {
  const plan_t *P = ctx;
  const hpu_gemm_t *g = P->g;
  int64_t m = g->m, n = g->n;
  for (int64_t i = begin; i < end; i++) {
    float *c = (float *)g->c + i * g->crs;
    for (int64_t j = 0; j < n; j += 16) {
      __mmask16 mk = hpu_mask16(n - j);
      __m512 v = _mm512_maskz_loadu_ps(mk, c + j);
      for (int64_t s = 1; s < P->nchunk; s++)
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, P->part + (s - 1) * m * n + i * n + j));
      _mm512_mask_storeu_ps(c + j, mk, v);
    }
  }
}

/* Each worker claims parts (or batches) one at a time until none is left:
 * a worker that wakes late or is preempted (the machine is shared) leaves
 * its share to the others instead of holding the product up. */
static int64_t claim(plan_t *P) { return atomic_fetch_add(&P->claims->nextpart, 1); }

static void part_range(void *ctx, int64_t begin, int64_t end) {
  (void)begin;
  (void)end;
  plan_t *P = ctx;
  const hpu_gemm_t *g = P->g;
  void *own;
  char *scr = worker_scratch(P, &own);
  int64_t total = P->split_n ? (g->n + NR - 1) / NR : (g->m + MR - 1) / MR;
  for (int64_t t = claim(P); t < P->nparts; t = claim(P)) {
    if (P->nchunk > 1) {
      splitk_unit(P, t, scr);
      continue;
    }
    int64_t u0 = total * t / P->nparts, u1 = total * (t + 1) / P->nparts;
    if (u0 == u1) continue;
    if (P->split_n) {
      int64_t j1 = u1 * NR < g->n ? u1 * NR : g->n;
      run_block(P, g, 0, g->m, u0 * NR, j1, scr);
    } else {
      int64_t i1 = u1 * MR < g->m ? u1 * MR : g->m;
      run_block(P, g, u0 * MR, i1, 0, g->n, scr);
    }
  }
  free(own);
}

static void batch_range(void *ctx, int64_t begin, int64_t end) {
  (void)begin;
  (void)end;
  plan_t *P = ctx;
  void *own;
  char *scr = worker_scratch(P, &own);
  for (int64_t bi = claim(P); bi < P->nbatch; bi = claim(P)) {
    hpu_gemm_t gb = batch_view(P->g, P->offs, bi);
    run_block(P, &gb, 0, gb.m, 0, gb.n, scr);
  }
  free(own);
}

/* Share of the threads' time doing useful work when u units go to nt parts. */
static double balance(int64_t u, int nt) { return (double)u / (double)(nt * ((u + nt - 1) / nt)); }

/* AMX ----------------------------------------------------------------------- */

/* AMX_BF16 (Sapphire Rapids and later): TDPBF16PS multiplies a 16 x 32 bf16
 * A tile by a 16-pair x 16-column B tile (the same pair layout as the
 * BF16DOT panels) into a 16 x 16 fp32 tile. On a 2-core Xeon with 2 MB L2
 * per core, a 4-tile loop of it ran several times faster than the VDPBF16PS
 * kernels above, and torch's oneDNN uses AMX there: without it our bf16
 * products ran at a fraction of torch's speed.
 *
 * Layout: C in 32 x 32 blocks (tmm0..3), A rows packed into a zero-padded
 * [32][kpad] bf16 block (tmm4, 5: rows 0..15 and 16..31), B in the [kp][32]
 * pair panels of pack_b_bf16 padded to kpad / 2 pairs (tmm6, 7: columns
 * 0..15 and 16..31, 128-byte rows); kpad = k rounded up to 32. Each block
 * goes through a 32 x 32 fp32 tile to epilogue (alpha, beta, C's dtype and
 * strides, edges). A with unit column stride has its rows copied as they
 * are, a transposed A (unit row stride) is transposed into the block
 * (amx_pack_a_t); any other A takes the kernels above. */

#define AMX_KB 32 /* k elements per A tile row */

static int amx_cpu(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
  if (!((d >> 22) & 1) || !((d >> 24) & 1)) return 0; /* AMX-BF16, AMX-TILE */
  /* Linux hands out the 8 KB tile state only on request (per process) */
  return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
}

int hpu_gemm_have_amx(void) {
  static _Atomic int have = -1;
  int h = atomic_load(&have);
  if (h < 0) {
    h = amx_cpu();
    atomic_store(&have, h);
  }
  return h && hpu_kernels_isa() >= HPU_ISA_AVX512;
}

typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} amx_cfg_t;

typedef struct {
  const hpu_gemm_t *g;
  int64_t nbatch;
  const int64_t *offs;
  int64_t parts;     /* column parts per product */
  int64_t kpad, nc;  /* padded k; columns per packed B chunk (multiple of 32) */
  char *scratch; /* nwork blocks of per bytes */
  size_t per;
  int nwork;
  _Atomic int nextw;
  _Atomic int64_t next;
} amx_plan_t;

/* Rows [i0, i0 + mr) of a transposed A (unit row stride) into the [32][kpad]
 * block: VPERMT2W pairs memory rows 2p and 2p+1 (16 rows' pairs of k
 * elements 2p, 2p+1 in a vector), and a 16 x 16 transpose of those 32-bit
 * pairs turns 16 such vectors into 16 pairs of each of 16 rows. */
ATTR_512 static void amx_pack_a_t(const hpu_gemm_t *g, int64_t i0, int64_t mr, int64_t kpad, uint16_t *ab) {
  const uint16_t *a = g->a;
  int64_t k = g->k, cs = g->acs;
  __m512i ilo = _mm512_loadu_si512(pair_lo), z = _mm512_setzero_si512();
  for (int64_t ig = 0; ig < 32; ig += 16) {
    if (ig >= mr) {
      memset(ab + ig * kpad, 0, (size_t)(16 * kpad) * 2);
      continue;
    }
    __mmask16 mk = hpu_mask16(mr - ig);
    const uint16_t *col = a + i0 + ig;
    for (int64_t q0 = 0; q0 < kpad / 2; q0 += 16) {
      __m512i r[16];
      for (int q = 0; q < 16; q++) {
        int64_t l = 2 * (q0 + q);
        __m512i x0 = l < k ? _mm512_castsi256_si512(_mm256_maskz_loadu_epi16(mk, col + l * cs)) : z;
        __m512i x1 = l + 1 < k ? _mm512_castsi256_si512(_mm256_maskz_loadu_epi16(mk, col + (l + 1) * cs)) : z;
        r[q] = _mm512_permutex2var_epi16(x0, ilo, x1);
      }
      hpu_tr16_epi32(r);
      for (int j = 0; j < 16; j++) _mm512_storeu_si512(ab + (ig + j) * kpad + 2 * q0, r[j]);
    }
  }
}

__attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
static void amx_part(const amx_plan_t *P, const hpu_gemm_t *g, int64_t j0, int64_t j1, char *scr) {
  int64_t kpad = P->kpad, kp = (g->k + 1) / 2, kq = kpad / 2;
  uint16_t *ab = (uint16_t *)scr;                          /* [32][kpad] */
  float *tile = (float *)(scr + 32 * kpad * 2);            /* [32][32] */
  uint32_t *bb = (uint32_t *)(scr + 32 * kpad * 2 + 4096); /* chunk of [kq][32] panels */
  const uint16_t *a = g->a;
  for (int64_t jc = j0; jc < j1; jc += P->nc) {
    int64_t ncur = j1 - jc < P->nc ? j1 - jc : P->nc, npan = (ncur + 31) / 32;
    for (int64_t jp = 0; jp < npan; jp++) {
      uint32_t *dst = bb + jp * kq * 32;
      int64_t cols = ncur - jp * 32 < 32 ? ncur - jp * 32 : 32;
      pack_b_bf16(g, jc + jp * 32, cols, dst);
      memset(dst + kp * 32, 0, (size_t)(kq - kp) * 32 * 4);
    }
    for (int64_t i0 = 0; i0 < g->m; i0 += 32) {
      int64_t mr = g->m - i0 < 32 ? g->m - i0 : 32;
      if (g->acs != 1 && g->k > 1) {
        amx_pack_a_t(g, i0, mr, kpad, ab);
      } else {
        for (int64_t i = 0; i < 32; i++) {
          uint16_t *row = ab + i * kpad;
          if (i < mr) {
            memcpy(row, a + (i0 + i) * g->ars, (size_t)g->k * 2);
            memset(row + g->k, 0, (size_t)(kpad - g->k) * 2);
          } else {
            memset(row, 0, (size_t)kpad * 2);
          }
        }
      }
      for (int64_t jp = 0; jp < npan; jp++) {
        const uint32_t *bp = bb + jp * kq * 32;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t kb = 0; kb < kpad; kb += AMX_KB) {
          _tile_loadd(4, ab + kb, kpad * 2);
          _tile_loadd(5, ab + 16 * kpad + kb, kpad * 2);
          _tile_loadd(6, bp + kb / 2 * 32, 128);
          _tile_loadd(7, bp + kb / 2 * 32 + 16, 128);
          _tile_dpbf16ps(0, 4, 6);
          _tile_dpbf16ps(1, 4, 7);
          _tile_dpbf16ps(2, 5, 6);
          _tile_dpbf16ps(3, 5, 7);
        }
        _tile_stored(0, tile, 128);
        _tile_stored(1, tile + 16, 128);
        _tile_stored(2, tile + 16 * 32, 128);
        _tile_stored(3, tile + 16 * 32 + 16, 128);
        int64_t nr = ncur - jp * 32 < 32 ? ncur - jp * 32 : 32;
        epilogue(g, tile, i0, jc + jp * 32, (int)mr, (int)nr);
      }
    }
  }
}

__attribute__((target("amx-tile,amx-bf16"))) static void amx_range(void *ctx, int64_t begin, int64_t end) {
  (void)begin;
  (void)end;
  amx_plan_t *P = ctx;
  const hpu_gemm_t *g = P->g;
  int64_t np = (g->n + 31) / 32;
  int w0 = atomic_fetch_add(&P->nextw, 1);
  /* More callers than scratch blocks (the pool grew since the plan was
   * made): the ones holding a block claim every product, so this one can
   * leave at once. */
  if (w0 >= P->nwork) return;
  char *scr = P->scratch + (size_t)w0 * P->per;
  amx_cfg_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int t = 0; t < 8; t++) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  _tile_loadconfig(&cfg);
  for (int64_t w = atomic_fetch_add(&P->next, 1); w < P->nbatch * P->parts; w = atomic_fetch_add(&P->next, 1)) {
    int64_t bi = w / P->parts, t = w % P->parts;
    int64_t u0 = np * t / P->parts, u1 = np * (t + 1) / P->parts;
    if (u0 == u1) continue;
    hpu_gemm_t gb = batch_view(g, P->offs, bi);
    amx_part(P, &gb, u0 * 32, u1 * 32 < g->n ? u1 * 32 : g->n, scr);
  }
  _tile_release();
}

static int amx_run(const hpu_gemm_t *g, int64_t nbatch, const int64_t *offs) {
  amx_plan_t P;
  memset(&P, 0, sizeof P);
  P.g = g;
  P.nbatch = nbatch;
  P.offs = offs;
  P.kpad = (g->k + AMX_KB - 1) / AMX_KB * AMX_KB;
  int nt = hpu_parallel_inside() ? 1 : hpu_get_num_threads();
  if (nt < 1) nt = 1;
  int64_t np = (g->n + 31) / 32;
  /* whole products per thread when there are enough of them, else columns */
  P.parts = nbatch >= 2 * nt ? 1 : (np < nt ? np : nt);
  if (P.parts < 1) P.parts = 1;
  /* packed B chunks of ~1 MB (half of this Xeon's 2 MB L2) */
  int64_t pan = P.kpad / 2 * 128;
  P.nc = (1024 * 1024) / pan * 32;
  if (P.nc < 32) P.nc = 32;
  int64_t cap = (np + P.parts - 1) / P.parts * 32;
  if (P.nc > cap) P.nc = cap;
  double flops = 2.0 * (double)g->m * (double)g->n * (double)g->k * (double)nbatch;
  int64_t work = nbatch * P.parts;
  int serial = nt == 1 || flops < 2e6 || work == 1;
  P.nwork = serial ? 1 : (work < nt ? (int)work : nt);
  P.per = ((size_t)(32 * P.kpad * 2 + 4096) + (size_t)(P.nc / 32) * (size_t)(P.kpad / 2) * 128 + 63) / 64 * 64;
  int slot;
  P.scratch = hpu_scratch_get(P.per * (size_t)P.nwork, &slot);
  if (!P.scratch) return -1; /* nothing written */
  if (serial) amx_range(&P, 0, 1);
  else hpu_parallel_for(P.nwork, 1, amx_range, &P);
  hpu_scratch_put(P.scratch, slot);
  return 0;
}

/* Split-K: k chunks for a small C against a long k (weight gradients, e.g.
 * [2048 x 256]^T @ [2048 x 256]). Cut by columns, each of 2 threads packs
 * and streams all of A (2 MB there) from L3 against a B panel it uses once;
 * with k halved each thread owns half of A and half of B (1 MB each, in its
 * 2 MB L2) and C is written twice. The count depends on the shape only, so
 * a product rounds the same on any number of threads (the chunks' sums
 * are added in chunk order). fp32 C only: a bf16 C would be rounded twice. */
static int64_t splitk_chunks(const hpu_gemm_t *g, int kernel, int64_t nbatch) {
  if (nbatch != 1 || kernel != HPU_GEMM_F32FMA || g->dt != HPU_FLOAT32 || g->ccs != 1) return 1;
  int64_t mn = g->m > g->n ? g->m : g->n;
  if (g->k < 512 || g->k < 4 * mn || g->m * g->n > 512 * 512) return 1;
  return 2;
}

/* Can this CPU (under the ISA cap) run the kernel? A caller passing one
 * that it cannot run gets -1 and falls back, instead of SIGILL. */
static int runnable(int kernel) {
  switch (kernel) {
    case HPU_GEMM_F32FMA: return hpu_kernels_isa() >= HPU_ISA_AVX512;
    case HPU_GEMM_BF16DOT: return hpu_gemm_have_bf16dot();
    case HPU_GEMM_AMXBF16: return hpu_gemm_have_amx();
    case HPU_GEMM_F32AVX2: return hpu_kernels_isa() >= HPU_ISA_AVX2;
    default: return 0;
  }
}

int hpu_gemm_run_batched(const hpu_gemm_t *g, int kernel, int64_t nbatch, const int64_t *offs) {
  if (!runnable(kernel)) return -1;
  if (kernel == HPU_GEMM_AMXBF16) return amx_run(g, nbatch, offs);
  if (kernel == HPU_GEMM_F32AVX2) return hpu_gemm_avx2_run(g, nbatch, offs);
  plan_t P;
  plan_claims_t claims = {0, 0};
  memset(&P, 0, sizeof P);
  P.claims = &claims;
  P.g = g;
  P.kernel = kernel;
  P.nchunk = splitk_chunks(g, kernel, nbatch);
  P.kchunk = (g->k + P.nchunk - 1) / P.nchunk;
  P.cparts = 1;
  P.kp = kernel == HPU_GEMM_BF16DOT ? (g->k + 1) / 2 : P.kchunk; /* no split-K in bf16 */
  P.nbatch = nbatch;
  P.offs = offs;
  hpu_dtype_t kdt = kernel == HPU_GEMM_BF16DOT ? HPU_BFLOAT16 : HPU_FLOAT32;
  P.adirect = g->dt == kdt && g->acs == 1 && g->k > 1;
  int nt = hpu_parallel_inside() ? 1 : hpu_get_num_threads();
  if (nt < 1) nt = 1;
  double flops = 2.0 * (double)g->m * (double)g->n * (double)g->k;
  int64_t mp = (g->m + MR - 1) / MR, np = (g->n + NR - 1) / NR;
  /* B block: up to ~512 KB packed (half of a Zen 4/5 L2), so that it stays
   * in L2 while every MR-row panel of A passes over it. */
  int64_t pan = P.kp * NR * 4;
  int64_t nc = (512 * 1024) / pan * NR;
  if (nc < NR) nc = NR;
  int64_t ncap = np * NR;
  /* Batches run whole on one thread when there are enough of them. */
  int by_batch = nbatch > 1 && nt > 1 && (nbatch % nt == 0 || nbatch >= 4 * nt);
  int serial = nt == 1 || (flops * (double)nbatch < 2e6);
  int64_t parts = 1;
  int atwice = 0; /* A in place though read twice (below) */
  if (!serial && !by_batch) {
    double bn = balance(np, nt), bm = balance(mp, nt);
    /* columns preferred: each part packs only its own B columns */
    P.split_n = bn >= bm - 0.05 && np >= nt;
    /* Up to 4 parts per thread, claimed dynamically; row parts of >= 4
     * panels, as each packs all of B again. */
    int64_t most = 4 * (int64_t)nt;
    /* fp32 with a tall C (m >= 4n, BERT's [2048 x 256] outputs): rows, 2
     * parts per thread. Every column part passes over all of A, and two
     * threads streaming A from L3 at once ran at half speed on the Xeon
     * (Granite Rapids-class VM, 2 cores), while each row part reads its A
     * rows once and packs a B that is small here. Measured in one process
     * on [2048x256]@[256x256] and [2048x1024]@[1024x256]: by columns
     * about 0.7 of MKL's speed, by rows 0.9-0.96; square and wide shapes
     * gained nothing and keep columns. */
    if (kernel == HPU_GEMM_F32FMA && g->m >= 4 * g->n && mp >= 8 * (int64_t)nt) {
      P.split_n = 0;
      most = 2 * (int64_t)nt;
    }
    if (P.split_n) parts = np < most ? np : most;
    else parts = mp / 4 < most ? mp / 4 : most;
    if (parts < nt) parts = P.split_n ? (np < nt ? np : nt) : (mp < nt ? mp : nt);
    if (parts < 1) parts = 1;
    if (P.split_n) ncap = (np + parts - 1) / parts * NR;
    /* bf16, A larger than L2 that could be read in place: one column part per
     * thread when that reads A only twice in all (2 threads, one B block
     * each), so that A is read in place instead of packed first (packing
     * a row-major A took ~12% of [2048x1024] @ [1024x256], perf). That
     * shape ran about 1.7x faster with it (B transposed too), and
     * [2048x256] @ [256x1024] 5% faster; the dynamic claiming of 4 parts
     * per thread is given up only here. */
    double asrc = (double)g->m * (double)g->k * (double)hpu_dtype_size(g->dt);
    if (kernel == HPU_GEMM_BF16DOT && P.split_n && P.adirect && asrc > 512.0 * 1024 && parts > nt) {
      int64_t cap1 = (np + nt - 1) / nt * NR, nc1 = nc < cap1 ? nc : cap1;
      if ((int64_t)nt * ((cap1 + nc1 - 1) / nc1) <= 2) {
        parts = nt;
        ncap = cap1;
        atwice = 1;
      }
    }
  }
  if (P.nchunk > 1) {
    /* B blocks of up to 1 MB: a chunk's A and B (1 MB each at [256 x 1024]
     * @ [1024 x 256]) then take one B block, so that A is read in place
     * (or packed) once, in half of the 2 MB L2 of the Xeon, where 1 MB
     * blocks ran about 7% faster than 512 KB ones. */
    nc = (1024 * 1024) / pan * NR;
    if (nc < NR) nc = NR;
    /* each chunk by columns when there are more threads than chunks */
    P.split_n = 1;
    P.cparts = serial || nt <= P.nchunk ? 1 : nt / P.nchunk;
    if (P.cparts > np) P.cparts = np;
    parts = P.nchunk * P.cparts;
    ncap = (np + P.cparts - 1) / P.cparts * NR;
  }
  if (nc > ncap) nc = ncap;
  P.nc = nc;
  /* Passes over A: every column part reads all of it, once per B block.
   * A in place only while it stays in L2 or is read once: rows re-read from
   * L3 come as 12 short strided streams the prefetchers do not follow, and
   * a packed panel is one contiguous stream. */
  int64_t cols = P.split_n ? ncap : g->n;
  int64_t apasses = (P.split_n ? parts : 1) * ((cols + nc - 1) / nc);
  double abytes_src = (double)g->m * (double)P.kchunk * (double)hpu_dtype_size(g->dt);
  if (apasses > (atwice ? 2 : 1) && abytes_src > 512.0 * 1024) P.adirect = 0;
  P.nparts = parts;
  size_t abytes = ((size_t)P.kp * MR * 4 + 63) / 64 * 64;
  size_t bbytes = ((size_t)(nc / NR) * (size_t)pan + 63) / 64 * 64;
  P.boff = abytes;
  P.toff = abytes + bbytes;
  P.accoff = P.toff + MR * NR * 4;
  P.per = P.accoff + (size_t)(nc / NR) * MR * NR * 4;
  /* k blocks of <= 192 steps: a 12 x 192 A block (9 KB) and a 192 x 32 B
   * block (24 KB) share the 48 KB L1. */
  int64_t nkb = (P.kp + 191) / 192;
  P.kc = (P.kp + nkb - 1) / nkb;
  P.nwork = serial ? 1 : nt;
  /* A packed once per product when it would otherwise be packed again for
   * every part and B block (2048^2 bf16: 16 passes), unless it is small
   * enough that the extra parallel region would cost more. */
  int aslot = -1;
  if (!by_batch && P.nchunk == 1 && !P.adirect && apasses > 1 && abytes_src >= 256.0 * 1024) {
    P.apanels = mp;
    P.apre = hpu_scratch_get((size_t)mp * (size_t)P.kp * MR * 4, &aslot);
    if (!P.apre) return -1;
  }
  int slot, pslot = -1;
  P.scratch = hpu_scratch_get(P.per * (size_t)P.nwork, &slot);
  if (!P.scratch) {
    if (P.apre) hpu_scratch_put(P.apre, aslot);
    return -1;
  }
  if (P.nchunk > 1) {
    P.part = hpu_scratch_get((size_t)(P.nchunk - 1) * (size_t)(g->m * g->n) * 4, &pslot);
    if (!P.part) {
      hpu_scratch_put(P.scratch, slot);
      return -1;
    }
    /* a transposed A, when each chunk is one part: packed whole per chunk */
    int tslot = -1;
    if (g->ars == 1 && g->acs != 1 && P.cparts == 1) {
      P.askt = hpu_scratch_get((size_t)P.nchunk * (size_t)mp * (size_t)P.kp * MR * 4, &tslot);
      if (!P.askt) {
        hpu_scratch_put(P.part, pslot);
        hpu_scratch_put(P.scratch, slot);
        return -1;
      }
    }
    P.nparts = parts;
    if (serial) {
      for (int64_t t = 0; t < parts; t++) splitk_unit(&P, t, P.scratch);
      splitk_reduce(&P, 0, g->m);
    } else {
      atomic_store(&P.claims->next, 0);
      atomic_store(&P.claims->nextpart, 0);
      hpu_parallel_for(parts < nt ? parts : nt, 1, part_range, &P);
      /* rows of >= 16 KB of C and partials per chunk of the reduction */
      int64_t grain = (4096 + g->n - 1) / g->n;
      hpu_parallel_for(g->m, grain, splitk_reduce, &P);
    }
    if (P.askt) hpu_scratch_put(P.askt, tslot);
    hpu_scratch_put(P.part, pslot);
    hpu_scratch_put(P.scratch, slot);
    return 0;
  }
  if (serial || by_batch) {
    if (by_batch && !serial) {
      hpu_parallel_for(nt, 1, batch_range, &P);
    } else {
      for (int64_t bi = 0; bi < nbatch; bi++) {
        hpu_gemm_t gb = batch_view(g, offs, bi);
        if (P.apre) prepack_a(&P, &gb, 0, P.apanels);
        run_block(&P, &gb, 0, gb.m, 0, gb.n, P.scratch);
      }
    }
  } else {
    for (int64_t bi = 0; bi < nbatch; bi++) {
      hpu_gemm_t gb = batch_view(g, offs, bi);
      P.g = &gb;
      if (P.apre) hpu_parallel_for(P.apanels, 1, prepack_range, &P);
      atomic_store(&P.claims->next, 0);
      atomic_store(&P.claims->nextpart, 0);
      hpu_parallel_for(parts < nt ? parts : nt, 1, part_range, &P);
    }
  }
  hpu_scratch_put(P.scratch, slot);
  if (P.apre) hpu_scratch_put(P.apre, aslot);
  return 0;
}

int hpu_gemm_run(const hpu_gemm_t *g, int kernel) { return hpu_gemm_run_batched(g, kernel, 1, NULL); }

/* Tiles (gemm.h) ------------------------------------------------------------ */

int hpu_gemm_tile_kernel(hpu_dtype_t dt) {
  if (dt == HPU_BFLOAT16 && hpu_gemm_have_bf16dot()) return HPU_GEMM_BF16DOT;
  if (hpu_kernels_isa() >= HPU_ISA_AVX512) return HPU_GEMM_F32FMA;
  if (hpu_kernels_isa() >= HPU_ISA_AVX2) return HPU_GEMM_F32AVX2;
  return HPU_GEMM_NONE;
}

int64_t hpu_gemm_panel_steps(int kernel, int64_t k) { return kernel == HPU_GEMM_BF16DOT ? (k + 1) / 2 : k; }

int64_t hpu_gemm_packed_words(int kernel, int64_t k, int64_t n) {
  return (n + NR - 1) / NR * hpu_gemm_panel_steps(kernel, k) * NR;
}

void hpu_gemm_pack_b(int kernel, const hpu_gemm_t *g, uint32_t *dst) {
  if (kernel == HPU_GEMM_F32AVX2) {
    hpu_gemm_avx2_pack_b(g, (float *)dst);
    return;
  }
  int64_t kp = hpu_gemm_panel_steps(kernel, g->k);
  for (int64_t j0 = 0; j0 < g->n; j0 += NR) {
    int64_t cols = g->n - j0 < NR ? g->n - j0 : NR;
    uint32_t *d = dst + j0 / NR * kp * NR;
    if (kernel == HPU_GEMM_BF16DOT) pack_b_bf16(g, j0, cols, d);
    else pack_b_f32(g, j0, cols, (float *)d);
  }
}

/* The finish of a tile call's blocks: straight to its float32 C, whole k. */
static fin_t tile_fin(const hpu_gemm_t *g, float *tile) {
  fin_t f;
  memset(&f, 0, sizeof f);
  f.g = g;
  f.es = 4;
  f.tile = tile;
  f.first = f.last = 1;
  return f;
}

/* Column panels outside, row blocks inside: a B panel (k steps x 32) stays
 * in L1 while the rows of A pass over it; k is not blocked (the callers'
 * k is a head dimension or a key block, a few hundred at most). */
void hpu_gemm_tile(int kernel, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda, const uint32_t *bp,
                   int64_t pstride, float *c, int64_t ldc, float alpha, float beta) {
  if (kernel == HPU_GEMM_F32AVX2) {
    hpu_gemm_avx2_tile(m, n, k, a, lda, (const float *)bp, pstride, c, ldc, alpha, beta);
    return;
  }
  hpu_gemm_t g = {m, n, k, a, lda, 1, NULL, 0, 0, c, ldc, 1, HPU_FLOAT32, alpha, beta};
  float tile[MR * NR];
  fin_t f = tile_fin(&g, tile);
  int bf = kernel == HPU_GEMM_BF16DOT;
  int64_t es = bf ? 2 : 4;
  for (int64_t j0 = 0; j0 < n; j0 += NR) {
    const uint32_t *b = bp + j0 / NR * pstride;
    f.j0 = j0;
    f.nr = (int)(n - j0 < NR ? n - j0 : NR);
    for (int64_t i0 = 0; i0 < m; i0 += MR) {
      int64_t mr = m - i0 < MR ? m - i0 : MR;
      const char *arow = (const char *)a + i0 * lda * es;
      f.i0 = i0;
      f.mr = (int)mr;
      if (bf) ukr_bf16_direct[mr](k, (const uint16_t *)arow, lda, b, &f);
      else ukr_f32_direct[mr](k, (const float *)arow, lda, (const float *)b, &f);
    }
  }
}

void hpu_gemm_pack_a_rows(int64_t m, int64_t k, const float *a, int64_t lda, float *dst) {
  hpu_gemm_t g = {m, 0, k, a, lda, 1, NULL, 0, 0, NULL, 0, 1, HPU_FLOAT32, 1.0f, 0.0f};
  for (int64_t i0 = 0; i0 < m; i0 += MR) pack_a_f32(&g, i0, m - i0 < MR ? m - i0 : MR, dst + i0 / MR * k * MR);
}

void hpu_gemm_tile_rows(int64_t m, int64_t n, int64_t k, const float *ap, int64_t astride, const float *b,
                        const int32_t *boff, float *c, int64_t ldc, float alpha, float beta) {
  hpu_gemm_t g = {m, n, k, ap, 0, 1, NULL, 0, 0, c, ldc, 1, HPU_FLOAT32, alpha, beta};
  float tile[MR * NR];
  fin_t f = tile_fin(&g, tile);
  for (int64_t j0 = 0; j0 < n; j0 += NR) {
    f.j0 = j0;
    f.nr = (int)(n - j0 < NR ? n - j0 : NR);
    for (int64_t i0 = 0; i0 < m; i0 += MR) {
      int64_t mr = m - i0 < MR ? m - i0 : MR;
      f.i0 = i0;
      f.mr = (int)mr;
      ukr_f32_rows[mr](k, ap + i0 / MR * astride, b + j0, boff, &f);
    }
  }
}

#else /* no x86 clones: matmul.c's path for everything */

int hpu_gemm_have_bf16dot(void) { return 0; }
int hpu_gemm_have_amx(void) { return 0; }
int hpu_gemm_choose(const hpu_gemm_t *g) {
  (void)g;
  return HPU_GEMM_NONE;
}
int hpu_gemm_run(const hpu_gemm_t *g, int kernel) {
  (void)g;
  (void)kernel;
  return -1;
}
int hpu_gemm_run_batched(const hpu_gemm_t *g, int kernel, int64_t nbatch, const int64_t *offs) {
  (void)g;
  (void)kernel;
  (void)nbatch;
  (void)offs;
  return -1;
}

int hpu_gemm_tile_kernel(hpu_dtype_t dt) {
  (void)dt;
  return HPU_GEMM_NONE;
}
int64_t hpu_gemm_panel_steps(int kernel, int64_t k) {
  (void)kernel;
  return k;
}
int64_t hpu_gemm_packed_words(int kernel, int64_t k, int64_t n) {
  (void)kernel;
  return k * n;
}
void hpu_gemm_pack_b(int kernel, const hpu_gemm_t *g, uint32_t *dst) {
  (void)kernel;
  (void)g;
  (void)dst;
}
void hpu_gemm_tile(int kernel, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda, const uint32_t *bp,
                   int64_t pstride, float *c, int64_t ldc, float alpha, float beta) {
  (void)kernel, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)bp, (void)pstride, (void)c, (void)ldc;
  (void)alpha, (void)beta;
}
void hpu_gemm_pack_a_rows(int64_t m, int64_t k, const float *a, int64_t lda, float *dst) {
  (void)m, (void)k, (void)a, (void)lda, (void)dst;
}
void hpu_gemm_tile_rows(int64_t m, int64_t n, int64_t k, const float *ap, int64_t astride, const float *b,
                        const int32_t *boff, float *c, int64_t ldc, float alpha, float beta) {
  (void)m, (void)n, (void)k, (void)ap, (void)astride, (void)b, (void)boff, (void)c, (void)ldc, (void)alpha;
  (void)beta;
}

#endif
