// Adaptive max pooling (2-d, 3-d, with its backward) and max unpooling
// (2-d, 3-d) as the vision ops HPU_OP_ADAPTIVE_MAX_POOL(_BACKWARD) and
// HPU_OP_MAX_UNPOOL (csrc/include/hpu/ops_vision.def). Inputs are viewed as
// planes [P, D, H, W]; channels_last inputs are made contiguous here and the
// result is given the layout the CPU op returns. Dtypes: pooling runs
// float32 (bfloat16 / float16 widened on the card: a max is exact, and the
// backward rounds its partial sums to the input's dtype as the CPU does) and
// float64; unpooling copies elements of any dtype the CPU op takes. Dtypes
// the CPU op rejects run its CPU kernel (a counted CPU fallback), so its
// error reaches the user unchanged. The unpooling backward is PyTorch's own
// formula (a gather), which runs on the card.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "hpu_common.h"
#include "hpu_nn_node.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace {

bool float_type(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kBFloat16 || t == at::kHalf;
}
at::ScalarType kernel_type(at::ScalarType t) { return t == at::kDouble ? at::kDouble : at::kFloat; }

// The leading dims of x (all but the last nd) as one plane count and the
// last nd as [D, H, W] (missing ones 1).
std::vector<int64_t> planes4(const at::Tensor& x, int nd, at::IntArrayRef spatial) {
  std::vector<int64_t> s{1, 1, 1, 1};
  for (int64_t d = 0; d < x.dim() - nd; d++) s[0] *= x.size(d);
  for (int d = 0; d < nd; d++) s[4 - nd + d] = spatial[d];
  return s;
}

std::vector<int64_t> lead_then(const at::Tensor& x, int nd, at::IntArrayRef spatial) {
  std::vector<int64_t> s(x.sizes().begin(), x.sizes().end() - nd);
  s.insert(s.end(), spatial.begin(), spatial.end());
  return s;
}

// r in the layout the CPU gives a result of input x (a batched
// channels_last input keeps it; anything else is contiguous).
at::Tensor like_cpu(const at::Tensor& r, const at::Tensor& x, int nd) {
  auto mf = x.suggest_memory_format();
  if (mf == at::MemoryFormat::Contiguous || x.dim() != nd + 2) return r;
  return r.contiguous(mf);
}

// ---- adaptive max pooling -----------------------------------------------

// The checks of PyTorch's adaptive_max_pool{2,3}d meta functions, same
// messages and order.
void amax_checks(const char* name, const at::Tensor& x, at::IntArrayRef osz, int nd) {
  TORCH_CHECK(x.dim() == nd + 1 || x.dim() == nd + 2, name, "(): Expected ", nd + 1, "D or ", nd + 2,
              "D tensor, but got: ", x.sizes());
  for (int64_t i = 1; i < x.dim(); i++)
    TORCH_CHECK(x.size(i) > 0, name,
                "(): Expected input to have non-zero size for non-batch dimensions, but input has sizes ", x.sizes(),
                " with dimension ", i, " being empty");
  TORCH_CHECK(static_cast<int64_t>(osz.size()) == nd, name, "(): internal error: output_size.size() must be ", nd);
  auto shape = lead_then(x, nd, osz);
  for (int64_t s : osz)
    TORCH_CHECK(s >= 0, "Trying to create tensor with negative dimension ", s, ": ", at::IntArrayRef(shape));
}

std::tuple<at::Tensor, at::Tensor> amax_forward(const char* name, const at::Tensor& self, at::IntArrayRef osz, int nd,
                                                const std::function<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&)>& cpu) {
  amax_checks(name, self, osz, nd);
  if (!float_type(self.scalar_type())) {
    note_cpu_fallback(std::string("aten::") + name);
    auto r = cpu(self.cpu());
    return {std::get<0>(r).to(self.device()), std::get<1>(r).to(self.device())};
  }
  at::ScalarType kdt = kernel_type(self.scalar_type());
  auto out4 = planes4(self, nd, osz);
  at::Tensor y = at::empty(out4, self.options().dtype(kdt));
  at::Tensor ix = at::empty(out4, self.options().dtype(at::kLong));
  if (y.numel() > 0) {
    at::Tensor x = self.to(kdt).contiguous().view(planes4(self, nd, self.sizes().slice(self.dim() - nd)));
    hpu_node_t n = make_node(HPU_OP_ADAPTIVE_MAX_POOL);
    n.compute_dtype = to_hpu_dtype(kdt);
    add_in(n, x);
    add_out(n, y);
    add_out(n, ix);
    launch(dev_of(self), n);
  }
  auto shape = lead_then(self, nd, osz);
  y = y.view(shape).to(self.scalar_type());
  ix = ix.view(shape);
  // The CPU's 3-d op always returns contiguous results.
  if (nd == 2) return {like_cpu(y, self, nd), like_cpu(ix, self, nd)};
  return {y, ix};
}

