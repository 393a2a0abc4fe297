/* Strided N-d iteration with broadcasting: see iter.h. */
#include "kernels/iter.h"

#include <string.h>

#include "hpu/parallel.h"

static void swap_dims(hpu_iter_t *it, int a, int b) {
  int64_t s = it->shape[a];
  it->shape[a] = it->shape[b];
  it->shape[b] = s;
  for (int op = 0; op < it->nops; op++) {
    int64_t t = it->strides[a][op];
    it->strides[a][op] = it->strides[b][op];
    it->strides[b][op] = t;
  }
}

/* Should dim `outer` go inside dim `inner`? Decided by the first operand
 * whose strides differ and are both non-zero (as TensorIterator does). */
static int should_swap(const hpu_iter_t *it, int inner, int outer) {
  for (int op = 0; op < it->nops; op++) {
    int64_t si = it->strides[inner][op], so = it->strides[outer][op];
    if (si == 0 || so == 0 || si == so) continue;
    return so < si;
  }
  return 0;
}

void hpu_iter_build(hpu_iter_t *it, const hpu_tensor_t *out, const hpu_tensor_t *const *inputs,
                    int ninputs, int flags) {
  const hpu_tensor_t *ops[HPU_ITER_MAX_OPS];
  int nops = 0;
  ops[nops++] = out;
  for (int i = 0; i < ninputs; i++)
    if (inputs[i]) ops[nops++] = inputs[i];
  memset(it, 0, sizeof *it);
  it->nops = nops;
  for (int op = 0; op < nops; op++) {
    it->data[op] = (char *)hpu_tensor_data(ops[op]);
    it->dtypes[op] = ops[op]->dtype;
  }
  int nd = out->ndim;
  int64_t numel = 1;
  int d = 0;
  for (int od = nd - 1; od >= 0; od--) { /* innermost first */
    int64_t size = out->sizes[od];
    numel *= size;
    if (size == 1) continue;
    it->shape[d] = size;
    for (int op = 0; op < nops; op++) {
      const hpu_tensor_t *t = ops[op];
      int td = od - nd + t->ndim;
      int64_t esz = (int64_t)hpu_dtype_size(t->dtype);
      it->strides[d][op] = (td < 0 || t->sizes[td] == 1) ? 0 : t->strides[td] * esz;
    }
    d++;
  }
  it->numel = numel;
  it->ndim = numel == 0 ? 0 : d;
  if (numel == 0) return;
  if (!(flags & HPU_ITER_KEEP_ORDER)) { /* insertion sort, stable */
    for (int i = 1; i < it->ndim; i++)
      for (int j = i; j > 0 && should_swap(it, j - 1, j); j--) swap_dims(it, j - 1, j);
  }
  /* Coalesce dim j into the current one when contiguous for every operand. */
  int cur = 0;
  for (int j = 1; j < it->ndim; j++) {
    int ok = 1;
    for (int op = 0; op < nops && ok; op++)
      ok = it->strides[j][op] == it->shape[cur] * it->strides[cur][op];
    if (ok) {
      it->shape[cur] *= it->shape[j];
    } else {
      cur++;
      if (cur != j) {
        it->shape[cur] = it->shape[j];
        for (int op = 0; op < nops; op++) it->strides[cur][op] = it->strides[j][op];
      }
    }
  }
  if (it->ndim > 0) it->ndim = cur + 1;
}

int hpu_iter_is_contiguous(const hpu_iter_t *it) {
  if (it->numel <= 1) return 1;
  if (it->ndim != 1) return 0;
  for (int op = 0; op < it->nops; op++)
    if (it->strides[0][op] != (int64_t)hpu_dtype_size(it->dtypes[op])) return 0;
  return 1;
}

typedef struct {
  const hpu_iter_t *it;
  hpu_loop_fn loop;
  void *ctx;
} range_ctx_t;

static void run_range(void *vctx, int64_t begin, int64_t end) {
  const range_ctx_t *rc = vctx;
  const hpu_iter_t *it = rc->it;
  int nops = it->nops, nd = it->ndim;
  int64_t counter[HPU_MAX_DIMS];
  char *ptrs[HPU_ITER_MAX_OPS];
  int64_t rem = begin;
  for (int d = 0; d < nd; d++) {
    counter[d] = rem % it->shape[d];
    rem /= it->shape[d];
  }
  int64_t pos = begin;
  while (pos < end) {
    for (int op = 0; op < nops; op++) {
      char *p = it->data[op];
      for (int d = 0; d < nd; d++) p += counter[d] * it->strides[d][op];
      ptrs[op] = p;
    }
    int64_t n = it->shape[0] - counter[0];
    if (n > end - pos) n = end - pos;
    rc->loop(rc->ctx, ptrs, it->strides[0], n, pos);
    pos += n;
    counter[0] += n;
    for (int d = 0; d < nd - 1 && counter[d] == it->shape[d]; d++) {
      counter[d] = 0;
      counter[d + 1]++;
    }
  }
}

void hpu_iter_for_each(const hpu_iter_t *it, hpu_loop_fn loop, void *ctx, int64_t grain) {
  if (it->numel == 0) return;
  if (it->ndim == 0) { /* one element */
    static const int64_t zero[HPU_ITER_MAX_OPS] = {0};
    char *ptrs[HPU_ITER_MAX_OPS];
    memcpy(ptrs, it->data, sizeof ptrs);
    loop(ctx, ptrs, zero, 1, 0);
    return;
  }
  range_ctx_t rc = {it, loop, ctx};
  if (it->numel <= grain) {
    run_range(&rc, 0, it->numel);
    return;
  }
  hpu_parallel_for(it->numel, grain, run_range, &rc);
}
