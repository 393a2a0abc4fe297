/* The linalg kernels (linalg*.c) on host buffers, against values known by
 * construction: LU (P A = L U, infos of a singular matrix, pivots 1-based),
 * solves with a known X, Cholesky of L L^T, SVD and eigh of matrices built
 * from rotations and known values, QR (Q R = A, Q orthonormal), triangular
 * solves, lu_unpack's permutation, the Householder ops, LDL^T, least
 * squares, and the checks that keep LAPACK inside its operands. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hpu/hpu.h"
#include "kernels/kernels.h"

static hpu_tensor_t T(void *d, hpu_dtype_t dt, int nd, int64_t a, int64_t b, int64_t c) {
  hpu_tensor_t t;
  int64_t s[3] = {a, b, c};
  CU_ASSERT_EQUAL_FATAL(hpu_tensor_init_contiguous(&t, d, dt, nd, s), 0);
  return t;
}

static hpu_node_t node(hpu_op_t op) {
  hpu_node_t n;
  memset(&n, 0, sizeof n);
  n.op = op;
  return n;
}

/* c[m x n] = a[m x k] @ b[k x n] (row-major); ta: a is read transposed. */
static void matmul(double *c, const double *a, const double *b, int m, int k, int n, int ta) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = 0;
      for (int l = 0; l < k; l++) s += (ta ? a[l * m + i] : a[i * k + l]) * b[l * n + j];
      c[i * n + j] = s;
    }
}

/* An orthogonal n x n matrix: a product of plane rotations. */
static void orthogonal(double *q, int n, double seed) {
  memset(q, 0, sizeof(double) * n * n);
  for (int i = 0; i < n; i++) q[i * n + i] = 1;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      double t = seed + 0.7 * i + 1.3 * j, c = cos(t), s = sin(t);
      for (int r = 0; r < n; r++) { /* q <- q G(i, j) */
        double a = q[r * n + i], b = q[r * n + j];
        q[r * n + i] = c * a - s * b;
        q[r * n + j] = s * a + c * b;
      }
    }
}

static void test_lu_factor(void) {
  /* Batch of two 3x3: a general matrix, and a singular one (row 1 = 2 row 0). */
  double a[18] = {1, 2, 3, 4, 5, 6, 7, 8, 10, 1, 2, 3, 2, 4, 6, 0, 1, 1}, lu[18];
  int32_t piv[6], info[2];
  hpu_node_t n = node(HPU_OP_LINALG_LU_FACTOR);
  n.num_inputs = 1, n.num_outputs = 3;
  n.inputs[0] = T(a, HPU_FLOAT64, 3, 2, 3, 3);
  n.outputs[0] = T(lu, HPU_FLOAT64, 3, 2, 3, 3);
  n.outputs[1] = T(piv, HPU_INT32, 2, 2, 3, 0);
  n.outputs[2] = T(info, HPU_INT32, 1, 2, 0, 0);
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_node_execute(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(info[0], 0);
  CU_ASSERT(info[1] == 3); /* U[2][2] is exactly zero */
  for (int b = 0; b < 2; b++) {
    double pa[9], l[9] = {0}, u[9] = {0}, r[9];
    memcpy(pa, a + 9 * b, sizeof pa);
    for (int i = 0; i < 3; i++) { /* LAPACK's row swaps, 1-based */
      int p = piv[3 * b + i] - 1;
      CU_ASSERT_FATAL(p >= i && p < 3);
      for (int j = 0; j < 3; j++) {
        double t = pa[i * 3 + j];
        pa[i * 3 + j] = pa[p * 3 + j], pa[p * 3 + j] = t;
      }
    }
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++) {
        if (j < i) l[i * 3 + j] = lu[9 * b + i * 3 + j];
        else u[i * 3 + j] = lu[9 * b + i * 3 + j];
        if (i == j) l[i * 3 + j] = 1;
      }
    matmul(r, l, u, 3, 3, 3, 0);
    for (int i = 0; i < 9; i++) CU_ASSERT_DOUBLE_EQUAL(r[i], pa[i], 1e-12);
  }
}

