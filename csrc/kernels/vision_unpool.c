/* HPU_OP_MAX_UNPOOL over planes [P, D, H, W]: each plane's values written
 * to its output plane at their indices, one task per run of planes. Within
 * a plane the writes go in input order, as the CPU's loop makes them, so of
 * repeated indices the last value stays, whatever the thread count. */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "hpu/parallel.h"
#include "kernels/kernels.h"
#include "kernels/vision.h"

#define INVALID HPU_ERROR_INVALID_ARGUMENT

typedef struct {
  const hpu_node_t *node;
  _Atomic int bad;
  int64_t value;
} unpool_t;

static void unpool_planes(void *ctx, int64_t p0, int64_t p1) {
  unpool_t *c = ctx;
  const hpu_tensor_t *xt = &c->node->inputs[0], *it = &c->node->inputs[1], *yt = &c->node->outputs[0];
  int64_t in = xt->sizes[1] * xt->sizes[2] * xt->sizes[3], out = yt->sizes[1] * yt->sizes[2] * yt->sizes[3];
  size_t es = hpu_dtype_size(xt->dtype);
  for (int64_t q = p0; q < p1; q++) {
    const char *x = (const char *)hpu_tensor_data(xt) + (size_t)(q * in) * es;
    const int64_t *ix = (const int64_t *)hpu_tensor_data(it) + q * in;
    char *y = (char *)hpu_tensor_data(yt) + (size_t)(q * out) * es;
    memset(y, 0, (size_t)out * es);
    for (int64_t i = 0; i < in; i++) {
      int64_t k = ix[i];
      if (k < 0 || k >= out) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&c->bad, &expected, 1)) c->value = k;
        continue;
      }
      memcpy(y + (size_t)k * es, x + (size_t)i * es, es);
    }
  }
}

hpu_status_t hpu_max_unpool_validate(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  if (n->num_inputs != 2 || n->num_outputs != 1) return hpu_error(INVALID, "%s: wrong operand count", name);
  for (int i = 0; i < 2; i++) HPU_TRY(hpu_check_tensor(name, "input", i, &n->inputs[i]));
  HPU_TRY(hpu_check_node_output(n, 0));
  const hpu_tensor_t *x = &n->inputs[0], *ix = &n->inputs[1], *y = &n->outputs[0];
  HPU_TRY(hpu_vision_check_4d(name, "the input", x, -1));
  HPU_TRY(hpu_vision_check_4d(name, "the indices", ix, x->sizes[0]));
  HPU_TRY(hpu_vision_check_4d(name, "the output", y, x->sizes[0]));
  if (ix->dtype != HPU_INT64) return hpu_error(INVALID, "%s: indices must be int64, got %s", name, hpu_dtype_name(ix->dtype));
  for (int d = 1; d < 4; d++)
    if (ix->sizes[d] != x->sizes[d]) return hpu_error(INVALID, "%s: indices and input shapes differ", name);
  if (y->dtype != x->dtype)
    return hpu_error(INVALID, "%s: input is %s, the output %s", name, hpu_dtype_name(x->dtype), hpu_dtype_name(y->dtype));
  return HPU_SUCCESS;
}

hpu_status_t hpu_max_unpool_execute(const hpu_node_t *n) {
  unpool_t c = {.node = n, .value = 0};
  atomic_init(&c.bad, 0);
  hpu_parallel_for(n->outputs[0].sizes[0], 1, unpool_planes, &c);
  if (atomic_load(&c.bad)) {
    const hpu_tensor_t *y = &n->outputs[0];
    /* PyTorch's message, with the op's name in front */
    if (n->params.nn.i[0] != 3)
      return hpu_error(HPU_ERROR_OUT_OF_RANGE, "%s: Found an invalid max index: %lld (output volumes are of size %lldx%lld)",
                       hpu_op_name(n->op), (long long)c.value, (long long)y->sizes[2], (long long)y->sizes[3]);
    return hpu_error(HPU_ERROR_OUT_OF_RANGE, "%s: Found an invalid max index: %lld (output volumes are of size %lldx%lldx%lld)",
                     hpu_op_name(n->op), (long long)c.value, (long long)y->sizes[1], (long long)y->sizes[2],
                     (long long)y->sizes[3]);
  }
  return HPU_SUCCESS;
}
