/* HPU_OP_MAX_POOL2D / HPU_OP_AVG_POOL2D and their backwards: pooling over
 * planes [P, H, W] (float32 or float64; the forwards also int64, the max
 * int32 and uint8; contiguous), parallel over planes. The window loop
 * clips the kernel to the image once per output row and column instead of
 * testing every tap. The backwards scatter each plane's dy into its own dx
 * plane, so no two threads write one element. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hpu/parallel.h"
#include "kernels/kernels.h"
#include "kernels/nn_util.h"

#define INVALID HPU_ERROR_INVALID_ARGUMENT

static hpu_status_t need(const char *name, const hpu_tensor_t *t, const char *what, hpu_dtype_t dt) {
  if (t->ndim != 3) return hpu_error(INVALID, "%s: %s must be [planes, H, W]", name, what);
  if (t->dtype != dt)
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: %s must be %s, got %s", name, what, hpu_dtype_name(dt),
                     hpu_dtype_name(t->dtype));
  if (!hpu_tensor_is_contiguous(t)) return hpu_error(INVALID, "%s: %s must be contiguous", name, what);
  return HPU_SUCCESS;
}

/* The values' dtype for op: float32 and float64 everywhere, int64 for the
 * forwards, int32 and uint8 for the max forward; anything else must be
 * float32 (need() names what it got). */
static hpu_dtype_t value_dtype(const hpu_tensor_t *t, hpu_op_t op) {
  hpu_dtype_t d = t->dtype;
  int fwd = op == HPU_OP_MAX_POOL2D || op == HPU_OP_AVG_POOL2D;
  if (d == HPU_FLOAT64 || (fwd && d == HPU_INT64) ||
      (op == HPU_OP_MAX_POOL2D && (d == HPU_INT32 || d == HPU_UINT8)))
    return d;
  return HPU_FLOAT32;
}

/* Window [h0, h1) x [w0, w1) of output (oh, ow) and its divisor, as the
 * CPU's cpu_avg_pool computes them; 0 when the window misses the image. */
typedef struct {
  int64_t h0, h1, w0, w1, div;
} win_t;

static win_t avg_window(const hpu_nn_params_t *p, int64_t H, int64_t W, int64_t oh, int64_t ow) {
  win_t r;
  r.h0 = oh * p->sizes[0] - p->strides[0];
  r.w0 = ow * p->sizes[1] - p->strides[1];
  r.h1 = r.h0 + p->i[0] < H + p->strides[0] ? r.h0 + p->i[0] : H + p->strides[0];
  r.w1 = r.w0 + p->i[1] < W + p->strides[1] ? r.w0 + p->i[1] : W + p->strides[1];
  int64_t pool_size = (r.h1 - r.h0) * (r.w1 - r.w0);
  if (r.h0 < 0) r.h0 = 0;
  if (r.w0 < 0) r.w0 = 0;
  if (r.h1 > H) r.h1 = H;
  if (r.w1 > W) r.w1 = W;
  if (p->i[3] != 0) r.div = p->i[3];
  else r.div = p->i[2] ? pool_size : (r.h1 - r.h0) * (r.w1 - r.w0);
  if (r.h0 >= r.h1 || r.w0 >= r.w1) r.div = 0;
  return r;
}

static hpu_status_t validate_avg(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  const hpu_nn_params_t *p = &n->params.nn;
  if (n->num_inputs != 1 || n->num_outputs != 1) return hpu_error(INVALID, "%s: wrong operand count", name);
  HPU_TRY(hpu_check_tensor(name, "input", 0, &n->inputs[0]));
  HPU_TRY(hpu_check_node_output(n, 0));
  int fwd = n->op == HPU_OP_AVG_POOL2D;
  const hpu_tensor_t *big = fwd ? &n->inputs[0] : &n->outputs[0], *small = fwd ? &n->outputs[0] : &n->inputs[0];
  hpu_dtype_t dt = value_dtype(&n->inputs[0], n->op);
  HPU_TRY(need(name, big, fwd ? "the input" : "grad_input", dt));
  HPU_TRY(need(name, small, fwd ? "the output" : "the gradient", dt));
  if (p->i[0] < 1 || p->i[1] < 1 || p->sizes[0] < 1 || p->sizes[1] < 1 || p->strides[0] < 0 || p->strides[1] < 0)
    return hpu_error(INVALID, "%s: kernel and stride must be positive, padding non-negative", name);
  if (small->sizes[0] != big->sizes[0]) return hpu_error(INVALID, "%s: plane counts differ", name);
  for (int d = 0; d < 2; d++)
    if (small->sizes[1 + d] > 0 && (small->sizes[1 + d] - 1) * p->sizes[d] - p->strides[d] >= big->sizes[1 + d])
      return hpu_error(INVALID, "%s: output size %lld does not fit the input", name, (long long)small->sizes[1 + d]);
  return HPU_SUCCESS;
}

