/* Our own GEMM microkernels (the "MME" side of the kernel library), used by
 * HPU_OP_MATMUL (matmul.c) where they beat OpenBLAS:
 *   C[m, n] = alpha * A[m, k] @ B[k, n] + beta * C     (beta == 0: C not read)
 * A, B, C are strided 2-d views of one dtype (float32, bfloat16 or float16);
 * any strides, so transposed operands are read in place by the packing. */
#ifndef HPU_KERNELS_GEMM_H
#define HPU_KERNELS_GEMM_H

#include <stdint.h>

#include "hpu/dtype.h"

typedef struct {
  int64_t m, n, k;
  const void *a;
  int64_t ars, acs; /* strides in elements */
  const void *b;
  int64_t brs, bcs;
  void *c;
  int64_t crs, ccs;
  hpu_dtype_t dt; /* of a, b and c */
  float alpha, beta;
} hpu_gemm_t;

/* Kernels. */
enum {
  HPU_GEMM_AUTO = -1,
  HPU_GEMM_NONE = 0,     /* leave it to matmul.c's BLAS / convert path */
  HPU_GEMM_F32FMA = 1,   /* AVX-512 FMA on fp32 panels (packing widens bf16/fp16) */
  HPU_GEMM_BF16DOT = 2,  /* AVX512_BF16 vdpbf16ps on bf16 pair panels, fp32 accumulation */
  HPU_GEMM_AMXBF16 = 3,  /* AMX tiles (TDPBF16PS), fp32 accumulation; A with a unit stride */
  HPU_GEMM_F32AVX2 = 4,  /* AVX2 FMA, float32 only (gemm_avx2.c): CPUs without AVX-512 */
};

/* Which kernel hpu_gemm would use for g (HPU_GEMM_NONE: caller's path). */
int hpu_gemm_choose(const hpu_gemm_t *g);

/* Runs g with kernel `kernel` (from hpu_gemm_choose); multithreaded over the
 * kernel pool. Returns 0 on success, -1 if out of host memory or if this CPU
 * cannot run that kernel (nothing written either way). */
int hpu_gemm_run(const hpu_gemm_t *g, int kernel);

/* nbatch products of g's shape: batch b reads a + offs[3b], b + offs[3b + 1]
 * and writes c + offs[3b + 2] (byte offsets; offs may be NULL when nbatch is
 * 1). Many batches run one whole product per thread. Returns 0, or -1 as
 * hpu_gemm_run (nothing written). */
int hpu_gemm_run_batched(const hpu_gemm_t *g, int kernel, int64_t nbatch, const int64_t *offs);

/* gemm_avx2.c: is g (float32) faster there than in OpenBLAS? And the run,
 * as hpu_gemm_run_batched (-1: not float32, or no AVX2; nothing written). */
int hpu_gemm_avx2_suits(const hpu_gemm_t *g);
int hpu_gemm_avx2_run(const hpu_gemm_t *g, int64_t nbatch, const int64_t *offs);
/* ... and its tiles (F32AVX2 below): hpu_gemm_pack_b and hpu_gemm_tile for
 * that kernel. */
void hpu_gemm_avx2_pack_b(const hpu_gemm_t *g, float *dst);
void hpu_gemm_avx2_tile(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *bp,
                        int64_t pstride, float *c, int64_t ldc, float alpha, float beta);

/* Testing: force a kernel for every call (HPU_GEMM_AUTO restores the
 * measured rule); a kernel the CPU lacks is ignored. Returns the old value. */
int hpu_gemm_force(int kernel);

/* Tiles: many small serial products against one B packed once (the fused
 * attention's key and value blocks). The kernel for operands of dtype dt:
 * BF16DOT for bfloat16 where the CPU has it, F32FMA (float32 A, B widened
 * by the packing) on AVX-512, F32AVX2 (the same, in gemm_avx2.c) on AVX2,
 * else HPU_GEMM_NONE (no tile path). */
int hpu_gemm_tile_kernel(hpu_dtype_t dt);

/* Words (4 bytes) of g's B [k, n] packed for `kernel`: panels of
 * HPU_GEMM_PANEL columns, panel p at p * hpu_gemm_panel_steps(kernel, k) *
 * HPU_GEMM_PANEL words; a step is one k (F32FMA, F32AVX2) or a pair of k (BF16DOT,
 * odd k padded with 0), so the steps from k0 (even for BF16DOT) start
 * k0 / (BF16DOT ? 2 : 1) * HPU_GEMM_PANEL words into each panel. */
#define HPU_GEMM_PANEL 32
int64_t hpu_gemm_panel_steps(int kernel, int64_t k);
int64_t hpu_gemm_packed_words(int kernel, int64_t k, int64_t n);
void hpu_gemm_pack_b(int kernel, const hpu_gemm_t *g, uint32_t *dst);

/* C = alpha * A @ B + beta * C on the calling thread. A: m rows `lda`
 * elements apart, unit column stride, in the kernel's dtype (float32, or
 * bfloat16 for BF16DOT); B: n columns of a packed B, the first panel at bp,
 * panels pstride words apart, k steps from bp on; C: float32, row-major,
 * ldc. k is in elements of A's rows. */
void hpu_gemm_tile(int kernel, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda, const uint32_t *bp,
                   int64_t pstride, float *c, int64_t ldc, float alpha, float beta);

/* hpu_gemm_tile on F32FMA (AVX-512) with A packed and B unpacked. A
 * [m, k] (float32 rows lda apart) packed by hpu_gemm_pack_a_rows into
 * blocks of HPU_GEMM_TILE_ROWS rows, block i at dst + i * k *
 * HPU_GEMM_TILE_ROWS, one k step of the block (its rows' elements, 0 past
 * m) after another, so the steps from k0 start k0 * HPU_GEMM_TILE_ROWS
 * floats into each block. hpu_gemm_tile_rows runs k steps of ap (blocks
 * astride floats apart); step p reads B's row p from b + boff[p] (floats),
 * its columns j0.. at b + boff[p] + j0, in groups of HPU_GEMM_PANEL: every
 * group reads all 32 floats, so each row must be readable up to n rounded
 * up to 32 (what lies past n only reaches C's columns past n, which are
 * not written). */
#define HPU_GEMM_TILE_ROWS 12
void hpu_gemm_pack_a_rows(int64_t m, int64_t k, const float *a, int64_t lda, float *dst);
void hpu_gemm_tile_rows(int64_t m, int64_t n, int64_t k, const float *ap, int64_t astride, const float *b,
                        const int32_t *boff, float *c, int64_t ldc, float alpha, float beta);

/* Does this CPU (and the ISA cap, hpu_kernels_isa) allow AVX512_BF16? */
int hpu_gemm_have_bf16dot(void);

/* ... and AMX_BF16 (CPU, and the kernel granting this process the tile state)? */
int hpu_gemm_have_amx(void);

#endif
