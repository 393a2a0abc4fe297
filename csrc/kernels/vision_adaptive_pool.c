/* HPU_OP_ADAPTIVE_AVG_POOL and its backward over planes [P, D, H, W],
 * float32 or float64, parallel over planes. Windows and arithmetic are the CPU's
 * (AdaptiveAvgPoolKernel.cpp, AdaptiveAveragePooling3d.cpp): a float sum in
 * window order divided by kd, then kh, then kw (kd = 1 for 2-d, exact). The
 * backward scatters dy / kd / kh / kw of each plane into its own dx plane. */
#include <stdint.h>
#include <string.h>

#include "hpu/parallel.h"
#include "kernels/kernels.h"
#include "kernels/vision.h"

#define T float
#define FN(x) x##_f32
#include "kernels/vision_adaptive_pool_tmpl.h"
#undef T
#undef FN
#define T double
#define FN(x) x##_f64
#include "kernels/vision_adaptive_pool_tmpl.h"
#undef T
#undef FN

hpu_status_t hpu_adaptive_pool_validate(const hpu_node_t *n) {
  HPU_TRY(hpu_vision_check_planes(n, 1, 1));
  const hpu_tensor_t *x = n->op == HPU_OP_ADAPTIVE_AVG_POOL ? &n->inputs[0] : &n->outputs[0];
  const hpu_tensor_t *y = n->op == HPU_OP_ADAPTIVE_AVG_POOL ? &n->outputs[0] : &n->inputs[0];
  for (int d = 1; d < 4; d++)
    if (x->sizes[d] < 1 && y->sizes[d] > 0)
      return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "%s: empty input dim %d with a non-empty output",
                       hpu_op_name(n->op), d);
  return HPU_SUCCESS;
}

hpu_status_t hpu_adaptive_pool_execute(const hpu_node_t *n) {
  int f64 = n->inputs[0].dtype == HPU_FLOAT64, fwd = n->op == HPU_OP_ADAPTIVE_AVG_POOL;
  hpu_range_fn fn = fwd ? (f64 ? forward_planes_f64 : forward_planes_f32)
                        : (f64 ? backward_planes_f64 : backward_planes_f32);
  hpu_parallel_for(n->inputs[0].sizes[0], 1, fn, (void *)n);
  return HPU_SUCCESS;
}
