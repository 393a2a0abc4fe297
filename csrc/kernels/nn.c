/* The nn op family: validation and dispatch of the codes listed in
 * hpu/ops_nn.def. Everything a kernel relies on is checked here except
 * index values (data), which the index kernels check themselves: a bad
 * index fails the node with HPU_ERROR_OUT_OF_RANGE, which the stream keeps
 * and the next synchronize reports (the shim turns it into IndexError). */
#include <stdint.h>

#include "hpu/op.h"
#include "hpu/status.h"
#include "kernels/kernels.h"
#include "kernels/nn_util.h"
#include "kernels/vision.h"

#define INVALID HPU_ERROR_INVALID_ARGUMENT

static int64_t numel(const hpu_tensor_t *t) { return hpu_tensor_numel(t); }

static int is_int_dtype(hpu_dtype_t t) {
  return t == HPU_INT64 || t == HPU_INT32 || t == HPU_INT16 || t == HPU_INT8 || t == HPU_UINT8;
}

static hpu_status_t counts(const hpu_node_t *n, int in_lo, int in_hi, int out_lo, int out_hi) {
  const char *name = hpu_op_name(n->op);
  if (n->num_inputs < in_lo || n->num_inputs > in_hi)
    return hpu_error(INVALID, "%s: expects %d to %d inputs, got %d", name, in_lo, in_hi,
                     n->num_inputs);
  if (n->num_outputs < out_lo || n->num_outputs > out_hi)
    return hpu_error(INVALID, "%s: expects %d to %d outputs, got %d", name, out_lo, out_hi,
                     n->num_outputs);
  for (int i = 0; i < n->num_inputs; i++) HPU_TRY(hpu_check_tensor(name, "input", i, &n->inputs[i]));
  return HPU_SUCCESS;
}

static hpu_status_t check_dim(const char *name, int64_t dim, const hpu_tensor_t *t) {
  int nd = t->ndim ? t->ndim : 1;
  if (dim < 0 || dim >= nd)
    return hpu_error(INVALID, "%s: dim %lld out of range for %d dims", name, (long long)dim, nd);
  return HPU_SUCCESS;
}

static int64_t size_at(const hpu_tensor_t *t, int64_t d) { return t->ndim ? t->sizes[d] : 1; }

static hpu_status_t same_shape(const char *name, const hpu_tensor_t *a, const hpu_tensor_t *b,
                               const char *what) {
  int ok = a->ndim == b->ndim;
  for (int d = 0; ok && d < a->ndim; d++) ok = a->sizes[d] == b->sizes[d];
  if (!ok) {
    char sa[256], sb[256];
    hpu_shape_str(a, sa, sizeof sa);
    hpu_shape_str(b, sb, sizeof sb);
    return hpu_error(INVALID, "%s: %s: shapes %s and %s differ", name, what, sa, sb);
  }
  return HPU_SUCCESS;
}

static hpu_status_t need_contig(const char *name, const hpu_tensor_t *t, const char *what) {
  if (!hpu_tensor_is_contiguous(t))
    return hpu_error(INVALID, "%s: %s must be contiguous", name, what);
  return HPU_SUCCESS;
}

static hpu_status_t need_index(const char *name, const hpu_tensor_t *t, const char *what) {
  if (!is_int_dtype(t->dtype))
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: %s must be an integer tensor, got %s", name,
                     what, hpu_dtype_name(t->dtype));
  return HPU_SUCCESS;
}

static hpu_status_t need_float(const char *name, const hpu_tensor_t *t, const char *what) {
  if (!hpu_dtype_is_floating(t->dtype))
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: %s must be floating, got %s", name, what,
                     hpu_dtype_name(t->dtype));
  return HPU_SUCCESS;
}

