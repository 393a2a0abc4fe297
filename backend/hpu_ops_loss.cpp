// The pointwise family's elementwise losses: mse, smooth_l1, huber and
// binary_cross_entropy, each a per-element kernel then the mean or the sum
// (the reduction), as the CPU's; and their backwards.
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

}  // namespace

TORCH_LIBRARY_IMPL(aten, HPU, m) {
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
  m.impl("binary_cross_entropy", TORCH_FN(hpu_binary_cross_entropy));
  m.impl("binary_cross_entropy.out", TORCH_FN(hpu_binary_cross_entropy_out));
  m.impl("binary_cross_entropy_backward", TORCH_FN(hpu_binary_cross_entropy_backward));
  m.impl("binary_cross_entropy_backward.grad_input", TORCH_FN(hpu_binary_cross_entropy_backward_out));
}

}  // namespace habana_torch
