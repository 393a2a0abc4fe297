/* HPU_OP_BATCH_NORM / HPU_OP_BATCH_NORM_BACKWARD: batch norm over x
 * [N, C, HW] (float32, contiguous), parallel over channels. A channel's
 * elements are N runs of HW; its statistics take two passes summed in
 * double (the mean, then the squared deviations from it), which is at
 * least as close as the CPU's float sums. The normalisation and dx follow
 * the CPU kernel's formulas (batch_norm_kernel.cpp) so results agree to the
 * last bits of float. */
#include <math.h>
#include <stdint.h>

#include "hpu/parallel.h"
#include "kernels/kernels.h"
#include "kernels/nn_util.h"

#define INVALID HPU_ERROR_INVALID_ARGUMENT

static hpu_status_t need(const char *name, const hpu_tensor_t *t, const char *what, int nd, int64_t a, int64_t b) {
  if (t->ndim != nd || t->sizes[0] != a || (nd > 1 && t->sizes[1] != b))
    return hpu_error(INVALID, "%s: %s has the wrong shape", name, what);
  if (t->dtype != HPU_FLOAT32)
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: %s must be float32, got %s", name, what, hpu_dtype_name(t->dtype));
  if (!hpu_tensor_is_contiguous(t)) return hpu_error(INVALID, "%s: %s must be contiguous", name, what);
  return HPU_SUCCESS;
}

static hpu_status_t need_x(const char *name, const hpu_tensor_t *x, const char *what) {
  if (x->ndim != 3) return hpu_error(INVALID, "%s: %s must be [N, C, HW]", name, what);
  return need(name, x, what, 3, x->sizes[0], x->sizes[1]);
}

static int same3(const hpu_tensor_t *a, const hpu_tensor_t *b) {
  return a->ndim == 3 && b->ndim == 3 && a->sizes[0] == b->sizes[0] && a->sizes[1] == b->sizes[1] &&
         a->sizes[2] == b->sizes[2];
}

hpu_status_t hpu_batch_norm_validate(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  for (int i = 0; i < n->num_inputs && i < HPU_MAX_INPUTS; i++) HPU_TRY(hpu_check_tensor(name, "input", i, &n->inputs[i]));
  if (n->op == HPU_OP_BATCH_NORM) {
    int train = n->params.nn.i[0] != 0;
    if (n->num_inputs != (train ? 2 : 3) || n->num_outputs != 2)
      return hpu_error(INVALID, "%s: expects %d inputs and 2 outputs", name, train ? 2 : 3);
    const hpu_tensor_t *x = &n->inputs[0];
    HPU_TRY(need_x(name, x, "the input"));
    int64_t C = x->sizes[1];
    HPU_TRY(need(name, &n->inputs[1], "weight/bias", 2, 2, C));
    if (!train) HPU_TRY(need(name, &n->inputs[2], "the running statistics", 2, 2, C));
    HPU_TRY(hpu_check_node_output(n, 0));
    HPU_TRY(hpu_check_node_output(n, 1));
    HPU_TRY(need_x(name, &n->outputs[0], "the output"));
    if (!same3(x, &n->outputs[0])) return hpu_error(INVALID, "%s: output and input shapes differ", name);
    return need(name, &n->outputs[1], "the statistics", 2, 3, C);
  }
  int has_w = n->params.nn.i[2] != 0;
  int64_t mask = n->params.nn.i[0];
  if (n->num_inputs != 3 + has_w || n->num_outputs != 3)
    return hpu_error(INVALID, "%s: expects %d inputs and 3 outputs", name, 3 + has_w);
  const hpu_tensor_t *dy = &n->inputs[0], *x = &n->inputs[1];
  HPU_TRY(need_x(name, dy, "the gradient"));
  HPU_TRY(need_x(name, x, "the input"));
  if (!same3(dy, x)) return hpu_error(INVALID, "%s: gradient and input shapes differ", name);
  int64_t C = x->sizes[1];
  HPU_TRY(need(name, &n->inputs[2], "the statistics", 2, 2, C));
  if (has_w) HPU_TRY(need(name, &n->inputs[3], "the weight", 1, C, 0));
  for (int k = 0; k < 3; k++) {
    if (!((mask >> k) & 1)) continue;
    HPU_TRY(hpu_check_node_output(n, k));
    if (k == 0) {
      HPU_TRY(need_x(name, &n->outputs[0], "grad_input"));
      if (!same3(x, &n->outputs[0])) return hpu_error(INVALID, "%s: grad_input and input shapes differ", name);
    } else {
      HPU_TRY(need(name, &n->outputs[k], "dweight/dbias", 1, C, 0));
    }
  }
  return HPU_SUCCESS;
}

