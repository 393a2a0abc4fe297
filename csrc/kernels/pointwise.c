/* The pointwise op family: validation and execution of the codes listed in
 * hpu/ops_pointwise.def (the fused optimizer steps live in pw_optim.c).
 *
 * One engine runs every elementwise op. The math runs in one of three
 * families picked by the compute dtype, as in binary.c:
 *   F  float   (float32; bfloat16/float16 computed in float, rounded once)
 *   D  double  (float64)
 *   I  int64   (bool and integers; wrap-around, narrowed on store)
 * Each op is an expression of its math operands a, b, c (E<fam>_<KERNEL>
 * below), compiled into a loop over contiguous family-typed arrays; the float
 * loops also get AVX2 / AVX-512 clones, picked at run time. The iterator
 * hands runs of elements with per-operand strides; each run is cut into
 * chunks, operands whose dtype is not the family's native type (or that are
 * strided) are converted into chunk buffers, the op's loop runs, and the
 * result is converted to the output dtype. Contiguous operands of the native
 * type (float32 data with a float32 compute dtype, ...) are used in place,
 * so contiguous float32 ops are a single pass over memory. */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "hpu/op.h"
#include "hpu/status.h"
#include "kernels/cvt.h"
#include "kernels/isa.h"
#include "kernels/iter.h"
#include "kernels/kernels.h"
#include "kernels/pw.h"
#include "kernels/vexp.h"
#include "kernels/pw_math.h"
#if HPU_HAVE_ISA_CLONES
#include <immintrin.h>
#endif

#define INVALID HPU_ERROR_INVALID_ARGUMENT
#define CHUNK 512

/* Kernels (one op may have several: variants picked by params). ---------- */

/* Inverse and hyperbolic trigonometry, xlogy and the losses' elementwise steps. */
#define PW_TRIG(X)                                                                           \
  X(ASIN) X(ACOS) X(ATAN) X(SINH) X(COSH) X(ASINH) X(ACOSH) X(ATANH) X(XLOGY) X(SQUARED_DIFF) \
  X(SMOOTH_L1) X(HUBER) X(SMOOTH_L1_BACKWARD) X(HUBER_BACKWARD) X(BCE_BACKWARD)

/* Kernels that round a step to the compute dtype as PyTorch's CPU does for
 * bf16 / fp16, one per dtype (kernel_of picks by the node's compute dtype)
 * so that the float32 one stays free of the rounding and vectorises: the
 * fp16 sigmoid backward (every step), log_sigmoid's backward (e^-|x|, the
 * CPU's buffer), xlogy (log y), mse's squared difference (x - y), bf16
 * huber, huber's and binary cross entropy's backwards and fp16 smooth_l1
 * (every step). Float kernels only (no float64 forms). */
#define PW_ROUNDED16(X)                                                                      \
  X(SIGMOID_BACKWARD_F16) X(LOG_SIGMOID_BACKWARD_BF16) X(LOG_SIGMOID_BACKWARD_F16)           \
  X(XLOGY_BF16) X(XLOGY_F16) X(SQUARED_DIFF_BF16) X(SQUARED_DIFF_F16) X(SMOOTH_L1_F16)       \
  X(HUBER_BF16) X(HUBER_BACKWARD_BF16) X(HUBER_BACKWARD_F16) X(BCE_BACKWARD_BF16)            \
  X(BCE_BACKWARD_F16)

/* The activations after hardtanh and their backwards (ELU's backward has
 * two kernels: from self, or from the forward's result). */
#define PW_ACTIVATIONS(X)                                                                    \
  X(ELU) X(SOFTPLUS) X(HARDSWISH) X(HARDSIGMOID) X(MISH) X(LOG_SIGMOID) X(ELU_BACKWARD)      \
  X(ELU_BACKWARD_RESULT) X(SOFTPLUS_BACKWARD) X(HARDSWISH_BACKWARD) X(HARDSIGMOID_BACKWARD)  \
  X(MISH_BACKWARD) X(LOG_SIGMOID_BACKWARD) X(SOFTSHRINK) X(HARDSHRINK) X(SHRINK_BACKWARD)     \
  X(GLU) X(GLU_BACKWARD)

#define PW_KERNELS(X)                                                                        \
  X(NEG) X(ABS) X(EXP) X(EXP2) X(LOG) X(LOG2) X(LOG10) X(LOG1P) X(EXPM1) X(SQRT) X(RSQRT)    \
  X(RECIPROCAL) X(SIN) X(COS) X(TAN) X(TANH) X(SIGMOID) X(ERF) X(SILU) X(GELU) X(GELU_TANH) \
  X(FLOOR) X(CEIL) X(ROUND) X(TRUNC) X(SIGN) X(LOGICAL_NOT) X(BITWISE_NOT) X(ISNAN)          \
  X(NAN_TO_NUM) X(LEAKY_RELU) X(THRESHOLD) X(HARDTANH) X(MAXIMUM) X(MINIMUM) X(REMAINDER)    \
  X(FMOD) X(EQ) X(NE) X(LT) X(LE) X(GT) X(GE) X(LOGICAL_AND) X(LOGICAL_OR) X(LOGICAL_XOR)    \
  X(BITWISE_AND) X(BITWISE_OR) X(BITWISE_XOR) X(ATAN2) X(POW) X(POW_SQ) X(POW_CUBE)          \
  X(POW_SQRT) X(POW_RSQRT) X(POW_RECIP) X(POW_INVSQ) X(GELU_BACKWARD) X(GELU_TANH_BACKWARD)  \
  X(TANH_BACKWARD) X(SIGMOID_BACKWARD) X(SILU_BACKWARD) X(THRESHOLD_BACKWARD)                \
  X(LEAKY_RELU_BACKWARD) X(HARDTANH_BACKWARD) X(CLAMP) X(CLAMP_MIN) X(CLAMP_MAX) X(WHERE)    \
  X(LERP) X(ADDCMUL) X(ADDCDIV) X(ARANGE) PW_ACTIVATIONS(X) PW_TRIG(X) PW_ROUNDED16(X)

#define KENUM(N) K_##N,
typedef enum { PW_KERNELS(KENUM) K_COUNT } pw_kernel_t;

/* Float-family expressions: a, b, c operands; p0..p5 params; i element index. */
#define SQRT1_2F 0.707106781186547524f
#define GELU_BETA_TANH 0.7978845608028654f /* sqrt(2) * 2/sqrt(pi) * 0.5 */
#define GELU_BETA_ERF 0.3989422804014327f  /* 2/sqrt(pi) * sqrt(1/2) * 0.5 */
#define GELU_KAPPA 0.044715f

#define EF_NEG(a, b, c) (-(a))
#define EF_ABS(a, b, c) fabsf(a)
#define EF_EXP(a, b, c) pw_expf(a)
#define EF_EXP2(a, b, c) exp2f(a)
#define EF_LOG(a, b, c) pw_logf(a)
#define EF_LOG2(a, b, c) log2f(a)
#define EF_LOG10(a, b, c) log10f(a)
#define EF_LOG1P(a, b, c) log1pf(a)
#define EF_EXPM1(a, b, c) expm1f(a)
#define EF_SQRT(a, b, c) sqrtf(a)
#define EF_RSQRT(a, b, c) (1.0f / sqrtf(a))
#define EF_RECIPROCAL(a, b, c) (1.0f / (a))
#define EF_SIN(a, b, c) sinf(a)
#define EF_COS(a, b, c) cosf(a)
#define EF_TAN(a, b, c) tanf(a)
#define EF_TANH(a, b, c) pw_tanhf(a)
#define EF_SIGMOID(a, b, c) pw_sigmoidf(a)
#define EF_ERF(a, b, c) erff(a)
#define EF_SILU(a, b, c) ((a) / (1.0f + pw_expf(-(a))))
#define EF_GELU(a, b, c) pw_gelu_erf(a)
#define EF_GELU_TANH(a, b, c) \
  ((0.5f * (a)) * (1.0f + pw_tanhf(GELU_BETA_TANH * ((a) + GELU_KAPPA * ((a) * (a) * (a))))))
#define EF_FLOOR(a, b, c) floorf(a)
#define EF_CEIL(a, b, c) ceilf(a)
#define EF_ROUND(a, b, c) rintf(a)
#define EF_TRUNC(a, b, c) truncf(a)
#define EF_SIGN(a, b, c) ((float)(0.0f < (a)) - (float)((a) < 0.0f))
#define EF_LOGICAL_NOT(a, b, c) ((a) == 0 ? 1.0f : 0.0f)
#define EF_ISNAN(a, b, c) ((a) != (a) ? 1.0f : 0.0f)
#define EF_NAN_TO_NUM(a, b, c) \
  ((a) != (a) ? p0 : (a) == INFINITY ? p1 : (a) == -INFINITY ? p2 : (a))
