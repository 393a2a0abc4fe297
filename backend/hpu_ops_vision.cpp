// The vision ops (csrc/include/hpu/ops_vision.def) as aten ops: upsampling
// (nearest, nearest-exact, linear / bilinear / trilinear, 1-d to 3-d),
// adaptive average pooling (2-d, 3-d), reflection and replication padding
// (1-d to 3-d), each with its backward. Inputs are viewed as planes
// [P, D, H, W]; channels_last inputs are made contiguous here and the
// result is given the layout the CPU op returns. Dtypes: the gathers run
// every dtype the CPU op accepts; arithmetic runs in float32 (bfloat16 /
// float16 widened on the card, rounded once at the end) or float64 (the
// kernels' double copies). Dtypes the CPU op rejects run PyTorch's CPU
// kernel (a counted CPU fallback), so its error reaches the user unchanged.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "hpu_common.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace {

using OptD = std::optional<double>;

bool widenable(at::ScalarType t) { return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf; }
// The arithmetic kernels' dtypes: float32 (and what widens to it) and float64.
bool computable(at::ScalarType t) { return widenable(t) || t == at::kDouble; }
at::ScalarType kernel_type(at::ScalarType t) { return t == at::kDouble ? at::kDouble : at::kFloat; }

// The layout of the CPU op's result for input x (suggest_memory_format of
// a batched input; a batchless one stays contiguous).
at::Tensor in_layout_of(const at::Tensor& r, const at::Tensor& x, int nd) {
  auto mf = x.suggest_memory_format();
  if (mf == at::MemoryFormat::Contiguous || r.dim() != x.dim() || x.dim() != nd + 2) return r;
  return r.contiguous(mf);
}

// Runs `op` on x (its last nd dims spatial) into a tensor of x's leading
// dims followed by `out_spatial`, in dtype `kdt` (x is converted).
at::Tensor run_planes(hpu_op_t op, const at::Tensor& x, int nd, at::IntArrayRef out_spatial, at::ScalarType kdt,
                      const hpu_nn_params_t& params, at::IntArrayRef out_lead = {}) {
  int64_t lead = x.dim() - nd;
  std::vector<int64_t> in4{1, 1, 1, 1}, out4{1, 1, 1, 1};
  int64_t planes = 1;
  for (int64_t d = 0; d < lead; d++) planes *= x.size(d);
  in4[0] = out4[0] = planes;
  for (int d = 0; d < nd; d++) {
    in4[4 - nd + d] = x.size(lead + d);
    out4[4 - nd + d] = out_spatial[d];
  }
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().begin() + lead);
  if (!out_lead.empty()) shape.assign(out_lead.begin(), out_lead.end());
  shape.insert(shape.end(), out_spatial.begin(), out_spatial.end());
  at::Tensor y = at::empty(out4, x.options().dtype(kdt));
  if (y.numel() > 0 || (planes > 0 && x.numel() > 0)) {
    at::Tensor xin = x.to(kdt).contiguous().view(in4);
    hpu_node_t n{};
    n.op = op;
    n.compute_dtype = kdt == at::kDouble ? HPU_FLOAT64 : HPU_FLOAT32;
    n.params.nn = params;
    n.num_inputs = 1;
    n.inputs[0] = to_desc(xin);
    n.num_outputs = 1;
    n.outputs[0] = to_desc(y);
    launch(x.device().index(), n);
  }
  return y.view(shape);
}

// ---- upsampling ----------------------------------------------------------

// The checks of PyTorch's upsample_Nd_common_check (UpSample.h) and its
// meta functions, same messages; returns the output shape.
std::vector<int64_t> up_shape(const at::Tensor& x, at::IntArrayRef osz, int nd) {
  TORCH_CHECK(static_cast<int64_t>(osz.size()) == nd, "It is expected output_size equals to ", nd, ", but got size ",
              osz.size());
  TORCH_CHECK(x.dim() == nd + 2, "It is expected input_size equals to ", nd + 2, ", but got size ", x.dim());
  bool ok = true;
  for (int d = 0; d < nd; d++) ok = ok && x.size(2 + d) > 0 && osz[d] > 0;
  TORCH_CHECK(ok, "Input and output sizes should be greater than 0, but got input ",
              x.sizes().slice(2), " output ", osz);
  int64_t rest = 1;
  for (int64_t d = 1; d < x.dim(); d++) rest *= x.size(d);
  TORCH_CHECK(x.numel() != 0 || rest != 0, "Non-empty ", nd + 2, "D data tensor expected but got a tensor with sizes ",
              x.sizes());
  std::vector<int64_t> shape{x.size(0), x.size(1)};
  shape.insert(shape.end(), osz.begin(), osz.end());
  return shape;
}

