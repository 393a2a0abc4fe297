/* Index ops: index_select, gather, scatter / scatter_add, index_add,
 * embedding backward, advanced indexing (index / index_put) and sort/topk.
 *
 * Index values are data the validator cannot see: every kernel checks each
 * index before using it, skips bad ones (nothing out of bounds is read or
 * written) and fails the node with HPU_ERROR_OUT_OF_RANGE naming the first
 * bad value it saw; the stream reports that at the next synchronize. Work
 * that may update one element twice (scatter add, index_add, index_put
 * accumulate, embedding backward) is split so each element has one owner,
 * or runs serially, so results do not depend on the thread count. */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/parallel.h"
#include "kernels/bytes.h"
#include "kernels/cvt.h"
#include "kernels/iter.h"
#include "kernels/kernels.h"
#include "kernels/nn_util.h"

#define MAXD HPU_MAX_DIMS

/* First bad index seen by any task. */
typedef struct {
  _Atomic int bad;
  int64_t value, size;
} bad_t;

static void note_bad(bad_t *b, int64_t v, int64_t size) {
  int expected = 0;
  if (atomic_compare_exchange_strong(&b->bad, &expected, 1)) {
    b->value = v;
    b->size = size;
  }
}

static hpu_status_t bad_status(bad_t *b, const char *what, int64_t dim) {
  if (!atomic_load(&b->bad)) return HPU_SUCCESS;
  if (dim >= 0)
    return hpu_error(HPU_ERROR_OUT_OF_RANGE, "%s: index %lld is out of bounds for dimension %lld with size %lld",
                     what, (long long)b->value, (long long)dim, (long long)b->size);
  return hpu_error(HPU_ERROR_OUT_OF_RANGE, "%s: index %lld is out of bounds for size %lld", what,
                   (long long)b->value, (long long)b->size);
}

/* Positions over all dims of a shape except `skip`, with up to 3 tensors'
 * byte strides. */
typedef struct {
  int nd;
  int64_t n;
  int64_t sz[MAXD], st[3][MAXD];
} walk_t;

static void walk_init(walk_t *w, const hpu_tensor_t *shape, int skip, const hpu_tensor_t *const *ts,
                      int nt) {
  w->nd = 0;
  w->n = 1;
  for (int d = shape->ndim - 1; d >= 0; d--) {
    if (d == skip || shape->sizes[d] == 1) continue;
    w->sz[w->nd] = shape->sizes[d];
    w->n *= shape->sizes[d];
    for (int k = 0; k < nt; k++)
      w->st[k][w->nd] = ts[k]->strides[d] * (int64_t)hpu_dtype_size(ts[k]->dtype);
    w->nd++;
  }
  for (int d = 0; d < shape->ndim; d++)
    if (shape->sizes[d] == 0 && d != skip) w->n = 0;
}

static void walk_at(const walk_t *w, int64_t m, int nt, int64_t *off) {
  for (int k = 0; k < nt; k++) off[k] = 0;
  for (int d = 0; d < w->nd; d++) {
    int64_t c = m % w->sz[d];
    m /= w->sz[d];
    for (int k = 0; k < nt; k++) off[k] += c * w->st[k][d];
  }
}

static int64_t dim_size(const hpu_tensor_t *t, int64_t d) { return t->ndim ? t->sizes[d] : 1; }
static int64_t dim_stride(const hpu_tensor_t *t, int64_t d) {
  return t->ndim ? t->strides[d] * (int64_t)hpu_dtype_size(t->dtype) : 0;
}

static inline void copy_elem(char *dst, const char *src, size_t es) {
  switch (es) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, es); break;
  }
}

/* index_select ------------------------------------------------------------------ */

typedef struct {
  const hpu_node_t *node;
  walk_t w; /* over out's dims except dim: operands out, in */
  int64_t dim, n, size, sin, sout;
  size_t es;
  int rows; /* both contiguous with dim 0: whole rows copied */
  int run;  /* indices step by +1 or -1 throughout (and are valid); else 0 */
  int64_t row_bytes;
  const int64_t *v; /* other dims: the indices, checked (-1 where bad) */
  bad_t bad;
} isel_t;