#define EF_LEAKY_RELU(a, b, c) ((a) > 0 ? (a) : (a) * p0)
#define EF_THRESHOLD(a, b, c) ((a) <= p0 ? p1 : (a))
#define EF_HARDTANH(a, b, c) ((a) != (a) ? (a) : (a) < p0 ? p0 : (a) > p1 ? p1 : (a))
#define EF_MAXIMUM(a, b, c) ((a) != (a) || (b) != (b) ? (a) + (b) : (a) > (b) ? (a) : (b))
#define EF_MINIMUM(a, b, c) ((a) != (a) || (b) != (b) ? (a) + (b) : (a) < (b) ? (a) : (b))
#define EF_REMAINDER(a, b, c) pw_remainderf(a, b)
#define EF_FMOD(a, b, c) fmodf(a, b)
#define EF_EQ(a, b, c) ((a) == (b) ? 1.0f : 0.0f)
#define EF_NE(a, b, c) ((a) != (b) ? 1.0f : 0.0f)
#define EF_LT(a, b, c) ((a) < (b) ? 1.0f : 0.0f)
#define EF_LE(a, b, c) ((a) <= (b) ? 1.0f : 0.0f)
#define EF_GT(a, b, c) ((a) > (b) ? 1.0f : 0.0f)
#define EF_GE(a, b, c) ((a) >= (b) ? 1.0f : 0.0f)
#define EF_LOGICAL_AND(a, b, c) ((a) != 0 && (b) != 0 ? 1.0f : 0.0f)
#define EF_LOGICAL_OR(a, b, c) ((a) != 0 || (b) != 0 ? 1.0f : 0.0f)
#define EF_LOGICAL_XOR(a, b, c) (((a) != 0) != ((b) != 0) ? 1.0f : 0.0f)
#define EF_ATAN2(a, b, c) atan2f(a, b)
#define EF_ASIN(a, b, c) asinf(a)
#define EF_ACOS(a, b, c) acosf(a)
#define EF_ATAN(a, b, c) atanf(a)
#define EF_SINH(a, b, c) pw_sinhf(a)
#define EF_COSH(a, b, c) pw_coshf(a)
#define EF_ASINH(a, b, c) asinhf(a)
#define EF_ACOSH(a, b, c) acoshf(a)
#define EF_ATANH(a, b, c) atanhf(a)
/* PyTorch's CPU: std::log of a bf16 / fp16 y is rounded to it */
#define XLOGY_(a, b, R) ((b) != (b) ? NAN : (a) == 0 ? 0.0f : (a) * R(logf(b)))
#define EF_XLOGY(a, b, c) XLOGY_(a, b, )
#define EF_XLOGY_BF16(a, b, c) XLOGY_(a, b, hpu_round_bf16)
#define EF_XLOGY_F16(a, b, c) XLOGY_(a, b, hpu_round_half)
/* PyTorch's CPU squares a bf16 / fp16 difference rounded to it */
#define EF_SQUARED_DIFF(a, b, c) (((a) - (b)) * ((a) - (b)))
#define EF_SQUARED_DIFF_BF16(a, b, c) pw_sq(hpu_round_bf16((a) - (b)))
#define EF_SQUARED_DIFF_F16(a, b, c) pw_sq(hpu_round_half((a) - (b)))
#define EF_POW(a, b, c) powf(a, b)
#define EF_POW_SQ(a, b, c) ((a) * (a))
#define EF_POW_CUBE(a, b, c) ((a) * (a) * (a))
#define EF_POW_SQRT(a, b, c) sqrtf(a)
#define EF_POW_RSQRT(a, b, c) (1.0f / sqrtf(a))
#define EF_POW_RECIP(a, b, c) (1.0f / (a))
#define EF_POW_INVSQ(a, b, c) (1.0f / ((a) * (a)))
#define EF_GELU_BACKWARD(a, b, c) pw_gelu_bwd(a, b)
#define EF_GELU_TANH_BACKWARD(a, b, c) pw_gelu_tanh_bwd(a, b)
#define EF_TANH_BACKWARD(a, b, c) ((a) * fmaf(-(b), (b), 1.0f)) /* as PyTorch's fnmadd */
#define EF_SIGMOID_BACKWARD(a, b, c) ((a) * (1.0f - (b)) * (b))
/* PyTorch's CPU computes the fp16 (not the bf16) one in fp16, rounding each step */
#define EF_SIGMOID_BACKWARD_F16(a, b, c) \
  hpu_round_half(hpu_round_half((a) * hpu_round_half(1.0f - (b))) * (b))
#define EF_SILU_BACKWARD(a, b, c) pw_silu_bwd(a, b)
#define EF_THRESHOLD_BACKWARD(a, b, c) ((b) <= p0 ? 0.0f : (a))
#define EF_LEAKY_RELU_BACKWARD(a, b, c) ((b) > 0 ? (a) : (a) * p0)
#define EF_HARDTANH_BACKWARD(a, b, c) ((b) <= p0 || (b) >= p1 ? 0.0f : (a))
#define EF_CLAMP(a, b, c) \
  ((a) != (a) || (b) != (b) || (c) != (c) ? (a) + (b) + (c) : pw_minf(pw_maxf(a, b), c))
#define EF_CLAMP_MIN(a, b, c) ((a) != (a) || (b) != (b) ? (a) + (b) : pw_maxf(a, b))
#define EF_CLAMP_MAX(a, b, c) ((a) != (a) || (c) != (c) ? (a) + (c) : pw_minf(a, c))
#define EF_WHERE(a, b, c) ((a) != 0 ? (b) : (c))
#define EF_LERP(a, b, c) \
  (fabsf(c) < 0.5f ? fmaf((c), (b) - (a), (a)) : fmaf((c) - 1.0f, (b) - (a), (b)))
#define EF_ADDCMUL(a, b, c) fmaf(p0 * (b), (c), (a)) /* PyTorch: fmadd(value * t1, t2, self) */
#define EF_ADDCDIV(a, b, c) ((a) + p0 * (b) / (c))
#define EF_ARANGE(a, b, c) (p0 + p1 * (float)(idx + i))
/* The activations as PyTorch's CPU kernels (Activation.cpp) write them,
 * operation for operation; bf16 / fp16 run them in float and round once. */
#define EF_ELU(a, b, c) ((a) <= 0 ? pw_expm1f((a) * p2) * (p0 * p1) : (a) * p1)
#define EF_SOFTPLUS(a, b, c) ((a) * p0 > p1 ? (a) : pw_log1pf(pw_expf((a) * p0)) / p0)
#define EF_HARDSWISH(a, b, c) ((a) * pw_minf(pw_maxf((a) + 3.0f, 0.0f), 6.0f) / 6.0f)
#define EF_HARDSIGMOID(a, b, c) (pw_minf(pw_maxf((a) + 3.0f, 0.0f), 6.0f) / 6.0f)
#define EF_MISH(a, b, c) ((a) * pw_tanhf(pw_log1pf(pw_expf(a))))
#define EF_LOG_SIGMOID(a, b, c) (pw_minf(a, 0.0f) - pw_log1pf(pw_expf(-fabsf(a))))
/* The backwards branch as PyTorch's vectorised loops do (its scalar tail
 * loop sends NaN and elu's 0 the other way) */
#define EF_ELU_BACKWARD(a, b, c) \
  ((b) > 0 ? (a) * p1 : (a) * p2 * (p0 * p1) * pw_expf((b) * p2))
#define EF_ELU_BACKWARD_RESULT(a, b, c) ((b) > 0 ? (a) * p1 : (a) * p2 * ((b) + p0 * p1))
#define EF_SOFTPLUS_BACKWARD(a, b, c) pw_softplus_bwd(a, b, p0, p1)
#define EF_HARDSWISH_BACKWARD(a, b, c) \
  ((b) <= -3.0f ? 0.0f : (b) >= 3.0f ? (a) : (a) * ((b) / 3.0f + 0.5f))
#define EF_HARDSIGMOID_BACKWARD(a, b, c) ((b) > -3.0f && (b) < 3.0f ? (a) * (1.0f / 6.0f) : 0.0f)
#define EF_MISH_BACKWARD(a, b, c) pw_mish_bwd(a, b)
#define EF_LOG_SIGMOID_BACKWARD(a, b, c) pw_log_sigmoid_bwd(a, b, 0)
#define EF_LOG_SIGMOID_BACKWARD_BF16(a, b, c) pw_log_sigmoid_bwd(a, b, 1)
#define EF_LOG_SIGMOID_BACKWARD_F16(a, b, c) pw_log_sigmoid_bwd(a, b, 2)
/* shrinks as the CPU's vector loops: NaN passes softshrink and stops both backwards */
#define EF_SOFTSHRINK(a, b, c) \
  ((a) > p0 ? (a) - p0 : (a) < -p0 ? (a) + p0 : (a) != (a) ? (a) : 0.0f)
#define EF_HARDSHRINK(a, b, c) ((a) >= -p0 && (a) <= p0 ? 0.0f : (a))
#define EF_SHRINK_BACKWARD(a, b, c) ((b) > p0 || (b) < -p0 ? (a) : 0.0f)
#define EF_GLU(a, b, c) ((a) * (1.0f / (1.0f + pw_expf(-(b)))))
#define EF_GLU_BACKWARD(a, b, c) ((1.0f - (a)) * (a) * (b) * (c))
/* The losses: R rounds each step to the compute dtype where PyTorch's CPU
 * runs Vectorized<bf16 / fp16> ops (nothing: float, rounded once) */
#define EF_SMOOTH_L1(a, b, c) pw_smooth_l1(a, b, p0, )
#define EF_SMOOTH_L1_F16(a, b, c) pw_smooth_l1(a, b, p0, hpu_round_half)
#define EF_HUBER(a, b, c) pw_huber(a, b, p0, )
#define EF_HUBER_BF16(a, b, c) pw_huber(a, b, p0, hpu_round_bf16)
#define EF_SMOOTH_L1_BACKWARD(a, b, c) pw_smooth_l1_bwd(a, b, c, p0, p1, )
#define EF_HUBER_BACKWARD(a, b, c) pw_huber_bwd(a, b, c, p0, p1, )
#define EF_HUBER_BACKWARD_BF16(a, b, c) pw_huber_bwd(a, b, c, p0, p1, hpu_round_bf16)
#define EF_HUBER_BACKWARD_F16(a, b, c) pw_huber_bwd(a, b, c, p0, p1, hpu_round_half)
#define EF_BCE_BACKWARD(a, b, c) pw_bce_bwd(a, b, c, )
#define EF_BCE_BACKWARD_BF16(a, b, c) pw_bce_bwd(a, b, c, hpu_round_bf16)
#define EF_BCE_BACKWARD_F16(a, b, c) pw_bce_bwd(a, b, c, hpu_round_half)
/* (macros, so that R may be empty: no call at all in the float kernels) */
#define pw_bce_bwd(x, y, g, R)                                                   \
  ({                                                                            \
    float den_ = R(R(1.0f - (x)) * (x)), eps_ = R(1e-12f);                      \
    R(R((g) * R((x) - (y))) / (den_ < eps_ ? eps_ : den_));                     \
  })
#define pw_smooth_l1(a, b, beta, R)                                              \
  ({                                                                            \
    float z_ = fabsf(R((a) - (b))), bt_ = R(beta);                              \
    z_ >= bt_ ? R(z_ - R(0.5f * bt_)) : R(R(R(0.5f * z_) * z_) / bt_);           \
  })
