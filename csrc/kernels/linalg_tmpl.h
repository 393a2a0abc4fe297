/* The linalg kernels for one real type, included by linalg_f32.c and
 * linalg_f64.c with T (float / double), P(x) (the LAPACK prefix: s##x or
 * d##x) and FN(x) (the exported name's suffix). Each matrix of the batch is
 * copied into a column-major workspace (LAPACK's layout), factored, and its
 * results copied back row-major; the batch runs in order on the card's
 * worker, OpenBLAS threading the large matrices itself. Operands are
 * contiguous (validated in linalg.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/lapack.h"
#include "kernels/linalg.h"

/* w (column-major, leading dim ld) <- src (row-major rows x cols). */
static void FN(to_cm)(T *w, int64_t ld, const T *src, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) w[i + j * ld] = src[i * cols + j];
}

/* dst (row-major rows x cols) <- w (column-major, leading dim ld). */
static void FN(from_cm)(T *dst, const T *w, int64_t ld, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) dst[i * cols + j] = w[i + j * ld];
}

static int FN(all_finite)(const T *a, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(a[i])) return 0;
  return 1;
}

static blasint FN(lwork_of)(T query) { return (blasint)query > 1 ? (blasint)query : 1; }

hpu_status_t FN(hpu_linalg_lu_factor)(const hpu_node_t *nd) {
  hpu_linalg_dims_t d = hpu_linalg_dims(&nd->inputs[0]);
  const T *a = hpu_tensor_data(&nd->inputs[0]);
  T *lu = hpu_tensor_data(&nd->outputs[0]);
  int32_t *piv = hpu_tensor_data(&nd->outputs[1]), *info = hpu_tensor_data(&nd->outputs[2]);
  int64_t k = d.m < d.n ? d.m : d.n;
  blasint m = (blasint)d.m, n = (blasint)d.n, lda = m > 1 ? m : 1;
  T *w = malloc((size_t)(d.m * d.n + 1) * sizeof(T));
  blasint *ip = malloc((size_t)(k + 1) * sizeof(blasint));
  if (!w || !ip) {
    free(w), free(ip);
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "linalg_lu_factor: no host memory for the workspace");
  }
  for (int64_t b = 0; b < d.batch; b++) {
    blasint inf = 0;
    FN(to_cm)(w, lda, a + b * d.m * d.n, d.m, d.n);
    if (k > 0) P(getrf_)(&m, &n, w, &lda, ip, &inf);
    FN(from_cm)(lu + b * d.m * d.n, w, lda, d.m, d.n);
    for (int64_t i = 0; i < k; i++) piv[b * k + i] = (int32_t)ip[i];
    info[b] = (int32_t)inf;
  }
  free(w), free(ip);
  return HPU_SUCCESS;
}

hpu_status_t FN(hpu_linalg_lu_solve)(const hpu_node_t *nd) {
  hpu_linalg_dims_t d = hpu_linalg_dims(&nd->inputs[0]), db = hpu_linalg_dims(&nd->inputs[2]);
  const T *lu = hpu_tensor_data(&nd->inputs[0]), *bsrc = hpu_tensor_data(&nd->inputs[2]);
  const int32_t *piv = hpu_tensor_data(&nd->inputs[1]);
  T *x = hpu_tensor_data(&nd->outputs[0]);
  int left = nd->params.nn.i[0] != 0, adjoint = nd->params.nn.i[1] != 0;
  int64_t nn = d.n, nrhs = left ? db.n : db.m, bsize = db.m * db.n;
  /* X op(A) = B is op(A)^T X^T = B^T, and a row-major [k, n] B read
   * column-major is B^T: right-hand solves need no transposition. */
  char trans = (left ? adjoint : !adjoint) ? 'T' : 'N';
  blasint n = (blasint)nn, k = (blasint)nrhs, ld = n > 1 ? n : 1, inf = 0;
  T *w = malloc((size_t)(nn * nn + bsize + 1) * sizeof(T));
  blasint *ip = malloc((size_t)(nn + 1) * sizeof(blasint));
  if (!w || !ip) {
    free(w), free(ip);
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "linalg_lu_solve: no host memory for the workspace");
  }
  hpu_status_t st = HPU_SUCCESS;
  T *wb = w + nn * nn;
  for (int64_t b = 0; b < d.batch && st == HPU_SUCCESS; b++) {
    for (int64_t i = 0; i < nn; i++) {
      int32_t p = piv[b * nn + i];
      if (p < 1 || p > nn) { /* getrs would read outside the matrix */
        st = hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                       "linalg.lu_solve: pivots must be in [1, %lld] (as linalg.lu_factor gives), got %d",
                       (long long)nn, (int)p);
        break;
      }
      ip[i] = p;
    }
    if (st != HPU_SUCCESS || nn == 0 || nrhs == 0) continue;
    FN(to_cm)(w, ld, lu + b * nn * nn, nn, nn);
    const T *src = bsrc + b * bsize;
    if (left) FN(to_cm)(wb, ld, src, nn, nrhs);
    else memcpy(wb, src, (size_t)bsize * sizeof(T));
    P(getrs_)(&trans, &n, &k, w, &ld, ip, wb, &ld, &inf, 1);
    if (left) FN(from_cm)(x + b * bsize, wb, ld, nn, nrhs);
    else memcpy(x + b * bsize, wb, (size_t)bsize * sizeof(T));
  }
  free(w), free(ip);
  return st;
}

