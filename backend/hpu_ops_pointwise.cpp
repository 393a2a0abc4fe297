// The pointwise op family (csrc/kernels/pointwise.c, pw_optim.c): unary and
// binary math, comparisons, activations and their backwards, where / lerp /
// addcmul / clamp, arange, triu / tril and the fused optimizer steps. Each
// op works out PyTorch's result dtype, compute dtype and shape, allocates or
// checks the output and hands one node to the core. CPU 0-dim tensors and
// Scalars become scalar operands of the node.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include <limits>

#include "hpu_common.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace {

struct Params {
  hpu_scalar_t s[6] = {};
  int64_t i[4] = {};
};

// Types ---------------------------------------------------------------------

// Integer inputs of float ops compute in the default float type.
at::ScalarType float_type(at::ScalarType t) {
  return at::isIntegralType(t, /*includeBool=*/true) ? default_float() : t;
}

std::vector<int64_t> shape_of(std::initializer_list<Arg> args) {
  std::vector<int64_t> shape;
  for (const Arg& a : args)
    if (a.t) shape = at::infer_size(shape, a.t->sizes());
  return shape;
}

const at::Tensor* anchor_of(std::initializer_list<Arg> args) {
  const at::Tensor* first = nullptr;
  for (const Arg& a : args) {
    if (!a.t) continue;
    if (is_hpu(*a.t)) return a.t;
    if (!first) first = a.t;
  }
  return first;
}

void check_devices(const char* name, std::initializer_list<Arg> args, const at::Tensor* out) {
  std::vector<const at::Tensor*> ts;
  for (const Arg& a : args)
    if (a.t) ts.push_back(a.t);
  if (out) ts.push_back(out);
  std::optional<c10::Device> device;
  for (const at::Tensor* t : ts) {
    if (!t->defined() || is_cpu_scalar(*t)) continue;
    if (!device) device = t->device();
    TORCH_CHECK(*device == t->device(),
                "Expected all tensors to be on the same device, but found at least two devices, ",
                *device, " and ", t->device(), "! (in ", name, ")");
  }
}

// Launch ----------------------------------------------------------------------

// out <- op(args) with out already of the broadcast shape.
void run(hpu_op_t op, const at::Tensor& out, std::initializer_list<Arg> args,
         at::ScalarType compute, const Params& prm = Params()) {
  if (out.numel() == 0) return;
  hpu_node_t node;
  init_node(&node, op);
  node.num_outputs = 1;
  fill_desc(&node.outputs[0], out);
  node.compute_dtype = to_hpu_dtype(compute);
  auto& p = node.params.pointwise;
  for (int k = 0; k < 6; k++) p.s[k] = prm.s[k];
  for (int k = 0; k < 4; k++) p.i[k] = prm.i[k];
  int k = 0;
  for (const Arg& a : args) {
    if (a.t && !is_cpu_scalar(*a.t)) {
      fill_desc(&node.inputs[node.num_inputs++], *a.t);
    } else {
      p.scalar_operands |= 1u << k;
      p.operand[k] = to_hpu_scalar(a.t ? a.t->item() : a.s);
    }
    k++;
  }
  launch(out.device().index(), node);
}

// Functional: a new output of dtype `result`.
at::Tensor pw(const char* name, hpu_op_t op, std::initializer_list<Arg> args,
              at::ScalarType result, at::ScalarType compute, const Params& prm = Params()) {
  check_devices(name, args, nullptr);
  check_hpu_dtype(result, name);
  check_hpu_dtype(compute, name);
  const at::Tensor* anchor = anchor_of(args);
  at::Tensor out;
  if (args.size() == 1 || std::all_of(args.begin() + 1, args.end(), [&](const Arg& a) {
        return !a.t || a.t->sizes() == anchor->sizes() || is_cpu_scalar(*a.t);
      })) {
    // Same shape everywhere: keep the layout of the first tensor (as TensorIterator).
    if (is_hpu(*anchor) && anchor->is_contiguous())
      out = new_hpu_tensor(anchor->sizes(), result, anchor->device().index());
    else
      out = at::empty_like(*anchor, anchor->options().dtype(result));
  } else if (is_hpu(*anchor)) {
    out = new_hpu_tensor(shape_of(args), result, anchor->device().index());
  } else {
    out = at::empty(shape_of(args), anchor->options().dtype(result));
  }
  run(op, out, args, compute, prm);
  return out;
}

// In place (out is one of the args) or out=.
at::Tensor& pw_into(const char* name, hpu_op_t op, at::Tensor& out, bool inplace,
                    std::initializer_list<Arg> args, at::ScalarType result,
                    at::ScalarType compute, const Params& prm = Params()) {
  check_devices(name, args, &out);
  check_hpu_dtype(compute, name);
  TORCH_CHECK(c10::canCast(result, out.scalar_type()), "result type ", result,
              " can't be cast to the desired output type ", out.scalar_type());
  auto shape = shape_of(args);
  if (inplace) {
    TORCH_CHECK(out.sizes() == at::IntArrayRef(shape), "output with shape ", out.sizes(),
                " doesn't match the broadcast shape ", at::IntArrayRef(shape));
  } else {
    at::native::resize_output(out, shape);
  }
  run(op, out, args, compute, prm);
  return out;
}

hpu_scalar_t fscalar(double v) { return hpu_scalar_float(v); }

// Unary ops ---------------------------------------------------------------------

// Float ops (exp, ...): integer inputs give the default float type.
template <hpu_op_t OP>
at::Tensor u_float(const at::Tensor& self) {
  auto t = float_type(self.scalar_type());
  return pw(hpu_op_name(OP), OP, {self}, t, t);
}
template <hpu_op_t OP>
at::Tensor& u_float_(at::Tensor& self) {
  return pw_into(hpu_op_name(OP), OP, self, true, {self}, float_type(self.scalar_type()),
                 float_type(self.scalar_type()));
}
template <hpu_op_t OP>
at::Tensor& u_float_out(const at::Tensor& self, at::Tensor& out) {
  auto t = float_type(self.scalar_type());
  return pw_into(hpu_op_name(OP), OP, out, false, {self}, t, t);
}

void check_not_bool(hpu_op_t op, const at::Tensor& self) {
  if (op == HPU_OP_NEG)
    TORCH_CHECK(self.scalar_type() != at::kBool,
                "Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
                "to invert a mask, use the `~` or `logical_not()` operator instead.");
  if (op == HPU_OP_BITWISE_NOT)
    TORCH_CHECK_TYPE(!at::isFloatingType(self.scalar_type()),
                     "bitwise_not_cpu\" not implemented for '", self.scalar_type(), "'");
}

// Same-dtype ops (neg, floor, ...).
template <hpu_op_t OP>
at::Tensor u_same(const at::Tensor& self) {
  check_not_bool(OP, self);
  return pw(hpu_op_name(OP), OP, {self}, self.scalar_type(), self.scalar_type());
}
template <hpu_op_t OP>
at::Tensor& u_same_(at::Tensor& self) {
  check_not_bool(OP, self);
  return pw_into(hpu_op_name(OP), OP, self, true, {self}, self.scalar_type(), self.scalar_type());
}
template <hpu_op_t OP>
at::Tensor& u_same_out(const at::Tensor& self, at::Tensor& out) {
  check_not_bool(OP, self);
  return pw_into(hpu_op_name(OP), OP, out, false, {self}, self.scalar_type(), self.scalar_type());
}

at::Tensor& abs_out(const at::Tensor& self, at::Tensor& out) {
  return pw_into("abs", HPU_OP_ABS, out, false, {self}, self.scalar_type(), self.scalar_type());
}
at::Tensor& logical_not_out(const at::Tensor& self, at::Tensor& out) {
  check_devices("logical_not", {self}, &out);
  at::native::resize_output(out, self.sizes());
  run(HPU_OP_LOGICAL_NOT, out, {self}, self.scalar_type());
  return out;
}
at::Tensor isnan(const at::Tensor& self) {
  return pw("isnan", HPU_OP_ISNAN, {self}, at::kBool, self.scalar_type());
}

at::Tensor& nan_to_num_out(const at::Tensor& self, std::optional<double> nan,
                           std::optional<double> posinf, std::optional<double> neginf,
                           at::Tensor& out) {
  Params p;
  auto t = self.scalar_type();
  double big = 0, low = 0;
  switch (t) {
    case at::kHalf: big = std::numeric_limits<c10::Half>::max(); low = std::numeric_limits<c10::Half>::lowest(); break;
    case at::kBFloat16: big = std::numeric_limits<c10::BFloat16>::max(); low = std::numeric_limits<c10::BFloat16>::lowest(); break;
    case at::kFloat: big = std::numeric_limits<float>::max(); low = std::numeric_limits<float>::lowest(); break;
    default: big = std::numeric_limits<double>::max(); low = std::numeric_limits<double>::lowest(); break;
  }
  p.s[0] = fscalar(nan.value_or(0.0));
  p.s[1] = fscalar(posinf.value_or(big));
  p.s[2] = fscalar(neginf.value_or(low));
  TORCH_CHECK(out.scalar_type() == t, "nan_to_num: dtype of out: ", out.scalar_type(),
              " should be same as input: ", t);
  return pw_into("nan_to_num", HPU_OP_NAN_TO_NUM, out, false, {self}, t, t, p);
}

// Activations ------------------------------------------------------------------

int64_t gelu_mode(std::string_view approximate) {
  if (approximate == "none") return 0;
  if (approximate == "tanh") return 1;
  TORCH_CHECK(false, "approximate argument must be either none or tanh.");
}

void check_float_act(const char* name, const at::Tensor& t) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t.scalar_type()), "\"", name,
                              "\" not implemented for '", t.scalar_type(), "'");
}

at::Tensor gelu(const at::Tensor& self, std::string_view approximate) {
  check_float_act("GeluKernelImpl", self);
  Params p;
  p.i[0] = gelu_mode(approximate);
  return pw("gelu", HPU_OP_GELU, {self}, self.scalar_type(), self.scalar_type(), p);
}
at::Tensor& gelu_(at::Tensor& self, std::string_view approximate) {
  check_float_act("GeluKernelImpl", self);
  Params p;
  p.i[0] = gelu_mode(approximate);
  return pw_into("gelu_", HPU_OP_GELU, self, true, {self}, self.scalar_type(), self.scalar_type(), p);
}
at::Tensor& gelu_out(const at::Tensor& self, std::string_view approximate, at::Tensor& out) {
  check_float_act("GeluKernelImpl", self);
  Params p;
  p.i[0] = gelu_mode(approximate);
  return pw_into("gelu", HPU_OP_GELU, out, false, {self}, self.scalar_type(), self.scalar_type(), p);
}
at::Tensor& gelu_backward_out(const at::Tensor& grad, const at::Tensor& self,
                              std::string_view approximate, at::Tensor& out) {
  Params p;
  p.i[0] = gelu_mode(approximate);
  auto t = result_of({grad, self});
  return pw_into("gelu_backward", HPU_OP_GELU_BACKWARD, out, false, {grad, self}, t, t, p);
}
at::Tensor gelu_backward(const at::Tensor& grad, const at::Tensor& self,
                         std::string_view approximate) {
  check_float_act("GeluBackwardKernelImpl", self);
  Params p;
  p.i[0] = gelu_mode(approximate);
  auto t = result_of({grad, self});
  return pw("gelu_backward", HPU_OP_GELU_BACKWARD, {grad, self}, t, t, p);
}

