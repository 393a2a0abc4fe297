/* Params of the pointwise op family (member `pointwise` of hpu_op_params_t). */
#ifndef HPU_OP_PARAMS_POINTWISE_H
#define HPU_OP_PARAMS_POINTWISE_H

#include <stdint.h>

#include "hpu/dtype.h"

typedef struct hpu_pointwise_params {
  hpu_scalar_t s[6]; /* per-op scalars; see ops_pointwise.def */
  int64_t i[4];      /* per-op integers */
  /* Bit k set: math operand k is operand[k] instead of a tensor input. */
  uint32_t scalar_operands;
  hpu_scalar_t operand[3];
} hpu_pointwise_params_t;

#endif