static void test_lu_solve(void) {
  double a[9] = {4, -2, 1, 3, 6, -4, 2, 1, 8}, x[6] = {1, -2, 3, 0.5, -1, 2}, b[6], lu[9], out[6];
  int32_t piv[3], info;
  hpu_node_t f = node(HPU_OP_LINALG_LU_FACTOR);
  f.num_inputs = 1, f.num_outputs = 3;
  f.inputs[0] = T(a, HPU_FLOAT64, 2, 3, 3, 0);
  f.outputs[0] = T(lu, HPU_FLOAT64, 2, 3, 3, 0);
  f.outputs[1] = T(piv, HPU_INT32, 1, 3, 0, 0);
  f.outputs[2] = T(&info, HPU_INT32, 0, 0, 0, 0);
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&f), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_node_execute(&f), HPU_SUCCESS);
  for (int left = 0; left < 2; left++)
    for (int adj = 0; adj < 2; adj++) {
      /* left: op(A) X = B, X [3, 2]; right: X op(A) = B, X [2, 3]. */
      double at[9];
      for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) at[i * 3 + j] = adj ? a[j * 3 + i] : a[i * 3 + j];
      if (left) matmul(b, at, x, 3, 3, 2, 0);
      else matmul(b, x, at, 2, 3, 3, 0);
      hpu_node_t s = node(HPU_OP_LINALG_LU_SOLVE);
      s.num_inputs = 3, s.num_outputs = 1;
      s.inputs[0] = f.outputs[0];
      s.inputs[1] = f.outputs[1];
      s.inputs[2] = T(b, HPU_FLOAT64, 2, left ? 3 : 2, left ? 2 : 3, 0);
      s.outputs[0] = T(out, HPU_FLOAT64, 2, left ? 3 : 2, left ? 2 : 3, 0);
      s.params.nn.i[0] = left, s.params.nn.i[1] = adj;
      CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&s), HPU_SUCCESS);
      CU_ASSERT_EQUAL_FATAL(hpu_node_execute(&s), HPU_SUCCESS);
      for (int i = 0; i < 6; i++) CU_ASSERT_DOUBLE_EQUAL(out[i], x[i], 1e-12);
    }
  /* Pivots that are not LU's would make getrs read outside the matrix. */
  piv[1] = 7;
  hpu_node_t s = node(HPU_OP_LINALG_LU_SOLVE);
  s.num_inputs = 3, s.num_outputs = 1;
  s.inputs[0] = f.outputs[0], s.inputs[1] = f.outputs[1];
  s.inputs[2] = T(b, HPU_FLOAT64, 2, 3, 2, 0);
  s.outputs[0] = T(out, HPU_FLOAT64, 2, 3, 2, 0);
  s.params.nn.i[0] = 1;
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&s), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&s), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "pivots must be in [1, 3]"));
}

static void test_cholesky(void) {
  /* A = L L^T with L known; then a matrix that is not positive-definite. */
  double l[9] = {2, 0, 0, -1, 3, 0, 0.5, 1, 1.5}, a[18], out[18];
  int32_t info[2];
  matmul(a, l, l, 3, 3, 3, 0);
  for (int i = 0; i < 3; i++) /* matmul(l, l) is L L, fix to L L^T */
    for (int j = 0; j < 3; j++) {
      double s = 0;
      for (int k = 0; k < 3; k++) s += l[i * 3 + k] * l[j * 3 + k];
      a[i * 3 + j] = s;
    }
  double npd[9] = {1, 2, 0, 2, 1, 0, 0, 0, 1};
  memcpy(a + 9, npd, sizeof npd);
  for (int upper = 0; upper < 2; upper++) {
    hpu_node_t n = node(HPU_OP_LINALG_CHOLESKY);
    n.num_inputs = 1, n.num_outputs = 2;
    n.inputs[0] = T(a, HPU_FLOAT64, 3, 2, 3, 3);
    n.outputs[0] = T(out, HPU_FLOAT64, 3, 2, 3, 3);
    n.outputs[1] = T(info, HPU_INT32, 1, 2, 0, 0);
    n.params.nn.i[0] = upper;
    CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&n), HPU_SUCCESS);
    CU_ASSERT_EQUAL_FATAL(hpu_node_execute(&n), HPU_SUCCESS);
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++)
        CU_ASSERT_DOUBLE_EQUAL(out[i * 3 + j], upper ? l[j * 3 + i] : l[i * 3 + j], 1e-12);
    CU_ASSERT_EQUAL(info[0], 0);
    CU_ASSERT_EQUAL(info[1], 2);
  }
}