/* dim 0 of contiguous tensors: one row per index */
static void isel_rows(void *ctx, int64_t begin, int64_t end) {
  isel_t *c = ctx;
  const hpu_tensor_t *idx = &c->node->inputs[1];
  const char *in = hpu_tensor_data(&c->node->inputs[0]);
  char *out = hpu_tensor_data(&c->node->outputs[0]);
  for (int64_t k = begin; k < end; k++) {
    int64_t v = hpu_load_i64(hpu_nn_elem(idx, k), idx->dtype);
    int ok = v >= 0 && v < c->size;
    if (!ok) note_bad(&c->bad, v, c->size);
    if (ok) hpu_copy_bytes(out + k * c->row_bytes, in + v * c->row_bytes, (size_t)c->row_bytes);
    else memset(out + k * c->row_bytes, 0, (size_t)c->row_bytes);
  }
}

/* Any other dim: per position m of the other dims, the n selected elements
 * along dim (a gather along the row for the last dim: flip(-1) took 60x
 * torch's time walking every element's position by divisions). */
/* (n, vs, si, so: locals, so the stores through o do not make the compiler
 * reload them from *c every element: 70% of the loop's time) */
#define ISEL_GATHER(T)                                                \
  for (int64_t k = 0; k < n; k++) {                                   \
    int64_t v = vs[k];                                                \
    *(T *)(o + k * so) = v >= 0 ? *(const T *)(i + v * si) : (T)0;    \
  }
/* A run of indices reversed (v0, v0 - 1, ...): flip's case. */
#define ISEL_REVERSE(T)                                                        \
  {                                                                            \
    const T *src = (const T *)(i + vs[0] * si);                                \
    for (int64_t k = 0; k < n; k++) ((T *)o)[k] = src[-k];                     \
  }
static void isel_cols(void *ctx, int64_t begin, int64_t end) {
  isel_t *c = ctx;
  const char *in = hpu_tensor_data(&c->node->inputs[0]);
  char *out = hpu_tensor_data(&c->node->outputs[0]);
  const int64_t n = c->n, si = c->sin, so = c->sout, *vs = c->v;
  const int dense = si == (int64_t)c->es && so == (int64_t)c->es;
  for (int64_t m = begin; m < end; m++) {
    int64_t off[2];
    walk_at(&c->w, m, 2, off);
    char *o = out + off[0];
    const char *i = in + off[1];
    if (dense && c->run == 1) {
      hpu_copy_bytes(o, i + vs[0] * si, (size_t)(n * si));
      continue;
    }
    if (dense && c->run == -1) {
      switch (c->es) {
        case 1: ISEL_REVERSE(uint8_t) break;
        case 2: ISEL_REVERSE(uint16_t) break;
        case 4: ISEL_REVERSE(uint32_t) break;
        default: ISEL_REVERSE(uint64_t) break;
      }
      continue;
    }
    switch (c->es) {
      case 1: ISEL_GATHER(uint8_t) break;
      case 2: ISEL_GATHER(uint16_t) break;
      case 4: ISEL_GATHER(uint32_t) break;
      default: ISEL_GATHER(uint64_t) break;
    }
  }
}

