/* Matrix-vector products, the m == 1 case of HPU_OP_MATMUL:
 *   C[1, n] = alpha * A[1, k] @ B[k, n] + beta * C    (beta == 0: C not read)
 * Every matmul of a decode step in text generation has this shape (one new
 * token, batch 1), as do the attention products of that token against the
 * KV cache. A GEMM routine packs all of B for its single row of A, which costs
 * more than the product itself (it was 60% of a replayed decode step in
 * OpenBLAS's sgemm copy routines); here B is read once, in place, in either
 * of its two dense layouts:
 *   rows: B[kk, j] at kk*brs + j (a Linear stored [in, out], GPT-2's Conv1D,
 *         probabilities @ V): accumulate a[kk] * B[kk, j-block] over kk;
 *   cols: B[kk, j] at j*bcs + kk (nn.Linear's weight.T, Q @ K^T): a dot
 *         product of A with each contiguous column.
 * fp32 accumulation for every dtype, one rounding to C's dtype at the end (as
 * PyTorch's CPU). Parallel over (batch, block of columns) on the pool.
 * AVX-512 and AVX2 forms; without either, the GEMM path (-1). */
#include "kernels/gemv.h"

#include <math.h>
#include <stdlib.h>

#include "hpu/parallel.h"
#include "kernels/cvt.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/load16.h"
#include "runtime/schedule_policy.h" /* HPU_GRAIN */

#if HPU_HAVE_ISA_CLONES
#include <immintrin.h>

/* Columns per task in the rows layout: 8 zmm accumulators, enough
 * independent FMA chains to hide the FMA latency. */
#define ROW_BLOCK 128
/* Columns per task in the cols layout (4 dot products at a time). */
#define COL_BLOCK 16

/* C[j0, j1) of one batch: one form per layout and ISA. */
typedef void (*block_fn)(const hpu_gemm_t *g, const float *a, const char *b, char *c, int64_t j0,
                         int64_t j1);

typedef struct {
  const hpu_gemm_t *g;
  const float *a;       /* A widened to fp32, nbatch rows of k */
  const int64_t *offs;  /* byte offsets per batch (3 each) or NULL */
  int64_t blocks;       /* column blocks per batch */
  block_fn block;       /* by layout and ISA, chosen once */
  int64_t width;        /* columns per task (by layout and ISA) */
} gemv_job_t;

static void store_result(const hpu_gemm_t *g, char *c, int64_t j, float acc) {
  int64_t es = (int64_t)hpu_dtype_size(g->dt);
  char *p = c + j * g->ccs * es;
  float v = g->alpha * acc;
  if (g->beta != 0) v += g->beta * hpu_load_f32(p, g->dt);
  hpu_store_f32(p, g->dt, v);
}

/* C[j0, j1) of one batch, B rows contiguous. */
HPU_ATTR_avx512 static void rows_block(const hpu_gemm_t *g, const float *a, const char *b, char *c,
                                       int64_t j0, int64_t j1) {
  int64_t es = (int64_t)hpu_dtype_size(g->dt);
  int nv = (int)((j1 - j0 + 15) / 16);
  __m512 acc[ROW_BLOCK / 16];
  __mmask16 mk[ROW_BLOCK / 16];
  for (int v = 0; v < nv; v++) {
    int64_t left = j1 - j0 - 16 * v;
    mk[v] = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
    acc[v] = _mm512_setzero_ps();
  }
  const char *row = b + j0 * es;
  if (nv == ROW_BLOCK / 16 && mk[nv - 1] == 0xffff) { /* the common full block, unrolled */
    for (int64_t kk = 0; kk < g->k; kk++, row += g->brs * es) {
      __m512 x = _mm512_set1_ps(a[kk]);
      for (int v = 0; v < ROW_BLOCK / 16; v++)
        acc[v] = _mm512_fmadd_ps(x, hpu_load16_f32(row + 16 * v * es, g->dt, 0xffff), acc[v]);
    }
  } else {
    for (int64_t kk = 0; kk < g->k; kk++, row += g->brs * es) {
      __m512 x = _mm512_set1_ps(a[kk]);
      for (int v = 0; v < nv; v++)
        acc[v] = _mm512_fmadd_ps(x, hpu_load16_f32(row + 16 * v * es, g->dt, mk[v]), acc[v]);
    }
  }
  float out[ROW_BLOCK];
  for (int v = 0; v < nv; v++) _mm512_storeu_ps(out + 16 * v, acc[v]);
  for (int64_t j = j0; j < j1; j++) store_result(g, c, j, out[j - j0]);
}