#define pw_huber(a, b, delta, R)                                                 \
  ({                                                                            \
    float z_ = fabsf(R((a) - (b))), d_ = R(delta);                              \
    z_ >= d_ ? R(d_ * R(z_ - R(0.5f * d_))) : R(R(0.5f * z_) * z_);              \
  })
#define pw_smooth_l1_bwd(x, y, g, beta, norm, R)                                 \
  ({                                                                            \
    float d_ = R((x) - (y)), bt_ = R(beta);                                     \
    float o_ = fabsf(d_) >= bt_ ? (d_ > 0 ? 1.0f : -1.0f) : R(d_ / bt_);        \
    R(R(R(norm) * o_) * (g));                                                   \
  })
#define pw_huber_bwd(x, y, g, delta, norm, R)                                    \
  ({                                                                            \
    float d_ = R((x) - (y)), dl_ = R(delta);                                    \
    float o_ = fabsf(d_) >= dl_ ? (d_ > 0 ? dl_ : -dl_) : d_;                   \
    R(R(R(norm) * o_) * (g));                                                   \
  })

static inline float pw_maxf(float a, float b) { return a < b ? b : a; }
static inline float pw_minf(float a, float b) { return b < a ? b : a; }

/* sinh from expm1 (no cancellation for small x), cosh from exp: both
 * vectorise (libm's ran at 0.07 of torch's speed); infinite beyond
 * e^88.7, as PyTorch's float ones. */
PW_INLINE float pw_sinhf(float x) {
  float ax = fabsf(x), e = pw_expm1f(ax);
  float r = 0.5f * (e + e / (e + 1.0f));
  r = ax > 88.72283935546875f ? INFINITY : r;
  return copysignf(r, x);
}

PW_INLINE float pw_coshf(float x) {
  float u = pw_expf(fabsf(x));
  return 0.5f * (u + 1.0f / u);
}

PW_INLINE float pw_sq(float d) { return d * d; }

PW_INLINE float pw_softplus_bwd(float dy, float x, float beta, float threshold) {
  float z = pw_expf(x * beta);
  return x * beta > threshold ? dy : dy * z / (z + 1.0f);
}

PW_INLINE float pw_mish_bwd(float dy, float x) {
  float sig = 1.0f / (1.0f + pw_expf(-x));
  float ts = pw_tanhf(pw_log1pf(pw_expf(x)));
  return dy * (ts + x * sig * (1.0f - ts * ts));
}

/* PyTorch's CPU keeps e^-|x| from the forward in a buffer of x's dtype;
 * this recomputes it (as its CUDA kernel does), rounded as that buffer is
 * for round16 1 (bf16) or 2 (fp16): a constant, folded at each use. */
PW_INLINE float pw_log_sigmoid_bwd(float dy, float x, int round16) {
  float z = pw_expf(-fabsf(x));
  if (round16 == 1) z = hpu_round_bf16(z);
  else if (round16 == 2) z = hpu_round_half(z);
  float max_deriv = x < 0 ? 1.0f : 0.0f, sign = x < 0 ? 1.0f : -1.0f;
  return (max_deriv - sign * (z / (1.0f + z))) * dy;
}

static inline float pw_remainderf(float a, float b) {
  float m = fmodf(a, b);
  return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;
}

static inline float pw_gelu_tanh_bwd(float dy, float x) {
  float x_sq = x * x, x_cube = x * x * x;
  float inner = GELU_BETA_TANH * (x + GELU_KAPPA * x_cube);
  float t = pw_tanhf(inner);
  float left = 0.5f * x, right = 1.0f + t;
  float left_d = 0.5f * right;
  float tanh_d = 1.0f - t * t;
  float inner_d = GELU_BETA_TANH * (1.0f + (3.0f * GELU_KAPPA) * x_sq);
  float right_d = left * tanh_d * inner_d;
  return dy * (left_d + right_d);
}

/* PyTorch's formula, dy (cdf + x pdf) with cdf = (1 + erf(x / sqrt 2)) / 2
 * and pdf = e^(-x^2 / 2) / sqrt(2 pi), with one exp for both: erf's
 * e^(-z^2) is the pdf's exponential (z = x / sqrt 2). A second, full pw_expf
 * for the pdf made this 0.73 of torch's speed. pw_exp_nonpos stops at
 * e^-87, so where z^2 > 87 the pdf is 0 (its true value is below 1e-38,
 * and x pdf must stay NaN at x = +-inf, as PyTorch's inf * 0). */
static inline float pw_gelu_bwd(float dy, float x) {
  float z = x * SQRT1_2F, z2 = z * z;
  float ex = pw_exp_nonpos(-z2);
  float cdf = 0.5f * (1.0f + pw_erf_approx_ex(z, ex));
  float pdf = z2 > 87.0f ? 0.0f : GELU_BETA_ERF * ex;
  return dy * (cdf + x * pdf);
}

static inline float pw_silu_bwd(float dy, float x) {
  float s = 1.0f / (1.0f + pw_expf(-x));
  return dy * s * (1.0f + x * (1.0f - s));
}

/* Double-family expressions (libm). */
#define ED_NEG(a, b, c) (-(a))
#define ED_ABS(a, b, c) fabs(a)
#define ED_EXP(a, b, c) exp(a)
#define ED_EXP2(a, b, c) exp2(a)
#define ED_LOG(a, b, c) log(a)
#define ED_LOG2(a, b, c) log2(a)
#define ED_LOG10(a, b, c) log10(a)
#define ED_LOG1P(a, b, c) log1p(a)
#define ED_EXPM1(a, b, c) expm1(a)
#define ED_SQRT(a, b, c) sqrt(a)
#define ED_RSQRT(a, b, c) (1.0 / sqrt(a))
#define ED_RECIPROCAL(a, b, c) (1.0 / (a))
#define ED_SIN(a, b, c) sin(a)
#define ED_COS(a, b, c) cos(a)
#define ED_TAN(a, b, c) tan(a)
#define ED_TANH(a, b, c) tanh(a)
#define ED_SIGMOID(a, b, c) (1.0 / (1.0 + exp(-(a))))
#define ED_ERF(a, b, c) erf(a)
#define ED_SILU(a, b, c) ((a) / (1.0 + exp(-(a))))
#define ED_GELU(a, b, c) (((a) * 0.5) * (1.0 + erf((a) * M_SQRT1_2)))
#define ED_GELU_TANH(a, b, c) \
  ((0.5 * (a)) * (1.0 + tanh(0.7978845608028654 * ((a) + 0.044715 * ((a) * (a) * (a))))))
#define ED_FLOOR(a, b, c) floor(a)
#define ED_CEIL(a, b, c) ceil(a)
#define ED_ROUND(a, b, c) rint(a)
#define ED_TRUNC(a, b, c) trunc(a)
#define ED_SIGN(a, b, c) ((double)(0.0 < (a)) - (double)((a) < 0.0))
#define ED_LOGICAL_NOT(a, b, c) ((a) == 0 ? 1.0 : 0.0)
#define ED_ISNAN(a, b, c) ((a) != (a) ? 1.0 : 0.0)
#define ED_NAN_TO_NUM(a, b, c) \
  ((a) != (a) ? p0 : (a) == INFINITY ? p1 : (a) == -INFINITY ? p2 : (a))
#define ED_LEAKY_RELU(a, b, c) ((a) > 0 ? (a) : (a) * p0)
#define ED_THRESHOLD(a, b, c) ((a) <= p0 ? p1 : (a))
#define ED_HARDTANH(a, b, c) ((a) != (a) ? (a) : (a) < p0 ? p0 : (a) > p1 ? p1 : (a))
#define ED_MAXIMUM(a, b, c) ((a) != (a) || (b) != (b) ? (a) + (b) : (a) > (b) ? (a) : (b))
#define ED_MINIMUM(a, b, c) ((a) != (a) || (b) != (b) ? (a) + (b) : (a) < (b) ? (a) : (b))
#define ED_REMAINDER(a, b, c) pw_remainder(a, b)
#define ED_FMOD(a, b, c) fmod(a, b)
#define ED_EQ(a, b, c) ((a) == (b) ? 1.0 : 0.0)
#define ED_NE(a, b, c) ((a) != (b) ? 1.0 : 0.0)
#define ED_LT(a, b, c) ((a) < (b) ? 1.0 : 0.0)
#define ED_LE(a, b, c) ((a) <= (b) ? 1.0 : 0.0)
#define ED_GT(a, b, c) ((a) > (b) ? 1.0 : 0.0)
#define ED_GE(a, b, c) ((a) >= (b) ? 1.0 : 0.0)
#define ED_LOGICAL_AND(a, b, c) ((a) != 0 && (b) != 0 ? 1.0 : 0.0)
#define ED_LOGICAL_OR(a, b, c) ((a) != 0 || (b) != 0 ? 1.0 : 0.0)
#define ED_LOGICAL_XOR(a, b, c) (((a) != 0) != ((b) != 0) ? 1.0 : 0.0)
#define ED_ATAN2(a, b, c) atan2(a, b)
#define ED_ASIN(a, b, c) asin(a)
#define ED_ACOS(a, b, c) acos(a)
#define ED_ATAN(a, b, c) atan(a)
#define ED_SINH(a, b, c) sinh(a)
#define ED_COSH(a, b, c) cosh(a)
#define ED_ASINH(a, b, c) asinh(a)
#define ED_ACOSH(a, b, c) acosh(a)
#define ED_ATANH(a, b, c) atanh(a)
#define ED_XLOGY(a, b, c) ((b) != (b) ? NAN : (a) == 0 ? 0.0 : (a) * log(b))
#define ED_SQUARED_DIFF(a, b, c) (((a) - (b)) * ((a) - (b)))
#define ED_SMOOTH_L1(a, b, c) \
  (fabs((a) - (b)) >= p0 ? fabs((a) - (b)) - 0.5 * p0 : 0.5 * fabs((a) - (b)) * fabs((a) - (b)) / p0)
#define ED_HUBER(a, b, c) \
  (fabs((a) - (b)) >= p0 ? p0 * (fabs((a) - (b)) - 0.5 * p0) : 0.5 * fabs((a) - (b)) * fabs((a) - (b)))
#define ED_SMOOTH_L1_BACKWARD(a, b, c)                                                     \
  (p1 * (fabs((a) - (b)) >= p0 ? ((a) - (b) > 0 ? 1.0 : -1.0) : ((a) - (b)) / p0) * (c))