hpu_status_t hpu_nn_index_select(const hpu_node_t *node) {
  isel_t c;
  memset(&c, 0, sizeof c);
  const hpu_tensor_t *in = &node->inputs[0], *out = &node->outputs[0], *idx = &node->inputs[1];
  c.node = node;
  c.dim = node->params.nn.i[0];
  c.n = hpu_tensor_numel(idx);
  if (hpu_tensor_numel(out) == 0) return HPU_SUCCESS;
  const hpu_tensor_t *ts[2] = {out, in};
  walk_init(&c.w, out, (int)c.dim, ts, 2);
  c.size = dim_size(in, c.dim);
  c.sin = dim_stride(in, c.dim);
  c.sout = dim_stride(out, c.dim);
  c.es = hpu_dtype_size(in->dtype);
  c.rows = c.dim == 0 && hpu_tensor_is_contiguous(in) && hpu_tensor_is_contiguous(out);
  c.row_bytes = (int64_t)c.es * c.w.n;
  if (c.rows) {
    int64_t grain = HPU_GRAIN / (c.w.n ? c.w.n : 1);
    hpu_parallel_for(c.n, grain > 0 ? grain : 1, isel_rows, &c);
    return bad_status(&c.bad, "index_select", c.dim);
  }
  int64_t *v = malloc((size_t)(c.n ? c.n : 1) * sizeof(int64_t));
  if (!v)
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "index_select: no host memory for %lld indices", (long long)c.n);
  for (int64_t k = 0; k < c.n; k++) {
    v[k] = hpu_load_i64(hpu_nn_elem(idx, k), idx->dtype);
    if (v[k] < 0 || v[k] >= c.size) {
      note_bad(&c.bad, v[k], c.size);
      v[k] = -1;
    }
  }
  c.v = v;
  c.run = c.n > 1 && !atomic_load(&c.bad.bad) && (v[1] - v[0] == 1 || v[1] - v[0] == -1) ? (int)(v[1] - v[0]) : 0;
  for (int64_t k = 2; k < c.n && c.run; k++)
    if (v[k] - v[k - 1] != c.run) c.run = 0;
  int64_t grain = HPU_GRAIN / (c.n ? c.n : 1);
  hpu_parallel_for(c.w.n, grain > 0 ? grain : 1, isel_cols, &c);
  free(v);
  return bad_status(&c.bad, "index_select", c.dim);
}

/* v as an element of floating dtype dt holds it (PyTorch's Scalar.to<scalar_t>()). */
static double as_dtype(double v, hpu_dtype_t dt) {
  char elem[8];
  hpu_store_f64(elem, dt, v);
  return hpu_load_f64(elem, dt);
}

/* A float32 shadow of a bf16 / fp16 self: PyTorch's CPU accumulates scatter
 * add / multiply and index_add into such a tensor in float and rounds each
 * element once at the end (per step, every repeated index would round). */
typedef struct {
  hpu_tensor_t t;
  int used;
} shadow_t;

static hpu_status_t shadow_open(shadow_t *sh, const hpu_tensor_t *self, int accumulates) {
  sh->used = accumulates && (self->dtype == HPU_BFLOAT16 || self->dtype == HPU_FLOAT16);
  if (!sh->used) return HPU_SUCCESS;
  int64_t n = hpu_tensor_numel(self);
  void *buf = malloc((size_t)(n ? n : 1) * sizeof(float));
  if (!buf)
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "accumulating into %lld %s elements: no host memory for a float copy",
                     (long long)n, hpu_dtype_name(self->dtype));
  if (hpu_tensor_init_contiguous(&sh->t, buf, HPU_FLOAT32, self->ndim, self->sizes) != 0) {
    free(buf);
    return hpu_error(HPU_ERROR_INTERNAL, "accumulating into a %d-d tensor: bad shape", self->ndim);
  }
  hpu_copy_tensor(&sh->t, self);
  return HPU_SUCCESS;
}

/* The tensor to accumulate into: the shadow when there is one. */
static const hpu_tensor_t *shadow_target(const shadow_t *sh, const hpu_tensor_t *self) {
  return sh->used ? &sh->t : self;
}

static void shadow_close(shadow_t *sh, const hpu_tensor_t *self) {
  if (!sh->used) return;
  hpu_copy_tensor(self, &sh->t);
  free(sh->t.storage);
}

/* gather / scatter ----------------------------------------------------------------- */

typedef struct {
  const hpu_node_t *node;
  walk_t w; /* over idx's dims except dim: operands idx, self, other (out or src) */
  const hpu_tensor_t *self; /* gather's input, or what scatter writes: out or its shadow */
  int64_t dim, len, size, s_idx, s_self, s_other;
  int gather, reduce, has_src; /* reduce: 0 assign, 1 add, 2 multiply */
  double value_d; /* the scalar, already rounded to self's dtype as PyTorch's value.to<scalar_t>() */
  int64_t value_i;
  bad_t bad;
} gs_t;

