// im2col and col2im (nn.functional.unfold / fold, each the other's
// backward) as the vision ops HPU_OP_IM2COL / HPU_OP_COL2IM
// (csrc/include/hpu/ops_vision.def): an image [N, C, H, W] is viewed as
// planes [N * C, 1, H, W] and its columns [N, C * kh * kw, L] as
// [N * C, kh * kw, OH, OW]. im2col copies elements of any dtype the CPU op
// takes; col2im adds in float32 (bfloat16 / float16 widened on the card,
// each partial sum rounded to the input's dtype, as the CPU adds in it) or
// float64. Dtypes the CPU op rejects run its CPU kernel (a counted CPU
// fallback), so its error reaches the user unchanged.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "hpu_common.h"
#include "hpu_nn_node.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace {

struct Fold {
  int64_t kh, kw, dh, dw, ph, pw, sh, sw;
};

// floor(a / b) for b > 0 (PyTorch's div_rtn)
int64_t div_floor(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
int64_t blocks(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d) {
  return div_floor(in + 2 * pad - (d * (k - 1) + 1), s) + 1;
}

void check_len(const char* what, at::IntArrayRef a) {
  TORCH_CHECK(a.size() == 2, "It is expected ", what, " equals to 2, but got size ", a.size());
}

Fold fold_args(at::IntArrayRef kernel, at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  check_len("kernel_size", kernel);
  check_len("dilation", dilation);
  check_len("padding", padding);
  check_len("stride", stride);
  return Fold{kernel[0], kernel[1], dilation[0], dilation[1], padding[0], padding[1], stride[0], stride[1]};
}

void check_positive(const Fold& f, bool im2col) {
  TORCH_CHECK(f.kw > 0 && f.kh > 0, "kernel size should be greater than zero, but got kernel_height: ", f.kh,
              " kernel_width: ", f.kw);
  auto stride_ok = [&] {
    TORCH_CHECK(f.sw > 0 && f.sh > 0, "stride should be greater than zero, but got stride_height: ", f.sh,
                " stride_width: ", f.sw);
  };
  if (!im2col) stride_ok();  // col2im checks the stride second, im2col last
  TORCH_CHECK(f.dw > 0 && f.dh > 0, "dilation should be greater than zero, but got dilation_height: ", f.dh,
              " dilation_width: ", f.dw);
  TORCH_CHECK(f.pw >= 0 && f.ph >= 0, "padding should be non-negative, but got pad_height: ", f.ph,
              " pad_width: ", f.pw);
  if (im2col) stride_ok();
}

hpu_nn_params_t node_params(const Fold& f) {
  hpu_nn_params_t p{};
  p.i[0] = f.kh, p.i[1] = f.kw, p.i[2] = f.dh, p.i[3] = f.dw;
  p.sizes[0] = f.ph, p.sizes[1] = f.pw;
  p.strides[0] = f.sh, p.strides[1] = f.sw;
  return p;
}

// The dtypes of the CPU kernels (im2col also takes bool).
bool float_type(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kBFloat16 || t == at::kHalf;
}

at::Tensor run(hpu_op_t op, const at::Tensor& in4, at::IntArrayRef out4, at::ScalarType dt, const hpu_nn_params_t& p,
               c10::DeviceIndex dev) {
  at::Tensor out = at::empty(out4, in4.options().dtype(dt));
  if (out.numel() > 0) {
    hpu_node_t n = make_node(op);
    n.compute_dtype = to_hpu_dtype(dt);
    n.params.nn = p;
    add_in(n, in4);
    add_out(n, out);
    launch(dev, n);
  }
  return out;
}

at::Tensor hpu_im2col(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef dilation, at::IntArrayRef padding,
                      at::IntArrayRef stride) {
  Fold f = fold_args(kernel, dilation, padding, stride);
  // PyTorch's im2col_shape_check, same messages and order
  check_positive(f, true);
  int64_t nd = self.dim();
  bool valid_dims = self.size(1) != 0 && self.size(2) != 0;
  TORCH_CHECK((nd == 3 && self.size(0) && valid_dims) || (nd == 4 && valid_dims && self.size(3) != 0),
              "Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for "
              "input, but got: ",
              self.sizes());
  int64_t H = self.size(-2), W = self.size(-1);
  int64_t OH = blocks(H, f.kh, f.ph, f.sh, f.dh), OW = blocks(W, f.kw, f.pw, f.sw, f.dw);
  if (OH < 1 || OW < 1)
    TORCH_CHECK(false, "Given input with spatial size (", H, ", ", W, "), kernel_size=(", f.kh, ", ", f.kw,
                "), dilation=(", f.dh, ", ", f.dw, "), padding=(", f.ph, ", ", f.pw,
                "), calculated shape of the array of sliding blocks as (", OH, ", ", OW,
                "), but its components must be at least one.");
  if (!float_type(self.scalar_type()) && self.scalar_type() != at::kBool) {
    note_cpu_fallback("aten::im2col");
    return at::im2col(self.cpu(), kernel, dilation, padding, stride).to(self.device());
  }
  int64_t N = nd == 4 ? self.size(0) : 1, C = self.size(-3);
  at::Tensor x = self.contiguous().view({N * C, 1, H, W});
  at::Tensor cols = run(HPU_OP_IM2COL, x, {N * C, f.kh * f.kw, OH, OW}, self.scalar_type(), node_params(f),
                        self.device().index());
  std::vector<int64_t> shape{C * f.kh * f.kw, OH * OW};
  if (nd == 4) shape.insert(shape.begin(), N);
  return cols.view(shape);
}

at::Tensor hpu_col2im(const at::Tensor& self, c10::SymIntArrayRef output_size, at::IntArrayRef kernel,
                      at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  at::IntArrayRef osz = C10_AS_INTARRAYREF_SLOW(output_size);
  check_len("output_size", osz);
  Fold f = fold_args(kernel, dilation, padding, stride);
  // PyTorch's col2im_shape_check, same messages and order
  check_positive(f, false);
  int64_t nd = self.dim();
  TORCH_CHECK((nd == 2 && self.size(0) != 0 && self.size(1) != 0) || (nd == 3 && self.size(1) != 0 && self.size(2) != 0),
              "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions for "
              "input, but got: ",
              self.sizes());
  int64_t planes_k = self.size(-2), len = self.size(-1), H = osz[0], W = osz[1];
  if (planes_k % (f.kw * f.kh) != 0)
    TORCH_CHECK(false, "Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got "
                "input.size(1)=", planes_k, " and kernel_size=(", f.kh, ", ", f.kw, ").");
  int64_t OH = blocks(H, f.kh, f.ph, f.sh, f.dh), OW = blocks(W, f.kw, f.pw, f.sw, f.dw);
  auto args = [&](std::ostream& o) -> std::ostream& {
    return o << "Given output_size=(" << H << ", " << W << "), kernel_size=(" << f.kh << ", " << f.kw
             << "), dilation=(" << f.dh << ", " << f.dw << "), padding=(" << f.ph << ", " << f.pw << "), stride=("
             << f.sh << ", " << f.sw << ")";
  };
  if (len != OH * OW) {
    std::ostringstream o;
    args(o) << ", expected size of input's dimension 2 to match the calculated number of sliding blocks " << OH
            << " * " << OW << " = " << OH * OW << ", but got input.size(2)=" << len << ".";
    TORCH_CHECK(false, o.str());
  }
  if (OH < 1 || OW < 1) {
    std::ostringstream o;
    args(o) << ", calculated shape of the array of sliding blocks as (" << OH << ", " << OW
            << "), which is too small (non-positive)";
    TORCH_CHECK(false, o.str());
  }
  TORCH_CHECK(H >= 1 && W >= 1, "Expected output spatial size to be positive, but got: output_size=(", H, ", ", W,
              ").");
  if (!float_type(self.scalar_type())) {
    note_cpu_fallback("aten::col2im");
    return at::col2im(self.cpu(), osz, kernel, dilation, padding, stride).to(self.device());
  }
  at::ScalarType kdt = self.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  int64_t N = nd == 3 ? self.size(0) : 1, C = planes_k / (f.kh * f.kw);
  at::Tensor cols = self.to(kdt).contiguous().view({N * C, f.kh * f.kw, OH, OW});
  hpu_nn_params_t p = node_params(f);
  p.sizes[2] = to_hpu_dtype(self.scalar_type());  // the dtype each partial sum is rounded to
  at::Tensor y = run(HPU_OP_COL2IM, cols, {N * C, 1, H, W}, kdt, p, self.device().index());
  std::vector<int64_t> shape{C, H, W};
  if (nd == 3) shape.insert(shape.begin(), N);
  return y.view(shape).to(self.scalar_type());
}

at::Tensor& hpu_im2col_out(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef dilation,
                           at::IntArrayRef padding, at::IntArrayRef stride, at::Tensor& out) {
  return into_out(hpu_im2col(self, kernel, dilation, padding, stride), out);
}
at::Tensor& hpu_col2im_out(const at::Tensor& self, c10::SymIntArrayRef output_size, at::IntArrayRef kernel,
                           at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride, at::Tensor& out) {
  return into_out(hpu_col2im(self, output_size, kernel, dilation, padding, stride), out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("im2col", TORCH_FN(hpu_im2col));
  m.impl("im2col.out", TORCH_FN(hpu_im2col_out));
  m.impl("col2im", TORCH_FN(hpu_col2im));
  m.impl("col2im.out", TORCH_FN(hpu_col2im_out));
}

}  // namespace habana_torch
