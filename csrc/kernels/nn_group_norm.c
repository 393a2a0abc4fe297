/* Group norm and its backward over x [N, C, HxW]: group g of sample n is
 * the D * HxW contiguous elements of its D = C / G channels, one "row" of
 * the N * G rows the thread pool splits.
 *
 * Math follows PyTorch's CPU kernel (group_norm_kernel.cpp) step by step so
 * bf16 / fp16 results round where the CPU's do: statistics in float (double
 * for float64), y = x * scale + bias with scale = rstd * w[c] and
 * bias = -scale * mean + b[c] per channel ((x - mean) * rstd without weight
 * and bias), one rounding to the output dtype; the backward's
 * dx = c1 * dy + c2 * x + c3 per channel from the per-channel sums of
 * dy * x and dy. The all-bf16 backward reads and writes bf16 in its
 * passes; otherwise a bf16 / fp16 group is converted to float once into a
 * buffer the task keeps (chunk by chunk on the stack when it is larger than
 * GN_ROW_MAX or memory runs out). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "hpu/parallel.h"
#include "hpu/status.h"
#include "kernels/cvt.h"
#include "kernels/nn_rows.h"
#include "kernels/nn_util.h"
#include "runtime/schedule_policy.h" /* HPU_GRAIN */

/* Floats per conversion chunk: three chunks (24 KiB) on a task's stack. */
#define GN_CHUNK 2048
/* A bf16 / fp16 group of up to this many elements is converted to float
 * once, into a buffer the task keeps, rather than chunk by chunk in each of
 * the three passes: a [2, 320, 64, 64] bf16 group norm took 1.6x torch's
 * time chunk by chunk, 1.05x whole. */
#define GN_ROW_MAX (1 << 20)

typedef struct {
  const hpu_node_t *node;
  const hpu_nn_rows_t *R;
  int64_t N, C, HW, G, D;
  double eps;
  int affine;        /* weight or bias given */
  float *w, *b;      /* float copies of weight / bias (1 / 0 when absent) */
  double *wd, *bd;   /* float64 */
  double *ds, *db;   /* backward: per (n, c) sums of dy * x and of dy */
} gn_t;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* x[k .. k + m) as floats: x itself for float32, else converted into buf. */
static const float *floats(const char *x, hpu_dtype_t dt, int64_t k, int64_t m, float *buf) {
  if (dt == HPU_FLOAT32) return (const float *)x + k;
  hpu_nn_load_row(buf, x + k * (int64_t)hpu_dtype_size(dt), m, dt);
  return buf;
}

/* sum(x) over n elements: float chunks combined in double (double for f64). */
static double seg_sum(const gn_t *c, const char *x, hpu_dtype_t dt, int64_t n, float *buf) {
  double s = 0;
  if (dt == HPU_FLOAT64) {
    for (int64_t i = 0; i < n; i++) s += ((const double *)x)[i];
    return s;
  }
  for (int64_t k = 0; k < n; k += GN_CHUNK) {
    int64_t m = min64(GN_CHUNK, n - k);
    s += c->R->sum(floats(x, dt, k, m, buf), m);
  }
  return s;
}

/* sum((x - mean)^2) over n elements. */
static double seg_ssd(const gn_t *c, const char *x, hpu_dtype_t dt, int64_t n, double mean,
                      float *buf) {
  double s = 0;
  if (dt == HPU_FLOAT64) {
    for (int64_t i = 0; i < n; i++) {
      double d = ((const double *)x)[i] - mean;
      s += d * d;
    }
    return s;
  }
  for (int64_t k = 0; k < n; k += GN_CHUNK) {
    int64_t m = min64(GN_CHUNK, n - k);
    s += c->R->ssd(floats(x, dt, k, m, buf), m, (float)mean);
  }
  return s;
}