#define ED_BCE_BACKWARD(a, b, c) \
  ((c) * ((a) - (b)) / ((1.0 - (a)) * (a) < 1e-12 ? 1e-12 : (1.0 - (a)) * (a)))
#define ED_HUBER_BACKWARD(a, b, c) \
  (p1 * (fabs((a) - (b)) >= p0 ? ((a) - (b) > 0 ? p0 : -p0) : (a) - (b)) * (c))
#define ED_POW(a, b, c) pow(a, b)
#define ED_POW_SQ(a, b, c) ((a) * (a))
#define ED_POW_CUBE(a, b, c) ((a) * (a) * (a))
#define ED_POW_SQRT(a, b, c) sqrt(a)
#define ED_POW_RSQRT(a, b, c) (1.0 / sqrt(a))
#define ED_POW_RECIP(a, b, c) (1.0 / (a))
#define ED_POW_INVSQ(a, b, c) (1.0 / ((a) * (a)))
#define ED_GELU_BACKWARD(a, b, c)                                                   \
  ((a) * (0.5 * (1.0 + erf((b) * M_SQRT1_2)) +                                      \
          (b) * (0.3989422804014327 * exp((b) * (b) * -0.5))))
#define ED_GELU_TANH_BACKWARD(a, b, c) pw_gelu_tanh_bwd_d(a, b)
#define ED_TANH_BACKWARD(a, b, c) ((a) * fma(-(b), (b), 1.0))
#define ED_SIGMOID_BACKWARD(a, b, c) ((a) * (1.0 - (b)) * (b))
#define ED_SILU_BACKWARD(a, b, c) \
  ((a) * (1.0 / (1.0 + exp(-(b)))) * (1.0 + (b) * (1.0 - 1.0 / (1.0 + exp(-(b))))))
#define ED_THRESHOLD_BACKWARD(a, b, c) ((b) <= p0 ? 0.0 : (a))
#define ED_LEAKY_RELU_BACKWARD(a, b, c) ((b) > 0 ? (a) : (a) * p0)
#define ED_HARDTANH_BACKWARD(a, b, c) ((b) <= p0 || (b) >= p1 ? 0.0 : (a))
#define ED_CLAMP(a, b, c)                                     \
  ((a) != (a) || (b) != (b) || (c) != (c) ? (a) + (b) + (c)   \
   : ((a) < (b) ? (b) : (a)) > (c)        ? (c)               \
                                          : ((a) < (b) ? (b) : (a)))
#define ED_CLAMP_MIN(a, b, c) ((a) != (a) || (b) != (b) ? (a) + (b) : (a) < (b) ? (b) : (a))
#define ED_CLAMP_MAX(a, b, c) ((a) != (a) || (c) != (c) ? (a) + (c) : (a) > (c) ? (c) : (a))
#define ED_WHERE(a, b, c) ((a) != 0 ? (b) : (c))
#define ED_LERP(a, b, c) \
  (fabs(c) < 0.5 ? fma((c), (b) - (a), (a)) : fma((c) - 1.0, (b) - (a), (b)))
#define ED_ADDCMUL(a, b, c) fma(p0 * (b), (c), (a))
#define ED_ADDCDIV(a, b, c) ((a) + p0 * (b) / (c))
#define ED_ARANGE(a, b, c) (p0 + p1 * (double)(idx + i))
#define ED_ELU(a, b, c) ((a) <= 0 ? expm1((a) * p2) * (p0 * p1) : (a) * p1)
#define ED_SOFTPLUS(a, b, c) ((a) * p0 > p1 ? (a) : log1p(exp((a) * p0)) / p0)
#define ED_HARDSWISH(a, b, c) ((a) * pw_min(pw_max((a) + 3.0, 0.0), 6.0) / 6.0)
#define ED_HARDSIGMOID(a, b, c) (pw_min(pw_max((a) + 3.0, 0.0), 6.0) / 6.0)
#define ED_MISH(a, b, c) ((a) * tanh(log1p(exp(a))))
#define ED_LOG_SIGMOID(a, b, c) (pw_min(a, 0.0) - log1p(exp(-fabs(a))))
#define ED_ELU_BACKWARD(a, b, c) ((b) > 0 ? (a) * p1 : (a) * p2 * (p0 * p1) * exp((b) * p2))
#define ED_ELU_BACKWARD_RESULT(a, b, c) ((b) > 0 ? (a) * p1 : (a) * p2 * ((b) + p0 * p1))
#define ED_SOFTPLUS_BACKWARD(a, b, c)                                 \
  ((b) * p0 > p1 ? (a) : (a) * exp((b) * p0) / (exp((b) * p0) + 1.0))
#define ED_HARDSWISH_BACKWARD(a, b, c) \
  ((b) <= -3.0 ? 0.0 : (b) >= 3.0 ? (a) : (a) * ((b) / 3.0 + 0.5))
/* PyTorch's one sixth is the float constant 1.0f / 6.0f in every dtype */
#define ED_HARDSIGMOID_BACKWARD(a, b, c) ((b) > -3.0 && (b) < 3.0 ? (a) * (double)(1.0f / 6.0f) : 0.0)
#define ED_MISH_BACKWARD(a, b, c)                                                         \
  ((a) * (tanh(log1p(exp(b))) +                                                         \
          (b) * (1.0 / (1.0 + exp(-(b)))) * (1.0 - tanh(log1p(exp(b))) * tanh(log1p(exp(b))))))
#define ED_SOFTSHRINK(a, b, c) ((a) > p0 ? (a) - p0 : (a) < -p0 ? (a) + p0 : (a) != (a) ? (a) : 0.0)
#define ED_HARDSHRINK(a, b, c) ((a) >= -p0 && (a) <= p0 ? 0.0 : (a))
#define ED_SHRINK_BACKWARD(a, b, c) ((b) > p0 || (b) < -p0 ? (a) : 0.0)
#define ED_GLU(a, b, c) ((a) * (1.0 / (1.0 + exp(-(b)))))
#define ED_GLU_BACKWARD(a, b, c) ((1.0 - (a)) * (a) * (b) * (c))
#define ED_LOG_SIGMOID_BACKWARD(a, b, c)                                                  \
  (((b) < 0 ? 1.0 : 0.0) - ((b) < 0 ? 1.0 : -1.0) * (exp(-fabs(b)) / (1.0 + exp(-fabs(b))))) * (a)

static inline double pw_max(double a, double b) { return a < b ? b : a; }
static inline double pw_min(double a, double b) { return b < a ? b : a; }

static inline double pw_remainder(double a, double b) {
  double m = fmod(a, b);
  return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;
}

static inline double pw_gelu_tanh_bwd_d(double dy, double x) {
  const double beta = 0.7978845608028654, kappa = 0.044715;
  double x_sq = x * x, x_cube = x * x * x;
  double t = tanh(beta * (x + kappa * x_cube));
  double left = 0.5 * x, right = 1.0 + t;
  double right_d = left * (1.0 - t * t) * (beta * (1.0 + 3.0 * kappa * x_sq));
  return dy * (0.5 * right + right_d);
}

/* Integer-family expressions (int64, wrapping through uint64). */
#define U64(x) ((uint64_t)(x))
#define I64(x) ((int64_t)(x))
#define EI_NEG(a, b, c) I64(0 - U64(a))
#define EI_ABS(a, b, c) ((a) < 0 ? I64(0 - U64(a)) : (a))
#define EI_FLOOR(a, b, c) (a)
#define EI_CEIL(a, b, c) (a)
#define EI_ROUND(a, b, c) (a)
#define EI_TRUNC(a, b, c) (a)
#define EI_SIGN(a, b, c) ((int64_t)(0 < (a)) - (int64_t)((a) < 0))
#define EI_LOGICAL_NOT(a, b, c) ((a) == 0)
#define EI_BITWISE_NOT(a, b, c) (~(a))
#define EI_ISNAN(a, b, c) ((void)(a), 0)
#define EI_NAN_TO_NUM(a, b, c) (a)
#define EI_THRESHOLD(a, b, c) ((a) <= p0 ? p1 : (a))
#define EI_MAXIMUM(a, b, c) ((a) > (b) ? (a) : (b))
#define EI_MINIMUM(a, b, c) ((a) < (b) ? (a) : (b))
#define EI_REMAINDER(a, b, c) pw_remainder_i(a, b, x->zero_div) /* x: the loop's pw_ctx_t */
#define EI_FMOD(a, b, c) pw_fmod_i(a, b, x->zero_div)
#define EI_EQ(a, b, c) ((a) == (b))
#define EI_NE(a, b, c) ((a) != (b))
#define EI_LT(a, b, c) ((a) < (b))
#define EI_LE(a, b, c) ((a) <= (b))
#define EI_GT(a, b, c) ((a) > (b))
#define EI_GE(a, b, c) ((a) >= (b))
#define EI_LOGICAL_AND(a, b, c) ((a) != 0 && (b) != 0)
#define EI_LOGICAL_OR(a, b, c) ((a) != 0 || (b) != 0)
#define EI_LOGICAL_XOR(a, b, c) (((a) != 0) != ((b) != 0))
#define EI_BITWISE_AND(a, b, c) ((a) & (b))
#define EI_BITWISE_OR(a, b, c) ((a) | (b))
#define EI_BITWISE_XOR(a, b, c) ((a) ^ (b))
#define EI_POW(a, b, c) pw_powi(a, b)
#define EI_THRESHOLD_BACKWARD(a, b, c) ((b) <= p0 ? 0 : (a))
#define EI_CLAMP(a, b, c) (((a) < (b) ? (b) : (a)) > (c) ? (c) : ((a) < (b) ? (b) : (a)))
#define EI_CLAMP_MIN(a, b, c) ((a) < (b) ? (b) : (a))
#define EI_CLAMP_MAX(a, b, c) ((a) > (c) ? (c) : (a))
#define EI_WHERE(a, b, c) ((a) != 0 ? (b) : (c))
#define EI_ADDCMUL(a, b, c) I64(U64(a) + U64(p0) * U64(b) * U64(c))
#define EI_ARANGE(a, b, c) I64(U64(p0) + U64(p1) * U64(idx + i))