static void test_svd_eigh(void) {
  enum { M = 4, N = 3 };
  double u[M * M], v[N * N], s[N] = {5, 2, 0.5}, us[M * N], a[M * N];
  orthogonal(u, M, 0.3);
  orthogonal(v, N, 1.1);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) us[i * N + j] = u[i * M + j] * s[j];
  for (int i = 0; i < M; i++) /* A = U[:, :3] S V^T */
    for (int j = 0; j < N; j++) {
      double t = 0;
      for (int k = 0; k < N; k++) t += us[i * N + k] * v[j * N + k];
      a[i * N + j] = t;
    }
  for (int full = 0; full < 2; full++) {
    double U[M * M], S[N], Vh[N * N], r[M * N];
    int uc = full ? M : N;
    hpu_node_t n = node(HPU_OP_LINALG_SVD);
    n.num_inputs = 1, n.num_outputs = 3;
    n.inputs[0] = T(a, HPU_FLOAT64, 2, M, N, 0);
    n.outputs[0] = T(U, HPU_FLOAT64, 2, M, uc, 0);
    n.outputs[1] = T(S, HPU_FLOAT64, 1, N, 0, 0);
    n.outputs[2] = T(Vh, HPU_FLOAT64, 2, N, N, 0);
    n.params.nn.i[0] = full;
    CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&n), HPU_SUCCESS);
    CU_ASSERT_EQUAL_FATAL(hpu_node_execute(&n), HPU_SUCCESS);
    for (int j = 0; j < N; j++) CU_ASSERT_DOUBLE_EQUAL(S[j], s[j], 1e-12);
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        double t = 0;
        for (int k = 0; k < N; k++) t += U[i * uc + k] * S[k] * Vh[k * N + j];
        r[i * N + j] = t;
      }
    for (int i = 0; i < M * N; i++) CU_ASSERT_DOUBLE_EQUAL(r[i], a[i], 1e-12);
  }
  /* eigh of Q diag(w) Q^T, read from the lower triangle only. */
  double q[9], w[3] = {2, -1, 0.25}, sym[9], ev[3], vec[9];
  orthogonal(q, 3, 0.9);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      double t = 0;
      for (int k = 0; k < 3; k++) t += q[i * 3 + k] * w[k] * q[j * 3 + k];
      sym[i * 3 + j] = j > i ? 1e6 : t; /* garbage above the diagonal: not read */
    }
  hpu_node_t e = node(HPU_OP_LINALG_EIGH);
  e.num_inputs = 1, e.num_outputs = 2;
  e.inputs[0] = T(sym, HPU_FLOAT64, 2, 3, 3, 0);
  e.outputs[0] = T(ev, HPU_FLOAT64, 1, 3, 0, 0);
  e.outputs[1] = T(vec, HPU_FLOAT64, 2, 3, 3, 0);
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&e), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_node_execute(&e), HPU_SUCCESS);
  CU_ASSERT_DOUBLE_EQUAL(ev[0], -1, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(ev[1], 0.25, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(ev[2], 2, 1e-12);
  for (int k = 0; k < 3; k++) /* each column is a unit eigenvector */
    for (int i = 0; i < 3; i++) {
      double t = 0;
      for (int j = 0; j < 3; j++) t += (j > i ? sym[j * 3 + i] : sym[i * 3 + j]) * vec[j * 3 + k];
      CU_ASSERT_DOUBLE_EQUAL(t, ev[k] * vec[i * 3 + k], 1e-12);
    }
}

static void test_qr(void) {
  enum { M = 4, N = 2 };
  float a[M * N] = {1, 2, 3, -1, 0.5f, 4, -2, 1}, q[M * M], r[M * N];
  for (int complete = 0; complete < 2; complete++) {
    int qc = complete ? M : N, rr = complete ? M : N;
    hpu_node_t n = node(HPU_OP_LINALG_QR);
    n.num_inputs = 1, n.num_outputs = 2;
    n.inputs[0] = T(a, HPU_FLOAT32, 2, M, N, 0);
    n.outputs[0] = T(q, HPU_FLOAT32, 2, M, qc, 0);
    n.outputs[1] = T(r, HPU_FLOAT32, 2, rr, N, 0);
    n.params.nn.i[0] = complete;
    CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&n), HPU_SUCCESS);
    CU_ASSERT_EQUAL_FATAL(hpu_node_execute(&n), HPU_SUCCESS);
    for (int i = 0; i < rr; i++)
      for (int j = 0; j < i && j < N; j++) CU_ASSERT_EQUAL(r[i * N + j], 0.0f);
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        float t = 0;
        for (int k = 0; k < rr; k++) t += q[i * qc + k] * r[k * N + j];
        CU_ASSERT_DOUBLE_EQUAL(t, a[i * N + j], 1e-5);
      }
    for (int i = 0; i < qc; i++)
      for (int j = 0; j < qc; j++) {
        float t = 0;
        for (int k = 0; k < M; k++) t += q[k * qc + i] * q[k * qc + j];
        CU_ASSERT_DOUBLE_EQUAL(t, i == j, 1e-5);
      }
  }
}