// y = f(grad, other) backwards without params.
template <hpu_op_t OP>
at::Tensor bwd(const at::Tensor& grad, const at::Tensor& other) {
  auto t = result_of({grad, other});
  return pw(hpu_op_name(OP), OP, {grad, other}, t, t);
}
template <hpu_op_t OP>
at::Tensor& bwd_out(const at::Tensor& grad, const at::Tensor& other, at::Tensor& out) {
  auto t = result_of({grad, other});
  return pw_into(hpu_op_name(OP), OP, out, false, {grad, other}, t, t);
}

at::Tensor silu(const at::Tensor& self) {
  check_float_act("silu", self);
  return pw("silu", HPU_OP_SILU, {self}, self.scalar_type(), self.scalar_type());
}
at::Tensor& silu_(at::Tensor& self) {
  check_float_act("silu", self);
  return pw_into("silu_", HPU_OP_SILU, self, true, {self}, self.scalar_type(), self.scalar_type());
}
at::Tensor& silu_out(const at::Tensor& self, at::Tensor& out) {
  check_float_act("silu", self);
  return pw_into("silu", HPU_OP_SILU, out, false, {self}, self.scalar_type(), self.scalar_type());
}

Params one_param(const c10::Scalar& a, const c10::Scalar& b = 0) {
  Params p;
  p.s[0] = to_hpu_scalar(a);
  p.s[1] = to_hpu_scalar(b);
  return p;
}

at::Tensor threshold(const at::Tensor& self, const c10::Scalar& th, const c10::Scalar& value) {
  return pw("threshold", HPU_OP_THRESHOLD, {self}, self.scalar_type(), self.scalar_type(),
            one_param(th, value));
}
at::Tensor& threshold_(at::Tensor& self, const c10::Scalar& th, const c10::Scalar& value) {
  return pw_into("threshold_", HPU_OP_THRESHOLD, self, true, {self}, self.scalar_type(),
                 self.scalar_type(), one_param(th, value));
}
at::Tensor& threshold_out(const at::Tensor& self, const c10::Scalar& th, const c10::Scalar& value,
                          at::Tensor& out) {
  return pw_into("threshold", HPU_OP_THRESHOLD, out, false, {self}, self.scalar_type(),
                 self.scalar_type(), one_param(th, value));
}
at::Tensor threshold_backward(const at::Tensor& grad, const at::Tensor& self, const c10::Scalar& th) {
  auto t = result_of({grad, self});
  return pw("threshold_backward", HPU_OP_THRESHOLD_BACKWARD, {grad, self}, t, t, one_param(th));
}
at::Tensor& threshold_backward_out(const at::Tensor& grad, const at::Tensor& self,
                                   const c10::Scalar& th, at::Tensor& out) {
  auto t = result_of({grad, self});
  return pw_into("threshold_backward", HPU_OP_THRESHOLD_BACKWARD, out, false, {grad, self}, t, t,
                 one_param(th));
}

at::Tensor leaky_relu(const at::Tensor& self, const c10::Scalar& slope) {
  check_float_act("leaky_relu_cpu", self);
  return pw("leaky_relu", HPU_OP_LEAKY_RELU, {self}, self.scalar_type(), self.scalar_type(),
            one_param(slope));
}
at::Tensor& leaky_relu_(at::Tensor& self, const c10::Scalar& slope) {
  check_float_act("leaky_relu_cpu", self);
  return pw_into("leaky_relu_", HPU_OP_LEAKY_RELU, self, true, {self}, self.scalar_type(),
                 self.scalar_type(), one_param(slope));
}
at::Tensor& leaky_relu_out(const at::Tensor& self, const c10::Scalar& slope, at::Tensor& out) {
  check_float_act("leaky_relu_cpu", self);
  return pw_into("leaky_relu", HPU_OP_LEAKY_RELU, out, false, {self}, self.scalar_type(),
                 self.scalar_type(), one_param(slope));
}
at::Tensor& leaky_relu_backward_out(const at::Tensor& grad, const at::Tensor& self,
                                    const c10::Scalar& slope, bool self_is_result, at::Tensor& out) {
  TORCH_CHECK(!self_is_result || slope.to<double>() >= 0.0,
              "In-place leakyReLu backward calculation is triggered with a negative slope which is "
              "not supported. This is caused by calling in-place forward function with a negative "
              "slope, please call out-of-place version instead. File an issue at "
              "https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu "
              "backward calculation with negative slope");
  auto t = result_of({grad, self});
  return pw_into("leaky_relu_backward", HPU_OP_LEAKY_RELU_BACKWARD, out, false, {grad, self}, t, t,
                 one_param(slope));
}
at::Tensor leaky_relu_backward(const at::Tensor& grad, const at::Tensor& self,
                               const c10::Scalar& slope, bool self_is_result) {
  auto t = result_of({grad, self});
  at::Tensor out = at::empty(shape_of({grad, self}), grad.options().dtype(t));
  return leaky_relu_backward_out(grad, self, slope, self_is_result, out);
}

// ---- elu, softplus, hardswish, hardsigmoid, mish, log_sigmoid and their backwards --------

// A float activation y = f(self) (params p): functional, in place, out=.
at::Tensor act(const char* cpu_name, hpu_op_t op, const at::Tensor& self, const Params& p = Params()) {
  check_float_act(cpu_name, self);
  return pw(hpu_op_name(op), op, {self}, self.scalar_type(), self.scalar_type(), p);
}
at::Tensor& act_into(const char* cpu_name, hpu_op_t op, const at::Tensor& self, at::Tensor& out, bool inplace,
                     const Params& p = Params()) {
  check_float_act(cpu_name, self);
  return pw_into(hpu_op_name(op), op, out, inplace, {self}, self.scalar_type(), self.scalar_type(), p);
}
// Its backward from (grad, self).
at::Tensor act_bwd(hpu_op_t op, const at::Tensor& grad, const at::Tensor& self, const Params& p = Params()) {
  auto t = result_of({grad, self});
  return pw(hpu_op_name(op), op, {grad, self}, t, t, p);
}
at::Tensor& act_bwd_out(hpu_op_t op, const at::Tensor& grad, const at::Tensor& self, at::Tensor& out,
                        const Params& p = Params()) {
  auto t = result_of({grad, self});
  return pw_into(hpu_op_name(op), op, out, false, {grad, self}, t, t, p);
}

Params elu_params(const c10::Scalar& alpha, const c10::Scalar& scale, const c10::Scalar& input_scale,
                  bool is_result = false) {
  Params p;
  p.s[0] = to_hpu_scalar(alpha);
  p.s[1] = to_hpu_scalar(scale);
  p.s[2] = to_hpu_scalar(input_scale);
  p.i[0] = is_result;
  return p;
}
at::Tensor elu(const at::Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale,
               const c10::Scalar& input_scale) {
  return act("elu_cpu", HPU_OP_ELU, self, elu_params(alpha, scale, input_scale));
}
at::Tensor& elu_(at::Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale,
                 const c10::Scalar& input_scale) {
  return act_into("elu_cpu", HPU_OP_ELU, self, self, true, elu_params(alpha, scale, input_scale));
}
at::Tensor& elu_out(const at::Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale,
                    const c10::Scalar& input_scale, at::Tensor& out) {
  return act_into("elu_cpu", HPU_OP_ELU, self, out, false, elu_params(alpha, scale, input_scale));
}
at::Tensor& elu_backward_out(const at::Tensor& grad, const c10::Scalar& alpha, const c10::Scalar& scale,
                             const c10::Scalar& input_scale, bool is_result, const at::Tensor& self_or_result,
                             at::Tensor& out) {
  TORCH_CHECK(!is_result || alpha.to<double>() >= 0.0,
              "In-place elu backward calculation is triggered with a negative slope which is not supported. "
              "This is caused by calling in-place forward function with a negative slope, please call "
              "out-of-place version instead.");
  return act_bwd_out(HPU_OP_ELU_BACKWARD, grad, self_or_result, out,
                     elu_params(alpha, scale, input_scale, is_result));
}
at::Tensor elu_backward(const at::Tensor& grad, const c10::Scalar& alpha, const c10::Scalar& scale,
                        const c10::Scalar& input_scale, bool is_result, const at::Tensor& self_or_result) {
  auto t = result_of({grad, self_or_result});
  at::Tensor out = at::empty(shape_of({grad, self_or_result}), grad.options().dtype(t));
  return elu_backward_out(grad, alpha, scale, input_scale, is_result, self_or_result, out);
}

at::Tensor softplus(const at::Tensor& self, const c10::Scalar& beta, const c10::Scalar& threshold) {
  return act("softplus_cpu", HPU_OP_SOFTPLUS, self, one_param(beta, threshold));
}
at::Tensor& softplus_out(const at::Tensor& self, const c10::Scalar& beta, const c10::Scalar& threshold,
                         at::Tensor& out) {
  return act_into("softplus_cpu", HPU_OP_SOFTPLUS, self, out, false, one_param(beta, threshold));
}
at::Tensor softplus_backward(const at::Tensor& grad, const at::Tensor& self, const c10::Scalar& beta,
                             const c10::Scalar& threshold) {
  return act_bwd(HPU_OP_SOFTPLUS_BACKWARD, grad, self, one_param(beta, threshold));
}
at::Tensor& softplus_backward_out(const at::Tensor& grad, const at::Tensor& self, const c10::Scalar& beta,
                                  const c10::Scalar& threshold, at::Tensor& out) {
  return act_bwd_out(HPU_OP_SOFTPLUS_BACKWARD, grad, self, out, one_param(beta, threshold));
}

// The parameterless ones, by op: functional, in place, out=, and backward.
template <hpu_op_t OP>
const char* cpu_kernel_name() {
  switch (OP) {
    case HPU_OP_HARDSWISH: return "hardswish_cpu";
    case HPU_OP_HARDSIGMOID: return "hardsigmoid_cpu";
    case HPU_OP_MISH: return "mish_cpu";
    default: return "log_sigmoid_cpu";
  }
}
template <hpu_op_t OP>
at::Tensor act0(const at::Tensor& self) { return act(cpu_kernel_name<OP>(), OP, self); }
template <hpu_op_t OP>
at::Tensor& act0_(at::Tensor& self) { return act_into(cpu_kernel_name<OP>(), OP, self, self, true); }
template <hpu_op_t OP>
at::Tensor& act0_out(const at::Tensor& self, at::Tensor& out) {
  return act_into(cpu_kernel_name<OP>(), OP, self, out, false);
}
template <hpu_op_t OP>
at::Tensor act0_bwd(const at::Tensor& grad, const at::Tensor& self) { return act_bwd(OP, grad, self); }
template <hpu_op_t OP>
at::Tensor& act0_bwd_out(const at::Tensor& grad, const at::Tensor& self, at::Tensor& out) {
  return act_bwd_out(OP, grad, self, out);
}

