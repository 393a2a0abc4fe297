/* Elementwise arithmetic: ADD, SUB (add with -alpha), MUL, DIV (true, trunc,
 * floor) and RELU, over the shared iterator.
 *
 * Math runs in one of three families chosen by the compute dtype:
 *   F  float   (float32, and bfloat16/float16 computed in float and rounded
 *               once to the compute dtype before the store, as PyTorch CPU)
 *   D  double  (float64)
 *   I  int64   (bool and integer dtypes: two's complement wrap-around, then
 *               narrowed to the compute dtype, which equals computing in it)
 * Each (family, op) has a generic strided loop that loads/stores any dtype
 * through cvt.h, and each (dtype, op) where in/out/compute dtypes all agree
 * has a typed loop with contiguous / scalar-operand fast paths; the float32
 * and bfloat16 ones also have AVX2 and AVX-512 clones.
 *
 * Scalars: the second operand may be params.binary.other (one-input node)
 * or a one-element tensor; either way it is read once. For MUL and DIV with
 * a bf16/fp16 compute dtype it keeps float precision (PyTorch's CPU reduced-
 * float scalar path); for ADD/SUB it is rounded to the compute dtype, as are
 * tensor operands and alpha.
 *
 * Integer division by zero (TRUNC/FLOOR) fails the node with PyTorch's
 * message, "ZeroDivisionError" (a RuntimeError in Python): the loops store 0
 * and flag it, and the kernel returns the error once they are done (the
 * stream keeps it for the next synchronize, as for a bad index). A zero
 * scalar divisor fails before any work. INT_MIN / -1 wraps. */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "kernels/cvt.h"
#include "kernels/isa.h"
#include "kernels/iter.h"
#include "kernels/kernels.h"

/* DIVT16 / DIVF16: trunc / floor division of two bf16 or fp16 tensors with
 * every intermediate rounded to that dtype, as PyTorch's CPU kernels compute
 * them (in the tensors' own type, not in float: one bf16 quotient in six
 * rounds up to the next integer before the trunc). A one-element divisor
 * takes PyTorch's float path instead, which DIVT / DIVF are. */
typedef enum {
  EW_ADD, EW_ADDA, EW_MUL, EW_DIV, EW_DIVT, EW_DIVF, EW_DIVT16, EW_DIVF16, EW_RELU, EW_NOPS
} ew_op_t;

typedef struct ew_ctx ew_ctx_t;
typedef void (*bin_fn)(char *o, int64_t so, const char *a, int64_t sa, const char *b, int64_t sb,
                       int64_t n, const ew_ctx_t *c);

struct ew_ctx {
  bin_fn fn;
  hpu_dtype_t cdt;
  hpu_dtype_t dto, dta, dtb;
  int has_b; /* operand 2 of the iterator is the second input */
  int stream; /* float32 ADD/ADDA/MUL with an output far larger than the cache: the ISA
              * of the non-temporal store loop, else 0 */
  ew_op_t op;
  float alpha_F, bs_F;
  double alpha_D, bs_D;
  int64_t alpha_I, bs_I;
  atomic_int *zero_div; /* set by an integer division by zero */
};

/* Scalar math -------------------------------------------------------------- */

static inline double div_floor_D(double a, double b) {
  if (b == 0) return a / b;
  double mod = fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1.0;
  if (div == 0) return copysign(0.0, a / b);
  double fl = floor(div);
  if (div - fl > 0.5) fl += 1.0;
  return fl;
}

/* Trunc and floor division in float with every step rounded to dt (for
 * float32, hpu_round_to is the identity and the steps are plain float math;
 * fmod is exact, so it needs no rounding). */
static inline float div_trunc_F(float a, float b, hpu_dtype_t dt) {
  return truncf(hpu_round_to(a / b, dt));
}

static inline float div_floor_F(float a, float b, hpu_dtype_t dt) {
  if (b == 0) return hpu_round_to(a / b, dt);
  float mod = fmodf(a, b);
  float div = hpu_round_to(hpu_round_to(a - mod, dt) / b, dt);
  if (mod != 0 && (b < 0) != (mod < 0)) div = hpu_round_to(div - 1.0f, dt);
  if (div == 0) return copysignf(0.0f, hpu_round_to(a / b, dt));
  float fl = floorf(div);
  if (hpu_round_to(div - fl, dt) > 0.5f) fl = hpu_round_to(fl + 1.0f, dt);
  return fl;
}