/* sum over kk of a[kk] * col[kk], col of dtype dt, contiguous. */
HPU_ATTR_avx512 static __m512 dot_acc(const float *a, const char *col, hpu_dtype_t dt, int64_t k,
                                      int64_t es) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t kk = 0;
  for (; kk + 32 <= k; kk += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + kk), hpu_load16_f32(col + kk * es, dt, 0xffff), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + kk + 16), hpu_load16_f32(col + (kk + 16) * es, dt, 0xffff), s1);
  }
  for (; kk < k; kk += 16) {
    int64_t left = k - kk;
    __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
    s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + kk), hpu_load16_f32(col + kk * es, dt, m), s0);
  }
  return _mm512_add_ps(s0, s1);
}

/* C[j0, j1) of one batch, B columns contiguous. */
HPU_ATTR_avx512 static void cols_block(const hpu_gemm_t *g, const float *a, const char *b, char *c,
                                       int64_t j0, int64_t j1) {
  int64_t es = (int64_t)hpu_dtype_size(g->dt);
  for (int64_t j = j0; j < j1; j++)
    store_result(g, c, j, _mm512_reduce_add_ps(dot_acc(a, b + j * g->bcs * es, g->dt, g->k, es)));
}

/* AVX2 (CPUs without AVX-512): the same two layouts on 8-lane vectors.
 * Rows: 64 columns per task (8 ymm accumulators), each column still summed
 * over kk in order with one FMA per step, so its bits are those of the
 * AVX-512 form; columns past a partial block's last full vector take the
 * same FMA chain in scalar code. Cols: two 8-lane partial sums per column. */
#define ATTR_AVX2_F16C __attribute__((target("avx2,fma,f16c")))
#define ROW_BLOCK_AVX2 64

ATTR_AVX2_F16C static inline __m256 load8_f32(const char *p, hpu_dtype_t dt) {
  if (dt == HPU_FLOAT32) return _mm256_loadu_ps((const float *)p);
  __m128i h = _mm_loadu_si128((const __m128i *)p);
  if (dt == HPU_FLOAT16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

ATTR_AVX2_F16C static void rows_block_avx2(const hpu_gemm_t *g, const float *a, const char *b, char *c,
                                           int64_t j0, int64_t j1) {
  int64_t es = (int64_t)hpu_dtype_size(g->dt), rs = g->brs * es;
  int nv = (int)((j1 - j0) / 8); /* full vectors */
  const char *row = b + j0 * es;
  float out[ROW_BLOCK_AVX2];
  if (nv == ROW_BLOCK_AVX2 / 8) { /* the common full block, unrolled */
    __m256 acc[ROW_BLOCK_AVX2 / 8];
    for (int v = 0; v < ROW_BLOCK_AVX2 / 8; v++) acc[v] = _mm256_setzero_ps();
    for (int64_t kk = 0; kk < g->k; kk++, row += rs) {
      __m256 x = _mm256_set1_ps(a[kk]);
      for (int v = 0; v < ROW_BLOCK_AVX2 / 8; v++)
        acc[v] = _mm256_fmadd_ps(x, load8_f32(row + 8 * v * es, g->dt), acc[v]);
    }
    for (int v = 0; v < ROW_BLOCK_AVX2 / 8; v++) _mm256_storeu_ps(out + 8 * v, acc[v]);
  } else {
    for (int v = 0; v < nv; v++) {
      __m256 acc = _mm256_setzero_ps();
      const char *r = row + 8 * v * es;
      for (int64_t kk = 0; kk < g->k; kk++, r += rs) acc = _mm256_fmadd_ps(_mm256_set1_ps(a[kk]), load8_f32(r, g->dt), acc);
      _mm256_storeu_ps(out + 8 * v, acc);
    }
    for (int64_t j = j0 + 8 * nv; j < j1; j++) {
      float acc = 0;
      const char *r = b + j * es;
      for (int64_t kk = 0; kk < g->k; kk++, r += rs) acc = fmaf(a[kk], hpu_load_f32(r, g->dt), acc);
      out[j - j0] = acc;
    }
  }
  for (int64_t j = j0; j < j1; j++) store_result(g, c, j, out[j - j0]);
}

ATTR_AVX2_F16C static void cols_block_avx2(const hpu_gemm_t *g, const float *a, const char *b, char *c,
                                           int64_t j0, int64_t j1) {
  int64_t es = (int64_t)hpu_dtype_size(g->dt), k = g->k;
  for (int64_t j = j0; j < j1; j++) {
    const char *col = b + j * g->bcs * es;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t kk = 0;
    for (; kk + 16 <= k; kk += 16) {
      s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + kk), load8_f32(col + kk * es, g->dt), s0);
      s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + kk + 8), load8_f32(col + (kk + 8) * es, g->dt), s1);
    }
    __m256 s = _mm256_add_ps(s0, s1);
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    float acc = _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
    for (; kk < k; kk++) acc = fmaf(a[kk], hpu_load_f32(col + kk * es, g->dt), acc);
    store_result(g, c, j, acc);
  }
}

