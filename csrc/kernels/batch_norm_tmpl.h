/* The batch norm loops of batch_norm.c for one element type, included
 * there with T (float / double), SQRT and FN(x) (the name's suffix). The
 * sums are double for both; the per-element arithmetic is in T, as the
 * CPU's kernel does it in the input's (float / double) type. */

static void FN(forward_channels)(void *ctx, int64_t c0, int64_t c1) {
  const bn_t *b = ctx;
  const hpu_node_t *n = b->n;
  const T *x = hpu_tensor_data(&n->inputs[0]), *aff = hpu_tensor_data(&n->inputs[1]);
  T *y = hpu_tensor_data(&n->outputs[0]), *st = hpu_tensor_data(&n->outputs[1]);
  int train = n->params.nn.i[0] != 0;
  T eps = (T)hpu_scalar_as_double(n->params.nn.s[0]);
  int64_t C = b->C, HW = b->HW, cnt = b->N * HW;
  for (int64_t c = c0; c < c1; c++) {
    T mean, var;
    if (train) {
      double s = 0;
      for (int64_t i = 0; i < b->N; i++) {
        const T *p = x + (i * C + c) * HW;
        for (int64_t j = 0; j < HW; j++) s += p[j];
      }
      double m = cnt ? s / (double)cnt : 0, q = 0;
      for (int64_t i = 0; i < b->N; i++) {
        const T *p = x + (i * C + c) * HW;
        for (int64_t j = 0; j < HW; j++) q += ((double)p[j] - m) * ((double)p[j] - m);
      }
      mean = (T)m;
      var = cnt ? (T)(q / (double)cnt) : 0;
    } else {
      const T *run = hpu_tensor_data(&n->inputs[2]);
      mean = run[c];
      var = run[C + c];
    }
    T invstd = (T)1 / SQRT(var + eps);
    st[c] = mean, st[C + c] = invstd, st[2 * C + c] = var;
    T a = invstd * aff[c];
    T sh = aff[C + c] - mean * a;
    for (int64_t i = 0; i < b->N; i++) {
      const T *p = x + (i * C + c) * HW;
      T *q = y + (i * C + c) * HW;
      for (int64_t j = 0; j < HW; j++) q[j] = p[j] * a + sh;
    }
  }
}

static void FN(backward_channels)(void *ctx, int64_t c0, int64_t c1) {
  const bn_t *b = ctx;
  const hpu_node_t *n = b->n;
  const T *dy = hpu_tensor_data(&n->inputs[0]), *x = hpu_tensor_data(&n->inputs[1]);
  const T *st = hpu_tensor_data(&n->inputs[2]);
  const T *w = n->params.nn.i[2] ? hpu_tensor_data(&n->inputs[3]) : NULL;
  int64_t mask = n->params.nn.i[0];
  int train = n->params.nn.i[1] != 0;
  int64_t C = b->C, HW = b->HW, cnt = b->N * HW;
  for (int64_t c = c0; c < c1; c++) {
    T mean = st[c], invstd = st[C + c], wc = w ? w[c] : (T)1;
    double sum = 0, dot = 0;
    for (int64_t i = 0; i < b->N; i++) {
      const T *p = x + (i * C + c) * HW, *g = dy + (i * C + c) * HW;
      for (int64_t j = 0; j < HW; j++) {
        sum += g[j];
        dot += (double)g[j] * ((double)p[j] - mean);
      }
    }
    if (mask & 2) ((T *)hpu_tensor_data(&n->outputs[1]))[c] = (T)(dot * invstd);
    if (mask & 4) ((T *)hpu_tensor_data(&n->outputs[2]))[c] = (T)sum;
    if (!(mask & 1)) continue;
    T *dx = hpu_tensor_data(&n->outputs[0]);
    T ws = invstd * wc;
    if (train) {
      T k = (T)dot * invstd * invstd / (T)cnt, mdy = (T)sum / (T)cnt;
      for (int64_t i = 0; i < b->N; i++) {
        const T *p = x + (i * C + c) * HW, *g = dy + (i * C + c) * HW;
        T *q = dx + (i * C + c) * HW;
        for (int64_t j = 0; j < HW; j++) q[j] = (g[j] - mdy - (p[j] - mean) * k) * ws;
      }
    } else {
      for (int64_t i = 0; i < b->N; i++) {
        const T *g = dy + (i * C + c) * HW;
        T *q = dx + (i * C + c) * HW;
        for (int64_t j = 0; j < HW; j++) q[j] = g[j] * ws;
      }
    }
  }
}

