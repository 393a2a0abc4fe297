// Shared by the linalg shim files (hpu_ops_linalg*.cpp): operand helpers
// and the LU nodes that solve, inv, det and lu_unpack build on.
#pragma once

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <tuple>
#include <vector>

#include "hpu_common.h"
#include "hpu_nn_node.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace linalg {

inline bool lapack_dtype(const at::Tensor& t) { return t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble; }

// A tensor of the given shape on t's card.
inline at::Tensor like(const at::Tensor& t, at::IntArrayRef shape, at::ScalarType dt) {
  return new_hpu_tensor(shape, dt, t.device().index());
}

inline std::vector<int64_t> batch_of(const at::Tensor& t, int64_t trail) {
  return std::vector<int64_t>(t.sizes().begin(), t.sizes().end() - trail);
}

inline std::vector<int64_t> with(std::vector<int64_t> v, std::initializer_list<int64_t> tail) {
  v.insert(v.end(), tail.begin(), tail.end());
  return v;
}

// LU factorization with partial pivoting of contiguous A: (LU, pivots, info).
inline std::tuple<at::Tensor, at::Tensor, at::Tensor> lu_factor(const at::Tensor& A) {
  at::Tensor a = A.contiguous();
  int64_t m = a.size(-2), n = a.size(-1);
  auto batch = batch_of(a, 2);
  at::Tensor LU = like(a, a.sizes(), a.scalar_type());
  at::Tensor piv = like(a, with(batch, {std::min(m, n)}), at::kInt);
  at::Tensor info = like(a, batch, at::kInt);
  hpu_node_t nd = make_node(HPU_OP_LINALG_LU_FACTOR);
  add_in(nd, a);
  add_out(nd, LU);
  add_out(nd, piv);
  add_out(nd, info);
  launch(dev_of(a), nd);
  return {LU, piv, info};
}

// X with op(A) X = B (left) or X op(A) = B, A given by lu_factor; batch
// dims broadcast.
inline at::Tensor lu_solve(const at::Tensor& LU, const at::Tensor& piv, const at::Tensor& B, bool left, bool adjoint) {
  auto batch = at::infer_size(batch_of(LU, 2), batch_of(B, 2));
  int64_t n = LU.size(-1);
  at::Tensor lu = LU.expand(with(batch, {n, n})).contiguous();
  at::Tensor p = piv.expand(with(batch, {n})).contiguous();
  at::Tensor b = B.expand(with(batch, {B.size(-2), B.size(-1)})).contiguous();
  at::Tensor X = like(b, b.sizes(), b.scalar_type());
  hpu_node_t nd = make_node(HPU_OP_LINALG_LU_SOLVE);
  add_in(nd, lu);
  add_in(nd, p);
  add_in(nd, b);
  add_out(nd, X);
  nd.params.nn.i[0] = left;
  nd.params.nn.i[1] = adjoint;
  launch(dev_of(b), nd);
  return X;
}

template <typename... T>
void to_outs(std::tuple<T...>&& results, std::initializer_list<at::Tensor*> outs) {
  std::vector<at::Tensor> r;
  std::apply([&](auto&... x) { (r.push_back(x), ...); }, results);
  size_t i = 0;
  for (at::Tensor* o : outs) into_out(r[i++], *o);
}

inline bool square_matrices(const at::Tensor& A) { return A.dim() >= 2 && A.size(-1) == A.size(-2); }

// Batch dims of a and b broadcast, or false when they do not.
inline bool batches_broadcast(const at::Tensor& a, int64_t a_trail, const at::Tensor& b, int64_t b_trail) {
  try {
    at::infer_size(batch_of(a, a_trail), batch_of(b, b_trail));
  } catch (const c10::Error&) {
    return false;
  }
  return true;
}

}  // namespace linalg
}  // namespace habana_torch