static void gs_run(void *ctx, int64_t begin, int64_t end) {
  gs_t *c = ctx;
  const hpu_node_t *n = c->node;
  const hpu_tensor_t *idx = c->gather ? &n->inputs[1] : &n->inputs[0];
  const hpu_tensor_t *self = c->self;
  const hpu_tensor_t *other = c->gather ? &n->outputs[0] : (c->has_src ? &n->inputs[1] : NULL);
  const char *pi = hpu_tensor_data(idx);
  char *ps = hpu_tensor_data(self);
  char *po = other ? hpu_tensor_data(other) : NULL;
  hpu_dtype_t dts = self->dtype, dto = other ? other->dtype : dts;
  size_t es = hpu_dtype_size(dts);
  int fl = hpu_dtype_is_floating(dts);
  for (int64_t m = begin; m < end; m++) {
    int64_t off[3];
    walk_at(&c->w, m, other ? 3 : 2, off);
    for (int64_t j = 0; j < c->len; j++) {
      int64_t v = hpu_load_i64(pi + off[0] + j * c->s_idx, idx->dtype);
      if (v < 0 || v >= c->size) {
        note_bad(&c->bad, v, c->size);
        if (c->gather) memset(po + off[2] + j * c->s_other, 0, es);
        continue;
      }
      char *s = ps + off[1] + v * c->s_self;
      if (c->gather) {
        copy_elem(po + off[2] + j * c->s_other, s, es);
        continue;
      }
      const char *src = po ? po + off[2] + j * c->s_other : NULL;
      if (!c->reduce) {
        if (src && dto == dts) copy_elem(s, src, es);
        else if (src) hpu_store_f64(s, dts, hpu_load_f64(src, dto));
        else if (fl) hpu_store_f64(s, dts, c->value_d);
        else hpu_store_i64(s, dts, c->value_i);
      } else if (fl) {
        /* one rounding to dts either way: a float or bf16 product or sum of
         * two dts values is exact in double */
        double a = src ? hpu_load_f64(src, dto) : c->value_d;
        if (dts == HPU_FLOAT32 && c->reduce == 1) *(float *)s += (float)a;
        else if (dts == HPU_FLOAT32) *(float *)s *= (float)a;
        else if (c->reduce == 1) hpu_store_f64(s, dts, hpu_load_f64(s, dts) + a);
        else hpu_store_f64(s, dts, hpu_load_f64(s, dts) * a);
      } else {
        uint64_t a = (uint64_t)(src ? hpu_load_i64(src, dto) : c->value_i);
        uint64_t x = (uint64_t)hpu_load_i64(s, dts);
        hpu_store_i64(s, dts, (int64_t)(c->reduce == 1 ? x + a : x * a));
      }
    }
  }
}

static hpu_status_t gather_scatter(const hpu_node_t *node, int gather) {
  gs_t c;
  memset(&c, 0, sizeof c);
  c.node = node;
  c.gather = gather;
  c.dim = node->params.nn.i[0];
  c.reduce = gather ? 0 : (int)node->params.nn.i[1];
  c.has_src = !gather && node->num_inputs == 2;
  const hpu_tensor_t *idx = gather ? &node->inputs[1] : &node->inputs[0];
  const hpu_tensor_t *self = gather ? &node->inputs[0] : &node->outputs[0];
  const hpu_tensor_t *other = gather ? &node->outputs[0] : (c.has_src ? &node->inputs[1] : NULL);
  if (hpu_tensor_numel(idx) == 0) return HPU_SUCCESS;
  shadow_t sh;
  hpu_status_t st = shadow_open(&sh, self, c.reduce != 0);
  if (st != HPU_SUCCESS) return st;
  c.self = shadow_target(&sh, self);
  const hpu_tensor_t *ts[3] = {idx, c.self, other};
  walk_init(&c.w, idx, (int)c.dim, ts, other ? 3 : 2);
  c.len = dim_size(idx, c.dim);
  c.size = dim_size(self, c.dim);
  c.s_idx = dim_stride(idx, c.dim);
  c.s_self = dim_stride(c.self, c.dim);
  c.s_other = other ? dim_stride(other, c.dim) : 0;
  hpu_scalar_t sv = node->params.nn.s[0];
  c.value_i = sv.kind == HPU_SCALAR_FLOAT ? hpu_f2i(sv.f) : sv.i;
  if (hpu_dtype_is_floating(self->dtype)) c.value_d = as_dtype(hpu_scalar_as_double(sv), self->dtype);
  int64_t grain = HPU_GRAIN / (c.len ? c.len : 1);
  hpu_parallel_for(c.w.n, grain > 0 ? grain : 1, gs_run, &c);
  shadow_close(&sh, self);
  return bad_status(&c.bad, gather ? "gather" : "scatter", c.dim);
}

