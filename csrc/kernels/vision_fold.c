/* HPU_OP_IM2COL and HPU_OP_COL2IM: sliding blocks of planes [P, 1, H, W]
 * to and from columns [P, kh * kw, OH, OW], parallel over planes. col2im
 * walks the taps in the CPU's order (im2col.h: tap by tap, each onto a
 * zeroed plane), so every pixel's sum is the CPU's, bit for bit. */
#include <stdint.h>
#include <string.h>

#include "hpu/parallel.h"
#include "kernels/cvt.h"
#include "kernels/kernels.h"
#include "kernels/vision.h"

#define INVALID HPU_ERROR_INVALID_ARGUMENT

typedef struct {
  int64_t kh, kw, dh, dw, ph, pw, sh, sw;
} fold_t;

static fold_t fold_params(const hpu_nn_params_t *p) {
  fold_t f = {p->i[0], p->i[1], p->i[2], p->i[3], p->sizes[0], p->sizes[1], p->strides[0], p->strides[1]};
  return f;
}

/* The image row (or column) tap a of output row o reads; may be outside. */
static inline int64_t tap(int64_t o, int64_t a, int64_t s, int64_t pad, int64_t dil) { return o * s - pad + a * dil; }

#define IM2COL(E, SUF)                                                                               \
  static void im2col_##SUF(void *ctx, int64_t p0, int64_t p1) {                                     \
    const hpu_node_t *n = ctx;                                                                       \
    const hpu_tensor_t *xt = &n->inputs[0], *ct = &n->outputs[0];                                    \
    fold_t f = fold_params(&n->params.nn);                                                           \
    int64_t H = xt->sizes[2], W = xt->sizes[3], OH = ct->sizes[2], OW = ct->sizes[3];                \
    for (int64_t q = p0; q < p1; q++) {                                                              \
      const E *x = (const E *)hpu_tensor_data(xt) + q * H * W;                                       \
      E *c = (E *)hpu_tensor_data(ct) + q * f.kh * f.kw * OH * OW;                                   \
      for (int64_t a = 0; a < f.kh; a++)                                                             \
        for (int64_t b = 0; b < f.kw; b++)                                                           \
          for (int64_t oh = 0; oh < OH; oh++) {                                                      \
            int64_t h = tap(oh, a, f.sh, f.ph, f.dh);                                                \
            for (int64_t ow = 0; ow < OW; ow++) {                                                    \
              int64_t w = tap(ow, b, f.sw, f.pw, f.dw);                                              \
              *c++ = h >= 0 && h < H && w >= 0 && w < W ? x[h * W + w] : (E)0;                       \
            }                                                                                        \
          }                                                                                          \
    }                                                                                                \
  }
IM2COL(uint8_t, 1)
IM2COL(uint16_t, 2)
IM2COL(uint32_t, 4)
IM2COL(uint64_t, 8)

#define COL2IM(T, SUF, ROUND)                                                                        \
  static void col2im_##SUF(void *ctx, int64_t p0, int64_t p1) {                                     \
    const hpu_node_t *n = ctx;                                                                       \
    const hpu_tensor_t *ct = &n->inputs[0], *yt = &n->outputs[0];                                    \
    fold_t f = fold_params(&n->params.nn);                                                           \
    hpu_dtype_t rt = (hpu_dtype_t)n->params.nn.sizes[2];                                             \
    (void)rt;                                                                                        \
    int64_t H = yt->sizes[2], W = yt->sizes[3], OH = ct->sizes[2], OW = ct->sizes[3];                \
    for (int64_t q = p0; q < p1; q++) {                                                              \
      const T *c = (const T *)hpu_tensor_data(ct) + q * f.kh * f.kw * OH * OW;                       \
      T *y = (T *)hpu_tensor_data(yt) + q * H * W;                                                   \
      memset(y, 0, (size_t)(H * W) * sizeof(T));                                                     \
      for (int64_t a = 0; a < f.kh; a++)                                                             \
        for (int64_t b = 0; b < f.kw; b++)                                                           \
          for (int64_t oh = 0; oh < OH; oh++) {                                                      \
            int64_t h = tap(oh, a, f.sh, f.ph, f.dh);                                                \
            for (int64_t ow = 0; ow < OW; ow++, c++) {                                               \
              int64_t w = tap(ow, b, f.sw, f.pw, f.dw);                                              \
              if (h >= 0 && h < H && w >= 0 && w < W) y[h * W + w] = ROUND(y[h * W + w] + *c);       \
            }                                                                                        \
          }                                                                                          \
    }                                                                                                \
  }
