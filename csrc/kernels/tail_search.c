/* searchsorted / bucketize (HPU_OP_TAIL_SEARCHSORTED): one binary search
 * per value over its row of boundaries. The search is the CPU's step for
 * step (same midpoints, same "not >=" / "not >" tests in the boundaries'
 * own order, through the sorter when there is one), so NaN values and
 * unsorted boundaries land where they land on the CPU. Values run in
 * parallel; each writes only its own output. */
#include <stdint.h>

#include "hpu/op.h"
#include "hpu/parallel.h"
#include "hpu/status.h"
#include "kernels/cvt.h"
#include "kernels/kernels.h"
#include "kernels/tail.h"

typedef struct {
  const hpu_node_t *n;
  int64_t row_len, values_per_row; /* boundaries per row; values sharing a row */
  int shared, right, floating;     /* 1-d boundaries; upper bound; compare as double */
} search_t;

/* A value, loaded once in both domains: floating boundaries compare as
 * double (exact for every floating dtype), integer ones as int64. */
typedef struct {
  double f;
  int64_t i;
} value_t;

/* Position in [0, row_len] of value v within row `row`, as the CPU's
 * cus_lower_bound / cus_upper_bound. */
static int64_t bound(const search_t *s, const char *bd, const int64_t *sorter, int64_t row, value_t v) {
  hpu_dtype_t dt = s->n->inputs[0].dtype;
  size_t es = hpu_dtype_size(dt);
  int64_t base = row * s->row_len, lo = base, hi = base + s->row_len;
  while (lo < hi) {
    int64_t mid = lo + ((hi - lo) >> 1);
    const char *m = bd + (sorter ? sorter[mid] + base : mid) * (int64_t)es;
    int greater, equal;
    if (s->floating) {
      double x = hpu_load_f64(m, dt);
      greater = x > v.f, equal = x == v.f;
    } else {
      int64_t x = hpu_load_i64(m, dt);
      greater = x > v.i, equal = x == v.i;
    }
    int go_right = s->right ? !greater : !(greater || equal);
    if (go_right) lo = mid + 1;
    else hi = mid;
  }
  return lo - base;
}

static void search_range(void *ctx, int64_t begin, int64_t end) {
  const search_t *s = ctx;
  const hpu_node_t *n = s->n;
  const char *bd = hpu_tensor_data(&n->inputs[0]), *val = hpu_tensor_data(&n->inputs[1]);
  const int64_t *sorter = n->num_inputs > 2 ? hpu_tensor_data(&n->inputs[2]) : NULL;
  hpu_dtype_t vdt = n->inputs[1].dtype, odt = n->outputs[0].dtype;
  size_t ves = hpu_dtype_size(vdt), oes = hpu_dtype_size(odt);
  char *out = hpu_tensor_data(&n->outputs[0]);
  for (int64_t i = begin; i < end; i++) {
    int64_t row = s->shared ? 0 : i / s->values_per_row;
    const char *v = val + i * (int64_t)ves;
    value_t value = {s->floating ? hpu_load_f64(v, vdt) : 0, s->floating ? 0 : hpu_load_i64(v, vdt)};
    int64_t pos = bound(s, bd, sorter, row, value);
    hpu_store_i64(out + i * (int64_t)oes, odt, pos);
  }
}

hpu_status_t hpu_tail_searchsorted(const hpu_node_t *n) {
  const hpu_tensor_t *bd = &n->inputs[0], *val = &n->inputs[1];
  int64_t count = hpu_tensor_numel(val);
  if (count == 0) return HPU_SUCCESS;
  search_t s = {.n = n, .right = n->params.nn.i[0] != 0, .shared = n->params.nn.i[1] != 0,
                .floating = hpu_dtype_is_floating(bd->dtype)};
  s.row_len = bd->ndim ? bd->sizes[bd->ndim - 1] : 1;
  s.values_per_row = val->ndim ? val->sizes[val->ndim - 1] : 1;
  /* a binary search is ~log2(row_len) loads: group enough values per task */
  hpu_parallel_for(count, 4096, search_range, &s);
  return HPU_SUCCESS;
}
