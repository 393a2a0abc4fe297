/* Operand checks and dispatch shared by the vision family (ops_vision.def). */
#include "hpu/op.h"
#include "kernels/kernels.h"
#include "kernels/vision.h"

#define INVALID HPU_ERROR_INVALID_ARGUMENT

hpu_status_t hpu_vision_check_planes(const hpu_node_t *n, int arith, int f64) {
  const char *name = hpu_op_name(n->op);
  if (n->num_inputs != 1 || n->num_outputs != 1) return hpu_error(INVALID, "%s: wrong operand count", name);
  HPU_TRY(hpu_check_tensor(name, "input", 0, &n->inputs[0]));
  HPU_TRY(hpu_check_node_output(n, 0));
  const hpu_tensor_t *x = &n->inputs[0], *y = &n->outputs[0];
  if (x->ndim != 4 || y->ndim != 4) return hpu_error(INVALID, "%s: operands must be [planes, D, H, W]", name);
  if (!hpu_tensor_is_contiguous(x) || !hpu_tensor_is_contiguous(y))
    return hpu_error(INVALID, "%s: operands must be contiguous", name);
  if (x->sizes[0] != y->sizes[0]) return hpu_error(INVALID, "%s: plane counts differ", name);
  if (x->dtype != y->dtype)
    return hpu_error(INVALID, "%s: input is %s, the output %s", name, hpu_dtype_name(x->dtype),
                     hpu_dtype_name(y->dtype));
  if (arith && x->dtype != HPU_FLOAT32 && !(f64 && x->dtype == HPU_FLOAT64))
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: needs float32%s, got %s", name, f64 ? " or float64" : "",
                     hpu_dtype_name(x->dtype));
  return HPU_SUCCESS;
}

hpu_status_t hpu_vision_check_4d(const char *name, const char *role, const hpu_tensor_t *t, int64_t planes) {
  if (t->ndim != 4) return hpu_error(INVALID, "%s: %s must be [planes, D, H, W]", name, role);
  if (!hpu_tensor_is_contiguous(t)) return hpu_error(INVALID, "%s: %s must be contiguous", name, role);
  if (planes >= 0 && t->sizes[0] != planes)
    return hpu_error(INVALID, "%s: %s has %lld planes, not %lld", name, role, (long long)t->sizes[0], (long long)planes);
  return HPU_SUCCESS;
}

hpu_status_t hpu_vision_validate(const hpu_node_t *n) {
  switch (n->op) {
    case HPU_OP_UPSAMPLE: case HPU_OP_UPSAMPLE_BACKWARD: return hpu_upsample_validate(n);
    case HPU_OP_ADAPTIVE_AVG_POOL: case HPU_OP_ADAPTIVE_AVG_POOL_BACKWARD: return hpu_adaptive_pool_validate(n);
    case HPU_OP_ADAPTIVE_MAX_POOL: case HPU_OP_ADAPTIVE_MAX_POOL_BACKWARD: return hpu_adaptive_max_pool_validate(n);
    case HPU_OP_MAX_UNPOOL: return hpu_max_unpool_validate(n);
    case HPU_OP_IM2COL: case HPU_OP_COL2IM: return hpu_fold_validate(n);
    case HPU_OP_SPATIAL_PAD: case HPU_OP_SPATIAL_PAD_BACKWARD: return hpu_spatial_pad_validate(n);
    default: return hpu_error(HPU_ERROR_INTERNAL, "%s: not a vision op", hpu_op_name(n->op));
  }
}

hpu_status_t hpu_vision_execute(const hpu_node_t *n) {
  if (hpu_tensor_numel(&n->outputs[0]) == 0) return HPU_SUCCESS;
  switch (n->op) {
    case HPU_OP_UPSAMPLE: case HPU_OP_UPSAMPLE_BACKWARD: return hpu_upsample_execute(n);
    case HPU_OP_ADAPTIVE_AVG_POOL: case HPU_OP_ADAPTIVE_AVG_POOL_BACKWARD: return hpu_adaptive_pool_execute(n);
    case HPU_OP_ADAPTIVE_MAX_POOL: case HPU_OP_ADAPTIVE_MAX_POOL_BACKWARD: return hpu_adaptive_max_pool_execute(n);
    case HPU_OP_MAX_UNPOOL: return hpu_max_unpool_execute(n);
    case HPU_OP_IM2COL: case HPU_OP_COL2IM: return hpu_fold_execute(n);
    case HPU_OP_SPATIAL_PAD: case HPU_OP_SPATIAL_PAD_BACKWARD: return hpu_spatial_pad_execute(n);
    default: return hpu_error(HPU_ERROR_INTERNAL, "%s: not a vision op", hpu_op_name(n->op));
  }
}