/* An integer remainder by zero stores 0 and flags the node, which then fails
 * with PyTorch's "ZeroDivisionError" (run_elementwise). b == -1: 0, also for
 * INT64_MIN, whose % -1 would trap. */
static inline int64_t pw_div_by_zero_i(atomic_int *flag) {
  atomic_store_explicit(flag, 1, memory_order_relaxed); /* read after the loops joined */
  return 0;
}

static inline int64_t pw_remainder_i(int64_t a, int64_t b, atomic_int *zero) {
  if (b == 0) return pw_div_by_zero_i(zero);
  if (b == -1) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

static inline int64_t pw_fmod_i(int64_t a, int64_t b, atomic_int *zero) {
  if (b == 0) return pw_div_by_zero_i(zero);
  if (b == -1) return 0;
  return a % b;
}

/* PyTorch's powi: negative exponents give 1 / a rounded toward zero. */
static inline int64_t pw_powi(int64_t a, int64_t b) {
  if (b < 0) {
    if (a == 1) return 1;
    if (a == -1) return (b & 1) ? -1 : 1;
    return 0;
  }
  uint64_t r = 1, x = U64(a);
  while (b) {
    if (b & 1) r *= x;
    b >>= 1;
    x *= x;
  }
  return I64(r);
}

/* Context and loops ------------------------------------------------------- */

enum { FAM_F, FAM_D, FAM_I };

typedef struct pw_ctx pw_ctx_t;
typedef void (*kF_fn)(int64_t n, float *o, const float *a, const float *b, const float *c,
                      const pw_ctx_t *x, int64_t idx);
typedef void (*kD_fn)(int64_t n, double *o, const double *a, const double *b, const double *c,
                      const pw_ctx_t *x, int64_t idx);
typedef void (*kI_fn)(int64_t n, int64_t *o, const int64_t *a, const int64_t *b,
                      const int64_t *c, const pw_ctx_t *x, int64_t idx);

struct pw_ctx {
  int fam, arity;
  hpu_dtype_t cdt, dto;
  hpu_dtype_t dt[3]; /* dtype of tensor operand k */
  int src[3];        /* iterator operand of math operand k, or -1: scalar */
  float sF[3];
  double sD[3];
  int64_t sI[3];
  float pF[6];
  double pD[6];
  int64_t pI[6];
  kF_fn kF;
  kD_fn kD;
  kI_fn kI;
  hpu_isa_t isa;
  atomic_int *zero_div; /* integer REMAINDER / FMOD met a zero divisor */
  hpu_op_t op;          /* for the special family's kernels */
};

#define DEF_K(FAM, W, N, ISA)                                                                \
  static HPU_ATTR_##ISA void k##FAM##_##N##_##ISA(int64_t n, W *o, const W *a, const W *b,   \
                                                  const W *c, const pw_ctx_t *x,             \
                                                  int64_t idx) {                             \
    const W p0 = x->p##FAM[0], p1 = x->p##FAM[1], p2 = x->p##FAM[2];                         \
    (void)p0, (void)p1, (void)p2, (void)a, (void)b, (void)c, (void)idx;                      \
    _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) o[i] = E##FAM##_##N(a[i], b[i], c[i]); \
  }

/* Float64 kernels: every op but the bitwise ones; float kernels: those and
 * the ones rounded to bf16 / fp16. */
#define PW_F_KERNELS(X) PW_D_KERNELS(X) PW_ROUNDED16(X)
#define PW_D_KERNELS(X)                                                                      \
  X(NEG) X(ABS) X(EXP) X(EXP2) X(LOG) X(LOG2) X(LOG10) X(LOG1P) X(EXPM1) X(SQRT) X(RSQRT)    \
  X(RECIPROCAL) X(SIN) X(COS) X(TAN) X(TANH) X(SIGMOID) X(ERF) X(SILU) X(GELU) X(GELU_TANH) \
  X(FLOOR) X(CEIL) X(ROUND) X(TRUNC) X(SIGN) X(LOGICAL_NOT) X(ISNAN) X(NAN_TO_NUM)           \
  X(LEAKY_RELU) X(THRESHOLD) X(HARDTANH) X(MAXIMUM) X(MINIMUM) X(REMAINDER) X(FMOD) X(EQ)   \
  X(NE) X(LT) X(LE) X(GT) X(GE) X(LOGICAL_AND) X(LOGICAL_OR) X(LOGICAL_XOR) X(ATAN2) X(POW)  \
  X(POW_SQ) X(POW_CUBE) X(POW_SQRT) X(POW_RSQRT) X(POW_RECIP) X(POW_INVSQ) X(GELU_BACKWARD)  \
  X(GELU_TANH_BACKWARD) X(TANH_BACKWARD) X(SIGMOID_BACKWARD) X(SILU_BACKWARD)                \
  X(THRESHOLD_BACKWARD) X(LEAKY_RELU_BACKWARD) X(HARDTANH_BACKWARD) X(CLAMP) X(CLAMP_MIN)    \
  X(CLAMP_MAX) X(WHERE) X(LERP) X(ADDCMUL) X(ADDCDIV) X(ARANGE) PW_ACTIVATIONS(X) PW_TRIG(X)
#define PW_I_KERNELS(X)                                                                      \
  X(NEG) X(ABS) X(FLOOR) X(CEIL) X(ROUND) X(TRUNC) X(SIGN) X(LOGICAL_NOT) X(BITWISE_NOT)     \
  X(ISNAN) X(NAN_TO_NUM) X(THRESHOLD) X(MAXIMUM) X(MINIMUM) X(REMAINDER) X(FMOD) X(EQ) X(NE) \
  X(LT) X(LE) X(GT) X(GE) X(LOGICAL_AND) X(LOGICAL_OR) X(LOGICAL_XOR) X(BITWISE_AND)         \
  X(BITWISE_OR) X(BITWISE_XOR) X(POW) X(THRESHOLD_BACKWARD) X(CLAMP) X(CLAMP_MIN)            \
  X(CLAMP_MAX) X(WHERE) X(ADDCMUL) X(ARANGE)

#define DEF_KF(N) DEF_K(F, float, N, generic)
#define DEF_KF2(N) DEF_K(F, float, N, avx2)
#define DEF_KF5(N) DEF_K(F, float, N, avx512)
#define DEF_KD(N) DEF_K(D, double, N, generic)
#define DEF_KI(N) DEF_K(I, int64_t, N, generic)
PW_F_KERNELS(DEF_KF)
PW_D_KERNELS(DEF_KD)
PW_I_KERNELS(DEF_KI)
#if HPU_HAVE_ISA_CLONES
PW_F_KERNELS(DEF_KF2)
PW_F_KERNELS(DEF_KF5)
#endif

#define TAB_KF(N) [K_##N] = kF_##N##_generic,
#define TAB_KF2(N) [K_##N] = kF_##N##_avx2,
#define TAB_KF5(N) [K_##N] = kF_##N##_avx512,
#define TAB_KD(N) [K_##N] = kD_##N##_generic,
#define TAB_KI(N) [K_##N] = kI_##N##_generic,
static const kF_fn tab_F[K_COUNT] = {PW_F_KERNELS(TAB_KF)};
#if HPU_HAVE_ISA_CLONES
static const kF_fn tab_F2[K_COUNT] = {PW_F_KERNELS(TAB_KF2)};
static const kF_fn tab_F5[K_COUNT] = {PW_F_KERNELS(TAB_KF5)};
#endif
static const kD_fn tab_D[K_COUNT] = {PW_D_KERNELS(TAB_KD)};

#if HPU_HAVE_ISA_CLONES
/* exp, sigmoid and silu by hand for AVX-512 (exp16, kernels/vexp.h). */
#define DEF_K512(N, EXPR)                                                                       \
  static HPU_ATTR_avx512 void kF_##N##_x16(int64_t n, float *o, const float *a, const float *b, \
                                           const float *c, const pw_ctx_t *x, int64_t idx) {    \
    (void)b, (void)c, (void)x, (void)idx;                                                       \
    const __m512 one = _mm512_set1_ps(1.0f);                                                    \
    (void)one;                                                                                  \
    int64_t i = 0;                                                                              \
    for (; i + 16 <= n; i += 16) {                                                              \
      __m512 v = _mm512_loadu_ps(a + i);                                                        \
      _mm512_storeu_ps(o + i, EXPR);                                                            \
    }                                                                                           \
    if (i < n) {                                                                                \
      __mmask16 m = (__mmask16)((1u << (n - i)) - 1);                                           \
      __m512 v = _mm512_maskz_loadu_ps(m, a + i);                                               \
      _mm512_mask_storeu_ps(o + i, m, EXPR);                                                    \
    }                                                                                           \
  }

/* EF_SIGMOID: 1 / (1 + e^-x); EF_SILU: x / (1 + e^-x) */
#define NEG16(v) _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN)))
DEF_K512(EXP, exp16(v))
DEF_K512(SIGMOID, _mm512_div_ps(one, _mm512_add_ps(one, exp16(NEG16(v)))))
DEF_K512(SILU, _mm512_div_ps(v, _mm512_add_ps(one, exp16(NEG16(v)))))

/* The same on AVX2 with exp8; the tail goes through a zero-padded block. */
#define DEF_K256(N, EXPR)                                                                      \
  static HPU_ATTR_avx2 void kF_##N##_x8(int64_t n, float *o, const float *a, const float *b,   \
                                        const float *c, const pw_ctx_t *x, int64_t idx) {      \
    (void)b, (void)c, (void)x, (void)idx;                                                      \
    const __m256 one = _mm256_set1_ps(1.0f);                                                   \
    (void)one;                                                                                 \
    int64_t i = 0;                                                                             \
    for (; i + 8 <= n; i += 8) {                                                               \
      __m256 v = _mm256_loadu_ps(a + i);                                                       \
      _mm256_storeu_ps(o + i, EXPR);                                                           \
    }                                                                                          \
    if (i < n) {                                                                               \
      float in[8] = {0}, out[8];                                                               \
      memcpy(in, a + i, (size_t)(n - i) * sizeof(float));                                      \
      __m256 v = _mm256_loadu_ps(in);                                                          \
      _mm256_storeu_ps(out, EXPR);                                                             \
      memcpy(o + i, out, (size_t)(n - i) * sizeof(float));                                     \
    }                                                                                          \
  }
