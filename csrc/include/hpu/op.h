/* Ops are data: an op code, a params struct and tensor descriptors.
 * The same node record is run by eager mode (a one-node graph, at once)
 * and, later, recorded by lazy mode into bigger graphs.
 *
 * Conventions shared by every elementwise op:
 *  - inputs broadcast to the output's shape under PyTorch's rules (an input
 *    may have fewer dims or size-1 dims); the output is never broadcast;
 *  - inputs are read as, and the math runs in, node->compute_dtype
 *    (bf16 and fp16 math is done in fp32), then the result is cast to the
 *    output's dtype, as TensorIterator does;
 *  - an output may alias an input exactly (in-place ops); any other overlap
 *    between an output and an input is rejected by hpu_node_validate.
 *
 * Details the kernels define (csrc/kernels/):
 *  - COPY, FILL, MATMUL and the RNG ops ignore compute_dtype (COPY converts
 *    in0's dtype straight to out's with c10's rules: floating -> integer
 *    truncates, anything -> bool is "!= 0");
 *  - the second operand of a binary op given as params.binary.other or as a
 *    one-element tensor is read once; for MUL/DIV with a bfloat16/float16
 *    compute dtype it keeps float precision (PyTorch CPU's reduced-float
 *    scalar path), otherwise it is cast to the compute dtype like any input;
 *    alpha is cast to the compute dtype; ADD/SUB with alpha != 1 use a fused
 *    multiply-add (as PyTorch's vectorised CPU kernel);
 *  - DIV with rounding NONE needs a floating compute dtype (integer true
 *    division: the caller promotes); integer TRUNC/FLOOR division by zero
 *    (as REMAINDER / FMOD by zero) fails the node with PyTorch's
 *    "ZeroDivisionError" at execution, and INT_MIN / -1 wraps;
 *  - SUB with a bool compute dtype is rejected, as in PyTorch;
 *  - MATMUL needs in0/in1/out (and in2) of one dtype, not bool, each with at
 *    least 2 dims (unsqueeze vectors first); the output may not overlap
 *    in0/in1; in2 may alias the output exactly (addmm_); beta == 0 ignores
 *    in2 (NaNs in it do not propagate). */
#ifndef HPU_OP_H
#define HPU_OP_H

#include <stdint.h>
#include "hpu/dtype.h"
#include "hpu/status.h"
#include "hpu/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hpu_op {
  HPU_OP_COPY = 0,   /* out = in0 (cast; in0 broadcast to out) */
  HPU_OP_FILL,       /* out = params.fill.value */
  HPU_OP_ADD,        /* out = in0 + alpha * in1   (in1 or params.binary.other) */
  HPU_OP_SUB,        /* out = in0 - alpha * in1 */
  HPU_OP_MUL,        /* out = in0 * in1 */
  HPU_OP_DIV,        /* out = in0 / in1, rounding per params.binary.rounding */
  HPU_OP_RELU,       /* out = max(in0, 0) */
  HPU_OP_MATMUL,     /* out[..,m,n] = beta*in2 + alpha * in0[..,m,k] @ in1[..,k,n] */
  HPU_OP_RNG_UNIFORM,   /* out ~ U[a, b) */
  HPU_OP_RNG_NORMAL,    /* out ~ N(mean a, std b) */
  HPU_OP_RNG_BERNOULLI, /* out ~ Bernoulli(p): p = in0 elementwise if given, else a */
  HPU_OP_RNG_RANDOM,    /* out ~ integers uniform in [a, b) (random_) */

  /* Op families, each listed in its own .def file as HPU_OP(CODE, "name")
   * lines with a comment on operands and params. The *_BEGIN markers are
   * not ops: a family's ops are the codes between its marker and the next. */
  HPU_OP_POINTWISE_BEGIN, /* unary/binary/ternary math, comparisons, activations
                             and their backwards, optimizer steps */
#define HPU_OP(code, name) code,
#include "hpu/ops_pointwise.def"
#include "hpu/ops_special.def" /* special functions, run by the pointwise engine */
  HPU_OP_TAILPW_BEGIN,    /* the pointwise tail (kernels/pw_tail.c), within the pointwise range */
#include "hpu/ops_tailpw.def"
  HPU_OP_NN_BEGIN,        /* reductions, norms, softmax, losses, index ops */
#include "hpu/ops_nn.def"
#include "hpu/ops_tailidx.def"
#include "hpu/ops_vision.def"
  HPU_OP_LINALG_BEGIN,    /* LAPACK factorizations and solves; params in .nn */
#include "hpu/ops_linalg.def"
#undef HPU_OP
  HPU_OP_COUNT
} hpu_op_t;

static inline int hpu_op_is_pointwise(hpu_op_t op) {
  return op > HPU_OP_POINTWISE_BEGIN && op < HPU_OP_NN_BEGIN;
}
static inline int hpu_op_is_tailpw(hpu_op_t op) {
  return op > HPU_OP_TAILPW_BEGIN && op < HPU_OP_NN_BEGIN;
}
static inline int hpu_op_is_nn(hpu_op_t op) { return op > HPU_OP_NN_BEGIN && op < HPU_OP_COUNT; }
/* Linalg ops also pass hpu_op_is_nn (they use params.nn, and the lazy
 * graph's signature reads them as nn params): dispatchers test this first. */
static inline int hpu_op_is_linalg(hpu_op_t op) { return op > HPU_OP_LINALG_BEGIN && op < HPU_OP_COUNT; }

typedef enum hpu_rounding { HPU_ROUND_NONE = 0, HPU_ROUND_TRUNC, HPU_ROUND_FLOOR } hpu_rounding_t;

#include "hpu/op_params_pointwise.h"
#include "hpu/op_params_nn.h"
#include "hpu/op_params_tailidx.h"

typedef union hpu_op_params {
  struct { hpu_scalar_t value; } fill;
  struct {
    hpu_scalar_t alpha;   /* ADD/SUB; the caller sets it (1 for plain add) */
    hpu_scalar_t other;   /* the second operand when the node has one input */
    hpu_rounding_t rounding; /* DIV */
  } binary;
  struct {
    hpu_scalar_t alpha, beta; /* beta ignored without in2 */
  } matmul;
  struct {
    uint64_t seed, offset;    /* filled by hpu_generator_prepare */
    double a, b;
  } rng;
  hpu_pointwise_params_t pointwise;
  hpu_nn_params_t nn;
} hpu_op_params_t;

#define HPU_MAX_INPUTS 4
#define HPU_MAX_OUTPUTS 4

typedef struct hpu_node {
  hpu_op_t op;
  int num_inputs;
  int num_outputs;
  hpu_dtype_t compute_dtype;
  hpu_tensor_t inputs[HPU_MAX_INPUTS];
  hpu_tensor_t outputs[HPU_MAX_OUTPUTS];
  hpu_op_params_t params;
  /* The host op that recorded the node, for a profiler's trace (hpu/trace.h);
   * set when the node is copied into a graph, never read from the caller's. */
  uint64_t correlation;
} hpu_node_t;

const char *hpu_op_name(hpu_op_t op); /* "add", ... */

/* Checks everything a kernel relies on: op code, operand counts, dtypes the
 * kernel supports, broadcastable shapes, matmul shapes, aliasing. The message
 * names the op and what is wrong. Kernels themselves cannot fail. */
hpu_status_t hpu_node_validate(const hpu_node_t *node);

/* Runs a validated node synchronously on the calling thread (the stream
 * worker calls this; tests may too, on host memory). */
hpu_status_t hpu_node_execute(const hpu_node_t *node);

#ifdef __cplusplus
}
#endif
#endif