static inline int64_t div_by_zero_I(atomic_int *flag) {
  atomic_store_explicit(flag, 1, memory_order_relaxed); /* read after the loops joined */
  return 0;
}

static inline int64_t div_trunc_I(int64_t a, int64_t b, atomic_int *zero) {
  if (b == 0) return div_by_zero_I(zero);
  if (b == -1) return (int64_t)(0 - (uint64_t)a);
  return a / b;
}

static inline int64_t div_floor_I(int64_t a, int64_t b, atomic_int *zero) {
  if (b == 0) return div_by_zero_I(zero);
  if (b == -1) return (int64_t)(0 - (uint64_t)a);
  int64_t q = a / b, r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}

#define OP_F_ADD(x, y, al) ((x) + (y))
#define OP_F_ADDA(x, y, al) fmaf((y), (al), (x))
#define OP_F_MUL(x, y, al) ((x) * (y))
#define OP_F_DIV(x, y, al) ((x) / (y))
#define OP_F_DIVT(x, y, al) div_trunc_F((x), (y), HPU_FLOAT32)
#define OP_F_DIVF(x, y, al) div_floor_F((x), (y), HPU_FLOAT32)
/* c is the loop's ew_ctx_t, in scope in both loop bodies */
#define OP_F_DIVT16(x, y, al) div_trunc_F((x), (y), c->cdt)
#define OP_F_DIVF16(x, y, al) div_floor_F((x), (y), c->cdt)
#define OP_F_RELU(x, y, al) ((void)(y), (x) < 0 ? 0.0f : (x))

#define OP_D_ADD(x, y, al) ((x) + (y))
#define OP_D_ADDA(x, y, al) fma((y), (al), (x))
#define OP_D_MUL(x, y, al) ((x) * (y))
#define OP_D_DIV(x, y, al) ((x) / (y))
#define OP_D_DIVT(x, y, al) trunc((x) / (y))
#define OP_D_DIVF(x, y, al) div_floor_D((x), (y))
#define OP_D_DIVT16 OP_D_DIVT /* never chosen: only bf16 / fp16 compute */
#define OP_D_DIVF16 OP_D_DIVF
#define OP_D_RELU(x, y, al) ((void)(y), (x) < 0 ? 0.0 : (x))

#define OP_I_ADD(x, y, al) ((int64_t)((uint64_t)(x) + (uint64_t)(y)))
#define OP_I_ADDA(x, y, al) ((int64_t)((uint64_t)(x) + (uint64_t)(al) * (uint64_t)(y)))
#define OP_I_MUL(x, y, al) ((int64_t)((uint64_t)(x) * (uint64_t)(y)))
#define OP_I_DIV(x, y, al) div_trunc_I((x), (y), c->zero_div) /* rejected by validate */
#define OP_I_DIVT(x, y, al) div_trunc_I((x), (y), c->zero_div)
#define OP_I_DIVF(x, y, al) div_floor_I((x), (y), c->zero_div)
#define OP_I_DIVT16 OP_I_DIVT
#define OP_I_DIVF16 OP_I_DIVF
#define OP_I_RELU(x, y, al) ((void)(y), (x) < 0 ? 0 : (x))

#define FOR_EACH_OP(X, ...) \
  X(ADD, __VA_ARGS__) X(ADDA, __VA_ARGS__) X(MUL, __VA_ARGS__) X(DIV, __VA_ARGS__) \
  X(DIVT, __VA_ARGS__) X(DIVF, __VA_ARGS__) X(DIVT16, __VA_ARGS__) X(DIVF16, __VA_ARGS__) \
  X(RELU, __VA_ARGS__)

/* Typed loops: in, out and compute dtypes are all T. --------------------- */

#define IDENT(x) (x)
#define LD_I(x) ((int64_t)(x))