/* sum(a * b) over n elements (a, b of the same kind: both f64 or neither). */
static double seg_dot(const gn_t *c, const char *a, hpu_dtype_t da, const char *b,
                      hpu_dtype_t db, int64_t n, float *bufa, float *bufb) {
  double s = 0;
  if (da == HPU_FLOAT64) {
    for (int64_t i = 0; i < n; i++) s += ((const double *)a)[i] * ((const double *)b)[i];
    return s;
  }
  for (int64_t k = 0; k < n; k += GN_CHUNK) {
    int64_t m = min64(GN_CHUNK, n - k);
    s += c->R->dot(floats(a, da, k, m, bufa), floats(b, db, k, m, bufb), m);
  }
  return s;
}

/* sum(dy * x) and sum(dy) over n bf16 elements in one pass, chunked and
 * combined as seg_dot and seg_sum, so the same bits. */
static void seg_dotsum_bf16(const gn_t *c, const char *dy, const char *x, int64_t n, double *ds,
                            double *db) {
  double s = 0, t = 0;
  for (int64_t k = 0; k < n; k += GN_CHUNK) {
    float sy;
    s += c->R->dotsum_bf16((const uint16_t *)x + k, (const uint16_t *)dy + k, min64(GN_CHUNK, n - k), &sy);
    t += sy;
  }
  *ds = s;
  *db = t;
}

/* y = x * scale + bias (affine) or (x - mean) * rstd over one channel. */
static void channel_forward(const gn_t *c, const char *x, char *y, hpu_dtype_t dt, double scale,
                            double bias, double mean, double rstd, float *buf) {
  int64_t n = c->HW;
  if (dt == HPU_FLOAT64) {
    const double *xd = (const double *)x;
    double *yd = (double *)y;
    for (int64_t i = 0; i < n; i++)
      yd[i] = c->affine ? xd[i] * scale + bias : (xd[i] - mean) * rstd;
    return;
  }
  int64_t es = (int64_t)hpu_dtype_size(dt);
  for (int64_t k = 0; k < n; k += GN_CHUNK) {
    int64_t m = min64(GN_CHUNK, n - k);
    const float *f = floats(x, dt, k, m, buf);
    float *o = dt == HPU_FLOAT32 ? (float *)y + k : buf;
    if (c->affine) c->R->affine(f, o, m, (float)scale, (float)bias);
    else c->R->center(f, o, m, (float)mean, (float)rstd);
    if (dt != HPU_FLOAT32) hpu_nn_store_row(y + k * es, buf, m, dt);
  }
}

/* A task's float buffer of k rows of len elements for a bf16 / fp16 group,
 * or NULL: float32 / float64, a group too large, or no memory (the passes
 * then convert chunk by chunk). */
static float *whole_row_buffer(hpu_dtype_t dt, int64_t len, int k) {
  if ((dt != HPU_BFLOAT16 && dt != HPU_FLOAT16) || len == 0 || len > GN_ROW_MAX) return NULL;
  return malloc((size_t)len * (size_t)k * sizeof(float));
}

