// The vector and matrix-vector ops of torch.linalg's family, on the card
// through the MATMUL node (gemm.c / gemv.c) and elementwise nodes: dot,
// vdot, addmv (mv), addbmm, trace, eye, linalg_cross, and equal (which
// cov / corrcoef call on their weights). No node of their own: each is a
// view of its operands as the matrices of one addmm, or a sum / elementwise
// expression, so lazy mode records them like any other op. Arguments the CPU
// refuses (and dtypes it refuses, such as bool products) run PyTorch's CPU
// op, a counted fallback, so that its own error is raised.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include "hpu_common.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace {

bool product_dtype(at::ScalarType t) { return t != at::kBool && is_supported_dtype(t); }

bool vectors_ok(const at::Tensor& a, const at::Tensor& b) {
  return a.dim() == 1 && b.dim() == 1 && a.scalar_type() == b.scalar_type() && a.numel() == b.numel() &&
         product_dtype(a.scalar_type()) && is_hpu(a) && is_hpu(b) && a.device() == b.device();
}

// Real vectors: vdot is dot (no conjugate to take).
at::Tensor dot(const at::Tensor& a, const at::Tensor& b) {
  if (!vectors_ok(a, b)) {
    note_cpu_fallback("aten::dot");
    return at::dot(a.cpu(), b.cpu()).to(a.device());
  }
  return at::mm(a.unsqueeze(0), b.unsqueeze(1)).reshape(c10::IntArrayRef{});
}

at::Tensor vdot(const at::Tensor& a, const at::Tensor& b) {
  if (!vectors_ok(a, b)) {
    note_cpu_fallback("aten::vdot");
    return at::vdot(a.cpu(), b.cpu()).to(a.device());
  }
  return at::mm(a.unsqueeze(0), b.unsqueeze(1)).reshape(c10::IntArrayRef{});
}

at::Tensor& addmv_out(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const c10::Scalar& beta,
                      const c10::Scalar& alpha, at::Tensor& out) {
  at::ScalarType dt = mat.scalar_type();
  bool ok = mat.dim() == 2 && vec.dim() == 1 && self.dim() <= 1 && mat.size(1) == vec.size(0) &&
            (self.numel() == mat.size(0) || self.numel() == 1) && vec.scalar_type() == dt &&
            self.scalar_type() == dt && out.scalar_type() == dt && product_dtype(dt);
  if (!ok) {
    note_cpu_fallback("aten::addmv.out");
    return into_out(at::addmv(self.cpu(), mat.cpu(), vec.cpu(), beta, alpha).to(out.device()), out);
  }
  at::Tensor bias = self.numel() == 1 ? self.reshape({1, 1}) : self.unsqueeze(1);
  return into_out(at::addmm(bias, mat, vec.unsqueeze(1), beta, alpha).squeeze(1), out);
}

// As the CPU: one addmm per batch into the result, so that bf16 / fp16
// results are rounded after each product as the CPU's are.
bool addbmm_ok(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2) {
  at::ScalarType dt = b1.scalar_type();
  if (b1.dim() != 3 || b2.dim() != 3 || b1.size(0) != b2.size(0) || b1.size(2) != b2.size(1) ||
      b2.scalar_type() != dt || self.scalar_type() != dt || !product_dtype(dt))
    return false;
  return at::is_expandable_to(self.sizes(), {b1.size(1), b2.size(2)});
}

at::Tensor addbmm_impl(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const c10::Scalar& beta,
                       const c10::Scalar& alpha) {
  int64_t B = b1.size(0);
  at::Tensor bias = self.expand({b1.size(1), b2.size(2)});
  if (B == 0) {
    bool zero_beta = beta.isIntegral(true) ? beta.toLong() == 0 : beta.toDouble() == 0.0;
    return zero_beta ? at::zeros_like(bias) : bias.mul(beta);
  }
  at::Tensor r = at::addmm(bias, b1[0], b2[0], beta, alpha);
  for (int64_t i = 1; i < B; i++) r = at::addmm(r, b1[i], b2[i], 1, alpha);
  return r;
}

at::Tensor addbmm(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const c10::Scalar& beta,
                  const c10::Scalar& alpha) {
  if (!addbmm_ok(self, b1, b2)) {
    note_cpu_fallback("aten::addbmm");
    return at::addbmm(self.cpu(), b1.cpu(), b2.cpu(), beta, alpha).to(b1.device());
  }
  return addbmm_impl(self, b1, b2, beta, alpha);
}

