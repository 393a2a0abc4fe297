/* Element types: sizes, names, PyTorch's promotion lattice, and the
 * bit-exact bf16/fp16 conversions c10 uses. */
#include <math.h>
#include <string.h>

#include "hpu/dtype.h"

static const size_t dtype_sizes[HPU_DTYPE_COUNT] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};
static const char *const dtype_names[HPU_DTYPE_COUNT] = {
    "bool", "uint8", "int8", "int16", "int32", "int64",
    "float16", "bfloat16", "float32", "float64"};

int hpu_dtype_is_valid(hpu_dtype_t d) { return (int)d >= 0 && d < HPU_DTYPE_COUNT; }
size_t hpu_dtype_size(hpu_dtype_t d) { return hpu_dtype_is_valid(d) ? dtype_sizes[d] : 0; }
const char *hpu_dtype_name(hpu_dtype_t d) { return hpu_dtype_is_valid(d) ? dtype_names[d] : "invalid"; }
int hpu_dtype_is_floating(hpu_dtype_t d) {
  return d == HPU_FLOAT16 || d == HPU_BFLOAT16 || d == HPU_FLOAT32 || d == HPU_FLOAT64;
}

/* torch.promote_types for the dtypes we have. The table is c10's
 * promoteTypes restricted to them (uint8 with int8 gives int16; half with
 * bfloat16 gives float32). */
hpu_dtype_t hpu_promote_types(hpu_dtype_t a, hpu_dtype_t b) {
  enum { b1 = HPU_BOOL, u1 = HPU_UINT8, i1 = HPU_INT8, i2 = HPU_INT16, i4 = HPU_INT32,
         i8 = HPU_INT64, f2 = HPU_FLOAT16, bf = HPU_BFLOAT16, f4 = HPU_FLOAT32, f8 = HPU_FLOAT64 };
  static const unsigned char table[HPU_DTYPE_COUNT][HPU_DTYPE_COUNT] = {
      /*        b1  u1  i1  i2  i4  i8  f2  bf  f4  f8 */
      /* b1 */ {b1, u1, i1, i2, i4, i8, f2, bf, f4, f8},
      /* u1 */ {u1, u1, i2, i2, i4, i8, f2, bf, f4, f8},
      /* i1 */ {i1, i2, i1, i2, i4, i8, f2, bf, f4, f8},
      /* i2 */ {i2, i2, i2, i2, i4, i8, f2, bf, f4, f8},
      /* i4 */ {i4, i4, i4, i4, i4, i8, f2, bf, f4, f8},
      /* i8 */ {i8, i8, i8, i8, i8, i8, f2, bf, f4, f8},
      /* f2 */ {f2, f2, f2, f2, f2, f2, f2, f4, f4, f8},
      /* bf */ {bf, bf, bf, bf, bf, bf, f4, bf, f4, f8},
      /* f4 */ {f4, f4, f4, f4, f4, f4, f4, f4, f4, f8},
      /* f8 */ {f8, f8, f8, f8, f8, f8, f8, f8, f8, f8},
  };
  if (!hpu_dtype_is_valid(a) || !hpu_dtype_is_valid(b)) return HPU_DTYPE_COUNT;
  return (hpu_dtype_t)table[a][b];
}

static uint32_t float_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float hpu_bf16_to_float(uint16_t v) { return bits_float((uint32_t)v << 16); }

uint16_t hpu_float_to_bf16(float f) {
  if (isnan(f)) return 0x7fc0;
  uint32_t u = float_bits(f);
  u += 0x7fff + ((u >> 16) & 1); /* round to nearest even */
  return (uint16_t)(u >> 16);
}

/* IEEE half <-> float, round to nearest even, with subnormals and inf/nan. */
float hpu_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000 | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    float f = ldexpf((float)mant, -24);
    return sign ? -f : f;
  }
  return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t hpu_float_to_half(float f) {
  uint32_t u = float_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  uint32_t absu = u & 0x7fffffff;
  if (absu >= 0x7f800000) return sign | 0x7c00 | (absu > 0x7f800000 ? 0x200 : 0);
  if (absu >= 0x477ff000) return sign | 0x7c00; /* rounds to inf */
  if (absu < 0x38800000) {                      /* half subnormal or zero */
    float a = bits_float(absu);
    return sign | (uint16_t)lrintf(a * 16777216.0f); /* 2^24, ties to even */
  }
  uint32_t mant_odd = (absu >> 13) & 1;
  absu += 0xc8000fff + mant_odd; /* rebias exponent (-112<<23) and round */
  return sign | (uint16_t)(absu >> 13);
}
