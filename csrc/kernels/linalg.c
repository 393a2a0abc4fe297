/* The linalg family (hpu/ops_linalg.def): argument checks and dispatch to
 * the float32 / float64 kernels of linalg_tmpl.h. Everything a kernel
 * relies on -- operand counts, dtypes, contiguity, shapes -- is checked
 * here, so that LAPACK never reads or writes outside an operand. */
#include <stdio.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/linalg.h"

#define INVALID HPU_ERROR_INVALID_ARGUMENT

hpu_linalg_dims_t hpu_linalg_dims(const hpu_tensor_t *t) {
  hpu_linalg_dims_t d = {1, 0, 0};
  int nd = t->ndim;
  for (int i = 0; i < nd - 2; i++) d.batch *= t->sizes[i];
  d.m = nd >= 2 ? t->sizes[nd - 2] : 0;
  d.n = nd >= 2 ? t->sizes[nd - 1] : 0;
  return d;
}

/* t is a valid contiguous tensor of dtype dt whose dims are ref's first
 * `nbatch` dims followed by `ntrail` dims `trail`. */
static hpu_status_t check_operand(const char *name, const char *role, const hpu_tensor_t *t,
                                  hpu_dtype_t dt, const hpu_tensor_t *ref, int nbatch, int ntrail,
                                  const int64_t *trail) {
  HPU_TRY(hpu_check_tensor(name, role, 0, t));
  if (t->dtype != dt)
    return hpu_error(INVALID, "%s: %s must be %s, got %s", name, role, hpu_dtype_name(dt),
                     hpu_dtype_name(t->dtype));
  if (!hpu_tensor_is_contiguous(t)) return hpu_error(INVALID, "%s: %s must be contiguous", name, role);
  char got[HPU_MAX_DIMS * 22 + 4];
  hpu_shape_str(t, got, sizeof got);
  if (t->ndim != nbatch + ntrail) return hpu_error(INVALID, "%s: %s has the wrong shape %s", name, role, got);
  for (int i = 0; i < nbatch; i++)
    if (t->sizes[i] != ref->sizes[i])
      return hpu_error(INVALID, "%s: %s has batch dims %s unlike the first input's", name, role, got);
  for (int i = 0; i < ntrail; i++)
    if (t->sizes[nbatch + i] != trail[i])
      return hpu_error(INVALID, "%s: %s has the wrong shape %s", name, role, got);
  return HPU_SUCCESS;
}

static hpu_status_t check_counts(const hpu_node_t *nd, int nin, int out_lo, int out_hi) {
  const char *name = hpu_op_name(nd->op);
  if (nd->num_inputs != nin) return hpu_error(INVALID, "%s: expects %d input(s), got %d", name, nin, nd->num_inputs);
  if (nd->num_outputs < out_lo || nd->num_outputs > out_hi)
    return hpu_error(INVALID, "%s: expects %d to %d outputs, got %d", name, out_lo, out_hi, nd->num_outputs);
  const hpu_tensor_t *a = &nd->inputs[0];
  HPU_TRY(hpu_check_tensor(name, "input", 0, a));
  if (a->dtype != HPU_FLOAT32 && a->dtype != HPU_FLOAT64)
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: expects float32 or float64, got %s", name, hpu_dtype_name(a->dtype));
  if (a->ndim < 2) return hpu_error(INVALID, "%s: the input must have at least 2 dims, got %d", name, a->ndim);
  if (!hpu_tensor_is_contiguous(a)) return hpu_error(INVALID, "%s: the input must be contiguous", name);
  return HPU_SUCCESS;
}

static hpu_status_t check_outputs_disjoint(const hpu_node_t *nd, int alias_in) {
  const char *name = hpu_op_name(nd->op);
  for (int k = 0; k < nd->num_outputs; k++)
    for (int i = 0; i < nd->num_inputs; i++)
      HPU_TRY(hpu_check_overlap(name, &nd->outputs[k], i, &nd->inputs[i], k == 0 && i == alias_in));
  return HPU_SUCCESS;
}

