/* scatter_reduce and index_reduce (HPU_OP_TAIL_SCATTER_REDUCE): one serial
 * pass in the CPU kernel's order over the contributions, into a double /
 * int64 accumulator per element of the output, rounded per step as the CPU
 * rounds, so the result is the CPU's bit for bit and does not depend on the
 * thread count. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/op.h"
#include "hpu/status.h"
#include "kernels/cvt.h"
#include "kernels/kernels.h"
#include "kernels/tail.h"

typedef struct {
  hpu_dtype_t dt;
  int fl, kind, step_dt; /* step_dt: round to dt (not float) after each step */
} acc_t;

/* Rounds a floating step result as the CPU's accumulator holds it. */
static double round_step(const acc_t *a, double v) {
  if (a->dt == HPU_FLOAT64) return v;
  if (a->step_dt) return hpu_round_to((float)v, a->dt);
  return (float)v;
}

static double identity_f(int kind) {
  switch (kind) {
    case HPU_TAIL_PROD: return 1;
    case HPU_TAIL_AMAX: return -INFINITY;
    case HPU_TAIL_AMIN: return INFINITY;
    default: return 0;
  }
}

static int64_t identity_i(int kind, hpu_dtype_t dt) {
  int64_t lo = 0, hi = 1;
  switch (dt) {
    case HPU_UINT8: hi = 255; break;
    case HPU_INT8: lo = -128; hi = 127; break;
    case HPU_INT16: lo = -32768; hi = 32767; break;
    case HPU_INT32: lo = INT32_MIN; hi = INT32_MAX; break;
    case HPU_INT64: lo = INT64_MIN; hi = INT64_MAX; break;
    default: break;
  }
  switch (kind) {
    case HPU_TAIL_PROD: return 1;
    case HPU_TAIL_AMAX: return lo;
    case HPU_TAIL_AMIN: return hi;
    default: return 0;
  }
}

static double step_f(const acc_t *a, double x, double s) {
  switch (a->kind) {
    case HPU_TAIL_PROD: return round_step(a, x * s);
    case HPU_TAIL_AMAX: return isnan(s) ? s : (x < s ? s : x);
    case HPU_TAIL_AMIN: return isnan(s) ? s : (s < x ? s : x);
    default: return round_step(a, x + s);
  }
}

static int64_t step_i(int kind, int64_t x, int64_t s) {
  switch (kind) {
    case HPU_TAIL_PROD: return (int64_t)((uint64_t)x * (uint64_t)s);
    case HPU_TAIL_AMAX: return x < s ? s : x;
    case HPU_TAIL_AMIN: return s < x ? s : x;
    default: return (int64_t)((uint64_t)x + (uint64_t)s);
  }
}

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
  return q;
}

/* Walks the contributions: calls back with the output's linear index and
 * the source element; returns 0, or -1 with the first bad index in *bad. */
typedef struct {
  const hpu_node_t *n;
  hpu_tail_shape_t out_s, walk_s;
  int64_t dim, size;
  int index_mode;
} walk_t;

typedef void (*visit_fn)(void *ctx, int64_t lin, const char *src);

static int walk(const walk_t *w, visit_fn fn, void *ctx, int64_t *bad) {
  const hpu_node_t *n = w->n;
  const hpu_tensor_t *idx = &n->inputs[0], *src = &n->inputs[1], *out = &n->outputs[0];
  const char *pi = hpu_tensor_data(idx), *ps = hpu_tensor_data(src);
  size_t ei = hpu_dtype_size(idx->dtype), es = hpu_dtype_size(src->dtype);
  int64_t c[HPU_MAX_DIMS] = {0}, t[HPU_MAX_DIMS];
  for (int d = 0; d < w->walk_s.nd; d++)
    if (w->walk_s.sz[d] == 0) return 0;
  do {
    int64_t ioff = w->index_mode ? c[w->dim] * (idx->ndim ? idx->strides[0] : 0) : hpu_tail_off(idx, c);
    int64_t v = hpu_load_i64(pi + ioff * (int64_t)ei, idx->dtype);
    if (v < 0 || v >= w->size) {
      *bad = v;
      return -1;
    }
    memcpy(t, c, sizeof(int64_t) * (size_t)w->out_s.nd);
    t[w->dim] = v;
    (void)out;
    fn(ctx, hpu_tail_lin(t, &w->out_s), ps + hpu_tail_off(src, c) * (int64_t)es);
  } while (hpu_tail_next(c, &w->walk_s));
  return 0;
}