#define NEG8(v) _mm256_xor_ps(v, _mm256_set1_ps(-0.0f))
DEF_K256(EXP, exp8(v))
DEF_K256(SIGMOID, _mm256_div_ps(one, _mm256_add_ps(one, exp8(NEG8(v)))))
DEF_K256(SILU, _mm256_div_ps(v, _mm256_add_ps(one, exp8(NEG8(v)))))

/* The float kernel for k on this ISA. */
static kF_fn pick_kF(pw_kernel_t k, hpu_isa_t isa) {
  if (isa == HPU_ISA_AVX512) {
    if (k == K_EXP) return kF_EXP_x16;
    if (k == K_SIGMOID) return kF_SIGMOID_x16;
    if (k == K_SILU) return kF_SILU_x16;
    return tab_F5[k];
  }
  if (isa == HPU_ISA_AVX2) {
    if (k == K_EXP) return kF_EXP_x8;
    if (k == K_SIGMOID) return kF_SIGMOID_x8;
    if (k == K_SILU) return kF_SILU_x8;
    return tab_F2[k];
  }
  return tab_F[k];
}
#endif
static const kI_fn tab_I[K_COUNT] = {PW_I_KERNELS(TAB_KI)};

/* The special family's chunk kernels in the engine's kernel signature. */
static void kF_special(int64_t n, float *o, const float *a, const float *b, const float *c,
                       const pw_ctx_t *x, int64_t idx) {
  (void)c, (void)idx;
  hpu_special_run_f(x->op, n, o, a, b, x->pD);
}
static void kD_special(int64_t n, double *o, const double *a, const double *b, const double *c,
                       const pw_ctx_t *x, int64_t idx) {
  (void)c, (void)idx;
  hpu_special_run_d(x->op, n, o, a, b, x->pD);
}

/* Chunk conversions between any dtype and a family buffer. ----------------- */

#define LD_CASE(DT, T, EXPR)                                           \
  case DT:                                                             \
    if (s == (int64_t)sizeof(T)) {                                     \
      const T *q = (const T *)p;                                       \
      for (int64_t i = 0; i < n; i++) { T v = q[i]; dst[i] = (EXPR); } \
    } else {                                                           \
      for (int64_t i = 0; i < n; i++) {                                \
        T v = *(const T *)(p + i * s);                                 \
        dst[i] = (EXPR);                                               \
      }                                                                \
    }                                                                  \
    break;

#define LD_ALL(W, CONV)                                             \
  LD_CASE(HPU_BOOL, uint8_t, (W)(v != 0))                           \
  LD_CASE(HPU_UINT8, uint8_t, (W)v)                                 \
  LD_CASE(HPU_INT8, int8_t, (W)v)                                   \
  LD_CASE(HPU_INT16, int16_t, (W)v)                                 \
  LD_CASE(HPU_INT32, int32_t, (W)v)                                 \
  LD_CASE(HPU_INT64, int64_t, (W)v)                                 \
  LD_CASE(HPU_FLOAT16, uint16_t, CONV(hpu_cvt_half_f32(v)))         \
  LD_CASE(HPU_BFLOAT16, uint16_t, CONV(hpu_cvt_bf16_f32(v)))        \
  LD_CASE(HPU_FLOAT32, float, CONV(v))                              \
  LD_CASE(HPU_FLOAT64, double, CONV(v))                             \
  default: break;

#define CONV_F(x) ((float)(x))
#define CONV_D(x) ((double)(x))
#define CONV_I(x) hpu_f2i(x)

static inline __attribute__((always_inline)) void load_F(float *dst, const char *p, int64_t s, int64_t n, hpu_dtype_t dt,
                   hpu_dtype_t cdt) {
  switch (dt) { LD_ALL(float, CONV_F) }
  if (dt != cdt && (cdt == HPU_BFLOAT16 || cdt == HPU_FLOAT16))
    for (int64_t i = 0; i < n; i++) dst[i] = hpu_round_to(dst[i], cdt);
}

static void load_D(double *dst, const char *p, int64_t s, int64_t n, hpu_dtype_t dt,
                   hpu_dtype_t cdt) {
  (void)cdt;
  switch (dt) { LD_ALL(double, CONV_D) }
}

static void load_I(int64_t *dst, const char *p, int64_t s, int64_t n, hpu_dtype_t dt,
                   hpu_dtype_t cdt) {
  switch (dt) { LD_ALL(int64_t, CONV_I) }
  if (dt != cdt)
    for (int64_t i = 0; i < n; i++) dst[i] = hpu_narrow_int(dst[i], cdt);
}

#define ST_CASE(DT, T, EXPR)                                            \
  case DT:                                                              \
    if (s == (int64_t)sizeof(T)) {                                      \
      T *q = (T *)p;                                                    \
      for (int64_t i = 0; i < n; i++) q[i] = (EXPR);                    \
    } else {                                                            \
      for (int64_t i = 0; i < n; i++) *(T *)(p + i * s) = (EXPR);       \
    }                                                                   \
    break;

#define ST_ALL(TOINT)                                                     \
  ST_CASE(HPU_BOOL, uint8_t, src[i] != 0)                                 \
  ST_CASE(HPU_UINT8, uint8_t, (uint8_t)TOINT(src[i]))                     \
  ST_CASE(HPU_INT8, int8_t, (int8_t)TOINT(src[i]))                        \
  ST_CASE(HPU_INT16, int16_t, (int16_t)TOINT(src[i]))                     \
  ST_CASE(HPU_INT32, int32_t, (int32_t)TOINT(src[i]))                     \
  ST_CASE(HPU_INT64, int64_t, TOINT(src[i]))                              \
  ST_CASE(HPU_FLOAT16, uint16_t, hpu_cvt_f32_half((float)src[i]))         \
  ST_CASE(HPU_BFLOAT16, uint16_t, hpu_cvt_f32_bf16((float)src[i]))        \
  ST_CASE(HPU_FLOAT32, float, (float)src[i])                              \
  ST_CASE(HPU_FLOAT64, double, (double)src[i])                            \
  default: break;

#define TOINT_F(x) hpu_f2i(x)
#define TOINT_I(x) (x)

static inline __attribute__((always_inline)) void store_F(char *p, int64_t s, float *src, int64_t n, hpu_dtype_t dt, hpu_dtype_t cdt) {
  if (dt != cdt && (cdt == HPU_BFLOAT16 || cdt == HPU_FLOAT16))
    for (int64_t i = 0; i < n; i++) src[i] = hpu_round_to(src[i], cdt);
  switch (dt) { ST_ALL(TOINT_F) }
}

static void store_D(char *p, int64_t s, double *src, int64_t n, hpu_dtype_t dt, hpu_dtype_t cdt) {
  (void)cdt;
  switch (dt) { ST_ALL(TOINT_F) }
}

static void store_I(char *p, int64_t s, int64_t *src, int64_t n, hpu_dtype_t dt, hpu_dtype_t cdt) {
  if (dt != cdt)
    for (int64_t i = 0; i < n; i++) src[i] = hpu_narrow_int(src[i], cdt);
  switch (dt) { ST_ALL(TOINT_I) }
}

/* One run of n elements: data/st from the iterator (operand 0 = output). */
#define DEF_LOOP(FAM, W, NATIVE, ISA)                                                       \
  static HPU_ATTR_##ISA void loop_##FAM##_##ISA(const pw_ctx_t *x, char **data, const int64_t *st, int64_t n,     \
                         int64_t index) {                                                   \
    W buf[4][CHUNK];                                                                        \
    const W *in[3] = {buf[1], buf[2], buf[3]};                                              \
    int mode[3] = {0, 0, 0}; /* 0 convert per chunk, 1 in place, 2 constant */             \
    int all_direct = x->cdt == NATIVE;                                                      \
    const int64_t es = (int64_t)sizeof(W);                                                  \
    for (int k = 0; k < x->arity; k++) {                                                    \
      int s = x->src[k];                                                                    \
      if (s < 0) {                                                                          \
        for (int i = 0; i < CHUNK; i++) buf[k + 1][i] = x->s##FAM[k];                       \
        mode[k] = 2;                                                                        \
      } else if (st[s] == 0) {                                                              \
        load_##FAM(buf[k + 1], data[s], 0, 1, x->dt[k], x->cdt);                            \
        for (int i = 1; i < CHUNK; i++) buf[k + 1][i] = buf[k + 1][0];                      \
        mode[k] = 2;                                                                        \
        all_direct = 0;                                                                     \
      } else if (x->dt[k] == NATIVE && x->cdt == NATIVE && st[s] == es) {                   \
        mode[k] = 1;                                                                        \
      } else {                                                                              \
        all_direct = 0;                                                                     \
      }                                                                                     \
      if (mode[k] == 2 && s < 0) all_direct = 0;                                            \
    }                                                                                       \
    int odirect = x->dto == NATIVE && x->cdt == NATIVE && st[0] == es;                      \
    all_direct = all_direct && odirect;                                                     \
    for (int64_t done = 0; done < n;) {                                                     \
      int64_t m = all_direct ? n - done : (n - done < CHUNK ? n - done : CHUNK);            \
      for (int k = 0; k < x->arity; k++) {                                                  \
        int s = x->src[k];                                                                  \
        if (mode[k] == 1) {                                                                 \
          in[k] = (const W *)(data[s] + done * es);                                         \
        } else if (mode[k] == 0) {                                                          \
          load_##FAM(buf[k + 1], data[s] + done * st[s], st[s], m, x->dt[k], x->cdt);       \
        }                                                                                   \
      }                                                                                     \
      W *o = odirect ? (W *)(data[0] + done * es) : buf[0];                                 \
      x->k##FAM(m, o, in[0], in[1], in[2], x, index + done);                                \
      if (!odirect) store_##FAM(data[0] + done * st[0], st[0], buf[0], m, x->dto, x->cdt);  \
      done += m;                                                                            \
    }                                                                                       \
  }