static void gn_rows(void *ctx, int64_t begin, int64_t end) {
  const gn_t *c = ctx;
  const hpu_node_t *nd = c->node;
  const hpu_tensor_t *x = &nd->inputs[0], *y = &nd->outputs[0];
  hpu_dtype_t dt = x->dtype;
  int f64 = dt == HPU_FLOAT64;
  int64_t es = (int64_t)hpu_dtype_size(dt), len = c->D * c->HW;
  float buf[GN_CHUNK];
  float *row = whole_row_buffer(dt, len, 1);
  for (int64_t r = begin; r < end; r++) {
    const char *px = (const char *)hpu_tensor_data(x) + r * len * es;
    char *py = (char *)hpu_tensor_data(y) + r * len * es;
    char *ry = py;
    if (row) { /* work on the float copy in place, store it at the end */
      hpu_nn_load_row(row, px, len, dt);
      px = ry = (char *)row;
    }
    hpu_dtype_t wt = row ? HPU_FLOAT32 : dt;
    int64_t ws = row ? 4 : es;
    double mean, var;
    if (len == 0) { /* as the CPU: mean 0, rstd NaN */
      mean = 0;
      var = NAN;
    } else {
      mean = seg_sum(c, px, wt, len, buf) / (double)len;
      if (!f64) mean = (float)mean;
      var = seg_ssd(c, px, wt, len, mean, buf) / (double)len;
    }
    double rstd = 1.0 / sqrt((var < 0 ? 0 : var) + c->eps);
    if (!f64) rstd = (float)rstd;
    int64_t g = r % c->G;
    for (int64_t j = 0; j < c->D; j++) {
      int64_t ch = g * c->D + j;
      double scale, bias;
      if (f64) {
        scale = rstd * c->wd[ch];
        bias = -scale * mean + c->bd[ch];
      } else {
        float s = (float)rstd * c->w[ch];
        scale = s;
        bias = -s * (float)mean + c->b[ch];
      }
      channel_forward(c, px + j * c->HW * ws, ry + j * c->HW * ws, wt, scale, bias, mean, rstd,
                      buf);
    }
    if (row) hpu_nn_store_row(py, row, len, dt);
    hpu_store_f64(hpu_nn_elem(&nd->outputs[1], r), nd->outputs[1].dtype, mean);
    hpu_store_f64(hpu_nn_elem(&nd->outputs[2], r), nd->outputs[2].dtype, rstd);
  }
  free(row);
}

static hpu_status_t load_params(gn_t *c, const hpu_tensor_t *w, const hpu_tensor_t *b) {
  if (hpu_nn_param_copy(w, c->C, 1.0f, &c->w, &c->wd) ||
      hpu_nn_param_copy(b, c->C, 0.0f, &c->b, &c->bd))
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "%s: out of host memory for the parameters",
                     hpu_op_name(c->node->op));
  return HPU_SUCCESS;
}

static void free_params(gn_t *c) {
  free(c->w);
  free(c->wd);
  free(c->b);
  free(c->bd);
}

/* Rows of len elements per task: about 32K elements, at least one row. */
static int64_t row_grain(int64_t len) {
  return len > 0 && len < HPU_GRAIN ? HPU_GRAIN / len : 1;
}

/* The context of a node over x [N, C, HxW] in G groups. */
static gn_t gn_context(const hpu_node_t *node, const hpu_tensor_t *x, int64_t G) {
  gn_t c = {0};
  c.node = node;
  c.R = hpu_nn_rows();
  c.N = x->sizes[0];
  c.C = x->sizes[1];
  c.HW = x->sizes[2];
  c.G = G;
  c.D = c.C / G;
  return c;
}

hpu_status_t hpu_nn_group_norm(const hpu_node_t *node) {
  gn_t c = gn_context(node, &node->inputs[0], node->params.nn.i[1]);
  int64_t flags = node->params.nn.i[0];
  c.eps = hpu_scalar_as_double(node->params.nn.s[0]);
  c.affine = (flags & 3) != 0;
  if (c.N == 0) return HPU_SUCCESS;
  const hpu_tensor_t *w = (flags & 1) ? &node->inputs[1] : NULL;
  const hpu_tensor_t *b = (flags & 2) ? &node->inputs[(flags & 1) ? 2 : 1] : NULL;
  hpu_status_t st = load_params(&c, w, b);
  if (st == HPU_SUCCESS) hpu_parallel_for(c.N * c.G, row_grain(c.D * c.HW), gn_rows, &c);
  free_params(&c);
  return st;
}

/* Backward ------------------------------------------------------------------------- */

