// The special-function family (csrc/include/hpu/ops_special.def): gamma
// functions, the error function family, modified Bessel functions,
// orthogonal polynomials, logit. Float ops: integer and bool inputs compute
// in the default float type; the ops PyTorch's CPU does not implement for
// bfloat16 / float16 raise its NotImplementedError. Kernels:
// csrc/kernels/special*.c through the pointwise engine.
#include <torch/library.h>

#include <cstring>

#include "hpu_pointwise.h"

namespace habana_torch {
namespace {

using namespace pointwise;

// Ops the CPU implements for float32 / float64 only.
bool full_floats_only(hpu_op_t op) {
  switch (op) {
    case HPU_OP_AIRY_AI: case HPU_OP_BESSEL_J0: case HPU_OP_BESSEL_J1: case HPU_OP_BESSEL_Y0:
    case HPU_OP_BESSEL_Y1:
    case HPU_OP_MODIFIED_BESSEL_I0: case HPU_OP_MODIFIED_BESSEL_I1: case HPU_OP_MODIFIED_BESSEL_K0:
    case HPU_OP_MODIFIED_BESSEL_K1: case HPU_OP_SCALED_MODIFIED_BESSEL_K0:
    case HPU_OP_SCALED_MODIFIED_BESSEL_K1:
    case HPU_OP_ERFCX: case HPU_OP_NDTRI: case HPU_OP_LOG_NDTR: case HPU_OP_SPHERICAL_BESSEL_J0:
    case HPU_OP_ZETA: case HPU_OP_CHEBYSHEV_T: case HPU_OP_CHEBYSHEV_U: case HPU_OP_CHEBYSHEV_V:
    case HPU_OP_CHEBYSHEV_W: case HPU_OP_SHIFTED_CHEBYSHEV_T: case HPU_OP_SHIFTED_CHEBYSHEV_U:
    case HPU_OP_SHIFTED_CHEBYSHEV_V: case HPU_OP_SHIFTED_CHEBYSHEV_W: case HPU_OP_HERMITE_H:
    case HPU_OP_HERMITE_HE: case HPU_OP_LAGUERRE_L: case HPU_OP_LEGENDRE_P:
      return true;
    default: return false;
  }
}

// The compute (and result) dtype of a float op, with the CPU's error for a
// reduced float it does not implement ("zeta_cpu" not implemented for 'Half').
at::ScalarType special_type(hpu_op_t op, at::ScalarType common) {
  auto t = float_type(common);
  if (full_floats_only(op)) {
    const char* name = hpu_op_name(op);
    if (!strncmp(name, "special_", 8)) name += 8;
    TORCH_CHECK_NOT_IMPLEMENTED(t != at::kBFloat16 && t != at::kHalf, "\"", name,
                                "_cpu\" not implemented for '", t, "'");
  }
  return t;
}

// logit, entr and i0e on bfloat16 / float16: the CPU rounds intermediate
// steps to the dtype (logit: up to 64 bf16 steps away from the float result
// rounded once); those go through the counted CPU fallback until a kernel
// rounds as it does.
bool reduced_to_cpu(hpu_op_t op, const at::Tensor& self) {
  auto t = self.scalar_type();
  return (op == HPU_OP_LOGIT || op == HPU_OP_ENTR || op == HPU_OP_I0E) &&
         (t == at::kBFloat16 || t == at::kHalf);
}
at::Tensor on_cpu(hpu_op_t op, const at::Tensor& self, std::optional<double> eps) {
  note_cpu_fallback(op == HPU_OP_LOGIT ? "aten::logit" : op == HPU_OP_ENTR ? "aten::special_entr"
                                                                          : "aten::special_i0e");
  auto x = self.cpu();
  auto r = op == HPU_OP_LOGIT ? at::logit(x, eps)
           : op == HPU_OP_ENTR ? at::special_entr(x) : at::special_i0e(x);
  return r.to(self.device());
}

template <hpu_op_t OP>
at::Tensor unary(const at::Tensor& self) {
  if (reduced_to_cpu(OP, self)) return on_cpu(OP, self, std::nullopt);
  auto t = special_type(OP, self.scalar_type());
  return pw(hpu_op_name(OP), OP, {self}, t, t);
}
template <hpu_op_t OP>
at::Tensor& unary_(at::Tensor& self) {
  auto t = special_type(OP, self.scalar_type());
  return pw_into(hpu_op_name(OP), OP, self, true, {self}, t, t);
}
template <hpu_op_t OP>
at::Tensor& unary_out(const at::Tensor& self, at::Tensor& out) {
  if (reduced_to_cpu(OP, self)) return into_out(on_cpu(OP, self, std::nullopt), out);
  auto t = special_type(OP, self.scalar_type());
  return pw_into(hpu_op_name(OP), OP, out, false, {self}, t, t);
}

template <hpu_op_t OP>
at::Tensor binary(const at::Tensor& a, const at::Tensor& b) {
  auto t = special_type(OP, result_of({a, b}));
  return pw(hpu_op_name(OP), OP, {a, b}, t, t);
}
template <hpu_op_t OP>
at::Tensor& binary_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  auto t = special_type(OP, result_of({a, b}));
  return pw_into(hpu_op_name(OP), OP, out, false, {a, b}, t, t);
}

// polygamma(n, x): n is a parameter of the node.
Params order_param(int64_t n) {
  TORCH_CHECK(n >= 0, "polygamma(n, x) does not support negative n.");
  Params p;
  p.s[0] = hpu_scalar_int(n);
  return p;
}
at::Tensor polygamma(int64_t n, const at::Tensor& self) {
  auto t = special_type(HPU_OP_POLYGAMMA, self.scalar_type());
  return pw("polygamma", HPU_OP_POLYGAMMA, {self}, t, t, order_param(n));
}
at::Tensor& polygamma_out(int64_t n, const at::Tensor& self, at::Tensor& out) {
  auto t = special_type(HPU_OP_POLYGAMMA, self.scalar_type());
  return pw_into("polygamma", HPU_OP_POLYGAMMA, out, false, {self}, t, t, order_param(n));
}

// logit's eps: none (or negative) is s[0] = -1, no clamping, as the CPU.
Params eps_param(std::optional<double> eps) {
  Params p;
  p.s[0] = fscalar(eps.value_or(-1.0));
  return p;
}
at::Tensor logit(const at::Tensor& self, std::optional<double> eps) {
  if (reduced_to_cpu(HPU_OP_LOGIT, self)) return on_cpu(HPU_OP_LOGIT, self, eps);
  auto t = special_type(HPU_OP_LOGIT, self.scalar_type());
  return pw("logit", HPU_OP_LOGIT, {self}, t, t, eps_param(eps));
}
at::Tensor& logit_(at::Tensor& self, std::optional<double> eps) {
  if (reduced_to_cpu(HPU_OP_LOGIT, self)) return self.copy_(on_cpu(HPU_OP_LOGIT, self, eps));
  auto t = special_type(HPU_OP_LOGIT, self.scalar_type());
  return pw_into("logit_", HPU_OP_LOGIT, self, true, {self}, t, t, eps_param(eps));
}
at::Tensor& logit_out(const at::Tensor& self, std::optional<double> eps, at::Tensor& out) {
  if (reduced_to_cpu(HPU_OP_LOGIT, self)) return into_out(on_cpu(HPU_OP_LOGIT, self, eps), out);
  auto t = special_type(HPU_OP_LOGIT, self.scalar_type());
  return pw_into("logit", HPU_OP_LOGIT, out, false, {self}, t, t, eps_param(eps));
}
at::Tensor logit_backward(const at::Tensor& grad, const at::Tensor& self,
                          std::optional<double> eps) {
  auto t = result_of({grad, self});
  return pw("logit_backward", HPU_OP_LOGIT_BACKWARD, {grad, self}, t, t, eps_param(eps));
}
at::Tensor& logit_backward_out(const at::Tensor& grad, const at::Tensor& self,
                               std::optional<double> eps, at::Tensor& out) {
  auto t = result_of({grad, self});
  return pw_into("logit_backward", HPU_OP_LOGIT_BACKWARD, out, false, {grad, self}, t, t,
                 eps_param(eps));
}

}  // namespace