hpu_status_t hpu_nn_gather(const hpu_node_t *node) { return gather_scatter(node, 1); }
hpu_status_t hpu_nn_scatter(const hpu_node_t *node) { return gather_scatter(node, 0); }

/* index_add: out.select(dim, idx[k]) += alpha * src.select(dim, k) ----------------------- */

typedef struct {
  const hpu_node_t *node;
  walk_t w; /* over self's dims except dim: self, src */
  const hpu_tensor_t *self; /* out, or its float shadow */
  int64_t dim, n, size, s_self, s_src;
  double alpha;
  int64_t alpha_i;
  bad_t bad;
} iadd_t;

/* One step of a floating index_add as PyTorch's CPU takes it (the store
 * rounds to dt): alpha 1 is a plain add (into the float shadow for bf16 /
 * fp16); otherwise float32 / float64 add alpha * src in one fused
 * multiply-add, and bf16 / fp16 round the product to dt first (alpha is
 * already a dt value). */
static inline double iadd_float(double x, double y, double alpha, hpu_dtype_t dt) {
  if (alpha == 1.0) return x + y;
  if (dt == HPU_FLOAT32) return fmaf((float)y, (float)alpha, (float)x);
  if (dt == HPU_FLOAT64) return fma(y, alpha, x);
  return x + hpu_round_to((float)(y * alpha), dt);
}

static void iadd_run(void *ctx, int64_t begin, int64_t end) {
  iadd_t *c = ctx;
  const hpu_node_t *node = c->node;
  const hpu_tensor_t *idx = &node->inputs[0], *src = &node->inputs[1], *self = c->self;
  char *ps = hpu_tensor_data(self);
  const char *pr = hpu_tensor_data(src);
  int fl = hpu_dtype_is_floating(self->dtype);
  for (int64_t m = begin; m < end; m++) {
    int64_t off[2];
    walk_at(&c->w, m, 2, off);
    for (int64_t k = 0; k < c->n; k++) {
      int64_t v = hpu_load_i64(hpu_nn_elem(idx, k), idx->dtype);
      if (v < 0 || v >= c->size) {
        note_bad(&c->bad, v, c->size);
        continue;
      }
      char *s = ps + off[0] + v * c->s_self;
      const char *r = pr + off[1] + k * c->s_src;
      if (fl)
        hpu_store_f64(s, self->dtype, iadd_float(hpu_load_f64(s, self->dtype), hpu_load_f64(r, src->dtype),
                                                 c->alpha, self->dtype));
      else
        hpu_store_i64(s, self->dtype,
                      (int64_t)((uint64_t)hpu_load_i64(s, self->dtype) +
                                (uint64_t)c->alpha_i * (uint64_t)hpu_load_i64(r, src->dtype)));
    }
  }
}

hpu_status_t hpu_nn_index_add(const hpu_node_t *node) {
  iadd_t c;
  memset(&c, 0, sizeof c);
  c.node = node;
  const hpu_tensor_t *self = &node->outputs[0], *src = &node->inputs[1];
  c.dim = node->params.nn.i[0];
  c.n = hpu_tensor_numel(&node->inputs[0]);
  if (c.n == 0 || hpu_tensor_numel(self) == 0) return HPU_SUCCESS;
  hpu_scalar_t a = node->params.nn.s[0];
  c.alpha = hpu_scalar_as_double(a);
  c.alpha_i = a.kind == HPU_SCALAR_FLOAT ? hpu_f2i(a.f) : a.i;
  if (hpu_dtype_is_floating(self->dtype)) c.alpha = as_dtype(c.alpha, self->dtype);
  /* with alpha 1, bf16 / fp16 accumulate in float; else they round each step */
  shadow_t sh;
  hpu_status_t st = shadow_open(&sh, self, c.alpha == 1.0);
  if (st != HPU_SUCCESS) return st;
  c.self = shadow_target(&sh, self);
  const hpu_tensor_t *ts[2] = {c.self, src};
  walk_init(&c.w, c.self, (int)c.dim, ts, 2);
  c.size = dim_size(self, c.dim);
  c.s_self = dim_stride(c.self, c.dim);
  c.s_src = dim_stride(src, c.dim);
  int64_t grain = HPU_GRAIN / c.n;
  hpu_parallel_for(c.w.n, grain > 0 ? grain : 1, iadd_run, &c);
  shadow_close(&sh, self);
  return bad_status(&c.bad, "index_add", c.dim);
}

