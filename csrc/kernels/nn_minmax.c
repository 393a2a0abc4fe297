/* Max / min over a contiguous float32 or bfloat16 run, and the index of its
 * first max / min, vectorised per ISA: amax / amin rows (nn_reduce.c) and
 * max / min / argmax / argmin along a dim (hpu_nn_argreduce); and topk's
 * scan for the next element that enters its kept k (nn_index.c).
 *
 * Max and min take 64 elements at a time and keep two lane groups (32
 * lanes, v16.h) of the best values so far; the arg form keeps 64 lanes,
 * each with the index of its value, replaced only by a strictly better
 * element, as the scalar scan is, so a lane holds the first position of its
 * own best; the run's first best is then the smallest index among the
 * lanes equal to the folded best. NaN never enters a lane (x > g is false);
 * a running sum says whether the run may hold one, and the answer is then
 * NaN, or the first NaN's index, as in PyTorch. Values and indices are
 * exact and the sign of a zero is the scalar scan's, so the result does not
 * depend on the ISA. */
#include <math.h>
#include <stdint.h>

#include "kernels/cvt.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/nn_util.h"
#include "kernels/v16.h"

/* the better of h and g lane by lane (g on ties), by the caller's mx */
#define BEST_OF(h, g) (mx ? VMAX_GT(h, g) : VMIN_LT(h, g))
/* the smaller of two index vectors */
#define LOWER_OF(h, g) VMIN_LT(h, g)

/* NaN detection in the lanes: a sum s of the elements (one add per vector;
 * a compare per vector, and folding its mask, cost as much as the max
 * itself). The sum is finite unless the run holds a NaN or an infinity (or
 * overflows); then the run is scanned for a NaN exactly. */
#define ADD_OF(h, g) ((h) + (g))
#define SUM_IS_FINITE(VT, s)                                                 \
  ({                                                                         \
    float t_ = G_FOLD(VT, s, ADD_OF);                                        \
    t_ - t_ == 0;                                                            \
  })
#define ANY_NAN(LD, q, n)                                                    \
  ({                                                                         \
    int any_ = 0;                                                            \
    for (int64_t k_ = 0; k_ < (n); k_++) any_ |= LD((q)[k_]) != LD((q)[k_]); \
    any_;                                                                    \
  })

/* 64 elements at p: max / min of the four 16-element groups taken in pairs
 * into the two best groups a0 and a1, and their sum into s. Pairing does
 * not change the value (the max of numbers does not depend on the order)
 * and halves the lanes folded at the end of each row, which made amax over
 * rows of 1024 floats a few percent faster than four groups of their own.
 * A NaN can displace
 * the other element of its pair, but never enters a lane (the pair's result
 * goes first, as x); the sum then says the run holds a NaN, and the answer
 * is NaN anyway. */
#define MINMAX_BLOCK64(VT, VLD, p)                                           \
  for (int gi_ = 0; gi_ < VNV(VT); gi_++) {                                  \
    VT x0_ = VLD(VT, (p) + gi_ * VW(VT)), x1_ = VLD(VT, (p) + 16 + gi_ * VW(VT)); \
    VT x2_ = VLD(VT, (p) + 32 + gi_ * VW(VT)), x3_ = VLD(VT, (p) + 48 + gi_ * VW(VT)); \
    s[gi_] += (x0_ + x1_) + (x2_ + x3_);                                     \
    a0[gi_] = mx ? VMAXF(VT, VMAXF(VT, x0_, x1_), a0[gi_])                   \
                 : VMINF(VT, VMINF(VT, x0_, x1_), a0[gi_]);                  \
    a1[gi_] = mx ? VMAXF(VT, VMAXF(VT, x2_, x3_), a1[gi_])                   \
                 : VMINF(VT, VMINF(VT, x2_, x3_), a1[gi_]);                  \
  }
/* The value is exact whatever the order, but not the sign of a zero: of
 * -0 and 0, the scalar scan keeps the first (neither is greater). When the
 * best is a zero, that first zero is looked up, so every ISA and every
 * lane layout gives the scan's bits. */
#define FIRST_ZERO(LD, q, n)                                                 \
  ({                                                                         \
    float z_ = 0;                                                            \
    for (int64_t k_ = 0; k_ < (n); k_++)                                     \
      if (LD((q)[k_]) == 0) {                                                \
        z_ = LD((q)[k_]);                                                    \
        break;                                                               \
      }                                                                      \
    z_;                                                                      \
  })