hpu_status_t hpu_validate_linalg(const hpu_node_t *nd) {
  const char *name = hpu_op_name(nd->op);
  const hpu_tensor_t *a = &nd->inputs[0];
  const int64_t *p = nd->params.nn.i;
  int nb = a->ndim - 2;
  hpu_linalg_dims_t d = hpu_linalg_dims(a);
  int64_t k = d.m < d.n ? d.m : d.n;
  hpu_dtype_t dt = a->dtype;
  switch (nd->op) {
    case HPU_OP_LINALG_LU_FACTOR: {
      HPU_TRY(check_counts(nd, 1, 3, 3));
      HPU_TRY(check_operand(name, "LU", &nd->outputs[0], dt, a, nb, 2, &a->sizes[nb]));
      HPU_TRY(check_operand(name, "pivots", &nd->outputs[1], HPU_INT32, a, nb, 1, &k));
      HPU_TRY(check_operand(name, "info", &nd->outputs[2], HPU_INT32, a, nb, 0, NULL));
      break;
    }
    case HPU_OP_LINALG_LU_SOLVE: {
      HPU_TRY(check_counts(nd, 3, 1, 1));
      if (d.m != d.n) return hpu_error(INVALID, "%s: LU must be square", name);
      HPU_TRY(check_operand(name, "pivots", &nd->inputs[1], HPU_INT32, a, nb, 1, &d.n));
      const hpu_tensor_t *b = &nd->inputs[2];
      hpu_linalg_dims_t db = hpu_linalg_dims(b);
      if (b->ndim != a->ndim || (p[0] ? db.m : db.n) != d.n)
        return hpu_error(INVALID, "%s: B must be [*, %lld, k] (left) or [*, k, %lld] (right)", name,
                         (long long)d.n, (long long)d.n);
      HPU_TRY(check_operand(name, "B", b, dt, a, nb, 2, &b->sizes[nb]));
      HPU_TRY(check_operand(name, "X", &nd->outputs[0], dt, a, nb, 2, &b->sizes[nb]));
      break;
    }
    case HPU_OP_LINALG_CHOLESKY: case HPU_OP_LINALG_EIGH: {
      int chol = nd->op == HPU_OP_LINALG_CHOLESKY;
      HPU_TRY(check_counts(nd, 1, chol ? 2 : 1, 2));
      if (d.m != d.n) return hpu_error(INVALID, "%s: A must be square", name);
      if (chol) {
        HPU_TRY(check_operand(name, "L", &nd->outputs[0], dt, a, nb, 2, &a->sizes[nb]));
        HPU_TRY(check_operand(name, "info", &nd->outputs[1], HPU_INT32, a, nb, 0, NULL));
      } else {
        HPU_TRY(check_operand(name, "eigenvalues", &nd->outputs[0], dt, a, nb, 1, &d.n));
        if (nd->num_outputs == 2)
          HPU_TRY(check_operand(name, "eigenvectors", &nd->outputs[1], dt, a, nb, 2, &a->sizes[nb]));
      }
      break;
    }
    case HPU_OP_LINALG_SVD: {
      HPU_TRY(check_counts(nd, 1, 1, 3));
      if (nd->num_outputs == 2) return hpu_error(INVALID, "%s: expects 1 or 3 outputs, got 2", name);
      int uv = nd->num_outputs == 3, full = p[0] != 0;
      int64_t us[2] = {d.m, full ? d.m : k}, vs[2] = {full ? d.n : k, d.n};
      HPU_TRY(check_operand(name, "S", &nd->outputs[uv], dt, a, nb, 1, &k));
      if (uv) {
        HPU_TRY(check_operand(name, "U", &nd->outputs[0], dt, a, nb, 2, us));
        HPU_TRY(check_operand(name, "Vh", &nd->outputs[2], dt, a, nb, 2, vs));
      }
      break;
    }
    case HPU_OP_LINALG_QR: {
      if (p[0] < 0 || p[0] > 2) return hpu_error(INVALID, "%s: mode %lld is not 0, 1 or 2", name, (long long)p[0]);
      int ronly = p[0] == 2, complete = p[0] == 1;
      HPU_TRY(check_counts(nd, 1, ronly ? 1 : 2, ronly ? 1 : 2));
      int64_t qs[2] = {d.m, complete ? d.m : k}, rs[2] = {complete ? d.m : k, d.n};
      if (!ronly) HPU_TRY(check_operand(name, "Q", &nd->outputs[0], dt, a, nb, 2, qs));
      HPU_TRY(check_operand(name, "R", &nd->outputs[ronly ? 0 : 1], dt, a, nb, 2, rs));
      break;
    }
    case HPU_OP_LINALG_SOLVE_TRIANGULAR: {
      HPU_TRY(check_counts(nd, 2, 1, 1));
      if (d.m != d.n) return hpu_error(INVALID, "%s: A must be square", name);
      const hpu_tensor_t *b = &nd->inputs[1];
      hpu_linalg_dims_t db = hpu_linalg_dims(b);
      if (b->ndim != a->ndim || (p[1] ? db.m : db.n) != d.n)
        return hpu_error(INVALID, "%s: B must be [*, %lld, k] (left) or [*, k, %lld] (right)", name,
                         (long long)d.n, (long long)d.n);
      HPU_TRY(check_operand(name, "B", b, dt, a, nb, 2, &b->sizes[nb]));
      HPU_TRY(check_operand(name, "X", &nd->outputs[0], dt, a, nb, 2, &b->sizes[nb]));
      return check_outputs_disjoint(nd, 1);
    }
    case HPU_OP_LINALG_GEQRF: {
      HPU_TRY(check_counts(nd, 1, 2, 2));
      HPU_TRY(check_operand(name, "QR", &nd->outputs[0], dt, a, nb, 2, &a->sizes[nb]));
      HPU_TRY(check_operand(name, "tau", &nd->outputs[1], dt, a, nb, 1, &k));
      break;
    }
    case HPU_OP_LINALG_HOUSEHOLDER_PRODUCT: case HPU_OP_LINALG_ORMQR: {
      int orm = nd->op == HPU_OP_LINALG_ORMQR;
      HPU_TRY(check_counts(nd, orm ? 3 : 2, 1, 1));
      const hpu_tensor_t *tau = &nd->inputs[1];
      if (tau->ndim != a->ndim - 1) return hpu_error(INVALID, "%s: tau must have one dim less than the input", name);
      int64_t kt = tau->sizes[tau->ndim - 1];
      HPU_TRY(check_operand(name, "tau", tau, dt, a, nb, 1, &kt));
      if (!orm) {
        if (!(d.m >= d.n && d.n >= kt))
          return hpu_error(INVALID, "%s: needs rows >= columns >= tau's length, got [%lld, %lld] and %lld", name,
                           (long long)d.m, (long long)d.n, (long long)kt);
        HPU_TRY(check_operand(name, "Q", &nd->outputs[0], dt, a, nb, 2, &a->sizes[nb]));
        break;
      }
      const hpu_tensor_t *c = &nd->inputs[2];
      if (c->ndim != a->ndim) return hpu_error(INVALID, "%s: C must have the input's number of dims", name);
      hpu_linalg_dims_t dc = hpu_linalg_dims(c);
      int64_t mn = p[0] ? dc.m : dc.n;
      if (d.m != mn || kt > d.n || kt > mn)
        return hpu_error(INVALID, "%s: the reflectors [%lld, %lld] with %lld taus do not fit C [%lld, %lld]", name,
                         (long long)d.m, (long long)d.n, (long long)kt, (long long)dc.m, (long long)dc.n);
      HPU_TRY(check_operand(name, "C", c, dt, a, nb, 2, &c->sizes[nb]));
      HPU_TRY(check_operand(name, "the output", &nd->outputs[0], dt, a, nb, 2, &c->sizes[nb]));
      break;
    }
    case HPU_OP_LINALG_LU_UNPACK: {
      /* in0 is the pivots here (int32, at least 1 dim); out0 is P. */
      if (nd->num_inputs != 1 || nd->num_outputs != 1)
        return hpu_error(INVALID, "%s: expects 1 input and 1 output", name);
      HPU_TRY(hpu_check_tensor(name, "pivots", 0, a));
      const hpu_tensor_t *P = &nd->outputs[0];
      HPU_TRY(hpu_check_tensor(name, "P", 0, P));
      if (a->ndim < 1 || P->ndim != a->ndim + 1)
        return hpu_error(INVALID, "%s: P must have one dim more than the pivots", name);
      if (P->dtype != HPU_FLOAT32 && P->dtype != HPU_FLOAT64)
        return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: P must be float32 or float64, got %s", name,
                         hpu_dtype_name(P->dtype));
      int64_t pm = P->sizes[P->ndim - 1], ps[2] = {pm, pm};
      if (a->sizes[a->ndim - 1] > pm) return hpu_error(INVALID, "%s: more pivots than rows", name);
      HPU_TRY(check_operand(name, "pivots", a, HPU_INT32, P, a->ndim - 1, 1, &a->sizes[a->ndim - 1]));
      HPU_TRY(check_operand(name, "P", P, P->dtype, a, a->ndim - 1, 2, ps));
      break;
    }
    case HPU_OP_LINALG_LDL_FACTOR: {
      HPU_TRY(check_counts(nd, 1, 3, 3));
      if (d.m != d.n) return hpu_error(INVALID, "%s: A must be square", name);
      HPU_TRY(check_operand(name, "LD", &nd->outputs[0], dt, a, nb, 2, &a->sizes[nb]));
      HPU_TRY(check_operand(name, "pivots", &nd->outputs[1], HPU_INT32, a, nb, 1, &d.n));
      HPU_TRY(check_operand(name, "info", &nd->outputs[2], HPU_INT32, a, nb, 0, NULL));
      break;
    }
    case HPU_OP_LINALG_LDL_SOLVE: {
      HPU_TRY(check_counts(nd, 3, 1, 1));
      if (d.m != d.n) return hpu_error(INVALID, "%s: LD must be square", name);
      HPU_TRY(check_operand(name, "pivots", &nd->inputs[1], HPU_INT32, a, nb, 1, &d.n));
      const hpu_tensor_t *b = &nd->inputs[2];
      if (b->ndim != a->ndim || hpu_linalg_dims(b).m != d.n)
        return hpu_error(INVALID, "%s: B must be [*, %lld, k]", name, (long long)d.n);
      HPU_TRY(check_operand(name, "B", b, dt, a, nb, 2, &b->sizes[nb]));
      HPU_TRY(check_operand(name, "X", &nd->outputs[0], dt, a, nb, 2, &b->sizes[nb]));
      break;
    }
    case HPU_OP_LINALG_LSTSQ: {
      HPU_TRY(check_counts(nd, 2, 2, 2));
      const hpu_tensor_t *b = &nd->inputs[1];
      if (b->ndim != a->ndim || hpu_linalg_dims(b).m != d.m)
        return hpu_error(INVALID, "%s: B must be [*, %lld, k]", name, (long long)d.m);
      HPU_TRY(check_operand(name, "B", b, dt, a, nb, 2, &b->sizes[nb]));
      if (p[0] != 0 && p[0] != 1) return hpu_error(INVALID, "%s: driver %lld is not 0 (gelsy) or 1 (gels)", name, (long long)p[0]);
      int64_t xs[2] = {d.m > d.n ? d.m : d.n, b->sizes[b->ndim - 1]};
      HPU_TRY(check_operand(name, "X", &nd->outputs[0], dt, a, nb, 2, xs));
      HPU_TRY(check_operand(name, "rank", &nd->outputs[1], HPU_INT64, a, nb, 0, NULL));
      break;
    }
    default: return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: no kernel in this build", name);
  }
  HPU_TRY(check_outputs_disjoint(nd, -1));
  for (int i = 0; i < nd->num_outputs; i++) /* outputs of one node must not share memory */
    for (int j = 0; j < i; j++) HPU_TRY(hpu_check_overlap(name, &nd->outputs[i], j, &nd->outputs[j], 0));
  return HPU_SUCCESS;
}