// log_sigmoid's buffer: PyTorch's CPU kernel saves e^-|x| there for the
// backward; ours recomputes it (as PyTorch's CUDA kernel does) and leaves
// the buffer empty.
std::tuple<at::Tensor, at::Tensor> log_sigmoid_forward(const at::Tensor& self) {
  return {act0<HPU_OP_LOG_SIGMOID>(self), at::empty({0}, self.options())};
}
std::tuple<at::Tensor&, at::Tensor&> log_sigmoid_forward_out(const at::Tensor& self, at::Tensor& output,
                                                             at::Tensor& buffer) {
  act0_out<HPU_OP_LOG_SIGMOID>(self, output);
  buffer.resize_({0});
  return {output, buffer};
}
// The kernel rounds its e^-|x| to the compute dtype, as the CPU's buffer is.
at::Tensor log_sigmoid_backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& buffer) {
  (void)buffer;
  return act_bwd(HPU_OP_LOG_SIGMOID_BACKWARD, grad, self);
}
at::Tensor& log_sigmoid_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& buffer,
                                     at::Tensor& out) {
  (void)buffer;
  return act_bwd_out(HPU_OP_LOG_SIGMOID_BACKWARD, grad, self, out);
}

void check_hardtanh(const at::Tensor& self, const c10::Scalar& lo, const c10::Scalar& hi) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Bool inputs not supported for hardtanh");
  TORCH_CHECK(lo.to<double>() <= hi.to<double>(), "hardtanh: min_val (", lo.to<double>(),
              ") must be less than or equal to max_val (", hi.to<double>(), ")");
}
at::Tensor hardtanh(const at::Tensor& self, const c10::Scalar& lo, const c10::Scalar& hi) {
  check_hardtanh(self, lo, hi);
  Params p;
  p.i[0] = 3;
  return pw("hardtanh", HPU_OP_CLAMP, {self, lo, hi}, self.scalar_type(), self.scalar_type(), p);
}
at::Tensor& hardtanh_(at::Tensor& self, const c10::Scalar& lo, const c10::Scalar& hi) {
  check_hardtanh(self, lo, hi);
  Params p;
  p.i[0] = 3;
  return pw_into("hardtanh_", HPU_OP_CLAMP, self, true, {self, lo, hi}, self.scalar_type(),
                 self.scalar_type(), p);
}
at::Tensor& hardtanh_out(const at::Tensor& self, const c10::Scalar& lo, const c10::Scalar& hi,
                         at::Tensor& out) {
  check_hardtanh(self, lo, hi);
  Params p;
  p.i[0] = 3;
  return pw_into("hardtanh", HPU_OP_CLAMP, out, false, {self, lo, hi}, self.scalar_type(),
                 self.scalar_type(), p);
}
at::Tensor& hardtanh_backward_out(const at::Tensor& grad, const at::Tensor& self,
                                  const c10::Scalar& lo, const c10::Scalar& hi, at::Tensor& out) {
  auto t = result_of({grad, self});
  return pw_into("hardtanh_backward", HPU_OP_HARDTANH_BACKWARD, out, false, {grad, self}, t, t,
                 one_param(lo, hi));
}
at::Tensor hardtanh_backward(const at::Tensor& grad, const at::Tensor& self, const c10::Scalar& lo,
                             const c10::Scalar& hi) {
  auto t = result_of({grad, self});
  return pw("hardtanh_backward", HPU_OP_HARDTANH_BACKWARD, {grad, self}, t, t, one_param(lo, hi));
}

// Clamp ----------------------------------------------------------------------

// Bounds: Scalars or tensors, either may be missing (bit 0 min, bit 1 max).
struct Bounds {
  std::vector<Arg> args;
};

at::ScalarType clamp_type(const at::Tensor& self, const Arg& lo, const Arg& hi, int mask) {
  if (mask == 3) return result_of({self, lo, hi});
  if (mask == 1) return result_of({self, lo});
  return result_of({self, hi});
}

void check_clamp(int mask, const char* name) {
  TORCH_CHECK(mask != 0, "torch.clamp: At least one of 'min' or 'max' must not be None");
}

at::Tensor& clamp_into(const char* name, at::Tensor* out, bool inplace, const at::Tensor& self,
                       const Arg& lo, const Arg& hi, int mask, at::Tensor* result) {
  check_clamp(mask, name);
  auto t = clamp_type(self, lo, hi, mask);
  Params p;
  p.i[0] = mask;
  // Absent bounds are placeholder scalar operands the kernel ignores.
  c10::Scalar zero(0);
  Arg l = (mask & 1) ? lo : Arg(zero), h = (mask & 2) ? hi : Arg(zero);
  if (!out) {
    *result = pw(name, HPU_OP_CLAMP, {self, l, h}, t, t, p);
    return *result;
  }
  return pw_into(name, HPU_OP_CLAMP, *out, inplace, {self, l, h}, t, t, p);
}

Arg opt_scalar(const std::optional<c10::Scalar>& s, int bit, int& mask) {
  if (s.has_value()) {
    mask |= bit;
    return Arg(*s);
  }
  return Arg(c10::Scalar(0));
}
Arg opt_tensor(const std::optional<at::Tensor>& t, int bit, int& mask) {
  if (t.has_value() && t->defined()) {
    mask |= bit;
    return Arg(*t);
  }
  return Arg(c10::Scalar(0));
}

at::Tensor clamp(const at::Tensor& self, const std::optional<c10::Scalar>& lo,
                 const std::optional<c10::Scalar>& hi) {
  int m = 0;
  Arg l = opt_scalar(lo, 1, m), h = opt_scalar(hi, 2, m);
  at::Tensor r;
  clamp_into("clamp", nullptr, false, self, l, h, m, &r);
  return r;
}
at::Tensor& clamp_(at::Tensor& self, const std::optional<c10::Scalar>& lo,
                   const std::optional<c10::Scalar>& hi) {
  int m = 0;
  Arg l = opt_scalar(lo, 1, m), h = opt_scalar(hi, 2, m);
  return clamp_into("clamp_", &self, true, self, l, h, m, nullptr);
}
at::Tensor& clamp_out(const at::Tensor& self, const std::optional<c10::Scalar>& lo,
                      const std::optional<c10::Scalar>& hi, at::Tensor& out) {
  int m = 0;
  Arg l = opt_scalar(lo, 1, m), h = opt_scalar(hi, 2, m);
  return clamp_into("clamp", &out, false, self, l, h, m, nullptr);
}
at::Tensor clamp_t(const at::Tensor& self, const std::optional<at::Tensor>& lo,
                   const std::optional<at::Tensor>& hi) {
  int m = 0;
  Arg l = opt_tensor(lo, 1, m), h = opt_tensor(hi, 2, m);
  at::Tensor r;
  clamp_into("clamp", nullptr, false, self, l, h, m, &r);
  return r;
}
at::Tensor& clamp_t_(at::Tensor& self, const std::optional<at::Tensor>& lo,
                     const std::optional<at::Tensor>& hi) {
  int m = 0;
  Arg l = opt_tensor(lo, 1, m), h = opt_tensor(hi, 2, m);
  return clamp_into("clamp_", &self, true, self, l, h, m, nullptr);
}
at::Tensor& clamp_t_out(const at::Tensor& self, const std::optional<at::Tensor>& lo,
                        const std::optional<at::Tensor>& hi, at::Tensor& out) {
  int m = 0;
  Arg l = opt_tensor(lo, 1, m), h = opt_tensor(hi, 2, m);
  return clamp_into("clamp", &out, false, self, l, h, m, nullptr);
}
// clamp_min / clamp_max: one bound.
template <int BIT>
at::Tensor clamp_one(const at::Tensor& self, const c10::Scalar& b) {
  at::Tensor r;
  clamp_into(BIT == 1 ? "clamp_min" : "clamp_max", nullptr, false, self, Arg(b), Arg(b), BIT, &r);
  return r;
}
template <int BIT>
at::Tensor& clamp_one_(at::Tensor& self, const c10::Scalar& b) {
  return clamp_into(BIT == 1 ? "clamp_min_" : "clamp_max_", &self, true, self, Arg(b), Arg(b), BIT,
                    nullptr);
}
template <int BIT>
at::Tensor& clamp_one_out(const at::Tensor& self, const c10::Scalar& b, at::Tensor& out) {
  return clamp_into(BIT == 1 ? "clamp_min" : "clamp_max", &out, false, self, Arg(b), Arg(b), BIT,
                    nullptr);
}
template <int BIT>
at::Tensor clamp_one_t(const at::Tensor& self, const at::Tensor& b) {
  at::Tensor r;
  clamp_into(BIT == 1 ? "clamp_min" : "clamp_max", nullptr, false, self, Arg(b), Arg(b), BIT, &r);
  return r;
}
template <int BIT>
at::Tensor& clamp_one_t_(at::Tensor& self, const at::Tensor& b) {
  return clamp_into(BIT == 1 ? "clamp_min_" : "clamp_max_", &self, true, self, Arg(b), Arg(b), BIT,
                    nullptr);
}
template <int BIT>
at::Tensor& clamp_one_t_out(const at::Tensor& self, const at::Tensor& b, at::Tensor& out) {
  return clamp_into(BIT == 1 ? "clamp_min" : "clamp_max", &out, false, self, Arg(b), Arg(b), BIT,
                    nullptr);
}

// Binary ops --------------------------------------------------------------------

void check_binary(hpu_op_t op, at::ScalarType t) {
  switch (op) {
    case HPU_OP_BITWISE_AND: case HPU_OP_BITWISE_OR: case HPU_OP_BITWISE_XOR:
      TORCH_CHECK_NOT_IMPLEMENTED(!at::isFloatingType(t), "\"", hpu_op_name(op),
                                  "_cpu\" not implemented for '", t, "'");
      break;
    case HPU_OP_REMAINDER: case HPU_OP_FMOD: case HPU_OP_MAXIMUM: case HPU_OP_MINIMUM:
      TORCH_CHECK_NOT_IMPLEMENTED(t != at::kBool || op == HPU_OP_MAXIMUM || op == HPU_OP_MINIMUM,
                                  "\"", hpu_op_name(op), "_cpu\" not implemented for 'Bool'");
      break;
    default: break;
  }
}

// check_binary, then (remainder, fmod) a zero divisor known on the host. Such
// a divisor is a CPU scalar, so the result has a's elements; none: no error
// (the CPU checks element by element).
void check_binary(hpu_op_t op, at::ScalarType t, const at::Tensor& a, const at::Tensor& b) {
  check_binary(op, t);
  if ((op == HPU_OP_REMAINDER || op == HPU_OP_FMOD) && a.numel() != 0) check_host_divisor(b, t);
}

// Result and compute dtype of a binary op.
at::ScalarType bin_type(hpu_op_t op, at::ScalarType common) {
  if (op == HPU_OP_ATAN2) return float_type(common);
  return common;
}

