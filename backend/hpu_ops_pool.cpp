// 2-d pooling: max_pool2d_with_indices, avg_pool2d and their backwards
// (functional and out= forms) as HPU_OP_MAX_POOL2D / HPU_OP_AVG_POOL2D
// (csrc/kernels/pool.c), in float32 or float64: bf16 / fp16 planes are
// widened on the card (exact for a max; averages are rounded once). The
// forwards take int64 (and the max int32 and uint8) as they are, in the
// CPU's integer arithmetic; integer backwards go to the CPU, whose error the
// user gets.
// PyTorch's argument checks come first, with its messages.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "hpu_common.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace {

struct Pool {
  int64_t kh, kw, sh, sw, ph, pw, dh, dw, OH, OW;
};

int64_t pick(at::IntArrayRef a, size_t i) { return a.size() == 1 ? a[0] : a[i]; }

int64_t out_size(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil_mode) {
  int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (o - 1) * s >= in + pad) --o;
  return o;
}

// The checks of PyTorch's max_pool2d_with_indices (Pool.h), same messages.
Pool pool_params(const at::Tensor& x, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                 at::IntArrayRef dilation, bool ceil_mode) {
  TORCH_CHECK(kernel.size() == 1 || kernel.size() == 2,
              "max_pool2d: kernel_size must either be a single int, or a tuple of two ints");
  TORCH_CHECK(stride.empty() || stride.size() == 1 || stride.size() == 2,
              "max_pool2d: stride must either be omitted, a single int, or a tuple of two ints");
  TORCH_CHECK(padding.size() == 1 || padding.size() == 2,
              "max_pool2d: padding must either be a single int, or a tuple of two ints");
  TORCH_CHECK(dilation.size() == 1 || dilation.size() == 2,
              "max_pool2d: dilation must be either a single int, or a tuple of two ints");
  TORCH_CHECK((x.dim() == 3 || x.dim() == 4) && x.size(-1) != 0 && x.size(-2) != 0 && x.size(-3) != 0,
              "non-empty 3D or 4D (batch mode) tensor expected for input");
  Pool p;
  p.kh = pick(kernel, 0), p.kw = pick(kernel, 1);
  p.sh = stride.empty() ? p.kh : pick(stride, 0), p.sw = stride.empty() ? p.kw : pick(stride, 1);
  p.ph = pick(padding, 0), p.pw = pick(padding, 1);
  p.dh = pick(dilation, 0), p.dw = pick(dilation, 1);
  TORCH_CHECK(p.kh > 0 && p.kw > 0, "kernel size should be greater than zero, but got kH: ", p.kh, " kW: ", p.kw);
  TORCH_CHECK(p.sh > 0 && p.sw > 0, "stride should be greater than zero, but got dH: ", p.sh, " dW: ", p.sw);
  TORCH_CHECK(p.dh > 0 && p.dw > 0, "dilation should be greater than zero, but got dilationH: ", p.dh,
              " dilationW: ", p.dw);
  TORCH_CHECK(p.ph >= 0 && p.pw >= 0 && p.ph <= ((p.kh - 1) * p.dh + 1) / 2 && p.pw <= ((p.kw - 1) * p.dw + 1) / 2,
              "pad should be at most half of effective kernel size, but got pad=", p.ph, ", kernel_size=", p.kh,
              " and dilation=", p.dh);
  int64_t H = x.size(-2), W = x.size(-1);
  p.OH = out_size(H, p.kh, p.ph, p.sh, p.dh, ceil_mode);
  p.OW = out_size(W, p.kw, p.pw, p.sw, p.dw, ceil_mode);
  TORCH_CHECK(p.OH >= 1 && p.OW >= 1, "Given input size: (", x.size(-3), "x", H, "x", W,
              "). Calculated output size: (", x.size(-3), "x", p.OH, "x", p.OW, "). Output size is too small");
  return p;
}