static hpu_status_t validate_reduce(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  HPU_TRY(counts(n, 1, 1, 1, 2));
  const hpu_tensor_t *in = &n->inputs[0];
  int64_t kind = n->params.nn.i[0], mask = n->params.nn.i[1];
  if (kind < 0 || kind >= HPU_REDUCE_KIND_COUNT)
    return hpu_error(INVALID, "%s: invalid reduction kind %lld", name, (long long)kind);
  if (n->num_outputs == 2 && kind != HPU_REDUCE_VAR && kind != HPU_REDUCE_STD)
    return hpu_error(INVALID, "%s: only var/std have a second output", name);
  if (in->ndim < 64 && (mask >> in->ndim) != 0 && in->ndim > 0)
    return hpu_error(INVALID, "%s: dim mask 0x%llx names dims beyond %d", name,
                     (unsigned long long)mask, in->ndim);
  for (int k = 0; k < n->num_outputs; k++) {
    HPU_TRY(hpu_check_node_output(n, k));
    const hpu_tensor_t *o = &n->outputs[k];
    int ok = o->ndim == in->ndim;
    for (int d = 0; ok && d < in->ndim; d++)
      ok = o->sizes[d] == (((mask >> d) & 1) ? 1 : in->sizes[d]);
    if (!ok) return hpu_error(INVALID, "%s: output %d is not the keepdim shape of the input", name, k);
  }
  if ((kind == HPU_REDUCE_VAR || kind == HPU_REDUCE_STD || kind == HPU_REDUCE_NORM ||
       kind == HPU_REDUCE_MEAN) &&
      !hpu_dtype_is_floating(n->outputs[0].dtype))
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: this reduction needs a floating output, got %s",
                     name, hpu_dtype_name(n->outputs[0].dtype));
  return HPU_SUCCESS;
}

static hpu_status_t validate_argreduce(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  HPU_TRY(counts(n, 1, 1, 1, 2));
  const hpu_tensor_t *in = &n->inputs[0];
  int64_t kind = n->params.nn.i[0], dim = n->params.nn.i[1];
  if (kind != HPU_REDUCE_AMAX && kind != HPU_REDUCE_AMIN)
    return hpu_error(INVALID, "%s: kind must be max or min", name);
  HPU_TRY(check_dim(name, dim, in));
  if (numel(in) > 0 && size_at(in, dim) == 0)
    return hpu_error(INVALID, "%s: cannot reduce an empty dim", name);
  for (int k = 0; k < n->num_outputs; k++) {
    HPU_TRY(hpu_check_node_output(n, k));
    const hpu_tensor_t *o = &n->outputs[k];
    int ok = o->ndim == in->ndim;
    for (int d = 0; ok && d < in->ndim; d++) ok = o->sizes[d] == (d == dim ? 1 : in->sizes[d]);
    if (!ok) return hpu_error(INVALID, "%s: output %d is not the keepdim shape of the input", name, k);
  }
  if (n->outputs[n->num_outputs - 1].dtype != HPU_INT64)
    return hpu_error(INVALID, "%s: indices must be int64", name);
  return HPU_SUCCESS;
}

static hpu_status_t validate_same_shape_op(const hpu_node_t *n, int nin, int contig) {
  const char *name = hpu_op_name(n->op);
  HPU_TRY(counts(n, nin, nin, 1, 1));
  HPU_TRY(hpu_check_node_output(n, 0));
  HPU_TRY(check_dim(name, n->params.nn.i[0], &n->inputs[0]));
  for (int i = 0; i < nin; i++) {
    HPU_TRY(same_shape(name, &n->inputs[i], &n->outputs[0], "input and output"));
    if (contig) HPU_TRY(need_contig(name, &n->inputs[i], "the input"));
  }
  if (contig) {
    HPU_TRY(need_contig(name, &n->outputs[0], "the output"));
    HPU_TRY(need_float(name, &n->outputs[0], "the output"));
  }
  return HPU_SUCCESS;
}

static hpu_status_t validate_cumsum(const hpu_node_t *n) {
  HPU_TRY(validate_same_shape_op(n, 1, 0));
  int64_t mode = n->params.nn.i[1];
  if (mode < 0 || mode > 2)
    return hpu_error(INVALID, "cumsum: invalid mode %lld (0 sum, 1 product, 2 log-sum-exp)", (long long)mode);
  if (mode == 2) HPU_TRY(need_float("logcumsumexp", &n->outputs[0], "the output"));
  return HPU_SUCCESS;
}