template <hpu_op_t OP>
at::Tensor b_op(const at::Tensor& a, const at::Tensor& b) {
  auto t = bin_type(OP, result_of({a, b}));
  check_binary(OP, t, a, b);
  return pw(hpu_op_name(OP), OP, {a, b}, t, t);
}
template <hpu_op_t OP>
at::Tensor& b_op_(at::Tensor& a, const at::Tensor& b) {
  auto t = bin_type(OP, result_of({a, b}));
  check_binary(OP, t, a, b);
  return pw_into(hpu_op_name(OP), OP, a, true, {a, b}, t, t);
}
template <hpu_op_t OP>
at::Tensor& b_op_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  auto t = bin_type(OP, result_of({a, b}));
  check_binary(OP, t, a, b);
  return pw_into(hpu_op_name(OP), OP, out, false, {a, b}, t, t);
}

// xlogy: a float op (integers promote to the default float); the kernel
// rounds log(y) to a bf16 / fp16 dtype before the product, as the CPU.
at::Tensor xlogy(const at::Tensor& a, const at::Tensor& b) {
  auto t = float_type(result_of({a, b}));
  return pw("xlogy", HPU_OP_XLOGY, {a, b}, t, t);
}
at::Tensor& xlogy_(at::Tensor& a, const at::Tensor& b) {
  auto t = float_type(result_of({a, b}));
  return pw_into("xlogy_", HPU_OP_XLOGY, a, true, {a, b}, t, t);
}
at::Tensor& xlogy_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  auto t = float_type(result_of({a, b}));
  return pw_into("xlogy", HPU_OP_XLOGY, out, false, {a, b}, t, t);
}

// ---- the losses' reductions; mse_loss and its backward ---------------------------------

// A loss per element, then its mean or its sum (reduction 1 / 2), as the CPU's.
at::Tensor reduce_loss(const at::Tensor& loss, int64_t reduction) {
  if (reduction == 1) return at::mean(loss);
  if (reduction == 2) return at::sum(loss);
  return loss;
}
// A loss from its elementwise kernel `op` (float types, as the CPU's; param
// is the kernel's s[0]), then reduced.
at::Tensor elementwise_loss(const char* name, const char* cpu_name, hpu_op_t op, const at::Tensor& self,
                            const at::Tensor& target, int64_t reduction, double param) {
  TORCH_CHECK(reduction >= 0 && reduction <= 2, name, ": ", reduction, " is not a valid reduction");
  auto t = result_of({self, target});
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t), "\"", cpu_name, "\" not implemented for '", t, "'");
  Params p;
  p.s[0] = fscalar(param);
  return reduce_loss(pw(name, op, {self, target}, t, t, p), reduction);
}

// mse_loss as the CPU's kernel: (input - target)^2 per element in one
// kernel (a bf16 / fp16 difference rounded to the dtype before it is
// squared, as the CPU's vector ops do), then the mean or the sum.
at::Tensor hpu_mse_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction) {
  return elementwise_loss("mse_loss", "mse_cpu", HPU_OP_SQUARED_DIFF, self, target, reduction, 0.0);
}
at::Tensor& hpu_mse_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                             at::Tensor& out) {
  return into_out(hpu_mse_loss(self, target, reduction), out);
}
// alpha * (input - target) * grad, alpha = 2 (or 2 / numel for a mean) in
// the dtype, each step rounded to it: the CPU kernel's bf16 / fp16 vector
// ops (checked bit for bit).
at::Tensor hpu_mse_loss_backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                 int64_t reduction) {
  double alpha = reduction == 1 ? 2.0 / static_cast<double>(self.numel()) : 2.0;
  auto t = at::result_type(self, target);
  if (t == at::kBFloat16) alpha = static_cast<float>(static_cast<c10::BFloat16>(alpha));
  if (t == at::kHalf) alpha = static_cast<float>(static_cast<c10::Half>(alpha));
  if (t == at::kFloat) alpha = static_cast<float>(alpha);
  return at::mul(at::mul(at::sub(self, target), alpha), grad);
}
at::Tensor& hpu_mse_loss_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                      int64_t reduction, at::Tensor& out) {
  return into_out(hpu_mse_loss_backward(grad, self, target, reduction), out);
}

// ---- smooth_l1 and huber losses, softshrink / hardshrink, glu, and their backwards ------

// The backward of an elementwise loss into grad_input: norm (1 / numel for
// a mean) times the kernel's derivative times grad.
at::Tensor& elementwise_loss_backward(const char* cpu_name, hpu_op_t op, const at::Tensor& grad,
                                      const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                                      double param, at::Tensor& grad_input) {
  auto t = result_of({self, target, grad});
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t), "\"", cpu_name, "\" not implemented for '", t,
                              "' on hpu (floating types only)");
  Params p;
  p.s[0] = fscalar(param);
  p.s[1] = fscalar(reduction == 1 ? 1.0 / static_cast<double>(self.numel()) : 1.0);
  return pw_into(hpu_op_name(op), op, grad_input, false, {self, target, grad}, t, t, p);
}

at::Tensor hpu_smooth_l1_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double beta) {
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  return elementwise_loss("smooth_l1", "smooth_l1_cpu", HPU_OP_SMOOTH_L1, self, target, reduction, beta);
}
at::Tensor& hpu_smooth_l1_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double beta,
                                   at::Tensor& out) {
  return into_out(hpu_smooth_l1_loss(self, target, reduction, beta), out);
}
at::Tensor& hpu_smooth_l1_loss_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                            int64_t reduction, double beta, at::Tensor& grad_input) {
  return elementwise_loss_backward("smooth_l1_backward_cpu_out", HPU_OP_SMOOTH_L1_BACKWARD, grad, self, target,
                                   reduction, beta, grad_input);
}
at::Tensor hpu_huber_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double delta) {
  TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
  return elementwise_loss("huber", "huber_cpu", HPU_OP_HUBER, self, target, reduction, delta);
}
at::Tensor& hpu_huber_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double delta,
                               at::Tensor& out) {
  return into_out(hpu_huber_loss(self, target, reduction, delta), out);
}
at::Tensor& hpu_huber_loss_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                        int64_t reduction, double delta, at::Tensor& grad_input) {
  return elementwise_loss_backward("huber_backward_cpu_out", HPU_OP_HUBER_BACKWARD, grad, self, target, reduction,
                                   delta, grad_input);
}

// softshrink's lambda must lie in [0, the dtype's largest value], as the CPU checks.
Params hpu_shrink_param(const at::Tensor& self, const c10::Scalar& lambd, bool soft) {
  if (soft) {
    check_float_act("softshrink_check", self);
    double hi = self.scalar_type() == at::kDouble   ? std::numeric_limits<double>::max()
                : self.scalar_type() == at::kBFloat16 ? static_cast<double>(std::numeric_limits<c10::BFloat16>::max())
                : self.scalar_type() == at::kHalf     ? static_cast<double>(std::numeric_limits<c10::Half>::max())
                                                      : static_cast<double>(std::numeric_limits<float>::max());
    double l = lambd.to<double>();
    TORCH_CHECK(l >= 0 && l <= hi, "lambda must be in range [0, ", hi, "] for input dtype ", self.scalar_type(),
                ", but found ", l);
  } else {
    check_float_act("hardshrink_cpu", self);
  }
  return one_param(lambd);
}
template <bool SOFT>
at::Tensor hpu_shrink(const at::Tensor& self, const c10::Scalar& lambd) {
  hpu_op_t op = SOFT ? HPU_OP_SOFTSHRINK : HPU_OP_HARDSHRINK;
  return pw(hpu_op_name(op), op, {self}, self.scalar_type(), self.scalar_type(), hpu_shrink_param(self, lambd, SOFT));
}
template <bool SOFT>
at::Tensor& hpu_shrink_out(const at::Tensor& self, const c10::Scalar& lambd, at::Tensor& out) {
  hpu_op_t op = SOFT ? HPU_OP_SOFTSHRINK : HPU_OP_HARDSHRINK;
  return pw_into(hpu_op_name(op), op, out, false, {self}, self.scalar_type(), self.scalar_type(),
                 hpu_shrink_param(self, lambd, SOFT));
}
at::Tensor& hpu_shrink_backward_out(const at::Tensor& grad, const at::Tensor& self, const c10::Scalar& lambd,
                                    at::Tensor& grad_input) {
  auto t = result_of({grad, self});
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t), "\"shrink_backward_cpu\" not implemented for '", t, "'");
  return pw_into("shrink_backward", HPU_OP_SHRINK_BACKWARD, grad_input, false, {grad, self}, t, t, one_param(lambd));
}
at::Tensor hpu_shrink_backward(const at::Tensor& grad, const at::Tensor& self, const c10::Scalar& lambd) {
  auto t = result_of({grad, self});
  at::Tensor out = at::empty(shape_of({grad, self}), grad.options().dtype(t));
  return hpu_shrink_backward_out(grad, self, lambd, out);
}

// glu: the first half of dim times the sigmoid of the second, in float,
// rounded once. Its backward as the CPU's: the second half of grad_input
// takes sigmoid(b) (rounded to the dtype), the first sigmoid(b) * grad,
// then the second (1 - s) s a grad.
int64_t hpu_glu_dim(const at::Tensor& self, int64_t dim) {
  TORCH_CHECK(self.dim() > 0, "glu does not support scalars because halving size must be even");
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(self.size(d) % 2 == 0, "Halving dimension must be even, but dimension ", d, " is size ",
              self.size(d));
  return d;
}
at::Tensor hpu_glu(const at::Tensor& self, int64_t dim) {
  int64_t d = hpu_glu_dim(self, dim), h = self.size(d) / 2;
  check_float_act("glu_cpu", self);
  return pw("glu", HPU_OP_GLU, {self.narrow(d, 0, h), self.narrow(d, h, h)}, self.scalar_type(), self.scalar_type());
}
at::Tensor& hpu_glu_out(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  int64_t d = hpu_glu_dim(self, dim), h = self.size(d) / 2;
  check_float_act("glu_cpu", self);
  return pw_into("glu", HPU_OP_GLU, out, false, {self.narrow(d, 0, h), self.narrow(d, h, h)}, self.scalar_type(),
                 self.scalar_type());
}
at::Tensor& hpu_glu_backward_out(const at::Tensor& grad, const at::Tensor& self, int64_t dim, at::Tensor& grad_input) {
  int64_t d = hpu_glu_dim(self, dim), h = self.size(d) / 2;
  at::native::resize_output(grad_input, self.sizes());
  at::Tensor ga = grad_input.narrow(d, 0, h), gb = grad_input.narrow(d, h, h);
  at::sigmoid_out(gb, self.narrow(d, h, h));
  at::mul_out(ga, gb, grad);
  auto t = result_of({gb, self, grad});
  check_hpu_dtype(t, "glu_backward");
  pw_into("glu_backward", HPU_OP_GLU_BACKWARD, gb, true, {gb, self.narrow(d, 0, h), grad}, t, t);
  return grad_input;
}
at::Tensor hpu_glu_backward(const at::Tensor& grad, const at::Tensor& self, int64_t dim) {
  at::Tensor out = at::empty({0}, self.options());
  return hpu_glu_backward_out(grad, self, dim, out);
}