bool native_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf || t == at::kDouble;
}
// The integer dtypes a forward takes as they are (avg: int64 only, as the CPU).
bool native_int(at::ScalarType t, bool max) { return t == at::kLong || (max && (t == at::kInt || t == at::kByte)); }
// The kernel's dtype for planes of dtype t: float64 and the integer types
// stay, bf16 / fp16 compute in float32.
at::ScalarType kernel_type(at::ScalarType t) { return t == at::kBFloat16 || t == at::kHalf ? at::kFloat : t; }
hpu_dtype_t kernel_hpu_type(at::ScalarType t) { return to_hpu_dtype(kernel_type(t)); }

std::vector<int64_t> out_shape(const at::Tensor& x, const Pool& p) {
  std::vector<int64_t> s(x.sizes().begin(), x.sizes().end());
  s[s.size() - 2] = p.OH;
  s[s.size() - 1] = p.OW;
  return s;
}

std::tuple<at::Tensor, at::Tensor> hpu_max_pool2d(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                                              at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  Pool p = pool_params(self, kernel, stride, padding, dilation, ceil_mode);
  if (!native_dtype(self.scalar_type()) && !native_int(self.scalar_type(), true)) {
    note_cpu_fallback("aten::max_pool2d_with_indices");
    auto r = at::max_pool2d_with_indices(self.cpu(), kernel, stride, padding, dilation, ceil_mode);
    return {std::get<0>(r).to(self.device()), std::get<1>(r).to(self.device())};
  }
  int64_t H = self.size(-2), W = self.size(-1), planes = self.numel() / (H * W);
  at::Tensor x = self.to(kernel_type(self.scalar_type())).contiguous().view({planes, H, W});
  at::Tensor y = at::empty({planes, p.OH, p.OW}, x.options());
  at::Tensor ix = at::empty({planes, p.OH, p.OW}, x.options().dtype(at::kLong));
  if (planes > 0) {
    hpu_node_t n{};
    n.op = HPU_OP_MAX_POOL2D;
    n.compute_dtype = kernel_hpu_type(self.scalar_type());
    n.num_inputs = 1;
    n.inputs[0] = to_desc(x);
    n.num_outputs = 2;
    n.outputs[0] = to_desc(y);
    n.outputs[1] = to_desc(ix);
    n.params.nn.i[0] = p.kh, n.params.nn.i[1] = p.kw, n.params.nn.i[2] = p.dh, n.params.nn.i[3] = p.dw;
    n.params.nn.sizes[0] = p.sh, n.params.nn.sizes[1] = p.sw;
    n.params.nn.strides[0] = p.ph, n.params.nn.strides[1] = p.pw;
    launch(self.device().index(), n);
  }
  auto shape = out_shape(self, p);
  return {y.view(shape).to(self.scalar_type()), ix.view(shape)};
}

std::tuple<at::Tensor&, at::Tensor&> hpu_max_pool2d_out(const at::Tensor& self, at::IntArrayRef kernel,
                                                    at::IntArrayRef stride, at::IntArrayRef padding,
                                                    at::IntArrayRef dilation, bool ceil_mode, at::Tensor& out,
                                                    at::Tensor& indices) {
  auto r = hpu_max_pool2d(self, kernel, stride, padding, dilation, ceil_mode);
  into_out(std::get<0>(r), out);
  into_out(std::get<1>(r), indices);
  return {out, indices};
}

