// The pointwise tail and the random distributions: copysign, fmax / fmin,
// hypot, logaddexp(2), nextafter, heaviside, gcd / lcm, frac, signbit,
// frexp, angle, the shifts, round with decimals (kernels:
// csrc/kernels/pw_tail.c, op codes: hpu/ops_tailpw.def); floor_divide,
// native_dropout_backward, channel_shuffle and renorm, which are the card's
// div, mul, copy and norm as the CPU composes them; exponential_, cauchy_,
// geometric_, log_normal_ and normal with tensor parameters, from the
// card's uniform / normal draws (hpu generator) and a transform node;
// multinomial from those draws and card ops.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "hpu_generator.h"
#include "hpu_pointwise.h"

namespace habana_torch {
namespace {

using namespace pointwise;

// NotImplementedError as the CPU's dispatch macros raise it.
void check_kernel_dtype(bool ok, const char* cpu_kernel, at::ScalarType t) {
  TORCH_CHECK_NOT_IMPLEMENTED(ok, "\"", cpu_kernel, "\" not implemented for '", t, "'");
}

bool is_float(at::ScalarType t) { return at::isFloatingType(t); }
bool is_int(at::ScalarType t) { return at::isIntegralType(t, /*includeBool=*/false); }

// The result dtype of a binary op and its dtype check, per op.
at::ScalarType binary_type(hpu_op_t op, const at::Tensor& a, const at::Tensor& b) {
  auto t = result_of({a, b});
  switch (op) {
    case HPU_OP_COPYSIGN: return float_type(t);  // integers promote, as the CPU
    case HPU_OP_HYPOT: check_kernel_dtype(is_float(t), "hypot_cpu", t); break;
    case HPU_OP_LOGADDEXP: check_kernel_dtype(is_float(t), "logaddexp_cpu", t); break;
    case HPU_OP_LOGADDEXP2: check_kernel_dtype(is_float(t), "logaddexp2_cpu", t); break;
    case HPU_OP_NEXTAFTER: check_kernel_dtype(is_float(t), "nextafter_cpu", t); break;
    case HPU_OP_GCD: check_kernel_dtype(is_int(t), "gcd_cpu", t); break;
    case HPU_OP_LCM: check_kernel_dtype(is_int(t), "lcm_cpu", t); break;
    case HPU_OP_SHIFT_LEFT: check_kernel_dtype(is_int(t), "lshift_cpu", t); break;
    case HPU_OP_SHIFT_RIGHT: check_kernel_dtype(is_int(t), "rshift_cpu", t); break;
    case HPU_OP_HEAVISIDE:
      TORCH_CHECK(a.scalar_type() == b.scalar_type(),
                  "heaviside is not yet implemented for tensors with different dtypes.");
      break;
    default: break;
  }
  return t;
}

template <hpu_op_t OP>
at::Tensor bin(const at::Tensor& a, const at::Tensor& b) {
  auto t = binary_type(OP, a, b);
  return pw(hpu_op_name(OP), OP, {a, b}, t, t);
}
template <hpu_op_t OP>
at::Tensor& bin_(at::Tensor& a, const at::Tensor& b) {
  auto t = binary_type(OP, a, b);
  return pw_into(hpu_op_name(OP), OP, a, true, {a, b}, t, t);
}
template <hpu_op_t OP>
at::Tensor& bin_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  auto t = binary_type(OP, a, b);
  return pw_into(hpu_op_name(OP), OP, out, false, {a, b}, t, t);
}

// Unary ------------------------------------------------------------------------

at::Tensor frac(const at::Tensor& self) {
  auto t = self.scalar_type();
  check_kernel_dtype(is_float(t), "frac_cpu", t);
  return pw("frac", HPU_OP_FRAC, {self}, t, t);
}
at::Tensor& frac_(at::Tensor& self) {
  auto t = self.scalar_type();
  check_kernel_dtype(is_float(t), "frac_cpu", t);
  return pw_into("frac_", HPU_OP_FRAC, self, true, {self}, t, t);
}
at::Tensor& frac_out(const at::Tensor& self, at::Tensor& out) {
  auto t = self.scalar_type();
  check_kernel_dtype(is_float(t), "frac_cpu", t);
  return pw_into("frac", HPU_OP_FRAC, out, false, {self}, t, t);
}

// angle of a real tensor: 0 or pi (NaN stays); integers give the default float.
at::Tensor angle(const at::Tensor& self) {
  auto t = float_type(self.scalar_type());
  return pw("angle", HPU_OP_ANGLE, {self}, t, t);
}
at::Tensor& angle_out(const at::Tensor& self, at::Tensor& out) {
  auto t = float_type(self.scalar_type());
  return pw_into("angle", HPU_OP_ANGLE, out, false, {self}, t, t);
}

Params decimals_param(int64_t decimals) {
  Params p;
  p.i[0] = decimals;
  return p;
}
at::Tensor round_decimals(const at::Tensor& self, int64_t decimals) {
  auto t = self.scalar_type();
  check_kernel_dtype(is_float(t), "round_cpu", t);
  return pw("round", HPU_OP_ROUND_DECIMALS, {self}, t, t, decimals_param(decimals));
}
at::Tensor& round_decimals_(at::Tensor& self, int64_t decimals) {
  auto t = self.scalar_type();
  check_kernel_dtype(is_float(t), "round_cpu", t);
  return pw_into("round_", HPU_OP_ROUND_DECIMALS, self, true, {self}, t, t, decimals_param(decimals));
}
at::Tensor& round_decimals_out(const at::Tensor& self, int64_t decimals, at::Tensor& out) {
  auto t = self.scalar_type();
  check_kernel_dtype(is_float(t), "round_cpu", t);
  return pw_into("round", HPU_OP_ROUND_DECIMALS, out, false, {self}, t, t, decimals_param(decimals));
}

at::Tensor signbit(const at::Tensor& self) {
  return pw("signbit", HPU_OP_SIGNBIT, {self}, at::kBool, self.scalar_type());
}
at::Tensor& signbit_out(const at::Tensor& self, at::Tensor& out) {
  return pw_into("signbit", HPU_OP_SIGNBIT, out, false, {self}, at::kBool, self.scalar_type());
}

std::tuple<at::Tensor&, at::Tensor&> frexp_out(const at::Tensor& self, at::Tensor& mantissa,
                                               at::Tensor& exponent) {
  auto t = self.scalar_type();
  TORCH_CHECK(is_float(t), "torch.frexp() only supports floating-point dtypes");
  TORCH_CHECK(mantissa.scalar_type() == t, "torch.frexp() expects mantissa to have dtype ", t,
              " but got ", mantissa.scalar_type());
  TORCH_CHECK(exponent.scalar_type() == at::kInt,
              "torch.frexp() expects exponent to have int dtype but got ", exponent.scalar_type());
  check_devices("frexp", {self}, &mantissa);
  check_devices("frexp", {self}, &exponent);
  at::native::resize_output(mantissa, self.sizes());
  at::native::resize_output(exponent, self.sizes());
  if (self.numel() == 0) return std::forward_as_tuple(mantissa, exponent);
  hpu_node_t node;
  init_node(&node, HPU_OP_FREXP);
  node.num_outputs = 2;
  fill_desc(&node.outputs[0], mantissa);
  fill_desc(&node.outputs[1], exponent);
  node.compute_dtype = to_hpu_dtype(t);
  if (is_cpu_scalar(self)) {
    node.params.pointwise.scalar_operands = 1;
    node.params.pointwise.operand[0] = to_hpu_scalar(self.item());
  } else {
    node.num_inputs = 1;
    fill_desc(&node.inputs[0], self);
  }
  launch(mantissa.device().index(), node);
  return std::forward_as_tuple(mantissa, exponent);
}
std::tuple<at::Tensor, at::Tensor> frexp(const at::Tensor& self) {
  TORCH_CHECK(is_float(self.scalar_type()), "torch.frexp() only supports floating-point dtypes");
  at::Tensor m = new_hpu_tensor(self.sizes(), self.scalar_type(), self.device().index());
  at::Tensor e = new_hpu_tensor(self.sizes(), at::kInt, self.device().index());
  frexp_out(self, m, e);
  return std::make_tuple(m, e);
}

// The CPU's composites, on the card ------------------------------------------------

void check_floor_divide(const at::Tensor& a, const at::Tensor& b) {
  auto t = result_of({a, b});
  check_kernel_dtype(t != at::kBool, "div_floor_cpu", t);
}
at::Tensor floor_divide(const at::Tensor& a, const at::Tensor& b) {
  check_floor_divide(a, b);
  return at::div(a, b, "floor");
}
at::Tensor& floor_divide_(at::Tensor& a, const at::Tensor& b) {
  check_floor_divide(a, b);
  return a.div_(b, "floor");
}
at::Tensor& floor_divide_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  check_floor_divide(a, b);
  return at::div_out(out, a, b, "floor");
}

