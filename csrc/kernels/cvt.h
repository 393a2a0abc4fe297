/* Inline scalar conversions and per-element typed loads/stores shared by the
 * kernels. Conversions follow c10's rules exactly:
 *  - bf16/fp16 <-> float: round to nearest even, NaN kept (bit-identical to
 *    hpu_float_to_bf16 / hpu_float_to_half in runtime/dtype.c, but inlinable
 *    so loops vectorise);
 *  - double -> bf16/fp16 goes through float (as c10::BFloat16(double));
 *  - floating -> integer truncates toward zero through int64 (c10 casts to
 *    unsigned types through int64 too); NaN / out of range gives INT64_MIN,
 *    what x86's cvtt* does, instead of C's undefined behaviour;
 *  - anything -> bool is "!= 0" (NaN -> true); bool -> anything is 0/1;
 *  - integer narrowing wraps (two's complement). */
#ifndef HPU_KERNELS_CVT_H
#define HPU_KERNELS_CVT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hpu/dtype.h"

static inline float hpu_cvt_bf16_f32(uint16_t v) {
  uint32_t u = (uint32_t)v << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t hpu_cvt_f32_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static inline float hpu_cvt_half_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, u;
  float f;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    f = (float)mant * 0x1p-24f; /* exact */
    return sign ? -f : f;
  } else {
    u = sign | ((exp + 112) << 23) | (mant << 13);
  }
  memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t hpu_cvt_f32_half(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  uint32_t absu = u & 0x7fffffffu;
  if (absu >= 0x7f800000u) return sign | 0x7c00 | (absu > 0x7f800000u ? 0x200 : 0);
  if (absu >= 0x477ff000u) return sign | 0x7c00;
  if (absu < 0x38800000u) {
    float a;
    memcpy(&a, &absu, 4);
    return sign | (uint16_t)lrintf(a * 16777216.0f);
  }
  absu += 0xc8000fffu + ((absu >> 13) & 1u);
  return sign | (uint16_t)(absu >> 13);
}

static inline float hpu_round_bf16(float f) { return hpu_cvt_bf16_f32(hpu_cvt_f32_bf16(f)); }
static inline float hpu_round_half(float f) { return hpu_cvt_half_f32(hpu_cvt_f32_half(f)); }

/* Floating -> int64 truncation with x86 semantics for NaN / out of range. */
static inline int64_t hpu_f2i(double d) {
  return (d >= -9223372036854775808.0 && d < 9223372036854775808.0) ? (int64_t)d : INT64_MIN;
}

/* Narrow an int64 to an integer dtype's value range (wrapping), bool -> 0/1. */
static inline int64_t hpu_narrow_int(int64_t v, hpu_dtype_t dt) {
  switch (dt) {
    case HPU_BOOL: return v != 0;
    case HPU_UINT8: return (uint8_t)v;
    case HPU_INT8: return (int8_t)v;
    case HPU_INT16: return (int16_t)v;
    case HPU_INT32: return (int32_t)v;
    default: return v;
  }
}

/* Round a float to the precision of a float-family compute dtype. */
static inline float hpu_round_to(float v, hpu_dtype_t dt) {
  if (dt == HPU_BFLOAT16) return hpu_round_bf16(v);
  if (dt == HPU_FLOAT16) return hpu_round_half(v);
  return v;
}

/* Generic loads: the element at p, of dtype dt, converted as c10 would. */
static inline float hpu_load_f32(const char *p, hpu_dtype_t dt) {
  switch (dt) {
    case HPU_BOOL: return *(const uint8_t *)p != 0;
    case HPU_UINT8: return *(const uint8_t *)p;
    case HPU_INT8: return *(const int8_t *)p;
    case HPU_INT16: return *(const int16_t *)p;
    case HPU_INT32: return (float)*(const int32_t *)p;
    case HPU_INT64: return (float)*(const int64_t *)p;
    case HPU_FLOAT16: return hpu_cvt_half_f32(*(const uint16_t *)p);
    case HPU_BFLOAT16: return hpu_cvt_bf16_f32(*(const uint16_t *)p);
    case HPU_FLOAT32: return *(const float *)p;
    case HPU_FLOAT64: return (float)*(const double *)p;
    default: return 0;
  }
}

static inline double hpu_load_f64(const char *p, hpu_dtype_t dt) {
  switch (dt) {
    case HPU_INT64: return (double)*(const int64_t *)p;
    case HPU_FLOAT64: return *(const double *)p;
    default: return hpu_load_f32(p, dt); /* exact for the others */
  }
}

static inline int64_t hpu_load_i64(const char *p, hpu_dtype_t dt) {
  switch (dt) {
    case HPU_BOOL: return *(const uint8_t *)p != 0;
    case HPU_UINT8: return *(const uint8_t *)p;
    case HPU_INT8: return *(const int8_t *)p;
    case HPU_INT16: return *(const int16_t *)p;
    case HPU_INT32: return *(const int32_t *)p;
    case HPU_INT64: return *(const int64_t *)p;
    case HPU_FLOAT16: return hpu_f2i(hpu_cvt_half_f32(*(const uint16_t *)p));
    case HPU_BFLOAT16: return hpu_f2i(hpu_cvt_bf16_f32(*(const uint16_t *)p));
    case HPU_FLOAT32: return hpu_f2i(*(const float *)p);
    case HPU_FLOAT64: return hpu_f2i(*(const double *)p);
    default: return 0;
  }
}

static inline void hpu_store_i64(char *p, hpu_dtype_t dt, int64_t v) {
  switch (dt) {
    case HPU_BOOL: *(uint8_t *)p = v != 0; break;
    case HPU_UINT8: *(uint8_t *)p = (uint8_t)v; break;
    case HPU_INT8: *(int8_t *)p = (int8_t)v; break;
    case HPU_INT16: *(int16_t *)p = (int16_t)v; break;
    case HPU_INT32: *(int32_t *)p = (int32_t)v; break;
    case HPU_INT64: *(int64_t *)p = v; break;
    case HPU_FLOAT16: *(uint16_t *)p = hpu_cvt_f32_half((float)v); break;
    case HPU_BFLOAT16: *(uint16_t *)p = hpu_cvt_f32_bf16((float)v); break;
    case HPU_FLOAT32: *(float *)p = (float)v; break;
    case HPU_FLOAT64: *(double *)p = (double)v; break;
    default: break;
  }
}

static inline void hpu_store_f64(char *p, hpu_dtype_t dt, double v) {
  switch (dt) {
    case HPU_BOOL: *(uint8_t *)p = v != 0; break;
    case HPU_FLOAT16: *(uint16_t *)p = hpu_cvt_f32_half((float)v); break;
    case HPU_BFLOAT16: *(uint16_t *)p = hpu_cvt_f32_bf16((float)v); break;
    case HPU_FLOAT32: *(float *)p = (float)v; break;
    case HPU_FLOAT64: *(double *)p = v; break;
    default: hpu_store_i64(p, dt, hpu_f2i(v)); break;
  }
}

static inline void hpu_store_f32(char *p, hpu_dtype_t dt, float v) {
  switch (dt) {
    case HPU_FLOAT16: *(uint16_t *)p = hpu_cvt_f32_half(v); break;
    case HPU_BFLOAT16: *(uint16_t *)p = hpu_cvt_f32_bf16(v); break;
    case HPU_FLOAT32: *(float *)p = v; break;
    default: hpu_store_f64(p, dt, v); break;
  }
}

#endif
