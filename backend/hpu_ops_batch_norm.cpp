// Batch norm: native_batch_norm, the _native_batch_norm_legit family and
// native_batch_norm_backward as HPU_OP_BATCH_NORM(_BACKWARD)
// (csrc/kernels/batch_norm.c), in float32 or float64: bf16 / fp16 inputs
// are widened on the card and the results rounded once, as the CPU's kernel
// computes in float. The running statistics are updated on the card as the
// CPU does (momentum, unbiased variance).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "hpu_common.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace {

using Opt = std::optional<at::Tensor>;
using Tuple3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

bool has(const Opt& t) { return t.has_value() && t->defined(); }
const at::Tensor* ptr(const Opt& t) {
  static const at::Tensor none;
  return has(t) ? &*t : &none;
}
bool native_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf || t == at::kDouble;
}
// The kernel's dtype for input x: float64 stays, the rest computes in float32.
at::ScalarType kernel_type(const at::Tensor& x) { return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat; }
hpu_dtype_t kernel_hpu_type(const at::Tensor& x) { return x.scalar_type() == at::kDouble ? HPU_FLOAT64 : HPU_FLOAT32; }

// x as [N, C, HW], and checks of the per-channel tensors, with the CPU's messages.
at::Tensor as3d(const at::Tensor& x) {
  TORCH_CHECK(x.dim() >= 2, "batch_norm: expected an input with at least 2 dims [N, C, ...], got ", x.sizes());
  int64_t N = x.size(0), C = x.size(1);
  return x.to(kernel_type(x)).contiguous().view({N, C, N * C != 0 ? x.numel() / (N * C) : 0});
}
void check_channels(const at::Tensor& x, std::initializer_list<std::pair<const Opt*, const char*>> ts) {
  for (auto& [t, what] : ts)
    TORCH_CHECK(!has(*t) || (*t)->numel() == x.size(1), what, " should contain ", x.size(1), " elements not ",
                (*t)->numel());
}

// The CPU's dtype rule: weight, bias and running statistics have the
// input's dtype, or float for a bf16 / fp16 input (its mixed mode).
void check_dtypes(const at::Tensor& x, std::initializer_list<const Opt*> ts) {
  at::ScalarType t = x.scalar_type();
  bool reduced = t == at::kBFloat16 || t == at::kHalf;
  for (const Opt* o : ts) {
    if (!has(*o)) continue;
    at::ScalarType pt = (*o)->scalar_type();
    TORCH_CHECK(pt == t || (reduced && pt == at::kFloat), "mixed dtype (CPU): all inputs must share same datatype.");
  }
}

// Statistics and running buffers keep the parameters' dtype: float for a
// bf16 / fp16 input with float parameters, else the input's.
at::ScalarType param_type(const at::Tensor& x, const Opt& w) { return has(w) ? w->scalar_type() : x.scalar_type(); }

Tuple3 batch_norm_cpu(const at::Tensor& x, const Opt& w, const Opt& b, const Opt& rm, const Opt& rv, bool training,
                      double momentum, double eps) {
  note_cpu_fallback("aten::native_batch_norm");
  auto cpu = [](const Opt& t) -> Opt { return has(t) ? Opt(t->cpu()) : Opt(); };
  Opt rmc = cpu(rm), rvc = cpu(rv);
  auto r = at::native_batch_norm(x.cpu(), cpu(w), cpu(b), rmc, rvc, training, momentum, eps);
  if (training && has(rm)) rm->copy_(*rmc);
  if (training && has(rv)) rv->copy_(*rvc);
  return {std::get<0>(r).to(x.device()), std::get<1>(r).to(x.device()), std::get<2>(r).to(x.device())};
}