hpu_nn_params_t up_params(hpu_upsample_mode_t mode, bool align, int nd, std::initializer_list<OptD> scales) {
  hpu_nn_params_t p{};
  p.i[0] = mode;
  p.i[1] = align;
  p.i[2] = nd;
  int k = 3 - nd;
  for (const OptD& s : scales) p.s[k++] = hpu_scalar_float(s.has_value() ? *s : 0.0);
  return p;
}

bool up_native(hpu_upsample_mode_t mode, at::ScalarType t) {
  if (mode != HPU_UPSAMPLE_LINEAR && (t == at::kByte)) return true;  // a gather: exact
  return computable(t);
}

at::Tensor up_forward(const char* name, const at::Tensor& self, int nd, const std::vector<int64_t>& shape,
                      hpu_upsample_mode_t mode, bool align, std::initializer_list<OptD> scales,
                      const std::function<at::Tensor(const at::Tensor&)>& cpu) {
  if (!up_native(mode, self.scalar_type())) {
    note_cpu_fallback(std::string("aten::") + name);
    return cpu(self.cpu()).to(self.device());
  }
  at::ScalarType kdt = mode == HPU_UPSAMPLE_LINEAR ? kernel_type(self.scalar_type()) : self.scalar_type();
  at::IntArrayRef spatial(shape.data() + shape.size() - nd, nd);
  hpu_nn_params_t p = up_params(mode, align, nd, scales);
  // The CPU's trilinear kernel keeps its weights in a bf16 / fp16 input's
  // dtype; its linear and bilinear ones keep them in float (checked
  // against the CPU's bf16 results).
  if (nd == 3) p.i[3] = to_hpu_dtype(self.scalar_type());
  at::Tensor y = run_planes(HPU_OP_UPSAMPLE, self, nd, spatial, kdt, p);
  return in_layout_of(y.to(self.scalar_type()), self, nd);
}

at::Tensor up_backward(const char* name, const at::Tensor& grad, at::IntArrayRef output_size,
                       at::IntArrayRef input_size, int nd, hpu_upsample_mode_t mode, bool align,
                       std::initializer_list<OptD> scales, const std::function<at::Tensor(const at::Tensor&)>& cpu) {
  TORCH_CHECK(static_cast<int64_t>(output_size.size()) == nd, "It is expected output_size equals to ", nd,
              ", but got size ", output_size.size());
  TORCH_CHECK(static_cast<int64_t>(input_size.size()) == nd + 2, "It is expected input_size equals to ", nd + 2,
              ", but got size ", input_size.size());
  TORCH_CHECK(grad.dim() == nd + 2, "Expected grad_output to be a tensor of dimension ", nd + 2,
              " but got: dimension ", grad.dim());
  for (int d = 0; d < nd + 2; d++) {
    int64_t want = d < 2 ? input_size[d] : output_size[d - 2];
    TORCH_CHECK(grad.size(d) == want, "Expected grad_output to have the same shape as output; output.size(", d,
                ") = ", want, " but got grad_output.size(", d, ") = ", grad.size(d));
  }
  if (!computable(grad.scalar_type())) {
    note_cpu_fallback(std::string("aten::") + name);
    return cpu(grad.cpu()).to(grad.device());
  }
  for (int d = 0; d < nd; d++)
    TORCH_CHECK(input_size[2 + d] > 0 && output_size[d] > 0, "Input and output sizes should be greater than 0");
  at::Tensor g = grad.contiguous();
  at::Tensor dx = run_planes(HPU_OP_UPSAMPLE_BACKWARD, g, nd, input_size.slice(2), kernel_type(g.scalar_type()),
                             up_params(mode, align, nd, scales));
  return in_layout_of(dx.to(grad.scalar_type()), grad, nd);
}

#define SIZES(x) C10_AS_INTARRAYREF_SLOW(x)

