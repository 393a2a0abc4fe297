// Convolutions: PyTorch's front end (at::_convolution) checks the shapes,
// padding and groups, handles batchless input, then reaches a backend as the
// *_overrideable ops. 1-d and 2-d convolutions run as HPU_OP_CONV /
// HPU_OP_CONV_BACKWARD (csrc/kernels/conv.c), in float32 or float64 (and
// int64 forwards, exact as the CPU's): bf16 / fp16 operands are widened on
// the card (exactly) and the results rounded once, as the CPU's kernels
// accumulate in float. A transposed convolution is the input gradient of
// the convolution it transposes, so it runs as that (HPU_OP_CONV_BACKWARD
// computing dx only), and its own backward as a forward convolution (its
// input gradient) and that node's weight gradient with the roles of input
// and gradient exchanged. 3-d convolutions run PyTorch's CPU convolution
// (counted as a CPU fallback: the boxed fallback cannot serve these ops,
// the CPU has no kernel under their names).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "hpu_common.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace {

// forward: int64 too (the CPU's integer convolution has no gradient).
bool native_conv(const at::Tensor& input, const at::Tensor& weight, bool forward) {
  at::ScalarType t = input.scalar_type();
  bool dtype_ok = t == at::kFloat || t == at::kBFloat16 || t == at::kHalf || t == at::kDouble ||
                  (forward && t == at::kLong);
  return (weight.dim() == 3 || weight.dim() == 4) && dtype_ok;
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

// Runs HPU_OP_CONV n (geometry set) of x with w and bias b (undefined:
// none) into y.
void conv_forward_node(hpu_node_t n, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                       const at::Tensor& y) {
  n.num_inputs = 0;
  n.inputs[n.num_inputs++] = to_desc(x);
  n.inputs[n.num_inputs++] = to_desc(w);
  if (b.defined()) {
    n.inputs[n.num_inputs++] = to_desc(b);
    n.params.nn.i[1] = 1;
  }
  n.num_outputs = 1;
  n.outputs[0] = to_desc(y);
  launch(x.device().index(), n);
}

// Gradients computed in the kernel's dtype, as the caller gets them: in
// the input's dtype, 1-d ones without the height added for the kernel.
std::tuple<at::Tensor, at::Tensor, at::Tensor> as_caller_grads(at::Tensor dx, at::Tensor dw, at::Tensor db,
                                                               at::ScalarType dt, bool one_d) {
  auto back = [&](at::Tensor t, bool squeeze) {
    if (!t.defined()) return t;
    if (t.scalar_type() != dt) t = t.to(dt);
    return one_d && squeeze ? t.squeeze(2) : t;
  };
  return {back(dx, true), back(dw, true), back(db, false)};
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

// Runs one HPU_OP_CONV_BACKWARD node for the convolution (stride, padding,
// dilation, groups) of an input shaped like `x` with weight `w`, given
// `dy`: its input gradient into dx and / or its weight gradient into dw.
void conv_backward_node(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& w, const at::Tensor& dx,
                        const at::Tensor& dw, bool one_d, at::IntArrayRef stride, at::IntArrayRef padding,
                        at::IntArrayRef dilation, int64_t groups, at::ScalarType kt) {
  hpu_node_t n = conv_node(HPU_OP_CONV_BACKWARD, one_d, stride, padding, dilation, groups, kt);
  n.num_inputs = 3;
  n.inputs[0] = to_desc(dy);
  n.inputs[1] = to_desc(x);
  n.inputs[2] = to_desc(w);
  n.num_outputs = 3;
  if (dx.defined()) n.outputs[0] = to_desc(dx);
  if (dw.defined()) n.outputs[1] = to_desc(dw);
  n.params.nn.i[1] = (dx.defined() ? 1 : 0) | (dw.defined() ? 2 : 0);
  launch(x.device().index(), n);
}

int64_t transposed_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int64_t op) {
  return (in - 1) * s - 2 * p + d * (k - 1) + op + 1;
}

// The input of a transposed convolution with output [.., OH, OW] as the
// output gradient of the convolution it transposes: that convolution of an
// OH x OW input has (OH + 2p - d (k - 1) - 1) / s + 1 rows, one or more
// beyond the input's when output_padding reaches the stride (PyTorch
// allows it up to the dilation); those rows are zero gradient.
at::Tensor as_output_gradient(const at::Tensor& x, const hpu_node_t& geo, int64_t KH, int64_t KW, int64_t OH,
                              int64_t OW) {
  const hpu_nn_params_t& p = geo.params.nn;
  int64_t rows = (OH + 2 * p.strides[0] - p.i[2] * (KH - 1) - 1) / p.sizes[0] + 1;
  int64_t cols = (OW + 2 * p.strides[1] - p.i[3] * (KW - 1) - 1) / p.sizes[1] + 1;
  if (rows == x.size(2) && cols == x.size(3)) return x;
  return at::constant_pad_nd(x, {0, cols - x.size(3), 0, rows - x.size(2)}, 0);
}

// The transposed convolution of input [N, Cin, H, W] with weight
// [Cin, Cout / groups, KH, KW]: the input gradient of the convolution of a
// [N, Cout, OH, OW] tensor with that weight (read as [Co = Cin, Cg, KH, KW])
// whose output gradient is the input. That node reads only its input's
// shape for dx, so it gets an uninitialised tensor of that shape.
at::Tensor conv_transpose(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                          at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                          at::IntArrayRef output_padding, int64_t groups) {
  TORCH_CHECK(weight.scalar_type() == input.scalar_type(), "Input type (", input.scalar_type(),
              ") and weight type (", weight.scalar_type(), ") should be the same");
  bool one_d = weight.dim() == 3;
  at::ScalarType kt = kernel_type(input.scalar_type());
  at::Tensor x = as_kernel(as4d(input), kt), w = as_kernel(as4d(weight), kt);
  const int64_t N = x.size(0), Cin = x.size(1), Cout = w.size(1) * groups;
  TORCH_CHECK(Cin == w.size(0) && Cin % groups == 0, "conv_transpose: weight of size ", weight.sizes(),
              " does not fit an input with ", Cin, " channels in ", groups, " groups");
  for (size_t i = 0; i < output_padding.size(); i++) {
    int64_t s = stride[stride.size() == 1 ? 0 : i], d = dilation[dilation.size() == 1 ? 0 : i];
    TORCH_CHECK(output_padding[i] < s || output_padding[i] < d,
                "output padding must be smaller than either stride or dilation, but got output_padding ",
                output_padding, ", stride ", stride, " and dilation ", dilation);
  }
  hpu_node_t geo = conv_node(HPU_OP_CONV_BACKWARD, one_d, stride, padding, dilation, groups, kt);
  const int64_t OH = transposed_size(x.size(2), w.size(2), geo.params.nn.sizes[0], geo.params.nn.strides[0],
                                     geo.params.nn.i[2], one_d ? 0 : output_padding[0]);
  const int64_t OW = transposed_size(x.size(3), w.size(3), geo.params.nn.sizes[1], geo.params.nn.strides[1],
                                     geo.params.nn.i[3], output_padding[output_padding.size() - 1]);
  TORCH_CHECK(OH > 0 && OW > 0, "conv_transpose: the output size would be ", OH, " x ", OW,
              ": the input ", input.sizes(), " is too small for this kernel, stride and padding");
  at::Tensor y = at::empty({N, Cout, OH, OW}, x.options());
  if (y.numel() > 0 && x.numel() > 0) {
    conv_backward_node(as_output_gradient(x, geo, w.size(2), w.size(3), OH, OW), at::empty(y.sizes(), y.options()),
                       w, y, at::Tensor(), one_d, stride, padding, dilation, groups, kt);
  } else if (y.numel() > 0) {
    y.zero_();
  }
  if (bias.has_value() && bias->defined()) {
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == Cout, "conv_transpose: bias must be [", Cout, "], got ",
                bias->sizes());
    y.add_(bias->to(kt).view({1, Cout, 1, 1}));
  }
  if (input.scalar_type() != kt) y = y.to(input.scalar_type());
  return one_d ? y.squeeze(2) : y;
}

