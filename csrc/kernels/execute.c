/* hpu_node_execute: dispatch a validated node to its kernel; ISA selection. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/op.h"
#include "hpu/status.h"
#include "hpu/tensor.h"
#include "kernels/kernels.h"

static hpu_isa_t cpu_isa(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("fma"))
    return HPU_ISA_AVX512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return HPU_ISA_AVX2;
#endif
  return HPU_ISA_GENERIC;
}

static _Atomic int isa_state = -1;

hpu_isa_t hpu_kernels_isa(void) {
  int s = atomic_load_explicit(&isa_state, memory_order_relaxed);
  if (s >= 0) return (hpu_isa_t)s;
  hpu_isa_t isa = cpu_isa();
  const char *env = getenv("HPU_KERNEL_ISA");
  if (env && *env) {
    hpu_isa_t cap = isa;
    if (!strcmp(env, "generic")) cap = HPU_ISA_GENERIC;
    else if (!strcmp(env, "avx2")) cap = HPU_ISA_AVX2;
    else if (strcmp(env, "avx512") != 0) /* a misspelt cap must not measure the wrong kernels quietly */
      fprintf(stderr, "[habana_torch] HPU_KERNEL_ISA=%s is not one of generic, avx2, avx512; not capping\n", env);
    if (cap < isa) isa = cap;
  }
  atomic_store_explicit(&isa_state, (int)isa, memory_order_relaxed);
  return isa;
}

hpu_isa_t hpu_kernels_set_isa(hpu_isa_t isa) {
  hpu_isa_t best = cpu_isa();
  if (isa > best) isa = best;
  atomic_store_explicit(&isa_state, (int)isa, memory_order_relaxed);
  return isa;
}

hpu_status_t hpu_node_execute(const hpu_node_t *node) {
  if (!node || (int)node->op < 0 || node->op >= HPU_OP_COUNT)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "execute: invalid node");
  if (hpu_op_is_tailpw(node->op)) return hpu_execute_tailpw(node); /* before its enclosing range */
  if (hpu_op_is_pointwise(node->op)) return hpu_execute_pointwise(node);
  if (hpu_op_is_linalg(node->op)) return hpu_execute_linalg(node);
  if (hpu_op_is_nn(node->op)) return hpu_execute_nn(node);
  if (node->num_outputs < 1 || hpu_tensor_numel(&node->outputs[0]) == 0) return HPU_SUCCESS;
  switch (node->op) {
    case HPU_OP_COPY: hpu_kernel_copy(node); break;
    case HPU_OP_FILL: hpu_kernel_fill(node); break;
    case HPU_OP_ADD: case HPU_OP_SUB: case HPU_OP_MUL: case HPU_OP_DIV:
      return hpu_kernel_binary(node); /* fails on an integer division by zero */
    case HPU_OP_RELU: hpu_kernel_relu(node); break;
    case HPU_OP_MATMUL: hpu_kernel_matmul(node); break;
    case HPU_OP_RNG_UNIFORM: case HPU_OP_RNG_NORMAL: case HPU_OP_RNG_BERNOULLI:
    case HPU_OP_RNG_RANDOM:
      hpu_kernel_rng(node);
      break;
    default: return hpu_error(HPU_ERROR_INTERNAL, "execute: op %d has no kernel", (int)node->op);
  }
  return HPU_SUCCESS;
}