at::Tensor hpu_upsample_nearest1d(const at::Tensor& self, c10::SymIntArrayRef osz, OptD s) {
  auto shape = up_shape(self, SIZES(osz), 1);
  return up_forward("upsample_nearest1d", self, 1, shape, HPU_UPSAMPLE_NEAREST, false, {s},
                    [&](const at::Tensor& c) { return at::upsample_nearest1d(c, SIZES(osz), s); });
}
at::Tensor hpu_upsample_nearest2d(const at::Tensor& self, c10::SymIntArrayRef osz, OptD sh, OptD sw) {
  auto shape = up_shape(self, SIZES(osz), 2);
  return up_forward("upsample_nearest2d", self, 2, shape, HPU_UPSAMPLE_NEAREST, false, {sh, sw},
                    [&](const at::Tensor& c) { return at::upsample_nearest2d(c, SIZES(osz), sh, sw); });
}
at::Tensor hpu_upsample_nearest3d(const at::Tensor& self, c10::SymIntArrayRef osz, OptD sd, OptD sh, OptD sw) {
  auto shape =
      up_shape(self, SIZES(osz), 3);
  return up_forward("upsample_nearest3d", self, 3, shape, HPU_UPSAMPLE_NEAREST, false, {sd, sh, sw},
                    [&](const at::Tensor& c) { return at::upsample_nearest3d(c, SIZES(osz), sd, sh, sw); });
}
at::Tensor hpu_upsample_nearest_exact1d(const at::Tensor& self, c10::SymIntArrayRef osz, OptD s) {
  auto shape = up_shape(self, SIZES(osz), 1);
  return up_forward("_upsample_nearest_exact1d", self, 1, shape, HPU_UPSAMPLE_NEAREST_EXACT, false, {s},
                    [&](const at::Tensor& c) { return at::_upsample_nearest_exact1d(c, SIZES(osz), s); });
}
at::Tensor hpu_upsample_nearest_exact2d(const at::Tensor& self, c10::SymIntArrayRef osz, OptD sh, OptD sw) {
  auto shape =
      up_shape(self, SIZES(osz), 2);
  return up_forward("_upsample_nearest_exact2d", self, 2, shape, HPU_UPSAMPLE_NEAREST_EXACT, false, {sh, sw},
                    [&](const at::Tensor& c) { return at::_upsample_nearest_exact2d(c, SIZES(osz), sh, sw); });
}
at::Tensor hpu_upsample_nearest_exact3d(const at::Tensor& self, c10::SymIntArrayRef osz, OptD sd, OptD sh, OptD sw) {
  auto shape = up_shape(self, SIZES(osz), 3);
  return up_forward("_upsample_nearest_exact3d", self, 3, shape, HPU_UPSAMPLE_NEAREST_EXACT, false, {sd, sh, sw},
                    [&](const at::Tensor& c) { return at::_upsample_nearest_exact3d(c, SIZES(osz), sd, sh, sw); });
}
at::Tensor hpu_upsample_linear1d(const at::Tensor& self, c10::SymIntArrayRef osz, bool ac, OptD s) {
  auto shape = up_shape(self, SIZES(osz), 1);
  return up_forward("upsample_linear1d", self, 1, shape, HPU_UPSAMPLE_LINEAR, ac, {s},
                    [&](const at::Tensor& c) { return at::upsample_linear1d(c, SIZES(osz), ac, s); });
}
at::Tensor hpu_upsample_bilinear2d(const at::Tensor& self, c10::SymIntArrayRef osz, bool ac, OptD sh, OptD sw) {
  auto shape =
      up_shape(self, SIZES(osz), 2);
  return up_forward("upsample_bilinear2d", self, 2, shape, HPU_UPSAMPLE_LINEAR, ac, {sh, sw},
                    [&](const at::Tensor& c) { return at::upsample_bilinear2d(c, SIZES(osz), ac, sh, sw); });
}
at::Tensor hpu_upsample_trilinear3d(const at::Tensor& self, c10::SymIntArrayRef osz, bool ac, OptD sd, OptD sh,
                                    OptD sw) {
  auto shape = up_shape(self, SIZES(osz), 3);
  return up_forward("upsample_trilinear3d", self, 3, shape, HPU_UPSAMPLE_LINEAR, ac, {sd, sh, sw},
                    [&](const at::Tensor& c) { return at::upsample_trilinear3d(c, SIZES(osz), ac, sd, sh, sw); });
}