hpu_status_t FN(hpu_linalg_cholesky)(const hpu_node_t *nd) {
  hpu_linalg_dims_t d = hpu_linalg_dims(&nd->inputs[0]);
  const T *a = hpu_tensor_data(&nd->inputs[0]);
  T *out = hpu_tensor_data(&nd->outputs[0]);
  int32_t *info = hpu_tensor_data(&nd->outputs[1]);
  int upper = nd->params.nn.i[0] != 0;
  char uplo = upper ? 'U' : 'L';
  int64_t nn = d.n;
  blasint n = (blasint)nn, ld = n > 1 ? n : 1;
  T *w = malloc((size_t)(nn * nn + 1) * sizeof(T));
  if (!w) return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "linalg_cholesky: no host memory for the workspace");
  for (int64_t b = 0; b < d.batch; b++) {
    blasint inf = 0;
    FN(to_cm)(w, ld, a + b * nn * nn, nn, nn);
    if (nn > 0) P(potrf_)(&uplo, &n, w, &ld, &inf, 1);
    T *o = out + b * nn * nn;
    FN(from_cm)(o, w, ld, nn, nn);
    for (int64_t i = 0; i < nn; i++) /* the triangle potrf did not write */
      for (int64_t j = 0; j < nn; j++)
        if (upper ? j < i : j > i) o[i * nn + j] = 0;
    info[b] = (int32_t)inf;
  }
  free(w);
  return HPU_SUCCESS;
}

hpu_status_t FN(hpu_linalg_svd)(const hpu_node_t *nd) {
  hpu_linalg_dims_t d = hpu_linalg_dims(&nd->inputs[0]);
  const T *a = hpu_tensor_data(&nd->inputs[0]);
  int uv = nd->num_outputs == 3, full = uv && nd->params.nn.i[0] != 0;
  int64_t k = d.m < d.n ? d.m : d.n, ucols = full ? d.m : k, vrows = full ? d.n : k;
  T *u = uv ? hpu_tensor_data(&nd->outputs[0]) : NULL;
  T *s = hpu_tensor_data(&nd->outputs[uv ? 1 : 0]);
  T *vh = uv ? hpu_tensor_data(&nd->outputs[2]) : NULL;
  if (k == 0) { /* nothing to factor: U and Vh of a full empty SVD are identities */
    for (int64_t b = 0; b < d.batch && full; b++) {
      memset(u + b * d.m * d.m, 0, (size_t)(d.m * d.m) * sizeof(T));
      memset(vh + b * d.n * d.n, 0, (size_t)(d.n * d.n) * sizeof(T));
      for (int64_t i = 0; i < d.m; i++) u[b * d.m * d.m + i * d.m + i] = 1;
      for (int64_t i = 0; i < d.n; i++) vh[b * d.n * d.n + i * d.n + i] = 1;
    }
    return HPU_SUCCESS;
  }
  char jobz = !uv ? 'N' : full ? 'A' : 'S';
  blasint m = (blasint)d.m, n = (blasint)d.n, lda = m, ldu = m, ldvt = (blasint)vrows, inf = 0;
  blasint lwork = -1;
  T query = 0;
  blasint *iw = malloc((size_t)(8 * k) * sizeof(blasint));
  if (iw) P(gesdd_)(&jobz, &m, &n, NULL, &lda, NULL, NULL, &ldu, NULL, &ldvt, &query, &lwork, iw, &inf, 1);
  lwork = FN(lwork_of)(query);
  size_t need = (size_t)(d.m * d.n + (uv ? d.m * ucols + vrows * d.n : 0) + lwork);
  T *w = malloc(need * sizeof(T));
  if (!w || !iw) {
    free(w), free(iw);
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "linalg_svd: no host memory for the workspace");
  }
  T *wu = w + d.m * d.n, *wv = wu + (uv ? d.m * ucols : 0), *work = wv + (uv ? vrows * d.n : 0);
  hpu_status_t st = HPU_SUCCESS;
  for (int64_t b = 0; b < d.batch; b++) {
    const T *ab = a + b * d.m * d.n;
    if (!FN(all_finite)(ab, d.m * d.n)) {
      st = hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                     "linalg.svd: The algorithm failed to converge because the input matrix contained "
                     "non-finite values.");
      break;
    }
    FN(to_cm)(w, lda, ab, d.m, d.n);
    P(gesdd_)(&jobz, &m, &n, w, &lda, s + b * k, wu, &ldu, wv, &ldvt, work, &lwork, iw, &inf, 1);
    if (inf != 0) {
      st = hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                     "linalg.svd: The algorithm failed to converge because the input matrix is "
                     "ill-conditioned or has too many repeated singular values (error code: %d).", (int)inf);
      break;
    }
    if (uv) {
      FN(from_cm)(u + b * d.m * ucols, wu, ldu, d.m, ucols);
      FN(from_cm)(vh + b * vrows * d.n, wv, ldvt, vrows, d.n);
    }
  }
  free(w), free(iw);
  return st;
}

