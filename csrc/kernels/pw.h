/* Internal interface between the pointwise family's files. */
#ifndef HPU_KERNELS_PW_H
#define HPU_KERNELS_PW_H

#include <stdint.h>

#include "hpu/op.h"
#include "hpu/status.h"

/* FUSED_ADAM / FUSED_SGD (pw_optim.c). */
hpu_status_t hpu_pw_validate_optim(const hpu_node_t *node);
void hpu_pw_run_optim(const hpu_node_t *node);

/* d[j] = e^(s[j] - c) for j < n, the bits of pw_expf (pw_rowexp.c): the
 * row exp of softmax in the portable build. */
void hpu_pw_exp_row_generic(float *d, const float *s, int64_t n, float c);

#endif
