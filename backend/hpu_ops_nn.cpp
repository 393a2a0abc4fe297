// The nn op family: softmax, layer norm, group norm, nll_loss, index ops,
// cat, sort/topk, attention's kernel choice (its reductions are in
// hpu_ops_reduce.cpp). Each op works out PyTorch's result shape and dtype,
// raises PyTorch's errors for bad arguments, and launches C nodes
// (csrc/include/hpu/ops_nn.def); the kernels do the math.
//
// Index values are device data: the kernels check them and a bad index
// fails the node with HPU_ERROR_OUT_OF_RANGE, which the card keeps and the
// next synchronize (.cpu(), .item(), torch.hpu.synchronize()) raises as
// IndexError. Index tensors given on the CPU are checked here at once.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <torch/library.h>

#include "hpu_common.h"
#include "hpu_nn_node.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace {

// For check_same_device, which needs non-null pointers.
const at::Tensor* opt_ptr(const std::optional<at::Tensor>& t) {
  static const at::Tensor none;
  return t.has_value() ? &*t : &none;
}
const at::Tensor* opt_ptr(const at::Tensor* t) {
  static const at::Tensor none;
  return t ? t : &none;
}

// ---- softmax --------------------------------------------------------------------

at::Tensor& softmax_into(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out, bool log) {
  const char* op = log ? "_log_softmax" : "_softmax";
  check_hpu_dtype(self.scalar_type(), op);
  check_same_device(op, {&self, &out});
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "\"", log ? "log_softmax" : "softmax",
              "_lastdim_kernel_impl\" not implemented for '", self.scalar_type(), "'");
  dim = at::maybe_wrap_dim(dim, self.dim());
  at::native::resize_output(out, self.sizes());
  if (out.numel() == 0) return out;
  at::Tensor x = self.contiguous();
  bool direct = out.is_contiguous() && !out.is_same(self);
  at::Tensor y = direct ? out : at::empty(self.sizes(), out.options());
  hpu_node_t n = make_node(HPU_OP_SOFTMAX);
  add_in(n, x);
  add_out(n, y);
  n.compute_dtype = HPU_FLOAT32;
  n.params.nn.i[0] = dim;
  n.params.nn.i[1] = log;
  launch(dev_of(out), n);
  if (!direct) out.copy_(y);
  return out;
}
at::Tensor& softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) {
  return softmax_into(self, dim, half_to_float, out, false);
}
at::Tensor& log_softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) {
  return softmax_into(self, dim, half_to_float, out, true);
}

at::Tensor& softmax_bw_into(const at::Tensor& grad, const at::Tensor& output, int64_t dim, at::Tensor& out,
                            bool log) {
  const char* op = log ? "_log_softmax_backward_data" : "_softmax_backward_data";
  check_same_device(op, {&grad, &output, &out});
  TORCH_CHECK(grad.sizes() == output.sizes(), op, ": grad_output and output shapes differ");
  dim = at::maybe_wrap_dim(dim, grad.dim());
  at::native::resize_output(out, grad.sizes());
  if (out.numel() == 0) return out;
  at::Tensor g = grad.contiguous(), y = output.contiguous();
  bool direct = out.is_contiguous() && !out.is_same(grad) && !out.is_same(output);
  at::Tensor dx = direct ? out : at::empty(grad.sizes(), out.options());
  hpu_node_t n = make_node(HPU_OP_SOFTMAX_BACKWARD);
  add_in(n, g);
  add_in(n, y);
  add_out(n, dx);
  n.compute_dtype = HPU_FLOAT32;
  n.params.nn.i[0] = dim;
  n.params.nn.i[1] = log;
  launch(dev_of(out), n);
  if (!direct) out.copy_(dx);
  return out;
}
at::Tensor& softmax_bw_out(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                           at::ScalarType input_dtype, at::Tensor& out) {
  return softmax_bw_into(grad, output, dim, out, false);
}
at::Tensor& log_softmax_bw_out(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                               at::ScalarType input_dtype, at::Tensor& out) {
  return softmax_bw_into(grad, output, dim, out, true);
}

// ---- layer norm -----------------------------------------------------------------

std::pair<int64_t, int64_t> ln_check(const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                                     const std::optional<at::Tensor>& weight,
                                     const std::optional<at::Tensor>& bias) {
  int64_t nn = (int64_t)normalized_shape.size();
  TORCH_CHECK(nn >= 1, "Expected normalized_shape to be at least 1-dimensional, i.e., containing at "
              "least one element, but got normalized_shape = ", normalized_shape);
  int64_t axis = input.dim() - nn;
  bool ok = axis >= 0;
  for (int64_t i = 0; ok && i < nn; i++) ok = input.sym_size(axis + i) == normalized_shape[i];
  TORCH_CHECK(ok, "Given normalized_shape=", normalized_shape, ", expected input with shape [*",
              normalized_shape, "], but got input of size", input.sizes());
  for (const auto* p : {&weight, &bias})
    if (p->has_value() && (*p)->defined())
      TORCH_CHECK((*p)->sym_sizes().equals(normalized_shape), "Expected weight/bias to be of same shape as "
                  "normalized_shape, but got shape ", (*p)->sizes(), " and normalized_shape = ", normalized_shape);
  int64_t M = 1, N = 1;
  for (int64_t i = 0; i < input.dim(); i++) (i < axis ? M : N) *= input.size(i);
  return {M, N};
}

std::vector<int64_t> stat_shape(const at::Tensor& input, int64_t nn) {
  std::vector<int64_t> s;
  for (int64_t i = 0; i < input.dim(); i++) s.push_back(i < input.dim() - nn ? input.size(i) : 1);
  return s;
}