hpu_status_t FN(hpu_linalg_eigh)(const hpu_node_t *nd) {
  hpu_linalg_dims_t d = hpu_linalg_dims(&nd->inputs[0]);
  const T *a = hpu_tensor_data(&nd->inputs[0]);
  T *ev = hpu_tensor_data(&nd->outputs[0]);
  int vec = nd->num_outputs == 2;
  T *vv = vec ? hpu_tensor_data(&nd->outputs[1]) : NULL;
  int64_t nn = d.n;
  if (nn == 0) return HPU_SUCCESS;
  char jobz = vec ? 'V' : 'N', uplo = nd->params.nn.i[0] ? 'U' : 'L';
  blasint n = (blasint)nn, lda = n, inf = 0, lwork = -1, liwork = -1, iquery = 0;
  T query = 0;
  P(syevd_)(&jobz, &uplo, &n, NULL, &lda, NULL, &query, &lwork, &iquery, &liwork, &inf, 1, 1);
  lwork = FN(lwork_of)(query);
  liwork = iquery > 1 ? iquery : 1;
  T *w = malloc((size_t)(nn * nn + lwork) * sizeof(T));
  blasint *iw = malloc((size_t)liwork * sizeof(blasint));
  if (!w || !iw) {
    free(w), free(iw);
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "linalg_eigh: no host memory for the workspace");
  }
  hpu_status_t st = HPU_SUCCESS;
  for (int64_t b = 0; b < d.batch; b++) {
    FN(to_cm)(w, lda, a + b * nn * nn, nn, nn);
    P(syevd_)(&jobz, &uplo, &n, w, &lda, ev + b * nn, w + nn * nn, &lwork, iw, &liwork, &inf, 1, 1);
    if (inf != 0) {
      st = hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                     "linalg.eigh: The algorithm failed to converge because the input matrix is "
                     "ill-conditioned or has too many repeated eigenvalues (error code: %d).", (int)inf);
      break;
    }
    if (vec) FN(from_cm)(vv + b * nn * nn, w, lda, nn, nn);
  }
  free(w), free(iw);
  return st;
}