static hpu_status_t validate_layer_norm(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  int64_t flags = n->params.nn.i[0];
  int nin = 1 + (flags & 1) + ((flags >> 1) & 1);
  HPU_TRY(counts(n, nin, nin, 3, 3));
  const hpu_tensor_t *x = &n->inputs[0];
  if (x->ndim != 2) return hpu_error(INVALID, "%s: input must be [M, N]", name);
  HPU_TRY(need_contig(name, x, "the input"));
  HPU_TRY(need_float(name, x, "the input"));
  for (int i = 1; i < nin; i++)
    if (n->inputs[i].ndim != 1 || n->inputs[i].sizes[0] != x->sizes[1])
      return hpu_error(INVALID, "%s: weight/bias must be [N]", name);
  for (int k = 0; k < 3; k++) HPU_TRY(hpu_check_node_output(n, k));
  HPU_TRY(same_shape(name, x, &n->outputs[0], "input and output"));
  HPU_TRY(need_contig(name, &n->outputs[0], "the output"));
  for (int k = 1; k < 3; k++)
    if (numel(&n->outputs[k]) != x->sizes[0])
      return hpu_error(INVALID, "%s: mean/rstd must have M elements", name);
  return HPU_SUCCESS;
}

static hpu_status_t validate_layer_norm_backward(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  int64_t mask = n->params.nn.i[0], has_w = n->params.nn.i[1] != 0;
  HPU_TRY(counts(n, 3 + (int)has_w, 3 + (int)has_w, 3, 3));
  const hpu_tensor_t *dy = &n->inputs[0], *x = &n->inputs[1], *st = &n->inputs[2];
  if (x->ndim != 2) return hpu_error(INVALID, "%s: input must be [M, N]", name);
  int64_t M = x->sizes[0], N = x->sizes[1];
  HPU_TRY(same_shape(name, dy, x, "grad and input"));
  HPU_TRY(need_contig(name, dy, "the gradient"));
  HPU_TRY(need_contig(name, x, "the input"));
  HPU_TRY(need_float(name, x, "the input"));
  if (st->ndim != 2 || st->sizes[0] != 2 || st->sizes[1] != M)
    return hpu_error(INVALID, "%s: stats must be [2, M]", name);
  if (has_w && (n->inputs[3].ndim != 1 || n->inputs[3].sizes[0] != N))
    return hpu_error(INVALID, "%s: weight must be [N]", name);
  for (int k = 0; k < 3; k++) {
    if (!((mask >> k) & 1)) continue;
    HPU_TRY(hpu_check_node_output(n, k));
    if (k == 0) {
      HPU_TRY(same_shape(name, &n->outputs[0], x, "grad_input and input"));
      HPU_TRY(need_contig(name, &n->outputs[0], "grad_input"));
    } else if (numel(&n->outputs[k]) != N) {
      return hpu_error(INVALID, "%s: dweight/dbias must have N elements", name);
    }
  }
  return HPU_SUCCESS;
}

/* x [N, C, HxW] in G groups; the [C] parameters from input `first` on. */
static hpu_status_t check_group_norm_x(const hpu_node_t *n, const hpu_tensor_t *x, int64_t G,
                                       int first, int nparams) {
  const char *name = hpu_op_name(n->op);
  if (x->ndim != 3) return hpu_error(INVALID, "%s: input must be [N, C, HxW]", name);
  HPU_TRY(need_contig(name, x, "the input"));
  HPU_TRY(need_float(name, x, "the input"));
  int64_t C = x->sizes[1];
  if (G <= 0 || C % G != 0)
    return hpu_error(INVALID, "%s: %lld channels do not split into %lld groups", name,
                     (long long)C, (long long)G);
  for (int i = first; i < first + nparams; i++) {
    if (n->inputs[i].ndim != 1 || n->inputs[i].sizes[0] != C)
      return hpu_error(INVALID, "%s: weight/bias must be [C]", name);
    HPU_TRY(need_float(name, &n->inputs[i], "weight/bias"));
  }
  return HPU_SUCCESS;
}

static hpu_status_t validate_group_norm(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  int64_t flags = n->params.nn.i[0];
  int np = (int)(flags & 1) + (int)((flags >> 1) & 1);
  HPU_TRY(counts(n, 1 + np, 1 + np, 3, 3));
  const hpu_tensor_t *x = &n->inputs[0];
  HPU_TRY(check_group_norm_x(n, x, n->params.nn.i[1], 1, np));
  for (int k = 0; k < 3; k++) HPU_TRY(hpu_check_node_output(n, k));
  HPU_TRY(same_shape(name, x, &n->outputs[0], "input and output"));
  HPU_TRY(need_contig(name, &n->outputs[0], "the output"));
  for (int k = 1; k < 3; k++) {
    HPU_TRY(need_float(name, &n->outputs[k], "mean/rstd"));
    if (numel(&n->outputs[k]) != x->sizes[0] * n->params.nn.i[1])
      return hpu_error(INVALID, "%s: mean/rstd must have N * G elements", name);
  }
  return HPU_SUCCESS;
}