bool defined(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

at::ScalarType ln_stat_type(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                            const std::optional<at::Tensor>& bias) {
  // PyTorch CPU: float statistics when a reduced-precision input meets float params
  bool reduced = input.scalar_type() == at::kBFloat16 || input.scalar_type() == at::kHalf;
  bool mixed = reduced && ((defined(weight) && weight->scalar_type() == at::kFloat) ||
                           (defined(bias) && bias->scalar_type() == at::kFloat));
  return mixed ? at::kFloat : input.scalar_type();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(
    const at::Tensor& input, c10::SymIntArrayRef normalized_shape, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, double eps) {
  check_hpu_dtype(input.scalar_type(), "native_layer_norm");
  check_same_device("native_layer_norm", {&input, opt_ptr(weight), opt_ptr(bias)});
  auto [M, N] = ln_check(input, normalized_shape, weight, bias);
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), "\"LayerNormKernelImpl\" not implemented for '",
              input.scalar_type(), "'");
  at::Tensor x = input.contiguous();
  at::Tensor y = at::empty(input.sizes(), input.options().memory_format(at::MemoryFormat::Contiguous));
  at::ScalarType st = ln_stat_type(input, weight, bias);
  at::Tensor mean = at::empty({M}, input.options().dtype(st));
  at::Tensor rstd = at::empty({M}, input.options().dtype(st));
  if (M > 0) {
    hpu_node_t n = make_node(HPU_OP_LAYER_NORM);
    add_in(n, x.view({M, N}));
    int64_t flags = 0;
    if (defined(weight)) { add_in(n, weight->contiguous().view({N})); flags |= 1; }
    if (defined(bias)) { add_in(n, bias->contiguous().view({N})); flags |= 2; }
    add_out(n, y.view({M, N}));
    add_out(n, mean);
    add_out(n, rstd);
    n.compute_dtype = HPU_FLOAT32;
    n.params.nn.i[0] = flags;
    n.params.nn.s[0] = hpu_scalar_float(eps);
    launch(dev_of(input), n);
  }
  auto ss = stat_shape(input, (int64_t)normalized_shape.size());
  return {y, mean.view(ss), rstd.view(ss)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, std::array<bool, 3> mask) {
  check_same_device("native_layer_norm_backward", {&grad_out, &input, &mean, &rstd});
  auto [M, N] = ln_check(input, normalized_shape, weight, bias);
  at::Tensor dx, dw, db;
  if (mask[0]) dx = at::empty(input.sizes(), input.options().memory_format(at::MemoryFormat::Contiguous));
  auto param_opts = [&](const std::optional<at::Tensor>& p) {
    return defined(p) ? p->options() : input.options();
  };
  std::vector<int64_t> pshape(input.sizes().end() - normalized_shape.size(), input.sizes().end());
  if (mask[1]) dw = at::empty(pshape, param_opts(weight));
  if (mask[2]) db = at::empty(pshape, param_opts(defined(bias) ? bias : weight));
  if (!mask[0] && !mask[1] && !mask[2]) return {dx, dw, db};
  if (M == 0 || N == 0) {
    if (dw.defined()) dw.zero_();
    if (db.defined()) db.zero_();
    return {dx, dw, db};
  }
  at::Tensor stats = at::empty({2, M}, mean.options());
  stats.select(0, 0).copy_(mean.reshape({M}));
  stats.select(0, 1).copy_(rstd.reshape({M}));
  hpu_node_t n = make_node(HPU_OP_LAYER_NORM_BACKWARD);
  add_in(n, grad_out.contiguous().view({M, N}));
  add_in(n, input.contiguous().view({M, N}));
  add_in(n, stats);
  if (defined(weight)) add_in(n, weight->contiguous().view({N}));
  n.num_outputs = 3;
  if (mask[0]) n.outputs[0] = to_desc(dx.view({M, N}));
  if (mask[1]) n.outputs[1] = to_desc(dw.view({N}));
  if (mask[2]) n.outputs[2] = to_desc(db.view({N}));
  n.compute_dtype = HPU_FLOAT32;
  n.params.nn.i[0] = (mask[0] ? 1 : 0) | (mask[1] ? 2 : 0) | (mask[2] ? 4 : 0);
  n.params.nn.i[1] = defined(weight);
  launch(dev_of(input), n);
  return {dx, dw, db};
}

// ---- group_norm -----------------------------------------------------------------------

// The CPU's checks of native_group_norm (group_norm.cpp), with its messages.
void gn_check(const at::Tensor& x, const at::Tensor* weight, const at::Tensor* bias, int64_t N, int64_t C,
              int64_t HxW, int64_t group) {
  TORCH_CHECK(group > 0, "Expected num groups to be greater than 0, got ", group);
  TORCH_CHECK(C % group == 0, "Expected number of channels in input to be divisible by num_groups, but got "
              "input of shape ", x.sizes(), " and num_groups=", group);
  for (const at::Tensor* p : {weight, bias})
    TORCH_CHECK(!p || (p->dim() == 1 && p->numel() == C), "Expected ", p == weight ? "weight" : "bias",
                " to be a vector of size equal to the number of channels in input, but got ",
                p == weight ? "weight" : "bias", " of shape ", p->sizes(), " and input of shape ", x.sizes());
  TORCH_CHECK(x.numel() == N * C * HxW, "native_group_norm: input of shape ", x.sizes(),
              " does not hold N * C * HxW = ", N, " * ", C, " * ", HxW, " elements");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(x.scalar_type()), "\"GroupNormKernelImpl\" not implemented for '",
                              x.scalar_type(), "'");
}