hpu_status_t FN(hpu_linalg_qr)(const hpu_node_t *nd) {
  hpu_linalg_dims_t d = hpu_linalg_dims(&nd->inputs[0]);
  const T *a = hpu_tensor_data(&nd->inputs[0]);
  int mode = (int)nd->params.nn.i[0];
  int64_t k = d.m < d.n ? d.m : d.n, qcols = mode == 1 ? d.m : k, rrows = mode == 1 ? d.m : k;
  T *q = mode != 2 ? hpu_tensor_data(&nd->outputs[0]) : NULL;
  T *r = hpu_tensor_data(&nd->outputs[mode != 2 ? 1 : 0]);
  blasint m = (blasint)d.m, n = (blasint)d.n, lda = m > 1 ? m : 1, inf = 0, lwork = -1;
  blasint qc = (blasint)qcols, kk = (blasint)k;
  T query = 0, query2 = 0;
  if (k > 0) P(geqrf_)(&m, &n, NULL, &lda, NULL, &query, &lwork, &inf);
  if (q && d.m > 0 && qcols > 0) P(orgqr_)(&m, &qc, &kk, NULL, &lda, NULL, &query2, &lwork, &inf);
  lwork = FN(lwork_of)(query > query2 ? query : query2);
  int64_t wcols = d.n > qcols ? d.n : qcols;
  T *w = malloc((size_t)(d.m * wcols + k + lwork + 1) * sizeof(T));
  if (!w) return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "linalg_qr: no host memory for the workspace");
  T *tau = w + d.m * wcols, *work = tau + k;
  for (int64_t b = 0; b < d.batch; b++) {
    FN(to_cm)(w, lda, a + b * d.m * d.n, d.m, d.n);
    if (k > 0) P(geqrf_)(&m, &n, w, &lda, tau, work, &lwork, &inf);
    T *rb = r + b * rrows * d.n;
    for (int64_t i = 0; i < rrows; i++) /* R: the upper triangle geqrf leaves */
      for (int64_t j = 0; j < d.n; j++) rb[i * d.n + j] = j >= i ? w[i + j * lda] : 0;
    if (!q || d.m == 0 || qcols == 0) continue;
    /* Q's extra columns (complete mode, m > n) start as anything: orgqr
     * overwrites them from the reflectors in the first k. */
    for (int64_t j = d.n; j < qcols; j++) memset(w + j * lda, 0, (size_t)d.m * sizeof(T));
    P(orgqr_)(&m, &qc, &kk, w, &lda, tau, work, &lwork, &inf);
    FN(from_cm)(q + b * d.m * qcols, w, lda, d.m, qcols);
  }
  free(w);
  return HPU_SUCCESS;
}

hpu_status_t FN(hpu_linalg_solve_triangular)(const hpu_node_t *nd) {
  hpu_linalg_dims_t d = hpu_linalg_dims(&nd->inputs[0]), db = hpu_linalg_dims(&nd->inputs[1]);
  const T *a = hpu_tensor_data(&nd->inputs[0]), *bsrc = hpu_tensor_data(&nd->inputs[1]);
  T *x = hpu_tensor_data(&nd->outputs[0]);
  int upper = nd->params.nn.i[0] != 0, left = nd->params.nn.i[1] != 0, unit = nd->params.nn.i[2] != 0;
  int64_t bsize = db.m * db.n;
  if (d.n == 0 || bsize == 0) return HPU_SUCCESS;
  for (int64_t b = 0; b < d.batch; b++) {
    T *xb = x + b * bsize;
    if (xb != bsrc + b * bsize) memcpy(xb, bsrc + b * bsize, (size_t)bsize * sizeof(T));
    CBLAS(trsm)(CblasRowMajor, left ? CblasLeft : CblasRight, upper ? CblasUpper : CblasLower,
                CblasNoTrans, unit ? CblasUnit : CblasNonUnit, (blasint)db.m, (blasint)db.n, 1,
                a + b * d.n * d.n, (blasint)d.n, xb, (blasint)db.n);
  }
  return HPU_SUCCESS;
}

hpu_status_t FN(hpu_linalg_geqrf)(const hpu_node_t *nd) {
  hpu_linalg_dims_t d = hpu_linalg_dims(&nd->inputs[0]);
  const T *a = hpu_tensor_data(&nd->inputs[0]);
  T *qr = hpu_tensor_data(&nd->outputs[0]), *tau = hpu_tensor_data(&nd->outputs[1]);
  int64_t k = d.m < d.n ? d.m : d.n;
  if (k == 0) return HPU_SUCCESS;
  blasint m = (blasint)d.m, n = (blasint)d.n, lda = m, inf = 0, lwork = -1;
  T query = 0;
  P(geqrf_)(&m, &n, NULL, &lda, NULL, &query, &lwork, &inf);
  lwork = FN(lwork_of)(query);
  T *w = malloc((size_t)(d.m * d.n + lwork) * sizeof(T));
  if (!w) return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "linalg_geqrf: no host memory for the workspace");
  for (int64_t b = 0; b < d.batch; b++) {
    FN(to_cm)(w, lda, a + b * d.m * d.n, d.m, d.n);
    P(geqrf_)(&m, &n, w, &lda, tau + b * k, w + d.m * d.n, &lwork, &inf);
    FN(from_cm)(qr + b * d.m * d.n, w, lda, d.m, d.n);
  }
  free(w);
  return HPU_SUCCESS;
}