#define UNARY(NAME, OP)                                    \
  m.impl(#NAME, TORCH_FN(unary<OP>));                      \
  m.impl(#NAME ".out", TORCH_FN(unary_out<OP>));
#define UNARY_INPLACE(NAME, OP)                            \
  UNARY(NAME, OP)                                          \
  m.impl(#NAME "_", TORCH_FN(unary_<OP>));
// The Scalar overloads of the binary ops are composites of these.
#define BINARY(NAME, OP)                                   \
  m.impl(#NAME, TORCH_FN(binary<OP>));                     \
  m.impl(#NAME ".out", TORCH_FN(binary_out<OP>));

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  UNARY_INPLACE(lgamma, HPU_OP_LGAMMA)
  UNARY_INPLACE(digamma, HPU_OP_DIGAMMA)
  UNARY_INPLACE(erfc, HPU_OP_ERFC)
  UNARY_INPLACE(erfinv, HPU_OP_ERFINV)
  UNARY_INPLACE(i0, HPU_OP_I0)
  UNARY_INPLACE(sinc, HPU_OP_SINC)
  UNARY(special_erfcx, HPU_OP_ERFCX)
  UNARY(special_ndtri, HPU_OP_NDTRI)
  UNARY(special_log_ndtr, HPU_OP_LOG_NDTR)
  UNARY(special_i0e, HPU_OP_I0E)
  UNARY(special_i1, HPU_OP_I1)
  UNARY(special_i1e, HPU_OP_I1E)
  UNARY(special_entr, HPU_OP_ENTR)
  UNARY(special_spherical_bessel_j0, HPU_OP_SPHERICAL_BESSEL_J0)
  UNARY(special_airy_ai, HPU_OP_AIRY_AI)
  UNARY(special_bessel_j0, HPU_OP_BESSEL_J0)
  UNARY(special_bessel_j1, HPU_OP_BESSEL_J1)
  UNARY(special_bessel_y0, HPU_OP_BESSEL_Y0)
  UNARY(special_bessel_y1, HPU_OP_BESSEL_Y1)
  UNARY(special_modified_bessel_i0, HPU_OP_MODIFIED_BESSEL_I0)
  UNARY(special_modified_bessel_i1, HPU_OP_MODIFIED_BESSEL_I1)
  UNARY(special_modified_bessel_k0, HPU_OP_MODIFIED_BESSEL_K0)
  UNARY(special_modified_bessel_k1, HPU_OP_MODIFIED_BESSEL_K1)
  UNARY(special_scaled_modified_bessel_k0, HPU_OP_SCALED_MODIFIED_BESSEL_K0)
  UNARY(special_scaled_modified_bessel_k1, HPU_OP_SCALED_MODIFIED_BESSEL_K1)
  m.impl("polygamma", TORCH_FN(polygamma));
  m.impl("polygamma.out", TORCH_FN(polygamma_out));
  m.impl("logit", TORCH_FN(logit));
  m.impl("logit_", TORCH_FN(logit_));
  m.impl("logit.out", TORCH_FN(logit_out));
  m.impl("logit_backward", TORCH_FN(logit_backward));
  m.impl("logit_backward.grad_input", TORCH_FN(logit_backward_out));
  BINARY(special_xlog1py, HPU_OP_XLOG1PY)
  BINARY(special_zeta, HPU_OP_ZETA)
  BINARY(special_chebyshev_polynomial_t, HPU_OP_CHEBYSHEV_T)
  BINARY(special_chebyshev_polynomial_u, HPU_OP_CHEBYSHEV_U)
  BINARY(special_chebyshev_polynomial_v, HPU_OP_CHEBYSHEV_V)
  BINARY(special_chebyshev_polynomial_w, HPU_OP_CHEBYSHEV_W)
  BINARY(special_shifted_chebyshev_polynomial_t, HPU_OP_SHIFTED_CHEBYSHEV_T)
  BINARY(special_shifted_chebyshev_polynomial_u, HPU_OP_SHIFTED_CHEBYSHEV_U)
  BINARY(special_shifted_chebyshev_polynomial_v, HPU_OP_SHIFTED_CHEBYSHEV_V)
  BINARY(special_shifted_chebyshev_polynomial_w, HPU_OP_SHIFTED_CHEBYSHEV_W)
  BINARY(special_hermite_polynomial_h, HPU_OP_HERMITE_H)
  BINARY(special_hermite_polynomial_he, HPU_OP_HERMITE_HE)
  BINARY(special_laguerre_polynomial_l, HPU_OP_LAGUERRE_L)
  BINARY(special_legendre_polynomial_p, HPU_OP_LEGENDRE_P)
}

}  // namespace habana_torch