// The statistics' dtype: float for a bf16 / fp16 input with float32
// parameters (the only mix the CPU takes), else the input's.
at::ScalarType gn_stat_type(const at::Tensor& x, const at::Tensor* weight, const at::Tensor* bias) {
  bool mixed = false;
  for (const at::Tensor* p : {weight, bias})
    if (p && p->scalar_type() != x.scalar_type()) mixed = true;
  if (!mixed) return x.scalar_type();
  bool reduced = x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf;
  for (const at::Tensor* p : {weight, bias})
    TORCH_CHECK(!p || (reduced && p->scalar_type() == at::kFloat), "native_group_norm: weight and bias must be ",
                x.scalar_type(), reduced ? " or Float" : "", " like the input (", x.scalar_type(), "), got ",
                p->scalar_type());
  return at::kFloat;
}

const at::Tensor* present(const std::optional<at::Tensor>& t) { return defined(t) ? &*t : nullptr; }

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    int64_t N, int64_t C, int64_t HxW, int64_t group, double eps) {
  check_same_device("native_group_norm", {&input, opt_ptr(weight), opt_ptr(bias)});
  const at::Tensor *w = present(weight), *b = present(bias);
  gn_check(input, w, b, N, C, HxW, group);
  at::ScalarType st = gn_stat_type(input, w, b);
  at::Tensor y = at::empty(input.sizes(), input.options().memory_format(at::MemoryFormat::Contiguous));
  at::Tensor mean = at::empty({N, group}, input.options().dtype(st));
  at::Tensor rstd = at::empty({N, group}, input.options().dtype(st));
  if (N > 0) {
    hpu_node_t n = make_node(HPU_OP_GROUP_NORM);
    add_in(n, input.contiguous().view({N, C, HxW}));
    if (w) add_in(n, w->contiguous());
    if (b) add_in(n, b->contiguous());
    add_out(n, y.view({N, C, HxW}));
    add_out(n, mean);
    add_out(n, rstd);
    n.compute_dtype = HPU_FLOAT32;
    n.params.nn.i[0] = (w ? 1 : 0) | (b ? 2 : 0);
    n.params.nn.i[1] = group;
    n.params.nn.s[0] = hpu_scalar_float(eps);
    launch(dev_of(input), n);
  }
  return {y, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean, const at::Tensor& rstd,
    const std::optional<at::Tensor>& weight, int64_t N, int64_t C, int64_t HxW, int64_t group,
    std::array<bool, 3> mask) {
  check_same_device("native_group_norm_backward", {&grad_out, &input, &mean, &rstd, opt_ptr(weight)});
  const at::Tensor* w = present(weight);
  gn_check(input, w, nullptr, N, C, HxW, group);
  gn_stat_type(input, w, nullptr);
  TORCH_CHECK(grad_out.scalar_type() == input.scalar_type(), "Expected scalar types of X and dY are same.");
  TORCH_CHECK(grad_out.numel() == input.numel(), "native_group_norm_backward: grad_out of shape ",
              grad_out.sizes(), " does not match the input's ", input.sizes());
  TORCH_CHECK(mean.numel() == N * group && rstd.numel() == N * group,
              "native_group_norm_backward: mean and rstd must have N * group = ", N * group, " elements");
  TORCH_CHECK(at::isFloatingType(mean.scalar_type()) && at::isFloatingType(rstd.scalar_type()),
              "native_group_norm_backward: mean and rstd must be floating, got ", mean.scalar_type());
  at::Tensor dx, dw, db;
  auto popts = w ? w->options() : input.options();
  if (mask[0]) dx = at::empty(input.sizes(), input.options().memory_format(at::MemoryFormat::Contiguous));
  if (mask[1]) dw = at::empty({C}, popts);
  if (mask[2]) db = at::empty({C}, popts);
  if (!mask[0] && !mask[1] && !mask[2]) return {dx, dw, db};
  if (N == 0) {
    if (dw.defined()) dw.zero_();
    if (db.defined()) db.zero_();
    return {dx, dw, db};
  }
  at::Tensor stats = at::empty({2, N * group}, mean.options());
  stats.select(0, 0).copy_(mean.reshape({N * group}));
  stats.select(0, 1).copy_(rstd.reshape({N * group}));
  hpu_node_t n = make_node(HPU_OP_GROUP_NORM_BACKWARD);
  add_in(n, grad_out.contiguous().view({N, C, HxW}));
  add_in(n, input.contiguous().view({N, C, HxW}));
  add_in(n, stats);
  if (w) add_in(n, w->contiguous());
  n.num_outputs = 3;
  if (mask[0]) n.outputs[0] = to_desc(dx.view({N, C, HxW}));
  if (mask[1]) n.outputs[1] = to_desc(dw);
  if (mask[2]) n.outputs[2] = to_desc(db);
  n.compute_dtype = HPU_FLOAT32;
  n.params.nn.i[0] = (mask[0] ? 1 : 0) | (mask[1] ? 2 : 0) | (mask[2] ? 4 : 0);
  n.params.nn.i[1] = w != nullptr;
  n.params.nn.i[2] = group;
  launch(dev_of(input), n);
  return {dx, dw, db};
}

// ---- nll_loss -------------------------------------------------------------------------

void nll_check(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
  int64_t nb = self.dim() == 1 ? 1 : self.size(0);
  int64_t tb = target.dim() == 0 ? 1 : target.size(0);
  TORCH_CHECK(self.dim() == 1 ? target.numel() == 1 : nb == tb, "Expected input batch_size (", nb,
              ") to match target batch_size (", tb, ").");
  TORCH_CHECK(!at::isFloatingType(target.scalar_type()) && target.scalar_type() != at::kBool,
              "expected scalar type Long but found ", target.scalar_type());
  int64_t C = self.size(-1);
  if (defined(weight))
    TORCH_CHECK(weight->dim() == 1 && weight->numel() == C, "weight tensor should be defined either for all ", C,
                " classes or no classes but got weight tensor of shape: ", weight->sizes());
}

std::tuple<at::Tensor&, at::Tensor&> nll_loss_forward_out(const at::Tensor& self, const at::Tensor& target,
                                                          const std::optional<at::Tensor>& weight,
                                                          int64_t reduction, int64_t ignore_index,
                                                          at::Tensor& output, at::Tensor& total_weight) {
  check_same_device("nll_loss_forward", {&self, &target, opt_ptr(weight)});
  nll_check(self, target, weight);
  at::Tensor x2 = self.dim() == 1 ? self.view({1, self.size(0)}) : self;
  int64_t N = x2.size(0);
  if (reduction == 0 && self.dim() == 2) at::native::resize_output(output, {N});
  else at::native::resize_output(output, {});
  at::native::resize_output(total_weight, {});
  hpu_node_t n = make_node(HPU_OP_NLL_LOSS);
  add_in(n, x2);
  add_in(n, on_device(target, self)->reshape({N}));
  if (defined(weight)) add_in(n, weight->contiguous());
  add_out(n, output);
  add_out(n, total_weight);
  n.compute_dtype = n.outputs[0].dtype;
  n.params.nn.i[0] = reduction;
  n.params.nn.i[1] = ignore_index;
  n.params.nn.i[2] = defined(weight);
  launch(dev_of(self), n);
  return {output, total_weight};
}

at::Tensor& nll_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                  const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                                  const at::Tensor& total_weight, at::Tensor& grad_input) {
  check_same_device("nll_loss_backward", {&grad_output, &self, &target, &total_weight});
  nll_check(self, target, weight);
  at::native::resize_output(grad_input, self.sizes());
  if (grad_input.numel() == 0) return grad_input;
  int64_t C = self.size(-1), N = self.numel() / C;
  bool direct = grad_input.is_contiguous();
  at::Tensor gi = direct ? grad_input : at::empty(self.sizes(), grad_input.options());
  hpu_node_t n = make_node(HPU_OP_NLL_LOSS_BACKWARD);
  add_in(n, on_device(grad_output, self)->reshape({-1}));
  add_in(n, on_device(target, self)->reshape({N}));
  add_in(n, on_device(total_weight, self)->reshape({-1}));
  if (defined(weight)) add_in(n, weight->contiguous());
  add_out(n, gi.view({N, C}));
  n.compute_dtype = n.outputs[0].dtype;
  n.params.nn.i[0] = reduction;
  n.params.nn.i[1] = ignore_index;
  n.params.nn.i[2] = defined(weight);
  launch(dev_of(self), n);
  if (!direct) grad_input.copy_(gi);
  return grad_input;
}