// PyTorch's own definition: grad * mask * scale.
at::Tensor native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  return grad * mask * scale;
}

// The CPU's checks, then (N, g, C / g, *) -> (N, C / g, g, *) as one copy.
at::Tensor channel_shuffle(const at::Tensor& self, c10::SymInt groups_) {
  int64_t groups = groups_.guard_int(__FILE__, __LINE__);
  TORCH_CHECK(self.dim() > 2, "channel_shuffle expects input with > 2 dims, but got input with sizes ",
              self.sizes());
  TORCH_CHECK(groups > 0, "Number of groups to divide channels in must be positive.",
              " Value of groups:", groups);
  int64_t c = self.size(1);
  TORCH_CHECK(c % groups == 0, "Number of channels must be divisible by groups. Got ", c,
              " channels and ", groups, " groups.");
  if (self.numel() == 0) return self.clone();
  std::vector<int64_t> split{self.size(0), groups, c / groups};
  for (int64_t d = 2; d < self.dim(); d++) split.push_back(self.size(d));
  return self.contiguous().view(split).transpose(1, 2).contiguous().view(self.sizes());
}

// renorm, as the CPU's: per slice along dim, the p-norm over the other dims
// (float accumulation for bf16 / fp16), factor = norm > maxnorm ?
// maxnorm / (norm + 1e-7) : 1 in the norm's dtype, cast to self's, then
// self * factor; each step an op on the card.
at::Tensor& renorm_out(const at::Tensor& self, const c10::Scalar& p, int64_t dim, const c10::Scalar& maxnorm,
                       at::Tensor& out) {
  TORCH_CHECK(!p.isComplex(), "renorm: p must be real-valued");
  TORCH_CHECK(p.toDouble() > 0.0, "renorm: non-positive-norm not supported");
  TORCH_CHECK(!maxnorm.isComplex(), "renorm: maxnorm must be real-valued");
  TORCH_CHECK(maxnorm.toDouble() >= 0.0, "renorm: expected maxnorm to be >= 0 but got ", maxnorm.toDouble());
  TORCH_CHECK(self.dim() > 1, "renorm: input needs at least 2 dimensions, got ", self.dim(), " dimensions");
  TORCH_CHECK(is_float(self.scalar_type()),
              "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ", self.scalar_type());
  dim = c10::maybe_wrap_dim(dim, self.dim());
  std::vector<int64_t> reduce_dims;
  for (int64_t d = 0; d < self.dim(); d++)
    if (d != dim) reduce_dims.push_back(d);
  auto dtype = self.scalar_type();
  auto acc = (dtype == at::kBFloat16 || dtype == at::kHalf) ? at::kFloat : dtype;
  at::Tensor norm = acc != dtype ? at::linalg_vector_norm(self, p, reduce_dims, true, acc)
                                 : at::linalg_vector_norm(self, p, reduce_dims, true);
  double mx = maxnorm.toDouble();
  at::Tensor scaled = at::full_like(norm, mx) / (norm + 1e-7);
  at::Tensor factor = at::where(norm > mx, scaled, at::ones_like(norm));
  if (factor.scalar_type() != dtype) factor = factor.to(dtype);
  at::native::resize_output(out, self.sizes());
  return at::mul_out(out, self, factor);
}
at::Tensor renorm_fn(const at::Tensor& self, const c10::Scalar& p, int64_t dim, const c10::Scalar& maxnorm) {
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  return renorm_out(self, p, dim, maxnorm, out);
}
at::Tensor& renorm_(at::Tensor& self, const c10::Scalar& p, int64_t dim, const c10::Scalar& maxnorm) {
  at::Tensor r = renorm_fn(self, p, dim, maxnorm);
  self.copy_(r);
  return self;
}