// binary_cross_entropy: the loss per element on the card (an input or a
// target outside [0, 1] raises at the next synchronisation, with the CPU's
// message, where the CPU raises at once), then the weight, then the mean or
// the sum, as the CPU's. The backward has no such check on the CPU either.
void check_bce_dtypes(const char* name, const at::Tensor& self, std::initializer_list<const at::Tensor*> others) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"", name, "\" not implemented for '",
                              self.scalar_type(), "'");
  for (const at::Tensor* t : others)
    TORCH_CHECK(t->scalar_type() == self.scalar_type(), "Found dtype ", t->scalar_type(), " but expected ",
                self.scalar_type());
}
at::Tensor hpu_binary_cross_entropy(const at::Tensor& self, const at::Tensor& target,
                                    const std::optional<at::Tensor>& weight, int64_t reduction) {
  check_same_device("binary_cross_entropy", {&self, &target});
  check_bce_dtypes("binary_cross_entropy", self, {&target});
  // the CPU's loss starts as self's shape and is resized (with its
  // warning) when the target broadcasts beyond it
  at::Tensor loss = new_hpu_tensor(self.sizes(), self.scalar_type(), self.device().index());
  auto shape = at::infer_size(self.sizes(), target.sizes());
  at::native::resize_output(loss, shape);
  if (loss.numel() > 0) {
    hpu_node_t node;
    init_node(&node, HPU_OP_BINARY_CROSS_ENTROPY);
    node.num_outputs = 1;
    fill_desc(&node.outputs[0], loss);
    node.num_inputs = 2;
    fill_desc(&node.inputs[0], self.expand(shape));
    fill_desc(&node.inputs[1], target.expand(shape));
    node.compute_dtype = to_hpu_dtype(self.scalar_type());
    launch(loss.device().index(), node);
  }
  if (weight && weight->defined()) loss.mul_(*weight);
  return reduce_loss(loss, reduction);
}
at::Tensor& hpu_binary_cross_entropy_out(const at::Tensor& self, const at::Tensor& target,
                                         const std::optional<at::Tensor>& weight, int64_t reduction,
                                         at::Tensor& out) {
  return into_out(hpu_binary_cross_entropy(self, target, weight, reduction), out);
}
at::Tensor& hpu_binary_cross_entropy_backward_out(const at::Tensor& grad, const at::Tensor& self,
                                                  const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                                  int64_t reduction, at::Tensor& grad_input) {
  check_bce_dtypes("binary_cross_entropy_backward", self, {&target, &grad});
  auto t = self.scalar_type();
  pw_into("binary_cross_entropy_backward", HPU_OP_BCE_BACKWARD, grad_input, false, {self, target, grad}, t, t);
  if (weight && weight->defined()) grad_input.mul_(*weight);
  if (reduction == 1) grad_input.div_(static_cast<double>(self.numel()));
  return grad_input;
}
at::Tensor hpu_binary_cross_entropy_backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                             const std::optional<at::Tensor>& weight, int64_t reduction) {
  at::Tensor out = at::empty({0}, self.options());
  return hpu_binary_cross_entropy_backward_out(grad, self, target, weight, reduction, out);
}

// prelu (its composite has already checked the weight's size): the CPU
// kernel's select and one product, from the card's own where / mul; NaN
// takes the negative side there and here.
void check_prelu(const at::Tensor& self, const at::Tensor& weight) {
  check_same_device("prelu", {&self, &weight});
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"prelu_cpu\" not implemented for '",
                              self.scalar_type(), "'");
  TORCH_CHECK(weight.scalar_type() == self.scalar_type(), "Found dtype ", weight.scalar_type(), " but expected ",
              self.scalar_type());
}
at::Tensor hpu_prelu_kernel(const at::Tensor& self, const at::Tensor& weight) {
  check_prelu(self, weight);
  return at::where(self > 0, self, weight * self);
}
std::tuple<at::Tensor, at::Tensor> hpu_prelu_kernel_backward(const at::Tensor& grad, const at::Tensor& self,
                                                             const at::Tensor& weight) {
  check_prelu(self, weight);
  at::Tensor positive = self > 0;
  return {at::where(positive, grad, weight * grad), at::where(positive, at::zeros({}, grad.options()), self * grad)};
}

// rrelu: in training, each element <= 0 (NaN is not) is scaled by a draw
// from U(lower, upper), kept in noise (1 elsewhere), as the CPU's; in
// evaluation, leaky_relu with the mean slope and noise untouched. The draws
// come from the card's generator, so they are not the CPU's numbers.
at::Tensor rrelu_noise_factor(const at::Tensor& self, at::Tensor& noise, const c10::Scalar& lower,
                              const c10::Scalar& upper, std::optional<at::Generator> generator) {
  check_float_act("rrelu_with_noise_out_cpu", self);
  at::Tensor draw = at::empty_like(self).uniform_(lower.to<double>(), upper.to<double>(), generator);
  at::Tensor factor = at::where(self <= 0, draw, at::ones({}, self.options()));
  noise.copy_(factor);
  return factor;
}
at::Tensor hpu_rrelu_with_noise(const at::Tensor& self, at::Tensor& noise, const c10::Scalar& lower,
                                const c10::Scalar& upper, bool training, std::optional<at::Generator> generator) {
  if (!training) return at::leaky_relu(self, (lower.to<double>() + upper.to<double>()) / 2);
  return self * rrelu_noise_factor(self, noise, lower, upper, generator);
}
at::Tensor& hpu_rrelu_with_noise_(at::Tensor& self, at::Tensor& noise, const c10::Scalar& lower,
                                  const c10::Scalar& upper, bool training, std::optional<at::Generator> generator) {
  if (!training) return at::leaky_relu_(self, (lower.to<double>() + upper.to<double>()) / 2);
  return self.mul_(rrelu_noise_factor(self, noise, lower, upper, generator));
}

// Comparisons: bool results (in place: into self's dtype).
template <hpu_op_t OP>
at::Tensor cmp(const at::Tensor& a, const at::Tensor& b) {
  return pw(hpu_op_name(OP), OP, {a, b}, at::kBool, result_of({a, b}));
}
template <hpu_op_t OP>
at::Tensor& cmp_(at::Tensor& a, const at::Tensor& b) {
  return pw_into(hpu_op_name(OP), OP, a, true, {a, b}, a.scalar_type(), result_of({a, b}));
}
template <hpu_op_t OP>
at::Tensor& cmp_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  return pw_into(hpu_op_name(OP), OP, out, false, {a, b}, out.scalar_type(), result_of({a, b}));
}
template <hpu_op_t OP>
at::Tensor cmp_s(const at::Tensor& a, const c10::Scalar& b) {
  return pw(hpu_op_name(OP), OP, {a, b}, at::kBool, result_of({a, b}));
}
template <hpu_op_t OP>
at::Tensor& cmp_s_(at::Tensor& a, const c10::Scalar& b) {
  return pw_into(hpu_op_name(OP), OP, a, true, {a, b}, a.scalar_type(), result_of({a, b}));
}
template <hpu_op_t OP>
at::Tensor& cmp_s_out(const at::Tensor& a, const c10::Scalar& b, at::Tensor& out) {
  return pw_into(hpu_op_name(OP), OP, out, false, {a, b}, out.scalar_type(), result_of({a, b}));
}
// logical_*: .out only (the rest are composites); compute in the common type.
template <hpu_op_t OP>
at::Tensor& logical_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  return pw_into(hpu_op_name(OP), OP, out, false, {a, b}, out.scalar_type(), result_of({a, b}));
}

at::Tensor rsub(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  return at::sub(other, self, alpha);
}

// pow ---------------------------------------------------------------------------

void check_pow_int(const at::Tensor& base, const c10::Scalar& e) {
  if (at::isIntegralType(base.scalar_type(), true) && e.isIntegral(true))
    TORCH_CHECK(e.toLong() >= 0, "Integers to negative integer powers are not allowed.");
}
at::Tensor pow_ts(const at::Tensor& a, const c10::Scalar& e) {
  check_pow_int(a, e);
  auto t = result_of({a, e});
  return pw("pow", HPU_OP_POW, {a, e}, t, t);
}
at::Tensor& pow_ts_(at::Tensor& a, const c10::Scalar& e) {
  check_pow_int(a, e);
  auto t = result_of({a, e});
  return pw_into("pow_", HPU_OP_POW, a, true, {a, e}, t, t);
}
at::Tensor& pow_ts_out(const at::Tensor& a, const c10::Scalar& e, at::Tensor& out) {
  check_pow_int(a, e);
  auto t = result_of({a, e});
  return pw_into("pow", HPU_OP_POW, out, false, {a, e}, t, t);
}
at::Tensor pow_st(const c10::Scalar& s, const at::Tensor& e) {
  auto t = result_of({s, e});
  return pw("pow", HPU_OP_POW, {s, e}, t, t);
}
at::Tensor& pow_st_out(const c10::Scalar& s, const at::Tensor& e, at::Tensor& out) {
  auto t = result_of({s, e});
  return pw_into("pow", HPU_OP_POW, out, false, {s, e}, t, t);
}

// Ternary -----------------------------------------------------------------------

at::Tensor where(const at::Tensor& cond, const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(cond.scalar_type() == at::kBool || cond.scalar_type() == at::kByte,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ",
              cond.scalar_type());
  auto t = result_of({a, b});
  return pw("where", HPU_OP_WHERE, {cond, a, b}, t, t);
}
at::Tensor& where_out(const at::Tensor& cond, const at::Tensor& a, const at::Tensor& b,
                      at::Tensor& out) {
  TORCH_CHECK(cond.scalar_type() == at::kBool || cond.scalar_type() == at::kByte,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ",
              cond.scalar_type());
  auto t = result_of({a, b});
  return pw_into("where", HPU_OP_WHERE, out, false, {cond, a, b}, t, t);
}

at::Tensor& masked_fill_s(at::Tensor& self, const at::Tensor& mask, const c10::Scalar& value) {
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  check_devices("masked_fill_", {self, mask}, nullptr);
  auto shape = at::infer_size(self.sizes(), mask.sizes());
  TORCH_CHECK(at::IntArrayRef(shape) == self.sizes(), "masked_fill_: mask of shape ", mask.sizes(),
              " does not broadcast to self's ", self.sizes());
  run(HPU_OP_WHERE, self, {mask, value, self}, self.scalar_type());
  return self;
}
at::Tensor& masked_fill_t(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  if (value.is_cpu()) return masked_fill_s(self, mask, value.item());
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  check_devices("masked_fill_", {self, mask, value}, nullptr);
  auto shape = at::infer_size(self.sizes(), mask.sizes());
  TORCH_CHECK(at::IntArrayRef(shape) == self.sizes(), "masked_fill_: mask of shape ", mask.sizes(),
              " does not broadcast to self's ", self.sizes());
  run(HPU_OP_WHERE, self, {mask, value, self}, self.scalar_type());
  return self;
}

