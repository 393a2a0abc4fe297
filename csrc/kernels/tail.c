/* The tail family (hpu/ops_tailidx.def): validation and dispatch. Index
 * values are data: the kernels check them and fail the node with
 * HPU_ERROR_OUT_OF_RANGE, as the nn family's index kernels do. */
#include <stdint.h>

#include "hpu/op.h"
#include "hpu/status.h"
#include "kernels/kernels.h"
#include "kernels/tail.h"

#define INVALID HPU_ERROR_INVALID_ARGUMENT

static hpu_status_t counts(const hpu_node_t *n, int nin, int nout) {
  const char *name = hpu_op_name(n->op);
  if (n->num_inputs != nin || n->num_outputs != nout)
    return hpu_error(INVALID, "%s: expects %d input(s) and %d output(s), got %d and %d", name, nin, nout,
                     n->num_inputs, n->num_outputs);
  for (int i = 0; i < nin; i++) HPU_TRY(hpu_check_tensor(name, "input", i, &n->inputs[i]));
  for (int k = 0; k < nout; k++) HPU_TRY(hpu_check_node_output(n, k));
  return HPU_SUCCESS;
}

static hpu_status_t need_index(const char *name, const hpu_tensor_t *t) {
  if (t->dtype != HPU_INT64 && t->dtype != HPU_INT32)
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: the index must be int64 or int32, got %s", name,
                     hpu_dtype_name(t->dtype));
  return HPU_SUCCESS;
}

static hpu_status_t same_dtype(const char *name, const hpu_tensor_t *a, const hpu_tensor_t *b) {
  if (a->dtype != b->dtype)
    return hpu_error(INVALID, "%s: source is %s, the output %s", name, hpu_dtype_name(a->dtype),
                     hpu_dtype_name(b->dtype));
  return HPU_SUCCESS;
}

static hpu_status_t check_dim(const char *name, int64_t dim, const hpu_tensor_t *t) {
  hpu_tail_shape_t s = hpu_tail_shape(t);
  if (dim < 0 || dim >= s.nd)
    return hpu_error(INVALID, "%s: dim %lld out of range for %d dims", name, (long long)dim, s.nd);
  return HPU_SUCCESS;
}

static hpu_status_t shape_mismatch(const char *name, const char *what) {
  return hpu_error(INVALID, "%s: %s", name, what);
}

static hpu_status_t validate_scatter_reduce(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  HPU_TRY(counts(n, 2, 1));
  const hpu_tensor_t *idx = &n->inputs[0], *src = &n->inputs[1], *out = &n->outputs[0];
  int64_t dim = n->params.nn.i[0], kind = n->params.nn.i[1];
  HPU_TRY(check_dim(name, dim, out));
  if (kind < 0 || kind >= HPU_TAIL_REDUCE_COUNT)
    return hpu_error(INVALID, "%s: invalid reduction %lld", name, (long long)kind);
  HPU_TRY(need_index(name, idx));
  HPU_TRY(same_dtype(name, src, out));
  hpu_tail_shape_t si = hpu_tail_shape(idx), ss = hpu_tail_shape(src), so = hpu_tail_shape(out);
  if (ss.nd != so.nd) return shape_mismatch(name, "source and output ranks differ");
  if (n->params.nn.i[3]) { /* index_reduce */
    if (idx->ndim > 1) return shape_mismatch(name, "the index must be 1-d");
    if (si.sz[0] != ss.sz[dim]) return shape_mismatch(name, "the index length is not the source's size at dim");
    for (int d = 0; d < so.nd; d++)
      if (d != dim && ss.sz[d] != so.sz[d]) return shape_mismatch(name, "source and output sizes differ outside dim");
  } else {
    if (si.nd != so.nd) return shape_mismatch(name, "index and output ranks differ");
    for (int d = 0; d < so.nd; d++)
      if (si.sz[d] > ss.sz[d] || (d != dim && si.sz[d] > so.sz[d]))
        return shape_mismatch(name, "the index is larger than the source or the output");
  }
  return HPU_SUCCESS;
}

static hpu_status_t validate_cummaxmin(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  HPU_TRY(counts(n, 1, 2));
  const hpu_tensor_t *in = &n->inputs[0];
  HPU_TRY(check_dim(name, n->params.nn.i[0], in));
  for (int k = 0; k < 2; k++) {
    const hpu_tensor_t *o = &n->outputs[k];
    int ok = o->ndim == in->ndim;
    for (int d = 0; ok && d < in->ndim; d++) ok = o->sizes[d] == in->sizes[d];
    if (!ok) return shape_mismatch(name, "outputs must have the input's shape");
  }
  HPU_TRY(same_dtype(name, in, &n->outputs[0]));
  if (n->outputs[1].dtype != HPU_INT64) return hpu_error(INVALID, "%s: indices must be int64", name);
  return HPU_SUCCESS;
}

