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

/* The special-function family (hpu/ops_special.def, special*.c), run by
 * this engine: its math arity (1 or 2; -1 for an op of another family), and
 * its chunk kernels, o[i] = f(a[i], b[i]) for i < n (b unused by unary
 * ops), with s the node's params.pointwise.s as doubles. */
int hpu_special_arity(hpu_op_t op);
void hpu_special_run_f(hpu_op_t op, int64_t n, float *o, const float *a, const float *b,
                       const double *s);
void hpu_special_run_d(hpu_op_t op, int64_t n, double *o, const double *a, const double *b,
                       const double *s);

#endif