// backwards
at::Tensor hpu_upsample_nearest1d_bw(const at::Tensor& g, c10::SymIntArrayRef o, c10::SymIntArrayRef i, OptD s) {
  return up_backward("upsample_nearest1d_backward", g, SIZES(o), SIZES(i), 1, HPU_UPSAMPLE_NEAREST, false, {s},
                     [&](const at::Tensor& c) { return at::upsample_nearest1d_backward(c, SIZES(o), SIZES(i), s); });
}
at::Tensor hpu_upsample_nearest2d_bw(const at::Tensor& g, c10::SymIntArrayRef o, c10::SymIntArrayRef i, OptD sh,
                                     OptD sw) {
  return up_backward(
      "upsample_nearest2d_backward", g, SIZES(o), SIZES(i), 2, HPU_UPSAMPLE_NEAREST, false, {sh, sw},
      [&](const at::Tensor& c) { return at::upsample_nearest2d_backward(c, SIZES(o), SIZES(i), sh, sw); });
}
at::Tensor hpu_upsample_nearest3d_bw(const at::Tensor& g, c10::SymIntArrayRef o, c10::SymIntArrayRef i, OptD sd,
                                     OptD sh, OptD sw) {
  return up_backward(
      "upsample_nearest3d_backward", g, SIZES(o), SIZES(i), 3, HPU_UPSAMPLE_NEAREST, false, {sd, sh, sw},
      [&](const at::Tensor& c) { return at::upsample_nearest3d_backward(c, SIZES(o), SIZES(i), sd, sh, sw); });
}
at::Tensor hpu_upsample_nearest_exact1d_bw(const at::Tensor& g, c10::SymIntArrayRef o, c10::SymIntArrayRef i,
                                           OptD s) {
  return up_backward(
      "_upsample_nearest_exact1d_backward", g, SIZES(o), SIZES(i), 1, HPU_UPSAMPLE_NEAREST_EXACT, false, {s},
      [&](const at::Tensor& c) { return at::_upsample_nearest_exact1d_backward(c, SIZES(o), SIZES(i), s); });
}
at::Tensor hpu_upsample_nearest_exact2d_bw(const at::Tensor& g, c10::SymIntArrayRef o, c10::SymIntArrayRef i,
                                           OptD sh, OptD sw) {
  return up_backward(
      "_upsample_nearest_exact2d_backward", g, SIZES(o), SIZES(i), 2, HPU_UPSAMPLE_NEAREST_EXACT, false, {sh, sw},
      [&](const at::Tensor& c) { return at::_upsample_nearest_exact2d_backward(c, SIZES(o), SIZES(i), sh, sw); });
}
at::Tensor hpu_upsample_nearest_exact3d_bw(const at::Tensor& g, c10::SymIntArrayRef o, c10::SymIntArrayRef i,
                                           OptD sd, OptD sh, OptD sw) {
  return up_backward("_upsample_nearest_exact3d_backward", g, SIZES(o), SIZES(i), 3, HPU_UPSAMPLE_NEAREST_EXACT,
                     false, {sd, sh, sw}, [&](const at::Tensor& c) {
                       return at::_upsample_nearest_exact3d_backward(c, SIZES(o), SIZES(i), sd, sh, sw);
                     });
}
at::Tensor hpu_upsample_linear1d_bw(const at::Tensor& g, c10::SymIntArrayRef o, c10::SymIntArrayRef i, bool ac,
                                    OptD s) {
  return up_backward(
      "upsample_linear1d_backward", g, SIZES(o), SIZES(i), 1, HPU_UPSAMPLE_LINEAR, ac, {s},
      [&](const at::Tensor& c) { return at::upsample_linear1d_backward(c, SIZES(o), SIZES(i), ac, s); });
}
at::Tensor hpu_upsample_bilinear2d_bw(const at::Tensor& g, c10::SymIntArrayRef o, c10::SymIntArrayRef i, bool ac,
                                      OptD sh, OptD sw) {
  return up_backward(
      "upsample_bilinear2d_backward", g, SIZES(o), SIZES(i), 2, HPU_UPSAMPLE_LINEAR, ac, {sh, sw},
      [&](const at::Tensor& c) { return at::upsample_bilinear2d_backward(c, SIZES(o), SIZES(i), ac, sh, sw); });
}
at::Tensor hpu_upsample_trilinear3d_bw(const at::Tensor& g, c10::SymIntArrayRef o, c10::SymIntArrayRef i, bool ac,
                                       OptD sd, OptD sh, OptD sw) {
  return up_backward(
      "upsample_trilinear3d_backward", g, SIZES(o), SIZES(i), 3, HPU_UPSAMPLE_LINEAR, ac, {sd, sh, sw},
      [&](const at::Tensor& c) { return at::upsample_trilinear3d_backward(c, SIZES(o), SIZES(i), ac, sd, sh, sw); });
}

