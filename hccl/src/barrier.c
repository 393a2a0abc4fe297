/* Barrier: one staged round with no data (its descriptor still checks that
 * every rank called a barrier); across hosts a one-byte allreduce. */
#include "internal.h"

hcclResult_t hccl_barrier(hcclComm_t comm, const hccl_op_t *op) {
  if (comm->nhosts > 1) {
    unsigned char one = 1, out = 0;
    hccl_op_t ar = {HCCL_K_ALLREDUCE, &one, &out, 1, hcclUint8, hcclMax, 0};
    return hccl_allreduce(comm, &ar);
  }
  int b = hccl_round_next(comm);
  hccl_desc_publish(comm, op, b);
  hccl_post(comm);
  hcclResult_t r = hccl_wait_all_posted(comm, "barrier");
  return r != hcclSuccess ? r : hccl_desc_check(comm, b);
}
