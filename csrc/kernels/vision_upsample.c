/* HPU_OP_UPSAMPLE and its backward: nearest, nearest-exact and (bi/tri)
 * linear resampling over planes [P, D, H, W], parallel over planes. Each
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

/* Per output index of one dim: the two source indices and their weights
 * (nearest: i1 = i0, w0 = 1, w1 = 0). */
typedef struct {
  int64_t i0, i1;
  float w0, w1;
} tap_t;

typedef struct {
  const hpu_node_t *n;
  tap_t *tap[3]; /* D, H, W */
} ctx_t;

static float scales_value(double scale, int64_t in, int64_t out) {
  return scale > 0. ? (float)(1.0 / scale) : (float)in / (float)out;
}

/* The CPU's trilinear kernel keeps its weights in the input's dtype
 * (lambda1 rounded, then lambda0 = 1 - lambda1 rounded) and interpolates in
 * float: params i[3] (set by the forwarder for a bf16 / fp16 trilinear
 * input) rounds ours the same way. */
static float round_weight(float w, int64_t wdt) {
  if (wdt == HPU_BFLOAT16) return hpu_bf16_to_float(hpu_float_to_bf16(w));
  if (wdt == HPU_FLOAT16) return hpu_half_to_float(hpu_float_to_half(w));
  return w;
}

static void fill_taps(tap_t *t, int mode, int align, double scale, int64_t in, int64_t out, int64_t wdt) {
  if (mode != HPU_UPSAMPLE_LINEAR) {
    float s = scales_value(scale, in, out);
    for (int64_t o = 0; o < out; o++) {
      int64_t i;
      if (mode == HPU_UPSAMPLE_NEAREST_EXACT) i = (int64_t)floorf((float)(((double)o + 0.5) * (double)s));
      else if (out == in) i = o;
      else if (out == 2 * in) i = o >> 1;
      else i = (int64_t)floorf((float)o * s);
      if (i > in - 1) i = in - 1;
      t[o] = (tap_t){i, i, 1.f, 0.f};
    }
    return;
  }
  float ratio = align ? (out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.f) : scales_value(scale, in, out);
  for (int64_t o = 0; o < out; o++) {
    if (out == in) {
      t[o] = (tap_t){o, o, 1.f, 0.f};
      continue;
    }
    float real = align ? ratio * (float)o : ratio * ((float)o + 0.5f) - 0.5f;
    if (!align && real < 0.f) real = 0.f;
    int64_t i0 = (int64_t)floorf(real);
    if (i0 > in - 1) i0 = in - 1;
    float l1 = real - (float)i0;
    l1 = l1 < 0.f ? 0.f : (l1 > 1.f ? 1.f : l1);
    l1 = round_weight(l1, wdt);
    t[o] = (tap_t){i0, i0 + (i0 < in - 1 ? 1 : 0), round_weight(1.f - l1, wdt), l1};
  }
}

/* The nearest forward copies elements of `es` bytes. */
static void nearest_planes(void *vc, int64_t p0, int64_t p1) {
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
        const char *row = x + (size_t)((c->tap[0][od].i0 * H + c->tap[1][oh].i0) * W) * es;
        char *yrow = y + (size_t)((od * OH + oh) * OW) * es;
        for (int64_t ow = 0; ow < OW; ow++) memcpy(yrow + (size_t)ow * es, row + (size_t)c->tap[2][ow].i0 * es, es);
      }
  }
}

static inline float lerp_w(const float *row, const tap_t *tw) { return row[tw->i0] * tw->w0 + row[tw->i1] * tw->w1; }

