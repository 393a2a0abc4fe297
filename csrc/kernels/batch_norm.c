/* HPU_OP_BATCH_NORM / HPU_OP_BATCH_NORM_BACKWARD: batch norm over x
 * [N, C, HW] (float32 or float64, every operand in one dtype, contiguous),
 * parallel over channels. A channel's
 * elements are N runs of HW; its statistics take two passes summed in
 * double (the mean, then the squared deviations from it), which is at
 * least as close as the CPU's float sums. The normalisation and dx follow
 * the CPU kernel's formulas (batch_norm_kernel.cpp) so results agree to the
 * last bits of float. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hpu/parallel.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/nn_util.h"

#define INVALID HPU_ERROR_INVALID_ARGUMENT

/* t is [a, b] (nd 2), [a] (nd 1) or [a, b, ...] (nd 3), contiguous, of
 * dtype dt: the node's, float64 when its input x is, else float32. */
static hpu_status_t need(const char *name, const hpu_tensor_t *t, const char *what, int nd, int64_t a, int64_t b,
                         hpu_dtype_t dt) {
  if (t->ndim != nd || t->sizes[0] != a || (nd > 1 && t->sizes[1] != b))
    return hpu_error(INVALID, "%s: %s has the wrong shape", name, what);
  if (t->dtype != dt)
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: %s must be %s, got %s", name, what, hpu_dtype_name(dt),
                     hpu_dtype_name(t->dtype));
  if (!hpu_tensor_is_contiguous(t)) return hpu_error(INVALID, "%s: %s must be contiguous", name, what);
  return HPU_SUCCESS;
}

static hpu_status_t need_x(const char *name, const hpu_tensor_t *x, const char *what, hpu_dtype_t dt) {
  if (x->ndim != 3) return hpu_error(INVALID, "%s: %s must be [N, C, HW]", name, what);
  return need(name, x, what, 3, x->sizes[0], x->sizes[1], dt);
}

static int same3(const hpu_tensor_t *a, const hpu_tensor_t *b) {
  return a->ndim == 3 && b->ndim == 3 && a->sizes[0] == b->sizes[0] && a->sizes[1] == b->sizes[1] &&
         a->sizes[2] == b->sizes[2];
}

hpu_status_t hpu_batch_norm_validate(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  for (int i = 0; i < n->num_inputs && i < HPU_MAX_INPUTS; i++) HPU_TRY(hpu_check_tensor(name, "input", i, &n->inputs[i]));
  hpu_dtype_t dt = n->inputs[n->op == HPU_OP_BATCH_NORM ? 0 : 1].dtype == HPU_FLOAT64 ? HPU_FLOAT64 : HPU_FLOAT32;
  if (n->op == HPU_OP_BATCH_NORM) {
    int train = n->params.nn.i[0] != 0;
    if (n->num_inputs != (train ? 2 : 3) || n->num_outputs != 2)
      return hpu_error(INVALID, "%s: expects %d inputs and 2 outputs", name, train ? 2 : 3);
    const hpu_tensor_t *x = &n->inputs[0];
    HPU_TRY(need_x(name, x, "the input", dt));
    int64_t C = x->sizes[1];
    HPU_TRY(need(name, &n->inputs[1], "weight/bias", 2, 2, C, dt));
    if (!train) HPU_TRY(need(name, &n->inputs[2], "the running statistics", 2, 2, C, dt));
    HPU_TRY(hpu_check_node_output(n, 0));
    HPU_TRY(hpu_check_node_output(n, 1));
    HPU_TRY(need_x(name, &n->outputs[0], "the output", dt));
    if (!same3(x, &n->outputs[0])) return hpu_error(INVALID, "%s: output and input shapes differ", name);
    return need(name, &n->outputs[1], "the statistics", 2, 3, C, dt);
  }
  int has_w = n->params.nn.i[2] != 0;
  int64_t mask = n->params.nn.i[0];
  if (n->num_inputs != 3 + has_w || n->num_outputs != 3)
    return hpu_error(INVALID, "%s: expects %d inputs and 3 outputs", name, 3 + has_w);
  const hpu_tensor_t *dy = &n->inputs[0], *x = &n->inputs[1];
  HPU_TRY(need_x(name, dy, "the gradient", dt));
  HPU_TRY(need_x(name, x, "the input", dt));
  if (!same3(dy, x)) return hpu_error(INVALID, "%s: gradient and input shapes differ", name);
  int64_t C = x->sizes[1];
  HPU_TRY(need(name, &n->inputs[2], "the statistics", 2, 2, C, dt));
  if (has_w) HPU_TRY(need(name, &n->inputs[3], "the weight", 1, C, 0, dt));
  for (int k = 0; k < 3; k++) {
    if (!((mask >> k) & 1)) continue;
    HPU_TRY(hpu_check_node_output(n, k));
    if (k == 0) {
      HPU_TRY(need_x(name, &n->outputs[0], "grad_input", dt));
      if (!same3(x, &n->outputs[0])) return hpu_error(INVALID, "%s: grad_input and input shapes differ", name);
    } else {
      HPU_TRY(need(name, &n->outputs[k], "dweight/dbias", 1, C, 0, dt));
    }
  }
  return HPU_SUCCESS;
}