at::Tensor amax_backward(const char* name, const at::Tensor& grad, const at::Tensor& self, const at::Tensor& indices,
                         int nd, const std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>& cpu) {
  check_same_device(name, {&grad, &self, &indices});
  TORCH_CHECK(grad.dim() == nd + 1 || grad.dim() == nd + 2, name, "(): Expected ", nd + 1, "D or ", nd + 2,
              "D grad_output, but got: ", grad.sizes());
  TORCH_CHECK(self.dtype() == grad.dtype(), "expected dtype ", self.dtype(), " for `grad_output` but got dtype ",
              grad.dtype());
  if (!float_type(self.scalar_type())) {
    note_cpu_fallback(std::string("aten::") + name);
    return cpu(grad.cpu(), self.cpu(), indices.cpu()).to(self.device());
  }
  TORCH_CHECK(indices.scalar_type() == at::kLong, "expected scalar type Long but found ", indices.scalar_type());
  TORCH_CHECK(grad.sizes() == indices.sizes(), "expected sizes ", indices.sizes(), " for `grad_output` but got sizes ",
              grad.sizes());
  // The CPU reads each plane of grad_output against the same plane of the
  // input without checking; here a mismatch is an error.
  TORCH_CHECK(grad.dim() == self.dim() && grad.sizes().slice(0, grad.dim() - nd) == self.sizes().slice(0, self.dim() - nd),
              name, ": grad_output ", grad.sizes(), " does not match input ", self.sizes());
  at::ScalarType kdt = kernel_type(self.scalar_type());
  at::IntArrayRef spatial = self.sizes().slice(self.dim() - nd);
  at::Tensor dx = at::empty(planes4(self, nd, spatial), self.options().dtype(kdt));
  if (dx.numel() > 0) {
    auto out4 = planes4(grad, nd, grad.sizes().slice(grad.dim() - nd));
    at::Tensor g = grad.to(kdt).contiguous().view(out4);
    at::Tensor ix = indices.contiguous().view(out4);
    hpu_node_t n = make_node(HPU_OP_ADAPTIVE_MAX_POOL_BACKWARD);
    n.compute_dtype = to_hpu_dtype(kdt);
    // bf16 / fp16 partial sums are rounded to that dtype, as the CPU keeps them
    n.params.nn.i[0] = to_hpu_dtype(self.scalar_type());
    add_in(n, g);
    add_in(n, ix);
    add_out(n, dx);
    launch(dev_of(self), n);
  }
  return like_cpu(dx.view(self.sizes()).to(self.scalar_type()), self, nd);
}

