/* HPU_OP_MATMUL: out[..., m, n] = beta * in2 + alpha * in0[..., m, k] @ in1[..., k, n]
 * with broadcast batch dims and arbitrary strides.
 *  - float32 / float64: OpenBLAS sgemm / dgemm on the operands in place
 *    (CblasTrans when the operand is stored transposed), copies only for
 *    layouts BLAS cannot describe;
 *  - where measured faster (see gemm.c for the rule): our own packed AVX-512
 *    microkernels -- bf16 with vdpbf16ps, fp16 and bf16 without AVX512_BF16
 *    widened while packing -- reading any strides in place; without
 *    AVX-512, float32 products with k <= 512 on gemm_avx2.c's kernel;
 *  - otherwise bfloat16 / float16: operands widened to float32, sgemm, result
 *    rounded once (fp32 accumulation, as PyTorch's CPU);
 *  - integer dtypes: a plain loop accumulating in int64 with wrap-around.
 * in2 (optional) is first copied into out (broadcast and cast), then the
 * GEMM accumulates with beta; beta == 0 ignores in2 entirely (NaNs in it do
 * not propagate), as PyTorch does. in2 may alias out exactly (addmm_). */
#include <cblas.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/device.h"
#include "kernels/cvt.h"
#include "kernels/gemm.h"
#include "kernels/gemv.h"
#include "kernels/kernels.h"

/* A 2-d view: element (i, j) at base + i*rs + j*cs (strides in elements). */
typedef struct {
  char *base;
  int64_t rows, cols, rs, cs;
} mat_t;

/* OpenBLAS runs its own threads: keep their number at our pool's size. */
static void sync_blas_threads(void) {
  static _Atomic int current = 0;
  int n = hpu_get_num_threads();
  if (n < 1) n = 1;
  if (atomic_load_explicit(&current, memory_order_relaxed) != n) {
    openblas_set_num_threads(n);
    atomic_store_explicit(&current, n, memory_order_relaxed);
  }
}

/* Can BLAS (row-major) read this matrix as is? Sets trans and ld. */
static int blas_layout(const mat_t *m, int *trans, int64_t *ld) {
  int64_t rs = m->rs, cs = m->cs;
  if (m->rows == 1) rs = m->cols > 0 ? m->cols : 1; /* stride of a size-1 dim is free */
  if (m->cols == 1) cs = 1;
  if (cs == 1 && rs >= (m->cols > 1 ? m->cols : 1)) {
    *trans = 0;
    *ld = rs;
    return 1;
  }
  rs = m->rs;
  cs = m->cs;
  if (m->cols == 1) cs = m->rows > 0 ? m->rows : 1;
  if (m->rows == 1) rs = 1;
  if (rs == 1 && cs >= (m->rows > 1 ? m->rows : 1)) {
    *trans = 1;
    *ld = cs;
    return 1;
  }
  return 0;
}

/* Gathers a strided matrix of dtype dt into a dense row-major buffer. */
static void gather_f32(float *dst, const mat_t *m, hpu_dtype_t dt) {
  size_t es = hpu_dtype_size(dt);
  for (int64_t i = 0; i < m->rows; i++)
    for (int64_t j = 0; j < m->cols; j++)
      dst[i * m->cols + j] = hpu_load_f32(m->base + (i * m->rs + j * m->cs) * (int64_t)es, dt);
}

static void gather_f64(double *dst, const mat_t *m) {
  for (int64_t i = 0; i < m->rows; i++)
    for (int64_t j = 0; j < m->cols; j++)
      dst[i * m->cols + j] = *(const double *)(m->base + (i * m->rs + j * m->cs) * 8);
}

typedef struct {
  hpu_dtype_t dt;
  double alpha, beta; /* beta already 0 when in2 is absent or ignored */
  int64_t ialpha, ibeta;
  void *scratch;      /* for operands BLAS cannot read in place */
} mm_t;