static void linear_planes(void *vc, int64_t p0, int64_t p1) {
  const ctx_t *c = vc;
  const hpu_tensor_t *xt = &c->n->inputs[0], *yt = &c->n->outputs[0];
  int nd = (int)c->n->params.nn.i[2];
  int64_t D = xt->sizes[1], H = xt->sizes[2], W = xt->sizes[3];
  int64_t OD = yt->sizes[1], OH = yt->sizes[2], OW = yt->sizes[3];
  for (int64_t q = p0; q < p1; q++) {
    const float *x = (const float *)hpu_tensor_data(xt) + q * D * H * W;
    float *y = (float *)hpu_tensor_data(yt) + q * OD * OH * OW;
    for (int64_t od = 0; od < OD; od++) {
      const tap_t *td = &c->tap[0][od];
      for (int64_t oh = 0; oh < OH; oh++) {
        const tap_t *th = &c->tap[1][oh];
        float *yr = y + (od * OH + oh) * OW;
        for (int64_t ow = 0; ow < OW; ow++) {
          const tap_t *tw = &c->tap[2][ow];
          float v;
          if (nd == 1) {
            v = lerp_w(x + (td->i0 * H + th->i0) * W, tw);
          } else if (nd == 2) {
            const float *pl = x + td->i0 * H * W;
            v = lerp_w(pl + th->i0 * W, tw) * th->w0 + lerp_w(pl + th->i1 * W, tw) * th->w1;
          } else {
            const float *a = x + td->i0 * H * W, *b = x + td->i1 * H * W;
            float ta = lerp_w(a + th->i0 * W, tw) * th->w0 + lerp_w(a + th->i1 * W, tw) * th->w1;
            float tb = lerp_w(b + th->i0 * W, tw) * th->w0 + lerp_w(b + th->i1 * W, tw) * th->w1;
            v = ta * td->w0 + tb * td->w1;
          }
          yr[ow] = v;
        }
      }
    }
  }
}

/* dx[corner] += (w_d * w_h * w_w) * dy over the 2^nd corners, d outermost,
 * the weight product left to right over the op's own dims only (the CPU's
 * h0lambda * w0lambda * grad for 2-d). Nearest: one corner, weight 1. */
static void backward_planes(void *vc, int64_t p0, int64_t p1) {
  const ctx_t *c = vc;
  const hpu_tensor_t *gt = &c->n->inputs[0], *dt = &c->n->outputs[0];
  int nd = (int)c->n->params.nn.i[2];
  int nearest = c->n->params.nn.i[0] != HPU_UPSAMPLE_LINEAR;
  int64_t D = dt->sizes[1], H = dt->sizes[2], W = dt->sizes[3];
  int64_t OD = gt->sizes[1], OH = gt->sizes[2], OW = gt->sizes[3];
  for (int64_t q = p0; q < p1; q++) {
    const float *g = (const float *)hpu_tensor_data(gt) + q * OD * OH * OW;
    float *dx = (float *)hpu_tensor_data(dt) + q * D * H * W;
    memset(dx, 0, (size_t)(D * H * W) * sizeof(float));
    for (int64_t od = 0; od < OD; od++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          float gv = g[(od * OH + oh) * OW + ow];
          const tap_t *t3[3] = {&c->tap[0][od], &c->tap[1][oh], &c->tap[2][ow]};
          if (nearest) {
            dx[(t3[0]->i0 * H + t3[1]->i0) * W + t3[2]->i0] += gv;
            continue;
          }
          int first = 3 - nd;
          for (int corner = 0; corner < (1 << nd); corner++) {
            int64_t idx[3] = {t3[0]->i0, t3[1]->i0, t3[2]->i0};
            float w = 0.f;
            for (int k = first; k < 3; k++) {
              int bit = (corner >> (2 - k)) & 1;
              float wk = bit ? t3[k]->w1 : t3[k]->w0;
              if (bit) idx[k] = t3[k]->i1;
              w = k == first ? wk : w * wk;
            }
            dx[(idx[0] * H + idx[1]) * W + idx[2]] += w * gv;
          }
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
  HPU_TRY(hpu_vision_check_planes(n, !fwd || p->i[0] == HPU_UPSAMPLE_LINEAR));
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
  const hpu_nn_params_t *p = &n->params.nn;
  int fwd = n->op == HPU_OP_UPSAMPLE;
  const hpu_tensor_t *x = fwd ? &n->inputs[0] : &n->outputs[0], *y = fwd ? &n->outputs[0] : &n->inputs[0];
  ctx_t c = {n, {0}};
  int64_t total = y->sizes[1] + y->sizes[2] + y->sizes[3];
  tap_t *all = malloc((size_t)total * sizeof(tap_t));
  if (!all) return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "%s: no memory for %lld taps", hpu_op_name(n->op), (long long)total);
  int64_t off = 0;
  for (int d = 0; d < 3; d++) {
    c.tap[d] = all + off;
    fill_taps(c.tap[d], (int)p->i[0], (int)p->i[1], hpu_scalar_as_double(p->s[d]), x->sizes[1 + d], y->sizes[1 + d],
              fwd ? p->i[3] : HPU_FLOAT32);
    off += y->sizes[1 + d];
  }
  hpu_range_fn fn = !fwd ? backward_planes : p->i[0] == HPU_UPSAMPLE_LINEAR ? linear_planes : nearest_planes;
  hpu_parallel_for(x->sizes[0], 1, fn, &c);
  free(all);
  return HPU_SUCCESS;
}