typedef struct {
  acc_t a;
  hpu_dtype_t src_dt;
  double *f;
  int64_t *i, *count;
  int pass; /* 0: count, 1: reduce */
} red_t;

static void visit(void *ctx, int64_t lin, const char *src) {
  red_t *r = ctx;
  if (r->pass == 0) {
    r->count[lin]++;
    return;
  }
  if (r->a.fl) r->f[lin] = step_f(&r->a, r->f[lin], hpu_load_f64(src, r->src_dt));
  else r->i[lin] = step_i(r->a.kind, r->i[lin], hpu_load_i64(src, r->src_dt));
}

hpu_status_t hpu_tail_scatter_reduce(const hpu_node_t *n) {
  const hpu_tensor_t *out = &n->outputs[0];
  walk_t w;
  w.n = n;
  w.dim = n->params.nn.i[0];
  w.index_mode = n->params.nn.i[3] != 0;
  w.out_s = hpu_tail_shape(out);
  w.walk_s = hpu_tail_shape(w.index_mode ? &n->inputs[1] : &n->inputs[0]);
  w.size = hpu_tail_size(out, w.dim);
  int include_self = n->params.nn.i[2] != 0;
  red_t r;
  memset(&r, 0, sizeof r);
  r.a.dt = out->dtype;
  r.a.fl = hpu_dtype_is_floating(out->dtype);
  r.a.kind = (int)n->params.nn.i[1];
  r.a.step_dt = w.index_mode;
  r.src_dt = n->inputs[1].dtype;
  int64_t numel = hpu_tensor_numel(out);
  size_t cells = (size_t)(numel ? numel : 1);
  r.count = calloc(cells, sizeof(int64_t));
  if (r.a.fl) r.f = malloc(cells * sizeof(double));
  else r.i = malloc(cells * sizeof(int64_t));
  if (!r.count || (!r.f && !r.i)) {
    free(r.count); free(r.f); free(r.i);
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "%s: no host memory for %lld accumulators",
                     hpu_op_name(n->op), (long long)numel);
  }
  int64_t bad = 0;
  const char *what = w.index_mode ? "index_reduce" : "scatter_reduce";
  hpu_status_t st = HPU_SUCCESS;
  if (walk(&w, visit, &r, &bad) != 0) {
    /* nothing written: the CPU checks every index before it reduces */
    st = hpu_error(HPU_ERROR_OUT_OF_RANGE, "%s: index %lld is out of bounds for dimension %lld with size %lld",
                   what, (long long)bad, (long long)w.dim, (long long)w.size);
    goto done;
  }
  char *po = hpu_tensor_data(out);
  size_t eo = hpu_dtype_size(out->dtype);
  int64_t c[HPU_MAX_DIMS] = {0};
  if (numel == 0) goto done;
  /* the starting values: self, or the identity where something arrives */
  do {
    int64_t lin = hpu_tail_lin(c, &w.out_s);
    const char *p = po + hpu_tail_off(out, c) * (int64_t)eo;
    int fresh = !include_self && r.count[lin] > 0;
    if (r.a.fl) r.f[lin] = fresh ? identity_f(r.a.kind) : hpu_load_f64(p, out->dtype);
    else r.i[lin] = fresh ? identity_i(r.a.kind, out->dtype) : hpu_load_i64(p, out->dtype);
  } while (hpu_tail_next(c, &w.out_s));
  r.pass = 1;
  walk(&w, visit, &r, &bad);
  memset(c, 0, sizeof c);
  do {
    int64_t lin = hpu_tail_lin(c, &w.out_s);
    if (r.count[lin] == 0) continue; /* untouched: self as it was */
    char *p = po + hpu_tail_off(out, c) * (int64_t)eo;
    int64_t cnt = r.count[lin] + include_self;
    if (r.a.fl) {
      double v = r.f[lin];
      if (r.a.kind == HPU_TAIL_MEAN) {
        /* the CPU divides the sum, held in the output's dtype, by a count
         * of that dtype */
        if (out->dtype == HPU_FLOAT64) v = v / (double)cnt;
        else v = (float)hpu_round_to((float)v, out->dtype) / (float)hpu_round_to((float)cnt, out->dtype);
      }
      hpu_store_f64(p, out->dtype, v);
    } else {
      int64_t v = hpu_narrow_int(r.i[lin], out->dtype);
      if (r.a.kind == HPU_TAIL_MEAN) v = floor_div(v, cnt);
      hpu_store_i64(p, out->dtype, v);
    }
  } while (hpu_tail_next(c, &w.out_s));
done:
  free(r.count);
  free(r.f);
  free(r.i);
  return st;
}
