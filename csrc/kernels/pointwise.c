/* The pointwise op family: validation and dispatch of the codes listed in
 * hpu/ops_pointwise.def. */
#include "hpu/op.h"
#include "hpu/status.h"
#include "kernels/kernels.h"

hpu_status_t hpu_validate_pointwise(const hpu_node_t *node) {
  switch (node->op) {
    default:
      return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: no kernel in this build", hpu_op_name(node->op));
  }
}

hpu_status_t hpu_execute_pointwise(const hpu_node_t *node) {
  switch (node->op) {
    default:
      return hpu_error(HPU_ERROR_INTERNAL, "%s: no kernel in this build", hpu_op_name(node->op));
  }
}