/* One channel of dx = c1 * dy + c2 * x + c3. */
static void channel_backward(const gn_t *c, const char *dy, hpu_dtype_t dtg, const char *x,
                             hpu_dtype_t dt, char *dx, hpu_dtype_t dtd, double c1, double c2,
                             double c3, float *bg, float *bx, float *bd) {
  int64_t n = c->HW;
  if (dt == HPU_FLOAT64) {
    const double *g = (const double *)dy, *xd = (const double *)x;
    double *o = (double *)dx;
    for (int64_t i = 0; i < n; i++) o[i] = c1 * g[i] + c2 * xd[i] + c3;
    return;
  }
  int64_t es = (int64_t)hpu_dtype_size(dtd);
  for (int64_t k = 0; k < n; k += GN_CHUNK) {
    int64_t m = min64(GN_CHUNK, n - k);
    float *o = dtd == HPU_FLOAT32 ? (float *)dx + k : bd;
    c->R->axpby(floats(dy, dtg, k, m, bg), floats(x, dt, k, m, bx), o, m, (float)c1,
                (float)c2, (float)c3);
    if (dtd != HPU_FLOAT32) hpu_nn_store_row(dx + k * es, bd, m, dtd);
  }
}

static void gnb_rows(void *ctx, int64_t begin, int64_t end) {
  const gn_t *c = ctx;
  const hpu_node_t *nd = c->node;
  const hpu_tensor_t *dy = &nd->inputs[0], *x = &nd->inputs[1], *st = &nd->inputs[2];
  const hpu_tensor_t *dx = &nd->outputs[0];
  int want_dx = (int)(nd->params.nn.i[0] & 1);
  hpu_dtype_t dt = x->dtype, dtg = dy->dtype, dtd = want_dx ? dx->dtype : dt;
  int f64 = dt == HPU_FLOAT64;
  int64_t es = (int64_t)hpu_dtype_size(dt), esg = (int64_t)hpu_dtype_size(dtg),
          esd = (int64_t)hpu_dtype_size(dtd), HW = c->HW, D = c->D;
  float bg[GN_CHUNK], bx[GN_CHUNK], bd[GN_CHUNK];
  int64_t len = D * HW;
  /* all bf16: read and written as bf16 by fused passes (converting dy and x
   * to float first took 2x torch's time, which reads bf16 in its loops) */
  int direct = dt == HPU_BFLOAT16 && dtg == HPU_BFLOAT16 && dtd == HPU_BFLOAT16;
  float *row = direct ? NULL : whole_row_buffer(dt, len, 2); /* dy (then dx) and x as floats */
  for (int64_t r = begin; r < end; r++) {
    int64_t n = r / c->G, g = r % c->G, ch0 = g * D;
    const char *px = (const char *)hpu_tensor_data(x) + (n * c->C + ch0) * HW * es;
    const char *pg = (const char *)hpu_tensor_data(dy) + (n * c->C + ch0) * HW * esg;
    char *pd = want_dx ? (char *)hpu_tensor_data(dx) + (n * c->C + ch0) * HW * esd : NULL;
    char *rd = pd;
    hpu_dtype_t wx = dt, wg = dtg, wd = dtd;
    if (row) {
      hpu_nn_load_row(row, pg, len, dtg);
      hpu_nn_load_row(row + len, px, len, dt);
      pg = rd = (char *)row;
      px = (const char *)(row + len);
      wx = wg = wd = HPU_FLOAT32;
    }
    int64_t sx = (int64_t)hpu_dtype_size(wx), sg = (int64_t)hpu_dtype_size(wg),
            sd = (int64_t)hpu_dtype_size(wd);
    for (int64_t j = 0; j < D; j++) {
      double *ds = &c->ds[n * c->C + ch0 + j], *db = &c->db[n * c->C + ch0 + j];
      if (direct) {
        seg_dotsum_bf16(c, pg + j * HW * sg, px + j * HW * sx, HW, ds, db);
        continue;
      }
      *ds = seg_dot(c, pg + j * HW * sg, wg, px + j * HW * sx, wx, HW, bg, bx);
      *db = seg_sum(c, pg + j * HW * sg, wg, HW, bg);
    }
    if (!want_dx) continue;
    double mean = hpu_load_f64(hpu_nn_elem(st, r), st->dtype);
    double rstd = hpu_load_f64(hpu_nn_elem(st, c->N * c->G + r), st->dtype);
    double c2, c3;
    if (f64) {
      double dsv = 0, dbv = 0, s = 1.0 / (double)(D * HW);
      for (int64_t j = 0; j < D; j++) {
        dsv += c->ds[n * c->C + ch0 + j] * c->wd[ch0 + j];
        dbv += c->db[n * c->C + ch0 + j] * c->wd[ch0 + j];
      }
      c2 = (dbv * mean - dsv) * rstd * rstd * rstd * s;
      c3 = -c2 * mean - dbv * rstd * s;
    } else {
      /* in float, as the CPU: a group of one element cancels to noise, and
       * the CPU's noise is this one */
      float dsv = 0, dbv = 0, m = (float)mean, rs = (float)rstd, s = 1.0f / (float)(D * HW);
      for (int64_t j = 0; j < D; j++) {
        dsv += (float)c->ds[n * c->C + ch0 + j] * c->w[ch0 + j];
        dbv += (float)c->db[n * c->C + ch0 + j] * c->w[ch0 + j];
      }
      float f2 = (dbv * m - dsv) * rs * rs * rs * s;
      c2 = f2;
      c3 = -f2 * m - dbv * rs * s;
    }
    for (int64_t j = 0; j < D; j++) {
      double c1 = f64 ? rstd * c->wd[ch0 + j] : (float)rstd * c->w[ch0 + j];
      if (direct) {
        c->R->axpby_bf16((const uint16_t *)(pg + j * HW * sg), (const uint16_t *)(px + j * HW * sx),
                         (uint16_t *)(rd + j * HW * sd), HW, (float)c1, (float)c2, (float)c3);
        continue;
      }
      channel_backward(c, pg + j * HW * sg, wg, px + j * HW * sx, wx, rd + j * HW * sd, wd, c1, c2,
                       c3, bg, bx, bd);
    }
    if (row) hpu_nn_store_row(pd, row, len, dtd);
  }
  free(row);
}

