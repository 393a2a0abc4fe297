// Fused attention: torch.nn.functional.scaled_dot_product_attention on hpu
// runs the core's tiled kernel (HPU_OP_ATTENTION, csrc/kernels/attention.c)
// through PyTorch's "overrideable" SDPA backend. _fused_sdp_choice picks it
// when the kernel covers the call and the math path (matmul, softmax, ...
// as hpu ops) otherwise: dropout, grouped-query heads, a mask that needs a
// gradient, shapes other than [B, H, L, D]. The same two ops serve
// hpex.kernels.FusedSDPA.
#include <ATen/ATen.h>
#include <ATen/SDPBackend.h>
#include <torch/library.h>

#include <cmath>

#include "hpu_common.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace {

bool attention_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf;
}

// Can the kernel take this call (shapes, dtypes, devices, options)?
bool kernel_covers(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                   const std::optional<at::Tensor>& mask, double dropout_p) {
  if (dropout_p > 0.0) return false;
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return false;
  if (q.is_nested() || k.is_nested() || v.is_nested()) return false;
  if (!is_hpu(q) || !is_hpu(k) || !is_hpu(v)) return false;
  if (!attention_dtype(q.scalar_type()) || k.scalar_type() != q.scalar_type() ||
      v.scalar_type() != q.scalar_type())
    return false;
  // no broadcasting of batch or heads (grouped-query attention goes to math)
  if (k.size(0) != q.size(0) || v.size(0) != q.size(0) || k.size(1) != q.size(1) || v.size(1) != q.size(1))
    return false;
  if (k.size(2) != v.size(2) || k.size(3) != q.size(3) || q.size(3) < 1 || v.size(3) < 1) return false;
  if (mask.has_value() && mask->defined()) {
    const at::Tensor& m = *mask;
    if (!is_hpu(m) || m.requires_grad() || m.dim() > 4) return false;
    if (m.scalar_type() != at::kBool && !at::isFloatingType(m.scalar_type())) return false;
    std::vector<int64_t> want{q.size(0), q.size(1), q.size(2), k.size(2)};
    auto ms = m.sizes();
    for (int64_t i = 0; i < m.dim(); i++) {
      int64_t s = ms[m.dim() - 1 - i], w = want[3 - i];
      if (s != 1 && s != w) return false;
    }
  }
  return true;
}

int64_t fused_sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::optional<at::Tensor>& mask, double dropout_p, bool, std::optional<double>,
                         bool enable_gqa) {
  bool same_heads = q.dim() == 4 && k.dim() == 4 && q.size(1) == k.size(1);
  if ((enable_gqa && !same_heads) || !kernel_covers(q, k, v, mask, dropout_p))
    return static_cast<int64_t>(at::SDPBackend::math);
  return static_cast<int64_t>(at::SDPBackend::overrideable);
}

// The mask as the kernel reads it: bool, float32 or q's dtype, viewed as
// [B, H, L, S] (broadcast dims get stride 0, nothing is copied).
at::Tensor kernel_mask(const at::Tensor& m, const at::Tensor& q, int64_t S) {
  at::Tensor r = m;
  if (r.scalar_type() != at::kBool && r.scalar_type() != at::kFloat && r.scalar_type() != q.scalar_type())
    r = r.to(at::kFloat);
  return r.expand({q.size(0), q.size(1), q.size(2), S});
}

void check_inputs(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const std::optional<at::Tensor>& mask) {
  check_same_device(op, {&q, &k, &v});
  if (mask.has_value() && mask->defined()) check_same_device(op, {&q, &*mask});
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
              ": query, key and value must be 4-d [batch, heads, seq, head_dim], got ", q.dim(), ", ", k.dim(),
              " and ", v.dim(), " dims");
  TORCH_CHECK_TYPE(attention_dtype(q.scalar_type()), op, ": query must be float32, bfloat16 or float16, got ",
                   q.scalar_type());
  TORCH_CHECK_TYPE(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(), op,
                   ": query, key and value must have one dtype, got ", q.scalar_type(), ", ", k.scalar_type(),
                   " and ", v.scalar_type());
  TORCH_CHECK(k.size(3) == q.size(3), op, ": query and key head dims differ (", q.size(3), " and ", k.size(3),
              ")");
  TORCH_CHECK(k.size(2) == v.size(2), op, ": key and value sequence lengths differ (", k.size(2), " and ",
              v.size(2), ")");
  TORCH_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(1) == q.size(1) &&
                  v.size(1) == q.size(1),
              op, ": query, key and value must have the same batch size and number of heads, got ", q.sizes(),
              ", ", k.sizes(), " and ", v.sizes());
  TORCH_CHECK(q.size(3) > 0 && v.size(3) > 0, op, ": head dims must be positive");
  if (mask.has_value() && mask->defined()) {
    TORCH_CHECK_TYPE(mask->scalar_type() == at::kBool || at::isFloatingType(mask->scalar_type()), op,
                     ": attn_mask must be bool or floating point, got ", mask->scalar_type());
    TORCH_CHECK(at::is_expandable_to(mask->sizes(), {q.size(0), q.size(1), q.size(2), k.size(2)}), op,
                ": attn_mask of shape ", mask->sizes(), " does not broadcast to [", q.size(0), ", ", q.size(1),
                ", ", q.size(2), ", ", k.size(2), "]");
  }
}