// nll_loss2d: nll_loss over the N * H * W rows of C classes of the
// channels-last input (one copy of it), reshaped back.
void nll2d_check(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight) {
  TORCH_CHECK(self.dim() == 4, "only batches of spatial inputs supported (4D tensors), but got input of dimension: ",
              self.dim());
  TORCH_CHECK(target.dim() == 3, "only batches of spatial targets supported (3D tensors) but got targets of dimension: ",
              target.dim());
  TORCH_CHECK(self.size(0) == target.size(0) && self.size(2) == target.size(1) && self.size(3) == target.size(2),
              "size mismatch (got input: ", self.sizes(), " , target: ", target.sizes());
  if (defined(weight))
    TORCH_CHECK(weight->numel() == self.size(1), "weight tensor should be defined either for all or no classes");
}
std::tuple<at::Tensor&, at::Tensor&> nll_loss2d_forward_out(const at::Tensor& self, const at::Tensor& target,
                                                            const std::optional<at::Tensor>& weight,
                                                            int64_t reduction, int64_t ignore_index,
                                                            at::Tensor& output, at::Tensor& total_weight) {
  check_same_device("nll_loss2d_forward", {&self, &target, opt_ptr(weight)});
  nll2d_check(self, target, weight);
  at::Tensor rows = self.permute({0, 2, 3, 1}).reshape({-1, self.size(1)});
  at::Tensor out = at::empty({0}, self.options()), tw = at::empty({0}, self.options());
  nll_loss_forward_out(rows, target.reshape({-1}), weight, reduction, ignore_index, out, tw);
  into_out(reduction == 0 ? out.view(target.sizes()) : out, output);
  into_out(tw, total_weight);
  return {output, total_weight};
}
std::tuple<at::Tensor, at::Tensor> nll_loss2d_forward(const at::Tensor& self, const at::Tensor& target,
                                                      const std::optional<at::Tensor>& weight, int64_t reduction,
                                                      int64_t ignore_index) {
  at::Tensor output = at::empty({0}, self.options()), total_weight = at::empty({0}, self.options());
  nll_loss2d_forward_out(self, target, weight, reduction, ignore_index, output, total_weight);
  return {output, total_weight};
}
at::Tensor& nll_loss2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                    const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                                    const at::Tensor& total_weight, at::Tensor& grad_input) {
  check_same_device("nll_loss2d_backward", {&grad_output, &self, &target, &total_weight});
  nll2d_check(self, target, weight);
  int64_t N = self.size(0), C = self.size(1), H = self.size(2), W = self.size(3);
  // the row kernel reads only the input's shape: a zero-stride stand-in
  at::Tensor shape_of_rows = at::empty({}, self.options()).expand({N * H * W, C});
  at::Tensor rows = at::empty({N * H * W, C}, self.options());
  nll_loss_backward_out(reduction == 0 ? grad_output.reshape({-1}) : grad_output, shape_of_rows, target.reshape({-1}),
                        weight, reduction, ignore_index, total_weight, rows);
  return into_out(rows.view({N, H, W, C}).permute({0, 3, 1, 2}), grad_input);
}
at::Tensor nll_loss2d_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                               const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                               const at::Tensor& total_weight) {
  at::Tensor grad_input = at::empty({0}, self.options());
  return nll_loss2d_backward_out(grad_output, self, target, weight, reduction, ignore_index, total_weight, grad_input);
}

// ---- index ops -----------------------------------------------------------------------