typedef struct {
  const hpu_node_t *n;
  int64_t N, C, HW;
} bn_t;

static void forward_channels(void *ctx, int64_t c0, int64_t c1) {
  const bn_t *b = ctx;
  const hpu_node_t *n = b->n;
  const float *x = hpu_tensor_data(&n->inputs[0]), *aff = hpu_tensor_data(&n->inputs[1]);
  float *y = hpu_tensor_data(&n->outputs[0]), *st = hpu_tensor_data(&n->outputs[1]);
  int train = n->params.nn.i[0] != 0;
  float eps = (float)hpu_scalar_as_double(n->params.nn.s[0]);
  int64_t C = b->C, HW = b->HW, cnt = b->N * HW;
  for (int64_t c = c0; c < c1; c++) {
    float mean, var;
    if (train) {
      double s = 0;
      for (int64_t i = 0; i < b->N; i++) {
        const float *p = x + (i * C + c) * HW;
        for (int64_t j = 0; j < HW; j++) s += p[j];
      }
      double m = cnt ? s / (double)cnt : 0, q = 0;
      for (int64_t i = 0; i < b->N; i++) {
        const float *p = x + (i * C + c) * HW;
        for (int64_t j = 0; j < HW; j++) q += ((double)p[j] - m) * ((double)p[j] - m);
      }
      mean = (float)m;
      var = cnt ? (float)(q / (double)cnt) : 0;
    } else {
      const float *run = hpu_tensor_data(&n->inputs[2]);
      mean = run[c];
      var = run[C + c];
    }
    float invstd = 1.0f / sqrtf(var + eps);
    st[c] = mean, st[C + c] = invstd, st[2 * C + c] = var;
    float a = invstd * aff[c];
    float sh = aff[C + c] - mean * a;
    for (int64_t i = 0; i < b->N; i++) {
      const float *p = x + (i * C + c) * HW;
      float *q = y + (i * C + c) * HW;
      for (int64_t j = 0; j < HW; j++) q[j] = p[j] * a + sh;
    }
  }
}

static void backward_channels(void *ctx, int64_t c0, int64_t c1) {
  const bn_t *b = ctx;
  const hpu_node_t *n = b->n;
  const float *dy = hpu_tensor_data(&n->inputs[0]), *x = hpu_tensor_data(&n->inputs[1]);
  const float *st = hpu_tensor_data(&n->inputs[2]);
  const float *w = n->params.nn.i[2] ? hpu_tensor_data(&n->inputs[3]) : NULL;
  int64_t mask = n->params.nn.i[0];
  int train = n->params.nn.i[1] != 0;
  int64_t C = b->C, HW = b->HW, cnt = b->N * HW;
  for (int64_t c = c0; c < c1; c++) {
    float mean = st[c], invstd = st[C + c], wc = w ? w[c] : 1.0f;
    double sum = 0, dot = 0;
    for (int64_t i = 0; i < b->N; i++) {
      const float *p = x + (i * C + c) * HW, *g = dy + (i * C + c) * HW;
      for (int64_t j = 0; j < HW; j++) {
        sum += g[j];
        dot += (double)g[j] * ((double)p[j] - mean);
      }
    }
    if (mask & 2) ((float *)hpu_tensor_data(&n->outputs[1]))[c] = (float)(dot * invstd);
    if (mask & 4) ((float *)hpu_tensor_data(&n->outputs[2]))[c] = (float)sum;
    if (!(mask & 1)) continue;
    float *dx = hpu_tensor_data(&n->outputs[0]);
    float ws = invstd * wc;
    if (train) {
      float k = (float)dot * invstd * invstd / (float)cnt, mdy = (float)sum / (float)cnt;
      for (int64_t i = 0; i < b->N; i++) {
        const float *p = x + (i * C + c) * HW, *g = dy + (i * C + c) * HW;
        float *q = dx + (i * C + c) * HW;
        for (int64_t j = 0; j < HW; j++) q[j] = (g[j] - mdy - (p[j] - mean) * k) * ws;
      }
    } else {
      for (int64_t i = 0; i < b->N; i++) {
        const float *g = dy + (i * C + c) * HW;
        float *q = dx + (i * C + c) * HW;
        for (int64_t j = 0; j < HW; j++) q[j] = g[j] * ws;
      }
    }
  }
}

hpu_status_t hpu_batch_norm_execute(const hpu_node_t *n) {
  const hpu_tensor_t *x = &n->inputs[n->op == HPU_OP_BATCH_NORM ? 0 : 1];
  bn_t b = {n, x->sizes[0], x->sizes[1], x->sizes[2]};
  hpu_parallel_for(b.C, 1, n->op == HPU_OP_BATCH_NORM ? forward_channels : backward_channels, &b);
  return HPU_SUCCESS;
}
