/* Params of the nn op family (member `nn` of hpu_op_params_t). */
#ifndef HPU_OP_PARAMS_NN_H
#define HPU_OP_PARAMS_NN_H

#include "hpu/dtype.h"

/* HPU_OP_REDUCE kinds (params.nn.i[0]). */
typedef enum hpu_reduce_kind {
  HPU_REDUCE_SUM = 0,
  HPU_REDUCE_MEAN,
  HPU_REDUCE_PROD,
  HPU_REDUCE_AMAX,
  HPU_REDUCE_AMIN,
  HPU_REDUCE_ANY,
  HPU_REDUCE_ALL,
  HPU_REDUCE_NORM, /* s[0] = p: 2, 1, inf, -inf, 0 (count), any other */
  HPU_REDUCE_VAR,  /* s[0] = correction */
  HPU_REDUCE_STD,
  HPU_REDUCE_KIND_COUNT
} hpu_reduce_kind_t;

/* HPU_OP_UPSAMPLE modes (params.nn.i[0]) and HPU_OP_SPATIAL_PAD modes. */
typedef enum hpu_upsample_mode { HPU_UPSAMPLE_NEAREST = 0, HPU_UPSAMPLE_NEAREST_EXACT, HPU_UPSAMPLE_LINEAR } hpu_upsample_mode_t;
typedef enum hpu_pad_mode { HPU_PAD_REFLECT = 0, HPU_PAD_REPLICATE } hpu_pad_mode_t;

#define HPU_NN_MAX_INDICES 3

typedef struct hpu_nn_params {
  hpu_scalar_t s[4]; /* per-op scalars; see ops_nn.def */
  int64_t i[4];      /* per-op integers (dims, flags) */
  int64_t sizes[HPU_NN_MAX_INDICES];   /* INDEX / INDEX_PUT */
  int64_t strides[HPU_NN_MAX_INDICES];
} hpu_nn_params_t;

#endif