at::Tensor& addbmm_out(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const c10::Scalar& beta,
                       const c10::Scalar& alpha, at::Tensor& out) {
  if (!addbmm_ok(self, b1, b2) || out.scalar_type() != b1.scalar_type()) {
    note_cpu_fallback("aten::addbmm.out");
    return into_out(at::addbmm(self.cpu(), b1.cpu(), b2.cpu(), beta, alpha).to(out.device()), out);
  }
  return into_out(addbmm_impl(self, b1, b2, beta, alpha), out);
}

at::Tensor& addbmm_(at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const c10::Scalar& beta,
                    const c10::Scalar& alpha) {
  if (!addbmm_ok(self, b1, b2) || self.dim() != 2 || self.size(0) != b1.size(1) || self.size(1) != b2.size(2)) {
    note_cpu_fallback("aten::addbmm_");
    at::Tensor c = self.cpu();
    c.addbmm_(b1.cpu(), b2.cpu(), beta, alpha);
    return self.copy_(c);
  }
  return self.copy_(addbmm_impl(self, b1, b2, beta, alpha));
}

at::Tensor trace(const at::Tensor& self) {
  if (self.dim() != 2 || self.scalar_type() == at::kBool) {
    note_cpu_fallback("aten::trace");
    return at::trace(self.cpu()).to(self.device());
  }
  // sum promotes integers to int64, as the CPU's trace does.
  return self.diagonal().sum();
}

at::Tensor& eye_m_out(int64_t n, int64_t m, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  out.resize_({n, m});
  out.zero_();
  if (n > 0 && m > 0) out.diagonal().fill_(1);
  return out;
}

at::Tensor& eye_out(int64_t n, at::Tensor& out) { return eye_m_out(n, n, out); }

at::Tensor& cross_out(const at::Tensor& self, const at::Tensor& other, int64_t dim, at::Tensor& out) {
  bool ok = self.dim() == other.dim() && self.dim() > 0 && self.scalar_type() == other.scalar_type() &&
            out.scalar_type() == self.scalar_type() && product_dtype(self.scalar_type()) &&
            dim >= -self.dim() && dim < self.dim();
  if (ok) {
    int64_t d = at::maybe_wrap_dim(dim, self.dim());
    ok = self.size(d) == 3 && other.size(d) == 3;
    if (ok) {
      try {
        at::infer_size(self.sizes(), other.sizes());
      } catch (const c10::Error&) {
        ok = false;
      }
    }
  }
  if (!ok) {
    note_cpu_fallback("aten::linalg_cross.out");
    return into_out(at::linalg_cross(self.cpu(), other.cpu(), dim).to(out.device()), out);
  }
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  auto a = [&](int64_t i) { return self.select(d, i); };
  auto b = [&](int64_t i) { return other.select(d, i); };
  at::Tensor r = at::stack({a(1) * b(2) - a(2) * b(1), a(2) * b(0) - a(0) * b(2), a(0) * b(1) - a(1) * b(0)}, d);
  return into_out(r, out);
}

bool equal(const at::Tensor& self, const at::Tensor& other) {
  if (self.scalar_type() != other.scalar_type() || !is_hpu(self) || !is_hpu(other) ||
      self.device() != other.device()) {
    note_cpu_fallback("aten::equal");
    return at::equal(self.cpu(), other.cpu());
  }
  if (!self.sizes().equals(other.sizes())) return false;
  // The CPU's shortcut: the same elements are equal, NaNs included.
  if (self.is_alias_of(other) && self.storage_offset() == other.storage_offset() &&
      self.strides().equals(other.strides()))
    return true;
  if (self.numel() == 0) return true;
  return at::eq(self, other).all().item<bool>();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("dot", TORCH_FN(dot));
  m.impl("vdot", TORCH_FN(vdot));
  m.impl("addmv.out", TORCH_FN(addmv_out));
  m.impl("addbmm", TORCH_FN(addbmm));
  m.impl("addbmm.out", TORCH_FN(addbmm_out));
  m.impl("addbmm_", TORCH_FN(addbmm_));
  m.impl("trace", TORCH_FN(trace));
  m.impl("eye.out", TORCH_FN(eye_out));
  m.impl("eye.m_out", TORCH_FN(eye_m_out));
  m.impl("linalg_cross.out", TORCH_FN(cross_out));
  m.impl("equal", TORCH_FN(equal));
}

}  // namespace habana_torch