// Random distributions -----------------------------------------------------------

enum Dist { EXPONENTIAL = 0, CAUCHY = 1, GEOMETRIC = 2, LOG_NORMAL = 3 };

// self <- f(draw): draw is a float64 uniform [0, 1) (log-normal: a normal
// (mean, std) draw), f the distribution's transform (pw_tail.c).
void run_dist(at::Tensor& self, Dist dist, double a, double b, const std::optional<at::Generator>& gen) {
  TORCH_CHECK(is_hpu(self), "expected an hpu tensor");
  if (self.numel() == 0) return;
  auto idx = self.device().index();
  at::Tensor draw = new_hpu_tensor(self.sizes(), at::kDouble, idx);
  hpu_node_t rng{};
  rng.op = dist == LOG_NORMAL ? HPU_OP_RNG_NORMAL : HPU_OP_RNG_UNIFORM;
  rng.num_outputs = 1;
  rng.outputs[0] = to_desc(draw);
  rng.compute_dtype = HPU_FLOAT64;
  rng.params.rng.a = dist == LOG_NORMAL ? a : 0.0;
  rng.params.rng.b = dist == LOG_NORMAL ? b : 1.0;
  generator_for(gen, idx)->prepare(rng);
  launch(idx, rng);
  Params p;
  p.i[0] = dist;
  p.s[0] = fscalar(a);
  p.s[1] = fscalar(b);
  run(HPU_OP_DIST_TRANSFORM, self, {draw}, at::kDouble, p);
}

