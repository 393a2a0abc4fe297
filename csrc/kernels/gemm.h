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

/* Testing: force a kernel for every call (HPU_GEMM_AUTO restores the
 * measured rule); a kernel the CPU lacks is ignored. Returns the old value. */
int hpu_gemm_force(int kernel);

/* Does this CPU (and the ISA cap, hpu_kernels_isa) allow AVX512_BF16? */
int hpu_gemm_have_bf16dot(void);

/* ... and AMX_BF16 (CPU, and the kernel granting this process the tile state)? */
int hpu_gemm_have_amx(void);

#endif
