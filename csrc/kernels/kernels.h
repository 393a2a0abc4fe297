/* Internal interface of the kernel library (not part of the public API). */
#ifndef HPU_KERNELS_KERNELS_H
#define HPU_KERNELS_KERNELS_H

#include "hpu/op.h"
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
void hpu_kernel_binary(const hpu_node_t *node); /* ADD SUB MUL DIV */
void hpu_kernel_relu(const hpu_node_t *node);
void hpu_kernel_matmul(const hpu_node_t *node);
void hpu_kernel_rng(const hpu_node_t *node);

/* Copies src into dst (broadcast, cast), as HPU_OP_COPY. */
void hpu_copy_tensor(const hpu_tensor_t *dst, const hpu_tensor_t *src);

#endif