hpu_status_t FN(hpu_linalg_householder_product)(const hpu_node_t *nd) {
  hpu_linalg_dims_t d = hpu_linalg_dims(&nd->inputs[0]);
  const T *v = hpu_tensor_data(&nd->inputs[0]), *tau = hpu_tensor_data(&nd->inputs[1]);
  T *q = hpu_tensor_data(&nd->outputs[0]);
  const hpu_tensor_t *tt = &nd->inputs[1];
  int64_t k = tt->sizes[tt->ndim - 1];
  if (d.m == 0 || d.n == 0) return HPU_SUCCESS;
  blasint m = (blasint)d.m, n = (blasint)d.n, kk = (blasint)k, lda = m, inf = 0, lwork = -1;
  T query = 0;
  P(orgqr_)(&m, &n, &kk, NULL, &lda, NULL, &query, &lwork, &inf);
  lwork = FN(lwork_of)(query);
  T *w = malloc((size_t)(d.m * d.n + lwork) * sizeof(T));
  if (!w) return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "linalg_householder_product: no host memory for the workspace");
  for (int64_t b = 0; b < d.batch; b++) {
    FN(to_cm)(w, lda, v + b * d.m * d.n, d.m, d.n);
    P(orgqr_)(&m, &n, &kk, w, &lda, tau + b * k, w + d.m * d.n, &lwork, &inf);
    FN(from_cm)(q + b * d.m * d.n, w, lda, d.m, d.n);
  }
  free(w);
  return HPU_SUCCESS;
}

hpu_status_t FN(hpu_linalg_ormqr)(const hpu_node_t *nd) {
  hpu_linalg_dims_t dv = hpu_linalg_dims(&nd->inputs[0]), dc = hpu_linalg_dims(&nd->inputs[2]);
  const T *v = hpu_tensor_data(&nd->inputs[0]), *tau = hpu_tensor_data(&nd->inputs[1]);
  const T *c = hpu_tensor_data(&nd->inputs[2]);
  T *out = hpu_tensor_data(&nd->outputs[0]);
  const hpu_tensor_t *tt = &nd->inputs[1];
  int64_t k = tt->sizes[tt->ndim - 1];
  char side = nd->params.nn.i[0] ? 'L' : 'R', trans = nd->params.nn.i[1] ? 'T' : 'N';
  if (dc.m == 0 || dc.n == 0) return HPU_SUCCESS;
  blasint m = (blasint)dc.m, n = (blasint)dc.n, kk = (blasint)k, lda = dv.m > 1 ? (blasint)dv.m : 1;
  blasint ldc = m, inf = 0, lwork = -1;
  T query = 0;
  P(ormqr_)(&side, &trans, &m, &n, &kk, NULL, &lda, NULL, NULL, &ldc, &query, &lwork, &inf, 1, 1);
  lwork = FN(lwork_of)(query);
  T *w = malloc((size_t)(dv.m * dv.n + dc.m * dc.n + lwork) * sizeof(T));
  if (!w) return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "linalg_ormqr: no host memory for the workspace");
  T *wc = w + dv.m * dv.n;
  for (int64_t b = 0; b < dc.batch; b++) {
    FN(to_cm)(w, lda, v + b * dv.m * dv.n, dv.m, dv.n);
    FN(to_cm)(wc, ldc, c + b * dc.m * dc.n, dc.m, dc.n);
    if (k > 0) P(ormqr_)(&side, &trans, &m, &n, &kk, w, &lda, tau + b * k, wc, &ldc, wc + dc.m * dc.n, &lwork, &inf, 1, 1);
    FN(from_cm)(out + b * dc.m * dc.n, wc, ldc, dc.m, dc.n);
  }
  free(w);
  return HPU_SUCCESS;
}

