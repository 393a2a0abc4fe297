/* Internal interface of the kernel library (not part of the public API). */
#ifndef HPU_KERNELS_KERNELS_H
#define HPU_KERNELS_KERNELS_H

#include "hpu/op.h"
#include <stddef.h>

#include "hpu/status.h"

/* Instruction sets the hot loops are compiled for; the best one the CPU
 * supports is picked at first use. HPU_KERNEL_ISA=generic|avx2|avx512 in the
 * environment caps it (for testing and benchmarking). */
typedef enum { HPU_ISA_GENERIC = 0, HPU_ISA_AVX2 = 1, HPU_ISA_AVX512 = 2 } hpu_isa_t;
hpu_isa_t hpu_kernels_isa(void);
/* Forces an ISA (capped by what the CPU supports); returns the one in use. */
hpu_isa_t hpu_kernels_set_isa(hpu_isa_t isa);

/* Kernels: called by hpu_node_execute on a validated node with numel > 0
 * outputs. They cannot fail. */
void hpu_kernel_copy(const hpu_node_t *node);
void hpu_kernel_fill(const hpu_node_t *node);
hpu_status_t hpu_kernel_binary(const hpu_node_t *node); /* ADD SUB MUL DIV */
void hpu_kernel_relu(const hpu_node_t *node);
void hpu_kernel_matmul(const hpu_node_t *node);
void hpu_kernel_rng(const hpu_node_t *node);

/* Op families (own files): validation and execution of their op codes.
 * Execute returns a status only for "no kernel for this code" (a bug):
 * validated nodes cannot fail. */
hpu_status_t hpu_validate_pointwise(const hpu_node_t *node);
hpu_status_t hpu_execute_pointwise(const hpu_node_t *node);
hpu_status_t hpu_validate_tailpw(const hpu_node_t *node); /* pw_tail.c */
hpu_status_t hpu_execute_tailpw(const hpu_node_t *node);
hpu_status_t hpu_validate_nn(const hpu_node_t *node);
hpu_status_t hpu_execute_nn(const hpu_node_t *node);
/* The tail family (hpu/ops_tailidx.def, tail_*.c), reached through the nn
 * family's dispatch; its kernels may fail on bad index data. */
hpu_status_t hpu_validate_tailidx(const hpu_node_t *node);
hpu_status_t hpu_execute_tailidx(const hpu_node_t *node);
hpu_status_t hpu_validate_linalg(const hpu_node_t *node); /* linalg.c */
hpu_status_t hpu_execute_linalg(const hpu_node_t *node);

/* A reduction with fewer outputs than threads and rows of at least
 * HPU_REDUCE_SPLIT_MIN_LEN elements is split over threads in blocks of
 * HPU_REDUCE_SPLIT_BLOCK (nn_reduce.c), which changes its summation order:
 * lazy fusion (graph/fusion_tiling.h) must not fuse such rows, so both read
 * the limit from here. */
#define HPU_REDUCE_SPLIT_BLOCK 65536
#define HPU_REDUCE_SPLIT_MIN_LEN (2 * HPU_REDUCE_SPLIT_BLOCK)

/* Operand checks shared by all validators (validate.c); each sets the
 * error message naming op `name`. */
hpu_status_t hpu_check_tensor(const char *name, const char *role, int idx, const hpu_tensor_t *t);
/* in broadcasts to out's shape under PyTorch's rules. */
hpu_status_t hpu_check_broadcast(const char *name, int idx, const hpu_tensor_t *in,
                                 const hpu_tensor_t *out);
/* out and in do not overlap, except exactly (when allow_alias). */
hpu_status_t hpu_check_overlap(const char *name, const hpu_tensor_t *out, int idx,
                               const hpu_tensor_t *in, int allow_alias);
/* No two output elements share memory (no stride-0 dims). */
hpu_status_t hpu_check_output(const char *name, const hpu_tensor_t *out);
/* Output k of node n is a valid tensor, has no stride-0 dims and overlaps
 * none of n's inputs. */
hpu_status_t hpu_check_node_output(const hpu_node_t *n, int k);
/* Returns from the calling function when the status is an error. */
#define HPU_TRY(x)                      \
  do {                                  \
    hpu_status_t st_ = (x);             \
    if (st_ != HPU_SUCCESS) return st_; \
  } while (0)
hpu_status_t hpu_check_scalar(const char *name, const char *what, hpu_scalar_t s);
/* "[2, 3]" */
void hpu_shape_str(const hpu_tensor_t *t, char *buf, size_t len);

/* Copies src into dst (broadcast, cast), as HPU_OP_COPY. */
void hpu_copy_tensor(const hpu_tensor_t *dst, const hpu_tensor_t *src);

#endif