#define DISPATCH(kernel) \
  return nd->inputs[0].dtype == HPU_FLOAT64 ? hpu_linalg_##kernel##_f64(nd) : hpu_linalg_##kernel##_f32(nd)

hpu_status_t hpu_execute_linalg(const hpu_node_t *nd) {
  switch (nd->op) {
    case HPU_OP_LINALG_LU_FACTOR: DISPATCH(lu_factor);
    case HPU_OP_LINALG_LU_SOLVE: DISPATCH(lu_solve);
    case HPU_OP_LINALG_CHOLESKY: DISPATCH(cholesky);
    case HPU_OP_LINALG_SVD: DISPATCH(svd);
    case HPU_OP_LINALG_EIGH: DISPATCH(eigh);
    case HPU_OP_LINALG_QR: DISPATCH(qr);
    case HPU_OP_LINALG_SOLVE_TRIANGULAR: DISPATCH(solve_triangular);
    case HPU_OP_LINALG_GEQRF: DISPATCH(geqrf);
    case HPU_OP_LINALG_HOUSEHOLDER_PRODUCT: DISPATCH(householder_product);
    case HPU_OP_LINALG_ORMQR: DISPATCH(ormqr);
    case HPU_OP_LINALG_LU_UNPACK:
      return nd->outputs[0].dtype == HPU_FLOAT64 ? hpu_linalg_lu_unpack_f64(nd) : hpu_linalg_lu_unpack_f32(nd);
    case HPU_OP_LINALG_LDL_FACTOR: DISPATCH(ldl_factor);
    case HPU_OP_LINALG_LDL_SOLVE: DISPATCH(ldl_solve);
    case HPU_OP_LINALG_LSTSQ: DISPATCH(lstsq);
    default: return hpu_error(HPU_ERROR_INTERNAL, "%s: no kernel in this build", hpu_op_name(nd->op));
  }
}
