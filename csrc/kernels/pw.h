/* Internal interface between the pointwise family's files. */
#ifndef HPU_KERNELS_PW_H
#define HPU_KERNELS_PW_H

#include "hpu/op.h"
#include "hpu/status.h"

/* FUSED_ADAM / FUSED_SGD (pw_optim.c). */
hpu_status_t hpu_pw_validate_optim(const hpu_node_t *node);
void hpu_pw_run_optim(const hpu_node_t *node);

#endif