static void test_solve_triangular(void) {
  double a[9] = {2, 0, 0, 1, -3, 0, 0.5, 4, 1}, x[6] = {1, 2, -1, 0.5, 3, -2}, b[6];
  for (int left = 0; left < 2; left++) {
    if (left) matmul(b, a, x, 3, 3, 2, 0);
    else matmul(b, x, a, 2, 3, 3, 0);
    hpu_node_t n = node(HPU_OP_LINALG_SOLVE_TRIANGULAR);
    n.num_inputs = 2, n.num_outputs = 1;
    n.inputs[0] = T(a, HPU_FLOAT64, 2, 3, 3, 0);
    n.inputs[1] = T(b, HPU_FLOAT64, 2, left ? 3 : 2, left ? 2 : 3, 0);
    n.outputs[0] = n.inputs[1]; /* in place */
    n.params.nn.i[0] = 0, n.params.nn.i[1] = left;
    CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&n), HPU_SUCCESS);
    CU_ASSERT_EQUAL_FATAL(hpu_node_execute(&n), HPU_SUCCESS);
    for (int i = 0; i < 6; i++) CU_ASSERT_DOUBLE_EQUAL(b[i], x[i], 1e-12);
  }
}

static void test_lu_unpack(void) {
  /* Swaps (1 3)(2 3) of rows 0..2: row i of P A is row perm[i] of A. */
  int32_t piv[2] = {3, 3};
  double p[9];
  hpu_node_t n = node(HPU_OP_LINALG_LU_UNPACK);
  n.num_inputs = 1, n.num_outputs = 1;
  n.inputs[0] = T(piv, HPU_INT32, 1, 2, 0, 0);
  n.outputs[0] = T(p, HPU_FLOAT64, 2, 3, 3, 0);
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_node_execute(&n), HPU_SUCCESS);
  /* perm: [0 1 2] -> swap 0,2 -> [2 1 0] -> swap 1,2 -> [2 0 1]; P[perm[i]][i] = 1 */
  double want[9] = {0, 1, 0, 0, 0, 1, 1, 0, 0};
  for (int i = 0; i < 9; i++) CU_ASSERT_EQUAL(p[i], want[i]);
  piv[0] = 4;
  CU_ASSERT_EQUAL(hpu_node_execute(&n), HPU_ERROR_INVALID_ARGUMENT);
}