#define ROUND_F32(v) hpu_round_to((v), rt)
#define ROUND_F64(v) (v)
COL2IM(float, f32, ROUND_F32)
COL2IM(double, f64, ROUND_F64)

/* Each output block count is the one PyTorch computes from the image size
 * (the forwarder checks the user's arguments with PyTorch's messages). */
static int64_t blocks(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t dil) {
  int64_t span = in + 2 * pad - (dil * (k - 1) + 1);
  return span < 0 ? 0 : span / s + 1;
}

hpu_status_t hpu_fold_validate(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  int im2col = n->op == HPU_OP_IM2COL;
  if (n->num_inputs != 1 || n->num_outputs != 1) return hpu_error(INVALID, "%s: wrong operand count", name);
  HPU_TRY(hpu_check_tensor(name, "input", 0, &n->inputs[0]));
  HPU_TRY(hpu_check_node_output(n, 0));
  const hpu_tensor_t *x = im2col ? &n->inputs[0] : &n->outputs[0], *c = im2col ? &n->outputs[0] : &n->inputs[0];
  HPU_TRY(hpu_vision_check_4d(name, "the image", x, -1));
  HPU_TRY(hpu_vision_check_4d(name, "the columns", c, x->sizes[0]));
  if (x->dtype != c->dtype)
    return hpu_error(INVALID, "%s: image is %s, the columns %s", name, hpu_dtype_name(x->dtype), hpu_dtype_name(c->dtype));
  fold_t f = fold_params(&n->params.nn);
  if (f.kh < 1 || f.kw < 1 || f.dh < 1 || f.dw < 1 || f.sh < 1 || f.sw < 1 || f.ph < 0 || f.pw < 0)
    return hpu_error(INVALID, "%s: kernel, dilation and stride must be positive, padding non-negative", name);
  if (x->sizes[1] != 1 || c->sizes[1] != f.kh * f.kw || c->sizes[2] != blocks(x->sizes[2], f.kh, f.ph, f.sh, f.dh) ||
      c->sizes[3] != blocks(x->sizes[3], f.kw, f.pw, f.sw, f.dw) || c->sizes[2] < 1 || c->sizes[3] < 1)
    return hpu_error(INVALID, "%s: columns [P, kh * kw, OH, OW] do not match the image [P, 1, H, W]", name);
  if (!im2col) {
    int64_t rt = n->params.nn.sizes[2];
    if (x->dtype != HPU_FLOAT32 && x->dtype != HPU_FLOAT64)
      return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: needs float32 or float64, got %s", name, hpu_dtype_name(x->dtype));
    if (!(rt == x->dtype || (x->dtype == HPU_FLOAT32 && (rt == HPU_BFLOAT16 || rt == HPU_FLOAT16))))
      return hpu_error(INVALID, "%s: cannot round %s sums to dtype code %lld", name, hpu_dtype_name(x->dtype), (long long)rt);
  } else if (hpu_dtype_size(x->dtype) != 1 && hpu_dtype_size(x->dtype) != 2 && hpu_dtype_size(x->dtype) != 4 &&
             hpu_dtype_size(x->dtype) != 8) {
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: no copy for %s", name, hpu_dtype_name(x->dtype));
  }
  return HPU_SUCCESS;
}

hpu_status_t hpu_fold_execute(const hpu_node_t *n) {
  hpu_range_fn fn;
  if (n->op == HPU_OP_COL2IM) {
    fn = n->inputs[0].dtype == HPU_FLOAT64 ? col2im_f64 : col2im_f32;
  } else {
    size_t es = hpu_dtype_size(n->inputs[0].dtype);
    fn = es == 1 ? im2col_1 : es == 2 ? im2col_2 : es == 4 ? im2col_4 : im2col_8;
  }
  hpu_parallel_for(n->inputs[0].sizes[0], 1, fn, (void *)n);
  return HPU_SUCCESS;
}