std::tuple<at::Tensor, at::Tensor> hpu_adaptive_max_pool2d(const at::Tensor& self, at::IntArrayRef osz) {
  return amax_forward("adaptive_max_pool2d", self, osz, 2,
                      [&](const at::Tensor& c) { return at::adaptive_max_pool2d(c, osz); });
}
std::tuple<at::Tensor, at::Tensor> hpu_adaptive_max_pool3d(const at::Tensor& self, at::IntArrayRef osz) {
  return amax_forward("adaptive_max_pool3d", self, osz, 3,
                      [&](const at::Tensor& c) { return at::adaptive_max_pool3d(c, osz); });
}
std::tuple<at::Tensor&, at::Tensor&> hpu_adaptive_max_pool2d_out(const at::Tensor& self, at::IntArrayRef osz,
                                                                 at::Tensor& out, at::Tensor& indices) {
  auto r = hpu_adaptive_max_pool2d(self, osz);
  into_out(std::get<0>(r), out);
  into_out(std::get<1>(r), indices);
  return {out, indices};
}
std::tuple<at::Tensor&, at::Tensor&> hpu_adaptive_max_pool3d_out(const at::Tensor& self, at::IntArrayRef osz,
                                                                 at::Tensor& out, at::Tensor& indices) {
  auto r = hpu_adaptive_max_pool3d(self, osz);
  into_out(std::get<0>(r), out);
  into_out(std::get<1>(r), indices);
  return {out, indices};
}
at::Tensor hpu_adaptive_max_pool2d_bw(const at::Tensor& g, const at::Tensor& self, const at::Tensor& ix) {
  return amax_backward("adaptive_max_pool2d_backward", g, self, ix, 2,
                       [](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
                         return at::adaptive_max_pool2d_backward(a, b, c);
                       });
}
at::Tensor hpu_adaptive_max_pool3d_bw(const at::Tensor& g, const at::Tensor& self, const at::Tensor& ix) {
  return amax_backward("adaptive_max_pool3d_backward", g, self, ix, 3,
                       [](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
                         return at::adaptive_max_pool3d_backward(a, b, c);
                       });
}
at::Tensor& hpu_adaptive_max_pool2d_bw_out(const at::Tensor& g, const at::Tensor& self, const at::Tensor& ix,
                                           at::Tensor& gi) {
  return into_out(hpu_adaptive_max_pool2d_bw(g, self, ix), gi);
}
at::Tensor& hpu_adaptive_max_pool3d_bw_out(const at::Tensor& g, const at::Tensor& self, const at::Tensor& ix,
                                           at::Tensor& gi) {
  return into_out(hpu_adaptive_max_pool3d_bw(g, self, ix), gi);
}

// ---- max unpooling -------------------------------------------------------

// Index values are card data: the kernel checks them, and a bad one fails
// the node with PyTorch's message, raised at the next synchronize.
at::Tensor unpool(const char* name, const at::Tensor& self, const at::Tensor& indices, at::IntArrayRef osz, int nd,
                  const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& cpu) {
  check_same_device(name, {&self, &indices});
  auto shape = lead_then(self, nd, osz);
  for (int64_t s : osz)
    TORCH_CHECK(s >= 0, "Trying to create tensor with negative dimension ", s, ": ", at::IntArrayRef(shape));
  if (!float_type(self.scalar_type())) {
    note_cpu_fallback(std::string("aten::") + name);
    return cpu(self.cpu(), indices.cpu()).to(self.device());
  }
  at::Tensor y = at::empty(planes4(self, nd, osz), self.options());
  if (y.numel() > 0) {
    auto in4 = planes4(self, nd, self.sizes().slice(self.dim() - nd));
    hpu_node_t n = make_node(HPU_OP_MAX_UNPOOL);
    n.compute_dtype = to_hpu_dtype(self.scalar_type());
    n.params.nn.i[0] = nd;
    // named: a node holds no reference, so its operands must outlive launch()
    at::Tensor x = self.contiguous().view(in4), ix = indices.contiguous().view(in4);
    add_in(n, x);
    add_in(n, ix);
    add_out(n, y);
    launch(dev_of(self), n);
  }
  y = y.view(shape);
  // The CPU's 3-d op always returns a contiguous result.
  return nd == 2 ? like_cpu(y, self, nd) : y;
}

void unpool_common_checks(const char* fn, const at::Tensor& self, const at::Tensor& indices) {
  TORCH_CHECK(self.sizes() == indices.sizes(),
              "Expected shape of indices to be same as that of the input tensor (", self.sizes(),
              ") but got indices tensor with shape: ", indices.sizes());
  for (int64_t i = 1; i < self.dim(); i++)
    TORCH_CHECK(self.size(i) > 0, fn, ": Expected input to have non-zero size for non-batch dimensions, but got ",
                self.sizes(), " with dimension ", i, " being empty.");
}

#define SIZES(x) C10_AS_INTARRAYREF_SLOW(x)