void check_lerp(const at::Tensor& self, const at::Tensor& end, const at::Tensor* w) {
  TORCH_CHECK(self.scalar_type() == end.scalar_type(), "expected dtype ", self.scalar_type(),
              " for `end` but got dtype ", end.scalar_type());
  if (w)
    TORCH_CHECK(self.scalar_type() == w->scalar_type(), "expected dtype ", self.scalar_type(),
                " for `weight` but got dtype ", w->scalar_type());
  check_float_act("lerp_kernel_scalar", self);
}
at::Tensor lerp_s(const at::Tensor& self, const at::Tensor& end, const c10::Scalar& w) {
  check_lerp(self, end, nullptr);
  return pw("lerp", HPU_OP_LERP, {self, end, w}, self.scalar_type(), self.scalar_type());
}
at::Tensor& lerp_s_(at::Tensor& self, const at::Tensor& end, const c10::Scalar& w) {
  check_lerp(self, end, nullptr);
  return pw_into("lerp_", HPU_OP_LERP, self, true, {self, end, w}, self.scalar_type(),
                 self.scalar_type());
}
at::Tensor& lerp_s_out(const at::Tensor& self, const at::Tensor& end, const c10::Scalar& w,
                       at::Tensor& out) {
  check_lerp(self, end, nullptr);
  return pw_into("lerp", HPU_OP_LERP, out, false, {self, end, w}, self.scalar_type(),
                 self.scalar_type());
}
at::Tensor lerp_t(const at::Tensor& self, const at::Tensor& end, const at::Tensor& w) {
  check_lerp(self, end, &w);
  return pw("lerp", HPU_OP_LERP, {self, end, w}, self.scalar_type(), self.scalar_type());
}
at::Tensor& lerp_t_(at::Tensor& self, const at::Tensor& end, const at::Tensor& w) {
  check_lerp(self, end, &w);
  return pw_into("lerp_", HPU_OP_LERP, self, true, {self, end, w}, self.scalar_type(),
                 self.scalar_type());
}
at::Tensor& lerp_t_out(const at::Tensor& self, const at::Tensor& end, const at::Tensor& w,
                       at::Tensor& out) {
  check_lerp(self, end, &w);
  return pw_into("lerp", HPU_OP_LERP, out, false, {self, end, w}, self.scalar_type(),
                 self.scalar_type());
}

template <hpu_op_t OP>
void check_addc(const at::Tensor& t1, const at::Tensor& t2) {
  if (OP == HPU_OP_ADDCDIV)
    TORCH_CHECK(!(at::isIntegralType(t1.scalar_type(), true) &&
                  at::isIntegralType(t2.scalar_type(), true)),
                "Integer division with addcdiv is no longer supported, and in a future release "
                "addcdiv will perform a true division of tensor1 and tensor2. The historic "
                "addcdiv behavior can be implemented as (input + value * torch.trunc(tensor1 / "
                "tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / "
                "tensor2) for float inputs. The future addcdiv behavior is just the latter "
                "implementation: (input + value * tensor1 / tensor2), for all dtypes.");
}
template <hpu_op_t OP>
at::Tensor addc(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                const c10::Scalar& v) {
  check_addc<OP>(t1, t2);
  auto t = result_of({self, t1, t2});
  return pw(hpu_op_name(OP), OP, {self, t1, t2}, t, t, one_param(v));
}
template <hpu_op_t OP>
at::Tensor& addc_(at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                  const c10::Scalar& v) {
  check_addc<OP>(t1, t2);
  auto t = result_of({self, t1, t2});
  return pw_into(hpu_op_name(OP), OP, self, true, {self, t1, t2}, t, t, one_param(v));
}
template <hpu_op_t OP>
at::Tensor& addc_out(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                     const c10::Scalar& v, at::Tensor& out) {
  check_addc<OP>(t1, t2);
  auto t = result_of({self, t1, t2});
  return pw_into(hpu_op_name(OP), OP, out, false, {self, t1, t2}, t, t, one_param(v));
}

// arange, triu / tril ------------------------------------------------------------

at::Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step,
                       at::Tensor& out) {
  double s = start.to<double>(), e = end.to<double>(), st = step.to<double>();
  TORCH_CHECK(std::isfinite(s) && std::isfinite(e), "unsupported range: ", s, " -> ", e);
  TORCH_CHECK(st != 0, "step must be nonzero");
  TORCH_CHECK((st > 0 && e >= s) || (st < 0 && e <= s),
              "upper bound and larger bound inconsistent with step sign");
  int64_t n;
  bool integral = at::isIntegralType(out.scalar_type(), true) && start.isIntegral(true) &&
                  end.isIntegral(true) && step.isIntegral(true);
  if (integral) {
    int64_t a = start.toLong(), b = end.toLong(), c = step.toLong();
    n = c > 0 ? (b - a + c - 1) / c : (a - b + (-c) - 1) / (-c);
  } else {
    n = static_cast<int64_t>(std::ceil((e - s) / st));
  }
  TORCH_CHECK(n >= 0, "arange: invalid number of elements ", n);
  if (out.numel() != n) out.resize_({n});
  Params p;
  p.s[0] = to_hpu_scalar(start);
  p.s[1] = to_hpu_scalar(step);
  auto t = out.scalar_type();
  // Float outputs accumulate in double (PyTorch's accscalar_t).
  at::ScalarType compute = (t == at::kFloat || t == at::kDouble) ? at::kDouble : t;
  run(HPU_OP_ARANGE, out, {}, compute, p);
  return out;
}

template <hpu_op_t OP>
at::Tensor tri(const at::Tensor& self, int64_t diagonal) {
  TORCH_CHECK(self.dim() >= 2, OP == HPU_OP_TRIU ? "triu" : "tril",
              ": input tensor must have at least 2 dimensions");
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  Params p;
  p.i[0] = diagonal;
  if (out.numel() == 0) return out;
  hpu_node_t node{};
  node.op = OP;
  node.num_inputs = node.num_outputs = 1;
  node.inputs[0] = to_desc(self);
  node.outputs[0] = to_desc(out);
  node.compute_dtype = node.outputs[0].dtype;
  node.params.pointwise.i[0] = diagonal;
  launch(out.device().index(), node);
  return out;
}
template <hpu_op_t OP>
at::Tensor& tri_out(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  TORCH_CHECK(self.dim() >= 2, OP == HPU_OP_TRIU ? "triu" : "tril",
              ": input tensor must have at least 2 dimensions");
  check_devices(hpu_op_name(OP), {self}, &out);
  at::native::resize_output(out, self.sizes());
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), hpu_op_name(OP), ": expected out dtype ",
              self.scalar_type(), ", got ", out.scalar_type());
  if (out.numel() == 0) return out;
  hpu_node_t node{};
  node.op = OP;
  node.num_inputs = node.num_outputs = 1;
  node.inputs[0] = to_desc(self);
  node.outputs[0] = to_desc(out);
  node.compute_dtype = node.outputs[0].dtype;
  node.params.pointwise.i[0] = diagonal;
  launch(out.device().index(), node);
  return out;
}
template <hpu_op_t OP>
at::Tensor& tri_(at::Tensor& self, int64_t diagonal) {
  return tri_out<OP>(self, diagonal, self);
}

// Fused optimizers ------------------------------------------------------------------

enum { OPT_SCALE = 1, OPT_FOUND_INF = 2 };

void check_list(const char* name, at::TensorList ref, at::TensorList l, const char* what) {
  TORCH_CHECK(l.size() == ref.size(), name, ": expected ", ref.size(), " ", what, ", got ",
              l.size());
}

int opt_extras(hpu_node_t& node, const std::optional<at::Tensor>& scale,
               const std::optional<at::Tensor>& found_inf, const at::Tensor& like) {
  int flags = 0;
  if (scale.has_value() && scale->defined()) {
    TORCH_CHECK(scale->device() == like.device(), "grad_scale must be on ", like.device());
    node.inputs[node.num_inputs++] = to_desc(*scale);
    flags |= OPT_SCALE;
  }
  if (found_inf.has_value() && found_inf->defined()) {
    TORCH_CHECK(found_inf->device() == like.device(), "found_inf must be on ", like.device());
    node.inputs[node.num_inputs++] = to_desc(*found_inf);
    flags |= OPT_FOUND_INF;
  }
  return flags;
}

void fused_adam_impl(bool adamw, at::TensorList params, at::TensorList grads,
                     at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                     at::TensorList max_exp_avg_sqs, at::TensorList steps, double lr, double beta1,
                     double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
                     const std::optional<at::Tensor>& grad_scale,
                     const std::optional<at::Tensor>& found_inf) {
  const char* name = adamw ? "_fused_adamw_" : "_fused_adam_";
  check_list(name, params, grads, "grads");
  check_list(name, params, exp_avgs, "exp_avgs");
  check_list(name, params, exp_avg_sqs, "exp_avg_sqs");
  check_list(name, params, steps, "state_steps");
  if (amsgrad)
    check_list(name, params, max_exp_avg_sqs, "max_exp_avg_sqs");
  else
    TORCH_CHECK(max_exp_avg_sqs.empty(), name, ": max_exp_avg_sqs must be empty without amsgrad");
  for (size_t i = 0; i < params.size(); i++) {
    const at::Tensor& p = params[i];
    TORCH_CHECK(is_hpu(p), name, ": expected hpu parameters, got one on ", p.device());
    for (const at::Tensor* t : {&grads[i], &exp_avgs[i], &exp_avg_sqs[i], &steps[i]})
      TORCH_CHECK(t->device() == p.device(), name, ": all tensors must be on ", p.device(),
                  ", got one on ", t->device());
    if (p.numel() == 0) continue;
    hpu_node_t node{};
    node.op = HPU_OP_FUSED_ADAM;
    node.num_outputs = amsgrad ? 4 : 3;
    node.outputs[0] = to_desc(p);
    node.outputs[1] = to_desc(exp_avgs[i]);
    node.outputs[2] = to_desc(exp_avg_sqs[i]);
    if (amsgrad) node.outputs[3] = to_desc(max_exp_avg_sqs[i]);
    node.inputs[node.num_inputs++] = to_desc(grads[i]);
    node.inputs[node.num_inputs++] = to_desc(steps[i]);
    auto& pp = node.params.pointwise;
    pp.i[2] = opt_extras(node, grad_scale, found_inf, p);
    pp.i[0] = (amsgrad ? 1 : 0) | (maximize ? 2 : 0) | (adamw ? 4 : 0);
    pp.s[0] = fscalar(lr);
    pp.s[1] = fscalar(beta1);
    pp.s[2] = fscalar(beta2);
    pp.s[3] = fscalar(weight_decay);
    pp.s[4] = fscalar(eps);
    pp.s[5] = fscalar(0);
    node.compute_dtype = node.outputs[0].dtype;
    launch(p.device().index(), node);
  }
}