static hpu_status_t validate_group_norm_backward(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  int64_t mask = n->params.nn.i[0], G = n->params.nn.i[2];
  int has_w = n->params.nn.i[1] != 0;
  HPU_TRY(counts(n, 3 + has_w, 3 + has_w, 3, 3));
  const hpu_tensor_t *dy = &n->inputs[0], *x = &n->inputs[1], *st = &n->inputs[2];
  HPU_TRY(check_group_norm_x(n, x, G, 3, has_w));
  HPU_TRY(same_shape(name, dy, x, "grad and input"));
  HPU_TRY(need_contig(name, dy, "the gradient"));
  HPU_TRY(need_float(name, dy, "the gradient"));
  if (st->ndim != 2 || st->sizes[0] != 2 || st->sizes[1] != x->sizes[0] * G)
    return hpu_error(INVALID, "%s: stats must be [2, N * G]", name);
  HPU_TRY(need_float(name, st, "the stats"));
  for (int k = 0; k < 3; k++) {
    if (!((mask >> k) & 1)) continue;
    HPU_TRY(hpu_check_node_output(n, k));
    HPU_TRY(need_float(name, &n->outputs[k], "the gradients"));
    if (k == 0) {
      HPU_TRY(same_shape(name, &n->outputs[0], x, "grad_input and input"));
      HPU_TRY(need_contig(name, &n->outputs[0], "grad_input"));
    } else if (numel(&n->outputs[k]) != x->sizes[1]) {
      return hpu_error(INVALID, "%s: dweight/dbias must have C elements", name);
    }
  }
  return HPU_SUCCESS;
}

static hpu_status_t validate_nll(const hpu_node_t *n, int backward) {
  const char *name = hpu_op_name(n->op);
  int has_w = n->params.nn.i[2] != 0;
  int nin = (backward ? 3 : 2) + has_w;
  HPU_TRY(counts(n, nin, nin, backward ? 1 : 2, backward ? 1 : 2));
  const hpu_tensor_t *logp = backward ? &n->outputs[0] : &n->inputs[0];
  const hpu_tensor_t *tgt = &n->inputs[1];
  int64_t red = n->params.nn.i[0];
  if (red < 0 || red > 2) return hpu_error(INVALID, "%s: invalid reduction %lld", name, (long long)red);
  if (logp->ndim != 2) return hpu_error(INVALID, "%s: input must be [N, C]", name);
  HPU_TRY(need_float(name, logp, "the input"));
  HPU_TRY(need_index(name, tgt, "the target"));
  int64_t N = logp->sizes[0], C = logp->sizes[1];
  if (numel(tgt) != N || tgt->ndim != 1)
    return hpu_error(INVALID, "%s: target must be [N] with N = %lld", name, (long long)N);
  if (has_w) {
    const hpu_tensor_t *w = &n->inputs[backward ? 3 : 2];
    if (numel(w) != C || w->ndim != 1)
      return hpu_error(INVALID, "%s: weight must be [C] with C = %lld", name, (long long)C);
  }
  for (int k = 0; k < n->num_outputs; k++) HPU_TRY(hpu_check_node_output(n, k));
  if (backward) {
    const hpu_tensor_t *g = &n->inputs[0];
    if (numel(&n->inputs[2]) != 1) return hpu_error(INVALID, "%s: total_weight must have one element", name);
    if (red == 0 ? (numel(g) != N) : (numel(g) != 1))
      return hpu_error(INVALID, "%s: grad_output has the wrong size", name);
  } else {
    if (numel(&n->outputs[0]) != (red == 0 ? N : 1) || numel(&n->outputs[1]) != 1)
      return hpu_error(INVALID, "%s: outputs have the wrong sizes", name);
  }
  return HPU_SUCCESS;
}