/* The float loop is cloned per ISA too: its bf16/fp16 conversions are hot. */
DEF_LOOP(F, float, HPU_FLOAT32, generic)
#if HPU_HAVE_ISA_CLONES
DEF_LOOP(F, float, HPU_FLOAT32, avx2)
DEF_LOOP(F, float, HPU_FLOAT32, avx512)
#endif
DEF_LOOP(D, double, HPU_FLOAT64, generic)
DEF_LOOP(I, int64_t, HPU_INT64, generic)

static void pw_loop(void *vctx, char **data, const int64_t *st, int64_t n, int64_t index) {
  const pw_ctx_t *x = vctx;
  switch (x->fam) {
    case FAM_F:
#if HPU_HAVE_ISA_CLONES
      if (x->isa == HPU_ISA_AVX512) loop_F_avx512(x, data, st, n, index);
      else if (x->isa == HPU_ISA_AVX2) loop_F_avx2(x, data, st, n, index);
      else
#endif
        loop_F_generic(x, data, st, n, index);
      break;
    case FAM_D: loop_D_generic(x, data, st, n, index); break;
    default: loop_I_generic(x, data, st, n, index); break;
  }
}

/* Op table ------------------------------------------------------------------- */

static int fam_of(hpu_dtype_t cdt) {
  if (cdt == HPU_FLOAT64) return FAM_D;
  return hpu_dtype_is_floating(cdt) ? FAM_F : FAM_I;
}

/* Math arity of an elementwise op; -1 for the special ones. */
static int arity_of(hpu_op_t op) {
  int special = hpu_special_arity(op);
  if (special >= 0) return special;
  if (op >= HPU_OP_NEG && op <= HPU_OP_LOG_SIGMOID) return 1;
  if (op >= HPU_OP_MAXIMUM && op <= HPU_OP_LOG_SIGMOID_BACKWARD) return 2;
  if (op >= HPU_OP_CLAMP && op <= HPU_OP_BCE_BACKWARD) return 3;
  if (op == HPU_OP_ARANGE) return 0;
  return -1;
}

static int is_scalar_exact_pow(double e, double v) { return e == v; }

/* The kernel of a node; K_COUNT when the family lacks it. */
static pw_kernel_t kernel_of(const hpu_node_t *node, int fam) {
  const hpu_pointwise_params_t *p = &node->params.pointwise;
  switch (node->op) {
#define MAP(N) case HPU_OP_##N: return K_##N;
    MAP(NEG) MAP(ABS) MAP(EXP) MAP(EXP2) MAP(LOG) MAP(LOG2) MAP(LOG10) MAP(LOG1P) MAP(EXPM1)
    MAP(SQRT) MAP(RSQRT) MAP(RECIPROCAL) MAP(SIN) MAP(COS) MAP(TAN) MAP(TANH) MAP(SIGMOID)
    MAP(ERF) MAP(SILU) MAP(FLOOR) MAP(CEIL) MAP(ROUND) MAP(TRUNC) MAP(SIGN) MAP(LOGICAL_NOT)
    MAP(ISNAN) MAP(NAN_TO_NUM) MAP(LEAKY_RELU) MAP(THRESHOLD) MAP(HARDTANH) MAP(MAXIMUM)
    MAP(MINIMUM) MAP(REMAINDER) MAP(FMOD) MAP(EQ) MAP(NE) MAP(LT) MAP(LE) MAP(GT) MAP(GE)
    MAP(LOGICAL_AND) MAP(LOGICAL_OR) MAP(LOGICAL_XOR) MAP(BITWISE_AND) MAP(BITWISE_OR)
    MAP(BITWISE_XOR) MAP(ATAN2) MAP(TANH_BACKWARD) MAP(SILU_BACKWARD)
    MAP(THRESHOLD_BACKWARD) MAP(LEAKY_RELU_BACKWARD) MAP(HARDTANH_BACKWARD) MAP(WHERE)
    MAP(LERP) MAP(ADDCMUL) MAP(ADDCDIV) MAP(ARANGE)
    MAP(ELU) MAP(SOFTPLUS) MAP(HARDSWISH) MAP(HARDSIGMOID) MAP(MISH) MAP(LOG_SIGMOID)
    MAP(SOFTPLUS_BACKWARD) MAP(HARDSWISH_BACKWARD) MAP(HARDSIGMOID_BACKWARD) MAP(MISH_BACKWARD)
    MAP(ASIN) MAP(ACOS) MAP(ATAN) MAP(SINH) MAP(COSH) MAP(ASINH) MAP(ACOSH) MAP(ATANH)
    MAP(SOFTSHRINK) MAP(HARDSHRINK) MAP(SHRINK_BACKWARD) MAP(GLU) MAP(GLU_BACKWARD)
    MAP(SMOOTH_L1_BACKWARD)
#undef MAP
    case HPU_OP_BITWISE_NOT:
      return node->compute_dtype == HPU_BOOL ? K_LOGICAL_NOT : K_BITWISE_NOT;
    case HPU_OP_GELU: return p->i[0] ? K_GELU_TANH : K_GELU;
    case HPU_OP_GELU_BACKWARD: return p->i[0] ? K_GELU_TANH_BACKWARD : K_GELU_BACKWARD;
    case HPU_OP_ELU_BACKWARD: return p->i[0] ? K_ELU_BACKWARD_RESULT : K_ELU_BACKWARD;
    case HPU_OP_SIGMOID_BACKWARD:
      return node->compute_dtype == HPU_FLOAT16 ? K_SIGMOID_BACKWARD_F16 : K_SIGMOID_BACKWARD;
#define BY_DTYPE(N)                                                          \
  case HPU_OP_##N:                                                          \
    return node->compute_dtype == HPU_BFLOAT16 ? K_##N##_BF16                \
           : node->compute_dtype == HPU_FLOAT16 ? K_##N##_F16 : K_##N;
    BY_DTYPE(LOG_SIGMOID_BACKWARD)
    BY_DTYPE(XLOGY)
    BY_DTYPE(SQUARED_DIFF)
    BY_DTYPE(HUBER_BACKWARD)
    BY_DTYPE(BCE_BACKWARD)
#undef BY_DTYPE
    case HPU_OP_SMOOTH_L1:
      return node->compute_dtype == HPU_FLOAT16 ? K_SMOOTH_L1_F16 : K_SMOOTH_L1;
    case HPU_OP_HUBER:
      return node->compute_dtype == HPU_BFLOAT16 ? K_HUBER_BF16 : K_HUBER;
    case HPU_OP_CLAMP:
      switch (p->i[0] & 3) {
        case 1: return K_CLAMP_MIN;
        case 2: return K_CLAMP_MAX;
        default: return K_CLAMP;
      }
    case HPU_OP_POW:
      /* PyTorch's special exponents of a scalar exponent (float types). */
      if (fam != FAM_I && (p->scalar_operands & 2)) {
        double e = hpu_scalar_as_double(p->operand[1]);
        /* fp16 keeps pow for +-0.5 on PyTorch's CPU: pow(-inf, 0.5) is inf
         * and pow(-0, -0.5) is +inf there, not sqrt's NaN and -inf */
        int f16 = node->compute_dtype == HPU_FLOAT16;
        if (is_scalar_exact_pow(e, 2)) return K_POW_SQ;
        if (is_scalar_exact_pow(e, 3)) return K_POW_CUBE;
        if (is_scalar_exact_pow(e, 0.5) && !f16) return K_POW_SQRT;
        if (is_scalar_exact_pow(e, -0.5) && !f16) return K_POW_RSQRT;
        if (is_scalar_exact_pow(e, -1)) return K_POW_RECIP;
        if (is_scalar_exact_pow(e, -2)) return K_POW_INVSQ;
      }
      return K_POW;
    default: return K_COUNT;
  }
}

static int has_kernel(pw_kernel_t k, int fam) {
  if (k == K_COUNT) return 0;
  switch (fam) {
    case FAM_F: return tab_F[k] != NULL;
    case FAM_D: return tab_D[k] != NULL;
    default: return tab_I[k] != NULL;
  }
}

/* Validation --------------------------------------------------------------- */

static int popcount3(uint32_t m) { return (m & 1) + ((m >> 1) & 1) + ((m >> 2) & 1); }

static hpu_status_t validate_elementwise(const hpu_node_t *node, int arity) {
  const char *name = hpu_op_name(node->op);
  const hpu_pointwise_params_t *p = &node->params.pointwise;
  hpu_status_t st;
  uint32_t mask = p->scalar_operands & ((1u << arity) - 1u);
  if (p->scalar_operands & ~((1u << arity) - 1u))
    return hpu_error(INVALID, "%s: scalar operand mask 0x%x names operands beyond the op's %d",
                     name, (unsigned)p->scalar_operands, arity);
  int want = arity - popcount3(mask);
  if (node->num_inputs != want)
    return hpu_error(INVALID, "%s: expects %d tensor input(s) (%d operand(s), %d given as scalars), got %d",
                     name, want, arity, popcount3(mask), node->num_inputs);
  if (node->num_outputs != 1)
    return hpu_error(INVALID, "%s: expects 1 output, got %d", name, node->num_outputs);
  hpu_dtype_t c = node->compute_dtype;
  if (!hpu_dtype_is_valid(c)) return hpu_error(INVALID, "%s: invalid compute dtype %d", name, (int)c);
  int fam = fam_of(c);
  if (hpu_special_arity(node->op) >= 0 ? fam == FAM_I : !has_kernel(kernel_of(node, fam), fam))
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: not implemented for compute dtype %s", name,
                     hpu_dtype_name(c));
  for (int k = 0; k < arity; k++)
    if ((mask >> k) & 1)
      if ((st = hpu_check_scalar(name, "a scalar operand", p->operand[k]))) return st;
  for (int k = 0; k < 6; k++)
    if (p->s[k].kind != HPU_SCALAR_FLOAT && p->s[k].kind != HPU_SCALAR_INT &&
        p->s[k].kind != HPU_SCALAR_BOOL)
      return hpu_error(INVALID, "%s: parameter s[%d] has an invalid scalar kind", name, k);
  const hpu_tensor_t *out = &node->outputs[0];
  if ((st = hpu_check_tensor(name, "output", 0, out))) return st;
  if ((st = hpu_check_output(name, out))) return st;
  for (int i = 0; i < node->num_inputs; i++) {
    if ((st = hpu_check_tensor(name, "input", i, &node->inputs[i]))) return st;
    if ((st = hpu_check_broadcast(name, i, &node->inputs[i], out))) return st;
    if ((st = hpu_check_overlap(name, out, i, &node->inputs[i], 1))) return st;
  }
  return HPU_SUCCESS;
}

