/* HPU_OP_ADAPTIVE_AVG_POOL and its backward over planes [P, D, H, W],
 * float32, parallel over planes. Windows and arithmetic are the CPU's
 * (AdaptiveAvgPoolKernel.cpp, AdaptiveAveragePooling3d.cpp): a float sum in
 * window order divided by kd, then kh, then kw (kd = 1 for 2-d, exact). The
 * backward scatters dy / kd / kh / kw of each plane into its own dx plane. */
#include <stdint.h>
#include <string.h>

#include "hpu/parallel.h"
#include "kernels/kernels.h"
#include "kernels/vision.h"

static inline int64_t win_start(int64_t o, int64_t out, int64_t in) { return (o * in) / out; }
static inline int64_t win_end(int64_t o, int64_t out, int64_t in) { return ((o + 1) * in + out - 1) / out; }

static void forward_planes(void *ctx, int64_t p0, int64_t p1) {
  const hpu_node_t *n = ctx;
  const hpu_tensor_t *xt = &n->inputs[0], *yt = &n->outputs[0];
  int64_t D = xt->sizes[1], H = xt->sizes[2], W = xt->sizes[3];
  int64_t OD = yt->sizes[1], OH = yt->sizes[2], OW = yt->sizes[3];
  for (int64_t q = p0; q < p1; q++) {
    const float *x = (const float *)hpu_tensor_data(xt) + q * D * H * W;
    float *y = (float *)hpu_tensor_data(yt) + q * OD * OH * OW;
    for (int64_t od = 0; od < OD; od++) {
      int64_t d0 = win_start(od, OD, D), d1 = win_end(od, OD, D);
      for (int64_t oh = 0; oh < OH; oh++) {
        int64_t h0 = win_start(oh, OH, H), h1 = win_end(oh, OH, H);
        for (int64_t ow = 0; ow < OW; ow++) {
          int64_t w0 = win_start(ow, OW, W), w1 = win_end(ow, OW, W);
          float sum = 0.f;
          for (int64_t d = d0; d < d1; d++)
            for (int64_t h = h0; h < h1; h++)
              for (int64_t w = w0; w < w1; w++) sum += x[(d * H + h) * W + w];
          y[(od * OH + oh) * OW + ow] = sum / (float)(d1 - d0) / (float)(h1 - h0) / (float)(w1 - w0);
        }
      }
    }
  }
}

static void backward_planes(void *ctx, int64_t p0, int64_t p1) {
  const hpu_node_t *n = ctx;
  const hpu_tensor_t *gt = &n->inputs[0], *dt = &n->outputs[0];
  int64_t D = dt->sizes[1], H = dt->sizes[2], W = dt->sizes[3];
  int64_t OD = gt->sizes[1], OH = gt->sizes[2], OW = gt->sizes[3];
  for (int64_t q = p0; q < p1; q++) {
    const float *g = (const float *)hpu_tensor_data(gt) + q * OD * OH * OW;
    float *dx = (float *)hpu_tensor_data(dt) + q * D * H * W;
    memset(dx, 0, (size_t)(D * H * W) * sizeof(float));
    for (int64_t od = 0; od < OD; od++) {
      int64_t d0 = win_start(od, OD, D), d1 = win_end(od, OD, D);
      for (int64_t oh = 0; oh < OH; oh++) {
        int64_t h0 = win_start(oh, OH, H), h1 = win_end(oh, OH, H);
        for (int64_t ow = 0; ow < OW; ow++) {
          int64_t w0 = win_start(ow, OW, W), w1 = win_end(ow, OW, W);
          float delta = g[(od * OH + oh) * OW + ow] / (float)(d1 - d0) / (float)(h1 - h0) / (float)(w1 - w0);
          for (int64_t d = d0; d < d1; d++)
            for (int64_t h = h0; h < h1; h++)
              for (int64_t w = w0; w < w1; w++) dx[(d * H + h) * W + w] += delta;
        }
      }
    }
  }
}

hpu_status_t hpu_adaptive_pool_validate(const hpu_node_t *n) {
  HPU_TRY(hpu_vision_check_planes(n, 1));
  const hpu_tensor_t *x = n->op == HPU_OP_ADAPTIVE_AVG_POOL ? &n->inputs[0] : &n->outputs[0];
  const hpu_tensor_t *y = n->op == HPU_OP_ADAPTIVE_AVG_POOL ? &n->outputs[0] : &n->inputs[0];
  for (int d = 1; d < 4; d++)
    if (x->sizes[d] < 1 && y->sizes[d] > 0)
      return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "%s: empty input dim %d with a non-empty output",
                       hpu_op_name(n->op), d);
  return HPU_SUCCESS;
}

hpu_status_t hpu_adaptive_pool_execute(const hpu_node_t *n) {
  hpu_parallel_for(n->inputs[0].sizes[0], 1, n->op == HPU_OP_ADAPTIVE_AVG_POOL ? forward_planes : backward_planes,
                   (void *)n);
  return HPU_SUCCESS;
}