#define DEF_TYPED(OPN, TN, T, W, FAM, LD, ST, ISA)                                         \
  static HPU_ATTR_##ISA void typed_##TN##_##OPN##_##ISA(                                   \
      char *o, int64_t so, const char *a, int64_t sa, const char *b, int64_t sb, int64_t n, \
      const ew_ctx_t *c) {                                                                 \
    const W al = c->alpha_##FAM;                                                           \
    const int64_t es = (int64_t)sizeof(T);                                                 \
    (void)al;                                                                              \
    if (b == NULL || sb == 0) {                                                            \
      const W y = b ? LD(*(const T *)b) : c->bs_##FAM;                                     \
      if (so == es && sa == es) {                                                          \
        T *po = (T *)o;                                                                    \
        const T *pa = (const T *)a;                                                        \
        _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) {                             \
          W x = LD(pa[i]);                                                                 \
          po[i] = ST(OP_##FAM##_##OPN(x, y, al));                                          \
        }                                                                                  \
      } else {                                                                             \
        for (int64_t i = 0; i < n; i++) {                                                  \
          W x = LD(*(const T *)(a + i * sa));                                              \
          *(T *)(o + i * so) = ST(OP_##FAM##_##OPN(x, y, al));                             \
        }                                                                                  \
      }                                                                                    \
    } else if (so == es && sa == es && sb == es) {                                         \
      T *po = (T *)o;                                                                      \
      const T *pa = (const T *)a, *pb = (const T *)b;                                      \
      _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) {                               \
        W x = LD(pa[i]), y = LD(pb[i]);                                                    \
        po[i] = ST(OP_##FAM##_##OPN(x, y, al));                                            \
      }                                                                                    \
    } else if (so == es && sa == 0 && sb == es) {                                          \
      T *po = (T *)o;                                                                      \
      const T *pb = (const T *)b;                                                          \
      const W x = LD(*(const T *)a);                                                       \
      _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) {                               \
        W y = LD(pb[i]);                                                                   \
        po[i] = ST(OP_##FAM##_##OPN(x, y, al));                                            \
      }                                                                                    \
    } else {                                                                               \
      for (int64_t i = 0; i < n; i++) {                                                    \
        W x = LD(*(const T *)(a + i * sa)), y = LD(*(const T *)(b + i * sb));              \
        *(T *)(o + i * so) = ST(OP_##FAM##_##OPN(x, y, al));                               \
      }                                                                                    \
    }                                                                                      \
  }

#define TYPED_TABLE_ENTRY(OPN, TN, ISA) typed_##TN##_##OPN##_##ISA,
#define DEF_TYPED_SET(TN, T, W, FAM, LD, ST, ISA)                \
  FOR_EACH_OP(DEF_TYPED, TN, T, W, FAM, LD, ST, ISA)             \
  static const bin_fn typed_##TN##_##ISA[EW_NOPS] = {FOR_EACH_OP(TYPED_TABLE_ENTRY, TN, ISA)};

#define ST_I32(v) ((int32_t)(v))
DEF_TYPED_SET(f32, float, float, F, IDENT, IDENT, generic)
DEF_TYPED_SET(bf16, uint16_t, float, F, hpu_cvt_bf16_f32, hpu_cvt_f32_bf16, generic)
DEF_TYPED_SET(f16, uint16_t, float, F, hpu_cvt_half_f32, hpu_cvt_f32_half, generic)
DEF_TYPED_SET(f64, double, double, D, IDENT, IDENT, generic)
DEF_TYPED_SET(i64, int64_t, int64_t, I, LD_I, IDENT, generic)
DEF_TYPED_SET(i32, int32_t, int64_t, I, LD_I, ST_I32, generic)
#if HPU_HAVE_ISA_CLONES
DEF_TYPED_SET(f32, float, float, F, IDENT, IDENT, avx2)
DEF_TYPED_SET(bf16, uint16_t, float, F, hpu_cvt_bf16_f32, hpu_cvt_f32_bf16, avx2)
DEF_TYPED_SET(f32, float, float, F, IDENT, IDENT, avx512)
DEF_TYPED_SET(bf16, uint16_t, float, F, hpu_cvt_bf16_f32, hpu_cvt_f32_bf16, avx512)
#endif

/* Generic loops: any dtypes. Operands are converted chunk by chunk into
 * compute-family buffers (one dtype switch per chunk, not per element), the
 * op runs on the buffers, and the result is converted back. ---------------- */

#define CHUNK 256

/* Outputs from this size up are written with non-temporal stores (with the
 * inputs, the op then touches over 3x this: beyond a 32 MiB L3). */
#define STREAM_MIN_BYTES (16ll << 20)

#define LOAD_CASES(W, CONV)                                                        \
  case HPU_BOOL: LOADT(uint8_t, (W)(*(const uint8_t *)q != 0))                    \
  case HPU_UINT8: LOADT(uint8_t, (W)v)                                             \
  case HPU_INT8: LOADT(int8_t, (W)v)                                               \
  case HPU_INT16: LOADT(int16_t, (W)v)                                             \
  case HPU_INT32: LOADT(int32_t, (W)v)                                             \
  case HPU_INT64: LOADT(int64_t, (W)v)                                             \
  case HPU_FLOAT16: LOADT(uint16_t, CONV(hpu_cvt_half_f32(v)))                     \
  case HPU_BFLOAT16: LOADT(uint16_t, CONV(hpu_cvt_bf16_f32(v)))                    \
  case HPU_FLOAT32: LOADT(float, CONV(v))                                          \
  case HPU_FLOAT64: LOADT(double, CONV(v))                                         \
  default: break;

#define LOADT(T, EXPR)                                                             \
  for (int64_t i = 0; i < n; i++) {                                                \
    const char *q = p + i * s;                                                     \
    T v = *(const T *)q;                                                           \
    (void)v;                                                                       \
    dst[i] = EXPR;                                                                 \
  }                                                                                \
  break;

#define CONV_F(x) ((float)(x))
#define CONV_D(x) ((double)(x))
#define CONV_I(x) hpu_f2i(x)

static void load_F(float *dst, const char *p, int64_t s, int64_t n, hpu_dtype_t dt,
                   hpu_dtype_t cdt) {
  switch (dt) { LOAD_CASES(float, CONV_F) }
  if (dt != cdt && (cdt == HPU_BFLOAT16 || cdt == HPU_FLOAT16))
    for (int64_t i = 0; i < n; i++) dst[i] = hpu_round_to(dst[i], cdt);
}

static void load_D(double *dst, const char *p, int64_t s, int64_t n, hpu_dtype_t dt,
                   hpu_dtype_t cdt) {
  (void)cdt;
  switch (dt) { LOAD_CASES(double, CONV_D) }
}

static void load_I(int64_t *dst, const char *p, int64_t s, int64_t n, hpu_dtype_t dt,
                   hpu_dtype_t cdt) {
  switch (dt) { LOAD_CASES(int64_t, CONV_I) }
  if (dt != cdt)
    for (int64_t i = 0; i < n; i++) dst[i] = hpu_narrow_int(dst[i], cdt);
}
#undef LOADT

#define STORET(T, EXPR)                                                            \
  for (int64_t i = 0; i < n; i++) *(T *)(p + i * s) = (EXPR);                      \
  break;
#define STORE_FLOATS(x)                                                            \
  case HPU_FLOAT16: STORET(uint16_t, hpu_cvt_f32_half((float)(x)))                 \
  case HPU_BFLOAT16: STORET(uint16_t, hpu_cvt_f32_bf16((float)(x)))                \
  case HPU_FLOAT32: STORET(float, (float)(x))                                      \
  case HPU_FLOAT64: STORET(double, (double)(x))

static void store_F(char *p, int64_t s, float *src, int64_t n, hpu_dtype_t dt, hpu_dtype_t cdt) {
  if (cdt == HPU_BFLOAT16 || cdt == HPU_FLOAT16)
    for (int64_t i = 0; i < n; i++) src[i] = hpu_round_to(src[i], cdt);
  switch (dt) {
    case HPU_BOOL: STORET(uint8_t, src[i] != 0)
    case HPU_UINT8: STORET(uint8_t, (uint8_t)hpu_f2i(src[i]))
    case HPU_INT8: STORET(int8_t, (int8_t)hpu_f2i(src[i]))
    case HPU_INT16: STORET(int16_t, (int16_t)hpu_f2i(src[i]))
    case HPU_INT32: STORET(int32_t, (int32_t)hpu_f2i(src[i]))
    case HPU_INT64: STORET(int64_t, hpu_f2i(src[i]))
    STORE_FLOATS(src[i])
    default: break;
  }
}

static void store_D(char *p, int64_t s, double *src, int64_t n, hpu_dtype_t dt, hpu_dtype_t cdt) {
  (void)cdt;
  switch (dt) {
    case HPU_BOOL: STORET(uint8_t, src[i] != 0)
    case HPU_UINT8: STORET(uint8_t, (uint8_t)hpu_f2i(src[i]))
    case HPU_INT8: STORET(int8_t, (int8_t)hpu_f2i(src[i]))
    case HPU_INT16: STORET(int16_t, (int16_t)hpu_f2i(src[i]))
    case HPU_INT32: STORET(int32_t, (int32_t)hpu_f2i(src[i]))
    case HPU_INT64: STORET(int64_t, hpu_f2i(src[i]))
    STORE_FLOATS(src[i])
    default: break;
  }
}

static void store_I(char *p, int64_t s, int64_t *src, int64_t n, hpu_dtype_t dt, hpu_dtype_t cdt) {
  if (cdt != HPU_INT64)
    for (int64_t i = 0; i < n; i++) src[i] = hpu_narrow_int(src[i], cdt);
  switch (dt) {
    case HPU_BOOL: STORET(uint8_t, src[i] != 0)
    case HPU_UINT8: STORET(uint8_t, (uint8_t)src[i])
    case HPU_INT8: STORET(int8_t, (int8_t)src[i])
    case HPU_INT16: STORET(int16_t, (int16_t)src[i])
    case HPU_INT32: STORET(int32_t, (int32_t)src[i])
    case HPU_INT64: STORET(int64_t, src[i])
    STORE_FLOATS(src[i])
    default: break;
  }
}
#undef STORET

#define DEF_GENERIC(OPN, FAM, W)                                                          \
  static void generic_##FAM##_##OPN(char *o, int64_t so, const char *a, int64_t sa,       \
                                    const char *b, int64_t sb, int64_t n,                 \
                                    const ew_ctx_t *c) {                                  \
    W x[CHUNK], y[CHUNK];                                                                 \
    const W al = c->alpha_##FAM;                                                          \
    (void)al;                                                                             \
    for (int64_t done = 0; done < n; done += CHUNK) {                                     \
      int64_t m = n - done < CHUNK ? n - done : CHUNK;                                    \
      load_##FAM(x, a + done * sa, sa, m, c->dta, c->cdt);                                \
      if (b) load_##FAM(y, b + done * sb, sb, m, c->dtb, c->cdt);                         \
      else for (int64_t i = 0; i < m; i++) y[i] = c->bs_##FAM;                            \
      for (int64_t i = 0; i < m; i++) x[i] = OP_##FAM##_##OPN(x[i], y[i], al);            \
      store_##FAM(o + done * so, so, x, m, c->dto, c->cdt);                               \
    }                                                                                     \
  }
#define GENERIC_TABLE_ENTRY(OPN, FAM) generic_##FAM##_##OPN,
#define DEF_GENERIC_SET(FAM, W) \
  FOR_EACH_OP(DEF_GENERIC, FAM, W) \
  static const bin_fn generic_##FAM[EW_NOPS] = {FOR_EACH_OP(GENERIC_TABLE_ENTRY, FAM)};

DEF_GENERIC_SET(F, float)
DEF_GENERIC_SET(D, double)
DEF_GENERIC_SET(I, int64_t)

/* Setup ---------------------------------------------------------------------- */

typedef enum { FAM_F, FAM_D, FAM_I } fam_t;

static fam_t family_of(hpu_dtype_t cdt) {
  if (cdt == HPU_FLOAT64) return FAM_D;
  return hpu_dtype_is_floating(cdt) ? FAM_F : FAM_I;
}

static bin_fn pick_typed(hpu_dtype_t t, ew_op_t op) {
#if HPU_HAVE_ISA_CLONES
  hpu_isa_t isa = hpu_kernels_isa();
  if (t == HPU_FLOAT32 && isa == HPU_ISA_AVX512) return typed_f32_avx512[op];
  if (t == HPU_FLOAT32 && isa == HPU_ISA_AVX2) return typed_f32_avx2[op];
  if (t == HPU_BFLOAT16 && isa == HPU_ISA_AVX512) return typed_bf16_avx512[op];
  if (t == HPU_BFLOAT16 && isa == HPU_ISA_AVX2) return typed_bf16_avx2[op];
#endif
  switch (t) {
    case HPU_FLOAT32: return typed_f32_generic[op];
    case HPU_BFLOAT16: return typed_bf16_generic[op];
    case HPU_FLOAT16: return typed_f16_generic[op];
    case HPU_FLOAT64: return typed_f64_generic[op];
    case HPU_INT64: return typed_i64_generic[op];
    case HPU_INT32: return typed_i32_generic[op];
    default: return NULL;
  }
}

static void set_alpha(ew_ctx_t *c, hpu_scalar_t alpha, int negate) {
  double ad = hpu_scalar_as_double(alpha);
  int64_t ai = alpha.kind == HPU_SCALAR_FLOAT ? hpu_f2i(alpha.f) : alpha.i;
  float af = alpha.kind == HPU_SCALAR_FLOAT ? (float)alpha.f : (float)alpha.i;
  af = hpu_round_to(af, c->cdt);
  if (negate) {
    ad = -ad;
    af = -af;
    ai = (int64_t)(0 - (uint64_t)ai);
  }
  c->alpha_D = ad;
  c->alpha_F = af;
  c->alpha_I = hpu_narrow_int(ai, c->cdt);
}

#if HPU_HAVE_ISA_CLONES
/* Contiguous float32 add / mul with non-temporal stores: for outputs much
 * larger than the last-level cache a normal store first reads the line
 * (read for ownership), so a + b -> out moves 16 bytes per element instead
 * of 12. Same arithmetic as the typed loops (fmaf for alpha). One body per
 * ISA: V is the vector type, W its lanes, P the intrinsics' prefix. */
#define DEF_STREAM_F32(ISA, V, W, P)                                                   \
  static HPU_ATTR_##ISA void stream_f32_##ISA(float *o, const float *a, const float *b, \
                                              float bs, int64_t n, ew_op_t op, float al) { \
    int64_t i = 0;                                                                     \
    for (; i < n && ((uintptr_t)(o + i) & 63); i++) o[i] = stream_scalar(a, b, bs, i, op, al); \
    const V vbs = P##_set1_ps(bs), val = P##_set1_ps(al);                              \
    for (; i + W <= n; i += W) {                                                       \
      V x = P##_loadu_ps(a + i), y = b ? P##_loadu_ps(b + i) : vbs;                    \
      V r = op == EW_MUL ? P##_mul_ps(x, y) : op == EW_ADD ? P##_add_ps(x, y)          \
                                                           : P##_fmadd_ps(y, val, x);  \
      P##_stream_ps(o + i, r);                                                         \
    }                                                                                  \
    for (; i < n; i++) o[i] = stream_scalar(a, b, bs, i, op, al);                      \
    _mm_sfence(); /* the streamed lines are visible before the chunk reports done */   \
  }

