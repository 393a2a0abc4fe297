// Convolutions: PyTorch's front end (at::_convolution) checks the shapes,
// padding and groups, handles batchless input, then reaches a backend as the
// *_overrideable ops. 1-d and 2-d convolutions run as HPU_OP_CONV /
// HPU_OP_CONV_BACKWARD (csrc/kernels/conv.c), in float32 or float64 (and
// int64 forwards, exact as the CPU's): bf16 / fp16 operands are widened on
// the card (exactly) and the results rounded once, as the CPU's kernels
// accumulate in float. Transposed and 3-d
// convolutions run PyTorch's CPU convolution (counted as a CPU fallback: the
// boxed fallback cannot serve these ops, the CPU has no kernel under their
// names).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "hpu_common.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace {

// forward: int64 too (the CPU's integer convolution has no gradient).
bool native_conv(const at::Tensor& input, const at::Tensor& weight, bool transposed, bool forward) {
  at::ScalarType t = input.scalar_type();
  bool dtype_ok = t == at::kFloat || t == at::kBFloat16 || t == at::kHalf || t == at::kDouble ||
                  (forward && t == at::kLong);
  return !transposed && (weight.dim() == 3 || weight.dim() == 4) && dtype_ok;
}

// 1-d as 2-d: a size-1 height and stride / padding / dilation 1 / 0 / 1 there.
at::Tensor as4d(const at::Tensor& t) { return t.dim() == 3 ? t.unsqueeze(2) : t; }
int64_t at2(at::IntArrayRef a, size_t i, bool one_d, int64_t neutral) {
  if (one_d) return i == 0 ? neutral : a[0];
  return a.size() == 1 ? a[0] : a[i];
}

// The kernel's dtype for an input of dtype t: float64 and int64 stay, the rest computes in float32.
at::ScalarType kernel_type(at::ScalarType t) { return t == at::kDouble || t == at::kLong ? t : at::kFloat; }
at::Tensor as_kernel(const at::Tensor& t, at::ScalarType kt) { return t.to(kt).contiguous(); }

hpu_node_t conv_node(hpu_op_t op, bool one_d, at::IntArrayRef stride, at::IntArrayRef padding,
                     at::IntArrayRef dilation, int64_t groups, at::ScalarType kt) {
  hpu_node_t n{};
  n.op = op;
  n.compute_dtype = to_hpu_dtype(kt);
  n.params.nn.i[0] = groups;
  n.params.nn.i[2] = at2(dilation, 0, one_d, 1);
  n.params.nn.i[3] = at2(dilation, 1, one_d, 1);
  n.params.nn.sizes[0] = at2(stride, 0, one_d, 1);
  n.params.nn.sizes[1] = at2(stride, 1, one_d, 1);
  n.params.nn.strides[0] = at2(padding, 0, one_d, 0);
  n.params.nn.strides[1] = at2(padding, 1, one_d, 0);
  return n;
}

void check_geometry(at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  TORCH_CHECK(groups > 0, "non-positive groups is not supported");
  for (int64_t s : stride) TORCH_CHECK(s > 0, "non-positive stride is not supported");
  for (int64_t p : padding) TORCH_CHECK(p >= 0, "negative padding is not supported");
  for (int64_t d : dilation) TORCH_CHECK(d > 0, "dilation should be greater than zero");
}

