/* Op names and hpu_node_validate: everything the kernels rely on is checked
 * here, so the kernels themselves cannot fail. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hpu/op.h"
#include "hpu/status.h"
#include "kernels/kernels.h"

static const char *const op_names[HPU_OP_COUNT] = {
    "copy", "fill", "add", "sub", "mul", "div", "relu", "matmul",
    "rng_uniform", "rng_normal", "rng_bernoulli", "rng_random",
    "(pointwise family marker)",
#define HPU_OP(code, name) name,
#include "hpu/ops_pointwise.def"
#include "hpu/ops_special.def"
    "(pointwise tail marker)",
#include "hpu/ops_tailpw.def"
    "(nn family marker)",
#include "hpu/ops_nn.def"
#include "hpu/ops_tailidx.def"
#include "hpu/ops_vision.def"
    "(linalg family marker)",
#include "hpu/ops_linalg.def"
#undef HPU_OP
};

const char *hpu_op_name(hpu_op_t op) {
  return ((int)op >= 0 && op < HPU_OP_COUNT) ? op_names[op] : "invalid";
}

#define INVALID HPU_ERROR_INVALID_ARGUMENT

typedef struct { char s[HPU_MAX_DIMS * 22 + 4]; } shape_str_t;

static shape_str_t shape_str(const hpu_tensor_t *t) {
  shape_str_t r;
  size_t len = 0;
  r.s[len++] = '[';
  for (int d = 0; d < t->ndim && d < HPU_MAX_DIMS; d++)
    len += (size_t)snprintf(r.s + len, sizeof r.s - len, d ? ", %lld" : "%lld",
                            (long long)t->sizes[d]);
  snprintf(r.s + len, sizeof r.s - len, "]");
  return r;
}

static int64_t numel_of(const hpu_tensor_t *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->sizes[d];
  return n;
}

static hpu_status_t check_tensor(const char *name, const char *role, int idx,
                                 const hpu_tensor_t *t) {
  if (!hpu_dtype_is_valid(t->dtype))
    return hpu_error(INVALID, "%s: %s %d has an invalid dtype (%d)", name, role, idx,
                     (int)t->dtype);
  if (t->ndim < 0 || t->ndim > HPU_MAX_DIMS)
    return hpu_error(INVALID, "%s: %s %d has %d dims (at most %d are supported)", name, role,
                     idx, t->ndim, HPU_MAX_DIMS);
  for (int d = 0; d < t->ndim; d++) {
    if (t->sizes[d] < 0)
      return hpu_error(INVALID, "%s: %s %d has a negative size %lld in dim %d", name, role, idx,
                       (long long)t->sizes[d], d);
    if (t->strides[d] < 0)
      return hpu_error(INVALID, "%s: %s %d has a negative stride %lld in dim %d", name, role,
                       idx, (long long)t->strides[d], d);
  }
  if (t->offset < 0)
    return hpu_error(INVALID, "%s: %s %d has a negative byte offset %lld", name, role, idx,
                     (long long)t->offset);
  if (numel_of(t) > 0 && t->storage == NULL)
    return hpu_error(INVALID, "%s: %s %d has no storage", name, role, idx);
  return HPU_SUCCESS;
}

/* Does `in` broadcast to `shape` (PyTorch rules, right-aligned)? Extra
 * leading dims of `in` are accepted when they are 1. */
static int broadcasts_to(const hpu_tensor_t *in, const int64_t *shape, int nd) {
  for (int td = 0; td < in->ndim; td++) {
    int od = td - in->ndim + nd;
    int64_t s = in->sizes[td];
    if (od < 0) {
      if (s != 1) return 0;
    } else if (s != 1 && s != shape[od]) {
      return 0;
    }
  }
  return 1;
}