#define DEF_MINMAX(NAME, T, LD, VLD, VT, ISA)                                \
  static HPU_ATTR_##ISA float NAME##_##ISA(const void *pv, int64_t n, int mx, \
                                           int *nan) {                       \
    const T *q = pv;                                                         \
    float r = mx ? -INFINITY : INFINITY;                                     \
    int64_t i = 0;                                                           \
    int finite = 1;                                                          \
    if (n >= 64) {                                                           \
      G_DECL(VT, a0, r);                                                     \
      G_DECL(VT, a1, r);                                                     \
      G_DECL(VT, s, 0);                                                      \
      for (; i + 64 <= n; i += 64) MINMAX_BLOCK64(VT, VLD, q + i);           \
      for (int gi_ = 0; gi_ < VNV(VT); gi_++) a0[gi_] = BEST_OF(a1[gi_], a0[gi_]); \
      r = G_FOLD(VT, a0, BEST_OF);                                           \
      finite = SUM_IS_FINITE(VT, s);                                         \
    }                                                                        \
    int isnan_ = 0;                                                          \
    for (; i < n; i++) {                                                     \
      float v = LD(q[i]);                                                    \
      isnan_ |= v != v;                                                      \
      r = mx ? (v > r ? v : r) : (v < r ? v : r);                            \
    }                                                                        \
    *nan = isnan_ || (!finite && ANY_NAN(LD, q, n));                         \
    if (r == 0 && !*nan) r = FIRST_ZERO(LD, q, n);                           \
    return r;                                                                \
  }

/* One group g of 16 lanes and its sum group s, with each lane's index (ix)
 * following its value. */
#define ARG_ACC16(VT, g, ix, pos, s, VLD, p)                                 \
  for (int gi_ = 0; gi_ < VNV(VT); gi_++) {                                  \
    VT x_ = VLD(VT, (p) + gi_ * VW(VT));                                     \
    s[gi_] += x_;                                                            \
    iv_t better_ = mx ? x_ > g[gi_] : x_ < g[gi_];                           \
    g[gi_] = mx ? VMAXF(VT, x_, g[gi_]) : VMINF(VT, x_, g[gi_]);             \
    ix[gi_] = VSEL(better_, pos[gi_], ix[gi_]);                              \
    pos[gi_] += 64;                                                          \
  }
/* Lane group ix of indices (and pos, the current block's positions) for the
 * 16 lanes starting at element `first`. */
#define ARG_DECL(VT, ix, pos, first)                                         \
  iv_t ix[VNV(VT)], pos[VNV(VT)];                                            \
  for (int gi_ = 0; gi_ < VNV(VT); gi_++)                                    \
    for (int l_ = 0; l_ < VW(VT); l_++) ix[gi_][l_] = (first) + gi_ * VW(VT) + l_; \
  for (int gi_ = 0; gi_ < VNV(VT); gi_++) pos[gi_] = ix[gi_]
/* cand[i] = ix[i] where g[i] equals the best b, else INT32_MAX */
#define ARG_CAND(VT, cand, g, ix, b)                                         \
  for (int gi_ = 0; gi_ < VNV(VT); gi_++)                                    \
    cand[gi_] = VSEL(g[gi_] == (b), ix[gi_], (iv_t){0} + INT32_MAX)
#define DEF_ARG(NAME, T, LD, VLD, VT, ISA)                                   \
  static HPU_ATTR_##ISA int64_t NAME##_##ISA(const void *pv, int64_t n, int mx) { \
    typedef int32_t iv_t __attribute__((vector_size(sizeof(VT))));           \
    const T *q = pv;                                                         \
    float b = mx ? -INFINITY : INFINITY;                                     \
    int64_t best = 0, i = 0;                                                 \
    int finite = 1;                                                          \
    if (n >= 64 && n <= (int64_t)INT32_MAX - 64) {                           \
      G_DECL4(VT, a, b);                                                     \
      ARG_DECL(VT, i0, p0, 0);                                               \
      ARG_DECL(VT, i1, p1, 16);                                              \
      ARG_DECL(VT, i2, p2, 32);                                              \
      ARG_DECL(VT, i3, p3, 48);                                              \
      G_DECL(VT, s0, 0);                                                     \
      G_DECL(VT, s1, 0);                                                     \
      for (; i + 64 <= n; i += 64) {                                         \
        ARG_ACC16(VT, a0, i0, p0, s0, VLD, q + i);                           \
        ARG_ACC16(VT, a1, i1, p1, s1, VLD, q + i + 16);                      \
        ARG_ACC16(VT, a2, i2, p2, s0, VLD, q + i + 32);                      \
        ARG_ACC16(VT, a3, i3, p3, s1, VLD, q + i + 48);                      \
      }                                                                      \
      b = G_FOLD4(VT, a, BEST_OF);                                           \
      iv_t c0[VNV(VT)], c1[VNV(VT)], c2[VNV(VT)], c3[VNV(VT)];               \
      ARG_CAND(VT, c0, a0, i0, b);                                           \
      ARG_CAND(VT, c1, a1, i1, b);                                           \
      ARG_CAND(VT, c2, a2, i2, b);                                           \
      ARG_CAND(VT, c3, a3, i3, b);                                           \
      best = G_FOLD4(VT, c, LOWER_OF);                                       \
      G_ADD(VT, s0, s1);                                                     \
      finite = SUM_IS_FINITE(VT, s0);                                        \
    }                                                                        \
    int isnan_ = 0;                                                          \
    for (; i < n; i++) {                                                     \
      float v = LD(q[i]);                                                    \
      isnan_ |= v != v;                                                      \
      if (mx ? v > b : v < b) {                                              \
        b = v;                                                               \
        best = i;                                                            \
      }                                                                      \
    }                                                                        \
    if (isnan_ || !finite)                                                   \
      for (i = 0; i < n; i++)                                                \
        if (LD(q[i]) != LD(q[i])) return i;                                  \
    return best;                                                             \
  }

