/* 16 float lanes as one GCC vector value, for the row loops of the
 * reductions and norms. GCC keeps a few v16f accumulators in registers on
 * every ISA clone (one zmm, two ymm or four xmm each). With float acc[64]
 * arrays it kept them on the stack: in a row sum it spilled them after the
 * loop and reloaded them for the lane folds (rows of 256 at half speed), and
 * in softmax's exp loop every add went through a store and a reload, a
 * chain of store-forwarding latency per block of 64.
 *
 * Loads and stores are macros (GNU statement expressions): a helper function
 * taking or returning v16f would have a different ABI per ISA clone. */
#ifndef HPU_KERNELS_V16_H
#define HPU_KERNELS_V16_H

#include <stdint.h>

typedef float v16f __attribute__((vector_size(64)));
typedef uint32_t v16u __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
typedef uint16_t v16h __attribute__((vector_size(32)));

#define VLD_F32(p)                         \
  ({                                       \
    v16f v_;                               \
    __builtin_memcpy(&v_, (p), sizeof v_); \
    v_;                                    \
  })
#define VLD_BF16(p)                                    \
  ({                                                   \
    v16h h_;                                           \
    __builtin_memcpy(&h_, (p), sizeof h_);             \
    v16u u_ = __builtin_convertvector(h_, v16u) << 16; \
    v16f v_;                                           \
    __builtin_memcpy(&v_, &u_, sizeof v_);             \
    v_;                                                \
  })
#define VSQ_ABS(x)                         \
  ({                                       \
    v16f x_ = (x);                         \
    v16u u_;                               \
    __builtin_memcpy(&u_, &x_, sizeof u_); \
    u_ &= 0x7fffffffu;                     \
    __builtin_memcpy(&x_, &u_, sizeof x_); \
    x_;                                    \
  })
/* a > b ? a : b lane by lane (a NaN in a is passed over, as the scalar
 * form does); one compare and one blend. */
#define VMAX_GT(a, b)                          \
  ({                                           \
    v16f a_ = (a), b_ = (b);                   \
    v16i m_ = a_ > b_;                         \
    v16i ai_, bi_;                             \
    __builtin_memcpy(&ai_, &a_, sizeof ai_);   \
    __builtin_memcpy(&bi_, &b_, sizeof bi_);   \
    ai_ = (ai_ & m_) | (bi_ & ~m_);            \
    __builtin_memcpy(&a_, &ai_, sizeof a_);    \
    a_;                                        \
  })

#endif
