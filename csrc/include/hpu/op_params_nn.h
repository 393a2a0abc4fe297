/* Params of the nn op family (member `nn` of hpu_op_params_t). */
#ifndef HPU_OP_PARAMS_NN_H
#define HPU_OP_PARAMS_NN_H

#include "hpu/dtype.h"

typedef struct hpu_nn_params {
  hpu_scalar_t s[4]; /* per-op scalars; see ops_nn.def */
  int64_t i[4];      /* per-op integers (dims, flags) */
} hpu_nn_params_t;

#endif