static inline float stream_scalar(const float *a, const float *b, float bs, int64_t k, ew_op_t op,
                                  float al) {
  float x = a[k], y = b ? b[k] : bs;
  return op == EW_MUL ? x * y : op == EW_ADD ? x + y : fmaf(y, al, x);
}

DEF_STREAM_F32(avx512, __m512, 16, _mm512)
DEF_STREAM_F32(avx2, __m256, 8, _mm256)
#endif

static void binary_loop(void *vctx, char **data, const int64_t *st, int64_t n, int64_t index) {
  (void)index;
  const ew_ctx_t *c = vctx;
#if HPU_HAVE_ISA_CLONES
  if (c->stream && st[0] == 4 && st[1] == 4 && (!c->has_b || st[2] == 4)) {
    (c->stream == HPU_ISA_AVX512 ? stream_f32_avx512 : stream_f32_avx2)(
        (float *)data[0], (const float *)data[1], c->has_b ? (const float *)data[2] : NULL, c->bs_F,
        n, c->op, c->alpha_F);
    return;
  }
#endif
  c->fn(data[0], st[0], data[1], st[1], c->has_b ? data[2] : NULL, c->has_b ? st[2] : 0, n, c);
}

/* In place (x.add_(y)), the lines were just read: a normal store finds them
 * in the cache, and a non-temporal one only evicts them (mul_ at 16M was
 * slower with streaming stores). */
