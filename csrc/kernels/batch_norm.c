/* HPU_OP_BATCH_NORM / HPU_OP_BATCH_NORM_BACKWARD: batch norm over x
 * [N, C, HW] (float32 or float64, every operand in one dtype, contiguous),
 * parallel over channels. A channel's
 * elements are N runs of HW; its statistics take two passes summed in
 * double (the mean, then the squared deviations from it), which is at
 * least as close as the CPU's float sums. The normalisation and dx follow
 * the CPU kernel's formulas (batch_norm_kernel.cpp) so results agree to the
 * last bits of float. */
#include <math.h>
#include <stdint.h>

#include "hpu/parallel.h"
#include "kernels/kernels.h"
#include "kernels/nn_util.h"

#define INVALID HPU_ERROR_INVALID_ARGUMENT

/* t is [a, b] (nd 2), [a] (nd 1) or [a, b, ...] (nd 3), contiguous, of
 * dtype dt: the node's, float64 when its input x is, else float32. */
static hpu_status_t need(const char *name, const hpu_tensor_t *t, const char *what, int nd, int64_t a, int64_t b,
                         hpu_dtype_t dt) {
  if (t->ndim != nd || t->sizes[0] != a || (nd > 1 && t->sizes[1] != b))
    return hpu_error(INVALID, "%s: %s has the wrong shape", name, what);
  if (t->dtype != dt)
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: %s must be %s, got %s", name, what, hpu_dtype_name(dt),
                     hpu_dtype_name(t->dtype));
  if (!hpu_tensor_is_contiguous(t)) return hpu_error(INVALID, "%s: %s must be contiguous", name, what);
  return HPU_SUCCESS;
}

static hpu_status_t need_x(const char *name, const hpu_tensor_t *x, const char *what, hpu_dtype_t dt) {
  if (x->ndim != 3) return hpu_error(INVALID, "%s: %s must be [N, C, HW]", name, what);
  return need(name, x, what, 3, x->sizes[0], x->sizes[1], dt);
}

static int same3(const hpu_tensor_t *a, const hpu_tensor_t *b) {
  return a->ndim == 3 && b->ndim == 3 && a->sizes[0] == b->sizes[0] && a->sizes[1] == b->sizes[1] &&
         a->sizes[2] == b->sizes[2];
}

hpu_status_t hpu_batch_norm_validate(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  for (int i = 0; i < n->num_inputs && i < HPU_MAX_INPUTS; i++) HPU_TRY(hpu_check_tensor(name, "input", i, &n->inputs[i]));
  hpu_dtype_t dt = n->inputs[n->op == HPU_OP_BATCH_NORM ? 0 : 1].dtype == HPU_FLOAT64 ? HPU_FLOAT64 : HPU_FLOAT32;
  if (n->op == HPU_OP_BATCH_NORM) {
    int train = n->params.nn.i[0] != 0;
    if (n->num_inputs != (train ? 2 : 3) || n->num_outputs != 2)
      return hpu_error(INVALID, "%s: expects %d inputs and 2 outputs", name, train ? 2 : 3);
    const hpu_tensor_t *x = &n->inputs[0];
    HPU_TRY(need_x(name, x, "the input", dt));
    int64_t C = x->sizes[1];
    HPU_TRY(need(name, &n->inputs[1], "weight/bias", 2, 2, C, dt));
    if (!train) HPU_TRY(need(name, &n->inputs[2], "the running statistics", 2, 2, C, dt));
    HPU_TRY(hpu_check_node_output(n, 0));
    HPU_TRY(hpu_check_node_output(n, 1));
    HPU_TRY(need_x(name, &n->outputs[0], "the output", dt));
    if (!same3(x, &n->outputs[0])) return hpu_error(INVALID, "%s: output and input shapes differ", name);
    return need(name, &n->outputs[1], "the statistics", 2, 3, C, dt);
  }
  int has_w = n->params.nn.i[2] != 0;
  int64_t mask = n->params.nn.i[0];
  if (n->num_inputs != 3 + has_w || n->num_outputs != 3)
    return hpu_error(INVALID, "%s: expects %d inputs and 3 outputs", name, 3 + has_w);
  const hpu_tensor_t *dy = &n->inputs[0], *x = &n->inputs[1];
  HPU_TRY(need_x(name, dy, "the gradient", dt));
  HPU_TRY(need_x(name, x, "the input", dt));
  if (!same3(dy, x)) return hpu_error(INVALID, "%s: gradient and input shapes differ", name);
  int64_t C = x->sizes[1];
  HPU_TRY(need(name, &n->inputs[2], "the statistics", 2, 2, C, dt));
  if (has_w) HPU_TRY(need(name, &n->inputs[3], "the weight", 1, C, 0, dt));
  for (int k = 0; k < 3; k++) {
    if (!((mask >> k) & 1)) continue;
    HPU_TRY(hpu_check_node_output(n, k));
    if (k == 0) {
      HPU_TRY(need_x(name, &n->outputs[0], "grad_input", dt));
      if (!same3(x, &n->outputs[0])) return hpu_error(INVALID, "%s: grad_input and input shapes differ", name);
    } else {
      HPU_TRY(need(name, &n->outputs[k], "dweight/dbias", 1, C, 0, dt));
    }
  }
  return HPU_SUCCESS;
}

typedef struct {
  const hpu_node_t *n;
  int64_t N, C, HW;
} bn_t;

#define T float
#define SQRT sqrtf
#define FN(x) x##_f32
#include "kernels/batch_norm_tmpl.h"
#undef T
#undef SQRT
#undef FN
#define T double
#define SQRT sqrt
#define FN(x) x##_f64
#include "kernels/batch_norm_tmpl.h"
#undef T
#undef SQRT
#undef FN

hpu_status_t hpu_batch_norm_execute(const hpu_node_t *n) {
  const hpu_tensor_t *x = &n->inputs[n->op == HPU_OP_BATCH_NORM ? 0 : 1];
  bn_t b = {n, x->sizes[0], x->sizes[1], x->sizes[2]};
  int f64 = x->dtype == HPU_FLOAT64;
  hpu_range_fn fn = n->op == HPU_OP_BATCH_NORM ? (f64 ? forward_channels_f64 : forward_channels_f32)
                                               : (f64 ? backward_channels_f64 : backward_channels_f32);
  hpu_parallel_for(b.C, 1, fn, &b);
  return HPU_SUCCESS;
}