void check_index_dtype(const at::Tensor& index, const char* op) {
  TORCH_CHECK_INDEX(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt, op,
                    "(): Expected dtype int32/int64 for index but got: ", index.scalar_type());
}

// An index tensor on the CPU is checked here (cheap, no device sync) and
// moved to the device; device indices are checked by the kernels.
at::Tensor device_index(const at::Tensor& index, const at::Tensor& like, int64_t size, bool wrap, const char* op,
                        int64_t dim) {
  if (is_hpu(index)) return index;
  if (index.numel() > 0) {
    int64_t lo = index.min().item<int64_t>(), hi = index.max().item<int64_t>();
    int64_t bad = lo < (wrap ? -size : 0) ? lo : hi >= size ? hi : INT64_MIN;
    TORCH_CHECK_INDEX(bad == INT64_MIN, op, ": index ", bad, " is out of bounds for dimension ", dim,
                      " with size ", size);
  }
  return index.to(like.device());
}

at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out) {
  check_hpu_dtype(self.scalar_type(), "index_select");
  check_same_device("index_select", {&self, &out});
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  check_index_dtype(index, "index_select");
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "index_select(): self and result must have the same scalar type");
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.dim() > 0) shape[dim] = index.numel();
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  int64_t size = self.dim() ? self.size(dim) : 1;
  TORCH_CHECK_INDEX(size > 0, "index out of range in self");
  at::Tensor idx = device_index(index, self, size, false, "index_select", dim);
  hpu_node_t n = make_node(HPU_OP_INDEX_SELECT);
  add_in(n, self);
  add_in(n, idx);
  add_out(n, out);
  n.compute_dtype = n.outputs[0].dtype;
  n.params.nn.i[0] = dim;
  launch(dev_of(out), n);
  return out;
}
at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  at::Tensor out = at::empty({0}, self.options());
  return index_select_out(self, dim, index, out);
}

at::Tensor embedding_dense_backward(const at::Tensor& grad, const at::Tensor& indices, c10::SymInt num_weights,
                                    c10::SymInt padding_idx, bool scale_grad_by_freq) {
  check_same_device("embedding_dense_backward", {&grad, &indices});
  check_index_dtype(indices, "embedding_backward");
  int64_t V = num_weights.guard_int(__FILE__, __LINE__);
  int64_t H = grad.size(-1);
  at::Tensor out = at::empty({V, H}, grad.options());
  if (out.numel() == 0) return out;
  int64_t n = indices.numel();
  hpu_node_t node = make_node(HPU_OP_EMBEDDING_BACKWARD);
  add_in(node, grad.reshape({n, H}));
  add_in(node, indices.reshape({n}));
  add_out(node, out);
  node.compute_dtype = node.outputs[0].dtype;
  node.params.nn.i[0] = padding_idx.guard_int(__FILE__, __LINE__);
  node.params.nn.i[1] = scale_grad_by_freq;
  launch(dev_of(grad), node);
  return out;
}

void gs_check(const char* op, const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor* src) {
  // an empty index of any dtype is fine, as on the CPU
  TORCH_CHECK(index.numel() == 0 || index.scalar_type() == at::kLong || index.scalar_type() == at::kInt, op,
              "(): Expected dtype int32/int64 for index");
  int64_t sd = std::max<int64_t>(self.dim(), 1), id = std::max<int64_t>(index.dim(), 1);
  TORCH_CHECK(index.numel() == 0 || sd == id, "Index tensor must have the same number of dimensions as ",
              src ? "src" : "input", " tensor");
  for (int64_t d = 0; index.numel() && d < index.dim(); d++) {
    if (d != dim)
      TORCH_CHECK(index.size(d) <= (self.dim() ? self.size(d) : 1), "Size does not match at dimension ", d,
                  " expected index ", index.sizes(), " to be no larger than self ", self.sizes(),
                  " apart from dimension ", dim);
    if (src)
      TORCH_CHECK(index.size(d) <= src->size(d), "Expected index ", index.sizes(),
                  " to be no larger than src ", src->sizes());
  }
}

at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad, at::Tensor& out) {
  check_hpu_dtype(self.scalar_type(), "gather");
  check_same_device("gather", {&self, &index, &out});
  dim = at::maybe_wrap_dim(dim, self.dim());
  gs_check("gather", self, dim, index, nullptr);
  at::native::resize_output(out, index.sizes());
  if (out.numel() == 0) return out;
  hpu_node_t n = make_node(HPU_OP_GATHER);
  add_in(n, self);
  add_in(n, index);
  add_out(n, out);
  n.compute_dtype = n.outputs[0].dtype;
  n.params.nn.i[0] = dim;
  launch(dev_of(out), n);
  return out;
}

at::Tensor& scatter_impl(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor* src,
                         const c10::Scalar* value, int reduce, at::Tensor& out, const char* op) {
  check_hpu_dtype(self.scalar_type(), op);
  check_same_device(op, {&self, &index, opt_ptr(src), &out});
  dim = at::maybe_wrap_dim(dim, self.dim());
  gs_check(op, self, dim, index, src);
  if (src)
    TORCH_CHECK(src->scalar_type() == self.scalar_type(), op, "(): Expected self.dtype to be equal to src.dtype");
  at::native::resize_output(out, self.sizes());
  if (!out.is_same(self)) out.copy_(self);
  if (index.numel() == 0) return out;
  hpu_node_t n = make_node(HPU_OP_SCATTER);
  add_in(n, index);
  if (src) add_in(n, *src);
  add_out(n, out);
  n.compute_dtype = n.outputs[0].dtype;
  n.params.nn.i[0] = dim;
  n.params.nn.i[1] = reduce;
  if (value) n.params.nn.s[0] = to_hpu_scalar(*value);
  launch(dev_of(out), n);
  return out;
}

