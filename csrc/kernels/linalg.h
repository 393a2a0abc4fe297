/* Internal interface of the linalg kernels (ops_linalg.def): the batch and
 * matrix dims of an operand, and the per-type kernels linalg.c dispatches. */
#ifndef HPU_KERNELS_LINALG_H
#define HPU_KERNELS_LINALG_H

#include "hpu/op.h"

typedef struct {
  int64_t batch, m, n; /* batch = product of the dims before the last two */
} hpu_linalg_dims_t;

hpu_linalg_dims_t hpu_linalg_dims(const hpu_tensor_t *t);

#define HPU_LINALG_KERNELS(sfx)                                            \
  hpu_status_t hpu_linalg_lu_factor_##sfx(const hpu_node_t *nd);         \
  hpu_status_t hpu_linalg_lu_solve_##sfx(const hpu_node_t *nd);          \
  hpu_status_t hpu_linalg_cholesky_##sfx(const hpu_node_t *nd);          \
  hpu_status_t hpu_linalg_svd_##sfx(const hpu_node_t *nd);               \
  hpu_status_t hpu_linalg_eigh_##sfx(const hpu_node_t *nd);              \
  hpu_status_t hpu_linalg_qr_##sfx(const hpu_node_t *nd);                \
  hpu_status_t hpu_linalg_solve_triangular_##sfx(const hpu_node_t *nd);  \
  hpu_status_t hpu_linalg_geqrf_##sfx(const hpu_node_t *nd);             \
  hpu_status_t hpu_linalg_householder_product_##sfx(const hpu_node_t *nd); \
  hpu_status_t hpu_linalg_ormqr_##sfx(const hpu_node_t *nd);             \
  hpu_status_t hpu_linalg_lu_unpack_##sfx(const hpu_node_t *nd);         \
  hpu_status_t hpu_linalg_ldl_factor_##sfx(const hpu_node_t *nd);        \
  hpu_status_t hpu_linalg_ldl_solve_##sfx(const hpu_node_t *nd);         \
  hpu_status_t hpu_linalg_lstsq_##sfx(const hpu_node_t *nd);
HPU_LINALG_KERNELS(f32)
HPU_LINALG_KERNELS(f64)
#undef HPU_LINALG_KERNELS

#endif
