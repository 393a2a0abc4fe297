/* The pooling loops of pool.c for one element type, included there with
 * T, FN(x) (the name's suffix), LOWEST and ISNAN(v) (-INFINITY and isnan
 * for the floating types, 0 for the integer ones), POOL_NO_AVG /
 * POOL_NO_BACKWARD leaving out what a type does not run. The float32 copy
 * is the float loop it always was; float64 and int64 sum in their own type,
 * which is the CPU's accumulator type for them (int64: a truncating
 * division, as the CPU's). */

#ifndef POOL_NO_AVG
static void FN(avg_planes)(void *ctx, int64_t p0, int64_t p1) {
  const hpu_node_t *n = ctx;
  const hpu_tensor_t *xt = &n->inputs[0], *yt = &n->outputs[0];
  int64_t H = xt->sizes[1], W = xt->sizes[2], OH = yt->sizes[1], OW = yt->sizes[2];
  for (int64_t q = p0; q < p1; q++) {
    const T *x = (const T *)hpu_tensor_data(xt) + q * H * W;
    T *y = (T *)hpu_tensor_data(yt) + q * OH * OW;
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        win_t r = avg_window(&n->params.nn, H, W, oh, ow);
        if (!r.div) {
          y[oh * OW + ow] = 0;
          continue;
        }
        T sum = 0;
        for (int64_t h = r.h0; h < r.h1; h++)
          for (int64_t w = r.w0; w < r.w1; w++) sum += x[h * W + w];
        y[oh * OW + ow] = sum / (T)r.div;
      }
  }
}
#endif

#ifndef POOL_NO_BACKWARD
static void FN(avg_backward_planes)(void *ctx, int64_t p0, int64_t p1) {
  const hpu_node_t *n = ctx;
  const hpu_tensor_t *gt = &n->inputs[0], *dt = &n->outputs[0];
  int64_t H = dt->sizes[1], W = dt->sizes[2], OH = gt->sizes[1], OW = gt->sizes[2];
  for (int64_t q = p0; q < p1; q++) {
    const T *g = (const T *)hpu_tensor_data(gt) + q * OH * OW;
    T *dx = (T *)hpu_tensor_data(dt) + q * H * W;
    memset(dx, 0, (size_t)(H * W) * sizeof(T));
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        win_t r = avg_window(&n->params.nn, H, W, oh, ow);
        if (!r.div) continue;
        T d = g[oh * OW + ow] / (T)r.div;
        for (int64_t h = r.h0; h < r.h1; h++)
          for (int64_t w = r.w0; w < r.w1; w++) dx[h * W + w] += d;
      }
  }
}
#endif

static void FN(max_planes)(void *ctx, int64_t p0, int64_t p1) {
  const hpu_node_t *n = ctx;
  const hpu_nn_params_t *p = &n->params.nn;
  const hpu_tensor_t *xt = &n->inputs[0], *yt = &n->outputs[0];
  int64_t H = xt->sizes[1], W = xt->sizes[2], OH = yt->sizes[1], OW = yt->sizes[2];
  int64_t kh = p->i[0], kw = p->i[1], dh = p->i[2], dw = p->i[3];
  int64_t sh = p->sizes[0], sw = p->sizes[1], ph = p->strides[0], pw = p->strides[1];
  for (int64_t q = p0; q < p1; q++) {
    const T *x = (const T *)hpu_tensor_data(xt) + q * H * W;
    T *y = (T *)hpu_tensor_data(yt) + q * OH * OW;
    int64_t *ix = (int64_t *)hpu_tensor_data(&n->outputs[1]) + q * OH * OW;
    for (int64_t oh = 0; oh < OH; oh++) {
      int64_t h0 = oh * sh - ph;
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t w0 = ow * sw - pw;
        T best = LOWEST;
        int64_t bi = -1;
        for (int64_t a = 0; a < kh; a++) {
          int64_t h = h0 + a * dh;
          if (h < 0 || h >= H) continue;
          for (int64_t b = 0; b < kw; b++) {
            int64_t w = w0 + b * dw;
            if (w < 0 || w >= W) continue;
            T v = x[h * W + w];
            if (bi < 0 || v > best || ISNAN(v)) {
              best = v;
              bi = h * W + w;
              if (ISNAN(v)) goto done;
            }
          }
        }
      done:
        y[oh * OW + ow] = best;
        ix[oh * OW + ow] = bi < 0 ? 0 : bi;
      }
    }
  }
}

#ifndef POOL_NO_BACKWARD
static void FN(max_backward_planes)(void *ctx, int64_t p0, int64_t p1) {
  const hpu_node_t *n = ctx;
  const hpu_tensor_t *gt = &n->inputs[0], *dt = &n->outputs[0];
  int64_t OHW = gt->sizes[1] * gt->sizes[2], HW = dt->sizes[1] * dt->sizes[2];
  for (int64_t q = p0; q < p1; q++) {
    const T *g = (const T *)hpu_tensor_data(gt) + q * OHW;
    const int64_t *ix = (const int64_t *)hpu_tensor_data(&n->inputs[1]) + q * OHW;
    T *dx = (T *)hpu_tensor_data(dt) + q * HW;
    memset(dx, 0, (size_t)HW * sizeof(T));
    for (int64_t i = 0; i < OHW; i++)
      if (ix[i] >= 0 && ix[i] < HW) dx[ix[i]] += g[i];
  }
}
#endif