// ---- adaptive average pooling -------------------------------------------

void adaptive_checks(const char* name, const at::Tensor& x, at::IntArrayRef osz, int nd) {
  TORCH_CHECK(static_cast<int64_t>(osz.size()) == nd, name, ": output_size must be ", nd);
  for (int64_t i = 1; i < x.dim(); i++)
    TORCH_CHECK(x.size(i) > 0, name, "(): Expected input to have non-zero size for non-batch dimensions, but input has sizes ",
                x.sizes(), " with dimension ", i, " being empty");
  TORCH_CHECK(x.dim() == nd + 1 || x.dim() == nd + 2, name, "(): Expected ", nd + 1, "D or ", nd + 2,
              "D tensor, but got ", x.sizes());
  for (int64_t s : osz) TORCH_CHECK(s >= 0, name, ": elements of output_size must be greater than or equal to 0 but received ", osz);
}

at::Tensor adaptive_forward(const char* name, const at::Tensor& self, at::IntArrayRef osz, int nd,
                            const std::function<at::Tensor(const at::Tensor&)>& cpu) {
  adaptive_checks(name, self, osz, nd);
  if (!computable(self.scalar_type())) {
    note_cpu_fallback(std::string("aten::_") + name);
    return cpu(self.cpu()).to(self.device());
  }
  at::Tensor y =
      run_planes(HPU_OP_ADAPTIVE_AVG_POOL, self, nd, osz, kernel_type(self.scalar_type()), hpu_nn_params_t{});
  return in_layout_of(y.to(self.scalar_type()), self, nd);
}

at::Tensor adaptive_backward(const char* name, const at::Tensor& grad, const at::Tensor& self, int nd,
                             const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& cpu) {
  check_same_device(name, {&grad, &self});
  TORCH_CHECK(grad.dim() == self.dim(), name, ": grad_output and input must have the same number of dims, got ",
              grad.dim(), " and ", self.dim());
  for (int64_t d = 0; d < self.dim() - nd; d++)
    TORCH_CHECK(grad.size(d) == self.size(d), name, ": grad_output ", grad.sizes(), " does not match input ",
                self.sizes());
  if (!computable(self.scalar_type()) || grad.scalar_type() != self.scalar_type()) {
    note_cpu_fallback(std::string("aten::") + name);
    return cpu(grad.cpu(), self.cpu()).to(self.device());
  }
  at::IntArrayRef spatial = self.sizes().slice(self.dim() - nd);
  at::Tensor dx = run_planes(HPU_OP_ADAPTIVE_AVG_POOL_BACKWARD, grad, nd, spatial, kernel_type(self.scalar_type()),
                             hpu_nn_params_t{});
  return in_layout_of(dx.to(self.scalar_type()), self, nd);
}

at::Tensor hpu_adaptive_avg_pool2d(const at::Tensor& self, c10::SymIntArrayRef osz) {
  return adaptive_forward("adaptive_avg_pool2d", self, SIZES(osz), 2,
                          [&](const at::Tensor& c) { return at::_adaptive_avg_pool2d(c, SIZES(osz)); });
}
at::Tensor hpu_adaptive_avg_pool3d(const at::Tensor& self, c10::SymIntArrayRef osz) {
  return adaptive_forward("adaptive_avg_pool3d", self, SIZES(osz), 3,
                          [&](const at::Tensor& c) { return at::_adaptive_avg_pool3d(c, SIZES(osz)); });
}
at::Tensor& hpu_adaptive_avg_pool3d_out(const at::Tensor& self, c10::SymIntArrayRef osz, at::Tensor& out) {
  return into_out(hpu_adaptive_avg_pool3d(self, osz), out);
}
at::Tensor hpu_adaptive_avg_pool2d_bw(const at::Tensor& g, const at::Tensor& self) {
  return adaptive_backward("_adaptive_avg_pool2d_backward", g, self, 2, [](const at::Tensor& a, const at::Tensor& b) {
    return at::_adaptive_avg_pool2d_backward(a, b);
  });
}
at::Tensor hpu_adaptive_avg_pool3d_bw(const at::Tensor& g, const at::Tensor& self) {
  return adaptive_backward("_adaptive_avg_pool3d_backward", g, self, 3, [](const at::Tensor& a, const at::Tensor& b) {
    return at::_adaptive_avg_pool3d_backward(a, b);
  });
}

