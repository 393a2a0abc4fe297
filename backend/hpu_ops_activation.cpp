// The pointwise family's activations and their backwards: gelu, silu,
// threshold / relu's backward, leaky_relu, elu, softplus, hardswish,
// hardsigmoid, mish, log_sigmoid, hardtanh, softshrink / hardshrink, glu,
// prelu and rrelu. Float types only, as the CPU's kernels.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include <limits>

#include "hpu_pointwise.h"

namespace habana_torch {
namespace {

using namespace pointwise;

// Activations ------------------------------------------------------------------

int64_t gelu_mode(std::string_view approximate) {
  if (approximate == "none") return 0;
  if (approximate == "tanh") return 1;
  TORCH_CHECK(false, "approximate argument must be either none or tanh.");
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

}  // namespace

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
  m.impl("softshrink", TORCH_FN(hpu_shrink<true>));
  m.impl("softshrink.out", TORCH_FN(hpu_shrink_out<true>));
  m.impl("hardshrink", TORCH_FN(hpu_shrink<false>));
  m.impl("hardshrink.out", TORCH_FN(hpu_shrink_out<false>));
  m.impl("softshrink_backward", TORCH_FN(hpu_shrink_backward));
  m.impl("softshrink_backward.grad_input", TORCH_FN(hpu_shrink_backward_out));
  m.impl("hardshrink_backward", TORCH_FN(hpu_shrink_backward));
  m.impl("hardshrink_backward.grad_input", TORCH_FN(hpu_shrink_backward_out));
  m.impl("rrelu_with_noise", TORCH_FN(hpu_rrelu_with_noise));
  m.impl("rrelu_with_noise_", TORCH_FN(hpu_rrelu_with_noise_));
  m.impl("_prelu_kernel", TORCH_FN(hpu_prelu_kernel));
  m.impl("_prelu_kernel_backward", TORCH_FN(hpu_prelu_kernel_backward));
  m.impl("glu", TORCH_FN(hpu_glu));
  m.impl("glu.out", TORCH_FN(hpu_glu_out));
  m.impl("glu_backward", TORCH_FN(hpu_glu_backward));
  m.impl("glu_backward.grad_input", TORCH_FN(hpu_glu_backward_out));
}

}  // namespace habana_torch
