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

#include "kernels/cvt.h"

typedef float vf16_t __attribute__((vector_size(64)));
typedef float vf8_t __attribute__((vector_size(32)));
typedef float vf4_t __attribute__((vector_size(16)));
#define VT_avx512 vf16_t
#define VT_avx2 vf8_t
#define VT_generic vf4_t

/* native vectors per 16 lanes, and lanes per native vector */
#define VNV(VT) (64 / (int)sizeof(VT))
#define VW(VT) ((int)sizeof(VT) / 4)

/* one element as float (LD_*) and a native vector of them (VLD_*) */
#define LD_F32(x) (x)
#define LD_BF16(x) hpu_cvt_bf16_f32(x)
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

/* VMAXF / VMINF: VMAX_GT / VMIN_LT of two float vectors of type VT in one
 * instruction. x86's max and min are defined as exactly these selects (the
 * second operand on ties and NaN), and the compare-and-blend GCC makes of
 * the generic forms costs two, on the loop-carried path of a row max.
 * VBITS: the lanes of a VT comparison mask m as bits, lane 0 in bit 0. */
#if defined(__x86_64__)
#include <immintrin.h>
#define VMAXF_vf16_t(a, b) ((vf16_t)_mm512_max_ps((__m512)(a), (__m512)(b)))
#define VMINF_vf16_t(a, b) ((vf16_t)_mm512_min_ps((__m512)(a), (__m512)(b)))
#define VMAXF_vf8_t(a, b) ((vf8_t)_mm256_max_ps((__m256)(a), (__m256)(b)))
#define VMINF_vf8_t(a, b) ((vf8_t)_mm256_min_ps((__m256)(a), (__m256)(b)))
#define VMAXF_vf4_t(a, b) ((vf4_t)_mm_max_ps((__m128)(a), (__m128)(b)))
#define VMINF_vf4_t(a, b) ((vf4_t)_mm_min_ps((__m128)(a), (__m128)(b)))
#define VBITS_vf16_t(m) ((uint64_t)_mm512_movepi32_mask((__m512i)(m)))
#define VBITS_vf8_t(m) ((uint64_t)_mm256_movemask_ps((__m256)(m)))
#define VBITS_vf4_t(m) ((uint64_t)_mm_movemask_ps((__m128)(m)))
/* two steps, so that a VT given as VT_avx512 is expanded before pasting */
#define VMAXF_(VT, a, b) VMAXF_##VT(a, b)
#define VMINF_(VT, a, b) VMINF_##VT(a, b)
#define VBITS_(VT, m) VBITS_##VT(m)
#define VMAXF(VT, a, b) VMAXF_(VT, a, b)
#define VMINF(VT, a, b) VMINF_(VT, a, b)
#define VBITS(VT, m) VBITS_(VT, m)
#else
#define VMAXF(VT, a, b) VMAX_GT(a, b)
#define VMINF(VT, a, b) VMIN_LT(a, b)
#define VBITS(VT, m)                                                    \
  ({                                                                    \
    __typeof__(m) vbits_ = (m);                                         \
    uint64_t bits_ = 0;                                                 \
    for (int l_ = 0; l_ < (int)(sizeof vbits_ / 4); l_++)               \
      bits_ |= (uint64_t)(vbits_[l_] != 0) << l_;                       \
    bits_;                                                              \
  })
#endif

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
  for (int gi_ = 0; gi_ < VNV(VT); gi_++) g[gi_] = VMAXF(VT, V(VT, (k) + gi_ * VW(VT)), g[gi_])
#define G_ADD(VT, g, h) \
  for (int gi_ = 0; gi_ < VNV(VT); gi_++) g[gi_] += h[gi_]
/* lane j (0..15) of g */
#define G_LANE(VT, g, j) g[(j) / VW(VT)][(j) % VW(VT)]

/* The 16 lanes of a group (float or int lanes) folded to one value through
 * the same tree on every ISA: lane j with lane j+8, then j+4, j+2, j+1;
 * OP(hi, lo) combines two vectors lane by lane. In registers: reading the
 * lanes one by one (G_LANE in a loop) went through the stack, and for rows
 * of 1024 that fold cost as much as the row's loop. */
#define VFOLD4_(v, OP)                                                           \
  ({                                                                             \
    __typeof__(v) vf4_ = (v);                                                    \
    vf4_ = OP(__builtin_shufflevector(vf4_, vf4_, 2, 3, 2, 3), vf4_);            \
    vf4_ = OP(__builtin_shufflevector(vf4_, vf4_, 1, 1, 1, 1), vf4_);            \
    vf4_[0];                                                                     \
  })
#define VFOLD8_(v, OP)                                                           \
  ({                                                                             \
    __typeof__(v) vf8_ = (v);                                                    \
    VFOLD4_(OP(__builtin_shufflevector(vf8_, vf8_, 4, 5, 6, 7),                  \
               __builtin_shufflevector(vf8_, vf8_, 0, 1, 2, 3)), OP);            \
  })
#define G_FOLD_vf16_t(g, OP)                                                     \
  ({                                                                             \
    __typeof__(g[0]) vf16_ = g[0];                                               \
    VFOLD8_(OP(__builtin_shufflevector(vf16_, vf16_, 8, 9, 10, 11, 12, 13, 14, 15), \
               __builtin_shufflevector(vf16_, vf16_, 0, 1, 2, 3, 4, 5, 6, 7)), OP); \
  })
#define G_FOLD_vf8_t(g, OP) VFOLD8_(OP(g[1], g[0]), OP)
#define G_FOLD_vf4_t(g, OP) VFOLD4_(OP(OP(g[3], g[1]), OP(g[2], g[0])), OP)
#define G_FOLD_(VT, g, OP) G_FOLD_##VT(g, OP)
#define G_FOLD(VT, g, OP) G_FOLD_(VT, g, OP)
/* The four groups g##0..g##3 (64 lanes) folded the same way, after
 * OP(OP(g3, g1), OP(g2, g0)) lane by lane; the groups are left as they are. */
#define G_FOLD4(VT, g, OP)                                                      \
  ({                                                                            \
    __typeof__(g##0[0]) f4_[VNV(VT)];                                           \
    for (int gi_ = 0; gi_ < VNV(VT); gi_++)                                     \
      f4_[gi_] = OP(OP(g##3[gi_], g##1[gi_]), OP(g##2[gi_], g##0[gi_]));        \
    G_FOLD(VT, f4_, OP);                                                        \
  })

#endif