static hpu_status_t check_broadcast(const char *name, int idx, const hpu_tensor_t *in,
                                    const hpu_tensor_t *out) {
  if (broadcasts_to(in, out->sizes, out->ndim)) return HPU_SUCCESS;
  return hpu_error(INVALID, "%s: input %d of shape %s does not broadcast to output shape %s",
                   name, idx, shape_str(in).s, shape_str(out).s);
}

/* Memory overlap ----------------------------------------------------------- */

/* Its elements exactly tile [lo, hi): strides are a permutation of a
 * contiguous layout (size-1 dims ignored). */
static int dense(const hpu_tensor_t *t) {
  int idx[HPU_MAX_DIMS], n = 0;
  for (int d = 0; d < t->ndim; d++)
    if (t->sizes[d] != 1) idx[n++] = d;
  for (int i = 1; i < n; i++) /* sort by stride */
    for (int j = i; j > 0 && t->strides[idx[j]] < t->strides[idx[j - 1]]; j--) {
      int tmp = idx[j];
      idx[j] = idx[j - 1];
      idx[j - 1] = tmp;
    }
  int64_t expected = 1;
  for (int i = 0; i < n; i++) {
    if (t->strides[idx[i]] != expected) return 0;
    expected *= t->sizes[idx[i]];
  }
  return 1;
}

/* `in` read through its broadcast to out's shape hits exactly out's elements
 * in the same order: a safe in-place operand. */
static int exact_alias(const hpu_tensor_t *out, const hpu_tensor_t *in) {
  if (hpu_tensor_data(out) != hpu_tensor_data(in)) return 0;
  if (hpu_dtype_size(out->dtype) != hpu_dtype_size(in->dtype)) return 0;
  for (int od = 0; od < out->ndim; od++) {
    if (out->sizes[od] == 1) continue;
    int td = od - out->ndim + in->ndim;
    int64_t s = (td < 0 || in->sizes[td] == 1) ? 0 : in->strides[td];
    if (s != out->strides[od]) return 0;
  }
  return 1;
}

/* As PyTorch's assert_no_partial_overlap: exact aliasing is allowed (when
 * allow_alias), any other overlap of two dense tensors is rejected. When one
 * of them is not dense (e.g. interleaved columns) the ranges may intersect
 * without sharing elements; like PyTorch we do not try to decide that. */
static hpu_status_t check_overlap(const char *name, const hpu_tensor_t *out, int idx,
                                  const hpu_tensor_t *in, int allow_alias) {
  if (numel_of(out) == 0 || numel_of(in) == 0) return HPU_SUCCESS;
  uintptr_t olo, ohi, ilo, ihi;
  hpu_tensor_byte_range(out, &olo, &ohi);
  hpu_tensor_byte_range(in, &ilo, &ihi);
  if (ohi <= ilo || ihi <= olo) return HPU_SUCCESS;
  if (allow_alias) {
    if (exact_alias(out, in)) return HPU_SUCCESS;
    if (!dense(out) || !dense(in)) return HPU_SUCCESS;
    return hpu_error(INVALID,
                     "%s: the output and input %d partially overlap in memory (only exact "
                     "in-place aliasing is supported; clone the input first)",
                     name, idx);
  }
  return hpu_error(INVALID, "%s: the output overlaps input %d in memory (%s cannot run in place)",
                   name, idx, name);
}

static hpu_status_t check_output(const char *name, const hpu_tensor_t *out) {
  if (numel_of(out) <= 1) return HPU_SUCCESS;
  for (int d = 0; d < out->ndim; d++)
    if (out->sizes[d] > 1 && out->strides[d] == 0)
      return hpu_error(INVALID,
                       "%s: the output has stride 0 in dim %d of size %lld (more than one "
                       "element refers to a single memory location)",
                       name, d, (long long)out->sizes[d]);
  return HPU_SUCCESS;
}

static hpu_status_t check_scalar(const char *name, const char *what, hpu_scalar_t s) {
  if (s.kind != HPU_SCALAR_FLOAT && s.kind != HPU_SCALAR_INT && s.kind != HPU_SCALAR_BOOL)
    return hpu_error(INVALID, "%s: %s has an invalid scalar kind %d", name, what, (int)s.kind);
  return HPU_SUCCESS;
}