// PyTorch's CPU convolution for what conv.c does not cover.
at::Tensor conv_cpu(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                    at::IntArrayRef output_padding, int64_t groups) {
  note_cpu_fallback("aten::convolution_overrideable");
  std::optional<at::Tensor> bias_cpu;
  if (bias.has_value() && bias->defined()) bias_cpu = bias->cpu();
  at::Tensor out = at::convolution(input.cpu(), weight.cpu(), bias_cpu, stride, padding, dilation, transposed,
                                   output_padding, groups);
  return out.to(input.device());
}

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                                    at::IntArrayRef output_padding, int64_t groups) {
  bool has_b = bias.has_value() && bias->defined();
  const at::Tensor none;
  check_same_device("convolution", {&input, &weight, has_b ? &*bias : &none});
  check_geometry(stride, padding, dilation, groups);
  if (!native_conv(input, weight, transposed, true))
    return conv_cpu(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
  TORCH_CHECK(input.dim() == weight.dim(), "convolution: expected a ", weight.dim(), "-d input (batched), got ",
              input.sizes());
  TORCH_CHECK(weight.scalar_type() == input.scalar_type(), "Input type (", input.scalar_type(),
              ") and weight type (", weight.scalar_type(), ") should be the same");
  bool one_d = weight.dim() == 3;
  at::ScalarType kt = kernel_type(input.scalar_type());
  at::Tensor x = as_kernel(as4d(input), kt), w = as_kernel(as4d(weight), kt);
  int64_t N = x.size(0), C = x.size(1), Co = w.size(0);
  TORCH_CHECK(C == w.size(1) * groups && Co % groups == 0, "convolution: weight of size ", weight.sizes(),
              " does not fit an input with ", C, " channels in ", groups, " groups");
  hpu_node_t n = conv_node(HPU_OP_CONV, one_d, stride, padding, dilation, groups, kt);
  int64_t OH = (x.size(2) + 2 * n.params.nn.strides[0] - n.params.nn.i[2] * (w.size(2) - 1) - 1) /
                   n.params.nn.sizes[0] + 1;
  int64_t OW = (x.size(3) + 2 * n.params.nn.strides[1] - n.params.nn.i[3] * (w.size(3) - 1) - 1) /
                   n.params.nn.sizes[1] + 1;
  TORCH_CHECK(OH > 0 && OW > 0, "convolution: the kernel size ", weight.sizes().slice(2),
              " (dilated) can't be greater than the padded input size ", input.sizes().slice(2));
  at::Tensor y = at::empty({N, Co, OH, OW}, x.options());
  if (y.numel() > 0) {
    n.num_inputs = 0;
    n.inputs[n.num_inputs++] = to_desc(x);
    n.inputs[n.num_inputs++] = to_desc(w);
    at::Tensor b;
    if (has_b) {
      b = as_kernel(*bias, kt);
      TORCH_CHECK(b.dim() == 1 && b.size(0) == Co, "convolution: bias must be [", Co, "], got ", bias->sizes());
      n.inputs[n.num_inputs++] = to_desc(b);
      n.params.nn.i[1] = 1;
    }
    n.num_outputs = 1;
    n.outputs[0] = to_desc(y);
    launch(input.device().index(), n);
  }
  if (input.scalar_type() != kt) y = y.to(input.scalar_type());
  return one_d ? y.squeeze(2) : y;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> conv_backward_cpu(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  note_cpu_fallback("aten::convolution_backward_overrideable");
  int64_t out_channels = transposed ? weight.size(1) * groups : weight.size(0);
  std::vector<int64_t> bias_sizes{out_channels};
  auto grads = at::convolution_backward(grad_output.cpu(), input.cpu(), weight.cpu(), bias_sizes, stride, padding,
                                        dilation, transposed, output_padding, groups, output_mask);
  auto back = [&](const at::Tensor& t) { return t.defined() ? t.to(input.device()) : t; };
  return {back(std::get<0>(grads)), back(std::get<1>(grads)), back(std::get<2>(grads))};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  check_same_device("convolution_backward", {&grad_output, &input, &weight});
  check_geometry(stride, padding, dilation, groups);
  if (!native_conv(input, weight, transposed, false))
    return conv_backward_cpu(grad_output, input, weight, stride, padding, dilation, transposed, output_padding,
                             groups, output_mask);
  TORCH_CHECK(input.dim() == weight.dim() && grad_output.dim() == weight.dim(),
              "convolution_backward: input, grad_output and weight must have the same number of dims");
  TORCH_CHECK(weight.scalar_type() == input.scalar_type() && grad_output.scalar_type() == input.scalar_type(),
              "convolution_backward: grad_output (", grad_output.scalar_type(), "), input (", input.scalar_type(),
              ") and weight (", weight.scalar_type(), ") must have one dtype");
  bool one_d = weight.dim() == 3;
  at::ScalarType kt = kernel_type(input.scalar_type());
  at::Tensor dy = as_kernel(as4d(grad_output), kt), x = as_kernel(as4d(input), kt), w = as_kernel(as4d(weight), kt);
  TORCH_CHECK(x.size(1) == w.size(1) * groups && w.size(0) % groups == 0 && dy.size(1) == w.size(0) &&
                  dy.size(0) == x.size(0),
              "convolution_backward: grad_output ", grad_output.sizes(), ", input ", input.sizes(),
              " and weight ", weight.sizes(), " do not fit ", groups, " groups");
  at::Tensor dx, dw, db;
  if (output_mask[0]) dx = at::empty(x.sizes(), x.options());
  if (output_mask[1]) dw = at::empty(w.sizes(), w.options());
  if (output_mask[2]) db = at::empty({w.size(0)}, w.options());
  bool any = output_mask[0] || output_mask[1] || output_mask[2];
  if (any && x.size(0) == 0) {  // no images: zero weight and bias gradients
    if (dw.defined()) dw.zero_();
    if (db.defined()) db.zero_();
  } else if (any && x.numel() > 0 && w.numel() > 0) {
    hpu_node_t n = conv_node(HPU_OP_CONV_BACKWARD, one_d, stride, padding, dilation, groups, kt);
    n.num_inputs = 3;
    n.inputs[0] = to_desc(dy);
    n.inputs[1] = to_desc(x);
    n.inputs[2] = to_desc(w);
    n.num_outputs = 3;
    if (output_mask[0]) n.outputs[0] = to_desc(dx);
    if (output_mask[1]) n.outputs[1] = to_desc(dw);
    if (output_mask[2]) n.outputs[2] = to_desc(db);
    n.params.nn.i[1] = (output_mask[0] ? 1 : 0) | (output_mask[1] ? 2 : 0) | (output_mask[2] ? 4 : 0);
    launch(input.device().index(), n);
  }
  at::ScalarType dt = input.scalar_type();
  auto back = [&](at::Tensor t, bool squeeze) {
    if (!t.defined()) return t;
    if (dt != kt) t = t.to(dt);
    return one_d && squeeze ? t.squeeze(2) : t;
  };
  return {back(dx, true), back(dw, true), back(db, false)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("convolution_overrideable", TORCH_FN(convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_overrideable));
}

}  // namespace habana_torch
