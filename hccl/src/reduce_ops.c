/* Reduction kernels: dst = op over sources, blockwise through a small
 * accumulator (so dst may alias a source and the loops vectorise).
 * Integer arithmetic wraps (done in unsigned types: no undefined overflow);
 * bf16 and fp16 accumulate in float and round once per call. */
#include <string.h>

#include "hpu/dtype.h"
#include "internal.h"

#define BLK 1024

#define ADD(U, a, b) ((U)(a) + (U)(b))
#define MUL(U, a, b) ((U)(a) * (U)(b))
#define MAX(U, a, b) ((a) > (b) ? (a) : (b))
#define MIN(U, a, b) ((a) < (b) ? (a) : (b))

#define DEF_KERNEL(NAME, T, U, OP)                                                     \
  static void NAME(void *dstv, const void *const *srcs, int nsrc, size_t n) {          \
    T acc[BLK];                                                                        \
    T *dst = dstv;                                                                     \
    for (size_t base = 0; base < n; base += BLK) {                                     \
      size_t m = n - base < BLK ? n - base : BLK;                                      \
      const T *s0 = (const T *)srcs[0] + base;                                         \
      memcpy(acc, s0, m * sizeof(T));                                                  \
      for (int k = 1; k < nsrc; k++) {                                                 \
        const T *s = (const T *)srcs[k] + base;                                        \
        for (size_t i = 0; i < m; i++) acc[i] = (T)OP(U, acc[i], s[i]);                \
      }                                                                                \
      memcpy(dst + base, acc, m * sizeof(T));                                          \
    }                                                                                  \
  }

#define DEF_TYPE(SUF, T, U)                 \
  DEF_KERNEL(sum_##SUF, T, U, ADD)          \
  DEF_KERNEL(prod_##SUF, T, U, MUL)         \
  DEF_KERNEL(max_##SUF, T, U, MAX)          \
  DEF_KERNEL(min_##SUF, T, U, MIN)

DEF_TYPE(i8, int8_t, uint32_t)
DEF_TYPE(u8, uint8_t, uint32_t)
DEF_TYPE(i32, int32_t, uint32_t)
DEF_TYPE(u32, uint32_t, uint32_t)
DEF_TYPE(i64, int64_t, uint64_t)
DEF_TYPE(u64, uint64_t, uint64_t)
DEF_TYPE(f32, float, float)
DEF_TYPE(f64, double, double)

static inline float bf16_to_f(uint16_t v) {
  uint32_t b = (uint32_t)v << 16;
  float f;
  memcpy(&f, &b, 4);
  return f;
}

static inline uint16_t f_to_bf16(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x40); /* quiet NaN */
  b += 0x7fffu + ((b >> 16) & 1u);                                          /* round to nearest even */
  return (uint16_t)(b >> 16);
}

typedef float (*to_f_fn)(uint16_t);
typedef uint16_t (*from_f_fn)(float);

static void half_reduce(void *dstv, const void *const *srcs, int nsrc, size_t n, hcclRedOp_t op, int bf16) {
  float acc[BLK];
  uint16_t *dst = dstv;
  for (size_t base = 0; base < n; base += BLK) {
    size_t m = n - base < BLK ? n - base : BLK;
    const uint16_t *s0 = (const uint16_t *)srcs[0] + base;
    if (bf16) for (size_t i = 0; i < m; i++) acc[i] = bf16_to_f(s0[i]);
    else for (size_t i = 0; i < m; i++) acc[i] = hpu_half_to_float(s0[i]);
    for (int k = 1; k < nsrc; k++) {
      const uint16_t *s = (const uint16_t *)srcs[k] + base;
      float t[BLK];
      if (bf16) for (size_t i = 0; i < m; i++) t[i] = bf16_to_f(s[i]);
      else for (size_t i = 0; i < m; i++) t[i] = hpu_half_to_float(s[i]);
      switch (op) {
        case hcclProd: for (size_t i = 0; i < m; i++) acc[i] *= t[i]; break;
        case hcclMax: for (size_t i = 0; i < m; i++) acc[i] = acc[i] > t[i] ? acc[i] : t[i]; break;
        case hcclMin: for (size_t i = 0; i < m; i++) acc[i] = acc[i] < t[i] ? acc[i] : t[i]; break;
        default: for (size_t i = 0; i < m; i++) acc[i] += t[i]; break;
      }
    }
    if (bf16) for (size_t i = 0; i < m; i++) dst[base + i] = f_to_bf16(acc[i]);
    else for (size_t i = 0; i < m; i++) dst[base + i] = hpu_float_to_half(acc[i]);
  }
}

typedef void (*kernel_fn)(void *, const void *const *, int, size_t);

static const kernel_fn kernels[hcclNumTypes][4] = {
  [hcclInt8] = {sum_i8, prod_i8, max_i8, min_i8},
  [hcclUint8] = {sum_u8, prod_u8, max_u8, min_u8},
  [hcclInt32] = {sum_i32, prod_i32, max_i32, min_i32},
  [hcclUint32] = {sum_u32, prod_u32, max_u32, min_u32},
  [hcclInt64] = {sum_i64, prod_i64, max_i64, min_i64},
  [hcclUint64] = {sum_u64, prod_u64, max_u64, min_u64},
  [hcclFloat32] = {sum_f32, prod_f32, max_f32, min_f32},
  [hcclFloat64] = {sum_f64, prod_f64, max_f64, min_f64},
};

void hccl_reduce_n(void *dst, const void *const *srcs, int nsrc, size_t count, hcclDataType_t dt, hcclRedOp_t op) {
  if (count == 0) return;
  op = hccl_base_op(op);
  if (nsrc == 1) {
    if (dst != srcs[0]) memmove(dst, srcs[0], count * hccl_dtype_size(dt));
    return;
  }
  if (dt == hcclFloat16 || dt == hcclBfloat16) {
    half_reduce(dst, srcs, nsrc, count, op, dt == hcclBfloat16);
    return;
  }
  kernels[dt][op](dst, srcs, nsrc, count);
}

void hccl_avg_div(void *x, size_t n, hcclDataType_t dt, int d) {
  switch (dt) {
#define DIV_CASE(E, T) \
  case E: { T *p = x; for (size_t i = 0; i < n; i++) p[i] = (T)(p[i] / d); } break;
    DIV_CASE(hcclInt8, int8_t)
    DIV_CASE(hcclUint8, uint8_t)
    DIV_CASE(hcclInt32, int32_t)
    DIV_CASE(hcclUint32, uint32_t)
    DIV_CASE(hcclInt64, int64_t)
    DIV_CASE(hcclUint64, uint64_t)
    DIV_CASE(hcclFloat32, float)
    DIV_CASE(hcclFloat64, double)
#undef DIV_CASE
    case hcclBfloat16: { uint16_t *p = x; for (size_t i = 0; i < n; i++) p[i] = f_to_bf16(bf16_to_f(p[i]) / (float)d); } break;
    case hcclFloat16: { uint16_t *p = x; for (size_t i = 0; i < n; i++) p[i] = hpu_float_to_half(hpu_half_to_float(p[i]) / (float)d); } break;
    default: break;
  }
}
