/* Binary cross entropy per element, as PyTorch's CPU kernel (Loss.cpp):
 * (y - 1) max(log1p(-x), -100) - y max(log x, -100) in the element's own
 * type, a bf16 / fp16 result rounded after every step (its scalar_t
 * arithmetic), libm's log and log1p as the CPU calls them. An input or
 * target outside [0, 1] (NaN too) fails the node, as the CPU's check
 * raises; the element then holds whatever the formula gave. */
#include <math.h>
#include <stdatomic.h>

#include "hpu/status.h"
#include "kernels/cvt.h"
#include "kernels/iter.h"
#include "kernels/nn_util.h"

enum { BAD_INPUT = 1, BAD_TARGET = 2 };

typedef struct {
  hpu_dtype_t dt;
  _Atomic int bad;
} bce_t;

#define NO_ROUND(v) (v)
#define BCE_STEPS(T, LOG, LOG1P, MAX, R, x, y)                                       \
  R(R(R((y) - (T)1) * MAX(R(LOG1P(-(x))), (T)-100)) - R((y) * MAX(R(LOG(x)), (T)-100)))

static inline float maxf_(float a, float b) { return a < b ? b : a; }
static inline double maxd_(double a, double b) { return a < b ? b : a; }

static float bce_f(float x, float y, hpu_dtype_t dt) {
  if (dt == HPU_BFLOAT16) return BCE_STEPS(float, logf, log1pf, maxf_, hpu_round_bf16, x, y);
  if (dt == HPU_FLOAT16) return BCE_STEPS(float, logf, log1pf, maxf_, hpu_round_half, x, y);
  return BCE_STEPS(float, logf, log1pf, maxf_, NO_ROUND, x, y);
}

static void bce_loop(void *vctx, char **data, const int64_t *st, int64_t n, int64_t index) {
  (void)index;
  bce_t *c = vctx;
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    char *o = data[0] + i * st[0];
    const char *px = data[1] + i * st[1], *py = data[2] + i * st[2];
    if (c->dt == HPU_FLOAT64) {
      double x = *(const double *)px, y = *(const double *)py;
      bad |= (x >= 0 && x <= 1 ? 0 : BAD_INPUT) | (y >= 0 && y <= 1 ? 0 : BAD_TARGET);
      *(double *)o = BCE_STEPS(double, log, log1p, maxd_, NO_ROUND, x, y);
    } else {
      float x = hpu_load_f32(px, c->dt), y = hpu_load_f32(py, c->dt);
      bad |= (x >= 0 && x <= 1 ? 0 : BAD_INPUT) | (y >= 0 && y <= 1 ? 0 : BAD_TARGET);
      hpu_store_f32(o, c->dt, bce_f(x, y, c->dt));
    }
  }
  if (bad) atomic_fetch_or(&c->bad, bad);
}

hpu_status_t hpu_nn_binary_cross_entropy(const hpu_node_t *node) {
  const hpu_tensor_t *ins[2] = {&node->inputs[0], &node->inputs[1]};
  hpu_iter_t it;
  hpu_iter_build(&it, &node->outputs[0], ins, 2, 0);
  bce_t c = {node->outputs[0].dtype, 0};
  hpu_iter_for_each(&it, bce_loop, &c, HPU_GRAIN / 8);
  int bad = atomic_load(&c.bad);
  if (bad & BAD_INPUT) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "all elements of input should be between 0 and 1");
  if (bad & BAD_TARGET) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "all elements of target should be between 0 and 1");
  return HPU_SUCCESS;
}
