/* HPU_OP_ADAPTIVE_MAX_POOL and its backward over planes [P, D, H, W],
 * float32 or float64, parallel over planes. Windows, the choice of the
 * maximum and the NaN rule are the CPU's (AdaptiveMaxPoolKernel.cpp,
 * AdaptiveMaxPooling3d.cpp); the backward adds each plane's dy into its own
 * dx plane in output order, as the CPU does, so the sums do not depend on
 * the thread count. */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "hpu/parallel.h"
#include "kernels/cvt.h"
#include "kernels/kernels.h"
#include "kernels/vision.h"

#define INVALID HPU_ERROR_INVALID_ARGUMENT

/* The first bad index any task saw. */
typedef struct {
  const hpu_node_t *node;
  _Atomic int bad;
  int64_t value;
} bad_ctx_t;

static void note_bad(bad_ctx_t *c, int64_t v) {
  int expected = 0;
  if (atomic_compare_exchange_strong(&c->bad, &expected, 1)) c->value = v;
}

#define T float
#define FN(x) x##_f32
#define ROUND(v, dt) hpu_round_to((v), (dt))
#include "kernels/vision_adaptive_max_pool_tmpl.h"
#undef T
#undef FN
#undef ROUND
#define T double
#define FN(x) x##_f64
#define ROUND(v, dt) (v)
#include "kernels/vision_adaptive_max_pool_tmpl.h"
#undef T
#undef FN
#undef ROUND

hpu_status_t hpu_adaptive_max_pool_validate(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  int fwd = n->op == HPU_OP_ADAPTIVE_MAX_POOL;
  if (n->num_inputs != (fwd ? 1 : 2) || n->num_outputs != (fwd ? 2 : 1))
    return hpu_error(INVALID, "%s: wrong operand count", name);
  for (int i = 0; i < n->num_inputs; i++) HPU_TRY(hpu_check_tensor(name, "input", i, &n->inputs[i]));
  for (int k = 0; k < n->num_outputs; k++) HPU_TRY(hpu_check_node_output(n, k));
  const hpu_tensor_t *x = fwd ? &n->inputs[0] : &n->outputs[0], *y = fwd ? &n->outputs[0] : &n->inputs[0];
  const hpu_tensor_t *ix = fwd ? &n->outputs[1] : &n->inputs[1];
  HPU_TRY(hpu_vision_check_4d(name, fwd ? "the input" : "grad_input", x, -1));
  HPU_TRY(hpu_vision_check_4d(name, fwd ? "the output" : "the gradient", y, x->sizes[0]));
  HPU_TRY(hpu_vision_check_4d(name, "the indices", ix, x->sizes[0]));
  if (x->dtype != HPU_FLOAT32 && x->dtype != HPU_FLOAT64)
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: needs float32 or float64, got %s", name, hpu_dtype_name(x->dtype));
  if (y->dtype != x->dtype)
    return hpu_error(INVALID, "%s: values are %s and %s", name, hpu_dtype_name(x->dtype), hpu_dtype_name(y->dtype));
  if (ix->dtype != HPU_INT64) return hpu_error(INVALID, "%s: indices must be int64, got %s", name, hpu_dtype_name(ix->dtype));
  for (int d = 1; d < 4; d++) {
    if (ix->sizes[d] != y->sizes[d]) return hpu_error(INVALID, "%s: indices and %s shapes differ", name, fwd ? "output" : "gradient");
    if (fwd && x->sizes[d] < 1 && y->sizes[d] > 0)
      return hpu_error(INVALID, "%s: empty input dim %d with a non-empty output", name, d);
  }
  if (!fwd) {
    int64_t rt = n->params.nn.i[0];
    int ok = rt == x->dtype || (x->dtype == HPU_FLOAT32 && (rt == HPU_BFLOAT16 || rt == HPU_FLOAT16));
    if (!ok) return hpu_error(INVALID, "%s: cannot round %s sums to dtype code %lld", name, hpu_dtype_name(x->dtype), (long long)rt);
  }
  return HPU_SUCCESS;
}

hpu_status_t hpu_adaptive_max_pool_execute(const hpu_node_t *n) {
  int f64 = n->inputs[0].dtype == HPU_FLOAT64;
  if (n->op == HPU_OP_ADAPTIVE_MAX_POOL) {
    hpu_parallel_for(n->inputs[0].sizes[0], 1, f64 ? max_planes_f64 : max_planes_f32, (void *)n);
    return HPU_SUCCESS;
  }
  bad_ctx_t c = {.node = n, .value = 0};
  atomic_init(&c.bad, 0);
  hpu_parallel_for(n->inputs[0].sizes[0], 1, f64 ? max_backward_planes_f64 : max_backward_planes_f32, &c);
  if (atomic_load(&c.bad)) {
    const hpu_tensor_t *dx = &n->outputs[0];
    return hpu_error(HPU_ERROR_OUT_OF_RANGE, "%s: index %lld is out of bounds for an input plane of %lldx%lldx%lld",
                     hpu_op_name(n->op), (long long)c.value, (long long)dx->sizes[1], (long long)dx->sizes[2],
                     (long long)dx->sizes[3]);
  }
  return HPU_SUCCESS;
}