at::Tensor& exponential_(at::Tensor& self, double lambd, std::optional<at::Generator> gen) {
  TORCH_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  TORCH_CHECK(is_float(self.scalar_type()),
              "Exponential distribution is a continuous probability distribution. dtype must be a "
              "floating point but you specified ", self.scalar_type());
  run_dist(self, EXPONENTIAL, lambd, 0, gen);
  return self;
}
at::Tensor& cauchy_(at::Tensor& self, double median, double sigma, std::optional<at::Generator> gen) {
  TORCH_CHECK(sigma > 0.0, "cauchy_ expects sigma > 0.0, but found sigma=", sigma);
  TORCH_CHECK(is_float(self.scalar_type()),
              "Cauchy distribution is a continuous probability distribution. dtype must be a "
              "floating point but you specified ", self.dtype());
  run_dist(self, CAUCHY, median, sigma, gen);
  return self;
}
at::Tensor& geometric_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
  check_kernel_dtype(self.scalar_type() != at::kBool, "geometric_cpu", self.scalar_type());
  run_dist(self, GEOMETRIC, p, 0, gen);
  return self;
}
at::Tensor& log_normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
  check_kernel_dtype(is_float(self.scalar_type()), "log_normal_cpu", self.scalar_type());
  run_dist(self, LOG_NORMAL, mean, std, gen);
  return self;
}

// multinomial, as the CPU composes it, from card ops. Without replacement,
// or one sample per row (the sampling step of text generation): the Gumbel
// trick, argmax / topk of p / q with q ~ Exp(1). With replacement: each
// row's cumulative distribution (summed in float, double for float64,
// normalised, the last bucket set to 1) searched for uniform doubles, the
// first bucket >= u. The distribution is checked on the host first (one
// read), so a bad one raises the CPU's error at the call.
at::Tensor& multinomial_out(const at::Tensor& self, int64_t n_sample, bool replacement,
                            std::optional<at::Generator> gen, at::Tensor& result) {
  TORCH_CHECK(result.device() == self.device(), "multinomial arguments must have the same device");
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(is_float(self.scalar_type()), "multinomial only supports floating-point dtypes for input, got: ",
              self.scalar_type());
  TORCH_CHECK(result.scalar_type() == at::kLong, "multinomial expects Long tensor out, got: ", result.scalar_type());
  TORCH_CHECK(n_sample > 0, "cannot sample n_sample <= 0 samples");
  const int64_t n_categories = self.size(-1);
  TORCH_CHECK(replacement || n_sample <= n_categories,
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(n_categories <= (int64_t{1} << 24), "number of categories cannot exceed 2^24");
  // resize_, not resize_output: the CPU's multinomial resizes any out silently
  if (self.dim() == 1) result.resize_({n_sample});
  else result.resize_({self.size(0), n_sample});
  if (result.numel() == 0) return result;
  // one host read: finite, non-negative, every row's sum > 0
  at::Tensor row_sums = self.dim() == 1 ? self.sum().reshape({1}) : self.sum(1);
  at::Tensor checks = at::stack({self.min().to(at::kDouble), self.max().to(at::kDouble),
                                 row_sums.min().to(at::kDouble)}).to(at::kCPU);
  const double lo = checks.data_ptr<double>()[0], hi = checks.data_ptr<double>()[1],
               least_sum = checks.data_ptr<double>()[2];
  TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo >= 0,
              replacement && n_sample > 1 ? (lo < 0 && !std::isnan(lo)
                                                 ? "invalid multinomial distribution (encountering probability entry < 0)"
                                                 : "invalid multinomial distribution (encountering probability entry = "
                                                   "infinity or NaN)")
                                          : "probability tensor contains either `inf`, `nan` or element < 0");
  TORCH_CHECK(least_sum > 0, "invalid multinomial distribution (sum of probabilities <= 0)");
  if (!replacement || n_sample == 1) {
    at::Tensor q = at::empty_like(self).exponential_(1, gen);
    at::div_out(q, self, q);
    if (n_sample == 1) {
      at::argmax_out(result, q, /*dim=*/-1, /*keepdim=*/true);
    } else {
      at::Tensor vals = at::empty(result.sizes(), self.options());
      at::topk_out(vals, result, q, n_sample);
    }
    return result;
  }
  at::ScalarType acc = self.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor rows = self.reshape({-1, n_categories});
  at::Tensor cdf = rows.cumsum(1, acc);
  cdf.div_(cdf.narrow(1, n_categories - 1, 1).clone());
  cdf.narrow(1, n_categories - 1, 1).fill_(1);
  at::Tensor u = at::empty({rows.size(0), n_sample}, rows.options().dtype(at::kDouble)).uniform_(0, 1, gen);
  result.copy_(at::searchsorted(cdf, u).view(result.sizes()));
  return result;
}