// ---- reflection / replication padding -----------------------------------

// The CPU op's checks (ReflectionPad.cpp, ReplicationPad.cpp, Padding.h),
// then the output's spatial sizes.
std::vector<int64_t> pad_sizes(const char* name, const at::Tensor& x, at::IntArrayRef pad, int nd, bool reflect) {
  TORCH_CHECK(static_cast<int64_t>(pad.size()) == 2 * nd, "padding size is expected to be ", 2 * nd,
              ", but got: ", pad.size());
  bool dims_ok = x.dim() == nd + 1 || x.dim() == nd + 2;
  for (int64_t i = x.dim() == nd + 2 ? 1 : 0; dims_ok && i < x.dim(); i++) dims_ok = x.size(i) != 0;
  TORCH_CHECK(dims_ok, "Expected ", nd + 1, "D or ", nd + 2,
              "D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for input, but got: ",
              x.sizes());
  std::vector<int64_t> out(nd);
  for (int d = 0; d < nd; d++) {
    // padding is given last dim first: (W_before, W_after, H_before, ...)
    int k = nd - 1 - d;
    int64_t before = pad[2 * k], after = pad[2 * k + 1], in = x.size(x.dim() - nd + d);
    if (reflect)
      TORCH_CHECK(before < in && after < in, "Argument #4: Padding size should be less than the corresponding input dimension, but got: padding (",
                  before, ", ", after, ") at dimension ", x.dim() - nd + d, " of input ", x.sizes());
    out[d] = in + before + after;
    TORCH_CHECK(out[d] >= 1, name, ": input (", x.sizes(), ") is too small. Calculated output size ", out[d],
                " at dimension ", x.dim() - nd + d);
  }
  return out;
}

hpu_nn_params_t pad_params(at::IntArrayRef pad, int nd, bool reflect) {
  hpu_nn_params_t p{};
  p.i[0] = reflect ? HPU_PAD_REFLECT : HPU_PAD_REPLICATE;
  for (int d = 0; d < nd; d++) p.sizes[3 - nd + d] = pad[2 * (nd - 1 - d)];
  return p;
}

bool pad_native(at::ScalarType t) { return t != at::kBool; }  // the CPU kernels take every dtype but bool

at::Tensor pad_forward(const char* name, const at::Tensor& self, at::IntArrayRef pad, int nd, bool reflect,
                       const std::function<at::Tensor(const at::Tensor&)>& cpu) {
  auto out = pad_sizes(name, self, pad, nd, reflect);
  if (!pad_native(self.scalar_type())) {
    note_cpu_fallback(std::string("aten::") + name);
    return cpu(self.cpu()).to(self.device());
  }
  at::Tensor y = run_planes(HPU_OP_SPATIAL_PAD, self, nd, out, self.scalar_type(), pad_params(pad, nd, reflect));
  return in_layout_of(y, self, nd);
}

at::Tensor pad_backward(const char* name, const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef pad, int nd,
                        bool reflect, const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& cpu) {
  check_same_device(name, {&grad, &self});
  auto out = pad_sizes(name, self, pad, nd, reflect);
  std::vector<int64_t> want(self.sizes().begin(), self.sizes().end() - nd);
  want.insert(want.end(), out.begin(), out.end());
  TORCH_CHECK(grad.sizes() == at::IntArrayRef(want), name, ": gradient ", grad.sizes(), " does not match the padded shape ",
              at::IntArrayRef(want));
  if (!computable(self.scalar_type()) || grad.scalar_type() != self.scalar_type()) {
    note_cpu_fallback(std::string("aten::") + name);
    return cpu(grad.cpu(), self.cpu()).to(self.device());
  }
  at::IntArrayRef spatial = self.sizes().slice(self.dim() - nd);
  at::Tensor dx = run_planes(HPU_OP_SPATIAL_PAD_BACKWARD, grad, nd, spatial, kernel_type(self.scalar_type()),
                             pad_params(pad, nd, reflect));
  return in_layout_of(dx.to(self.scalar_type()), self, nd);
}