static hpu_status_t validate_index_select(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  HPU_TRY(counts(n, 2, 2, 1, 1));
  HPU_TRY(hpu_check_node_output(n, 0));
  const hpu_tensor_t *in = &n->inputs[0], *idx = &n->inputs[1], *o = &n->outputs[0];
  int64_t dim = n->params.nn.i[0];
  HPU_TRY(check_dim(name, dim, in));
  HPU_TRY(need_index(name, idx, "the index"));
  if (idx->ndim > 1) return hpu_error(INVALID, "%s: the index must be 0-d or 1-d", name);
  if (o->dtype != in->dtype) return hpu_error(INVALID, "%s: output dtype differs from input", name);
  int ok = o->ndim == in->ndim;
  for (int d = 0; ok && d < in->ndim; d++)
    ok = o->sizes[d] == (d == dim ? numel(idx) : in->sizes[d]);
  if (in->ndim == 0) ok = numel(o) == numel(idx);
  if (!ok) return hpu_error(INVALID, "%s: output shape does not match", name);
  if (numel(o) > 0 && size_at(in, dim) == 0)
    return hpu_error(HPU_ERROR_OUT_OF_RANGE, "index out of range in self");
  return HPU_SUCCESS;
}

static hpu_status_t validate_gather_scatter(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  int gather = n->op == HPU_OP_GATHER;
  HPU_TRY(counts(n, gather ? 2 : 1, 2, 1, 1));
  const hpu_tensor_t *self = gather ? &n->inputs[0] : &n->outputs[0];
  const hpu_tensor_t *idx = gather ? &n->inputs[1] : &n->inputs[0];
  int64_t dim = n->params.nn.i[0];
  if (gather) {
    HPU_TRY(hpu_check_node_output(n, 0));
  } else {
    HPU_TRY(hpu_check_tensor(name, "output", 0, self));
    for (int i = 0; i < n->num_inputs; i++) HPU_TRY(hpu_check_overlap(name, self, i, &n->inputs[i], 0));
    if (n->num_inputs == 1) HPU_TRY(hpu_check_scalar(name, "value", n->params.nn.s[0]));
    if (n->params.nn.i[1] < 0 || n->params.nn.i[1] > 2)
      return hpu_error(INVALID, "%s: invalid reduce mode %lld (0 none, 1 add, 2 multiply)", name,
                       (long long)n->params.nn.i[1]);
  }
  HPU_TRY(check_dim(name, dim, self));
  HPU_TRY(need_index(name, idx, "the index"));
  int snd = self->ndim ? self->ndim : 1, ind = idx->ndim ? idx->ndim : 1;
  if (numel(idx) > 0 && snd != ind)
    return hpu_error(INVALID, "%s: index must have as many dims as self", name);
  for (int d = 0; numel(idx) > 0 && d < idx->ndim; d++)
    if (d != dim && idx->sizes[d] > size_at(self, d))
      return hpu_error(INVALID, "%s: index size %lld exceeds self size %lld in dim %d", name,
                       (long long)idx->sizes[d], (long long)size_at(self, d), d);
  if (gather) {
    HPU_TRY(same_shape(name, &n->outputs[0], idx, "output and index"));
    if (n->outputs[0].dtype != self->dtype) return hpu_error(INVALID, "%s: dtype mismatch", name);
  } else if (n->num_inputs == 2) {
    const hpu_tensor_t *src = &n->inputs[1];
    if (src->ndim != idx->ndim && numel(idx) > 0) return hpu_error(INVALID, "%s: src dims", name);
    for (int d = 0; numel(idx) > 0 && d < idx->ndim; d++)
      if (idx->sizes[d] > src->sizes[d])
        return hpu_error(INVALID, "%s: index size exceeds src size in dim %d", name, d);
  }
  return HPU_SUCCESS;
}

static hpu_status_t validate_index_add(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  HPU_TRY(counts(n, 2, 2, 1, 1));
  const hpu_tensor_t *self = &n->outputs[0], *idx = &n->inputs[0], *src = &n->inputs[1];
  HPU_TRY(hpu_check_tensor(name, "output", 0, self));
  HPU_TRY(hpu_check_output(name, self));
  for (int i = 0; i < 2; i++) HPU_TRY(hpu_check_overlap(name, self, i, &n->inputs[i], 0));
  int64_t dim = n->params.nn.i[0];
  HPU_TRY(check_dim(name, dim, self));
  HPU_TRY(need_index(name, idx, "the index"));
  HPU_TRY(hpu_check_scalar(name, "alpha", n->params.nn.s[0]));
  int ok = src->ndim == self->ndim && idx->ndim <= 1;
  for (int d = 0; ok && d < self->ndim; d++)
    ok = src->sizes[d] == (d == dim ? numel(idx) : self->sizes[d]);
  if (self->ndim == 0) ok = numel(src) == numel(idx);
  if (!ok) return hpu_error(INVALID, "%s: source shape does not match", name);
  return HPU_SUCCESS;
}