hpu_status_t hpu_nn_group_norm_backward(const hpu_node_t *node) {
  gn_t c = gn_context(node, &node->inputs[1], node->params.nn.i[2]);
  const hpu_tensor_t *st = &node->inputs[2];
  int64_t mask = node->params.nn.i[0];
  const hpu_tensor_t *w = node->params.nn.i[1] ? &node->inputs[3] : NULL;
  hpu_status_t status = load_params(&c, w, NULL);
  size_t nc = (size_t)(c.N * c.C > 0 ? c.N * c.C : 1);
  c.ds = malloc(nc * sizeof(double));
  c.db = malloc(nc * sizeof(double));
  if (status == HPU_SUCCESS && (!c.ds || !c.db))
    status = hpu_error(HPU_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %lld channel sums",
                       hpu_op_name(node->op), (long long)(c.N * c.C));
  if (status == HPU_SUCCESS) {
    if (c.N > 0) hpu_parallel_for(c.N * c.G, row_grain(c.D * c.HW), gnb_rows, &c);
    /* dweight[c] = sum over n of (ds - db * mean) * rstd; dbias[c] = sum of db */
    for (int k = 1; k < 3; k++) {
      if (!((mask >> k) & 1)) continue;
      const hpu_tensor_t *o = &node->outputs[k];
      for (int64_t ch = 0; ch < c.C; ch++) {
        double acc = 0;
        for (int64_t n = 0; n < c.N; n++) {
          int64_t r = n * c.G + ch / c.D;
          double dbv = c.db[n * c.C + ch];
          if (k == 2) {
            acc += dbv;
            continue;
          }
          double mean = hpu_load_f64(hpu_nn_elem(st, r), st->dtype);
          double rstd = hpu_load_f64(hpu_nn_elem(st, c.N * c.G + r), st->dtype);
          acc += (c.ds[n * c.C + ch] - dbv * mean) * rstd;
        }
        hpu_store_f64(hpu_nn_elem(o, ch), o->dtype, acc);
      }
    }
  }
  free(c.ds);
  free(c.db);
  free_params(&c);
  return status;
}