at::Tensor multinomial(const at::Tensor& self, int64_t n_sample, bool replacement, std::optional<at::Generator> gen) {
  at::Tensor result = at::empty({0}, self.options().dtype(at::kLong));
  return multinomial_out(self, n_sample, replacement, gen, result);
}

// normal with tensor parameters, as the CPU: out ~ N(0, 1), then
// out * std + mean (each on the card).
void check_std_tensor(const at::Tensor& std) {
  TORCH_CHECK(std.numel() == 0 || std.min().ge(0).item<bool>(),
              "normal expects all elements of std >= 0.0");
}
void check_normal_dtype(const at::Tensor& out) {
  check_kernel_dtype(is_float(out.scalar_type()), "normal_kernel_cpu", out.scalar_type());
}
at::Tensor& normal_tt_out(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> gen,
                          at::Tensor& out) {
  check_same_device("normal", {&mean, &std, &out});
  check_std_tensor(std);
  at::native::resize_output(out, at::infer_size(mean.sizes(), std.sizes()));
  check_normal_dtype(out);
  out.normal_(0, 1, gen);
  out.mul_(std).add_(mean);
  return out;
}
at::Tensor& normal_tf_out(const at::Tensor& mean, double std, std::optional<at::Generator> gen,
                          at::Tensor& out) {
  check_same_device("normal", {&mean, &out});
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  at::native::resize_output(out, mean.sizes());
  check_normal_dtype(out);
  out.normal_(0, std, gen);
  out.add_(mean);
  return out;
}
at::Tensor& normal_ft_out(double mean, const at::Tensor& std, std::optional<at::Generator> gen,
                          at::Tensor& out) {
  check_same_device("normal", {&std, &out});
  check_std_tensor(std);
  at::native::resize_output(out, std.sizes());
  check_normal_dtype(out);
  out.normal_(0, 1, gen);
  out.mul_(std).add_(mean);
  return out;
}
at::Tensor normal_tt(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> gen) {
  check_std_tensor(std);
  at::Tensor out = at::empty(at::infer_size(mean.sizes(), std.sizes()), mean.options());
  return normal_tt_out(mean, std, gen, out);
}
at::Tensor normal_tf(const at::Tensor& mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  at::Tensor out = at::empty_like(mean, at::MemoryFormat::Contiguous);
  return normal_tf_out(mean, std, gen, out);
}
at::Tensor normal_ft(double mean, const at::Tensor& std, std::optional<at::Generator> gen) {
  check_std_tensor(std);
  at::Tensor out = at::empty_like(std, at::MemoryFormat::Contiguous);
  return normal_ft_out(mean, std, gen, out);
}

}  // namespace