static hpu_status_t validate_take_put(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  HPU_TRY(counts(n, 2, 1));
  int put = n->params.nn.i[0] != 0;
  const hpu_tensor_t *idx = put ? &n->inputs[0] : &n->inputs[1];
  const hpu_tensor_t *flat = put ? &n->outputs[0] : &n->inputs[0];
  const hpu_tensor_t *other = put ? &n->inputs[1] : &n->outputs[0];
  HPU_TRY(need_index(name, idx));
  HPU_TRY(same_dtype(name, other, flat));
  if (hpu_tensor_numel(idx) != hpu_tensor_numel(other))
    return shape_mismatch(name, "the index and the values differ in numel");
  if (hpu_tensor_numel(idx) > 0 && hpu_tensor_numel(flat) == 0)
    return hpu_error(HPU_ERROR_OUT_OF_RANGE, "%s: out of range: tried to access an index on a tensor of 0 elements", name);
  return HPU_SUCCESS;
}

static hpu_status_t validate_index_fill(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  HPU_TRY(counts(n, 1, 1));
  HPU_TRY(check_dim(name, n->params.nn.i[0], &n->outputs[0]));
  HPU_TRY(need_index(name, &n->inputs[0]));
  if (n->inputs[0].ndim > 1) return shape_mismatch(name, "the index must be 0-d or 1-d");
  return hpu_check_scalar(name, "value", n->params.nn.s[0]);
}

static hpu_status_t validate_select(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  HPU_TRY(counts(n, 1, 2));
  const hpu_tensor_t *in = &n->inputs[0];
  int64_t dim = n->params.nn.i[0], pick = n->params.nn.i[1];
  HPU_TRY(check_dim(name, dim, in));
  if (pick < 0 || pick >= HPU_TAIL_SELECT_COUNT)
    return hpu_error(INVALID, "%s: invalid pick %lld", name, (long long)pick);
  hpu_tail_shape_t s = hpu_tail_shape(in);
  if (hpu_tensor_numel(in) > 0 && s.sz[dim] == 0) return shape_mismatch(name, "cannot select from an empty dim");
  if (pick == HPU_TAIL_SELECT_KTH && hpu_tensor_numel(in) > 0 &&
      (n->params.nn.i[2] < 1 || n->params.nn.i[2] > s.sz[dim]))
    return hpu_error(INVALID, "%s: k = %lld out of range for a dim of %lld", name, (long long)n->params.nn.i[2],
                     (long long)s.sz[dim]);
  for (int k = 0; k < 2; k++) {
    hpu_tail_shape_t o = hpu_tail_shape(&n->outputs[k]);
    int ok = o.nd == s.nd;
    for (int d = 0; ok && d < s.nd; d++) ok = o.sz[d] == (d == dim ? 1 : s.sz[d]);
    if (!ok) return shape_mismatch(name, "outputs must have the keepdim shape of the input");
  }
  HPU_TRY(same_dtype(name, in, &n->outputs[0]));
  if (n->outputs[1].dtype != HPU_INT64) return hpu_error(INVALID, "%s: indices must be int64", name);
  return HPU_SUCCESS;
}

static int contiguous_all(const hpu_node_t *n) {
  for (int i = 0; i < n->num_inputs; i++)
    if (!hpu_tensor_is_contiguous(&n->inputs[i])) return 0;
  for (int k = 0; k < n->num_outputs; k++)
    if (!hpu_tensor_is_contiguous(&n->outputs[k])) return 0;
  return 1;
}