static hpu_status_t validate_embedding_backward(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  HPU_TRY(counts(n, 2, 2, 1, 1));
  HPU_TRY(hpu_check_node_output(n, 0));
  const hpu_tensor_t *g = &n->inputs[0], *idx = &n->inputs[1], *o = &n->outputs[0];
  HPU_TRY(need_index(name, idx, "the indices"));
  if (g->ndim != 2 || o->ndim != 2 || idx->ndim != 1 || idx->sizes[0] != g->sizes[0] ||
      o->sizes[1] != g->sizes[1])
    return hpu_error(INVALID, "%s: expects grad [n, H], indices [n], output [V, H]", name);
  HPU_TRY(need_float(name, o, "the output"));
  return HPU_SUCCESS;
}

static hpu_status_t validate_index(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  int put = n->op == HPU_OP_INDEX_PUT;
  int64_t k = n->params.nn.i[0];
  if (k < 1 || k > HPU_NN_MAX_INDICES)
    return hpu_error(INVALID, "%s: between 1 and %d index tensors", name, HPU_NN_MAX_INDICES);
  HPU_TRY(counts(n, 1 + (int)k, 1 + (int)k, 1, 1));
  const hpu_tensor_t *o = &n->outputs[0];
  HPU_TRY(hpu_check_tensor(name, "output", 0, o));
  if (!put) HPU_TRY(hpu_check_output(name, o));
  for (int i = 0; i < n->num_inputs; i++) {
    if (i >= 1) HPU_TRY(need_index(name, &n->inputs[i], "an index"));
    if (i >= 1 || !put) HPU_TRY(hpu_check_broadcast(name, i, &n->inputs[i], o));
    if (!put) HPU_TRY(hpu_check_overlap(name, o, i, &n->inputs[i], 0));
  }
  const hpu_tensor_t *data = put ? o : &n->inputs[0];
  if (put) {
    HPU_TRY(hpu_check_broadcast(name, 0, &n->inputs[0], o));
    if (n->inputs[0].dtype != o->dtype) return hpu_error(INVALID, "%s: dtype mismatch", name);
  } else if (data->dtype != o->dtype) {
    return hpu_error(INVALID, "%s: dtype mismatch", name);
  }
  for (int j = 0; j < k; j++)
    if (n->params.nn.sizes[j] < 0 || n->params.nn.strides[j] < 0)
      return hpu_error(INVALID, "%s: bad indexed size/stride", name);
  return HPU_SUCCESS;
}

static hpu_status_t validate_sort(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  HPU_TRY(counts(n, 1, 1, 2, 2));
  const hpu_tensor_t *in = &n->inputs[0];
  int64_t dim = n->params.nn.i[0], k = n->params.nn.i[2];
  HPU_TRY(check_dim(name, dim, in));
  if (k < 0 || k > size_at(in, dim))
    return hpu_error(INVALID, "%s: k (%lld) out of range", name, (long long)k);
  for (int j = 0; j < 2; j++) {
    HPU_TRY(hpu_check_node_output(n, j));
    const hpu_tensor_t *o = &n->outputs[j];
    int ok = o->ndim == in->ndim;
    for (int d = 0; ok && d < in->ndim; d++) ok = o->sizes[d] == (d == dim ? k : in->sizes[d]);
    if (!ok) return hpu_error(INVALID, "%s: output %d has the wrong shape", name, j);
  }
  if (n->outputs[0].dtype != in->dtype || n->outputs[1].dtype != HPU_INT64)
    return hpu_error(INVALID, "%s: outputs must be (input dtype, int64)", name);
  return HPU_SUCCESS;
}

