/* The loops of vision_adaptive_pool.c for one element type, included
 * there with T (float / double) and FN(x) (the name's suffix): the sum in
 * T, as the CPU's kernel sums in its accumulator type (float for float,
 * double for double). */

static void FN(forward_planes)(void *ctx, int64_t p0, int64_t p1) {
  const hpu_node_t *n = ctx;
  const hpu_tensor_t *xt = &n->inputs[0], *yt = &n->outputs[0];
  int64_t D = xt->sizes[1], H = xt->sizes[2], W = xt->sizes[3];
  int64_t OD = yt->sizes[1], OH = yt->sizes[2], OW = yt->sizes[3];
  for (int64_t q = p0; q < p1; q++) {
    const T *x = (const T *)hpu_tensor_data(xt) + q * D * H * W;
    T *y = (T *)hpu_tensor_data(yt) + q * OD * OH * OW;
    for (int64_t od = 0; od < OD; od++) {
      int64_t d0 = hpu_adaptive_win_start(od, OD, D), d1 = hpu_adaptive_win_end(od, OD, D);
      for (int64_t oh = 0; oh < OH; oh++) {
        int64_t h0 = hpu_adaptive_win_start(oh, OH, H), h1 = hpu_adaptive_win_end(oh, OH, H);
        for (int64_t ow = 0; ow < OW; ow++) {
          int64_t w0 = hpu_adaptive_win_start(ow, OW, W), w1 = hpu_adaptive_win_end(ow, OW, W);
          T sum = 0;
          for (int64_t d = d0; d < d1; d++)
            for (int64_t h = h0; h < h1; h++)
              for (int64_t w = w0; w < w1; w++) sum += x[(d * H + h) * W + w];
          y[(od * OH + oh) * OW + ow] = sum / (T)(d1 - d0) / (T)(h1 - h0) / (T)(w1 - w0);
        }
      }
    }
  }
}

static void FN(backward_planes)(void *ctx, int64_t p0, int64_t p1) {
  const hpu_node_t *n = ctx;
  const hpu_tensor_t *gt = &n->inputs[0], *dt = &n->outputs[0];
  int64_t D = dt->sizes[1], H = dt->sizes[2], W = dt->sizes[3];
  int64_t OD = gt->sizes[1], OH = gt->sizes[2], OW = gt->sizes[3];
  for (int64_t q = p0; q < p1; q++) {
    const T *g = (const T *)hpu_tensor_data(gt) + q * OD * OH * OW;
    T *dx = (T *)hpu_tensor_data(dt) + q * D * H * W;
    memset(dx, 0, (size_t)(D * H * W) * sizeof(T));
    for (int64_t od = 0; od < OD; od++) {
      int64_t d0 = hpu_adaptive_win_start(od, OD, D), d1 = hpu_adaptive_win_end(od, OD, D);
      for (int64_t oh = 0; oh < OH; oh++) {
        int64_t h0 = hpu_adaptive_win_start(oh, OH, H), h1 = hpu_adaptive_win_end(oh, OH, H);
        for (int64_t ow = 0; ow < OW; ow++) {
          int64_t w0 = hpu_adaptive_win_start(ow, OW, W), w1 = hpu_adaptive_win_end(ow, OW, W);
          T delta = g[(od * OH + oh) * OW + ow] / (T)(d1 - d0) / (T)(h1 - h0) / (T)(w1 - w0);
          for (int64_t d = d0; d < d1; d++)
            for (int64_t h = h0; h < h1; h++)
              for (int64_t w = w0; w < w1; w++) dx[(d * H + h) * W + w] += delta;
        }
      }
    }
  }
}