static hpu_status_t validate_tri(const hpu_node_t *node) {
  const char *name = hpu_op_name(node->op);
  hpu_status_t st;
  if (node->num_inputs != 1 || node->num_outputs != 1)
    return hpu_error(INVALID, "%s: expects 1 input and 1 output, got %d and %d", name,
                     node->num_inputs, node->num_outputs);
  const hpu_tensor_t *in = &node->inputs[0], *out = &node->outputs[0];
  if ((st = hpu_check_tensor(name, "output", 0, out))) return st;
  if ((st = hpu_check_tensor(name, "input", 0, in))) return st;
  if (out->ndim < 2)
    return hpu_error(INVALID, "%s: input tensor must have at least 2 dimensions", name);
  if (in->dtype != out->dtype)
    return hpu_error(INVALID, "%s: input is %s but the output is %s", name,
                     hpu_dtype_name(in->dtype), hpu_dtype_name(out->dtype));
  int same = in->ndim == out->ndim;
  for (int d = 0; same && d < in->ndim; d++) same = in->sizes[d] == out->sizes[d];
  if (!same) {
    char a[96], b[96];
    hpu_shape_str(in, a, sizeof a);
    hpu_shape_str(out, b, sizeof b);
    return hpu_error(INVALID, "%s: input shape %s differs from the output's %s", name, a, b);
  }
  if ((st = hpu_check_output(name, out))) return st;
  return hpu_check_overlap(name, out, 0, in, 1);
}

hpu_status_t hpu_validate_pointwise(const hpu_node_t *node) {
  switch (node->op) {
    case HPU_OP_TRIU: case HPU_OP_TRIL: return validate_tri(node);
    case HPU_OP_FUSED_ADAM: case HPU_OP_FUSED_SGD: return hpu_pw_validate_optim(node);
    default: break;
  }
  int arity = arity_of(node->op);
  if (arity < 0)
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: no kernel in this build", hpu_op_name(node->op));
  return validate_elementwise(node, arity);
}

/* Execution ------------------------------------------------------------------ */

static void set_scalar(pw_ctx_t *x, int k, hpu_scalar_t s, int keep_float) {
  double d = hpu_scalar_as_double(s);
  float f = (float)d;
  x->sF[k] = keep_float ? f : hpu_round_to(f, x->cdt);
  x->sD[k] = d;
  x->sI[k] = hpu_narrow_int(s.kind == HPU_SCALAR_FLOAT ? hpu_f2i(s.f) : s.i, x->cdt);
}

static hpu_status_t run_elementwise(const hpu_node_t *node) {
  const hpu_pointwise_params_t *p = &node->params.pointwise;
  pw_ctx_t x;
  atomic_int zero_div = 0;
  memset(&x, 0, sizeof x);
  x.zero_div = &zero_div;
  x.arity = arity_of(node->op);
  x.cdt = node->compute_dtype;
  x.fam = fam_of(x.cdt);
  x.dto = node->outputs[0].dtype;
  /* special ops: any valid index for the lookups below, then replaced */
  pw_kernel_t k = hpu_special_arity(node->op) >= 0 ? K_NEG : kernel_of(node, x.fam);
#if HPU_HAVE_ISA_CLONES
  hpu_isa_t isa = hpu_kernels_isa();
  x.isa = isa;
  x.kF = pick_kF(k, isa);
#else
  x.kF = tab_F[k];
#endif
  x.kD = tab_D[k];
  x.kI = tab_I[k];
  if (hpu_special_arity(node->op) >= 0) x.op = node->op, x.kF = kF_special, x.kD = kD_special;
  for (int j = 0; j < 6; j++) {
    double d = hpu_scalar_as_double(p->s[j]);
    x.pF[j] = (float)d;
    x.pD[j] = d;
    x.pI[j] = p->s[j].kind == HPU_SCALAR_FLOAT ? hpu_f2i(p->s[j].f) : p->s[j].i;
  }
  const hpu_tensor_t *ins[3] = {NULL, NULL, NULL};
  int next = 0;
  for (int j = 0; j < x.arity; j++) {
    if ((p->scalar_operands >> j) & 1) {
      /* POW's exponent and LERP's weight keep float precision. */
      int keep = (node->op == HPU_OP_POW && j == 1) || (node->op == HPU_OP_LERP && j == 2);
      set_scalar(&x, j, p->operand[j], keep);
      x.src[j] = -1;
    } else {
      ins[next] = &node->inputs[next];
      x.dt[j] = ins[next]->dtype;
      x.src[j] = 1 + next;
      next++;
    }
  }
  hpu_iter_t it;
  hpu_iter_build(&it, &node->outputs[0], ins, next,
                 node->op == HPU_OP_ARANGE ? HPU_ITER_KEEP_ORDER : 0);
  hpu_iter_for_each(&it, pw_loop, &x, HPU_GRAIN);
  if (atomic_load(&zero_div)) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "ZeroDivisionError");
  return HPU_SUCCESS;
}

/* TRIU / TRIL: keep or zero each element by its (row, col). */
typedef struct {
  int64_t rows, cols, diag;
  int upper;
  size_t esz;
} tri_ctx_t;

static void tri_loop(void *vctx, char **data, const int64_t *st, int64_t n, int64_t index) {
  const tri_ctx_t *t = vctx;
  for (int64_t i = 0; i < n; i++) {
    int64_t flat = index + i;
    int64_t col = flat % t->cols, row = (flat / t->cols) % t->rows;
    int keep = t->upper ? col - row >= t->diag : col - row <= t->diag;
    char *o = data[0] + i * st[0];
    if (keep) {
      const char *a = data[1] + i * st[1];
      if (o != a) memcpy(o, a, t->esz);
    } else {
      memset(o, 0, t->esz);
    }
  }
}

static void run_tri(const hpu_node_t *node) {
  const hpu_tensor_t *out = &node->outputs[0];
  tri_ctx_t t = {out->sizes[out->ndim - 2], out->sizes[out->ndim - 1],
                 node->params.pointwise.i[0], node->op == HPU_OP_TRIU,
                 hpu_dtype_size(out->dtype)};
  const hpu_tensor_t *ins[1] = {&node->inputs[0]};
  hpu_iter_t it;
  hpu_iter_build(&it, out, ins, 1, HPU_ITER_KEEP_ORDER);
  hpu_iter_for_each(&it, tri_loop, &t, HPU_GRAIN);
}

hpu_status_t hpu_execute_pointwise(const hpu_node_t *node) {
  switch (node->op) {
    case HPU_OP_FUSED_ADAM: case HPU_OP_FUSED_SGD:
      hpu_pw_run_optim(node);
      return HPU_SUCCESS;
    default: break;
  }
  if (node->num_outputs < 1 || hpu_tensor_numel(&node->outputs[0]) == 0) return HPU_SUCCESS;
  switch (node->op) {
    case HPU_OP_TRIU: case HPU_OP_TRIL: run_tri(node); return HPU_SUCCESS;
    default: break;
  }
  if (arity_of(node->op) < 0)
    return hpu_error(HPU_ERROR_INTERNAL, "%s: no kernel in this build", hpu_op_name(node->op));
  return run_elementwise(node);
}

/* Tiles for lazy-mode fusion (kernels/pw_tile.h) ------------------------------ */

#include "kernels/pw_tile.h"

_Static_assert(sizeof(pw_ctx_t) <= HPU_PW_TILE_CTX_BYTES, "grow HPU_PW_TILE_CTX_BYTES");

int hpu_pw_tile_supported(const hpu_node_t *node) {
  int arity = arity_of(node->op);
  hpu_dtype_t c = node->compute_dtype;
  if (arity < 1 || node->num_outputs != 1) return 0;
  if (c != HPU_FLOAT32 && c != HPU_BFLOAT16 && c != HPU_FLOAT16) return 0;
  if (node->outputs[0].dtype != c) return 0;
  for (int i = 0; i < node->num_inputs; i++)
    if (node->inputs[i].dtype != c) return 0;
  return hpu_special_arity(node->op) >= 0 || has_kernel(kernel_of(node, FAM_F), FAM_F);
}

void hpu_pw_tile_prepare(const hpu_node_t *node, hpu_pw_tile_t *t) {
  const hpu_pointwise_params_t *p = &node->params.pointwise;
  pw_ctx_t *x = (pw_ctx_t *)t->ctx;
  memset(t, 0, sizeof *t);
  x->arity = t->arity = arity_of(node->op);
  x->cdt = x->dto = node->compute_dtype;
  x->fam = FAM_F;
  pw_kernel_t k = hpu_special_arity(node->op) >= 0 ? K_NEG : kernel_of(node, FAM_F);
#if HPU_HAVE_ISA_CLONES
  hpu_isa_t isa = hpu_kernels_isa();
  x->isa = isa;
  x->kF = pick_kF(k, isa);
#else
  x->kF = tab_F[k];
#endif
  if (hpu_special_arity(node->op) >= 0) x->op = node->op, x->kF = kF_special;
  for (int j = 0; j < 6; j++) x->pF[j] = (float)hpu_scalar_as_double(p->s[j]);
  for (int j = 0; j < 6; j++) x->pD[j] = hpu_scalar_as_double(p->s[j]);
  int next = 0;
  for (int j = 0; j < t->arity; j++) {
    if ((p->scalar_operands >> j) & 1) { /* as run_elementwise */
      int keep = (node->op == HPU_OP_POW && j == 1) || (node->op == HPU_OP_LERP && j == 2);
      set_scalar(x, j, p->operand[j], keep);
      t->scalar[j] = x->sF[j];
      t->input_of[j] = -1;
    } else {
      t->input_of[j] = next++;
    }
  }
}

void hpu_pw_tile_run(const hpu_pw_tile_t *t, int64_t n, float *out, const float *a,
                     const float *b, const float *c) {
  const pw_ctx_t *x = (const pw_ctx_t *)t->ctx;
  x->kF(n, out, a, b, c, x, 0);
}