hpu_status_t FN(hpu_linalg_lu_unpack)(const hpu_node_t *nd) {
  const hpu_tensor_t *pt = &nd->inputs[0];
  hpu_linalg_dims_t d = hpu_linalg_dims(&nd->outputs[0]);
  int64_t k = pt->sizes[pt->ndim - 1], m = d.m;
  const int32_t *piv = hpu_tensor_data(pt);
  T *p = hpu_tensor_data(&nd->outputs[0]);
  int64_t *perm = malloc((size_t)(m + 1) * sizeof(int64_t));
  if (!perm) return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "linalg_lu_unpack: no host memory");
  hpu_status_t st = HPU_SUCCESS;
  for (int64_t b = 0; b < d.batch && st == HPU_SUCCESS; b++) {
    /* Row i of the factored matrix is row perm[i] of A: apply the swaps. */
    for (int64_t i = 0; i < m; i++) perm[i] = i;
    for (int64_t i = 0; i < k; i++) {
      int32_t q = piv[b * k + i];
      if (q < 1 || q > m) {
        st = hpu_error(HPU_ERROR_INVALID_ARGUMENT, "lu_unpack: pivots must be in [1, %lld], got %d", (long long)m, (int)q);
        break;
      }
      int64_t t = perm[i];
      perm[i] = perm[q - 1], perm[q - 1] = t;
    }
    T *pb = p + b * m * m;
    memset(pb, 0, (size_t)(m * m) * sizeof(T));
    for (int64_t i = 0; i < m; i++) pb[perm[i] * m + i] = 1; /* A = P L U */
  }
  free(perm);
  return st;
}

hpu_status_t FN(hpu_linalg_ldl_factor)(const hpu_node_t *nd) {
  hpu_linalg_dims_t d = hpu_linalg_dims(&nd->inputs[0]);
  const T *a = hpu_tensor_data(&nd->inputs[0]);
  T *ld = hpu_tensor_data(&nd->outputs[0]);
  int32_t *piv = hpu_tensor_data(&nd->outputs[1]), *info = hpu_tensor_data(&nd->outputs[2]);
  int64_t nn = d.n;
  blasint n = (blasint)nn, lda = n > 1 ? n : 1, inf = 0, lwork = -1;
  char uplo = 'L';
  T query = 0;
  if (nn > 0) P(sytrf_)(&uplo, &n, NULL, &lda, NULL, &query, &lwork, &inf, 1);
  lwork = FN(lwork_of)(query);
  T *w = malloc((size_t)(nn * nn + lwork) * sizeof(T));
  blasint *ip = malloc((size_t)(nn + 1) * sizeof(blasint));
  if (!w || !ip) {
    free(w), free(ip);
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "linalg_ldl_factor: no host memory for the workspace");
  }
  for (int64_t b = 0; b < d.batch; b++) {
    inf = 0;
    FN(to_cm)(w, lda, a + b * nn * nn, nn, nn);
    if (nn > 0) P(sytrf_)(&uplo, &n, w, &lda, ip, w + nn * nn, &lwork, &inf, 1);
    T *o = ld + b * nn * nn;
    for (int64_t i = 0; i < nn; i++)
      for (int64_t j = 0; j < nn; j++) o[i * nn + j] = j <= i ? w[i + j * lda] : 0;
    for (int64_t i = 0; i < nn; i++) piv[b * nn + i] = (int32_t)ip[i];
    info[b] = (int32_t)inf;
  }
  free(w), free(ip);
  return HPU_SUCCESS;
}

