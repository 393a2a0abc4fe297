/* histc / histogram / histogramdd (HPU_OP_TAIL_HISTOGRAM): each of the M
 * points of in0 [M, D] is placed in its bin along every dim and its weight
 * (1 without in3) added to that bin of out0, in the input's dtype. The bin
 * choice is the CPU's (HistogramKernel.cpp): a point outside [first edge,
 * last edge] or NaN is skipped; the last bin holds its right edge; the
 * linear modes compute (x - first) * bins / (last - first) in the dtype
 * (bf16 / fp16 rounded after each step, as c10's operators do), the local
 * search corrects that against the edges, the binary search takes the
 * last edge <= x. Points are added serially in order: counts are exact, and
 * a weighted or reduced-precision sum equals the CPU's one-thread result
 * (the CPU adds per-thread partial histograms, see docs/NUMERICS.md). */
#include <stdint.h>

#include "hpu/op.h"
#include "hpu/op_params_tailidx.h"
#include "hpu/status.h"
#include "kernels/cvt.h"
#include "kernels/kernels.h"
#include "kernels/tail.h"

static inline double in_dtype(double v, hpu_dtype_t dt) {
  if (dt == HPU_FLOAT32) return (float)v;
  if (dt == HPU_BFLOAT16 || dt == HPU_FLOAT16) return hpu_round_to((float)v, dt);
  return v;
}

/* First index in [lo, hi) of edges e whose value is > x (std::upper_bound). */
static int64_t upper_bound(const char *e, hpu_dtype_t dt, int64_t lo, int64_t hi, double x) {
  size_t es = hpu_dtype_size(dt);
  while (lo < hi) {
    int64_t mid = lo + ((hi - lo) >> 1);
    if (!(x < hpu_load_f64(e + mid * (int64_t)es, dt))) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Bin of x among the nedges edges at e, or -1 when x falls outside. */
static int64_t bin_of(const char *e, hpu_dtype_t dt, int64_t nedges, double x, int algorithm) {
  size_t es = hpu_dtype_size(dt);
  double left = hpu_load_f64(e, dt), right = hpu_load_f64(e + (nedges - 1) * (int64_t)es, dt);
  if (!(x >= left && x <= right)) return -1;
  int64_t pos;
  if (algorithm == HPU_TAIL_HIST_BINARY_SEARCH) {
    pos = upper_bound(e, dt, 0, nedges, x) - 1;
  } else {
    /* each operation rounded to the dtype; the bin count converted to it first */
    double scaled = in_dtype(in_dtype(x - left, dt) * in_dtype((double)(nedges - 1), dt), dt);
    pos = hpu_f2i(in_dtype(scaled / in_dtype(right - left, dt), dt));
    if (algorithm == HPU_TAIL_HIST_LINEAR_LOCAL) {
      int64_t lo = pos - 1 > 0 ? pos - 1 : 0, hi = pos + 2 < nedges ? pos + 2 : nedges;
      pos = upper_bound(e, dt, lo, hi, x) - 1;
    }
  }
  if (pos == nedges - 1) pos--;
  return pos;
}

hpu_status_t hpu_tail_histogram(const hpu_node_t *n) {
  const hpu_tensor_t *x = &n->inputs[0], *edges = &n->inputs[1], *counts = &n->inputs[2], *hist = &n->outputs[0];
  const hpu_tensor_t *w = n->num_inputs > 3 ? &n->inputs[3] : NULL;
  hpu_dtype_t dt = x->dtype;
  size_t es = hpu_dtype_size(dt);
  int64_t m = x->sizes[0], d = x->sizes[1], total = hpu_tensor_numel(edges);
  const int64_t *ne = hpu_tensor_data(counts);
  int64_t sum = 0;
  for (int64_t k = 0; k < d; k++) {
    if (ne[k] < 2 || ne[k] - 1 != hist->sizes[k])
      return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "histogram: dim %lld has %lld edges for %lld bins", (long long)k,
                       (long long)ne[k], (long long)hist->sizes[k]);
    sum += ne[k];
  }
  if (sum != total)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "histogram: the edge counts add up to %lld, the edges hold %lld",
                     (long long)sum, (long long)total);
  char *ph = hpu_tensor_data(hist);
  const char *px = hpu_tensor_data(x), *pe = hpu_tensor_data(edges), *pw = w ? hpu_tensor_data(w) : NULL;
  int algorithm = (int)n->params.nn.i[0];
  for (int64_t k = 0, total_bins = hpu_tensor_numel(hist); k < total_bins; k++) hpu_store_f64(ph + k * (int64_t)es, dt, 0);
  if (d == 0) return HPU_SUCCESS;
  for (int64_t i = 0; i < m; i++) {
    int64_t at = 0, first = 0;
    int inside = 1;
    for (int64_t k = 0; k < d && inside; k++) {
      int64_t pos = bin_of(pe + first * (int64_t)es, dt, ne[k], hpu_load_f64(px + (i * d + k) * (int64_t)es, dt),
                           algorithm);
      first += ne[k];
      inside = pos >= 0;
      at += pos * hist->strides[k];
    }
    if (!inside) continue;
    char *h = ph + at * (int64_t)es;
    double wt = pw ? hpu_load_f64(pw + i * (int64_t)es, dt) : 1.0;
    hpu_store_f64(h, dt, in_dtype(hpu_load_f64(h, dt) + wt, dt));
  }
  return HPU_SUCCESS;
}
