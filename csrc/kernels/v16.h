/* 16 float lanes in the clone's own registers, for the row loops of the
 * reductions and norms: one vf16_t (zmm) in the AVX-512 clones, two vf8_t
 * (ymm) in the AVX2 clones, four vf4_t (xmm) in the generic x86-64 build. A
 * lane group is an array `VT g[VNV(VT)]` indexed by constants after GCC's
 * unrolling, so it lives in registers.
 *
 * Why not float acc[64] arrays: GCC kept them on the stack. In a row sum it
 * spilled them after the loop and reloaded them for the lane folds (rows of
 * 256 at half speed), and in softmax's exp loop every add went through a
 * store and a reload, a chain of store-forwarding latency per block of 64.
 * Why not one 64-byte vector on every ISA: without 512-bit registers GCC
 * keeps it in memory and moves it through general registers; the AVX2
 * clones of row sums ran at 0.2 of torch's AVX2 kernel that way.
 *
 * Lane j of a group is element j of the 16 it was loaded from, on every
 * ISA, so folds written lane by lane give the same bits everywhere.
 *
 * Everything is a macro (GNU statement expressions): a helper function
 * taking or returning a vector would have a different ABI per ISA clone. */
#ifndef HPU_KERNELS_V16_H
#define HPU_KERNELS_V16_H

#include <stdint.h>

typedef float vf16_t __attribute__((vector_size(64)));
typedef float vf8_t __attribute__((vector_size(32)));
typedef float vf4_t __attribute__((vector_size(16)));
#define VT_avx512 vf16_t
#define VT_avx2 vf8_t
#define VT_generic vf4_t

/* native vectors per 16 lanes, and lanes per native vector */
#define VNV(VT) (64 / (int)sizeof(VT))
#define VW(VT) ((int)sizeof(VT) / 4)

#define VLD_F32(VT, p)                     \
  ({                                       \
    VT v_;                                 \
    __builtin_memcpy(&v_, (p), sizeof v_); \
    v_;                                    \
  })
#define VLD_BF16(VT, p)                                                          \
  ({                                                                             \
    typedef uint16_t h_t_ __attribute__((vector_size(sizeof(VT) / 2)));          \
    typedef uint32_t u_t_ __attribute__((vector_size(sizeof(VT))));              \
    h_t_ h_;                                                                     \
    __builtin_memcpy(&h_, (p), sizeof h_);                                       \
    u_t_ u_ = __builtin_convertvector(h_, u_t_) << 16;                           \
    VT v_;                                                                       \
    __builtin_memcpy(&v_, &u_, sizeof v_);                                       \
    v_;                                                                          \
  })
#define VST_F32(p, v)                      \
  do {                                     \
    __typeof__(v) s_ = (v);                \
    __builtin_memcpy((p), &s_, sizeof s_); \
  } while (0)
/* |x| lane by lane (clears the sign bits) */
#define VSQ_ABS(x)                         \
  ({                                       \
    __typeof__(x) x_ = (x);                \
    __typeof__(x_ > x_) u_;                \
    __builtin_memcpy(&u_, &x_, sizeof u_); \
    u_ &= 0x7fffffff;                      \
    __builtin_memcpy(&x_, &u_, sizeof x_); \
    x_;                                    \
  })
/* m ? a : b lane by lane, m a vector comparison of a and b's type (a
 * blend through the integer lanes: C has no vector ?:). */
#define VSEL(m, a, b)                                        \
  ({                                                         \
    __typeof__(b) vsel_a_ = (a), vsel_b_ = (b);              \
    __typeof__(m) vsel_m_ = (m), vsel_ai_, vsel_bi_;         \
    __builtin_memcpy(&vsel_ai_, &vsel_a_, sizeof vsel_ai_);  \
    __builtin_memcpy(&vsel_bi_, &vsel_b_, sizeof vsel_bi_);  \
    vsel_ai_ = (vsel_ai_ & vsel_m_) | (vsel_bi_ & ~vsel_m_); \
    __builtin_memcpy(&vsel_a_, &vsel_ai_, sizeof vsel_a_);   \
    vsel_a_;                                                 \
  })
/* a > b ? a : b and a < b ? a : b lane by lane (a NaN in a is passed over,
 * as the scalar forms do); a and b are evaluated once each. The locals'
 * names are the macros' own: a caller's x_ passed in must not be shadowed. */
#define VMAX_GT(a, b)                                        \
  ({                                                         \
    __typeof__(b) vmax_a_ = (a), vmax_b_ = (b);              \
    VSEL(vmax_a_ > vmax_b_, vmax_a_, vmax_b_);               \
  })
#define VMIN_LT(a, b)                                        \
  ({                                                         \
    __typeof__(b) vmin_a_ = (a), vmin_b_ = (b);              \
    VSEL(vmin_a_ < vmin_b_, vmin_a_, vmin_b_);               \
  })

/* Lane groups. V(VT, k) is the native vector of the elements k.. of the
 * caller's row; G_ACC adds the 16 elements from k into g. */
#define G_DECL(VT, g, init)                                  \
  VT g[VNV(VT)];                                             \
  for (int gi_ = 0; gi_ < VNV(VT); gi_++) g[gi_] = (VT){0} + (init)
/* Four lane groups g##0..g##3 (64 lanes) */
#define G_DECL4(VT, g, init) \
  G_DECL(VT, g##0, init);    \
  G_DECL(VT, g##1, init);    \
  G_DECL(VT, g##2, init);    \
  G_DECL(VT, g##3, init)
#define G_ACC(VT, g, V, k) \
  for (int gi_ = 0; gi_ < VNV(VT); gi_++) g[gi_] += V(VT, (k) + gi_ * VW(VT))
#define G_MAX(VT, g, V, k) \
  for (int gi_ = 0; gi_ < VNV(VT); gi_++) g[gi_] = VMAX_GT(V(VT, (k) + gi_ * VW(VT)), g[gi_])
#define G_ADD(VT, g, h) \
  for (int gi_ = 0; gi_ < VNV(VT); gi_++) g[gi_] += h[gi_]
#define G_MAXG(VT, g, h) \
  for (int gi_ = 0; gi_ < VNV(VT); gi_++) g[gi_] = VMAX_GT(h[gi_], g[gi_])
/* lane j (0..15) of g */
#define G_LANE(VT, g, j) g[(j) / VW(VT)][(j) % VW(VT)]

#endif