#define TAIL_BINARY(NAME, OP)                                  \
  m.impl(#NAME, TORCH_FN(bin<OP>));                            \
  m.impl(#NAME "_", TORCH_FN(bin_<OP>));                       \
  m.impl(#NAME ".out", TORCH_FN(bin_out<OP>));

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("copysign.Tensor", TORCH_FN(bin<HPU_OP_COPYSIGN>));
  m.impl("copysign_.Tensor", TORCH_FN(bin_<HPU_OP_COPYSIGN>));
  m.impl("copysign.out", TORCH_FN(bin_out<HPU_OP_COPYSIGN>));
  TAIL_BINARY(hypot, HPU_OP_HYPOT)
  TAIL_BINARY(nextafter, HPU_OP_NEXTAFTER)
  TAIL_BINARY(heaviside, HPU_OP_HEAVISIDE)
  TAIL_BINARY(gcd, HPU_OP_GCD)
  TAIL_BINARY(lcm, HPU_OP_LCM)
  m.impl("logaddexp", TORCH_FN(bin<HPU_OP_LOGADDEXP>));
  m.impl("logaddexp.out", TORCH_FN(bin_out<HPU_OP_LOGADDEXP>));
  m.impl("logaddexp2", TORCH_FN(bin<HPU_OP_LOGADDEXP2>));
  m.impl("logaddexp2.out", TORCH_FN(bin_out<HPU_OP_LOGADDEXP2>));
  m.impl("fmax", TORCH_FN(bin<HPU_OP_FMAX>));
  m.impl("fmax.out", TORCH_FN(bin_out<HPU_OP_FMAX>));
  m.impl("fmin", TORCH_FN(bin<HPU_OP_FMIN>));
  m.impl("fmin.out", TORCH_FN(bin_out<HPU_OP_FMIN>));
  m.impl("bitwise_left_shift.Tensor", TORCH_FN(bin<HPU_OP_SHIFT_LEFT>));
  m.impl("bitwise_left_shift_.Tensor", TORCH_FN(bin_<HPU_OP_SHIFT_LEFT>));
  m.impl("bitwise_left_shift.Tensor_out", TORCH_FN(bin_out<HPU_OP_SHIFT_LEFT>));
  m.impl("bitwise_right_shift.Tensor", TORCH_FN(bin<HPU_OP_SHIFT_RIGHT>));
  m.impl("bitwise_right_shift_.Tensor", TORCH_FN(bin_<HPU_OP_SHIFT_RIGHT>));
  m.impl("bitwise_right_shift.Tensor_out", TORCH_FN(bin_out<HPU_OP_SHIFT_RIGHT>));
  m.impl("frac", TORCH_FN(frac));
  m.impl("frac_", TORCH_FN(frac_));
  m.impl("frac.out", TORCH_FN(frac_out));
  m.impl("angle", TORCH_FN(angle));
  m.impl("angle.out", TORCH_FN(angle_out));
  m.impl("round.decimals", TORCH_FN(round_decimals));
  m.impl("round_.decimals", TORCH_FN(round_decimals_));
  m.impl("round.decimals_out", TORCH_FN(round_decimals_out));
  m.impl("signbit", TORCH_FN(signbit));
  m.impl("signbit.out", TORCH_FN(signbit_out));
  m.impl("frexp.Tensor", TORCH_FN(frexp));
  m.impl("frexp.Tensor_out", TORCH_FN(frexp_out));
  m.impl("floor_divide", TORCH_FN(floor_divide));
  m.impl("floor_divide_.Tensor", TORCH_FN(floor_divide_));
  m.impl("floor_divide.out", TORCH_FN(floor_divide_out));
  m.impl("native_dropout_backward", TORCH_FN(native_dropout_backward));
  m.impl("channel_shuffle", TORCH_FN(channel_shuffle));
  m.impl("native_channel_shuffle", TORCH_FN(channel_shuffle));
  m.impl("renorm", TORCH_FN(renorm_fn));
  m.impl("renorm_", TORCH_FN(renorm_));
  m.impl("renorm.out", TORCH_FN(renorm_out));
  m.impl("exponential_", TORCH_FN(exponential_));
  m.impl("multinomial", TORCH_FN(multinomial));
  m.impl("multinomial.out", TORCH_FN(multinomial_out));
  m.impl("cauchy_", TORCH_FN(cauchy_));
  m.impl("geometric_", TORCH_FN(geometric_));
  m.impl("log_normal_", TORCH_FN(log_normal_));
  m.impl("normal.Tensor_Tensor", TORCH_FN(normal_tt));
  m.impl("normal.Tensor_Tensor_out", TORCH_FN(normal_tt_out));
  m.impl("normal.Tensor_float", TORCH_FN(normal_tf));
  m.impl("normal.Tensor_float_out", TORCH_FN(normal_tf_out));
  m.impl("normal.float_Tensor", TORCH_FN(normal_ft));
  m.impl("normal.float_Tensor_out", TORCH_FN(normal_ft_out));
}

}  // namespace habana_torch