/* embedding backward ---------------------------------------------------------------- */

#define EMB_PARTS 64

typedef struct {
  const hpu_node_t *node;
  int64_t n, V, H, pad;
  float *scale; /* per vocab row, or NULL */
  bad_t bad;
} emb_t;

static void emb_run(void *ctx, int64_t begin, int64_t end) {
  emb_t *c = ctx;
  const hpu_node_t *node = c->node;
  const hpu_tensor_t *g = &node->inputs[0], *idx = &node->inputs[1], *o = &node->outputs[0];
  int64_t parts = c->V < EMB_PARTS ? c->V : EMB_PARTS;
  int fast = g->dtype == HPU_FLOAT32 && o->dtype == HPU_FLOAT32 && g->strides[1] == 1 &&
             o->strides[1] == 1;
  const char *pg = hpu_tensor_data(g);
  char *po = hpu_tensor_data(o);
  int64_t egs = (int64_t)hpu_dtype_size(g->dtype), eos = (int64_t)hpu_dtype_size(o->dtype);
  for (int64_t p = begin; p < end; p++) {
    for (int64_t k = 0; k < c->n; k++) {
      int64_t v = hpu_load_i64(hpu_nn_elem(idx, k), idx->dtype);
      if (v < 0 || v >= c->V) {
        if (p == 0) note_bad(&c->bad, v, c->V);
        continue;
      }
      if (v % parts != p || v == c->pad) continue;
      float sc = c->scale ? c->scale[v] : 1.0f;
      const char *gr = pg + k * g->strides[0] * egs;
      char *orow = po + v * o->strides[0] * eos;
      if (fast) {
        float *dst = (float *)orow;
        const float *src = (const float *)gr;
        for (int64_t h = 0; h < c->H; h++) dst[h] += src[h] * sc;
      } else {
        for (int64_t h = 0; h < c->H; h++) {
          char *d = orow + h * o->strides[1] * eos;
          float a = hpu_load_f32(gr + h * g->strides[1] * egs, g->dtype) * sc;
          hpu_store_f32(d, o->dtype, hpu_load_f32(d, o->dtype) + a);
        }
      }
    }
  }
}

hpu_status_t hpu_nn_embedding_backward(const hpu_node_t *node) {
  emb_t c;
  memset(&c, 0, sizeof c);
  c.node = node;
  const hpu_tensor_t *idx = &node->inputs[1], *o = &node->outputs[0];
  c.n = idx->sizes[0];
  c.V = o->sizes[0];
  c.H = o->sizes[1];
  c.pad = node->params.nn.i[0];
  if (c.V == 0 || c.H == 0) return HPU_SUCCESS;
  for (int64_t r = 0; r < c.V; r++)
    for (int64_t h = 0; h < c.H; h++)
      hpu_store_f64((char *)hpu_tensor_data(o) + (r * o->strides[0] + h * o->strides[1]) *
                                                     (int64_t)hpu_dtype_size(o->dtype),
                    o->dtype, 0.0);
  if (node->params.nn.i[1]) {
    int64_t *cnt = calloc((size_t)c.V, sizeof *cnt);
    c.scale = malloc((size_t)c.V * sizeof(float));
    if (!cnt || !c.scale) abort();
    for (int64_t k = 0; k < c.n; k++) {
      int64_t v = hpu_load_i64(hpu_nn_elem(idx, k), idx->dtype);
      if (v >= 0 && v < c.V) cnt[v]++;
    }
    for (int64_t r = 0; r < c.V; r++) c.scale[r] = cnt[r] ? 1.0f / (float)cnt[r] : 1.0f;
    free(cnt);
  }
  int64_t parts = c.V < EMB_PARTS ? c.V : EMB_PARTS;
  hpu_parallel_for(parts, 1, emb_run, &c);
  free(c.scale);
  return bad_status(&c.bad, "embedding_backward", -1);
}

/* Advanced indexing ------------------------------------------------------------------- */