static void gemm_float(const mm_t *p, const mat_t *A, const mat_t *B, const mat_t *C) {
  int64_t m = A->rows, k = A->cols, n = B->cols;
  int is64 = p->dt == HPU_FLOAT64;
  size_t es = is64 ? 8 : 4;
  char *scratch = p->scratch;
  int ta, tb, tc;
  int64_t lda, ldb, ldc;
  const void *a = A->base, *b = B->base;
  void *c = C->base;
  if (!blas_layout(A, &ta, &lda)) {
    if (is64) gather_f64((double *)scratch, A);
    else gather_f32((float *)scratch, A, HPU_FLOAT32);
    a = scratch;
    scratch += (size_t)(m * k) * es;
    ta = 0;
    lda = k;
  }
  if (!blas_layout(B, &tb, &ldb)) {
    if (is64) gather_f64((double *)scratch, B);
    else gather_f32((float *)scratch, B, HPU_FLOAT32);
    b = scratch;
    scratch += (size_t)(k * n) * es;
    tb = 0;
    ldb = n;
  }
  int direct_c = blas_layout(C, &tc, &ldc) && !tc;
  if (!direct_c) {
    if (p->beta != 0) {
      if (is64) gather_f64((double *)scratch, C);
      else gather_f32((float *)scratch, C, HPU_FLOAT32);
    }
    c = scratch;
    ldc = n;
  }
  if (is64)
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (blasint)m, (blasint)n, (blasint)k, p->alpha, a, (blasint)lda, b, (blasint)ldb,
                p->beta, c, (blasint)ldc);
  else
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (blasint)m, (blasint)n, (blasint)k, (float)p->alpha, a, (blasint)lda, b,
                (blasint)ldb, (float)p->beta, c, (blasint)ldc);
  if (!direct_c) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        char *dst = C->base + (i * C->rs + j * C->cs) * (int64_t)es;
        if (is64) *(double *)dst = ((double *)c)[i * n + j];
        else *(float *)dst = ((float *)c)[i * n + j];
      }
  }
}

/* bf16 / fp16: widen to fp32, sgemm, round once. */
static void gemm_reduced(const mm_t *p, const mat_t *A, const mat_t *B, const mat_t *C) {
  int64_t m = A->rows, k = A->cols, n = B->cols;
  float *a = p->scratch, *b = a + m * k, *c = b + k * n;
  gather_f32(a, A, p->dt);
  gather_f32(b, B, p->dt);
  if (p->beta != 0) gather_f32(c, C, p->dt);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)n, (blasint)k,
              (float)p->alpha, a, (blasint)(k > 0 ? k : 1), b, (blasint)(n > 0 ? n : 1),
              (float)p->beta, c, (blasint)(n > 0 ? n : 1));
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++)
      hpu_store_f32(C->base + (i * C->rs + j * C->cs) * 2, p->dt, c[i * n + j]);
}

static void gemm_int(const mm_t *p, const mat_t *A, const mat_t *B, const mat_t *C) {
  int64_t es = (int64_t)hpu_dtype_size(p->dt);
  for (int64_t i = 0; i < A->rows; i++)
    for (int64_t j = 0; j < B->cols; j++) {
      uint64_t acc = 0;
      for (int64_t l = 0; l < A->cols; l++) {
        int64_t x = hpu_load_i64(A->base + (i * A->rs + l * A->cs) * es, p->dt);
        int64_t y = hpu_load_i64(B->base + (l * B->rs + j * B->cs) * es, p->dt);
        acc += (uint64_t)x * (uint64_t)y;
      }
      char *dst = C->base + (i * C->rs + j * C->cs) * es;
      uint64_t r = (uint64_t)p->ialpha * acc;
      if (p->ibeta != 0) r += (uint64_t)p->ibeta * (uint64_t)hpu_load_i64(dst, p->dt);
      hpu_store_i64(dst, p->dt, (int64_t)r);
    }
}

/* No scratch memory or k == 0: a plain loop (fp32 accumulation for the
 * reduced types, as the BLAS path). */
static void gemm_naive(const mm_t *p, const mat_t *A, const mat_t *B, const mat_t *C) {
  int64_t es = (int64_t)hpu_dtype_size(p->dt);
  for (int64_t i = 0; i < A->rows; i++)
    for (int64_t j = 0; j < B->cols; j++) {
      double acc = 0;
      float accf = 0;
      for (int64_t l = 0; l < A->cols; l++) {
        const char *x = A->base + (i * A->rs + l * A->cs) * es;
        const char *y = B->base + (l * B->rs + j * B->cs) * es;
        if (p->dt == HPU_FLOAT64) acc += hpu_load_f64(x, p->dt) * hpu_load_f64(y, p->dt);
        else accf += hpu_load_f32(x, p->dt) * hpu_load_f32(y, p->dt);
      }
      char *dst = C->base + (i * C->rs + j * C->cs) * es;
      if (p->dt == HPU_FLOAT64) {
        double r = p->alpha * acc;
        if (p->beta != 0) r += p->beta * hpu_load_f64(dst, p->dt);
        hpu_store_f64(dst, p->dt, r);
      } else {
        float r = (float)p->alpha * accf;
        if (p->beta != 0) r += (float)p->beta * hpu_load_f32(dst, p->dt);
        hpu_store_f32(dst, p->dt, r);
      }
    }
}