/* Matmul ------------------------------------------------------------------- */

static hpu_status_t check_matmul(const hpu_node_t *node) {
  const char *name = "matmul";
  const hpu_tensor_t *a = &node->inputs[0], *b = &node->inputs[1], *out = &node->outputs[0];
  hpu_status_t st;
  if (a->ndim < 2 || b->ndim < 2 || out->ndim < 2)
    return hpu_error(INVALID,
                     "%s: operands need at least 2 dims (got input 0 %s, input 1 %s, output %s; "
                     "unsqueeze vectors first)",
                     name, shape_str(a).s, shape_str(b).s, shape_str(out).s);
  for (int i = 0; i < node->num_inputs; i++)
    if (node->inputs[i].dtype != out->dtype)
      return hpu_error(INVALID, "%s: input %d is %s but the output is %s (all must match)", name,
                       i, hpu_dtype_name(node->inputs[i].dtype), hpu_dtype_name(out->dtype));
  if (out->dtype == HPU_BOOL)
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: bool is not supported", name);
  int64_t m = a->sizes[a->ndim - 2], k = a->sizes[a->ndim - 1];
  int64_t k2 = b->sizes[b->ndim - 2], n = b->sizes[b->ndim - 1];
  if (k != k2)
    return hpu_error(INVALID, "%s: shapes %s and %s cannot be multiplied (%lldx%lld and %lldx%lld)",
                     name, shape_str(a).s, shape_str(b).s, (long long)m, (long long)k,
                     (long long)k2, (long long)n);
  if (out->sizes[out->ndim - 2] != m || out->sizes[out->ndim - 1] != n)
    return hpu_error(INVALID, "%s: output shape %s does not match %s @ %s (expected [..., %lld, %lld])",
                     name, shape_str(out).s, shape_str(a).s, shape_str(b).s, (long long)m,
                     (long long)n);
  /* Batch dims: each input's batch dims broadcast to the output's. */
  int obd = out->ndim - 2;
  for (int i = 0; i < 2; i++) {
    const hpu_tensor_t *t = &node->inputs[i];
    int tbd = t->ndim - 2;
    for (int d = 0; d < tbd; d++) {
      int od = d - tbd + obd;
      int64_t s = t->sizes[d];
      if ((od < 0 && s != 1) || (od >= 0 && s != 1 && s != out->sizes[od]))
        return hpu_error(INVALID,
                         "%s: batch dims of input %d %s do not broadcast to the output's %s",
                         name, i, shape_str(t).s, shape_str(out).s);
    }
  }
  if (node->num_inputs == 3 && (st = check_broadcast(name, 2, &node->inputs[2], out))) return st;
  if ((st = check_output(name, out))) return st;
  for (int i = 0; i < 2; i++)
    if ((st = check_overlap(name, out, i, &node->inputs[i], 0))) return st;
  if (node->num_inputs == 3 && (st = check_overlap(name, out, 2, &node->inputs[2], 1))) return st;
  if ((st = check_scalar(name, "alpha", node->params.matmul.alpha))) return st;
  if (node->num_inputs == 3 && (st = check_scalar(name, "beta", node->params.matmul.beta)))
    return st;
  return HPU_SUCCESS;
}

/* RNG ------------------------------------------------------------------------ */