static hpu_status_t validate_searchsorted(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  if (n->num_inputs != 2 && n->num_inputs != 3) return counts(n, 2, 1);
  HPU_TRY(counts(n, n->num_inputs, 1));
  const hpu_tensor_t *bd = &n->inputs[0], *val = &n->inputs[1], *out = &n->outputs[0];
  if (!contiguous_all(n)) return shape_mismatch(name, "every operand must be contiguous");
  HPU_TRY(same_dtype(name, bd, val));
  if (out->dtype != HPU_INT64 && out->dtype != HPU_INT32)
    return hpu_error(INVALID, "%s: the output must be int64 or int32, got %s", name, hpu_dtype_name(out->dtype));
  if (hpu_tensor_numel(out) != hpu_tensor_numel(val)) return shape_mismatch(name, "the output must have the values' shape");
  if (bd->ndim < 1) return shape_mismatch(name, "the boundaries must have at least one dim");
  int shared = n->params.nn.i[1] != 0;
  if (shared && bd->ndim != 1) return shape_mismatch(name, "shared boundaries must be 1-d");
  if (!shared) {
    int ok = bd->ndim == val->ndim;
    for (int d = 0; ok && d + 1 < bd->ndim; d++) ok = bd->sizes[d] == val->sizes[d];
    if (!ok) return shape_mismatch(name, "the boundaries and the values must agree but for the last dim");
  }
  if (n->num_inputs == 3) {
    const hpu_tensor_t *st = &n->inputs[2];
    if (st->dtype != HPU_INT64) return hpu_error(INVALID, "%s: the sorter must be int64", name);
    int ok = st->ndim == bd->ndim;
    for (int d = 0; ok && d < bd->ndim; d++) ok = st->sizes[d] == bd->sizes[d];
    if (!ok) return shape_mismatch(name, "the sorter must have the boundaries' shape");
  }
  return HPU_SUCCESS;
}

static hpu_status_t validate_histogram(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  if (n->num_inputs != 3 && n->num_inputs != 4) return counts(n, 3, 1);
  HPU_TRY(counts(n, n->num_inputs, 1));
  const hpu_tensor_t *x = &n->inputs[0], *edges = &n->inputs[1], *cnt = &n->inputs[2], *hist = &n->outputs[0];
  if (!contiguous_all(n)) return shape_mismatch(name, "every operand must be contiguous");
  if (!hpu_dtype_is_floating(x->dtype))
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: points must be floating, got %s", name, hpu_dtype_name(x->dtype));
  if (x->ndim != 2) return shape_mismatch(name, "the points must be [M, D]");
  HPU_TRY(same_dtype(name, edges, x));
  HPU_TRY(same_dtype(name, hist, x));
  if (edges->ndim != 1) return shape_mismatch(name, "the edges must be 1-d");
  if (cnt->dtype != HPU_INT64 || cnt->ndim != 1 || cnt->sizes[0] != x->sizes[1] || hist->ndim != x->sizes[1])
    return shape_mismatch(name, "one edge count and one histogram dim per point dim");
  if (n->num_inputs == 4) {
    HPU_TRY(same_dtype(name, &n->inputs[3], x));
    if (hpu_tensor_numel(&n->inputs[3]) != x->sizes[0]) return shape_mismatch(name, "one weight per point");
  }
  int64_t alg = n->params.nn.i[0];
  if (alg < 0 || alg >= HPU_TAIL_HIST_COUNT) return hpu_error(INVALID, "%s: invalid bin choice %lld", name, (long long)alg);
  return HPU_SUCCESS;
}

hpu_status_t hpu_validate_tailidx(const hpu_node_t *n) {
  switch (n->op) {
    case HPU_OP_TAIL_SCATTER_REDUCE: return validate_scatter_reduce(n);
    case HPU_OP_TAIL_CUMMAXMIN: return validate_cummaxmin(n);
    case HPU_OP_TAIL_TAKE_PUT: return validate_take_put(n);
    case HPU_OP_TAIL_INDEX_FILL: return validate_index_fill(n);
    case HPU_OP_TAIL_SELECT: return validate_select(n);
    case HPU_OP_TAIL_SEARCHSORTED: return validate_searchsorted(n);
    case HPU_OP_TAIL_HISTOGRAM: return validate_histogram(n);
    default: return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: no kernel in this build", hpu_op_name(n->op));
  }
}

hpu_status_t hpu_execute_tailidx(const hpu_node_t *n) {
  switch (n->op) {
    case HPU_OP_TAIL_SCATTER_REDUCE: return hpu_tail_scatter_reduce(n);
    case HPU_OP_TAIL_CUMMAXMIN: return hpu_tail_cummaxmin(n);
    case HPU_OP_TAIL_TAKE_PUT: return hpu_tail_take_put(n);
    case HPU_OP_TAIL_INDEX_FILL: return hpu_tail_index_fill(n);
    case HPU_OP_TAIL_SELECT: return hpu_tail_select(n);
    case HPU_OP_TAIL_SEARCHSORTED: return hpu_tail_searchsorted(n);
    case HPU_OP_TAIL_HISTOGRAM: return hpu_tail_histogram(n);
    default: return hpu_error(HPU_ERROR_INTERNAL, "%s: no kernel in this build", hpu_op_name(n->op));
  }
}
