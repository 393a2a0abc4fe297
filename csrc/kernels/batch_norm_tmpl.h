/* The batch norm loops of batch_norm.c for one element type, included
 * there with T (float / double), SQRT and FN(x) (the name's suffix); each
 * channel goes through the loops of batch_norm_rows.h picked for this CPU
 * (bn_t's rows). The sums are double for both; the per-element arithmetic
 * is in T, as the CPU's kernel does it in the input's (float / double)
 * type. */

static void FN(forward_channels)(void *ctx, int64_t c0, int64_t c1) {
  const bn_t *b = ctx;
  const FN(bn_rows_t) *R = b->rows;
  const hpu_node_t *n = b->n;
  const T *x = hpu_tensor_data(&n->inputs[0]), *aff = hpu_tensor_data(&n->inputs[1]);
  T *y = hpu_tensor_data(&n->outputs[0]), *st = hpu_tensor_data(&n->outputs[1]);
  int train = n->params.nn.i[0] != 0;
  T eps = (T)hpu_scalar_as_double(n->params.nn.s[0]);
  int64_t N = b->N, C = b->C, HW = b->HW, cnt = N * HW, stride = C * HW;
  for (int64_t c = c0; c < c1; c++) {
    T mean, var;
    if (train) {
      double m = cnt ? R->sum(x + c * HW, N, HW, stride) / (double)cnt : 0;
      mean = (T)m;
      var = cnt ? (T)(R->ssd(x + c * HW, N, HW, stride, m) / (double)cnt) : 0;
    } else {
      const T *run = hpu_tensor_data(&n->inputs[2]);
      mean = run[c];
      var = run[C + c];
    }
    T invstd = (T)1 / SQRT(var + eps);
    st[c] = mean, st[C + c] = invstd, st[2 * C + c] = var;
    T a = invstd * aff[c];
    T sh = aff[C + c] - mean * a;
    R->affine(x + c * HW, y + c * HW, N, HW, stride, a, sh);
  }
}

static void FN(backward_channels)(void *ctx, int64_t c0, int64_t c1) {
  const bn_t *b = ctx;
  const FN(bn_rows_t) *R = b->rows;
  const hpu_node_t *n = b->n;
  const T *dy = hpu_tensor_data(&n->inputs[0]), *x = hpu_tensor_data(&n->inputs[1]);
  const T *st = hpu_tensor_data(&n->inputs[2]);
  const T *w = n->params.nn.i[2] ? hpu_tensor_data(&n->inputs[3]) : NULL;
  int64_t mask = n->params.nn.i[0];
  int train = n->params.nn.i[1] != 0;
  int64_t N = b->N, C = b->C, HW = b->HW, cnt = N * HW, stride = C * HW;
  for (int64_t c = c0; c < c1; c++) {
    T mean = st[c], invstd = st[C + c], wc = w ? w[c] : (T)1;
    double sum, dot;
    R->sumdot(dy + c * HW, x + c * HW, N, HW, stride, (double)mean, &sum, &dot);
    if (mask & 2) ((T *)hpu_tensor_data(&n->outputs[1]))[c] = (T)(dot * invstd);
    if (mask & 4) ((T *)hpu_tensor_data(&n->outputs[2]))[c] = (T)sum;
    if (!(mask & 1)) continue;
    T *dx = hpu_tensor_data(&n->outputs[0]);
    T ws = invstd * wc;
    if (train) {
      T k = (T)dot * invstd * invstd / (T)cnt, mdy = (T)sum / (T)cnt;
      R->dx(dy + c * HW, x + c * HW, dx + c * HW, N, HW, stride, mean, mdy, k, ws);
    } else {
      R->scale(dy + c * HW, dx + c * HW, N, HW, stride, ws);
    }
  }
}