// scatter's reduce modes (the node's params.nn.i[1]): 1 add, 2 multiply.
int parse_reduce(std::string_view reduce) {
  if (reduce == "add") return 1;
  if (reduce == "multiply") return 2;
  TORCH_CHECK(false, "reduce argument must be either add or multiply.");
}

at::Tensor& scatter_src_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                            at::Tensor& out) {
  return scatter_impl(self, dim, index, &src, nullptr, 0, out, "scatter");
}
at::Tensor& scatter_value_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value,
                              at::Tensor& out) {
  return scatter_impl(self, dim, index, nullptr, &value, 0, out, "scatter");
}
at::Tensor& scatter_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                               std::string_view reduce, at::Tensor& out) {
  return scatter_impl(self, dim, index, &src, nullptr, parse_reduce(reduce), out, "scatter");
}
at::Tensor& scatter_value_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                     const c10::Scalar& value, std::string_view reduce, at::Tensor& out) {
  return scatter_impl(self, dim, index, nullptr, &value, parse_reduce(reduce), out, "scatter");
}
at::Tensor& scatter_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                            at::Tensor& out) {
  return scatter_impl(self, dim, index, &src, nullptr, 1, out, "scatter_add");
}

at::Tensor& index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                          const c10::Scalar& alpha, at::Tensor& out) {
  check_hpu_dtype(self.scalar_type(), "index_add");
  check_same_device("index_add", {&self, &index, &source, &out});
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_add_(): Index is supposed to be a vector");
  check_index_dtype(index, "index_add_");
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "index_add_(): self (", self.scalar_type(),
              ") and source (", source.scalar_type(), ") must have the same scalar type");
  TORCH_CHECK(self.dim() == 0 || index.numel() == (source.dim() ? source.size(dim) : 1),
              "index_add_(): Number of indices (", index.numel(), ") should be equal to source.size(dim) (",
              source.dim() ? source.size(dim) : 1, ")");
  at::native::resize_output(out, self.sizes());
  if (!out.is_same(self)) out.copy_(self);
  if (index.numel() == 0 || out.numel() == 0) return out;
  hpu_node_t n = make_node(HPU_OP_INDEX_ADD);
  add_in(n, index);
  add_in(n, source.dim() == self.dim() ? source : source.view(self.sizes()));
  add_out(n, out);
  n.compute_dtype = n.outputs[0].dtype;
  n.params.nn.i[0] = dim;
  n.params.nn.s[0] = to_hpu_scalar(alpha);
  launch(dev_of(out), n);
  return out;
}

// Advanced indexing: PyTorch's AdvancedIndex restriding (ATen/native/
// TensorAdvancedIndexing.cpp), done here because that helper is not
// exported. Masks become long indices through nonzero on the host (their
// result size depends on the data: this synchronizes).
struct AdvIndex {
  at::Tensor src;                    // restrided: result shape, stride 0 in indexed dims
  std::vector<at::Tensor> indices;   // shaped [1.., B.., 1..]
  std::vector<int64_t> sizes, strides;
  std::vector<int64_t> result_shape;
  bool on_cpu = false;               // more index tensors than the kernel takes
};

// The indices on the CPU, for the counted fallback of an index with more
// index tensors than the kernel's node has inputs for.
c10::List<std::optional<at::Tensor>> cpu_indices(const c10::List<std::optional<at::Tensor>>& raw) {
  c10::List<std::optional<at::Tensor>> r;
  for (const auto& o : raw) {
    std::optional<at::Tensor> ot = o;
    r.push_back(ot.has_value() && ot->defined() ? std::optional<at::Tensor>(ot->cpu()) : std::nullopt);
  }
  return r;
}