static hpu_status_t check_rng(const hpu_node_t *node) {
  const char *name = hpu_op_name(node->op);
  const hpu_tensor_t *out = &node->outputs[0];
  double a = node->params.rng.a, b = node->params.rng.b;
  int fl = hpu_dtype_is_floating(out->dtype);
  switch (node->op) {
    case HPU_OP_RNG_UNIFORM:
      if (!fl)
        return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: the output must be floating, not %s", name,
                         hpu_dtype_name(out->dtype));
      if (!(a <= b) || !isfinite(a) || !isfinite(b))
        return hpu_error(INVALID, "%s: expects a finite range with from <= to, got from=%g to=%g",
                         name, a, b);
      break;
    case HPU_OP_RNG_NORMAL:
      if (!fl)
        return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: the output must be floating, not %s", name,
                         hpu_dtype_name(out->dtype));
      if (!(b >= 0))
        return hpu_error(INVALID, "%s: expects std >= 0.0, but found std %g", name, b);
      break;
    case HPU_OP_RNG_BERNOULLI:
      if (node->num_inputs == 0 && !(a >= 0 && a <= 1))
        return hpu_error(INVALID, "%s: expects 0 <= p <= 1, but got p=%g", name, a);
      if (node->num_inputs == 1) {
        hpu_status_t st;
        if ((st = check_broadcast(name, 0, &node->inputs[0], out))) return st;
        if ((st = check_overlap(name, out, 0, &node->inputs[0], 1))) return st;
      }
      break;
    case HPU_OP_RNG_RANDOM:
      if (!(a < b) || !(b - a <= 18446744073709551616.0) || !(a >= -9223372036854775808.0))
        return hpu_error(INVALID, "%s: expects 'from' < 'to' within 64 bits, got from=%g to=%g",
                         name, a, b);
      break;
    default: break;
  }
  return HPU_SUCCESS;
}

/* ------------------------------------------------------------------------ */

hpu_status_t hpu_node_validate(const hpu_node_t *node) {
  if (!node) return hpu_error(INVALID, "node is NULL");
  if ((int)node->op < 0 || node->op >= HPU_OP_COUNT || node->op == HPU_OP_POINTWISE_BEGIN ||
      node->op == HPU_OP_NN_BEGIN || node->op == HPU_OP_TAILPW_BEGIN || node->op == HPU_OP_LINALG_BEGIN)
    return hpu_error(INVALID, "invalid op code %d", (int)node->op);
  if (hpu_op_is_tailpw(node->op)) return hpu_validate_tailpw(node);
  if (hpu_op_is_pointwise(node->op)) return hpu_validate_pointwise(node);
  if (hpu_op_is_linalg(node->op)) return hpu_validate_linalg(node);
  if (hpu_op_is_nn(node->op)) return hpu_validate_nn(node);
  const char *name = hpu_op_name(node->op);
  int min_in = 0, max_in = 0;
  switch (node->op) {
    case HPU_OP_COPY: case HPU_OP_RELU: min_in = max_in = 1; break;
    case HPU_OP_FILL: case HPU_OP_RNG_UNIFORM: case HPU_OP_RNG_NORMAL: case HPU_OP_RNG_RANDOM:
      min_in = max_in = 0;
      break;
    case HPU_OP_ADD: case HPU_OP_SUB: case HPU_OP_MUL: case HPU_OP_DIV: min_in = 1; max_in = 2; break;
    case HPU_OP_MATMUL: min_in = 2; max_in = 3; break;
    case HPU_OP_RNG_BERNOULLI: min_in = 0; max_in = 1; break;
    default: break;
  }
  if (node->num_inputs < min_in || node->num_inputs > max_in) {
    if (min_in == max_in)
      return hpu_error(INVALID, "%s: expects %d input(s), got %d", name, min_in, node->num_inputs);
    return hpu_error(INVALID, "%s: expects %d to %d inputs, got %d", name, min_in, max_in,
                     node->num_inputs);
  }
  if (node->num_outputs != 1)
    return hpu_error(INVALID, "%s: expects 1 output, got %d", name, node->num_outputs);
  hpu_status_t st;
  const hpu_tensor_t *out = &node->outputs[0];
  if ((st = check_tensor(name, "output", 0, out))) return st;
  for (int i = 0; i < node->num_inputs; i++)
    if ((st = check_tensor(name, "input", i, &node->inputs[i]))) return st;

  switch (node->op) {
    case HPU_OP_MATMUL: return check_matmul(node);
    case HPU_OP_RNG_UNIFORM: case HPU_OP_RNG_NORMAL: case HPU_OP_RNG_BERNOULLI:
    case HPU_OP_RNG_RANDOM:
      if ((st = check_output(name, out))) return st;
      return check_rng(node);
    case HPU_OP_FILL:
      if ((st = check_output(name, out))) return st;
      return check_scalar(name, "the fill value", node->params.fill.value);
    default: break;
  }

  /* Elementwise: COPY ADD SUB MUL DIV RELU. */
  if (node->op != HPU_OP_COPY) {
    hpu_dtype_t c = node->compute_dtype;
    if (!hpu_dtype_is_valid(c))
      return hpu_error(INVALID, "%s: invalid compute dtype %d", name, (int)c);
    if (node->op == HPU_OP_SUB && c == HPU_BOOL)
      return hpu_error(HPU_ERROR_UNSUPPORTED,
                       "%s: subtraction with two bool tensors is not supported; use the "
                       "logical_xor or bitwise_not instead",
                       name);
    if (node->op == HPU_OP_DIV) {
      hpu_rounding_t r = node->params.binary.rounding;
      if (r != HPU_ROUND_NONE && r != HPU_ROUND_TRUNC && r != HPU_ROUND_FLOOR)
        return hpu_error(INVALID, "%s: invalid rounding mode %d", name, (int)r);
      if (r == HPU_ROUND_NONE && !hpu_dtype_is_floating(c))
        return hpu_error(HPU_ERROR_UNSUPPORTED,
                         "%s: true division needs a floating compute dtype, got %s", name,
                         hpu_dtype_name(c));
    }
    if (node->op == HPU_OP_ADD || node->op == HPU_OP_SUB) {
      if ((st = check_scalar(name, "alpha", node->params.binary.alpha))) return st;
    }
    if (node->num_inputs == 1 && node->op != HPU_OP_RELU &&
        (st = check_scalar(name, "the scalar operand", node->params.binary.other)))
      return st;
  }
  if ((st = check_output(name, out))) return st;
  for (int i = 0; i < node->num_inputs; i++) {
    if ((st = check_broadcast(name, i, &node->inputs[i], out))) return st;
    if ((st = check_overlap(name, out, i, &node->inputs[i], 1))) return st;
  }
  return HPU_SUCCESS;
}