static inline int in_place(const hpu_tensor_t *out, const hpu_tensor_t *const ins[2]) {
  const void *o = hpu_tensor_data(out);
  return o == hpu_tensor_data(ins[0]) || (ins[1] && o == hpu_tensor_data(ins[1]));
}

static void run(const hpu_node_t *node, ew_op_t op, int b_tensor, ew_ctx_t *c) {
  const hpu_tensor_t *out = &node->outputs[0];
  const hpu_tensor_t *ins[2] = {&node->inputs[0], b_tensor ? &node->inputs[1] : NULL};
  c->cdt = node->compute_dtype;
  c->dto = out->dtype;
  c->dta = ins[0]->dtype;
  c->dtb = b_tensor ? ins[1]->dtype : c->cdt;
  c->has_b = b_tensor;
  if (c->dto == c->cdt && c->dta == c->cdt && c->dtb == c->cdt) c->fn = pick_typed(c->cdt, op);
  if (!c->fn) {
    switch (family_of(c->cdt)) {
      case FAM_F: c->fn = generic_F[op]; break;
      case FAM_D: c->fn = generic_D[op]; break;
      default: c->fn = generic_I[op]; break;
    }
  }
  c->op = op;
#if HPU_HAVE_ISA_CLONES
  if (c->cdt == HPU_FLOAT32 && c->dto == HPU_FLOAT32 && c->dta == HPU_FLOAT32 &&
      c->dtb == HPU_FLOAT32 && (op == EW_ADD || op == EW_ADDA || op == EW_MUL) &&
      hpu_kernels_isa() >= HPU_ISA_AVX2 && hpu_tensor_numel(out) * 4 >= STREAM_MIN_BYTES &&
      !in_place(out, ins))
    c->stream = hpu_kernels_isa() >= HPU_ISA_AVX512 ? HPU_ISA_AVX512 : HPU_ISA_AVX2;
#endif
  hpu_iter_t it;
  hpu_iter_build(&it, out, ins, 2, 0);
  hpu_iter_for_each(&it, binary_loop, c, HPU_GRAIN);
}