Tuple3 batch_norm(const at::Tensor& input, const Opt& weight, const Opt& bias, const Opt& running_mean,
                  const Opt& running_var, bool training, double momentum, double eps) {
  check_same_device("native_batch_norm", {&input, ptr(weight), ptr(bias), ptr(running_mean), ptr(running_var)});
  if (!native_dtype(input.scalar_type()))
    return batch_norm_cpu(input, weight, bias, running_mean, running_var, training, momentum, eps);
  at::Tensor x = as3d(input);
  int64_t N = x.size(0), C = x.size(1), HW = x.size(2);
  check_channels(input, {{&weight, "weight"}, {&bias, "bias"}, {&running_mean, "running_mean"},
                         {&running_var, "running_var"}});
  check_dtypes(input, {&weight, &bias, &running_mean, &running_var});
  TORCH_CHECK(training || (has(running_mean) && has(running_var)),
              "batch_norm: running_mean and running_var must be defined in evaluation mode");
  at::Tensor aff = at::empty({2, C}, x.options());
  if (has(weight)) aff[0].copy_(*weight); else aff[0].fill_(1);
  if (has(bias)) aff[1].copy_(*bias); else aff[1].fill_(0);
  at::Tensor y = at::empty({N, C, HW}, x.options());
  at::Tensor st = at::empty({3, C}, x.options());
  if (x.numel() > 0) {
    hpu_node_t n{};
    n.op = HPU_OP_BATCH_NORM;
    n.compute_dtype = kernel_hpu_type(input);
    n.inputs[n.num_inputs++] = to_desc(x);
    n.inputs[n.num_inputs++] = to_desc(aff);
    at::Tensor run;
    if (!training) {
      run = at::stack({running_mean->to(x.scalar_type()), running_var->to(x.scalar_type())});
      n.inputs[n.num_inputs++] = to_desc(run);
    }
    n.num_outputs = 2;
    n.outputs[0] = to_desc(y);
    n.outputs[1] = to_desc(st);
    n.params.nn.i[0] = training;
    n.params.nn.s[0] = hpu_scalar_float(eps);
    launch(input.device().index(), n);
  }
  at::ScalarType pt = param_type(input, weight);
  at::Tensor out = y.view(input.sizes()).to(input.scalar_type());
  if (!training) {
    at::Tensor none = at::empty({0}, input.options().dtype(pt));
    return {out, none, none.clone()};
  }
  if (has(running_mean) && x.numel() > 0) {
    running_mean->mul_(1 - momentum).add_(st[0].to(running_mean->scalar_type()), momentum);
  }
  if (has(running_var) && x.numel() > 0) {
    double n = (double)(N * HW);
    at::Tensor unbiased = st[2] * (n / (n > 1 ? n - 1 : 1));
    running_var->mul_(1 - momentum).add_(unbiased.to(running_var->scalar_type()), momentum);
  }
  return {out, st[0].to(pt), st[1].to(pt)};
}

Tuple3 native_batch_norm(const at::Tensor& input, const Opt& weight, const Opt& bias, const Opt& running_mean,
                         const Opt& running_var, bool training, double momentum, double eps) {
  return batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps);
}

Tuple3 legit(const at::Tensor& input, const Opt& weight, const Opt& bias, at::Tensor& running_mean,
             at::Tensor& running_var, bool training, double momentum, double eps) {
  return batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps);
}

Tuple3 legit_no_stats(const at::Tensor& input, const Opt& weight, const Opt& bias, bool training, double momentum,
                      double eps) {
  return batch_norm(input, weight, bias, Opt(), Opt(), training, momentum, eps);
}

Tuple3 legit_no_training(const at::Tensor& input, const Opt& weight, const Opt& bias,
                         const at::Tensor& running_mean, const at::Tensor& running_var, double momentum,
                         double eps) {
  return batch_norm(input, weight, bias, running_mean, running_var, false, momentum, eps);
}

