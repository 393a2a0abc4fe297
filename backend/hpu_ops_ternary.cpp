// The pointwise family's ops of three operands (clamp with its bounds,
// where / masked_fill, lerp, addcmul / addcdiv) and the ones whose values
// come from indices or from many tensors at once: arange, triu / tril, and
// the fused optimizer steps (_fused_adam_, _fused_adamw_, _fused_sgd_).
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

// Clamp ----------------------------------------------------------------------

// The bounds are Scalars or tensors, and either may be missing: mask has
// bit 0 for min, bit 1 for max.
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

// An optional bound (a Scalar or a Tensor) as an operand; sets its bit in
// mask when it is there.
Arg opt_bound(const std::optional<c10::Scalar>& s, int bit, int& mask) {
  if (s.has_value()) {
    mask |= bit;
    return Arg(*s);
  }
  return Arg(c10::Scalar(0));
}
Arg opt_bound(const std::optional<at::Tensor>& t, int bit, int& mask) {
  if (t.has_value() && t->defined()) {
    mask |= bit;
    return Arg(*t);
  }
  return Arg(c10::Scalar(0));
}

// clamp, clamp_ and clamp.out with Scalar (B = c10::Scalar) or Tensor
// bounds (B = at::Tensor: the .Tensor overloads).
template <class B>
at::Tensor clamp(const at::Tensor& self, const std::optional<B>& lo, const std::optional<B>& hi) {
  int m = 0;
  Arg l = opt_bound(lo, 1, m), h = opt_bound(hi, 2, m);
  at::Tensor r;
  clamp_into("clamp", nullptr, false, self, l, h, m, &r);
  return r;
}
template <class B>
at::Tensor& clamp_(at::Tensor& self, const std::optional<B>& lo, const std::optional<B>& hi) {
  int m = 0;
  Arg l = opt_bound(lo, 1, m), h = opt_bound(hi, 2, m);
  return clamp_into("clamp_", &self, true, self, l, h, m, nullptr);
}
template <class B>
at::Tensor& clamp_out(const at::Tensor& self, const std::optional<B>& lo, const std::optional<B>& hi,
                      at::Tensor& out) {
  int m = 0;
  Arg l = opt_bound(lo, 1, m), h = opt_bound(hi, 2, m);
  return clamp_into("clamp", &out, false, self, l, h, m, nullptr);
}

// clamp_min (BIT 1) / clamp_max (BIT 2): one bound, a Scalar or a Tensor.
template <int BIT>
constexpr const char* clamp_one_name(bool inplace) {
  return BIT == 1 ? (inplace ? "clamp_min_" : "clamp_min") : (inplace ? "clamp_max_" : "clamp_max");
}
template <int BIT, class B>
at::Tensor clamp_one(const at::Tensor& self, const B& b) {
  at::Tensor r;
  clamp_into(clamp_one_name<BIT>(false), nullptr, false, self, Arg(b), Arg(b), BIT, &r);
  return r;
}
template <int BIT, class B>
at::Tensor& clamp_one_(at::Tensor& self, const B& b) {
  return clamp_into(clamp_one_name<BIT>(true), &self, true, self, Arg(b), Arg(b), BIT, nullptr);
}
template <int BIT, class B>
at::Tensor& clamp_one_out(const at::Tensor& self, const B& b, at::Tensor& out) {
  return clamp_into(clamp_one_name<BIT>(false), &out, false, self, Arg(b), Arg(b), BIT, nullptr);
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
void tri_check(const at::Tensor& self) {
  TORCH_CHECK(self.dim() >= 2, OP == HPU_OP_TRIU ? "triu" : "tril",
              ": input tensor must have at least 2 dimensions");
}
// triu / tril of self into out, which has self's shape and dtype.
template <hpu_op_t OP>
at::Tensor& tri_launch(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
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
at::Tensor tri(const at::Tensor& self, int64_t diagonal) {
  tri_check<OP>(self);
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  return tri_launch<OP>(self, diagonal, out);
}
template <hpu_op_t OP>
at::Tensor& tri_out(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  tri_check<OP>(self);
  check_devices(hpu_op_name(OP), {self}, &out);
  at::native::resize_output(out, self.sizes());
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), hpu_op_name(OP), ": expected out dtype ",
              self.scalar_type(), ", got ", out.scalar_type());
  return tri_launch<OP>(self, diagonal, out);
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

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("clamp", TORCH_FN(clamp<c10::Scalar>));
  m.impl("clamp_", TORCH_FN(clamp_<c10::Scalar>));
  m.impl("clamp.out", TORCH_FN(clamp_out<c10::Scalar>));
  m.impl("clamp.Tensor", TORCH_FN(clamp<at::Tensor>));
  m.impl("clamp_.Tensor", TORCH_FN(clamp_<at::Tensor>));
  m.impl("clamp.Tensor_out", TORCH_FN(clamp_out<at::Tensor>));
  m.impl("clamp_min", TORCH_FN((clamp_one<1, c10::Scalar>)));
  m.impl("clamp_min_", TORCH_FN((clamp_one_<1, c10::Scalar>)));
  m.impl("clamp_min.out", TORCH_FN((clamp_one_out<1, c10::Scalar>)));
  m.impl("clamp_min.Tensor", TORCH_FN((clamp_one<1, at::Tensor>)));
  m.impl("clamp_min_.Tensor", TORCH_FN((clamp_one_<1, at::Tensor>)));
  m.impl("clamp_min.Tensor_out", TORCH_FN((clamp_one_out<1, at::Tensor>)));
  m.impl("clamp_max", TORCH_FN((clamp_one<2, c10::Scalar>)));
  m.impl("clamp_max_", TORCH_FN((clamp_one_<2, c10::Scalar>)));
  m.impl("clamp_max.out", TORCH_FN((clamp_one_out<2, c10::Scalar>)));
  m.impl("clamp_max.Tensor", TORCH_FN((clamp_one<2, at::Tensor>)));
  m.impl("clamp_max_.Tensor", TORCH_FN((clamp_one_<2, at::Tensor>)));
  m.impl("clamp_max.Tensor_out", TORCH_FN((clamp_one_out<2, at::Tensor>)));
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
}

TORCH_LIBRARY_IMPL(aten, HPU, m) {
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