hpu_status_t hpu_kernel_binary(const hpu_node_t *node) {
  ew_ctx_t c = {0};
  atomic_int zero_div = 0;
  c.zero_div = &zero_div;
  c.cdt = node->compute_dtype;
  ew_op_t op;
  switch (node->op) {
    case HPU_OP_ADD: case HPU_OP_SUB: op = EW_ADDA; break;
    case HPU_OP_MUL: op = EW_MUL; break;
    default:
      op = node->params.binary.rounding == HPU_ROUND_TRUNC   ? EW_DIVT
           : node->params.binary.rounding == HPU_ROUND_FLOOR ? EW_DIVF
                                                              : EW_DIV;
      break;
  }
  if (op == EW_ADDA) {
    set_alpha(&c, node->params.binary.alpha, node->op == HPU_OP_SUB);
    fam_t f = family_of(c.cdt);
    if ((f == FAM_F && c.alpha_F == 1.0f) || (f == FAM_D && c.alpha_D == 1.0) ||
        (f == FAM_I && c.alpha_I == 1))
      op = EW_ADD;
  }
  /* The second operand is a scalar when given as params.binary.other or as a
   * one-element tensor: read it once here. */
  int b_tensor = node->num_inputs == 2;
  int reduced = c.cdt == HPU_BFLOAT16 || c.cdt == HPU_FLOAT16;
  int opmath = (op == EW_MUL || op >= EW_DIV) && reduced;
  if (b_tensor && hpu_tensor_numel(&node->inputs[1]) == 1) {
    const hpu_tensor_t *b = &node->inputs[1];
    const char *p = (const char *)hpu_tensor_data(b);
    float f = hpu_load_f32(p, b->dtype);
    c.bs_F = opmath ? f : hpu_round_to(f, c.cdt);
    c.bs_D = hpu_load_f64(p, b->dtype);
    c.bs_I = hpu_narrow_int(hpu_load_i64(p, b->dtype), c.cdt);
    b_tensor = 0;
  } else if (b_tensor && reduced && (op == EW_DIVT || op == EW_DIVF)) {
    op = op == EW_DIVT ? EW_DIVT16 : EW_DIVF16;
  } else if (!b_tensor) {
    hpu_scalar_t s = node->params.binary.other;
    float f = s.kind == HPU_SCALAR_FLOAT ? (float)s.f : (float)s.i;
    c.bs_F = opmath ? f : hpu_round_to(f, c.cdt);
    c.bs_D = hpu_scalar_as_double(s);
    c.bs_I = hpu_narrow_int(s.kind == HPU_SCALAR_FLOAT ? hpu_f2i(s.f) : s.i, c.cdt);
  }
  int int_div = family_of(c.cdt) == FAM_I && op >= EW_DIV && op <= EW_DIVF16;
  if (int_div && !b_tensor && c.bs_I == 0) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "ZeroDivisionError");
  run(node, op, b_tensor, &c);
  if (int_div && atomic_load(&zero_div)) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "ZeroDivisionError");
  return HPU_SUCCESS;
}

void hpu_kernel_relu(const hpu_node_t *node) {
  ew_ctx_t c = {0};
  run(node, EW_RELU, 0, &c);
}