at::Tensor hpu_max_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef kernel,
                               at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                               bool ceil_mode, const at::Tensor& indices) {
  check_same_device("max_pool2d_with_indices_backward", {&grad_output, &self, &indices});
  Pool p = pool_params(self, kernel, stride, padding, dilation, ceil_mode);
  if (!native_dtype(self.scalar_type())) {
    note_cpu_fallback("aten::max_pool2d_with_indices_backward");
    return at::max_pool2d_with_indices_backward(grad_output.cpu(), self.cpu(), kernel, stride, padding, dilation,
                                                ceil_mode, indices.cpu())
        .to(self.device());
  }
  auto shape = out_shape(self, p);
  TORCH_CHECK(grad_output.sizes() == at::IntArrayRef(shape) && indices.sizes() == at::IntArrayRef(shape),
              "max_pool2d_with_indices_backward: grad_output ", grad_output.sizes(), " and indices ",
              indices.sizes(), " must have the pooled shape ", at::IntArrayRef(shape));
  TORCH_CHECK(indices.scalar_type() == at::kLong, "max_pool2d_with_indices_backward: indices must be int64, got ",
              indices.scalar_type());
  int64_t H = self.size(-2), W = self.size(-1), planes = self.numel() / (H * W);
  at::Tensor g = grad_output.to(kernel_type(self.scalar_type())).contiguous().view({planes, p.OH, p.OW});
  at::Tensor ix = indices.contiguous().view({planes, p.OH, p.OW});
  at::Tensor dx = at::empty({planes, H, W}, g.options());
  if (planes > 0) {
    hpu_node_t n{};
    n.op = HPU_OP_MAX_POOL2D_BACKWARD;
    n.compute_dtype = kernel_hpu_type(self.scalar_type());
    n.num_inputs = 2;
    n.inputs[0] = to_desc(g);
    n.inputs[1] = to_desc(ix);
    n.num_outputs = 1;
    n.outputs[0] = to_desc(dx);
    launch(self.device().index(), n);
  }
  return dx.view(self.sizes()).to(self.scalar_type());
}

at::Tensor& hpu_max_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef kernel,
                                    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                    bool ceil_mode, const at::Tensor& indices, at::Tensor& grad_input) {
  return into_out(hpu_max_pool2d_backward(grad_output, self, kernel, stride, padding, dilation, ceil_mode, indices),
                  grad_input);
}

// ---- avg_pool2d ----------------------------------------------------------

Pool avg_params(const at::Tensor& x, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                bool ceil_mode, std::optional<int64_t> divisor_override) {
  TORCH_CHECK(kernel.size() == 1 || kernel.size() == 2,
              "avg_pool2d: kernel_size must either be a single int, or a tuple of two ints");
  TORCH_CHECK(stride.empty() || stride.size() == 1 || stride.size() == 2,
              "avg_pool2d: stride must either be omitted, a single int, or a tuple of two ints");
  TORCH_CHECK(padding.size() == 1 || padding.size() == 2,
              "avg_pool2d: padding must either be a single int, or a tuple of two ints");
  TORCH_CHECK(!divisor_override.has_value() || divisor_override.value() != 0, "divisor must be not zero");
  int64_t one[1] = {1};
  return pool_params(x, kernel, stride, padding, at::IntArrayRef(one, 1), ceil_mode);
}

hpu_node_t avg_node(hpu_op_t op, const Pool& p, bool count_include_pad, std::optional<int64_t> divisor,
                    at::ScalarType t) {
  hpu_node_t n{};
  n.op = op;
  n.compute_dtype = kernel_hpu_type(t);
  n.params.nn.i[0] = p.kh, n.params.nn.i[1] = p.kw;
  n.params.nn.i[2] = count_include_pad;
  n.params.nn.i[3] = divisor.value_or(0);
  n.params.nn.sizes[0] = p.sh, n.params.nn.sizes[1] = p.sw;
  n.params.nn.strides[0] = p.ph, n.params.nn.strides[1] = p.pw;
  return n;
}

