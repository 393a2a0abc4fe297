// The pointwise op family's launch helpers, shared by its files
// (hpu_ops_pointwise.cpp, which defines them, hpu_ops_activation.cpp,
// hpu_ops_loss.cpp, hpu_ops_ternary.cpp). Each op works out PyTorch's
// result dtype, compute dtype and shape, allocates or checks the output and
// hands one node to the core; CPU 0-dim tensors and Scalars become scalar
// operands of the node.
#pragma once

#include <initializer_list>
#include <vector>

#include "hpu_common.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace pointwise {

// The node's parameters (params.pointwise's s[] and i[]).
struct Params {
  hpu_scalar_t s[6] = {};
  int64_t i[4] = {};
};

// Integer inputs of float ops compute in the default float type.
at::ScalarType float_type(at::ScalarType t);
// The broadcast shape of the tensor operands.
std::vector<int64_t> shape_of(std::initializer_list<Arg> args);
// PyTorch's "Expected all tensors to be on the same device" check (CPU
// scalars aside), `out` included when given.
void check_devices(const char* name, std::initializer_list<Arg> args, const at::Tensor* out);
// out <- op(args) with out already of the broadcast shape.
void run(hpu_op_t op, const at::Tensor& out, std::initializer_list<Arg> args, at::ScalarType compute,
         const Params& prm = Params());
// Functional: a new output of dtype `result`.
at::Tensor pw(const char* name, hpu_op_t op, std::initializer_list<Arg> args, at::ScalarType result,
              at::ScalarType compute, const Params& prm = Params());
// In place (out is one of the args) or out=.
at::Tensor& pw_into(const char* name, hpu_op_t op, at::Tensor& out, bool inplace, std::initializer_list<Arg> args,
                    at::ScalarType result, at::ScalarType compute, const Params& prm = Params());
hpu_scalar_t fscalar(double v);
// NotImplementedError naming the CPU kernel, as the CPU raises, for a
// non-float input of a float-only op.
void check_float_act(const char* name, const at::Tensor& t);
// Params with s[0] = a, s[1] = b.
Params one_param(const c10::Scalar& a, const c10::Scalar& b = 0);

}  // namespace pointwise
}  // namespace habana_torch