static void test_householder(void) {
  /* geqrf then orgqr gives the Q of QR; ormqr applies Q^T to A, giving R. */
  enum { M = 4, N = 3 };
  double a[M * N] = {2, -1, 0.5, 1, 3, -2, 0, 1, 4, -1, 2, 1}, qr[M * N], tau[N], q[M * N], r[M * N];
  hpu_node_t g = node(HPU_OP_LINALG_GEQRF);
  g.num_inputs = 1, g.num_outputs = 2;
  g.inputs[0] = T(a, HPU_FLOAT64, 2, M, N, 0);
  g.outputs[0] = T(qr, HPU_FLOAT64, 2, M, N, 0);
  g.outputs[1] = T(tau, HPU_FLOAT64, 1, N, 0, 0);
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&g), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_node_execute(&g), HPU_SUCCESS);
  hpu_node_t h = node(HPU_OP_LINALG_HOUSEHOLDER_PRODUCT);
  h.num_inputs = 2, h.num_outputs = 1;
  h.inputs[0] = g.outputs[0], h.inputs[1] = g.outputs[1];
  h.outputs[0] = T(q, HPU_FLOAT64, 2, M, N, 0);
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&h), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_node_execute(&h), HPU_SUCCESS);
  for (int i = 0; i < M; i++) /* Q R = A with R = geqrf's upper triangle */
    for (int j = 0; j < N; j++) {
      double t = 0;
      for (int k = 0; k <= j; k++) t += q[i * N + k] * qr[k * N + j];
      CU_ASSERT_DOUBLE_EQUAL(t, a[i * N + j], 1e-12);
    }
  hpu_node_t o = node(HPU_OP_LINALG_ORMQR);
  o.num_inputs = 3, o.num_outputs = 1;
  o.inputs[0] = g.outputs[0], o.inputs[1] = g.outputs[1];
  o.inputs[2] = T(a, HPU_FLOAT64, 2, M, N, 0);
  o.outputs[0] = T(r, HPU_FLOAT64, 2, M, N, 0);
  o.params.nn.i[0] = 1, o.params.nn.i[1] = 1; /* Q^T A */
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&o), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_node_execute(&o), HPU_SUCCESS);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) CU_ASSERT_DOUBLE_EQUAL(r[i * N + j], j >= i ? qr[i * N + j] : 0, 1e-12);
}

static void test_ldl_and_lstsq(void) {
  /* An indefinite symmetric matrix (2x2 pivots) and a known solution. */
  double a[9] = {0, 1, 2, 1, 0, 3, 2, 3, 0}, x[3] = {1, -2, 0.5}, b[3], ld[9], out[3];
  int32_t piv[3], info;
  matmul(b, a, x, 3, 3, 1, 0);
  hpu_node_t f = node(HPU_OP_LINALG_LDL_FACTOR);
  f.num_inputs = 1, f.num_outputs = 3;
  f.inputs[0] = T(a, HPU_FLOAT64, 2, 3, 3, 0);
  f.outputs[0] = T(ld, HPU_FLOAT64, 2, 3, 3, 0);
  f.outputs[1] = T(piv, HPU_INT32, 1, 3, 0, 0);
  f.outputs[2] = T(&info, HPU_INT32, 0, 0, 0, 0);
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&f), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_node_execute(&f), HPU_SUCCESS);
  CU_ASSERT_EQUAL(info, 0);
  CU_ASSERT_EQUAL(ld[1], 0); /* upper triangle zeroed */
  hpu_node_t s = node(HPU_OP_LINALG_LDL_SOLVE);
  s.num_inputs = 3, s.num_outputs = 1;
  s.inputs[0] = f.outputs[0], s.inputs[1] = f.outputs[1];
  s.inputs[2] = T(b, HPU_FLOAT64, 2, 3, 1, 0);
  s.outputs[0] = T(out, HPU_FLOAT64, 2, 3, 1, 0);
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&s), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_node_execute(&s), HPU_SUCCESS);
  for (int i = 0; i < 3; i++) CU_ASSERT_DOUBLE_EQUAL(out[i], x[i], 1e-12);
  /* Least squares: a consistent tall system has the exact solution. */
  double ta[8] = {1, 0, 0, 1, 1, 1, 2, -1}, tx[2] = {3, -1}, tb[4], sol[4];
  int64_t rank = -1;
  matmul(tb, ta, tx, 4, 2, 1, 0);
  hpu_node_t l = node(HPU_OP_LINALG_LSTSQ);
  l.num_inputs = 2, l.num_outputs = 2;
  l.inputs[0] = T(ta, HPU_FLOAT64, 2, 4, 2, 0);
  l.inputs[1] = T(tb, HPU_FLOAT64, 2, 4, 1, 0);
  l.outputs[0] = T(sol, HPU_FLOAT64, 2, 4, 1, 0); /* max(m, n) rows */
  l.outputs[1] = T(&rank, HPU_INT64, 0, 0, 0, 0);
  l.params.nn.s[0] = hpu_scalar_float(1e-12);
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&l), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_node_execute(&l), HPU_SUCCESS);
  CU_ASSERT_EQUAL(rank, 2);
  for (int i = 0; i < 2; i++) CU_ASSERT_DOUBLE_EQUAL(sol[i], tx[i], 1e-12);
  l.params.nn.i[0] = 1; /* gels: the same solution, and zero residual components */
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&l), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_node_execute(&l), HPU_SUCCESS);
  for (int i = 0; i < 2; i++) CU_ASSERT_DOUBLE_EQUAL(sol[i], tx[i], 1e-12);
  for (int i = 2; i < 4; i++) CU_ASSERT_DOUBLE_EQUAL(sol[i], 0, 1e-12);
  double singular[8] = {1, 0, 2, 0, 3, 0, 4, 0}; /* rank 1: a zero column */
  l.inputs[0] = T(singular, HPU_FLOAT64, 2, 4, 2, 0);
  CU_ASSERT_EQUAL(hpu_node_execute(&l), HPU_ERROR_INVALID_ARGUMENT);
}