at::Tensor hpu_avg_pool2d(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                          at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                          std::optional<int64_t> divisor_override) {
  Pool p = avg_params(self, kernel, stride, padding, ceil_mode, divisor_override);
  if (!native_dtype(self.scalar_type()) && !native_int(self.scalar_type(), false)) {
    note_cpu_fallback("aten::avg_pool2d");
    return at::avg_pool2d(self.cpu(), kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
        .to(self.device());
  }
  int64_t H = self.size(-2), W = self.size(-1), planes = self.numel() / (H * W);
  at::Tensor x = self.to(kernel_type(self.scalar_type())).contiguous().view({planes, H, W});
  at::Tensor y = at::empty({planes, p.OH, p.OW}, x.options());
  if (planes > 0) {
    hpu_node_t n = avg_node(HPU_OP_AVG_POOL2D, p, count_include_pad, divisor_override, self.scalar_type());
    n.num_inputs = 1;
    n.inputs[0] = to_desc(x);
    n.num_outputs = 1;
    n.outputs[0] = to_desc(y);
    launch(self.device().index(), n);
  }
  return y.view(out_shape(self, p)).to(self.scalar_type());
}

at::Tensor& hpu_avg_pool2d_out(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                               at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                               std::optional<int64_t> divisor_override, at::Tensor& out) {
  return into_out(hpu_avg_pool2d(self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override),
                  out);
}

at::Tensor hpu_avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef kernel,
                                   at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                                   bool count_include_pad, std::optional<int64_t> divisor_override) {
  check_same_device("avg_pool2d_backward", {&grad_output, &self});
  Pool p = avg_params(self, kernel, stride, padding, ceil_mode, divisor_override);
  if (!native_dtype(self.scalar_type())) {
    note_cpu_fallback("aten::avg_pool2d_backward");
    return at::avg_pool2d_backward(grad_output.cpu(), self.cpu(), kernel, stride, padding, ceil_mode,
                                   count_include_pad, divisor_override)
        .to(self.device());
  }
  auto shape = out_shape(self, p);
  TORCH_CHECK(grad_output.sizes() == at::IntArrayRef(shape), "avg_pool2d_backward: grad_output ",
              grad_output.sizes(), " must have the pooled shape ", at::IntArrayRef(shape));
  int64_t H = self.size(-2), W = self.size(-1), planes = self.numel() / (H * W);
  at::Tensor g = grad_output.to(kernel_type(self.scalar_type())).contiguous().view({planes, p.OH, p.OW});
  at::Tensor dx = at::empty({planes, H, W}, g.options());
  if (planes > 0) {
    hpu_node_t n = avg_node(HPU_OP_AVG_POOL2D_BACKWARD, p, count_include_pad, divisor_override, self.scalar_type());
    n.num_inputs = 1;
    n.inputs[0] = to_desc(g);
    n.num_outputs = 1;
    n.outputs[0] = to_desc(dx);
    launch(self.device().index(), n);
  }
  return dx.view(self.sizes()).to(self.scalar_type());
}

at::Tensor& hpu_avg_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                        at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                                        bool ceil_mode, bool count_include_pad,
                                        std::optional<int64_t> divisor_override, at::Tensor& grad_input) {
  return into_out(hpu_avg_pool2d_backward(grad_output, self, kernel, stride, padding, ceil_mode, count_include_pad,
                                          divisor_override),
                  grad_input);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("avg_pool2d", TORCH_FN(hpu_avg_pool2d));
  m.impl("avg_pool2d.out", TORCH_FN(hpu_avg_pool2d_out));
  m.impl("avg_pool2d_backward", TORCH_FN(hpu_avg_pool2d_backward));
  m.impl("avg_pool2d_backward.grad_input", TORCH_FN(hpu_avg_pool2d_backward_out));
  m.impl("max_pool2d_with_indices", TORCH_FN(hpu_max_pool2d));
  m.impl("max_pool2d_with_indices.out", TORCH_FN(hpu_max_pool2d_out));
  m.impl("max_pool2d_with_indices_backward", TORCH_FN(hpu_max_pool2d_backward));
  m.impl("max_pool2d_with_indices_backward.grad_input", TORCH_FN(hpu_max_pool2d_backward_out));
}

}  // namespace habana_torch