typedef struct {
  const hpu_node_t *node;
  int k, put, acc;
  hpu_dtype_t dt, idt[HPU_NN_MAX_INDICES];
  size_t es;
  bad_t bad;
} adv_t;

static void adv_loop(void *ctx, char **data, const int64_t *st, int64_t n, int64_t index) {
  (void)index;
  adv_t *c = ctx;
  const hpu_nn_params_t *p = &c->node->params.nn;
  int fl = hpu_dtype_is_floating(c->dt);
  for (int64_t e = 0; e < n; e++) {
    int64_t off = 0;
    int ok = 1;
    for (int j = 0; j < c->k; j++) {
      int64_t v = hpu_load_i64(data[2 + j] + e * st[2 + j], c->idt[j]);
      int64_t size = p->sizes[j];
      if (v < 0) v += size;
      if (v < 0 || v >= size) {
        note_bad(&c->bad, v < 0 ? v - size : v, size);
        ok = 0;
        break;
      }
      off += v * p->strides[j];
    }
    char *o = data[0] + e * st[0];
    char *s = data[1] + e * st[1];
    if (!c->put) {
      if (ok) copy_elem(o, s + off * (int64_t)c->es, c->es);
      else memset(o, 0, c->es);
    } else if (ok) {
      char *d = o + off * (int64_t)c->es; /* destination element; s is the value */
      if (!c->acc) copy_elem(d, s, c->es);
      else if (fl) hpu_store_f64(d, c->dt, hpu_load_f64(d, c->dt) + hpu_load_f64(s, c->dt));
      else hpu_store_i64(d, c->dt, (int64_t)((uint64_t)hpu_load_i64(d, c->dt) + (uint64_t)hpu_load_i64(s, c->dt)));
    }
  }
}

hpu_status_t hpu_nn_index(const hpu_node_t *node) {
  adv_t c;
  memset(&c, 0, sizeof c);
  c.node = node;
  c.k = (int)node->params.nn.i[0];
  c.put = node->op == HPU_OP_INDEX_PUT;
  c.acc = c.put && node->params.nn.i[1];
  const hpu_tensor_t *out = &node->outputs[0];
  c.dt = out->dtype;
  c.es = hpu_dtype_size(c.dt);
  for (int j = 0; j < c.k; j++) c.idt[j] = node->inputs[1 + j].dtype;
  if (hpu_tensor_numel(out) == 0) return HPU_SUCCESS;
  const hpu_tensor_t *ins[1 + HPU_NN_MAX_INDICES];
  for (int i = 0; i <= c.k; i++) ins[i] = &node->inputs[i];
  hpu_iter_t it;
  /* keep the row-major order: with accumulate, a serial run then adds
   * duplicates in index order */
  hpu_iter_build(&it, out, ins, 1 + c.k, c.acc ? HPU_ITER_KEEP_ORDER : 0);
  hpu_iter_for_each(&it, adv_loop, &c, c.acc ? INT64_MAX : HPU_GRAIN);
  return bad_status(&c.bad, c.put ? "index_put" : "index", -1);
}

/* sort / topk --------------------------------------------------------------------------- */

typedef struct {
  double v;
  int64_t iv;
  int64_t i;
} item_t;

/* a comes before b (stability is the merge's job) */
static inline int before(const item_t *a, const item_t *b, int desc, int ints) {
  if (ints) return desc ? a->iv > b->iv : a->iv < b->iv;
  int an = a->v != a->v, bn = b->v != b->v;
  if (desc) return an ? !bn : (!bn && a->v > b->v);
  return bn ? !an : (!an && a->v < b->v);
}

static void merge_sort(item_t *a, item_t *tmp, int64_t n, int desc, int ints) {
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) tmp[k++] = before(&a[j], &a[i], desc, ints) ? a[j++] : a[i++];
      while (i < mid) tmp[k++] = a[i++];
      while (j < hi) tmp[k++] = a[j++];
    }
    memcpy(a, tmp, (size_t)n * sizeof *a);
  }
}

/* Item j of a row at p (element stride s_in). */
static inline item_t load_item(const char *p, int64_t j, int64_t s_in, hpu_dtype_t dt, int ints) {
  item_t it = {0, 0, j};
  if (ints) it.iv = hpu_load_i64(p + j * s_in, dt);
  else it.v = hpu_load_f64(p + j * s_in, dt);
  return it;
}