static void test_refused(void) {
  uint16_t h[4] = {0};
  double a[6], lu[6];
  int32_t piv[2], info;
  hpu_node_t n = node(HPU_OP_LINALG_LU_FACTOR);
  n.num_inputs = 1, n.num_outputs = 3;
  n.inputs[0] = T(h, HPU_FLOAT16, 2, 2, 2, 0);
  n.outputs[0] = T(lu, HPU_FLOAT64, 2, 2, 2, 0);
  n.outputs[1] = T(piv, HPU_INT32, 1, 2, 0, 0);
  n.outputs[2] = T(&info, HPU_INT32, 0, 0, 0, 0);
  CU_ASSERT_EQUAL(hpu_node_validate(&n), HPU_ERROR_UNSUPPORTED); /* as the CPU, no half LU */
  n.inputs[0] = T(a, HPU_FLOAT64, 2, 3, 2, 0);
  n.inputs[0].sizes[0] = 2, n.inputs[0].strides[0] = 1, n.inputs[0].strides[1] = 2; /* transposed */
  CU_ASSERT_EQUAL(hpu_node_validate(&n), HPU_ERROR_INVALID_ARGUMENT);
  n.inputs[0] = T(a, HPU_FLOAT64, 2, 3, 2, 0);
  n.outputs[0] = T(lu, HPU_FLOAT64, 2, 3, 2, 0);
  CU_ASSERT_EQUAL(hpu_node_validate(&n), HPU_SUCCESS);
  n.outputs[1] = T(piv, HPU_INT32, 1, 1, 0, 0); /* min(3, 2) pivots, not 1 */
  CU_ASSERT_EQUAL(hpu_node_validate(&n), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "pivots"));
  n.outputs[1] = T(piv, HPU_INT32, 1, 2, 0, 0);
  n.outputs[0] = n.inputs[0]; /* an output over the input */
  CU_ASSERT_EQUAL(hpu_node_validate(&n), HPU_ERROR_INVALID_ARGUMENT);
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("linalg", NULL, NULL);
  CU_add_test(s, "LU: P A = L U, a singular matrix's info", test_lu_factor);
  CU_add_test(s, "LU solve: left / right, adjoint, bad pivots", test_lu_solve);
  CU_add_test(s, "Cholesky of L L^T, upper and lower, info", test_cholesky);
  CU_add_test(s, "SVD and eigh of matrices with known values", test_svd_eigh);
  CU_add_test(s, "QR: Q R = A, Q orthonormal, reduced and complete", test_qr);
  CU_add_test(s, "triangular solves in place, left and right", test_solve_triangular);
  CU_add_test(s, "lu_unpack: the permutation of the pivots", test_lu_unpack);
  CU_add_test(s, "geqrf, householder_product and ormqr agree with QR", test_householder);
  CU_add_test(s, "LDL^T solve of an indefinite matrix, least squares", test_ldl_and_lstsq);
  CU_add_test(s, "refused dtypes, layouts, shapes and overlaps", test_refused);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