// An hpu tensor of `shape` laid out in `like`'s dim order, as PyTorch's
// fake tensors for this op say (alloc_with_matching_layout): compiled
// graphs view the result with those strides.
at::Tensor new_like_layout(const at::Tensor& like, at::IntArrayRef shape) {
  if (like.sizes() == shape) return at::empty_like(like);
  std::vector<int64_t> order(like.dim());
  for (int64_t i = 0; i < like.dim(); i++) order[i] = i;
  auto st = like.strides();
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return st[a] > st[b]; });
  std::vector<int64_t> psize(like.dim()), inv(like.dim());
  for (int64_t i = 0; i < like.dim(); i++) {
    psize[i] = shape[order[i]];
    inv[order[i]] = i;
  }
  return new_hpu_tensor(psize, like.scalar_type(), like.device().index()).permute(inv);
}

double scale_of(const at::Tensor& q, std::optional<double> scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor,
           at::Tensor>
sdpa_overrideable(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal, bool return_debug_mask,
                  std::optional<double> scale) {
  const char* op = "scaled_dot_product_attention";
  check_inputs(op, q, k, v, attn_bias);
  TORCH_CHECK(dropout_p == 0.0, op, ": the fused hpu kernel has no dropout (dropout_p must be 0)");
  TORCH_CHECK(!return_debug_mask, op, ": the fused hpu kernel returns no debug mask");
  int64_t B = q.size(0), H = q.size(1), L = q.size(2), S = k.size(2), Dv = v.size(3);
  at::Tensor out = new_like_layout(q, {B, H, L, Dv});
  at::Tensor lse = new_hpu_tensor({B, H, L}, at::kFloat, q.device().index());
  if (out.numel() > 0 || lse.numel() > 0) {
    hpu_node_t n;
    init_node(&n, HPU_OP_ATTENTION);
    n.inputs[n.num_inputs++] = to_desc(q);
    n.inputs[n.num_inputs++] = to_desc(k);
    n.inputs[n.num_inputs++] = to_desc(v);
    at::Tensor m;
    if (attn_bias.has_value() && attn_bias->defined()) {
      m = kernel_mask(*attn_bias, q, S);
      n.inputs[n.num_inputs++] = to_desc(m);
    }
    n.outputs[n.num_outputs++] = to_desc(out);
    n.outputs[n.num_outputs++] = to_desc(lse);
    n.params.nn.i[0] = is_causal;
    n.params.nn.s[0] = hpu_scalar_float(scale_of(q, scale));
    launch(q.device().index(), n);
  }
  at::Tensor none;
  at::Tensor seed = at::empty({}, q.options().dtype(at::kLong));
  return {out, lse, none, none, c10::SymInt(L), c10::SymInt(S), seed, seed, none};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> sdpa_overrideable_backward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor&, const at::Tensor&, int64_t, int64_t, double dropout_p,
    bool is_causal, const at::Tensor&, const at::Tensor&, std::optional<double> scale) {
  const char* op = "scaled_dot_product_attention backward";
  std::optional<at::Tensor> mask;
  if (attn_bias.defined()) mask = attn_bias;
  check_inputs(op, q, k, v, mask);
  check_same_device(op, {&q, &grad_out, &out, &logsumexp});
  TORCH_CHECK(dropout_p == 0.0, op, ": the fused hpu kernel has no dropout (dropout_p must be 0)");
  TORCH_CHECK(!(grad_input_mask[3] && attn_bias.defined()), op,
              ": the fused hpu kernel gives no gradient for attn_mask (use the math backend)");
  int64_t B = q.size(0), H = q.size(1), L = q.size(2), S = k.size(2), Dv = v.size(3);
  TORCH_CHECK(grad_out.sizes() == out.sizes() && out.dim() == 4 && out.size(0) == B && out.size(1) == H &&
                  out.size(2) == L && out.size(3) == Dv,
              op, ": grad_out and out must be [", B, ", ", H, ", ", L, ", ", Dv, "]");
  TORCH_CHECK(logsumexp.dim() == 3 && logsumexp.size(0) == B && logsumexp.size(1) == H && logsumexp.size(2) == L &&
                  logsumexp.scalar_type() == at::kFloat,
              op, ": logsumexp must be float32 [", B, ", ", H, ", ", L, "]");
  at::ScalarType dt = q.scalar_type();
  // laid out as q, k and v (the fake tensors' empty_like)
  at::Tensor dq = at::empty_like(q), dk = at::empty_like(k), dv = at::empty_like(v);
  if (dq.numel() + dk.numel() + dv.numel() > 0) {
    // A node has at most 4 inputs: q | dO | O and k | v travel packed.
    at::Tensor qgo = at::cat({q, grad_out.to(dt), out.to(dt)}, -1);
    at::Tensor kv = at::cat({k, v}, -1);
    at::Tensor lse = logsumexp.contiguous();
    hpu_node_t n;
    init_node(&n, HPU_OP_ATTENTION_BACKWARD);
    n.inputs[n.num_inputs++] = to_desc(qgo);
    n.inputs[n.num_inputs++] = to_desc(kv);
    n.inputs[n.num_inputs++] = to_desc(lse);
    at::Tensor m;
    if (attn_bias.defined()) {
      m = kernel_mask(attn_bias, q, S);
      n.inputs[n.num_inputs++] = to_desc(m);
    }
    n.outputs[n.num_outputs++] = to_desc(dq);
    n.outputs[n.num_outputs++] = to_desc(dk);
    n.outputs[n.num_outputs++] = to_desc(dv);
    n.params.nn.i[0] = is_causal;
    n.params.nn.s[0] = hpu_scalar_float(scale_of(q, scale));
    launch(q.device().index(), n);
  }
  return {dq, dk, dv, at::Tensor()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("_fused_sdp_choice", TORCH_FN(fused_sdp_choice));
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(sdpa_overrideable));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", TORCH_FN(sdpa_overrideable_backward));
}

}  // namespace habana_torch