static void run_tasks(void *ctx, int64_t begin, int64_t end) {
  const gemv_job_t *job = ctx;
  const hpu_gemm_t *g = job->g;
  int64_t width = job->width;
  for (int64_t t = begin; t < end; t++) {
    int64_t bi = t / job->blocks, j0 = (t % job->blocks) * width;
    int64_t j1 = j0 + width < g->n ? j0 + width : g->n;
    const char *b = (const char *)g->b + (job->offs ? job->offs[3 * bi + 1] : 0);
    char *c = (char *)g->c + (job->offs ? job->offs[3 * bi + 2] : 0);
    const float *a = job->a + bi * g->k;
    job->block(g, a, b, c, j0, j1);
  }
}

int hpu_gemv_run(const hpu_gemm_t *g, int64_t nbatch, const int64_t *offs) {
  if (g->m != 1 || g->n <= 0 || g->k <= 0 || nbatch <= 0) return -1;
  if (hpu_kernels_isa() < HPU_ISA_AVX2) return -1;
  if (g->dt != HPU_FLOAT32 && g->dt != HPU_BFLOAT16 && g->dt != HPU_FLOAT16) return -1;
  int cols_layout;
  if (g->bcs == 1 || g->n == 1) cols_layout = 0;
  else if (g->brs == 1 || g->k == 1) cols_layout = 1;
  else return -1; /* neither dense layout: the GEMM reads any strides */
  if (nbatch > 1 && !offs) return -1;
  float *a = malloc((size_t)(nbatch * g->k) * sizeof *a);
  if (!a) return -1;
  int64_t es = (int64_t)hpu_dtype_size(g->dt);
  for (int64_t bi = 0; bi < nbatch; bi++) {
    const char *src = (const char *)g->a + (offs ? offs[3 * bi] : 0);
    for (int64_t kk = 0; kk < g->k; kk++) a[bi * g->k + kk] = hpu_load_f32(src + kk * g->acs * es, g->dt);
  }
  int avx512 = hpu_kernels_isa() >= HPU_ISA_AVX512;
  block_fn block = cols_layout ? (avx512 ? cols_block : cols_block_avx2)
                               : (avx512 ? rows_block : rows_block_avx2);
  int64_t width = cols_layout ? COL_BLOCK : avx512 ? ROW_BLOCK : ROW_BLOCK_AVX2;
  gemv_job_t job = {g, a, offs, 0, block, width};
  job.blocks = (g->n + width - 1) / width;
  /* About 32K multiply-adds per chunk: below that a hand-off to the pool
   * costs more than it saves. */
  int64_t per_task = width * g->k;
  int64_t grain = per_task >= HPU_GRAIN ? 1 : (HPU_GRAIN + per_task - 1) / per_task;
  hpu_parallel_for(nbatch * job.blocks, grain, run_tasks, &job);
  free(a);
  return 0;
}

#else

int hpu_gemv_run(const hpu_gemm_t *g, int64_t nbatch, const int64_t *offs) {
  (void)g;
  (void)nbatch;
  (void)offs;
  return -1;
}

#endif
