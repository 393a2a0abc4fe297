/* e^(s[j] - c) over a row, for softmax's rows (nn_norm.c) in the portable
 * build; AVX-512 and AVX2 use exp16 and exp8 in place. It lives here, among
 * the pointwise sources, for their compile flags: without
 * -fno-trapping-math GCC keeps pw_expf's NaN and range selects as branches
 * on CPUs without mask registers and the loop stays scalar, and the same
 * flags on all of nn_norm.c made its layer norm rows 5% slower on AVX-512. */
#include <stdint.h>

#include "kernels/pw.h"
#include "kernels/pw_math.h"

void hpu_pw_exp_row_generic(float *d, const float *s, int64_t n, float c) {
  for (int64_t j = 0; j < n; j++) d[j] = pw_expf(s[j] - c);
}
