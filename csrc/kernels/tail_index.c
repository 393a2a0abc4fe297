/* cummax / cummin, take / put and index_fill: serial element loops (each
 * output element is written once, or in the CPU's order for put's
 * accumulate), which keeps them exact and independent of the thread count. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hpu/op.h"
#include "hpu/status.h"
#include "kernels/cvt.h"
#include "kernels/kernels.h"
#include "kernels/tail.h"

/* cummax / cummin ------------------------------------------------------------ */

hpu_status_t hpu_tail_cummaxmin(const hpu_node_t *n) {
  const hpu_tensor_t *in = &n->inputs[0], *val = &n->outputs[0], *ind = &n->outputs[1];
  int64_t dim = n->params.nn.i[0];
  int mn = n->params.nn.i[1] != 0;
  hpu_tail_shape_t s = hpu_tail_shape(in);
  int64_t len = s.sz[dim];
  if (hpu_tensor_numel(in) == 0) return HPU_SUCCESS;
  int64_t st_in = in->ndim ? in->strides[dim] : 0, st_v = val->ndim ? val->strides[dim] : 0,
          st_i = ind->ndim ? ind->strides[dim] : 0;
  size_t ein = hpu_dtype_size(in->dtype), ev = hpu_dtype_size(val->dtype);
  char *pin = hpu_tensor_data(in), *pv = hpu_tensor_data(val);
  int64_t *pi = hpu_tensor_data(ind);
  int fl = hpu_dtype_is_floating(in->dtype);
  hpu_tail_shape_t rows = s;
  rows.sz[dim] = 1;
  int64_t c[HPU_MAX_DIMS] = {0};
  do {
    const char *x = pin + hpu_tail_off(in, c) * (int64_t)ein;
    char *y = pv + hpu_tail_off(val, c) * (int64_t)ev;
    int64_t *yi = pi + hpu_tail_off(ind, c);
    int64_t best = 0;
    const char *bp = x;
    for (int64_t k = 0; k < len; k++) {
      const char *e = x + k * st_in * (int64_t)ein;
      int take;
      if (fl) {
        double a = hpu_load_f64(e, in->dtype), b = hpu_load_f64(bp, in->dtype);
        take = isnan(a) || (!isnan(b) && (mn ? a <= b : a >= b));
      } else {
        int64_t a = hpu_load_i64(e, in->dtype), b = hpu_load_i64(bp, in->dtype);
        take = mn ? a <= b : a >= b;
      }
      if (take) {
        best = k;
        bp = e;
      }
      memcpy(y + k * st_v * (int64_t)ev, bp, ev);
      yi[k * st_i] = best;
    }
  } while (hpu_tail_next(c, &rows));
  return HPU_SUCCESS;
}

/* take / put ----------------------------------------------------------------- */

static char *flat_elem(const hpu_tensor_t *t, int64_t lin) {
  int64_t off = 0;
  for (int d = t->ndim - 1; d >= 0; d--) {
    off += (lin % t->sizes[d]) * t->strides[d];
    lin /= t->sizes[d];
  }
  return (char *)hpu_tensor_data(t) + off * (int64_t)hpu_dtype_size(t->dtype);
}

hpu_status_t hpu_tail_take_put(const hpu_node_t *n) {
  int put = n->params.nn.i[0] != 0, acc = n->params.nn.i[1] != 0;
  const hpu_tensor_t *flat = put ? &n->outputs[0] : &n->inputs[0];
  const hpu_tensor_t *idx = put ? &n->inputs[0] : &n->inputs[1];
  const hpu_tensor_t *other = put ? &n->inputs[1] : &n->outputs[0];
  int64_t size = hpu_tensor_numel(flat), count = hpu_tensor_numel(idx);
  size_t es = hpu_dtype_size(flat->dtype);
  /* every index is checked first: a bad one fails the node with nothing written */
  for (int64_t k = 0; k < count; k++) {
    int64_t v = hpu_load_i64(flat_elem(idx, k), idx->dtype);
    if (v < -size || v >= size)
      return hpu_error(HPU_ERROR_OUT_OF_RANGE, "%s: out of range: tried to access index %lld on a tensor of %lld elements",
                       put ? "put" : "take", (long long)v, (long long)size);
  }
  int fl = hpu_dtype_is_floating(flat->dtype);
  for (int64_t k = 0; k < count; k++) {
    int64_t v = hpu_load_i64(flat_elem(idx, k), idx->dtype);
    if (v < 0) v += size;
    char *f = flat_elem(flat, v), *o = flat_elem(other, k);
    if (!put) memcpy(o, f, es);
    else if (!acc) memcpy(f, o, es);
    else if (flat->dtype == HPU_FLOAT64) *(double *)f += *(const double *)o;
    else if (fl) hpu_store_f32(f, flat->dtype, hpu_load_f32(f, flat->dtype) + hpu_load_f32(o, flat->dtype));
    else hpu_store_i64(f, flat->dtype, (int64_t)((uint64_t)hpu_load_i64(f, flat->dtype) + (uint64_t)hpu_load_i64(o, flat->dtype)));
  }
  return HPU_SUCCESS;
}

/* index_fill ----------------------------------------------------------------- */

hpu_status_t hpu_tail_index_fill(const hpu_node_t *n) {
  const hpu_tensor_t *out = &n->outputs[0], *idx = &n->inputs[0];
  int64_t dim = n->params.nn.i[0];
  hpu_tail_shape_t s = hpu_tail_shape(out);
  int64_t size = s.sz[dim], count = hpu_tensor_numel(idx);
  for (int64_t k = 0; k < count; k++) {
    int64_t v = hpu_load_i64(flat_elem(idx, k), idx->dtype);
    if (v < -size || v >= size)
      return hpu_error(HPU_ERROR_OUT_OF_RANGE, "index_fill: index %lld is out of bounds for dimension %lld with size %lld",
                       (long long)v, (long long)dim, (long long)size);
  }
  char elem[8];
  hpu_scalar_t sv = n->params.nn.s[0];
  if (hpu_dtype_is_floating(out->dtype) || out->dtype == HPU_BOOL)
    hpu_store_f64(elem, out->dtype, hpu_scalar_as_double(sv));
  else hpu_store_i64(elem, out->dtype, sv.kind == HPU_SCALAR_FLOAT ? hpu_f2i(sv.f) : sv.i);
  size_t es = hpu_dtype_size(out->dtype);
  char *po = hpu_tensor_data(out);
  hpu_tail_shape_t rest = s;
  rest.sz[dim] = 1;
  for (int d = 0; d < rest.nd; d++)
    if (rest.sz[d] == 0) return HPU_SUCCESS;
  for (int64_t k = 0; k < count; k++) {
    int64_t v = hpu_load_i64(flat_elem(idx, k), idx->dtype);
    if (v < 0) v += size;
    int64_t c[HPU_MAX_DIMS] = {0};
    do {
      c[dim] = v;
      memcpy(po + hpu_tail_off(out, c) * (int64_t)es, elem, es);
      c[dim] = 0;
    } while (hpu_tail_next(c, &rest));
  }
  return HPU_SUCCESS;
}
