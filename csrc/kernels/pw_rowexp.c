/* e^(s[j] - c) over a row, for softmax's rows (nn_norm.c) on the AVX2 and
 * portable clones; AVX-512 uses exp16 in place. It lives here, among the
 * pointwise sources, for their compile flags: without -fno-trapping-math
 * GCC keeps pw_expf's NaN and range selects as branches on CPUs without mask
 * registers and the loop stays scalar, and the same flags on all of
 * nn_norm.c made its layer norm rows 5% slower on AVX-512. */
#include <stdint.h>

#include "kernels/isa.h"
#include "kernels/pw.h"
#include "kernels/pw_math.h"

#define DEF_EXP_ROW(ISA)                                                                  \
  HPU_ATTR_##ISA void hpu_pw_exp_row_##ISA(float *d, const float *s, int64_t n, float c) { \
    for (int64_t j = 0; j < n; j++) d[j] = pw_expf(s[j] - c);                             \
  }

DEF_EXP_ROW(generic)
#if HPU_HAVE_ISA_CLONES
DEF_EXP_ROW(avx2)
#endif