/* The operand checks above, for the op families' validators. */
hpu_status_t hpu_check_tensor(const char *name, const char *role, int idx, const hpu_tensor_t *t) {
  return check_tensor(name, role, idx, t);
}
hpu_status_t hpu_check_broadcast(const char *name, int idx, const hpu_tensor_t *in,
                                 const hpu_tensor_t *out) {
  return check_broadcast(name, idx, in, out);
}
hpu_status_t hpu_check_overlap(const char *name, const hpu_tensor_t *out, int idx,
                               const hpu_tensor_t *in, int allow_alias) {
  return check_overlap(name, out, idx, in, allow_alias);
}
hpu_status_t hpu_check_output(const char *name, const hpu_tensor_t *out) {
  return check_output(name, out);
}
hpu_status_t hpu_check_scalar(const char *name, const char *what, hpu_scalar_t s) {
  return check_scalar(name, what, s);
}
void hpu_shape_str(const hpu_tensor_t *t, char *buf, size_t len) {
  snprintf(buf, len, "%s", shape_str(t).s);
}

hpu_status_t hpu_check_node_output(const hpu_node_t *n, int k) {
  const char *name = hpu_op_name(n->op);
  HPU_TRY(hpu_check_tensor(name, "output", k, &n->outputs[k]));
  HPU_TRY(hpu_check_output(name, &n->outputs[k]));
  for (int i = 0; i < n->num_inputs; i++) HPU_TRY(hpu_check_overlap(name, &n->outputs[k], i, &n->inputs[i], 0));
  return HPU_SUCCESS;
}