/* The first of n elements at p that a top-k row keeping thr as its last
 * item would take in (n when none): for the largest (desc) an element
 * greater than thr, or a NaN while thr is not; for the smallest one less
 * than thr, or any number while thr is NaN. 64 elements are tested at a
 * time: after a row's first few dozen elements, few enter. */
#define TAKES(x, t)                                                          \
  (desc ? ((x) > (t)) | ((x) != (x)) : thr_nan ? (x) == (x) : (x) < (t))
#define DEF_FIND(NAME, T, LD, VLD, VT, ISA)                                  \
  static HPU_ATTR_##ISA int64_t NAME##_##ISA(const void *pv, int64_t n, float thr, \
                                             int desc) {                     \
    typedef int32_t iv_t __attribute__((vector_size(sizeof(VT))));          \
    const T *q = pv;                                                         \
    int thr_nan = thr != thr;                                                \
    if (desc && thr_nan) return n;                                           \
    int64_t i = 0;                                                           \
    for (; i + 64 <= n; i += 64) {                                           \
      uint64_t bits = 0;                                                     \
      for (int j = 0; j < 4 * VNV(VT); j++) {                                \
        VT x_ = VLD(VT, q + i + j * VW(VT));                                 \
        iv_t m_ = TAKES(x_, thr);                                            \
        bits |= VBITS(VT, m_) << (j * VW(VT));                               \
      }                                                                      \
      if (bits) return i + __builtin_ctzll(bits);                            \
    }                                                                        \
    for (; i < n; i++) {                                                     \
      float v = LD(q[i]);                                                    \
      if (TAKES(v, thr)) return i;                                           \
    }                                                                        \
    return n;                                                                \
  }

#define DEF_SET(ISA)                                                         \
  DEF_MINMAX(minmax_f32, float, LD_F32, VLD_F32, VT_##ISA, ISA)              \
  DEF_MINMAX(minmax_bf16, uint16_t, LD_BF16, VLD_BF16, VT_##ISA, ISA)        \
  DEF_ARG(arg_f32, float, LD_F32, VLD_F32, VT_##ISA, ISA)                    \
  DEF_ARG(arg_bf16, uint16_t, LD_BF16, VLD_BF16, VT_##ISA, ISA)            \
  DEF_FIND(find_f32, float, LD_F32, VLD_F32, VT_##ISA, ISA)                  \
  DEF_FIND(find_bf16, uint16_t, LD_BF16, VLD_BF16, VT_##ISA, ISA)

DEF_SET(generic)
#if HPU_HAVE_ISA_CLONES
DEF_SET(avx2)
DEF_SET(avx512)
#endif

#if HPU_HAVE_ISA_CLONES
#define PICK(fn, dt)                                                         \
  (hpu_kernels_isa() == HPU_ISA_AVX512 ? (dt == HPU_FLOAT32 ? fn##_f32_avx512 : fn##_bf16_avx512) \
   : hpu_kernels_isa() == HPU_ISA_AVX2 ? (dt == HPU_FLOAT32 ? fn##_f32_avx2 : fn##_bf16_avx2) \
                                       : (dt == HPU_FLOAT32 ? fn##_f32_generic : fn##_bf16_generic))
#else
#define PICK(fn, dt) (dt == HPU_FLOAT32 ? fn##_f32_generic : fn##_bf16_generic)
#endif

hpu_nn_minmax_fn hpu_nn_minmax_for(hpu_dtype_t dt) { return PICK(minmax, dt); }

float hpu_nn_run_minmax(hpu_dtype_t dt, const void *p, int64_t n, int mx, int *nan) {
  return hpu_nn_minmax_for(dt)(p, n, mx, nan);
}

int64_t hpu_nn_run_argminmax(hpu_dtype_t dt, const void *p, int64_t n, int mx) {
  return PICK(arg, dt)(p, n, mx);
}

int64_t hpu_nn_run_find_topk_entry(hpu_dtype_t dt, const void *p, int64_t n, float thr, int desc) {
  return PICK(find, dt)(p, n, thr, desc);
}