static hpu_status_t validate_bce(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  HPU_TRY(counts(n, 2, 2, 1, 1));
  HPU_TRY(hpu_check_node_output(n, 0));
  HPU_TRY(need_float(name, &n->outputs[0], "the output"));
  for (int i = 0; i < 2; i++) {
    HPU_TRY(same_shape(name, &n->inputs[i], &n->outputs[0], "input and output"));
    if (n->inputs[i].dtype != n->outputs[0].dtype)
      return hpu_error(INVALID, "%s: input %d is %s, the output %s", name, i, hpu_dtype_name(n->inputs[i].dtype),
                       hpu_dtype_name(n->outputs[0].dtype));
  }
  return HPU_SUCCESS;
}

static hpu_status_t validate_masked_scatter(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  HPU_TRY(counts(n, 2, 2, 1, 1));
  HPU_TRY(hpu_check_node_output(n, 0));
  HPU_TRY(same_shape(name, &n->inputs[0], &n->outputs[0], "mask and output"));
  for (int i = 0; i < 2; i++) HPU_TRY(need_contig(name, &n->inputs[i], i ? "the source" : "the mask"));
  HPU_TRY(need_contig(name, &n->outputs[0], "the output"));
  if (n->inputs[0].dtype != HPU_BOOL)
    return hpu_error(INVALID, "%s: the mask must be bool, got %s", name, hpu_dtype_name(n->inputs[0].dtype));
  if (n->inputs[1].dtype != n->outputs[0].dtype)
    return hpu_error(INVALID, "%s: source is %s, the output %s", name, hpu_dtype_name(n->inputs[1].dtype),
                     hpu_dtype_name(n->outputs[0].dtype));
  return HPU_SUCCESS;
}

hpu_status_t hpu_validate_nn(const hpu_node_t *node) {
  switch (node->op) {
    case HPU_OP_REDUCE: return validate_reduce(node);
    case HPU_OP_ARGREDUCE: return validate_argreduce(node);
    case HPU_OP_CUMSUM: return validate_cumsum(node);
    case HPU_OP_SOFTMAX: return validate_same_shape_op(node, 1, 1);
    case HPU_OP_SOFTMAX_BACKWARD: return validate_same_shape_op(node, 2, 1);
    case HPU_OP_LAYER_NORM: return validate_layer_norm(node);
    case HPU_OP_LAYER_NORM_BACKWARD: return validate_layer_norm_backward(node);
    case HPU_OP_GROUP_NORM: return validate_group_norm(node);
    case HPU_OP_CONV: case HPU_OP_CONV_BACKWARD: return hpu_conv_validate(node);
    case HPU_OP_BATCH_NORM: case HPU_OP_BATCH_NORM_BACKWARD: return hpu_batch_norm_validate(node);
    case HPU_OP_MAX_POOL2D: case HPU_OP_MAX_POOL2D_BACKWARD:
    case HPU_OP_AVG_POOL2D: case HPU_OP_AVG_POOL2D_BACKWARD: return hpu_pool_validate(node);
    case HPU_OP_GROUP_NORM_BACKWARD: return validate_group_norm_backward(node);
    case HPU_OP_NLL_LOSS: return validate_nll(node, 0);
    case HPU_OP_NLL_LOSS_BACKWARD: return validate_nll(node, 1);
    case HPU_OP_INDEX_SELECT: return validate_index_select(node);
    case HPU_OP_GATHER: case HPU_OP_SCATTER: return validate_gather_scatter(node);
    case HPU_OP_INDEX_ADD: return validate_index_add(node);
    case HPU_OP_EMBEDDING_BACKWARD: return validate_embedding_backward(node);
    case HPU_OP_INDEX: case HPU_OP_INDEX_PUT: return validate_index(node);
    case HPU_OP_SORT: return validate_sort(node);
    case HPU_OP_BINARY_CROSS_ENTROPY: return validate_bce(node);
    case HPU_OP_MASKED_SCATTER: return validate_masked_scatter(node);
    case HPU_OP_ATTENTION: case HPU_OP_ATTENTION_BACKWARD: return hpu_validate_attention(node);
#define HPU_OP(code, name) case code:
#include "hpu/ops_tailidx.def"
#undef HPU_OP
      return hpu_validate_tailidx(node);
    case HPU_OP_UPSAMPLE: case HPU_OP_UPSAMPLE_BACKWARD: case HPU_OP_ADAPTIVE_AVG_POOL:
    case HPU_OP_ADAPTIVE_AVG_POOL_BACKWARD: case HPU_OP_SPATIAL_PAD: case HPU_OP_SPATIAL_PAD_BACKWARD:
    case HPU_OP_ADAPTIVE_MAX_POOL: case HPU_OP_ADAPTIVE_MAX_POOL_BACKWARD: case HPU_OP_MAX_UNPOOL:
    case HPU_OP_IM2COL: case HPU_OP_COL2IM:
      return hpu_vision_validate(node);
    default:
      return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: no kernel in this build", hpu_op_name(node->op));
  }
}

