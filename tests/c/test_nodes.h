/* Tensors and nodes for the C tests, built one way in every test file: a
 * test states the op and its operands, not a node's bookkeeping. All
 * static inline, for the test files to include.
 *
 * node_of sets the binary family's alpha (1), which shares its storage
 * with other families' parameters: the pointwise and nn tests build their
 * nodes with builders of their own (pw_node, node) for that reason. */
#ifndef HPU_TEST_NODES_H
#define HPU_TEST_NODES_H

#include <CUnit/Basic.h>
#include <string.h>

#include "hpu/hpu.h"

/* A contiguous tensor over data; a shape the runtime refuses fails the
 * test at once (outside a test, e.g. in a suite's set-up, it is counted
 * as a failure). */
static inline hpu_tensor_t T(void *data, hpu_dtype_t dt, int ndim, const int64_t *sizes) {
  hpu_tensor_t t;
  CU_ASSERT_EQUAL_FATAL(hpu_tensor_init_contiguous(&t, data, dt, ndim, sizes), 0);
  return t;
}

static inline hpu_tensor_t T1(void *data, hpu_dtype_t dt, int64_t n) { return T(data, dt, 1, &n); }

static inline hpu_tensor_t T2(void *data, hpu_dtype_t dt, int64_t a, int64_t b) {
  int64_t s[2] = {a, b};
  return T(data, dt, 2, s);
}

/* A node of op computing in cdt, one output, alpha 1; the caller adds its
 * operands. */
static inline hpu_node_t node_of(hpu_op_t op, hpu_dtype_t cdt) {
  hpu_node_t n;
  memset(&n, 0, sizeof n);
  n.op = op;
  n.compute_dtype = cdt;
  n.num_outputs = 1;
  n.params.binary.alpha = hpu_scalar_int(1);
  return n;
}

/* out = v everywhere. */
static inline hpu_node_t fill_node(hpu_tensor_t out, double v) {
  hpu_node_t n = node_of(HPU_OP_FILL, out.dtype);
  n.outputs[0] = out;
  n.params.fill.value = hpu_scalar_float(v);
  return n;
}

/* out = a op b (ADD SUB MUL DIV), computing in cdt. */
static inline hpu_node_t binary_node(hpu_op_t op, hpu_dtype_t cdt, hpu_tensor_t out, hpu_tensor_t a,
                                     hpu_tensor_t b) {
  hpu_node_t n = node_of(op, cdt);
  n.num_inputs = 2;
  n.inputs[0] = a;
  n.inputs[1] = b;
  n.outputs[0] = out;
  return n;
}

/* out = a op *b, or a op other when b is NULL, computing in out's dtype:
 * the nodes lazy mode records for tensor-tensor and tensor-scalar
 * arithmetic. */
static inline hpu_node_t arith_node(hpu_op_t op, hpu_tensor_t out, hpu_tensor_t a, const hpu_tensor_t *b,
                                    double other) {
  hpu_node_t n = node_of(op, out.dtype);
  n.outputs[0] = out;
  n.inputs[0] = a;
  n.num_inputs = b ? 2 : 1;
  if (b) n.inputs[1] = *b;
  n.params.binary.other = hpu_scalar_float(other);
  return n;
}

/* Validates and executes a node on the calling thread, as the runtime's
 * launch does. */
static inline hpu_status_t run(const hpu_node_t *n) {
  hpu_status_t st = hpu_node_validate(n);
  if (st != HPU_SUCCESS) return st;
  return hpu_node_execute(n);
}

#endif
