/* Matrix-vector products (gemv.c): the m == 1 shapes of HPU_OP_MATMUL. */
#ifndef HPU_KERNELS_GEMV_H
#define HPU_KERNELS_GEMV_H

#include <stdint.h>

#include "kernels/gemm.h"

/* nbatch products C = alpha * A @ B + beta * C of g's shape, with g->m == 1,
 * batch b at byte offsets offs[3b .. 3b+2] from g->a, g->b, g->c (offs may be
 * NULL when nbatch is 1). Returns 0 when done, -1 when this path does not
 * take the product (no AVX-512, another dtype, B in neither dense layout, or
 * out of host memory): nothing is written then. */
int hpu_gemv_run(const hpu_gemm_t *g, int64_t nbatch, const int64_t *offs);

#endif
