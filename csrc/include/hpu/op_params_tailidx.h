/* Params of the tail ops (hpu/ops_tailidx.def); they use params.nn. */
#ifndef HPU_OP_PARAMS_TAILIDX_H
#define HPU_OP_PARAMS_TAILIDX_H

/* HPU_OP_TAIL_SCATTER_REDUCE reductions (params.nn.i[1]). */
typedef enum hpu_tail_reduce {
  HPU_TAIL_SUM = 0,
  HPU_TAIL_PROD,
  HPU_TAIL_MEAN,
  HPU_TAIL_AMAX,
  HPU_TAIL_AMIN,
  HPU_TAIL_REDUCE_COUNT
} hpu_tail_reduce_t;

/* HPU_OP_TAIL_SELECT picks (params.nn.i[1]). */
typedef enum hpu_tail_select {
  HPU_TAIL_SELECT_KTH = 0,
  HPU_TAIL_SELECT_MEDIAN,
  HPU_TAIL_SELECT_NANMEDIAN,
  HPU_TAIL_SELECT_MODE,
  HPU_TAIL_SELECT_COUNT
} hpu_tail_select_t;

/* HPU_OP_TAIL_HISTOGRAM bin choice (params.nn.i[0]), the CPU's three. */
typedef enum hpu_tail_hist {
  HPU_TAIL_HIST_LINEAR = 0,   /* histc: (x - first) * bins / (last - first) */
  HPU_TAIL_HIST_LINEAR_LOCAL, /* histogram with a bin count: that, checked against the edges */
  HPU_TAIL_HIST_BINARY_SEARCH, /* histogram with given edges */
  HPU_TAIL_HIST_COUNT
} hpu_tail_hist_t;

#endif
