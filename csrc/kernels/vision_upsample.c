/* HPU_OP_UPSAMPLE and its backward: nearest, nearest-exact and (bi/tri)
 * linear resampling over planes [P, D, H, W], parallel over planes; the
 * arithmetic in float32 or float64 (vision_upsample_tmpl.h). Each
 * spatial dim's source indices and weights are computed once per call into
 * a small table, with PyTorch's float formulas (ATen/native/UpSample.h), so
 * the indices are the CPU's exactly. The forward of the nearest modes is a
 * gather of whole elements (every dtype, bit for bit); the linear forward
 * evaluates the innermost dim first, as the CPU's generic kernel does. The
 * backwards scatter each plane's dy into its own dx plane in output order,
 * so no two threads write one element and the sums do not depend on the
 * thread count. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/parallel.h"
#include "kernels/kernels.h"
#include "kernels/vision.h"

#define INVALID HPU_ERROR_INVALID_ARGUMENT

/* Source index of output o for the nearest modes, with PyTorch's float
 * formulas for every dtype (nearest_idx / nearest_neighbor_exact_compute_source_index). */
static int64_t nearest_index(int mode, double scale, int64_t in, int64_t out, int64_t o) {
  float s = scale > 0. ? (float)(1.0 / scale) : (float)in / (float)out;
  int64_t i;
  if (mode == HPU_UPSAMPLE_NEAREST_EXACT) i = (int64_t)floorf((float)(((double)o + 0.5) * (double)s));
  else if (out == in) i = o;
  else if (out == 2 * in) i = o >> 1;
  else i = (int64_t)floorf((float)o * s);
  return i > in - 1 ? in - 1 : i;
}

/* The CPU's trilinear kernel keeps its weights in the input's dtype
 * (lambda1 rounded, then lambda0 = 1 - lambda1 rounded) and interpolates in
 * float: params i[3] (set by the forwarder for a bf16 / fp16 trilinear
 * input) rounds ours the same way (round_weight). */
#define T float
#define FN(x) x##_f32
#include "kernels/vision_upsample_tmpl.h"
#undef T
#undef FN
#define T double
#define FN(x) x##_f64
#include "kernels/vision_upsample_tmpl.h"
#undef T
#undef FN

/* The nearest forward copies elements of `es` bytes. */
static void nearest_planes(void *vc, int64_t p0, int64_t p1) {
  const ctx_t_f32 *c = vc;
  const hpu_tensor_t *xt = &c->n->inputs[0], *yt = &c->n->outputs[0];
  int64_t D = xt->sizes[1], H = xt->sizes[2], W = xt->sizes[3];
  int64_t OD = yt->sizes[1], OH = yt->sizes[2], OW = yt->sizes[3];
  size_t es = hpu_dtype_size(xt->dtype);
  for (int64_t q = p0; q < p1; q++) {
    const char *x = (const char *)hpu_tensor_data(xt) + (size_t)(q * D * H * W) * es;
    char *y = (char *)hpu_tensor_data(yt) + (size_t)(q * OD * OH * OW) * es;
    for (int64_t od = 0; od < OD; od++)
      for (int64_t oh = 0; oh < OH; oh++) {
        const char *row = x + (size_t)((c->tap[0][od].i0 * H + c->tap[1][oh].i0) * W) * es;
        char *yrow = y + (size_t)((od * OH + oh) * OW) * es;
        for (int64_t ow = 0; ow < OW; ow++) memcpy(yrow + (size_t)ow * es, row + (size_t)c->tap[2][ow].i0 * es, es);
      }
  }
}

hpu_status_t hpu_upsample_validate(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  const hpu_nn_params_t *p = &n->params.nn;
  int fwd = n->op == HPU_OP_UPSAMPLE;
  if (p->i[0] < HPU_UPSAMPLE_NEAREST || p->i[0] > HPU_UPSAMPLE_LINEAR)
    return hpu_error(INVALID, "%s: unknown mode %lld", name, (long long)p->i[0]);
  if (p->i[2] < 1 || p->i[2] > 3) return hpu_error(INVALID, "%s: spatial dims must be 1..3", name);
  HPU_TRY(hpu_vision_check_planes(n, !fwd || p->i[0] == HPU_UPSAMPLE_LINEAR, 1));
  const hpu_tensor_t *big = fwd ? &n->outputs[0] : &n->inputs[0], *small = fwd ? &n->inputs[0] : &n->outputs[0];
  for (int d = 1; d < 4; d++) {
    if (d < 4 - p->i[2] && (small->sizes[d] != 1 || big->sizes[d] != 1))
      return hpu_error(INVALID, "%s: dim %d is not a spatial dim of a %lld-d op and must be 1", name, d,
                       (long long)p->i[2]);
    if (big->sizes[d] < 1 || small->sizes[d] < 1)
      return hpu_error(INVALID, "%s: input and output sizes must be positive", name);
  }
  return HPU_SUCCESS;
}

hpu_status_t hpu_upsample_execute(const hpu_node_t *n) {
  int fwd = n->op == HPU_OP_UPSAMPLE;
  /* the nearest forward gathers elements of any dtype through float taps */
  if (fwd && n->params.nn.i[0] != HPU_UPSAMPLE_LINEAR) return run_f32(n, nearest_planes);
  return n->inputs[0].dtype == HPU_FLOAT64 ? run_f64(n, NULL) : run_f32(n, NULL);
}
