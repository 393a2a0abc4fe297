/* HPU_OP_SPATIAL_PAD and its backward: reflection and replication padding
 * over planes [P, D, H, W], parallel over planes. Output position o of a dim
 * reads input j = o - pad_before, reflected (-j, 2 (n - 1) - j) or clamped
 * into [0, n): the CPU's index maps (ReflectionPad.cpp, ReplicationPad.cpp)
 * written without their offsets. The forward gathers whole elements (every
 * dtype, bit for bit); the backward (float32, float64) adds each plane's
 * dy into its own dx plane in output order. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/parallel.h"
#include "kernels/kernels.h"
#include "kernels/vision.h"

#define INVALID HPU_ERROR_INVALID_ARGUMENT

static inline int64_t src_index(int reflect, int64_t o, int64_t pad, int64_t n) {
  int64_t j = o - pad;
  if (reflect) {
    if (j < 0) j = -j;
    if (j >= n) j = 2 * (n - 1) - j;
    return j;
  }
  return j < 0 ? 0 : (j >= n ? n - 1 : j);
}

typedef struct {
  const hpu_node_t *n;
  int64_t *map[3]; /* per output index of D, H, W: the input index */
} ctx_t;

static void forward_planes(void *vc, int64_t p0, int64_t p1) {
  const ctx_t *c = vc;
  const hpu_tensor_t *xt = &c->n->inputs[0], *yt = &c->n->outputs[0];
  int64_t D = xt->sizes[1], H = xt->sizes[2], W = xt->sizes[3];
  int64_t OD = yt->sizes[1], OH = yt->sizes[2], OW = yt->sizes[3];
  size_t es = hpu_dtype_size(xt->dtype);
  for (int64_t q = p0; q < p1; q++) {
    const char *x = (const char *)hpu_tensor_data(xt) + (size_t)(q * D * H * W) * es;
    char *y = (char *)hpu_tensor_data(yt) + (size_t)(q * OD * OH * OW) * es;
    for (int64_t od = 0; od < OD; od++)
      for (int64_t oh = 0; oh < OH; oh++) {
        const char *row = x + (size_t)((c->map[0][od] * H + c->map[1][oh]) * W) * es;
        char *yr = y + (size_t)((od * OH + oh) * OW) * es;
        for (int64_t ow = 0; ow < OW; ow++) memcpy(yr + (size_t)ow * es, row + (size_t)c->map[2][ow] * es, es);
      }
  }
}

/* The backward for element type T (float32, float64): the float copy is
 * the float loop it always was. */
#define PAD_BACKWARD(T, fn)                                                       \
  static void fn(void *vc, int64_t p0, int64_t p1) {                              \
    const ctx_t *c = vc;                                                          \
    const hpu_tensor_t *gt = &c->n->inputs[0], *dt = &c->n->outputs[0];           \
    int64_t D = dt->sizes[1], H = dt->sizes[2], W = dt->sizes[3];                 \
    int64_t OD = gt->sizes[1], OH = gt->sizes[2], OW = gt->sizes[3];              \
    for (int64_t q = p0; q < p1; q++) {                                           \
      const T *g = (const T *)hpu_tensor_data(gt) + q * OD * OH * OW;             \
      T *dx = (T *)hpu_tensor_data(dt) + q * D * H * W;                           \
      memset(dx, 0, (size_t)(D * H * W) * sizeof(T));                             \
      for (int64_t od = 0; od < OD; od++)                                         \
        for (int64_t oh = 0; oh < OH; oh++) {                                     \
          T *row = dx + (c->map[0][od] * H + c->map[1][oh]) * W;                  \
          const T *gr = g + (od * OH + oh) * OW;                                  \
          for (int64_t ow = 0; ow < OW; ow++) row[c->map[2][ow]] += gr[ow];       \
        }                                                                         \
    }                                                                             \
  }
PAD_BACKWARD(float, backward_planes_f32)
PAD_BACKWARD(double, backward_planes_f64)

hpu_status_t hpu_spatial_pad_validate(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  const hpu_nn_params_t *p = &n->params.nn;
  int fwd = n->op == HPU_OP_SPATIAL_PAD;
  if (p->i[0] != HPU_PAD_REFLECT && p->i[0] != HPU_PAD_REPLICATE)
    return hpu_error(INVALID, "%s: unknown mode %lld", name, (long long)p->i[0]);
  HPU_TRY(hpu_vision_check_planes(n, !fwd, 1));
  const hpu_tensor_t *x = fwd ? &n->inputs[0] : &n->outputs[0], *y = fwd ? &n->outputs[0] : &n->inputs[0];
  for (int d = 0; d < 3; d++) {
    int64_t in = x->sizes[1 + d], out = y->sizes[1 + d], before = p->sizes[d], after = out - in - before;
    if (out == 0) continue;
    if (in < 1) return hpu_error(INVALID, "%s: cannot pad an empty dim %d", name, 1 + d);
    if (p->i[0] == HPU_PAD_REFLECT && (before >= in || after >= in || -before >= in || -after >= in))
      return hpu_error(INVALID, "%s: padding (%lld, %lld) must be smaller than dim %d's size %lld", name,
                       (long long)before, (long long)after, 1 + d, (long long)in);
  }
  return HPU_SUCCESS;
}

hpu_status_t hpu_spatial_pad_execute(const hpu_node_t *n) {
  int fwd = n->op == HPU_OP_SPATIAL_PAD;
  const hpu_tensor_t *x = fwd ? &n->inputs[0] : &n->outputs[0], *y = fwd ? &n->outputs[0] : &n->inputs[0];
  int reflect = n->params.nn.i[0] == HPU_PAD_REFLECT;
  ctx_t c = {n, {0}};
  int64_t total = y->sizes[1] + y->sizes[2] + y->sizes[3];
  int64_t *all = malloc((size_t)(total > 0 ? total : 1) * sizeof(int64_t));
  if (!all) return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "%s: no memory for its index maps", hpu_op_name(n->op));
  int64_t off = 0;
  for (int d = 0; d < 3; d++) {
    c.map[d] = all + off;
    for (int64_t o = 0; o < y->sizes[1 + d]; o++)
      c.map[d][o] = src_index(reflect, o, n->params.nn.sizes[d], x->sizes[1 + d]);
    off += y->sizes[1 + d];
  }
  hpu_range_fn fn = fwd                                  ? forward_planes
                    : n->inputs[0].dtype == HPU_FLOAT64 ? backward_planes_f64
                                                        : backward_planes_f32;
  hpu_parallel_for(x->sizes[0], 1, fn, &c);
  free(all);
  return HPU_SUCCESS;
}