void fused_adam(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList steps,
                double lr, double beta1, double beta2, double weight_decay, double eps,
                bool amsgrad, bool maximize, const std::optional<at::Tensor>& grad_scale,
                const std::optional<at::Tensor>& found_inf) {
  fused_adam_impl(false, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1,
                  beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf);
}
void fused_adamw(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                 at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList steps,
                 double lr, double beta1, double beta2, double weight_decay, double eps,
                 bool amsgrad, bool maximize, const std::optional<at::Tensor>& grad_scale,
                 const std::optional<at::Tensor>& found_inf) {
  fused_adam_impl(true, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1,
                  beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf);
}
void fused_adam_tlr(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                    at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,
                    at::TensorList steps, const at::Tensor& lr, double beta1, double beta2,
                    double weight_decay, double eps, bool amsgrad, bool maximize,
                    const std::optional<at::Tensor>& grad_scale,
                    const std::optional<at::Tensor>& found_inf) {
  fused_adam_impl(false, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps,
                  lr.item<double>(), beta1, beta2, weight_decay, eps, amsgrad, maximize,
                  grad_scale, found_inf);
}
void fused_adamw_tlr(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                     at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,
                     at::TensorList steps, const at::Tensor& lr, double beta1, double beta2,
                     double weight_decay, double eps, bool amsgrad, bool maximize,
                     const std::optional<at::Tensor>& grad_scale,
                     const std::optional<at::Tensor>& found_inf) {
  fused_adam_impl(true, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps,
                  lr.item<double>(), beta1, beta2, weight_decay, eps, amsgrad, maximize,
                  grad_scale, found_inf);
}

void fused_sgd(at::TensorList params, at::TensorList grads, at::TensorList bufs,
               double weight_decay, double momentum, double lr, double dampening, bool nesterov,
               bool maximize, bool is_first_step, const std::optional<at::Tensor>& grad_scale,
               const std::optional<at::Tensor>& found_inf) {
  const char* name = "_fused_sgd_";
  check_list(name, params, grads, "grads");
  if (momentum != 0) check_list(name, params, bufs, "momentum_buffer_list");
  for (size_t i = 0; i < params.size(); i++) {
    const at::Tensor& p = params[i];
    TORCH_CHECK(is_hpu(p), name, ": expected hpu parameters, got one on ", p.device());
    if (p.numel() == 0) continue;
    hpu_node_t node{};
    node.op = HPU_OP_FUSED_SGD;
    node.num_outputs = momentum != 0 ? 2 : 1;
    node.outputs[0] = to_desc(p);
    if (momentum != 0) node.outputs[1] = to_desc(bufs[i]);
    node.inputs[node.num_inputs++] = to_desc(grads[i]);
    auto& pp = node.params.pointwise;
    pp.i[2] = opt_extras(node, grad_scale, found_inf, p);
    pp.i[0] = (nesterov ? 1 : 0) | (maximize ? 2 : 0) | (is_first_step ? 4 : 0);
    pp.s[0] = fscalar(lr);
    pp.s[1] = fscalar(momentum);
    pp.s[2] = fscalar(dampening);
    pp.s[3] = fscalar(weight_decay);
    pp.s[4] = fscalar(0);
    pp.s[5] = fscalar(0);
    node.compute_dtype = node.outputs[0].dtype;
    launch(p.device().index(), node);
  }
}
void fused_sgd_tlr(at::TensorList params, at::TensorList grads, at::TensorList bufs,
                   double weight_decay, double momentum, const at::Tensor& lr, double dampening,
                   bool nesterov, bool maximize, bool is_first_step,
                   const std::optional<at::Tensor>& grad_scale,
                   const std::optional<at::Tensor>& found_inf) {
  fused_sgd(params, grads, bufs, weight_decay, momentum, lr.item<double>(), dampening, nesterov,
            maximize, is_first_step, grad_scale, found_inf);
}

}  // namespace