/* The batches of A, B and out in order (row-major over out's batch dims),
 * stepped like an odometer with running byte offsets: one add per tensor
 * per batch (a carry now and then) instead of dividing every batch index
 * out over all dims for each tensor. A tensor with fewer batch dims, or
 * size 1 in one, is broadcast: stride 0 there. */
typedef struct {
  int nd;                         /* out's batch dims */
  int64_t size[HPU_MAX_DIMS];     /* out's batch sizes */
  int64_t idx[HPU_MAX_DIMS];
  int64_t step[3][HPU_MAX_DIMS];  /* bytes per index step in A, B, out */
  int64_t off[3];                 /* the current batch's byte offsets */
} bstep_t;

static void bstep_init(bstep_t *s, const hpu_tensor_t *A, const hpu_tensor_t *B, const hpu_tensor_t *out) {
  const hpu_tensor_t *ts[3] = {A, B, out};
  s->nd = out->ndim - 2;
  for (int od = 0; od < s->nd; od++) {
    s->size[od] = out->sizes[od];
    s->idx[od] = 0;
    for (int t = 0; t < 3; t++) {
      int td = od - s->nd + ts[t]->ndim - 2;
      s->step[t][od] = td >= 0 && ts[t]->sizes[td] != 1
                           ? ts[t]->strides[td] * (int64_t)hpu_dtype_size(ts[t]->dtype)
                           : 0;
    }
  }
  s->off[0] = s->off[1] = s->off[2] = 0;
}

static void bstep_next(bstep_t *s) {
  for (int od = s->nd - 1; od >= 0; od--) {
    for (int t = 0; t < 3; t++) s->off[t] += s->step[t][od];
    if (++s->idx[od] < s->size[od]) return;
    for (int t = 0; t < 3; t++) s->off[t] -= s->step[t][od] * s->size[od];
    s->idx[od] = 0;
  }
}

static mat_t mat_of(const hpu_tensor_t *t, int64_t off) {
  mat_t m;
  m.base = (char *)hpu_tensor_data(t) + off;
  m.rows = t->sizes[t->ndim - 2];
  m.cols = t->sizes[t->ndim - 1];
  m.rs = t->strides[t->ndim - 2];
  m.cs = t->strides[t->ndim - 1];
  return m;
}

/* Byte offsets of every batch in A, B and out (3 per batch), as
 * hpu_gemm_run_batched and hpu_gemv_run take them; NULL for a single batch
 * (or when out of host memory: *oom says which). */
static int64_t *batch_offsets(const hpu_tensor_t *A, const hpu_tensor_t *B, const hpu_tensor_t *out,
                              int64_t nbatch, int *oom) {
  *oom = 0;
  if (nbatch <= 1) return NULL;
  int64_t *offs = malloc((size_t)nbatch * 3 * sizeof(int64_t));
  if (!offs) {
    *oom = 1;
    return NULL;
  }
  bstep_t s;
  bstep_init(&s, A, B, out);
  for (int64_t bi = 0; bi < nbatch; bi++, bstep_next(&s)) {
    offs[3 * bi] = s.off[0];
    offs[3 * bi + 1] = s.off[1];
    offs[3 * bi + 2] = s.off[2];
  }
  return offs;
}

/* One row of A: gemv.c reads B in place instead of packing it. */
static int matvec(hpu_gemm_t *g, const hpu_tensor_t *A, const hpu_tensor_t *B,
                  const hpu_tensor_t *out, int64_t nbatch) {
  int oom;
  int64_t *offs = batch_offsets(A, B, out, nbatch, &oom);
  if (oom) return -1;
  g->a = hpu_tensor_data(A);
  g->b = hpu_tensor_data(B);
  g->c = hpu_tensor_data(out);
  int rc = hpu_gemv_run(g, nbatch, offs);
  free(offs);
  return rc;
}