typedef struct {
  const hpu_node_t *n;
  int64_t N, C, HW;
  const void *rows; /* the bn_rows_t of the dtype and this CPU */
} bn_t;

#define BN_LANES 16

/* The lanes' sum in one fixed order (a pairwise tree). */
static double bn_fold(const double *acc) {
  double a[BN_LANES / 2];
  for (int l = 0; l < BN_LANES / 2; l++) a[l] = acc[l] + acc[l + BN_LANES / 2];
  for (int w = BN_LANES / 4; w >= 1; w /= 2)
    for (int l = 0; l < w; l++) a[l] += a[l + w];
  return a[0];
}

#define BN_ROWS_TYPE(T, SUF)                                                                    \
  typedef struct {                                                                              \
    double (*sum)(const T *x, int64_t runs, int64_t hw, int64_t stride);                        \
    double (*ssd)(const T *x, int64_t runs, int64_t hw, int64_t stride, double m);              \
    void (*sumdot)(const T *g, const T *x, int64_t runs, int64_t hw, int64_t stride, double mean, \
                   double *sum, double *dot);                                                   \
    void (*affine)(const T *x, T *y, int64_t runs, int64_t hw, int64_t stride, T a, T b);       \
    void (*dx)(const T *g, const T *x, T *dx, int64_t runs, int64_t hw, int64_t stride, T mean,  \
               T mdy, T k, T ws);                                                               \
    void (*scale)(const T *g, T *dx, int64_t runs, int64_t hw, int64_t stride, T ws);           \
  } bn_rows_t_##SUF;
BN_ROWS_TYPE(float, f32)
BN_ROWS_TYPE(double, f64)
#define ROWS_OF(SUF) {bn_sum_##SUF, bn_ssd_##SUF, bn_sumdot_##SUF, bn_affine_##SUF, bn_dx_##SUF, bn_scale_##SUF}

#define T float
#define ATTR HPU_ATTR_generic
#define BN_VW 2
#define RN(x) x##_f32_generic
#include "kernels/batch_norm_rows.h"
#undef ATTR
#undef RN
#undef BN_VW
static const bn_rows_t_f32 rows_f32_generic = ROWS_OF(f32_generic);
#if HPU_HAVE_ISA_CLONES
#define ATTR HPU_ATTR_avx2
#define BN_VW 4
#define RN(x) x##_f32_avx2
#include "kernels/batch_norm_rows.h"
#undef ATTR
#undef RN
#undef BN_VW
#define ATTR HPU_ATTR_avx512
#define BN_VW 8
#define RN(x) x##_f32_avx512
#include "kernels/batch_norm_rows.h"
#undef ATTR
#undef RN
#undef BN_VW
static const bn_rows_t_f32 rows_f32_avx2 = ROWS_OF(f32_avx2);
static const bn_rows_t_f32 rows_f32_avx512 = ROWS_OF(f32_avx512);
#endif
#undef T
#define T double
#define ATTR HPU_ATTR_generic
#define BN_VW 2
#define RN(x) x##_f64
#include "kernels/batch_norm_rows.h"
#undef ATTR
#undef RN
#undef BN_VW
#undef T
static const bn_rows_t_f64 rows_f64 = ROWS_OF(f64);

static const bn_rows_t_f32 *rows_f32(void) {
#if HPU_HAVE_ISA_CLONES
  hpu_isa_t isa = hpu_kernels_isa();
  if (isa == HPU_ISA_AVX512) return &rows_f32_avx512;
  if (isa == HPU_ISA_AVX2) return &rows_f32_avx2;
#endif
  return &rows_f32_generic;
}

#define T float
#define SQRT sqrtf
#define FN(x) x##_f32
#include "kernels/batch_norm_tmpl.h"
#undef T
#undef SQRT
#undef FN
#define T double
#define SQRT sqrt
#define FN(x) x##_f64
#include "kernels/batch_norm_tmpl.h"
#undef T
#undef SQRT
#undef FN

hpu_status_t hpu_batch_norm_execute(const hpu_node_t *n) {
  const hpu_tensor_t *x = &n->inputs[n->op == HPU_OP_BATCH_NORM ? 0 : 1];
  int f64 = x->dtype == HPU_FLOAT64;
  bn_t b = {n, x->sizes[0], x->sizes[1], x->sizes[2], f64 ? (const void *)&rows_f64 : (const void *)rows_f32()};
  hpu_range_fn fn = n->op == HPU_OP_BATCH_NORM ? (f64 ? forward_channels_f64 : forward_channels_f32)
                                               : (f64 ? backward_channels_f64 : backward_channels_f32);
  hpu_parallel_for(b.C, 1, fn, &b);
  return HPU_SUCCESS;
}