AdvIndex make_adv(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& raw, const char* op) {
  std::vector<at::Tensor> idx;  // one per self dim (undefined = ':')
  for (const auto& o : raw) {
    std::optional<at::Tensor> ot = o;
    at::Tensor t = ot.has_value() ? *ot : at::Tensor();
    if (t.defined() && (t.scalar_type() == at::kBool || t.scalar_type() == at::kByte)) {
      int64_t start = (int64_t)idx.size();
      TORCH_CHECK_INDEX(start + t.dim() <= self.dim(), "too many indices for tensor of dimension ", self.dim());
      for (int64_t j = 0; j < t.dim(); j++)
        TORCH_CHECK_INDEX(t.size(j) == self.size(start + j), "The shape of the mask ", t.sizes(), " at index ", j,
                          " does not match the shape of the indexed tensor ", self.sizes(), " at index ",
                          start + j);
      at::Tensor nz = at::nonzero(t.cpu());
      for (int64_t j = 0; j < t.dim(); j++) idx.push_back(nz.select(1, j).to(self.device()));
    } else {
      if (t.defined())
        TORCH_CHECK_INDEX(t.scalar_type() == at::kLong || t.scalar_type() == at::kInt,
                          "tensors used as indices must be long, int, byte or bool tensors");
      idx.push_back(t);
    }
  }
  TORCH_CHECK_INDEX((int64_t)idx.size() <= self.dim(), "too many indices for tensor of dimension ", self.dim(),
                    " (got ", idx.size(), ")");
  while ((int64_t)idx.size() < self.dim()) idx.emplace_back();
  // broadcast the defined indices
  std::vector<int64_t> B;
  bool first = true;
  for (auto& t : idx)
    if (t.defined()) {
      B = first ? t.sizes().vec() : at::infer_size(B, t.sizes());
      first = false;
    }
  TORCH_CHECK(!first, op, ": no index tensors");
  // indexed dims not adjacent: move them to the front, as PyTorch
  at::Tensor s = self;
  std::vector<int64_t> dims_idx;
  for (int64_t d = 0; d < (int64_t)idx.size(); d++)
    if (idx[d].defined()) dims_idx.push_back(d);
  bool adjacent = dims_idx.back() - dims_idx.front() + 1 == (int64_t)dims_idx.size();
  if (!adjacent) {
    std::vector<int64_t> perm;
    std::vector<at::Tensor> nidx;
    for (int64_t d : dims_idx) { perm.push_back(d); nidx.push_back(idx[d]); }
    for (int64_t d = 0; d < (int64_t)idx.size(); d++)
      if (!idx[d].defined()) { perm.push_back(d); nidx.emplace_back(); }
    s = self.permute(perm);
    idx = nidx;
    dims_idx.clear();
    for (int64_t d = 0; d < (int64_t)idx.size(); d++)
      if (idx[d].defined()) dims_idx.push_back(d);
  }
  AdvIndex r;
  if (dims_idx.size() > HPU_NN_MAX_INDICES) {
    r.on_cpu = true;
    return r;
  }
  int64_t before = dims_idx.front(), after = s.dim() - dims_idx.back() - 1;
  std::vector<int64_t> sizes, strides;
  for (int64_t d = 0; d < before; d++) { sizes.push_back(s.size(d)); strides.push_back(s.stride(d)); }
  for (int64_t b : B) { sizes.push_back(b); strides.push_back(0); }
  for (int64_t d = s.dim() - after; d < s.dim(); d++) { sizes.push_back(s.size(d)); strides.push_back(s.stride(d)); }
  for (int64_t d : dims_idx) {
    r.sizes.push_back(s.size(d));
    r.strides.push_back(s.stride(d));
    TORCH_CHECK_INDEX(s.size(d) > 0 || c10::multiply_integers(B) == 0, "index is out of bounds for dimension ", d,
                      " with size 0");
  }
  r.result_shape = sizes;
  r.src = s.as_strided(sizes, strides, s.storage_offset());
  std::vector<int64_t> ishape(before, 1);
  ishape.insert(ishape.end(), B.begin(), B.end());
  ishape.insert(ishape.end(), after, 1);
  for (size_t j = 0; j < dims_idx.size(); j++) {
    int64_t d = dims_idx[j];
    at::Tensor t = device_index(idx[d], self, r.sizes[j], true, op, d);
    r.indices.push_back(t.expand(B).view(ishape.size() ? at::IntArrayRef(ishape) : at::IntArrayRef{}));
  }
  return r;
}

at::Tensor& index_out(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices, at::Tensor& out) {
  check_hpu_dtype(self.scalar_type(), "index");
  AdvIndex a = make_adv(self, indices, "index");
  if (a.on_cpu) {
    note_cpu_fallback("aten::index.Tensor_out");
    at::Tensor r = at::index(self.cpu(), cpu_indices(indices));
    at::native::resize_output(out, r.sizes());
    out.copy_(r);
    return out;
  }
  at::native::resize_output(out, a.result_shape);
  if (out.numel() == 0) return out;
  hpu_node_t n = make_node(HPU_OP_INDEX);
  add_in(n, a.src);
  for (auto& t : a.indices) add_in(n, t.expand(a.result_shape));
  add_out(n, out);
  n.compute_dtype = n.outputs[0].dtype;
  n.params.nn.i[0] = (int64_t)a.indices.size();
  for (size_t j = 0; j < a.indices.size(); j++) {
    n.params.nn.sizes[j] = a.sizes[j];
    n.params.nn.strides[j] = a.strides[j];
  }
  launch(dev_of(out), n);
  return out;
}

at::Tensor& index_put_impl(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                           const at::Tensor& values, bool accumulate, bool unsafe) {
  check_hpu_dtype(self.scalar_type(), "index_put_");
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), "Index put requires the source and destination dtypes "
              "match, got ", self.scalar_type(), " for the destination and ", values.scalar_type(), " for the source.");
  AdvIndex a = make_adv(self, indices, "index_put_");
  if (a.on_cpu) {
    note_cpu_fallback("aten::_index_put_impl_");
    at::Tensor c = self.cpu();
    at::_index_put_impl_(c, cpu_indices(indices), values.cpu(), accumulate, unsafe);
    self.copy_(c);
    return self;
  }
  if (c10::multiply_integers(a.result_shape) == 0) return self;
  auto v_ = on_device(values, self);
  const at::Tensor& v = *v_;
  TORCH_CHECK(at::is_expandable_to(v.sizes(), a.result_shape), "shape mismatch: value tensor of shape ",
              v.sizes(), " cannot be broadcast to indexing result of shape ", at::IntArrayRef(a.result_shape));
  hpu_node_t n = make_node(HPU_OP_INDEX_PUT);
  add_in(n, v.expand(a.result_shape));
  for (auto& t : a.indices) add_in(n, t.expand(a.result_shape));
  n.num_outputs = 1;
  n.outputs[0] = to_desc(a.src);
  n.compute_dtype = n.outputs[0].dtype;
  n.params.nn.i[0] = (int64_t)a.indices.size();
  n.params.nn.i[1] = accumulate;
  for (size_t j = 0; j < a.indices.size(); j++) {
    n.params.nn.sizes[j] = a.sizes[j];
    n.params.nn.strides[j] = a.strides[j];
  }
  launch(dev_of(self), n);
  return self;
}

// ---- cat ----------------------------------------------------------------------------