// The checks of PyTorch's max_unpooling2d_forward_out_cpu, same messages
// and order.
at::Tensor hpu_max_unpool2d(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef output_size) {
  at::IntArrayRef osz = SIZES(output_size);
  TORCH_CHECK(indices.scalar_type() == at::kLong, "elements in indices should be type int64 but got: ",
              indices.scalar_type());
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4,
              "Input to max_unpooling2d should be a 3d or 4d Tensor, but got a tensor with ", self.dim(),
              " dimensions.");
  TORCH_CHECK(osz.size() == 2, "There should be exactly two elements (height, width) in output_size, but got ",
              osz.size(), " elements.");
  unpool_common_checks("max_unpooling2d_forward_out_cpu()", self, indices);
  return unpool("max_unpool2d", self, indices, osz, 2,
                [&](const at::Tensor& a, const at::Tensor& b) { return at::max_unpool2d(a, b, osz); });
}

// The checks of PyTorch's max_unpooling3d_shape_check, same messages and
// order (stride and padding are only checked, as there).
at::Tensor hpu_max_unpool3d(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef output_size,
                            at::IntArrayRef stride, at::IntArrayRef padding) {
  at::IntArrayRef osz = SIZES(output_size);
  TORCH_CHECK(indices.scalar_type() == at::kLong, "elements in indices should be type int64");
  TORCH_CHECK(self.dim() == 4 || self.dim() == 5,
              "Input to max_unpooling3d should be a 4d or 5d Tensor, but got a tensor with ", self.dim(),
              " dimensions.");
  TORCH_CHECK(osz.size() == 3,
              "There should be exactly three elements (depth, height, width) in output_size, but got ", osz.size(),
              " elements.");
  TORCH_CHECK(stride.size() == 3, "There should be exactly three elements (depth, height, width) in stride, but got: ",
              stride.size(), " elements.");
  TORCH_CHECK(padding.size() == 3,
              "There should be exactly three elements (depth, height, width) in padding, but got: ", padding.size(),
              " elements.");
  unpool_common_checks("max_unpooling3d_forward_out_cpu()", self, indices);
  TORCH_CHECK(stride[0] > 0 && stride[1] > 0 && stride[2] > 0, "strides should be greater than zero, but got stride: ",
              stride);
  return unpool("max_unpool3d", self, indices, osz, 3, [&](const at::Tensor& a, const at::Tensor& b) {
    return at::max_unpool3d(a, b, osz, stride, padding);
  });
}

at::Tensor& hpu_max_unpool2d_out(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef osz,
                                 at::Tensor& out) {
  return into_out(hpu_max_unpool2d(self, indices, osz), out);
}
at::Tensor& hpu_max_unpool3d_out(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef osz,
                                 at::IntArrayRef stride, at::IntArrayRef padding, at::Tensor& out) {
  return into_out(hpu_max_unpool3d(self, indices, osz, stride, padding), out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("adaptive_max_pool2d", TORCH_FN(hpu_adaptive_max_pool2d));
  m.impl("adaptive_max_pool3d", TORCH_FN(hpu_adaptive_max_pool3d));
  m.impl("adaptive_max_pool2d.out", TORCH_FN(hpu_adaptive_max_pool2d_out));
  m.impl("adaptive_max_pool3d.out", TORCH_FN(hpu_adaptive_max_pool3d_out));
  m.impl("adaptive_max_pool2d_backward", TORCH_FN(hpu_adaptive_max_pool2d_bw));
  m.impl("adaptive_max_pool3d_backward", TORCH_FN(hpu_adaptive_max_pool3d_bw));
  m.impl("adaptive_max_pool2d_backward.grad_input", TORCH_FN(hpu_adaptive_max_pool2d_bw_out));
  m.impl("adaptive_max_pool3d_backward.grad_input", TORCH_FN(hpu_adaptive_max_pool3d_bw_out));
  m.impl("max_unpool2d", TORCH_FN(hpu_max_unpool2d));
  m.impl("max_unpool3d", TORCH_FN(hpu_max_unpool3d));
  m.impl("max_unpool2d.out", TORCH_FN(hpu_max_unpool2d_out));
  m.impl("max_unpool3d.out", TORCH_FN(hpu_max_unpool3d_out));
}

}  // namespace habana_torch