hpu_status_t FN(hpu_linalg_ldl_solve)(const hpu_node_t *nd) {
  hpu_linalg_dims_t d = hpu_linalg_dims(&nd->inputs[0]), db = hpu_linalg_dims(&nd->inputs[2]);
  const T *ld = hpu_tensor_data(&nd->inputs[0]), *bsrc = hpu_tensor_data(&nd->inputs[2]);
  const int32_t *piv = hpu_tensor_data(&nd->inputs[1]);
  T *x = hpu_tensor_data(&nd->outputs[0]);
  int64_t nn = d.n, nrhs = db.n;
  if (nn == 0 || nrhs == 0) return HPU_SUCCESS;
  blasint n = (blasint)nn, k = (blasint)nrhs, ld_ = n, inf = 0;
  char uplo = 'L';
  T *w = malloc((size_t)(nn * nn + nn * nrhs) * sizeof(T));
  blasint *ip = malloc((size_t)nn * sizeof(blasint));
  if (!w || !ip) {
    free(w), free(ip);
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "linalg_ldl_solve: no host memory for the workspace");
  }
  hpu_status_t st = HPU_SUCCESS;
  for (int64_t b = 0; b < d.batch && st == HPU_SUCCESS; b++) {
    for (int64_t i = 0; i < nn; i++) {
      int32_t p = piv[b * nn + i];
      if (p == 0 || p > nn || p < -nn) { /* sytrs would read outside the matrix */
        st = hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                       "linalg.ldl_solve: pivots must be in [-%lld, %lld] and not 0 (as linalg.ldl_factor gives), got %d",
                       (long long)nn, (long long)nn, (int)p);
        break;
      }
      ip[i] = p;
    }
    if (st != HPU_SUCCESS) break;
    FN(to_cm)(w, ld_, ld + b * nn * nn, nn, nn);
    FN(to_cm)(w + nn * nn, ld_, bsrc + b * nn * nrhs, nn, nrhs);
    P(sytrs_)(&uplo, &n, &k, w, &ld_, ip, w + nn * nn, &ld_, &inf, 1);
    FN(from_cm)(x + b * nn * nrhs, w + nn * nn, ld_, nn, nrhs);
  }
  free(w), free(ip);
  return st;
}

hpu_status_t FN(hpu_linalg_lstsq)(const hpu_node_t *nd) {
  hpu_linalg_dims_t d = hpu_linalg_dims(&nd->inputs[0]), db = hpu_linalg_dims(&nd->inputs[1]);
  const T *a = hpu_tensor_data(&nd->inputs[0]), *bsrc = hpu_tensor_data(&nd->inputs[1]);
  T *x = hpu_tensor_data(&nd->outputs[0]);
  int64_t *rank = hpu_tensor_data(&nd->outputs[1]);
  int64_t mx = d.m > d.n ? d.m : d.n, nrhs = db.n;
  int gels = nd->params.nn.i[0] == 1;
  T rcond = (T)nd->params.nn.s[0].f;
  char trans = 'N';
  blasint m = (blasint)d.m, n = (blasint)d.n, k = (blasint)nrhs, lda = m > 1 ? m : 1;
  blasint ldb = mx > 1 ? (blasint)mx : 1, inf = 0, lwork = -1, rk = 0;
  T query = 0;
  if (gels) P(gels_)(&trans, &m, &n, &k, NULL, &lda, NULL, &ldb, &query, &lwork, &inf, 1);
  else P(gelsy_)(&m, &n, &k, NULL, &lda, NULL, &ldb, NULL, &rcond, &rk, &query, &lwork, &inf);
  lwork = FN(lwork_of)(query);
  T *w = malloc((size_t)(d.m * d.n + ldb * nrhs + lwork + 1) * sizeof(T));
  blasint *jp = malloc((size_t)(d.n + 1) * sizeof(blasint));
  if (!w || !jp) {
    free(w), free(jp);
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "linalg_lstsq: no host memory for the workspace");
  }
  T *wb = w + d.m * d.n;
  hpu_status_t st = HPU_SUCCESS;
  for (int64_t b = 0; b < d.batch; b++) {
    FN(to_cm)(w, lda, a + b * d.m * d.n, d.m, d.n);
    memset(wb, 0, (size_t)(ldb * nrhs) * sizeof(T));
    FN(to_cm)(wb, ldb, bsrc + b * d.m * nrhs, d.m, nrhs);
    memset(jp, 0, (size_t)(d.n + 1) * sizeof(blasint)); /* every column free to pivot */
    rk = 0, inf = 0;
    if (d.m > 0 && d.n > 0 && nrhs > 0) {
      if (gels) P(gels_)(&trans, &m, &n, &k, w, &lda, wb, &ldb, wb + ldb * nrhs, &lwork, &inf, 1);
      else P(gelsy_)(&m, &n, &k, w, &lda, wb, &ldb, jp, &rcond, &rk, wb + ldb * nrhs, &lwork, &inf);
    }
    if (inf > 0) {
      st = hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                     "torch.linalg.lstsq: The least squares solution could not be computed because the input "
                     "matrix does not have full rank (error code: %d).", (int)inf);
      break;
    }
    FN(from_cm)(x + b * mx * nrhs, wb, ldb, mx, nrhs);
    rank[b] = rk;
  }
  free(w), free(jp);
  return st;
}
