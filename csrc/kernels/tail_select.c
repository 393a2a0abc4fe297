/* kthvalue, median, nanmedian and mode along a dim (HPU_OP_TAIL_SELECT):
 * each row is copied with its indices and sorted stably (NaN as the
 * largest value), then the answer is read off the sorted row. The values
 * are the CPU's exactly; where equal values make the index ambiguous (the
 * CPU's nth_element / sort leave it unspecified) the index points at an
 * equal value: the one at the picked place of the stable sort for
 * kthvalue / median, the last of the run for mode (as the CPU gives on
 * short rows). Rows run in parallel, one owner per output element. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/op.h"
#include "hpu/parallel.h"
#include "hpu/status.h"
#include "kernels/cvt.h"
#include "kernels/kernels.h"
#include "kernels/tail.h"

typedef struct {
  double f;
  int64_t i, pos;
} item_t;

static int cmp_f(const void *pa, const void *pb) {
  const item_t *a = pa, *b = pb;
  int na = isnan(a->f), nb = isnan(b->f);
  if (na || nb) {
    if (na != nb) return na - nb;
  } else if (a->f != b->f) {
    return a->f < b->f ? -1 : 1;
  }
  return (a->pos > b->pos) - (a->pos < b->pos);
}

static int cmp_i(const void *pa, const void *pb) {
  const item_t *a = pa, *b = pb;
  if (a->i != b->i) return a->i < b->i ? -1 : 1;
  return (a->pos > b->pos) - (a->pos < b->pos);
}

static int same(const item_t *a, const item_t *b, int fl) { return fl ? a->f == b->f : a->i == b->i; }

typedef struct {
  const hpu_node_t *n;
  hpu_tail_shape_t rows;
  int64_t dim, len, k;
  int mode, fl;
  _Atomic int oom;
} sel_t;

static void sel_rows(void *ctx, int64_t begin, int64_t end) {
  sel_t *c = ctx;
  const hpu_tensor_t *in = &c->n->inputs[0], *val = &c->n->outputs[0], *ind = &c->n->outputs[1];
  item_t *it = malloc(sizeof(item_t) * (size_t)c->len);
  if (!it) {
    c->oom = 1;
    return;
  }
  size_t ein = hpu_dtype_size(in->dtype), ev = hpu_dtype_size(val->dtype);
  int64_t st = in->ndim ? in->strides[c->dim] : 0;
  for (int64_t r = begin; r < end; r++) {
    int64_t co[HPU_MAX_DIMS], rem = r;
    for (int d = c->rows.nd - 1; d >= 0; d--) {
      co[d] = rem % c->rows.sz[d];
      rem /= c->rows.sz[d];
    }
    const char *x = (const char *)hpu_tensor_data(in) + hpu_tail_off(in, co) * (int64_t)ein;
    int64_t nan_pos = -1, nans = 0;
    for (int64_t j = 0; j < c->len; j++) {
      const char *e = x + j * st * (int64_t)ein;
      it[j].pos = j;
      if (c->fl) {
        it[j].f = hpu_load_f64(e, in->dtype);
        if (isnan(it[j].f)) {
          nans++;
          if (nan_pos < 0) nan_pos = j;
        }
      } else {
        it[j].i = hpu_load_i64(e, in->dtype);
      }
    }
    qsort(it, (size_t)c->len, sizeof(item_t), c->fl ? cmp_f : cmp_i);
    int64_t pick;
    switch (c->mode) {
      case HPU_TAIL_SELECT_KTH: pick = c->k - 1; break;
      case HPU_TAIL_SELECT_MEDIAN: pick = (c->len - 1) / 2; break;
      case HPU_TAIL_SELECT_NANMEDIAN: pick = ((c->len - nans > 0 ? c->len - nans : c->len) - 1) / 2; break;
      default: { /* mode: the longest run of equal values, the smallest on ties */
        int64_t best = 0, best_len = 0, run = 0;
        for (int64_t j = 0; j < c->len; j++) {
          run++;
          if (j + 1 == c->len || !same(&it[j], &it[j + 1], c->fl)) {
            if (run > best_len) {
              best_len = run;
              best = j;
            }
            run = 0;
          }
        }
        pick = best;
      }
    }
    item_t *p = &it[pick];
    int64_t index = p->pos;
    /* median: any NaN makes the median NaN, at the first NaN */
    if (c->mode == HPU_TAIL_SELECT_MEDIAN && nan_pos >= 0) index = nan_pos;
    char *vo = (char *)hpu_tensor_data(val) + hpu_tail_off(val, co) * (int64_t)ev;
    memcpy(vo, x + index * st * (int64_t)ein, ev);
    *((int64_t *)hpu_tensor_data(ind) + hpu_tail_off(ind, co)) = index;
  }
  free(it);
}

hpu_status_t hpu_tail_select(const hpu_node_t *n) {
  sel_t c;
  memset(&c, 0, sizeof c);
  c.n = n;
  c.dim = n->params.nn.i[0];
  c.mode = (int)n->params.nn.i[1];
  c.k = n->params.nn.i[2];
  c.fl = hpu_dtype_is_floating(n->inputs[0].dtype);
  c.rows = hpu_tail_shape(&n->inputs[0]);
  c.len = c.rows.sz[c.dim];
  c.rows.sz[c.dim] = 1;
  int64_t rows = 1;
  for (int d = 0; d < c.rows.nd; d++) rows *= c.rows.sz[d];
  if (rows == 0 || c.len == 0) return HPU_SUCCESS;
  int64_t grain = 4096 / c.len;
  hpu_parallel_for(rows, grain > 0 ? grain : 1, sel_rows, &c);
  if (c.oom)
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "%s: no host memory for a row of %lld elements", hpu_op_name(n->op),
                     (long long)c.len);
  return HPU_SUCCESS;
}