at::Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  auto list = tensors.materialize();
  TORCH_CHECK(!list.empty(), "torch.cat(): expected a non-empty list of Tensors");
  // legacy: 1-d empty tensors are skipped
  const at::Tensor* ref = nullptr;
  for (const at::Tensor& t : list)
    if (!(t.dim() == 1 && t.numel() == 0)) { ref = &t; break; }
  at::ScalarType type = at::native::result_type(tensors);
  TORCH_CHECK(c10::canCast(type, out.scalar_type()), "torch.cat(): input types can't be cast to the desired output type ",
              out.scalar_type());
  check_hpu_dtype(type, "cat");
  if (!ref) {
    at::native::resize_output(out, {0});
    return out;
  }
  dim = at::maybe_wrap_dim(dim, ref->dim());
  std::vector<int64_t> shape = ref->sizes().vec();
  int64_t total = 0;
  for (size_t i = 0; i < list.size(); i++) {
    const at::Tensor& t = list[i];
    check_same_device("cat", {&t, &out});
    if (t.dim() == 1 && t.numel() == 0) continue;
    TORCH_CHECK(t.dim() == ref->dim(), "Tensors must have same number of dimensions: got ", ref->dim(), " and ",
                t.dim());
    for (int64_t d = 0; d < t.dim(); d++)
      TORCH_CHECK(d == dim || t.size(d) == shape[d], "Sizes of tensors must match except in dimension ", dim,
                  ". Expected size ", shape[d], " but got size ", t.size(d), " for tensor number ", i,
                  " in the list.");
    total += t.size(dim);
  }
  shape[dim] = total;
  for (const at::Tensor& t : list)
    TORCH_CHECK(!(t.numel() && out.numel() && t.is_alias_of(out)), "torch.cat(): unsupported operation: the input "
                "tensors cannot refer to any of the output memory locations.");
  at::native::resize_output(out, shape);
  int64_t off = 0;
  for (const at::Tensor& t : list) {
    if (t.dim() == 1 && t.numel() == 0) continue;
    int64_t len = t.size(dim);
    if (len && t.numel()) copy_between(out.narrow(dim, off, len), t);
    off += len;
  }
  return out;
}

// ---- sort / topk ---------------------------------------------------------------------

void run_sort(const at::Tensor& self, int64_t dim, bool desc, int64_t k, const at::Tensor& values,
              const at::Tensor& indices) {
  if (values.numel() == 0) return;
  hpu_node_t n = make_node(HPU_OP_SORT);
  add_in(n, self);
  add_out(n, values);
  add_out(n, indices);
  n.compute_dtype = n.inputs[0].dtype;
  n.params.nn.i[0] = dim;
  n.params.nn.i[1] = desc;
  n.params.nn.i[2] = k;
  launch(dev_of(self), n);
}

std::tuple<at::Tensor&, at::Tensor&> topk_out(const at::Tensor& self, c10::SymInt k_, int64_t dim, bool largest,
                                              bool sorted, at::Tensor& values, at::Tensor& indices) {
  check_hpu_dtype(self.scalar_type(), "topk");
  check_same_device("topk", {&self, &values, &indices});
  int64_t k = k_.guard_int(__FILE__, __LINE__);
  dim = at::maybe_wrap_dim(dim, self.dim());
  int64_t size = self.dim() ? self.size(dim) : 1;
  TORCH_CHECK(k >= 0 && k <= size, "selected index k out of range");
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.dim()) shape[dim] = k;
  at::native::resize_output(values, shape);
  at::native::resize_output(indices, shape);
  run_sort(self, dim, largest, k, values, indices);
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> sort_out(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                              bool descending, at::Tensor& values, at::Tensor& indices) {
  check_hpu_dtype(self.scalar_type(), "sort");
  check_same_device("sort", {&self, &values, &indices});
  dim = at::maybe_wrap_dim(dim, self.dim());
  at::native::resize_output(values, self.sizes());
  at::native::resize_output(indices, self.sizes());
  run_sort(self, dim, descending, self.dim() ? self.size(dim) : 1, values, indices);
  return {values, indices};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("_softmax.out", TORCH_FN(softmax_out));
  m.impl("_log_softmax.out", TORCH_FN(log_softmax_out));
  m.impl("_softmax_backward_data.out", TORCH_FN(softmax_bw_out));
  m.impl("_log_softmax_backward_data.out", TORCH_FN(log_softmax_bw_out));
  m.impl("native_layer_norm", TORCH_FN(native_layer_norm));
  m.impl("native_layer_norm_backward", TORCH_FN(native_layer_norm_backward));
  m.impl("native_group_norm", TORCH_FN(native_group_norm));
  m.impl("native_group_norm_backward", TORCH_FN(native_group_norm_backward));
  m.impl("nll_loss_forward.output", TORCH_FN(nll_loss_forward_out));
  m.impl("nll_loss_backward.grad_input", TORCH_FN(nll_loss_backward_out));
  m.impl("nll_loss2d_forward", TORCH_FN(nll_loss2d_forward));
  m.impl("nll_loss2d_forward.output", TORCH_FN(nll_loss2d_forward_out));
  m.impl("nll_loss2d_backward", TORCH_FN(nll_loss2d_backward));
  m.impl("nll_loss2d_backward.grad_input", TORCH_FN(nll_loss2d_backward_out));
}

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("index_select", TORCH_FN(index_select));
  m.impl("index_select.out", TORCH_FN(index_select_out));
  m.impl("embedding_dense_backward", TORCH_FN(embedding_dense_backward));
  m.impl("gather.out", TORCH_FN(gather_out));
  m.impl("scatter.src_out", TORCH_FN(scatter_src_out));
  m.impl("scatter.value_out", TORCH_FN(scatter_value_out));
  m.impl("scatter.reduce_out", TORCH_FN(scatter_reduce_out));
  m.impl("scatter.value_reduce_out", TORCH_FN(scatter_value_reduce_out));
  m.impl("scatter_add.out", TORCH_FN(scatter_add_out));
  m.impl("index_add.out", TORCH_FN(index_add_out));
  m.impl("index.Tensor_out", TORCH_FN(index_out));
  m.impl("_index_put_impl_", TORCH_FN(index_put_impl));
  m.impl("cat.out", TORCH_FN(cat_out));
  m.impl("topk.values", TORCH_FN(topk_out));
  m.impl("sort.values_stable", TORCH_FN(sort_out));
}

}  // namespace habana_torch