void hpu_kernel_matmul(const hpu_node_t *node) {
  const hpu_tensor_t *A = &node->inputs[0], *B = &node->inputs[1], *out = &node->outputs[0];
  mm_t p;
  p.dt = out->dtype;
  p.alpha = hpu_scalar_as_double(node->params.matmul.alpha);
  p.ialpha = node->params.matmul.alpha.kind == HPU_SCALAR_FLOAT ? hpu_f2i(node->params.matmul.alpha.f)
                                                              : node->params.matmul.alpha.i;
  p.beta = 0;
  p.ibeta = 0;
  if (node->num_inputs == 3) {
    hpu_scalar_t beta = node->params.matmul.beta;
    p.beta = hpu_scalar_as_double(beta);
    p.ibeta = beta.kind == HPU_SCALAR_FLOAT ? hpu_f2i(beta.f) : beta.i;
    if (p.beta != 0 || p.ibeta != 0) hpu_copy_tensor(out, &node->inputs[2]);
  }
  if (!hpu_dtype_is_floating(p.dt)) p.beta = (double)p.ibeta;
  int64_t m = out->sizes[out->ndim - 2], n = out->sizes[out->ndim - 1];
  int64_t k = A->sizes[A->ndim - 1];
  int64_t nbatch = 1;
  for (int d = 0; d < out->ndim - 2; d++) nbatch *= out->sizes[d];
  if (m == 0 || n == 0 || nbatch == 0) return;
  int fl = hpu_dtype_is_floating(p.dt);
  /* Our own kernels where they were measured faster (gemm.c); the batch
   * views differ only in base, so one choice holds for all batches. */
  hpu_gemm_t g;
  int kernel = HPU_GEMM_NONE;
  if (fl && p.dt != HPU_FLOAT64) {
    mat_t a = mat_of(A, 0), b = mat_of(B, 0), c = mat_of(out, 0);
    g.m = m;
    g.n = n;
    g.k = k;
    g.ars = a.rs;
    g.acs = a.cs;
    g.brs = b.rs;
    g.bcs = b.cs;
    g.crs = c.rs;
    g.ccs = c.cs;
    g.dt = p.dt;
    g.alpha = (float)p.alpha;
    g.beta = (float)p.beta;
    kernel = hpu_gemm_choose(&g);
    if (m == 1 && matvec(&g, A, B, out, nbatch) == 0) return;
  }
  size_t es = p.dt == HPU_FLOAT64 ? 8 : 4;
  p.scratch = NULL;
  if (fl && kernel == HPU_GEMM_NONE) {
    /* Worst case: A, B and C all gathered. */
    p.scratch = malloc((size_t)(m * k + k * n + m * n) * es + 64);
    sync_blas_threads();
  }
  if (kernel != HPU_GEMM_NONE) {
    /* All batches in one call: small batched products (attention) run one
     * whole GEMM per thread instead of a parallel region each. */
    int oom;
    int64_t *offs = batch_offsets(A, B, out, nbatch, &oom);
    if (!oom) {
      g.a = hpu_tensor_data(A);
      g.b = hpu_tensor_data(B);
      g.c = hpu_tensor_data(out);
      int rc = hpu_gemm_run_batched(&g, kernel, nbatch, offs);
      free(offs);
      if (rc == 0) return;
    }
    /* out of host memory: nothing written, the loop below retries per batch */
  }
  bstep_t s;
  bstep_init(&s, A, B, out);
  for (int64_t bi = 0; bi < nbatch; bi++, bstep_next(&s)) {
    mat_t a = mat_of(A, s.off[0]);
    mat_t b = mat_of(B, s.off[1]);
    mat_t c = mat_of(out, s.off[2]);
    if (kernel != HPU_GEMM_NONE) {
      g.a = a.base;
      g.b = b.base;
      g.c = c.base;
      if (hpu_gemm_run(&g, kernel) == 0) continue;
    }
    if (!fl) gemm_int(&p, &a, &b, &c);
    else if (k == 0 || !p.scratch) gemm_naive(&p, &a, &b, &c); /* host OOM: slow but right */
    else if (p.dt == HPU_FLOAT32 || p.dt == HPU_FLOAT64) gemm_float(&p, &a, &b, &c);
    else gemm_reduced(&p, &a, &b, &c);
  }
  free(p.scratch);
}