// Its backward: grad_input = the forward convolution of grad_output with the
// weight; grad_weight = the weight gradient of the convolution of
// grad_output (as its input) whose output gradient is the input; grad_bias
// = grad_output summed over images and pixels.
std::tuple<at::Tensor, at::Tensor, at::Tensor> conv_transpose_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups, std::array<bool, 3> output_mask) {
  bool one_d = weight.dim() == 3;
  at::ScalarType kt = kernel_type(input.scalar_type());
  at::Tensor dy = as_kernel(as4d(grad_output), kt), x = as_kernel(as4d(input), kt), w = as_kernel(as4d(weight), kt);
  TORCH_CHECK(x.size(1) == w.size(0) && dy.size(1) == w.size(1) * groups && dy.size(0) == x.size(0),
              "conv_transpose backward: grad_output ", grad_output.sizes(), ", input ", input.sizes(),
              " and weight ", weight.sizes(), " do not fit ", groups, " groups");
  hpu_node_t geo = conv_node(HPU_OP_CONV, one_d, stride, padding, dilation, groups, kt);
  at::Tensor xg = as_output_gradient(x, geo, w.size(2), w.size(3), dy.size(2), dy.size(3));
  at::Tensor dx, dw, db;
  if (output_mask[0]) {
    // the convolution of dy, whose rows past the input's (see
    // as_output_gradient) are dropped
    dx = at::empty(xg.sizes(), x.options());
    if (dx.numel() > 0) conv_forward_node(geo, dy, w, at::Tensor(), dx);
    if (!xg.is_same(x)) dx = dx.narrow(2, 0, x.size(2)).narrow(3, 0, x.size(3)).contiguous();
  }
  if (output_mask[1]) {
    dw = at::empty(w.sizes(), w.options());
    if (x.size(0) == 0 || dy.numel() == 0 || x.numel() == 0) dw.zero_();
    else conv_backward_node(xg, dy, w, at::Tensor(), dw, one_d, stride, padding, dilation, groups, kt);
  }
  if (output_mask[2]) db = dy.sum({0, 2, 3});
  return as_caller_grads(dx, dw, db, input.scalar_type(), one_d);
}

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                                    at::IntArrayRef output_padding, int64_t groups) {
  bool has_b = bias.has_value() && bias->defined();
  const at::Tensor none;
  check_same_device("convolution", {&input, &weight, has_b ? &*bias : &none});
  check_geometry(stride, padding, dilation, groups);
  if (!native_conv(input, weight, true))
    return conv_cpu(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
  TORCH_CHECK(input.dim() == weight.dim(), "convolution: expected a ", weight.dim(), "-d input (batched), got ",
              input.sizes());
  if (transposed) return conv_transpose(input, weight, bias, stride, padding, dilation, output_padding, groups);
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
    at::Tensor b;
    if (has_b) {
      b = as_kernel(*bias, kt);
      TORCH_CHECK(b.dim() == 1 && b.size(0) == Co, "convolution: bias must be [", Co, "], got ", bias->sizes());
    }
    conv_forward_node(n, x, w, b, y);
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
  if (!native_conv(input, weight, false))
    return conv_backward_cpu(grad_output, input, weight, stride, padding, dilation, transposed, output_padding,
                             groups, output_mask);
  TORCH_CHECK(input.dim() == weight.dim() && grad_output.dim() == weight.dim(),
              "convolution_backward: input, grad_output and weight must have the same number of dims");
  TORCH_CHECK(weight.scalar_type() == input.scalar_type() && grad_output.scalar_type() == input.scalar_type(),
              "convolution_backward: grad_output (", grad_output.scalar_type(), "), input (", input.scalar_type(),
              ") and weight (", weight.scalar_type(), ") must have one dtype");
  if (transposed)
    return conv_transpose_backward(grad_output, input, weight, stride, padding, dilation, groups, output_mask);
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
  return as_caller_grads(dx, dw, db, input.scalar_type(), one_d);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("convolution_overrideable", TORCH_FN(convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_overrideable));
}

}  // namespace habana_torch