Tuple3 native_batch_norm_backward(const at::Tensor& grad_out, const at::Tensor& input, const Opt& weight,
                                  const Opt& running_mean, const Opt& running_var, const Opt& save_mean,
                                  const Opt& save_invstd, bool train, double eps, std::array<bool, 3> mask) {
  check_same_device("native_batch_norm_backward", {&grad_out, &input, ptr(weight), ptr(running_mean),
                                                   ptr(running_var), ptr(save_mean), ptr(save_invstd)});
  if (!native_dtype(input.scalar_type())) {
    note_cpu_fallback("aten::native_batch_norm_backward");
    auto cpu = [](const Opt& t) -> Opt { return has(t) ? Opt(t->cpu()) : Opt(); };
    auto r = at::native_batch_norm_backward(grad_out.cpu(), input.cpu(), cpu(weight), cpu(running_mean),
                                            cpu(running_var), cpu(save_mean), cpu(save_invstd), train, eps, mask);
    auto back = [&](const at::Tensor& t) { return t.defined() ? t.to(input.device()) : t; };
    return {back(std::get<0>(r)), back(std::get<1>(r)), back(std::get<2>(r))};
  }
  TORCH_CHECK(grad_out.sizes() == input.sizes(), "native_batch_norm_backward: grad_output ", grad_out.sizes(),
              " and input ", input.sizes(), " differ in shape");
  at::Tensor x = as3d(input), dy = as3d(grad_out).to(x.scalar_type());
  int64_t C = x.size(1);
  at::Tensor mean, invstd;
  if (train) {
    TORCH_CHECK(has(save_mean) && has(save_invstd), "native_batch_norm_backward: training needs save_mean and save_invstd");
    mean = save_mean->to(x.scalar_type()), invstd = save_invstd->to(x.scalar_type());
  } else {
    TORCH_CHECK(has(running_mean) && has(running_var), "native_batch_norm_backward: evaluation needs running_mean and running_var");
    mean = running_mean->to(x.scalar_type()), invstd = (running_var->to(x.scalar_type()) + eps).rsqrt();
  }
  check_channels(input, {{&weight, "weight"}});
  TORCH_CHECK(mean.numel() == C && invstd.numel() == C, "native_batch_norm_backward: the statistics must have ", C,
              " elements");
  at::Tensor st = at::stack({mean.reshape({C}), invstd.reshape({C})});
  at::ScalarType pt = param_type(input, weight);
  at::Tensor dx, dw, db;
  if (mask[0]) dx = at::empty(x.sizes(), x.options());
  if (mask[1]) dw = at::empty({C}, x.options());
  if (mask[2]) db = at::empty({C}, x.options());
  if (!(mask[0] || mask[1] || mask[2])) return {dx, dw, db};
  if (x.numel() == 0) {
    if (dw.defined()) dw.zero_();
    if (db.defined()) db.zero_();
  } else {
    hpu_node_t n{};
    n.op = HPU_OP_BATCH_NORM_BACKWARD;
    n.compute_dtype = kernel_hpu_type(input);
    n.inputs[n.num_inputs++] = to_desc(dy);
    n.inputs[n.num_inputs++] = to_desc(x);
    n.inputs[n.num_inputs++] = to_desc(st);
    at::Tensor w;
    if (has(weight)) {
      w = weight->to(x.scalar_type()).contiguous().reshape({C});
      n.inputs[n.num_inputs++] = to_desc(w);
    }
    n.num_outputs = 3;
    if (mask[0]) n.outputs[0] = to_desc(dx);
    if (mask[1]) n.outputs[1] = to_desc(dw);
    if (mask[2]) n.outputs[2] = to_desc(db);
    n.params.nn.i[0] = (mask[0] ? 1 : 0) | (mask[1] ? 2 : 0) | (mask[2] ? 4 : 0);
    n.params.nn.i[1] = train;
    n.params.nn.i[2] = has(weight);
    launch(input.device().index(), n);
  }
  if (dx.defined()) dx = dx.view(input.sizes()).to(input.scalar_type());
  if (dw.defined()) dw = dw.to(pt);
  if (db.defined()) db = db.to(pt);
  return {dx, dw, db};
}

// _batch_norm_with_update / batch_norm_backward: the training batch norm
// that export and torch.compile trace to. PyTorch gives it per-backend
// kernels only (no composite), so without these it fell back to the CPU.
// The reserve is empty, as the CPU kernel's.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> with_update(const at::Tensor& input, const Opt& weight,
                                                                       const Opt& bias, at::Tensor& running_mean,
                                                                       at::Tensor& running_var, double momentum,
                                                                       double eps) {
  auto r = batch_norm(input, weight, bias, running_mean, running_var, true, momentum, eps);
  return {std::get<0>(r), std::get<1>(r), std::get<2>(r), at::empty({0}, input.options().dtype(at::kByte))};
}

Tuple3 new_backward(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                    const Opt& running_mean, const Opt& running_var, const Opt& save_mean, const Opt& save_var,
                    bool update, double eps, std::array<bool, 3> mask, const at::Tensor& /*reserve*/) {
  return habana_torch::native_batch_norm_backward(grad_out, input, Opt(weight), running_mean, running_var, save_mean, save_var,
                                                  update, eps, mask);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("native_batch_norm", TORCH_FN(native_batch_norm));
  m.impl("_native_batch_norm_legit", TORCH_FN(legit));
  m.impl("_native_batch_norm_legit.no_stats", TORCH_FN(legit_no_stats));
  m.impl("_native_batch_norm_legit_no_training", TORCH_FN(legit_no_training));
  m.impl("native_batch_norm_backward", TORCH_FN(native_batch_norm_backward));
  m.impl("_batch_norm_with_update", TORCH_FN(with_update));
  m.impl("batch_norm_backward", TORCH_FN(new_backward));
}

}  // namespace habana_torch