#define LOWEST (-INFINITY)
#define ISNAN(v) isnan(v)
#define T float
#define FN(x) x##_f32
#include "kernels/pool_tmpl.h"
#undef T
#undef FN
#define T double
#define FN(x) x##_f64
#include "kernels/pool_tmpl.h"
#undef T
#undef FN
#undef LOWEST
#undef ISNAN
/* the integer types: max pooling forward (and int64 averages), as the CPU */
#define LOWEST 0
#define ISNAN(v) 0
#define POOL_NO_BACKWARD
#define T int64_t
#define FN(x) x##_i64
#include "kernels/pool_tmpl.h"
#undef T
#undef FN
#define POOL_NO_AVG
#define T int32_t
#define FN(x) x##_i32
#include "kernels/pool_tmpl.h"
#undef T
#undef FN
#define T uint8_t
#define FN(x) x##_u8
#include "kernels/pool_tmpl.h"
#undef T
#undef FN
#undef POOL_NO_AVG
#undef POOL_NO_BACKWARD
#undef LOWEST
#undef ISNAN

hpu_status_t hpu_pool_validate(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  int avg = n->op == HPU_OP_AVG_POOL2D || n->op == HPU_OP_AVG_POOL2D_BACKWARD;
  if (avg) return validate_avg(n);
  int fwd = n->op == HPU_OP_MAX_POOL2D;
  if (n->num_inputs != (fwd ? 1 : 2) || n->num_outputs != (fwd ? 2 : 1))
    return hpu_error(INVALID, "%s: wrong operand count", name);
  for (int i = 0; i < n->num_inputs; i++) HPU_TRY(hpu_check_tensor(name, "input", i, &n->inputs[i]));
  for (int k = 0; k < n->num_outputs; k++) HPU_TRY(hpu_check_node_output(n, k));
  hpu_dtype_t dt = value_dtype(&n->inputs[0], n->op);
  if (!fwd) {
    HPU_TRY(need(name, &n->inputs[0], "the gradient", dt));
    HPU_TRY(need(name, &n->inputs[1], "the indices", HPU_INT64));
    HPU_TRY(need(name, &n->outputs[0], "grad_input", dt));
    for (int d = 0; d < 3; d++)
      if (n->inputs[1].sizes[d] != n->inputs[0].sizes[d])
        return hpu_error(INVALID, "%s: indices and gradient shapes differ", name);
    if (n->outputs[0].sizes[0] != n->inputs[0].sizes[0])
      return hpu_error(INVALID, "%s: grad_input and gradient have different plane counts", name);
    return HPU_SUCCESS;
  }
  const hpu_nn_params_t *p = &n->params.nn;
  HPU_TRY(need(name, &n->inputs[0], "the input", dt));
  HPU_TRY(need(name, &n->outputs[0], "the output", dt));
  HPU_TRY(need(name, &n->outputs[1], "the indices", HPU_INT64));
  const hpu_tensor_t *x = &n->inputs[0], *y = &n->outputs[0];
  if (p->i[0] < 1 || p->i[1] < 1 || p->i[2] < 1 || p->i[3] < 1 || p->sizes[0] < 1 || p->sizes[1] < 1 ||
      p->strides[0] < 0 || p->strides[1] < 0)
    return hpu_error(INVALID, "%s: kernel, stride and dilation must be positive, padding non-negative", name);
  for (int d = 0; d < 3; d++)
    if (n->outputs[1].sizes[d] != y->sizes[d]) return hpu_error(INVALID, "%s: indices and output shapes differ", name);
  if (y->sizes[0] != x->sizes[0]) return hpu_error(INVALID, "%s: output and input plane counts differ", name);
  /* every window starts inside the padded image */
  for (int d = 0; d < 2; d++)
    if (y->sizes[1 + d] > 0 && (y->sizes[1 + d] - 1) * p->sizes[d] - p->strides[d] >= x->sizes[1 + d])
      return hpu_error(INVALID, "%s: output size %lld does not fit the input", name, (long long)y->sizes[1 + d]);
  return HPU_SUCCESS;
}

hpu_status_t hpu_pool_execute(const hpu_node_t *n) {
  int64_t planes = n->inputs[0].sizes[0];
  hpu_dtype_t dt = n->inputs[0].dtype;
  int f64 = dt == HPU_FLOAT64;
  hpu_range_fn fn;
  if (n->op == HPU_OP_MAX_POOL2D)
    fn = dt == HPU_INT64   ? max_planes_i64
         : dt == HPU_INT32 ? max_planes_i32
         : dt == HPU_UINT8 ? max_planes_u8
         : f64             ? max_planes_f64
                           : max_planes_f32;
  else if (n->op == HPU_OP_AVG_POOL2D)
    fn = dt == HPU_INT64 ? avg_planes_i64 : f64 ? avg_planes_f64 : avg_planes_f32;
  else if (n->op == HPU_OP_MAX_POOL2D_BACKWARD)
    fn = f64 ? max_backward_planes_f64 : max_backward_planes_f32;
  else
    fn = f64 ? avg_backward_planes_f64 : avg_backward_planes_f32;
  hpu_parallel_for(planes, 1, fn, (void *)n);
  return HPU_SUCCESS;
}
