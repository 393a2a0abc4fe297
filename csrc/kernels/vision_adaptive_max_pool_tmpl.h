/* The loops of vision_adaptive_max_pool.c for one element type, included
 * there with T (float / double), FN(x) (the name's suffix) and ROUND(v, dt)
 * (rounding a partial sum to the result's dtype: bf16 / fp16 results are
 * summed in float32 and rounded after every add, as the CPU adds in them). */

static void FN(max_planes)(void *ctx, int64_t p0, int64_t p1) {
  const hpu_node_t *n = ctx;
  const hpu_tensor_t *xt = &n->inputs[0], *yt = &n->outputs[0];
  int64_t D = xt->sizes[1], H = xt->sizes[2], W = xt->sizes[3];
  int64_t OD = yt->sizes[1], OH = yt->sizes[2], OW = yt->sizes[3], out = OD * OH * OW;
  for (int64_t q = p0; q < p1; q++) {
    const T *x = (const T *)hpu_tensor_data(xt) + q * D * H * W;
    T *y = (T *)hpu_tensor_data(yt) + q * out;
    int64_t *ix = (int64_t *)hpu_tensor_data(&n->outputs[1]) + q * out;
    for (int64_t od = 0; od < OD; od++) {
      int64_t d0 = hpu_adaptive_win_start(od, OD, D), d1 = hpu_adaptive_win_end(od, OD, D);
      for (int64_t oh = 0; oh < OH; oh++) {
        int64_t h0 = hpu_adaptive_win_start(oh, OH, H), h1 = hpu_adaptive_win_end(oh, OH, H);
        for (int64_t ow = 0; ow < OW; ow++) {
          int64_t w0 = hpu_adaptive_win_start(ow, OW, W), w1 = hpu_adaptive_win_end(ow, OW, W);
          T best = (T)-INFINITY;
          int64_t bi = (d0 * H + h0) * W + w0;
          for (int64_t d = d0; d < d1; d++)
            for (int64_t h = h0; h < h1; h++)
              for (int64_t w = w0; w < w1; w++) {
                int64_t i = (d * H + h) * W + w;
                T v = x[i];
                if (v > best || isnan(v)) {
                  best = v;
                  bi = i;
                }
              }
          y[(od * OH + oh) * OW + ow] = best;
          ix[(od * OH + oh) * OW + ow] = bi;
        }
      }
    }
  }
}

static void FN(max_backward_planes)(void *ctx, int64_t p0, int64_t p1) {
  bad_ctx_t *c = ctx;
  const hpu_node_t *n = c->node;
  const hpu_tensor_t *gt = &n->inputs[0], *dt = &n->outputs[0];
  int64_t out = gt->sizes[1] * gt->sizes[2] * gt->sizes[3], in = dt->sizes[1] * dt->sizes[2] * dt->sizes[3];
  hpu_dtype_t rt = (hpu_dtype_t)n->params.nn.i[0];
  (void)rt;
  for (int64_t q = p0; q < p1; q++) {
    const T *g = (const T *)hpu_tensor_data(gt) + q * out;
    const int64_t *ix = (const int64_t *)hpu_tensor_data(&n->inputs[1]) + q * out;
    T *dx = (T *)hpu_tensor_data(dt) + q * in;
    memset(dx, 0, (size_t)in * sizeof(T));
    for (int64_t i = 0; i < out; i++) {
      int64_t k = ix[i];
      if (k < 0 || k >= in) {
        note_bad(c, k);
        continue;
      }
      dx[k] = ROUND(dx[k] + g[i], rt);
    }
  }
}
