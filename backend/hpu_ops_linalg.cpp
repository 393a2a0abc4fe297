// Linear algebra on the card, LU and Cholesky side: the aten ops behind
// torch.linalg's LU factorization and solve, lu_unpack, Cholesky and its
// inverse and solve, and triangular solves, as the nodes of
// csrc/include/hpu/ops_linalg.def (LAPACK kernels in csrc/kernels/linalg*.c);
// solve, inv, det and slogdet are composed here from the LU nodes as
// PyTorch's CPU composes them, so that the LU and pivots they return (which
// their backwards reuse) are the CPU's. float32 and float64 only: any other
// dtype, and any argument the CPU refuses, runs PyTorch's CPU op (a counted
// fallback) so that the CPU's own error is raised. SVD, eigh, QR, LDL^T and
// least squares are in hpu_ops_linalg_decomp.cpp.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <torch/library.h>

#include <vector>

#include "hpu_linalg.h"

namespace habana_torch {
namespace {

using namespace linalg;

// ---------------------------------------------------------------- LU

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> lu_factor_ex_out(const at::Tensor& A, bool pivot, bool check_errors,
                                                                  at::Tensor& LU, at::Tensor& pivots, at::Tensor& info) {
  if (!lapack_dtype(A) || A.dim() < 2 || !pivot) {
    note_cpu_fallback("aten::linalg_lu_factor_ex.out");
    auto r = at::linalg_lu_factor_ex(A.cpu(), pivot, check_errors);
    to_outs(std::move(r), {&LU, &pivots, &info});
    return {LU, pivots, info};
  }
  to_outs(lu_factor(A), {&LU, &pivots, &info});
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.lu_factor_ex", A.dim() == 2);
  return {LU, pivots, info};
}

at::Tensor& lu_solve_out(const at::Tensor& LU, const at::Tensor& pivots, const at::Tensor& B, bool left, bool adjoint,
                         at::Tensor& out) {
  bool ok = lapack_dtype(LU) && B.scalar_type() == LU.scalar_type() && pivots.scalar_type() == at::kInt &&
            LU.dim() >= 2 && B.dim() >= 2 && LU.size(-1) == LU.size(-2) && pivots.dim() == LU.dim() - 1 &&
            pivots.size(-1) == LU.size(-1) && (left ? B.size(-2) : B.size(-1)) == LU.size(-1) &&
            at::is_expandable_to(batch_of(pivots, 1), batch_of(LU, 2));
  if (ok) {
    try {
      at::infer_size(batch_of(LU, 2), batch_of(B, 2));
    } catch (const c10::Error&) {
      ok = false;
    }
  }
  if (!ok) {
    note_cpu_fallback("aten::linalg_lu_solve.out");
    return into_out(at::linalg_lu_solve(LU.cpu(), pivots.cpu(), B.cpu(), left, adjoint).to(out.device()), out);
  }
  return into_out(lu_solve(LU, pivots, B, left, adjoint), out);
}


// lu_unpack: P from the pivots (a node), L and U from LU's triangles.
std::tuple<at::Tensor, at::Tensor, at::Tensor> unpack(const at::Tensor& LU, const at::Tensor& piv, bool data,
                                                      bool pivots) {
  int64_t m = LU.size(-2), n = LU.size(-1), k = std::min(m, n);
  at::Tensor P = like(LU, {0}, LU.scalar_type()), L = P, U = P;
  if (pivots) {
    at::Tensor p = piv.contiguous();
    P = like(LU, with(batch_of(LU, 2), {m, m}), LU.scalar_type());
    hpu_node_t nd = make_node(HPU_OP_LINALG_LU_UNPACK);
    add_in(nd, p);
    add_out(nd, P);
    launch(dev_of(p), nd);
  }
  if (data) {
    L = LU.narrow(-1, 0, k).tril(-1);
    L.diagonal(0, -2, -1).fill_(1);
    U = LU.narrow(-2, 0, k).triu();
  }
  return {P, L, U};
}

bool unpack_ok(const at::Tensor& LU, const at::Tensor& piv) {
  return lapack_dtype(LU) && LU.dim() >= 2 && piv.scalar_type() == at::kInt && piv.dim() == LU.dim() - 1 &&
         piv.size(-1) == std::min(LU.size(-2), LU.size(-1)) && batch_of(piv, 1) == batch_of(LU, 2);
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> lu_unpack_out(const at::Tensor& LU, const at::Tensor& piv,
                                                                bool unpack_data, bool unpack_pivots, at::Tensor& P,
                                                                at::Tensor& L, at::Tensor& U) {
  if (!unpack_ok(LU, piv)) {
    note_cpu_fallback("aten::lu_unpack.out");
    to_outs(at::lu_unpack(LU.cpu(), piv.cpu(), unpack_data, unpack_pivots), {&P, &L, &U});
    return {P, L, U};
  }
  to_outs(unpack(LU, piv, unpack_data, unpack_pivots), {&P, &L, &U});
  return {P, L, U};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> linalg_lu_out(const at::Tensor& A, bool pivot, at::Tensor& P,
                                                                at::Tensor& L, at::Tensor& U) {
  if (!lapack_dtype(A) || A.dim() < 2 || !pivot) {
    note_cpu_fallback("aten::linalg_lu.out");
    to_outs(at::linalg_lu(A.cpu(), pivot), {&P, &L, &U});
    return {P, L, U};
  }
  auto [lu, piv, info] = lu_factor(A);
  to_outs(unpack(lu, piv, true, true), {&P, &L, &U});
  return {P, L, U};
}

// ---------------------------------------------------------------- solve, inv

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> solve_ex_out(const at::Tensor& A, const at::Tensor& B,
                                                                           bool left, bool check_errors,
                                                                           at::Tensor& result, at::Tensor& LU,
                                                                           at::Tensor& pivots, at::Tensor& info) {
  // As PyTorch's linalg_solve_is_vector_rhs: B is a (batch of) vector(s).
  bool vector_case = B.dim() == 1 || (A.dim() - 1 == B.dim() && B.sizes() == A.sizes().slice(0, A.dim() - 1));
  at::Tensor B_ = vector_case ? B.unsqueeze(-1) : B;
  bool ok = lapack_dtype(A) && B.scalar_type() == A.scalar_type() && square_matrices(A) && B_.dim() >= 2 &&
            !(vector_case && !left) && (left ? B_.size(-2) : B_.size(-1)) == A.size(-1);
  if (ok) {
    try {
      at::infer_size(batch_of(A, 2), batch_of(B_, 2));
    } catch (const c10::Error&) {
      ok = false;
    }
  }
  if (!ok) {
    note_cpu_fallback("aten::_linalg_solve_ex.result");
    to_outs(at::_linalg_solve_ex(A.cpu(), B.cpu(), left, check_errors), {&result, &LU, &pivots, &info});
    return {result, LU, pivots, info};
  }
  auto [lu, piv, inf] = lu_factor(A);
  at::Tensor X = lu_solve(lu, piv, B_, left, /*adjoint=*/false);
  if (vector_case) X = X.squeeze(-1);
  to_outs(std::make_tuple(X, lu, piv, inf), {&result, &LU, &pivots, &info});
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.solve_ex", A.dim() == 2);
  return {result, LU, pivots, info};
}

std::tuple<at::Tensor&, at::Tensor&> inv_ex_out(const at::Tensor& A, bool check_errors, at::Tensor& inverse,
                                                at::Tensor& info) {
  if (!lapack_dtype(A) || !square_matrices(A)) {
    note_cpu_fallback("aten::linalg_inv_ex.inverse");
    to_outs(at::linalg_inv_ex(A.cpu(), check_errors), {&inverse, &info});
    return {inverse, info};
  }
  // As the CPU: the solve of A X = I.
  auto [lu, piv, inf] = lu_factor(A);
  int64_t n = A.size(-1);
  at::Tensor eye = at::eye(n, A.options());
  to_outs(std::make_tuple(lu_solve(lu, piv, eye, true, false), inf), {&inverse, &info});
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.inv_ex", A.dim() == 2);
  return {inverse, info};
}

// ---------------------------------------------------------------- det, slogdet

// The LU that det / slogdet factor, as the CPU does (their backwards solve
// with it, choosing the transpose from A's contiguity the same way).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> det_parts(const at::Tensor& A) {
  auto [lu, piv, inf] = lu_factor(A.is_contiguous() ? A.mT() : A);
  int64_t n = A.size(-1);
  at::Tensor ident = at::arange(1, n + 1, at::TensorOptions().dtype(at::kInt)).to(A.device());
  at::Tensor swaps = piv.ne(ident).sum(-1);
  at::Tensor perm_sign = 1 - 2 * at::remainder(swaps, 2).to(A.scalar_type());
  return {lu, piv, lu.diagonal(0, -2, -1), perm_sign};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> det_out(const at::Tensor& A, at::Tensor& result, at::Tensor& LU,
                                                          at::Tensor& pivots) {
  if (!lapack_dtype(A) || !square_matrices(A)) {
    note_cpu_fallback("aten::_linalg_det.result");
    to_outs(at::_linalg_det(A.cpu()), {&result, &LU, &pivots});
    return {result, LU, pivots};
  }
  auto [lu, piv, diag, perm_sign] = det_parts(A);
  to_outs(std::make_tuple(diag.prod(-1) * perm_sign, lu, piv), {&result, &LU, &pivots});
  return {result, LU, pivots};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> slogdet_out(const at::Tensor& A, at::Tensor& sign,
                                                                          at::Tensor& logabsdet, at::Tensor& LU,
                                                                          at::Tensor& pivots) {
  if (!lapack_dtype(A) || !square_matrices(A)) {
    note_cpu_fallback("aten::_linalg_slogdet.sign");
    to_outs(at::_linalg_slogdet(A.cpu()), {&sign, &logabsdet, &LU, &pivots});
    return {sign, logabsdet, LU, pivots};
  }
  auto [lu, piv, diag, perm_sign] = det_parts(A);
  to_outs(std::make_tuple(diag.sign().prod(-1) * perm_sign, diag.abs().log().sum(-1), lu, piv),
          {&sign, &logabsdet, &LU, &pivots});
  return {sign, logabsdet, LU, pivots};
}

// ---------------------------------------------------------------- cholesky

std::tuple<at::Tensor&, at::Tensor&> cholesky_ex_out(const at::Tensor& A, bool upper, bool check_errors, at::Tensor& L,
                                                     at::Tensor& info) {
  if (!lapack_dtype(A) || !square_matrices(A)) {
    note_cpu_fallback("aten::linalg_cholesky_ex.L");
    to_outs(at::linalg_cholesky_ex(A.cpu(), upper, check_errors), {&L, &info});
    return {L, info};
  }
  at::Tensor a = A.contiguous();
  at::Tensor l = like(a, a.sizes(), a.scalar_type()), inf = like(a, batch_of(a, 2), at::kInt);
  hpu_node_t nd = make_node(HPU_OP_LINALG_CHOLESKY);
  add_in(nd, a);
  add_out(nd, l);
  add_out(nd, inf);
  nd.params.nn.i[0] = upper;
  launch(dev_of(a), nd);
  to_outs(std::make_tuple(l, inf), {&L, &info});
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.cholesky_ex", A.dim() == 2);
  return {L, info};
}

// ---------------------------------------------------------------- triangular solves

at::Tensor solve_triangular_impl(const at::Tensor& A, const at::Tensor& B, bool upper, bool left, bool unit) {
  auto batch = at::infer_size(batch_of(A, 2), batch_of(B, 2));
  int64_t n = A.size(-1);
  at::Tensor a = A.expand(with(batch, {n, n})).contiguous();
  at::Tensor b = B.expand(with(batch, {B.size(-2), B.size(-1)})).contiguous();
  at::Tensor X = like(b, b.sizes(), b.scalar_type());
  hpu_node_t nd = make_node(HPU_OP_LINALG_SOLVE_TRIANGULAR);
  add_in(nd, a);
  add_in(nd, b);
  add_out(nd, X);
  nd.params.nn.i[0] = upper;
  nd.params.nn.i[1] = left;
  nd.params.nn.i[2] = unit;
  launch(dev_of(b), nd);
  return X;
}

bool triangular_ok(const at::Tensor& A, const at::Tensor& B, bool left) {
  if (!lapack_dtype(A) || B.scalar_type() != A.scalar_type() || !square_matrices(A) || B.dim() < 2 ||
      (left ? B.size(-2) : B.size(-1)) != A.size(-1))
    return false;
  try {
    at::infer_size(batch_of(A, 2), batch_of(B, 2));
  } catch (const c10::Error&) {
    return false;
  }
  return true;
}

at::Tensor& solve_triangular_out(const at::Tensor& A, const at::Tensor& B, bool upper, bool left, bool unitriangular,
                                 at::Tensor& out) {
  if (!triangular_ok(A, B, left)) {
    note_cpu_fallback("aten::linalg_solve_triangular.out");
    return into_out(at::linalg_solve_triangular(A.cpu(), B.cpu(), upper, left, unitriangular).to(out.device()), out);
  }
  return into_out(solve_triangular_impl(A, B, upper, left, unitriangular), out);
}

at::Tensor solve_triangular(const at::Tensor& A, const at::Tensor& B, bool upper, bool left, bool unitriangular) {
  if (!triangular_ok(A, B, left)) {
    note_cpu_fallback("aten::linalg_solve_triangular");
    return at::linalg_solve_triangular(A.cpu(), B.cpu(), upper, left, unitriangular).to(B.device());
  }
  return solve_triangular_impl(A, B, upper, left, unitriangular);
}

// triangular_solve(B, A): (X with op(A) X = B, a copy of A broadcast).
std::tuple<at::Tensor&, at::Tensor&> triangular_solve_out(const at::Tensor& self, const at::Tensor& A, bool upper,
                                                          bool transpose, bool unitriangular, at::Tensor& X,
                                                          at::Tensor& M) {
  if (!triangular_ok(A, self, true)) {
    note_cpu_fallback("aten::triangular_solve.X");
    to_outs(at::triangular_solve(self.cpu(), A.cpu(), upper, transpose, unitriangular), {&X, &M});
    return {X, M};
  }
  auto batch = at::infer_size(batch_of(A, 2), batch_of(self, 2));
  at::Tensor x = solve_triangular_impl(transpose ? A.mT() : A, self, transpose ? !upper : upper, true, unitriangular);
  to_outs(std::make_tuple(x, A.expand(with(batch, {A.size(-2), A.size(-1)})).clone()), {&X, &M});
  return {X, M};
}


// The deprecated torch.cholesky, as the CPU builds it.
at::Tensor cholesky(const at::Tensor& A, bool upper) {
  TORCH_WARN_ONCE(
      "torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a future PyTorch release.");
  auto [L, info] = at::linalg_cholesky_ex(A, upper, /*check_errors=*/false);
  at::_linalg_check_errors(info, "cholesky", A.dim() == 2);
  return L;
}

// (L L^T)^-1 = L^-T L^-1, (U^T U)^-1 = U^-1 U^-T: from the inverse of the
// triangular factor (a triangular solve with the identity).
bool cholesky_inverse_ok(const at::Tensor& L) { return lapack_dtype(L) && square_matrices(L); }

at::Tensor cholesky_inverse_impl(const at::Tensor& L, bool upper) {
  at::Tensor eye = at::eye(L.size(-1), L.options());
  at::Tensor inv = solve_triangular_impl(L, eye, upper, /*left=*/true, /*unit=*/false);
  return upper ? at::matmul(inv, inv.mT()) : at::matmul(inv.mT(), inv);
}

at::Tensor cholesky_inverse(const at::Tensor& L, bool upper) {
  if (!cholesky_inverse_ok(L)) {
    note_cpu_fallback("aten::cholesky_inverse");
    return at::cholesky_inverse(L.cpu(), upper).to(L.device());
  }
  return cholesky_inverse_impl(L, upper);
}

at::Tensor& cholesky_inverse_out(const at::Tensor& L, bool upper, at::Tensor& out) {
  if (!cholesky_inverse_ok(L)) {
    note_cpu_fallback("aten::cholesky_inverse.out");
    return into_out(at::cholesky_inverse(L.cpu(), upper).to(out.device()), out);
  }
  return into_out(cholesky_inverse_impl(L, upper), out);
}

// cholesky_solve's kernel (B and the factor already broadcast by the caller):
// two triangular solves.
at::Tensor cholesky_solve_helper(const at::Tensor& B, const at::Tensor& L, bool upper) {
  if (!triangular_ok(L, B, true)) {
    note_cpu_fallback("aten::_cholesky_solve_helper");
    return at::_cholesky_solve_helper(B.cpu(), L.cpu(), upper).to(B.device());
  }
  at::Tensor y = solve_triangular_impl(upper ? L.mT() : L, B, /*upper=*/false, true, false);
  return solve_triangular_impl(upper ? L : L.mT(), y, /*upper=*/true, true, false);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("linalg_lu_factor_ex.out", TORCH_FN(lu_factor_ex_out));
  m.impl("linalg_lu_solve.out", TORCH_FN(lu_solve_out));
  m.impl("_linalg_solve_ex.result", TORCH_FN(solve_ex_out));
  m.impl("linalg_inv_ex.inverse", TORCH_FN(inv_ex_out));
  m.impl("_linalg_det.result", TORCH_FN(det_out));
  m.impl("_linalg_slogdet.sign", TORCH_FN(slogdet_out));
  m.impl("linalg_cholesky_ex.L", TORCH_FN(cholesky_ex_out));
  m.impl("linalg_solve_triangular", TORCH_FN(solve_triangular));
  m.impl("linalg_solve_triangular.out", TORCH_FN(solve_triangular_out));
  m.impl("triangular_solve.X", TORCH_FN(triangular_solve_out));
  m.impl("lu_unpack.out", TORCH_FN(lu_unpack_out));
  m.impl("linalg_lu.out", TORCH_FN(linalg_lu_out));
  m.impl("cholesky", TORCH_FN(cholesky));
  m.impl("cholesky_inverse", TORCH_FN(cholesky_inverse));
  m.impl("cholesky_inverse.out", TORCH_FN(cholesky_inverse_out));
  m.impl("_cholesky_solve_helper", TORCH_FN(cholesky_solve_helper));
}

}  // namespace habana_torch