#define UNARY_FLOAT(NAME, OP)                                  \
  m.impl(#NAME, TORCH_FN(u_float<OP>));                        \
  m.impl(#NAME "_", TORCH_FN(u_float_<OP>));                   \
  m.impl(#NAME ".out", TORCH_FN(u_float_out<OP>));
#define UNARY_SAME(NAME, OP)                                   \
  m.impl(#NAME, TORCH_FN(u_same<OP>));                         \
  m.impl(#NAME "_", TORCH_FN(u_same_<OP>));                    \
  m.impl(#NAME ".out", TORCH_FN(u_same_out<OP>));

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  UNARY_FLOAT(exp, HPU_OP_EXP)
  UNARY_FLOAT(exp2, HPU_OP_EXP2)
  UNARY_FLOAT(log, HPU_OP_LOG)
  UNARY_FLOAT(log2, HPU_OP_LOG2)
  UNARY_FLOAT(log10, HPU_OP_LOG10)
  UNARY_FLOAT(log1p, HPU_OP_LOG1P)
  UNARY_FLOAT(expm1, HPU_OP_EXPM1)
  UNARY_FLOAT(sqrt, HPU_OP_SQRT)
  UNARY_FLOAT(rsqrt, HPU_OP_RSQRT)
  UNARY_FLOAT(reciprocal, HPU_OP_RECIPROCAL)
  UNARY_FLOAT(sin, HPU_OP_SIN)
  UNARY_FLOAT(cos, HPU_OP_COS)
  UNARY_FLOAT(tan, HPU_OP_TAN)
  UNARY_FLOAT(tanh, HPU_OP_TANH)
  UNARY_FLOAT(sigmoid, HPU_OP_SIGMOID)
  UNARY_FLOAT(erf, HPU_OP_ERF)
  UNARY_FLOAT(asin, HPU_OP_ASIN)
  UNARY_FLOAT(acos, HPU_OP_ACOS)
  UNARY_FLOAT(atan, HPU_OP_ATAN)
  UNARY_FLOAT(sinh, HPU_OP_SINH)
  UNARY_FLOAT(cosh, HPU_OP_COSH)
  UNARY_FLOAT(asinh, HPU_OP_ASINH)
  UNARY_FLOAT(acosh, HPU_OP_ACOSH)
  UNARY_FLOAT(atanh, HPU_OP_ATANH)
  UNARY_SAME(neg, HPU_OP_NEG)
  UNARY_SAME(floor, HPU_OP_FLOOR)
  UNARY_SAME(ceil, HPU_OP_CEIL)
  UNARY_SAME(round, HPU_OP_ROUND)
  UNARY_SAME(trunc, HPU_OP_TRUNC)
  UNARY_SAME(sign, HPU_OP_SIGN)
  UNARY_SAME(sgn, HPU_OP_SIGN)  // sign of a real tensor (complex is not an hpu dtype)
  UNARY_SAME(bitwise_not, HPU_OP_BITWISE_NOT)
  m.impl("abs.out", TORCH_FN(abs_out));
  m.impl("logical_not.out", TORCH_FN(logical_not_out));
  m.impl("isnan", TORCH_FN(isnan));
  m.impl("nan_to_num.out", TORCH_FN(nan_to_num_out));
}

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("gelu", TORCH_FN(gelu));
  m.impl("gelu_", TORCH_FN(gelu_));
  m.impl("gelu.out", TORCH_FN(gelu_out));
  m.impl("gelu_backward", TORCH_FN(gelu_backward));
  m.impl("gelu_backward.grad_input", TORCH_FN(gelu_backward_out));
  m.impl("silu", TORCH_FN(silu));
  m.impl("silu_", TORCH_FN(silu_));
  m.impl("silu.out", TORCH_FN(silu_out));
  m.impl("silu_backward", TORCH_FN(bwd<HPU_OP_SILU_BACKWARD>));
  m.impl("silu_backward.grad_input", TORCH_FN(bwd_out<HPU_OP_SILU_BACKWARD>));
  m.impl("tanh_backward", TORCH_FN(bwd<HPU_OP_TANH_BACKWARD>));
  m.impl("tanh_backward.grad_input", TORCH_FN(bwd_out<HPU_OP_TANH_BACKWARD>));
  m.impl("sigmoid_backward", TORCH_FN(bwd<HPU_OP_SIGMOID_BACKWARD>));
  m.impl("sigmoid_backward.grad_input", TORCH_FN(bwd_out<HPU_OP_SIGMOID_BACKWARD>));
  m.impl("threshold", TORCH_FN(threshold));
  m.impl("threshold_", TORCH_FN(threshold_));
  m.impl("threshold.out", TORCH_FN(threshold_out));
  m.impl("threshold_backward", TORCH_FN(threshold_backward));
  m.impl("threshold_backward.grad_input", TORCH_FN(threshold_backward_out));
  m.impl("leaky_relu", TORCH_FN(leaky_relu));
  m.impl("leaky_relu_", TORCH_FN(leaky_relu_));
  m.impl("leaky_relu.out", TORCH_FN(leaky_relu_out));
  m.impl("leaky_relu_backward", TORCH_FN(leaky_relu_backward));
  m.impl("leaky_relu_backward.grad_input", TORCH_FN(leaky_relu_backward_out));
  m.impl("hardtanh", TORCH_FN(hardtanh));
  m.impl("hardtanh_", TORCH_FN(hardtanh_));
  m.impl("hardtanh.out", TORCH_FN(hardtanh_out));
  m.impl("hardtanh_backward", TORCH_FN(hardtanh_backward));
  m.impl("hardtanh_backward.grad_input", TORCH_FN(hardtanh_backward_out));
}

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("elu", TORCH_FN(elu));
  m.impl("elu_", TORCH_FN(elu_));
  m.impl("elu.out", TORCH_FN(elu_out));
  m.impl("elu_backward", TORCH_FN(elu_backward));
  m.impl("elu_backward.grad_input", TORCH_FN(elu_backward_out));
  m.impl("softplus", TORCH_FN(softplus));
  m.impl("softplus.out", TORCH_FN(softplus_out));
  m.impl("softplus_backward", TORCH_FN(softplus_backward));
  m.impl("softplus_backward.grad_input", TORCH_FN(softplus_backward_out));
  m.impl("hardswish", TORCH_FN(act0<HPU_OP_HARDSWISH>));
  m.impl("hardswish_", TORCH_FN(act0_<HPU_OP_HARDSWISH>));
  m.impl("hardswish.out", TORCH_FN(act0_out<HPU_OP_HARDSWISH>));
  m.impl("hardswish_backward", TORCH_FN(act0_bwd<HPU_OP_HARDSWISH_BACKWARD>));
  m.impl("hardswish_backward.out", TORCH_FN(act0_bwd_out<HPU_OP_HARDSWISH_BACKWARD>));
  m.impl("hardsigmoid", TORCH_FN(act0<HPU_OP_HARDSIGMOID>));
  m.impl("hardsigmoid_", TORCH_FN(act0_<HPU_OP_HARDSIGMOID>));
  m.impl("hardsigmoid.out", TORCH_FN(act0_out<HPU_OP_HARDSIGMOID>));
  m.impl("hardsigmoid_backward", TORCH_FN(act0_bwd<HPU_OP_HARDSIGMOID_BACKWARD>));
  m.impl("hardsigmoid_backward.grad_input", TORCH_FN(act0_bwd_out<HPU_OP_HARDSIGMOID_BACKWARD>));
  m.impl("mish", TORCH_FN(act0<HPU_OP_MISH>));
  m.impl("mish_", TORCH_FN(act0_<HPU_OP_MISH>));
  m.impl("mish.out", TORCH_FN(act0_out<HPU_OP_MISH>));
  m.impl("mish_backward", TORCH_FN(act0_bwd<HPU_OP_MISH_BACKWARD>));
  m.impl("log_sigmoid_forward", TORCH_FN(log_sigmoid_forward));
  m.impl("log_sigmoid_forward.output", TORCH_FN(log_sigmoid_forward_out));
  m.impl("log_sigmoid_backward", TORCH_FN(log_sigmoid_backward));
  m.impl("log_sigmoid_backward.grad_input", TORCH_FN(log_sigmoid_backward_out));
}

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("clamp", TORCH_FN(clamp));
  m.impl("clamp_", TORCH_FN(clamp_));
  m.impl("clamp.out", TORCH_FN(clamp_out));
  m.impl("clamp.Tensor", TORCH_FN(clamp_t));
  m.impl("clamp_.Tensor", TORCH_FN(clamp_t_));
  m.impl("clamp.Tensor_out", TORCH_FN(clamp_t_out));
  m.impl("clamp_min", TORCH_FN(clamp_one<1>));
  m.impl("clamp_min_", TORCH_FN(clamp_one_<1>));
  m.impl("clamp_min.out", TORCH_FN(clamp_one_out<1>));
  m.impl("clamp_min.Tensor", TORCH_FN(clamp_one_t<1>));
  m.impl("clamp_min_.Tensor", TORCH_FN(clamp_one_t_<1>));
  m.impl("clamp_min.Tensor_out", TORCH_FN(clamp_one_t_out<1>));
  m.impl("clamp_max", TORCH_FN(clamp_one<2>));
  m.impl("clamp_max_", TORCH_FN(clamp_one_<2>));
  m.impl("clamp_max.out", TORCH_FN(clamp_one_out<2>));
  m.impl("clamp_max.Tensor", TORCH_FN(clamp_one_t<2>));
  m.impl("clamp_max_.Tensor", TORCH_FN(clamp_one_t_<2>));
  m.impl("clamp_max.Tensor_out", TORCH_FN(clamp_one_t_out<2>));
}

#define BINARY(NAME, OVL, OP)                                           \
  m.impl(#NAME OVL, TORCH_FN(b_op<OP>));                                \
  m.impl(#NAME "_" OVL, TORCH_FN(b_op_<OP>));
#define CMP(NAME, OP)                                                   \
  m.impl(#NAME ".Tensor", TORCH_FN(cmp<OP>));                           \
  m.impl(#NAME "_.Tensor", TORCH_FN(cmp_<OP>));                         \
  m.impl(#NAME ".Tensor_out", TORCH_FN(cmp_out<OP>));                   \
  m.impl(#NAME ".Scalar", TORCH_FN(cmp_s<OP>));                         \
  m.impl(#NAME "_.Scalar", TORCH_FN(cmp_s_<OP>));                       \
  m.impl(#NAME ".Scalar_out", TORCH_FN(cmp_s_out<OP>));

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("maximum", TORCH_FN(b_op<HPU_OP_MAXIMUM>));
  m.impl("maximum.out", TORCH_FN(b_op_out<HPU_OP_MAXIMUM>));
  m.impl("minimum", TORCH_FN(b_op<HPU_OP_MINIMUM>));
  m.impl("minimum.out", TORCH_FN(b_op_out<HPU_OP_MINIMUM>));
  m.impl("atan2", TORCH_FN(b_op<HPU_OP_ATAN2>));
  m.impl("atan2_", TORCH_FN(b_op_<HPU_OP_ATAN2>));
  m.impl("atan2.out", TORCH_FN(b_op_out<HPU_OP_ATAN2>));
  m.impl("xlogy.Tensor", TORCH_FN(xlogy));
  m.impl("xlogy_.Tensor", TORCH_FN(xlogy_));
  m.impl("xlogy.OutTensor", TORCH_FN(xlogy_out));
  m.impl("mse_loss", TORCH_FN(hpu_mse_loss));
  m.impl("mse_loss.out", TORCH_FN(hpu_mse_loss_out));
  m.impl("mse_loss_backward", TORCH_FN(hpu_mse_loss_backward));
  m.impl("mse_loss_backward.grad_input", TORCH_FN(hpu_mse_loss_backward_out));
  m.impl("smooth_l1_loss", TORCH_FN(hpu_smooth_l1_loss));
  m.impl("smooth_l1_loss.out", TORCH_FN(hpu_smooth_l1_loss_out));
  m.impl("smooth_l1_loss_backward.grad_input", TORCH_FN(hpu_smooth_l1_loss_backward_out));
  m.impl("huber_loss", TORCH_FN(hpu_huber_loss));
  m.impl("huber_loss.out", TORCH_FN(hpu_huber_loss_out));
  m.impl("huber_loss_backward.out", TORCH_FN(hpu_huber_loss_backward_out));
  m.impl("softshrink", TORCH_FN(hpu_shrink<true>));
  m.impl("softshrink.out", TORCH_FN(hpu_shrink_out<true>));
  m.impl("hardshrink", TORCH_FN(hpu_shrink<false>));
  m.impl("hardshrink.out", TORCH_FN(hpu_shrink_out<false>));
  m.impl("softshrink_backward", TORCH_FN(hpu_shrink_backward));
  m.impl("softshrink_backward.grad_input", TORCH_FN(hpu_shrink_backward_out));
  m.impl("hardshrink_backward", TORCH_FN(hpu_shrink_backward));
  m.impl("hardshrink_backward.grad_input", TORCH_FN(hpu_shrink_backward_out));
  m.impl("binary_cross_entropy", TORCH_FN(hpu_binary_cross_entropy));
  m.impl("binary_cross_entropy.out", TORCH_FN(hpu_binary_cross_entropy_out));
  m.impl("binary_cross_entropy_backward", TORCH_FN(hpu_binary_cross_entropy_backward));
  m.impl("binary_cross_entropy_backward.grad_input", TORCH_FN(hpu_binary_cross_entropy_backward_out));
  m.impl("rrelu_with_noise", TORCH_FN(hpu_rrelu_with_noise));
  m.impl("rrelu_with_noise_", TORCH_FN(hpu_rrelu_with_noise_));
  m.impl("_prelu_kernel", TORCH_FN(hpu_prelu_kernel));
  m.impl("_prelu_kernel_backward", TORCH_FN(hpu_prelu_kernel_backward));
  m.impl("glu", TORCH_FN(hpu_glu));
  m.impl("glu.out", TORCH_FN(hpu_glu_out));
  m.impl("glu_backward", TORCH_FN(hpu_glu_backward));
  m.impl("glu_backward.grad_input", TORCH_FN(hpu_glu_backward_out));
  BINARY(remainder, ".Tensor", HPU_OP_REMAINDER)
  m.impl("remainder.Tensor_out", TORCH_FN(b_op_out<HPU_OP_REMAINDER>));
  BINARY(fmod, ".Tensor", HPU_OP_FMOD)
  m.impl("fmod.Tensor_out", TORCH_FN(b_op_out<HPU_OP_FMOD>));
  BINARY(bitwise_and, ".Tensor", HPU_OP_BITWISE_AND)
  m.impl("bitwise_and.Tensor_out", TORCH_FN(b_op_out<HPU_OP_BITWISE_AND>));
  BINARY(bitwise_or, ".Tensor", HPU_OP_BITWISE_OR)
  m.impl("bitwise_or.Tensor_out", TORCH_FN(b_op_out<HPU_OP_BITWISE_OR>));
  BINARY(bitwise_xor, ".Tensor", HPU_OP_BITWISE_XOR)
  m.impl("bitwise_xor.Tensor_out", TORCH_FN(b_op_out<HPU_OP_BITWISE_XOR>));
  CMP(eq, HPU_OP_EQ)
  CMP(ne, HPU_OP_NE)
  CMP(lt, HPU_OP_LT)
  CMP(le, HPU_OP_LE)
  CMP(gt, HPU_OP_GT)
  CMP(ge, HPU_OP_GE)
  m.impl("logical_and.out", TORCH_FN(logical_out<HPU_OP_LOGICAL_AND>));
  m.impl("logical_or.out", TORCH_FN(logical_out<HPU_OP_LOGICAL_OR>));
  m.impl("logical_xor.out", TORCH_FN(logical_out<HPU_OP_LOGICAL_XOR>));
  m.impl("rsub.Tensor", TORCH_FN(rsub));
  m.impl("pow.Tensor_Scalar", TORCH_FN(pow_ts));
  m.impl("pow_.Scalar", TORCH_FN(pow_ts_));
  m.impl("pow.Tensor_Scalar_out", TORCH_FN(pow_ts_out));
  m.impl("pow.Tensor_Tensor", TORCH_FN(b_op<HPU_OP_POW>));
  m.impl("pow_.Tensor", TORCH_FN(b_op_<HPU_OP_POW>));
  m.impl("pow.Tensor_Tensor_out", TORCH_FN(b_op_out<HPU_OP_POW>));
  m.impl("pow.Scalar", TORCH_FN(pow_st));
  m.impl("pow.Scalar_out", TORCH_FN(pow_st_out));
}

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("where.self", TORCH_FN(where));
  m.impl("where.self_out", TORCH_FN(where_out));
  m.impl("masked_fill_.Scalar", TORCH_FN(masked_fill_s));
  m.impl("masked_fill_.Tensor", TORCH_FN(masked_fill_t));
  m.impl("lerp.Scalar", TORCH_FN(lerp_s));
  m.impl("lerp_.Scalar", TORCH_FN(lerp_s_));
  m.impl("lerp.Scalar_out", TORCH_FN(lerp_s_out));
  m.impl("lerp.Tensor", TORCH_FN(lerp_t));
  m.impl("lerp_.Tensor", TORCH_FN(lerp_t_));
  m.impl("lerp.Tensor_out", TORCH_FN(lerp_t_out));
  m.impl("addcmul", TORCH_FN(addc<HPU_OP_ADDCMUL>));
  m.impl("addcmul_", TORCH_FN(addc_<HPU_OP_ADDCMUL>));
  m.impl("addcmul.out", TORCH_FN(addc_out<HPU_OP_ADDCMUL>));
  m.impl("addcdiv", TORCH_FN(addc<HPU_OP_ADDCDIV>));
  m.impl("addcdiv_", TORCH_FN(addc_<HPU_OP_ADDCDIV>));
  m.impl("addcdiv.out", TORCH_FN(addc_out<HPU_OP_ADDCDIV>));
  m.impl("arange.start_out", TORCH_FN(arange_out));
  m.impl("triu", TORCH_FN(tri<HPU_OP_TRIU>));
  m.impl("triu_", TORCH_FN(tri_<HPU_OP_TRIU>));
  m.impl("triu.out", TORCH_FN(tri_out<HPU_OP_TRIU>));
  m.impl("tril", TORCH_FN(tri<HPU_OP_TRIL>));
  m.impl("tril_", TORCH_FN(tri_<HPU_OP_TRIL>));
  m.impl("tril.out", TORCH_FN(tri_out<HPU_OP_TRIL>));
  m.impl("_fused_adam_", TORCH_FN(fused_adam));
  m.impl("_fused_adam_.tensor_lr", TORCH_FN(fused_adam_tlr));
  m.impl("_fused_adamw_", TORCH_FN(fused_adamw));
  m.impl("_fused_adamw_.tensor_lr", TORCH_FN(fused_adamw_tlr));
  m.impl("_fused_sgd_", TORCH_FN(fused_sgd));
  m.impl("_fused_sgd_.tensor_lr", TORCH_FN(fused_sgd_tlr));
}

}  // namespace habana_torch