hpu_status_t hpu_execute_nn(const hpu_node_t *node) {
  switch (node->op) {
    case HPU_OP_REDUCE: hpu_nn_reduce(node); return HPU_SUCCESS;
    case HPU_OP_ARGREDUCE: hpu_nn_argreduce(node); return HPU_SUCCESS;
    case HPU_OP_CUMSUM: hpu_nn_cumsum(node); return HPU_SUCCESS;
    case HPU_OP_SOFTMAX: hpu_nn_softmax(node); return HPU_SUCCESS;
    case HPU_OP_SOFTMAX_BACKWARD: hpu_nn_softmax_backward(node); return HPU_SUCCESS;
    case HPU_OP_LAYER_NORM: hpu_nn_layer_norm(node); return HPU_SUCCESS;
    case HPU_OP_LAYER_NORM_BACKWARD: hpu_nn_layer_norm_backward(node); return HPU_SUCCESS;
    case HPU_OP_GROUP_NORM: return hpu_nn_group_norm(node);
    case HPU_OP_CONV: case HPU_OP_CONV_BACKWARD: return hpu_conv_execute(node);
    case HPU_OP_BATCH_NORM: case HPU_OP_BATCH_NORM_BACKWARD: return hpu_batch_norm_execute(node);
    case HPU_OP_MAX_POOL2D: case HPU_OP_MAX_POOL2D_BACKWARD:
    case HPU_OP_AVG_POOL2D: case HPU_OP_AVG_POOL2D_BACKWARD: return hpu_pool_execute(node);
    case HPU_OP_GROUP_NORM_BACKWARD: return hpu_nn_group_norm_backward(node);
    case HPU_OP_NLL_LOSS: return hpu_nn_nll_loss(node);
    case HPU_OP_NLL_LOSS_BACKWARD: return hpu_nn_nll_loss_backward(node);
    case HPU_OP_INDEX_SELECT: return hpu_nn_index_select(node);
    case HPU_OP_GATHER: return hpu_nn_gather(node);
    case HPU_OP_SCATTER: return hpu_nn_scatter(node);
    case HPU_OP_INDEX_ADD: return hpu_nn_index_add(node);
    case HPU_OP_EMBEDDING_BACKWARD: return hpu_nn_embedding_backward(node);
    case HPU_OP_INDEX: case HPU_OP_INDEX_PUT: return hpu_nn_index(node);
    case HPU_OP_SORT: hpu_nn_sort(node); return HPU_SUCCESS;
    case HPU_OP_BINARY_CROSS_ENTROPY: return hpu_nn_binary_cross_entropy(node);
    case HPU_OP_MASKED_SCATTER: return hpu_nn_masked_scatter(node);
    case HPU_OP_ATTENTION: return hpu_nn_attention(node);
    case HPU_OP_ATTENTION_BACKWARD: return hpu_nn_attention_backward(node);
#define HPU_OP(code, name) case code:
#include "hpu/ops_tailidx.def"
#undef HPU_OP
      return hpu_execute_tailidx(node);
    case HPU_OP_UPSAMPLE: case HPU_OP_UPSAMPLE_BACKWARD: case HPU_OP_ADAPTIVE_AVG_POOL:
    case HPU_OP_ADAPTIVE_AVG_POOL_BACKWARD: case HPU_OP_SPATIAL_PAD: case HPU_OP_SPATIAL_PAD_BACKWARD:
    case HPU_OP_ADAPTIVE_MAX_POOL: case HPU_OP_ADAPTIVE_MAX_POOL_BACKWARD: case HPU_OP_MAX_UNPOOL:
    case HPU_OP_IM2COL: case HPU_OP_COL2IM:
      return hpu_vision_execute(node);
    default:
      return hpu_error(HPU_ERROR_INTERNAL, "%s: no kernel in this build", hpu_op_name(node->op));
  }
}
