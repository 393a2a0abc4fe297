// The decompositions of torch.linalg on the card: SVD, eigh, QR and its
// Householder pieces (geqrf, householder_product, ormqr), LDL^T and least
// squares, as the nodes of csrc/include/hpu/ops_linalg.def. float32 and
// float64 only: any other dtype, and any argument the CPU refuses, runs
// PyTorch's CPU op (a counted fallback) so that the CPU's own error is raised.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <limits>

#include "hpu_linalg.h"

namespace habana_torch {
namespace {

using namespace linalg;

// ---------------------------------------------------------------- svd, eigh, qr

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> svd_out(const at::Tensor& A, bool full_matrices, bool compute_uv,
                                                          std::optional<c10::string_view> driver, at::Tensor& U,
                                                          at::Tensor& S, at::Tensor& Vh) {
  if (!lapack_dtype(A) || A.dim() < 2 || driver.has_value()) {
    note_cpu_fallback("aten::_linalg_svd.U");
    to_outs(at::_linalg_svd(A.cpu(), full_matrices, compute_uv, driver), {&U, &S, &Vh});
    return {U, S, Vh};
  }
  at::Tensor a = A.contiguous();
  // LAPACK on a NaN or an inf: the CPU raises before it, and so do we (a
  // read on the host, as the CPU's check of its info is).
  TORCH_CHECK_LINALG(a.numel() == 0 || at::isfinite(a).all().item<bool>(),
                     "linalg.svd: The algorithm failed to converge because the input matrix contained non-finite "
                     "values.");
  int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  auto batch = batch_of(a, 2);
  at::Tensor s = like(a, with(batch, {k}), a.scalar_type());
  at::Tensor u = compute_uv ? like(a, with(batch, {m, full_matrices ? m : k}), a.scalar_type())
                            : like(a, {0}, a.scalar_type());
  at::Tensor vh = compute_uv ? like(a, with(batch, {full_matrices ? n : k, n}), a.scalar_type())
                             : like(a, {0}, a.scalar_type());
  hpu_node_t nd = make_node(HPU_OP_LINALG_SVD);
  add_in(nd, a);
  if (compute_uv) add_out(nd, u);
  add_out(nd, s);
  if (compute_uv) add_out(nd, vh);
  nd.params.nn.i[0] = full_matrices;
  launch(dev_of(a), nd);
  to_outs(std::make_tuple(u, s, vh), {&U, &S, &Vh});
  return {U, S, Vh};
}

std::tuple<at::Tensor&, at::Tensor&> eigh_out(const at::Tensor& A, c10::string_view uplo, bool compute_v,
                                              at::Tensor& eigenvalues, at::Tensor& eigenvectors) {
  bool ok_uplo = uplo.size() == 1 && (uplo[0] == 'U' || uplo[0] == 'L' || uplo[0] == 'u' || uplo[0] == 'l');
  if (!lapack_dtype(A) || !square_matrices(A) || !ok_uplo) {
    note_cpu_fallback("aten::_linalg_eigh.eigenvalues");
    to_outs(at::_linalg_eigh(A.cpu(), uplo, compute_v), {&eigenvalues, &eigenvectors});
    return {eigenvalues, eigenvectors};
  }
  at::Tensor a = A.contiguous();
  int64_t n = a.size(-1);
  at::Tensor w = like(a, with(batch_of(a, 2), {n}), a.scalar_type());
  at::Tensor v = compute_v ? like(a, a.sizes(), a.scalar_type()) : like(a, {0}, a.scalar_type());
  hpu_node_t nd = make_node(HPU_OP_LINALG_EIGH);
  add_in(nd, a);
  add_out(nd, w);
  if (compute_v) add_out(nd, v);
  nd.params.nn.i[0] = uplo[0] == 'U' || uplo[0] == 'u';
  launch(dev_of(a), nd);
  to_outs(std::make_tuple(w, v), {&eigenvalues, &eigenvectors});
  return {eigenvalues, eigenvectors};
}

std::tuple<at::Tensor&, at::Tensor&> qr_out(const at::Tensor& A, c10::string_view mode, at::Tensor& Q, at::Tensor& R) {
  int imode = mode == "reduced" ? 0 : mode == "complete" ? 1 : mode == "r" ? 2 : -1;
  if (!lapack_dtype(A) || A.dim() < 2 || imode < 0) {
    note_cpu_fallback("aten::linalg_qr.out");
    to_outs(at::linalg_qr(A.cpu(), mode), {&Q, &R});
    return {Q, R};
  }
  at::Tensor a = A.contiguous();
  int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  auto batch = batch_of(a, 2);
  at::Tensor q = imode == 2 ? like(a, {0}, a.scalar_type()) : like(a, with(batch, {m, imode == 1 ? m : k}), a.scalar_type());
  at::Tensor r = like(a, with(batch, {imode == 1 ? m : k, n}), a.scalar_type());
  hpu_node_t nd = make_node(HPU_OP_LINALG_QR);
  add_in(nd, a);
  if (imode != 2) add_out(nd, q);
  add_out(nd, r);
  nd.params.nn.i[0] = imode;
  launch(dev_of(a), nd);
  to_outs(std::make_tuple(q, r), {&Q, &R});
  return {Q, R};
}

// ---------------------------------------------------------------- Householder

bool same_batch(const at::Tensor& a, int64_t a_trail, const at::Tensor& b, int64_t b_trail) {
  return batch_of(a, a_trail) == batch_of(b, b_trail);
}

std::tuple<at::Tensor, at::Tensor> geqrf_impl(const at::Tensor& A) {
  at::Tensor a = A.contiguous();
  int64_t k = std::min(a.size(-2), a.size(-1));
  at::Tensor qr = like(a, a.sizes(), a.scalar_type()), tau = like(a, with(batch_of(a, 2), {k}), a.scalar_type());
  hpu_node_t nd = make_node(HPU_OP_LINALG_GEQRF);
  add_in(nd, a);
  add_out(nd, qr);
  add_out(nd, tau);
  launch(dev_of(a), nd);
  return {qr, tau};
}

std::tuple<at::Tensor, at::Tensor> geqrf(const at::Tensor& A) {
  if (!lapack_dtype(A) || A.dim() < 2) {
    note_cpu_fallback("aten::geqrf");
    auto r = at::geqrf(A.cpu());
    return {std::get<0>(r).to(A.device()), std::get<1>(r).to(A.device())};
  }
  return geqrf_impl(A);
}

std::tuple<at::Tensor&, at::Tensor&> geqrf_out(const at::Tensor& A, at::Tensor& a, at::Tensor& tau) {
  if (!lapack_dtype(A) || A.dim() < 2) {
    note_cpu_fallback("aten::geqrf.a");
    to_outs(at::geqrf(A.cpu()), {&a, &tau});
    return {a, tau};
  }
  to_outs(geqrf_impl(A), {&a, &tau});
  return {a, tau};
}

bool householder_ok(const at::Tensor& V, const at::Tensor& tau) {
  return lapack_dtype(V) && tau.scalar_type() == V.scalar_type() && V.dim() >= 2 && tau.dim() == V.dim() - 1 &&
         V.size(-2) >= V.size(-1) && V.size(-1) >= tau.size(-1) && same_batch(tau, 1, V, 2);
}

at::Tensor householder_impl(const at::Tensor& V, const at::Tensor& tau) {
  at::Tensor v = V.contiguous(), t = tau.contiguous();
  at::Tensor q = like(v, v.sizes(), v.scalar_type());
  hpu_node_t nd = make_node(HPU_OP_LINALG_HOUSEHOLDER_PRODUCT);
  add_in(nd, v);
  add_in(nd, t);
  add_out(nd, q);
  launch(dev_of(v), nd);
  return q;
}

at::Tensor householder_product(const at::Tensor& V, const at::Tensor& tau) {
  if (!householder_ok(V, tau)) {
    note_cpu_fallback("aten::linalg_householder_product");
    return at::linalg_householder_product(V.cpu(), tau.cpu()).to(V.device());
  }
  return householder_impl(V, tau);
}

at::Tensor& householder_product_out(const at::Tensor& V, const at::Tensor& tau, at::Tensor& out) {
  if (!householder_ok(V, tau)) {
    note_cpu_fallback("aten::linalg_householder_product.out");
    return into_out(at::linalg_householder_product(V.cpu(), tau.cpu()).to(out.device()), out);
  }
  return into_out(householder_impl(V, tau), out);
}

bool ormqr_ok(const at::Tensor& V, const at::Tensor& tau, const at::Tensor& C, bool left) {
  return lapack_dtype(V) && tau.scalar_type() == V.scalar_type() && C.scalar_type() == V.scalar_type() &&
         V.dim() >= 2 && C.dim() == V.dim() && tau.dim() == V.dim() - 1 &&
         C.size(left ? -2 : -1) == V.size(-2) && tau.size(-1) <= V.size(-1) && tau.size(-1) <= V.size(-2) &&
         same_batch(tau, 1, V, 2) && same_batch(C, 2, V, 2);
}

at::Tensor ormqr_impl(const at::Tensor& V, const at::Tensor& tau, const at::Tensor& C, bool left, bool transpose) {
  at::Tensor v = V.contiguous(), t = tau.contiguous(), c = C.contiguous();
  at::Tensor out = like(c, c.sizes(), c.scalar_type());
  hpu_node_t nd = make_node(HPU_OP_LINALG_ORMQR);
  add_in(nd, v);
  add_in(nd, t);
  add_in(nd, c);
  add_out(nd, out);
  nd.params.nn.i[0] = left;
  nd.params.nn.i[1] = transpose;
  launch(dev_of(c), nd);
  return out;
}

at::Tensor ormqr(const at::Tensor& V, const at::Tensor& tau, const at::Tensor& C, bool left, bool transpose) {
  if (!ormqr_ok(V, tau, C, left)) {
    note_cpu_fallback("aten::ormqr");
    return at::ormqr(V.cpu(), tau.cpu(), C.cpu(), left, transpose).to(C.device());
  }
  return ormqr_impl(V, tau, C, left, transpose);
}

at::Tensor& ormqr_out(const at::Tensor& V, const at::Tensor& tau, const at::Tensor& C, bool left, bool transpose,
                      at::Tensor& out) {
  if (!ormqr_ok(V, tau, C, left)) {
    note_cpu_fallback("aten::ormqr.out");
    return into_out(at::ormqr(V.cpu(), tau.cpu(), C.cpu(), left, transpose).to(out.device()), out);
  }
  return into_out(ormqr_impl(V, tau, C, left, transpose), out);
}

// ---------------------------------------------------------------- LDL^T

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> ldl_factor_ex_out(const at::Tensor& A, bool hermitian,
                                                                    bool check_errors, at::Tensor& LD,
                                                                    at::Tensor& pivots, at::Tensor& info) {
  if (!lapack_dtype(A) || !square_matrices(A)) {
    note_cpu_fallback("aten::linalg_ldl_factor_ex.out");
    to_outs(at::linalg_ldl_factor_ex(A.cpu(), hermitian, check_errors), {&LD, &pivots, &info});
    return {LD, pivots, info};
  }
  // Real matrices: the symmetric and the Hermitian factorizations are one.
  at::Tensor a = A.contiguous();
  at::Tensor ld = like(a, a.sizes(), a.scalar_type());
  at::Tensor piv = like(a, with(batch_of(a, 2), {a.size(-1)}), at::kInt), inf = like(a, batch_of(a, 2), at::kInt);
  hpu_node_t nd = make_node(HPU_OP_LINALG_LDL_FACTOR);
  add_in(nd, a);
  add_out(nd, ld);
  add_out(nd, piv);
  add_out(nd, inf);
  launch(dev_of(a), nd);
  to_outs(std::make_tuple(ld, piv, inf), {&LD, &pivots, &info});
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.ldl_factor_ex", A.dim() == 2);
  return {LD, pivots, info};
}

at::Tensor& ldl_solve_out(const at::Tensor& LD, const at::Tensor& pivots, const at::Tensor& B, bool hermitian,
                          at::Tensor& out) {
  bool ok = lapack_dtype(LD) && square_matrices(LD) && B.scalar_type() == LD.scalar_type() && B.dim() >= 2 &&
            pivots.scalar_type() == at::kInt && pivots.dim() == LD.dim() - 1 && pivots.size(-1) == LD.size(-1) &&
            same_batch(pivots, 1, LD, 2) && B.size(-2) == LD.size(-1) && batches_broadcast(LD, 2, B, 2);
  if (!ok) {
    note_cpu_fallback("aten::linalg_ldl_solve.out");
    return into_out(at::linalg_ldl_solve(LD.cpu(), pivots.cpu(), B.cpu(), hermitian).to(out.device()), out);
  }
  auto batch = at::infer_size(batch_of(LD, 2), batch_of(B, 2));
  int64_t n = LD.size(-1);
  at::Tensor ld = LD.expand(with(batch, {n, n})).contiguous();
  at::Tensor p = pivots.expand(with(batch, {n})).contiguous();
  at::Tensor b = B.expand(with(batch, {n, B.size(-1)})).contiguous();
  at::Tensor x = like(b, b.sizes(), b.scalar_type());
  hpu_node_t nd = make_node(HPU_OP_LINALG_LDL_SOLVE);
  add_in(nd, ld);
  add_in(nd, p);
  add_in(nd, b);
  add_out(nd, x);
  launch(dev_of(b), nd);
  return into_out(x, out);
}

// ---------------------------------------------------------------- least squares

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> lstsq_out(
    const at::Tensor& A, const at::Tensor& B, std::optional<double> rcond, std::optional<c10::string_view> driver,
    at::Tensor& solution, at::Tensor& residuals, at::Tensor& rank, at::Tensor& singular_values) {
  bool vector_case = B.dim() == A.dim() - 1;
  at::Tensor B_ = vector_case ? B.unsqueeze(-1) : B;
  bool ok = lapack_dtype(A) && B.scalar_type() == A.scalar_type() && A.dim() >= 2 && B_.dim() == A.dim() &&
            B_.size(-2) == A.size(-2) && (!driver.has_value() || *driver == "gelsy" || *driver == "gels") &&
            batches_broadcast(A, 2, B_, 2);
  if (!ok) {
    note_cpu_fallback("aten::linalg_lstsq.out");
    to_outs(at::linalg_lstsq(A.cpu(), B.cpu(), rcond, driver), {&solution, &residuals, &rank, &singular_values});
    return {solution, residuals, rank, singular_values};
  }
  int64_t m = A.size(-2), n = A.size(-1), k = B_.size(-1);
  auto batch = at::infer_size(batch_of(A, 2), batch_of(B_, 2));
  at::Tensor a = A.expand(with(batch, {m, n})).contiguous();
  at::Tensor b = B_.expand(with(batch, {m, k})).contiguous();
  bool gels = driver.has_value() && *driver == "gels";
  at::Tensor raw = like(a, with(batch, {std::max(m, n), k}), a.scalar_type()), r = like(a, batch, at::kLong);
  // The CPU's default cutoff: machine epsilon times the larger dimension.
  double eps = A.scalar_type() == at::kFloat ? std::numeric_limits<float>::epsilon()
                                             : std::numeric_limits<double>::epsilon();
  hpu_node_t nd = make_node(HPU_OP_LINALG_LSTSQ);
  add_in(nd, a);
  add_in(nd, b);
  add_out(nd, raw);
  add_out(nd, r);
  nd.params.nn.i[0] = gels;
  nd.params.nn.s[0] = hpu_scalar_float(rcond.has_value() ? *rcond : eps * std::max(m, n));
  launch(dev_of(a), nd);
  at::Tensor x = raw.narrow(-2, 0, n);
  at::Tensor empty = like(a, {0}, a.scalar_type());
  // As the CPU: gelsy gives a rank and no residuals; gels no rank, and the
  // residuals (the squared norms of what is left in rows n..m) when m > n.
  at::Tensor residuals_ = gels && m > n ? raw.narrow(-2, n, m - n).pow(2).sum(-2) : empty;
  at::Tensor rank_ = gels ? like(a, {0}, at::kLong) : r;
  to_outs(std::make_tuple(vector_case ? x.squeeze(-1) : x, residuals_, rank_, empty),
          {&solution, &residuals, &rank, &singular_values});
  return {solution, residuals, rank, singular_values};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("_linalg_svd.U", TORCH_FN(svd_out));
  m.impl("_linalg_eigh.eigenvalues", TORCH_FN(eigh_out));
  m.impl("linalg_qr.out", TORCH_FN(qr_out));
  m.impl("geqrf", TORCH_FN(geqrf));
  m.impl("geqrf.a", TORCH_FN(geqrf_out));
  m.impl("linalg_householder_product", TORCH_FN(householder_product));
  m.impl("linalg_householder_product.out", TORCH_FN(householder_product_out));
  m.impl("ormqr", TORCH_FN(ormqr));
  m.impl("ormqr.out", TORCH_FN(ormqr_out));
  m.impl("linalg_ldl_factor_ex.out", TORCH_FN(ldl_factor_ex_out));
  m.impl("linalg_ldl_solve.out", TORCH_FN(ldl_solve_out));
  m.impl("linalg_lstsq.out", TORCH_FN(lstsq_out));
}

}  // namespace habana_torch