#define PAD_OPS(fn, aten, nd, reflect)                                                                               \
  at::Tensor fn(const at::Tensor& self, c10::SymIntArrayRef pad) {                                                   \
    return pad_forward(#aten, self, SIZES(pad), nd, reflect,                                                         \
                       [&](const at::Tensor& c) { return at::aten(c, SIZES(pad)); });                                \
  }                                                                                                                  \
  at::Tensor& fn##_out(const at::Tensor& self, c10::SymIntArrayRef pad, at::Tensor& out) {                           \
    return into_out(fn(self, pad), out);                                                                             \
  }                                                                                                                  \
  at::Tensor fn##_bw(const at::Tensor& g, const at::Tensor& self, c10::SymIntArrayRef pad) {                         \
    return pad_backward(#aten "_backward", g, self, SIZES(pad), nd, reflect,                                         \
                        [&](const at::Tensor& a, const at::Tensor& b) { return at::aten##_backward(a, b, SIZES(pad)); }); \
  }                                                                                                                  \
  at::Tensor& fn##_bw_out(const at::Tensor& g, const at::Tensor& self, c10::SymIntArrayRef pad, at::Tensor& gi) {   \
    return into_out(fn##_bw(g, self, pad), gi);                                                                      \
  }

PAD_OPS(hpu_reflection_pad1d, reflection_pad1d, 1, true)
PAD_OPS(hpu_reflection_pad2d, reflection_pad2d, 2, true)
PAD_OPS(hpu_reflection_pad3d, reflection_pad3d, 3, true)
PAD_OPS(hpu_replication_pad1d, replication_pad1d, 1, false)
PAD_OPS(hpu_replication_pad2d, replication_pad2d, 2, false)
PAD_OPS(hpu_replication_pad3d, replication_pad3d, 3, false)

// out= forms of the upsampling ops
at::Tensor& hpu_upsample_nearest1d_out(const at::Tensor& s, c10::SymIntArrayRef o, OptD a, at::Tensor& out) {
  return into_out(hpu_upsample_nearest1d(s, o, a), out);
}
at::Tensor& hpu_upsample_nearest2d_out(const at::Tensor& s, c10::SymIntArrayRef o, OptD a, OptD b, at::Tensor& out) {
  return into_out(hpu_upsample_nearest2d(s, o, a, b), out);
}
at::Tensor& hpu_upsample_nearest3d_out(const at::Tensor& s, c10::SymIntArrayRef o, OptD a, OptD b, OptD c,
                                       at::Tensor& out) {
  return into_out(hpu_upsample_nearest3d(s, o, a, b, c), out);
}
at::Tensor& hpu_upsample_nearest_exact1d_out(const at::Tensor& s, c10::SymIntArrayRef o, OptD a, at::Tensor& out) {
  return into_out(hpu_upsample_nearest_exact1d(s, o, a), out);
}
at::Tensor& hpu_upsample_nearest_exact2d_out(const at::Tensor& s, c10::SymIntArrayRef o, OptD a, OptD b,
                                             at::Tensor& out) {
  return into_out(hpu_upsample_nearest_exact2d(s, o, a, b), out);
}
at::Tensor& hpu_upsample_nearest_exact3d_out(const at::Tensor& s, c10::SymIntArrayRef o, OptD a, OptD b, OptD c,
                                             at::Tensor& out) {
  return into_out(hpu_upsample_nearest_exact3d(s, o, a, b, c), out);
}
at::Tensor& hpu_upsample_linear1d_out(const at::Tensor& s, c10::SymIntArrayRef o, bool ac, OptD a, at::Tensor& out) {
  return into_out(hpu_upsample_linear1d(s, o, ac, a), out);
}
at::Tensor& hpu_upsample_bilinear2d_out(const at::Tensor& s, c10::SymIntArrayRef o, bool ac, OptD a, OptD b,
                                        at::Tensor& out) {
  return into_out(hpu_upsample_bilinear2d(s, o, ac, a, b), out);
}
at::Tensor& hpu_upsample_trilinear3d_out(const at::Tensor& s, c10::SymIntArrayRef o, bool ac, OptD a, OptD b, OptD c,
                                         at::Tensor& out) {
  return into_out(hpu_upsample_trilinear3d(s, o, ac, a, b, c), out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("upsample_nearest1d", TORCH_FN(hpu_upsample_nearest1d));
  m.impl("upsample_nearest2d", TORCH_FN(hpu_upsample_nearest2d));
  m.impl("upsample_nearest3d", TORCH_FN(hpu_upsample_nearest3d));
  m.impl("_upsample_nearest_exact1d", TORCH_FN(hpu_upsample_nearest_exact1d));
  m.impl("_upsample_nearest_exact2d", TORCH_FN(hpu_upsample_nearest_exact2d));
  m.impl("_upsample_nearest_exact3d", TORCH_FN(hpu_upsample_nearest_exact3d));
  m.impl("upsample_linear1d", TORCH_FN(hpu_upsample_linear1d));
  m.impl("upsample_bilinear2d", TORCH_FN(hpu_upsample_bilinear2d));
  m.impl("upsample_trilinear3d", TORCH_FN(hpu_upsample_trilinear3d));
  m.impl("upsample_nearest1d.out", TORCH_FN(hpu_upsample_nearest1d_out));
  m.impl("upsample_nearest2d.out", TORCH_FN(hpu_upsample_nearest2d_out));
  m.impl("upsample_nearest3d.out", TORCH_FN(hpu_upsample_nearest3d_out));
  m.impl("_upsample_nearest_exact1d.out", TORCH_FN(hpu_upsample_nearest_exact1d_out));
  m.impl("_upsample_nearest_exact2d.out", TORCH_FN(hpu_upsample_nearest_exact2d_out));
  m.impl("_upsample_nearest_exact3d.out", TORCH_FN(hpu_upsample_nearest_exact3d_out));
  m.impl("upsample_linear1d.out", TORCH_FN(hpu_upsample_linear1d_out));
  m.impl("upsample_bilinear2d.out", TORCH_FN(hpu_upsample_bilinear2d_out));
  m.impl("upsample_trilinear3d.out", TORCH_FN(hpu_upsample_trilinear3d_out));
  m.impl("upsample_nearest1d_backward", TORCH_FN(hpu_upsample_nearest1d_bw));
  m.impl("upsample_nearest2d_backward", TORCH_FN(hpu_upsample_nearest2d_bw));
  m.impl("upsample_nearest3d_backward", TORCH_FN(hpu_upsample_nearest3d_bw));
  m.impl("_upsample_nearest_exact1d_backward", TORCH_FN(hpu_upsample_nearest_exact1d_bw));
  m.impl("_upsample_nearest_exact2d_backward", TORCH_FN(hpu_upsample_nearest_exact2d_bw));
  m.impl("_upsample_nearest_exact3d_backward", TORCH_FN(hpu_upsample_nearest_exact3d_bw));
  m.impl("upsample_linear1d_backward", TORCH_FN(hpu_upsample_linear1d_bw));
  m.impl("upsample_bilinear2d_backward", TORCH_FN(hpu_upsample_bilinear2d_bw));
  m.impl("upsample_trilinear3d_backward", TORCH_FN(hpu_upsample_trilinear3d_bw));
  m.impl("_adaptive_avg_pool2d", TORCH_FN(hpu_adaptive_avg_pool2d));
  m.impl("_adaptive_avg_pool3d", TORCH_FN(hpu_adaptive_avg_pool3d));
  m.impl("adaptive_avg_pool3d.out", TORCH_FN(hpu_adaptive_avg_pool3d_out));
  m.impl("_adaptive_avg_pool2d_backward", TORCH_FN(hpu_adaptive_avg_pool2d_bw));
  m.impl("_adaptive_avg_pool3d_backward", TORCH_FN(hpu_adaptive_avg_pool3d_bw));
#define PAD_REG(name, fn)                                          \
  m.impl(#name, TORCH_FN(fn));                                     \
  m.impl(#name ".out", TORCH_FN(fn##_out));                        \
  m.impl(#name "_backward", TORCH_FN(fn##_bw));                    \
  m.impl(#name "_backward.grad_input", TORCH_FN(fn##_bw_out));
  PAD_REG(reflection_pad1d, hpu_reflection_pad1d)
  PAD_REG(reflection_pad2d, hpu_reflection_pad2d)
  PAD_REG(reflection_pad3d, hpu_reflection_pad3d)
  PAD_REG(replication_pad1d, hpu_replication_pad1d)
  PAD_REG(replication_pad2d, hpu_replication_pad2d)
  PAD_REG(replication_pad3d, hpu_replication_pad3d)
#undef PAD_REG
}

}  // namespace habana_torch