/* The first k of a stable sort of the n items at p, without sorting them
 * all (topk with k much smaller than n, as generation's top-k sampling asks):
 * buf keeps the best k so far in order; an item enters only when it comes
 * before the current last, after the equal ones already there, so the result
 * is the stable sort's first k. A merge sort of every row of 1024 for
 * topk(5) ran at 0.03 of torch. */
static void select_first_k(item_t *buf, const char *p, int64_t s_in, hpu_dtype_t dt, int ints,
                           int64_t n, int64_t k, int desc) {
  /* float32 and bfloat16 rows skip, vectorised, to the next item that enters */
  int skip = hpu_nn_row_dtype(dt) && s_in == (int64_t)hpu_dtype_size(dt);
  int64_t cnt = 0;
  for (int64_t j = 0; j < n; j++) {
    if (skip && cnt == k) {
      j += hpu_nn_run_find_topk_entry(dt, p + j * s_in, n - j, (float)buf[k - 1].v, desc);
      if (j == n) break;
    }
    item_t it = load_item(p, j, s_in, dt, ints);
    if (cnt == k && !before(&it, &buf[k - 1], desc, ints)) continue;
    int64_t q = cnt < k ? cnt++ : k - 1;
    while (q > 0 && before(&it, &buf[q - 1], desc, ints)) {
      buf[q] = buf[q - 1];
      q--;
    }
    buf[q] = it;
  }
}

typedef struct {
  const hpu_node_t *node;
  walk_t w; /* in, values, indices */
  int64_t dim, n, k, s_in, s_val, s_idx;
  int desc;
} sort_t;

static void sort_run(void *ctx, int64_t begin, int64_t end) {
  const sort_t *c = ctx;
  const hpu_node_t *node = c->node;
  const hpu_tensor_t *in = &node->inputs[0];
  hpu_dtype_t dt = in->dtype;
  size_t es = hpu_dtype_size(dt);
  int ints = !hpu_dtype_is_floating(dt);
  item_t *buf = malloc((size_t)c->n * 2 * sizeof *buf);
  if (!buf) abort();
  const char *pi = hpu_tensor_data(in);
  char *pv = hpu_tensor_data(&node->outputs[0]), *px = hpu_tensor_data(&node->outputs[1]);
  for (int64_t m = begin; m < end; m++) {
    int64_t off[3];
    walk_at(&c->w, m, 3, off);
    if (c->k * 8 <= c->n) {
      select_first_k(buf, pi + off[0], c->s_in, dt, ints, c->n, c->k, c->desc);
    } else {
      for (int64_t j = 0; j < c->n; j++) buf[j] = load_item(pi + off[0], j, c->s_in, dt, ints);
      merge_sort(buf, buf + c->n, c->n, c->desc, ints);
    }
    for (int64_t j = 0; j < c->k; j++) {
      copy_elem(pv + off[1] + j * c->s_val, pi + off[0] + buf[j].i * c->s_in, es);
      *(int64_t *)(px + off[2] + j * c->s_idx) = buf[j].i;
    }
  }
  free(buf);
}

void hpu_nn_sort(const hpu_node_t *node) {
  sort_t c;
  memset(&c, 0, sizeof c);
  c.node = node;
  const hpu_tensor_t *in = &node->inputs[0];
  c.dim = node->params.nn.i[0];
  c.desc = node->params.nn.i[1] != 0;
  c.k = node->params.nn.i[2];
  c.n = dim_size(in, c.dim);
  if (c.k == 0 || c.n == 0 || hpu_tensor_numel(in) == 0) return;
  const hpu_tensor_t *ts[3] = {in, &node->outputs[0], &node->outputs[1]};
  walk_init(&c.w, in, (int)c.dim, ts, 3);
  c.s_in = dim_stride(in, c.dim);
  c.s_val = dim_stride(&node->outputs[0], c.dim);
  c.s_idx = dim_stride(&node->outputs[1], c.dim);
  int64_t grain = 4096 / c.n;
  hpu_parallel_for(c.w.n, grain > 0 ? grain : 1, sort_run, &c);
}
