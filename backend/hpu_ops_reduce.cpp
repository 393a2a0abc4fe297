// The reductions of the nn op family: sum, mean, prod, amax / amin, max /
// min, argmax / argmin, any / all, norms, var / std (and their _mean forms),
// cumsum / cumprod / logcumsumexp. Each works out PyTorch's result shape and
// dtype, raises PyTorch's errors for bad arguments, and launches C nodes
// (csrc/include/hpu/ops_nn.def); the kernels do the math.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <torch/library.h>

#include "hpu_common.h"
#include "hpu_nn_node.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace {

// Bit mask of the reduced dims (empty / absent list = all dims).
uint64_t dim_mask(const at::Tensor& self, at::OptionalIntArrayRef dims, const char* op) {
  int64_t nd = self.dim();
  TORCH_CHECK(nd <= HPU_MAX_DIMS, op, ": at most ", HPU_MAX_DIMS, " dims are supported");
  if (!dims.has_value() || dims->empty()) return nd ? ((uint64_t)1 << nd) - 1 : 0;
  uint64_t m = 0;
  for (int64_t d : *dims) {
    int64_t w = at::maybe_wrap_dim(d, nd);
    TORCH_CHECK(!((m >> w) & 1), "dim ", w, " appears multiple times in the list of dims");
    m |= (uint64_t)1 << w;
  }
  return m;
}

std::vector<int64_t> reduced_shape(const at::Tensor& self, uint64_t mask, bool keepdim) {
  std::vector<int64_t> s;
  for (int64_t d = 0; d < self.dim(); d++) {
    if ((mask >> d) & 1) {
      if (keepdim) s.push_back(1);
    } else {
      s.push_back(self.size(d));
    }
  }
  return s;
}

// Descriptor of `out` (reduced shape, keepdim or not) in keepdim form.
hpu_tensor_t keepdim_desc(const at::Tensor& out, const at::Tensor& self, uint64_t mask) {
  hpu_tensor_t d = to_desc(out);
  if (out.dim() == self.dim()) return d;
  hpu_tensor_t k = d;
  k.ndim = (int)self.dim();
  int j = 0;
  for (int64_t i = 0; i < self.dim(); i++) {
    if ((mask >> i) & 1) {
      k.sizes[i] = 1;
      k.strides[i] = 0;
    } else {
      k.sizes[i] = d.sizes[j];
      k.strides[i] = d.strides[j];
      j++;
    }
  }
  return k;
}

void check_nonempty_reduction(const at::Tensor& self, uint64_t mask, const char* op) {
  if (self.numel() != 0) return;
  for (int64_t d = 0; d < self.dim(); d++)
    TORCH_CHECK(!(((mask >> d) & 1) && self.size(d) == 0), op, "(): Expected reduction dim ", d,
                " to have non-zero size.");
  TORCH_CHECK(self.dim() > 0 || self.numel() > 0, op, "(): Expected reduction dim to be specified for input.numel() == 0.");
}

void run_reduce(hpu_reduce_kind_t kind, const at::Tensor& self, uint64_t mask, const at::Tensor& out,
                double s0 = 0, const at::Tensor* out1 = nullptr) {
  check_same_device("reduce", {&self, &out});
  if (out.numel() == 0) return;
  hpu_node_t n = make_node(HPU_OP_REDUCE);
  n.num_inputs = 1;
  n.inputs[0] = to_desc(self);
  n.num_outputs = 1;
  n.outputs[0] = keepdim_desc(out, self, mask);
  if (out1) n.outputs[n.num_outputs++] = keepdim_desc(*out1, self, mask);
  n.compute_dtype = n.outputs[0].dtype;
  n.params.nn.i[0] = kind;
  n.params.nn.i[1] = (int64_t)mask;
  n.params.nn.s[0] = hpu_scalar_float(s0);
  launch(dev_of(out), n);
}

at::ScalarType sum_type(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  if (dtype) return *dtype;
  if (at::isIntegralType(self.scalar_type(), /*includeBool=*/true)) return at::kLong;
  return self.scalar_type();
}

at::Tensor& reduce_into(hpu_reduce_kind_t kind, const at::Tensor& self, at::OptionalIntArrayRef dims,
                        bool keepdim, at::Tensor& out, const char* op, double s0 = 0) {
  check_hpu_dtype(self.scalar_type(), op);
  uint64_t mask = dim_mask(self, dims, op);
  at::native::resize_output(out, reduced_shape(self, mask, keepdim));
  run_reduce(kind, self, mask, out, s0);
  return out;
}

at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype, at::Tensor& out) {
  return reduce_into(HPU_REDUCE_SUM, self, dim, keepdim, out, "sum");
}
at::Tensor& sum_full_out(const at::Tensor& self, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  return reduce_into(HPU_REDUCE_SUM, self, {}, false, out, "sum");
}

at::ScalarType float_result(const at::Tensor& self, std::optional<at::ScalarType> dtype, const char* op) {
  at::ScalarType t = dtype ? *dtype : self.scalar_type();
  TORCH_CHECK(at::isFloatingType(t), op,
              "(): could not infer output dtype. Input dtype must be either a floating point or "
              "complex dtype. Got: ", t);
  return t;
}

at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                     std::optional<at::ScalarType> dtype, at::Tensor& out) {
  float_result(self, dtype, "mean");
  return reduce_into(HPU_REDUCE_MEAN, self, dim, keepdim, out, "mean");
}
at::Tensor& mean_full_out(const at::Tensor& self, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  float_result(self, dtype, "mean");
  return reduce_into(HPU_REDUCE_MEAN, self, {}, false, out, "mean");
}

at::Tensor& prod_int_out(const at::Tensor& self, int64_t dim, bool keepdim,
                         std::optional<at::ScalarType> dtype, at::Tensor& out) {
  return reduce_into(HPU_REDUCE_PROD, self, at::IntArrayRef{dim}, keepdim, out, "prod");
}
at::Tensor prod(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  at::Tensor out = at::empty({}, self.options().dtype(sum_type(self, dtype)));
  return reduce_into(HPU_REDUCE_PROD, self, {}, false, out, "prod");
}

at::Tensor& amax_out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  check_nonempty_reduction(self, dim_mask(self, dim, "amax"), "amax");
  return reduce_into(HPU_REDUCE_AMAX, self, dim, keepdim, out, "amax");
}
at::Tensor& amin_out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  check_nonempty_reduction(self, dim_mask(self, dim, "amin"), "amin");
  return reduce_into(HPU_REDUCE_AMIN, self, dim, keepdim, out, "amin");
}

at::Tensor full_minmax(const at::Tensor& self, hpu_reduce_kind_t kind, const char* op) {
  TORCH_CHECK(self.numel() > 0, op,
              "(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
              "reduction dim with the 'dim' argument.");
  at::Tensor out = at::empty({}, self.options());
  return reduce_into(kind, self, {}, false, out, op);
}
at::Tensor max_full(const at::Tensor& self) { return full_minmax(self, HPU_REDUCE_AMAX, "max"); }
at::Tensor min_full(const at::Tensor& self) { return full_minmax(self, HPU_REDUCE_AMIN, "min"); }
at::Tensor& max_unary_out(const at::Tensor& self, at::Tensor& out) {
  return into_out(max_full(self), out);
}
at::Tensor& min_unary_out(const at::Tensor& self, at::Tensor& out) {
  return into_out(min_full(self), out);
}

at::Tensor& bool_reduce_out(hpu_reduce_kind_t kind, const at::Tensor& self, at::OptionalIntArrayRef dims,
                            bool keepdim, at::Tensor& out, const char* op) {
  return reduce_into(kind, self, dims, keepdim, out, op);
}
at::Tensor& any_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {
  return bool_reduce_out(HPU_REDUCE_ANY, self, at::IntArrayRef{dim}, keepdim, out, "any");
}
at::Tensor& any_dims_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, at::Tensor& out) {
  return bool_reduce_out(HPU_REDUCE_ANY, self, dim, keepdim, out, "any");
}
at::Tensor& any_all_out(const at::Tensor& self, at::Tensor& out) {
  return bool_reduce_out(HPU_REDUCE_ANY, self, {}, false, out, "any");
}
at::Tensor& all_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {
  return bool_reduce_out(HPU_REDUCE_ALL, self, at::IntArrayRef{dim}, keepdim, out, "all");
}
at::Tensor& all_dims_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, at::Tensor& out) {
  return bool_reduce_out(HPU_REDUCE_ALL, self, dim, keepdim, out, "all");
}
at::Tensor& all_all_out(const at::Tensor& self, at::Tensor& out) {
  return bool_reduce_out(HPU_REDUCE_ALL, self, {}, false, out, "all");
}

at::Tensor& vector_norm_out(const at::Tensor& self, const c10::Scalar& ord, at::OptionalIntArrayRef dim,
                            bool keepdim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || dtype.has_value(),
              "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ",
              self.scalar_type());
  double p = ord.toDouble();
  if (self.numel() == 0 && p < 0)
    TORCH_CHECK(false, "linalg.vector_norm cannot compute the ", ord, " norm on an empty tensor "
                "because the operation does not have an identity");
  if (std::isinf(p) && p > 0) check_nonempty_reduction(self, dim_mask(self, dim, "linalg.vector_norm"), "linalg.vector_norm");
  return reduce_into(HPU_REDUCE_NORM, self, dim, keepdim, out, "linalg.vector_norm", p);
}
at::Tensor& norm_out(const at::Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim,
                     bool keepdim, at::Tensor& out) {
  return vector_norm_out(self, p.value_or(2), dim, keepdim, std::nullopt, out);
}

double correction_of(const std::optional<c10::Scalar>& c) { return c ? c->toDouble() : 1.0; }

std::tuple<at::Tensor&, at::Tensor&> var_mean_into(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                                   double corr, bool keepdim, at::Tensor& var,
                                                   at::Tensor* mean, bool std, const char* op) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), op,
              ": only support floating point and complex dtypes, got ", self.scalar_type());
  check_hpu_dtype(self.scalar_type(), op);
  uint64_t mask = dim_mask(self, dim, op);
  auto shape = reduced_shape(self, mask, keepdim);
  at::native::resize_output(var, shape);
  if (mean) at::native::resize_output(*mean, shape);
  run_reduce(std ? HPU_REDUCE_STD : HPU_REDUCE_VAR, self, mask, var, corr, mean);
  return {var, mean ? *mean : var};
}

at::Tensor var_correction(const at::Tensor& self, at::OptionalIntArrayRef dim,
                          const std::optional<c10::Scalar>& correction, bool keepdim) {
  at::Tensor out = at::empty({0}, self.options());
  var_mean_into(self, dim, correction_of(correction), keepdim, out, nullptr, false, "var");
  return out;
}
at::Tensor& var_correction_out(const at::Tensor& self, at::OptionalIntArrayRef dim,
                               const std::optional<c10::Scalar>& correction, bool keepdim, at::Tensor& out) {
  var_mean_into(self, dim, correction_of(correction), keepdim, out, nullptr, false, "var");
  return out;
}
at::Tensor std_correction(const at::Tensor& self, at::OptionalIntArrayRef dim,
                          const std::optional<c10::Scalar>& correction, bool keepdim) {
  at::Tensor out = at::empty({0}, self.options());
  var_mean_into(self, dim, correction_of(correction), keepdim, out, nullptr, true, "std");
  return out;
}
at::Tensor& std_correction_out(const at::Tensor& self, at::OptionalIntArrayRef dim,
                               const std::optional<c10::Scalar>& correction, bool keepdim, at::Tensor& out) {
  var_mean_into(self, dim, correction_of(correction), keepdim, out, nullptr, true, "std");
  return out;
}
std::tuple<at::Tensor, at::Tensor> var_mean_correction(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                                       const std::optional<c10::Scalar>& correction,
                                                       bool keepdim) {
  at::Tensor v = at::empty({0}, self.options()), m = at::empty({0}, self.options());
  var_mean_into(self, dim, correction_of(correction), keepdim, v, &m, false, "var_mean");
  return {v, m};
}
std::tuple<at::Tensor, at::Tensor> std_mean_correction(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                                       const std::optional<c10::Scalar>& correction,
                                                       bool keepdim) {
  at::Tensor v = at::empty({0}, self.options()), m = at::empty({0}, self.options());
  var_mean_into(self, dim, correction_of(correction), keepdim, v, &m, true, "std_mean");
  return {v, m};
}

// max/min along a dim with indices, argmax/argmin.
void run_argreduce(hpu_reduce_kind_t kind, const at::Tensor& self, int64_t dim, const at::Tensor* values,
                   const at::Tensor& indices) {
  if (indices.numel() == 0) return;
  uint64_t mask = self.dim() ? (uint64_t)1 << dim : 0;
  hpu_node_t n = make_node(HPU_OP_ARGREDUCE);
  n.num_inputs = 1;
  n.inputs[0] = to_desc(self);
  if (values) n.outputs[n.num_outputs++] = keepdim_desc(*values, self, mask);
  n.outputs[n.num_outputs++] = keepdim_desc(indices, self, mask);
  n.compute_dtype = n.inputs[0].dtype;
  n.params.nn.i[0] = kind;
  n.params.nn.i[1] = dim;
  launch(dev_of(indices), n);
}

std::tuple<at::Tensor&, at::Tensor&> minmax_dim_out(hpu_reduce_kind_t kind, const at::Tensor& self,
                                                    int64_t dim, bool keepdim, at::Tensor& values,
                                                    at::Tensor& indices, const char* op) {
  check_hpu_dtype(self.scalar_type(), op);
  check_same_device(op, {&self, &values, &indices});
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(self.numel() != 0 || (self.dim() > 0 && self.size(dim) != 0), op,
              "(): Expected reduction dim ", dim, " to have non-zero size.");
  uint64_t mask = self.dim() ? (uint64_t)1 << dim : 0;
  auto shape = reduced_shape(self, mask, keepdim);
  at::native::resize_output(values, shape);
  at::native::resize_output(indices, shape);
  run_argreduce(kind, self, dim, &values, indices);
  return {values, indices};
}
std::tuple<at::Tensor&, at::Tensor&> max_dim_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                                 at::Tensor& values, at::Tensor& indices) {
  return minmax_dim_out(HPU_REDUCE_AMAX, self, dim, keepdim, values, indices, "max");
}
std::tuple<at::Tensor&, at::Tensor&> min_dim_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                                 at::Tensor& values, at::Tensor& indices) {
  return minmax_dim_out(HPU_REDUCE_AMIN, self, dim, keepdim, values, indices, "min");
}

at::Tensor& arg_out(hpu_reduce_kind_t kind, const at::Tensor& self, std::optional<int64_t> dim,
                    bool keepdim, at::Tensor& out, const char* op) {
  check_hpu_dtype(self.scalar_type(), op);
  check_same_device(op, {&self, &out});
  if (!dim.has_value()) {
    TORCH_CHECK(self.numel() != 0, op, "(): Expected reduction dim to be specified for input.numel() == 0.");
    at::native::resize_output(out, keepdim ? std::vector<int64_t>(self.dim(), 1) : std::vector<int64_t>{});
    at::Tensor flat = self.reshape({-1});
    run_argreduce(kind, flat, 0, nullptr, out.view({1}));
    return out;
  }
  int64_t d = at::maybe_wrap_dim(*dim, self.dim());
  TORCH_CHECK(self.numel() != 0 || (self.dim() > 0 && self.size(d) != 0), op, "(): Expected reduction dim ", d,
              " to have non-zero size.");
  uint64_t mask = self.dim() ? (uint64_t)1 << d : 0;
  at::native::resize_output(out, reduced_shape(self, mask, keepdim));
  run_argreduce(kind, self, d, nullptr, out);
  return out;
}
at::Tensor& argmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
  return arg_out(HPU_REDUCE_AMAX, self, dim, keepdim, out, "argmax");
}
at::Tensor& argmin_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
  return arg_out(HPU_REDUCE_AMIN, self, dim, keepdim, out, "argmin");
}

// The cumsum node's modes (params i[1]): sum, product, log-sum-exp.
enum { CUM_SUM = 0, CUM_PROD = 1, CUM_LOGSUMEXP = 2 };

at::Tensor& cum_out(const at::Tensor& self, int64_t dim, at::Tensor& out, int mode) {
  static const char* const names[] = {"cumsum", "cumprod", "_logcumsumexp"};
  const char* name = names[mode];
  check_hpu_dtype(self.scalar_type(), name);
  check_same_device(name, {&self, &out});
  if (mode == CUM_LOGSUMEXP) {
    // logcumsumexp's out= form checks the dtypes and casts self to out's
    // before it gets here; these are for _logcumsumexp called directly
    TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"logcumsumexp_out_cpu\" not implemented for '",
                                self.scalar_type(), "' on hpu (floating types only)");
    TORCH_CHECK(out.scalar_type() == self.scalar_type(), "expected scalar_type ", self.scalar_type(), " but found ",
                out.scalar_type());
  }
  dim = at::maybe_wrap_dim(dim, self.dim());
  at::native::resize_output(out, self.sizes());
  if (out.numel() == 0) return out;
  hpu_node_t n = make_node(HPU_OP_CUMSUM);
  // the CPU's cumprod multiplies self already cast to the result's dtype
  bool cast = mode == CUM_PROD && self.scalar_type() != out.scalar_type();
  add_in(n, cast ? self.to(out.scalar_type()) : self);
  add_out(n, out);
  n.compute_dtype = n.outputs[0].dtype;
  n.params.nn.i[0] = dim;
  n.params.nn.i[1] = mode;
  launch(dev_of(out), n);
  return out;
}
at::Tensor& cumsum_out(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  return cum_out(self, dim, out, CUM_SUM);
}
at::Tensor& cumprod_out(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  return cum_out(self, dim, out, CUM_PROD);
}
at::Tensor logcumsumexp(const at::Tensor& self, int64_t dim) {
  at::Tensor out = at::empty({0}, self.options());
  return cum_out(self, dim, out, CUM_LOGSUMEXP);
}
at::Tensor& logcumsumexp_out(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  return cum_out(self, dim, out, CUM_LOGSUMEXP);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("sum.IntList_out", TORCH_FN(sum_out));
  m.impl("sum.out", TORCH_FN(sum_full_out));
  m.impl("mean.out", TORCH_FN(mean_out));
  m.impl("mean.dtype_out", TORCH_FN(mean_full_out));
  m.impl("prod.int_out", TORCH_FN(prod_int_out));
  m.impl("prod", TORCH_FN(prod));
  m.impl("amax.out", TORCH_FN(amax_out));
  m.impl("amin.out", TORCH_FN(amin_out));
  m.impl("max", TORCH_FN(max_full));
  m.impl("min", TORCH_FN(min_full));
  m.impl("max.unary_out", TORCH_FN(max_unary_out));
  m.impl("min.unary_out", TORCH_FN(min_unary_out));
  m.impl("max.dim_max", TORCH_FN(max_dim_out));
  m.impl("min.dim_min", TORCH_FN(min_dim_out));
  m.impl("argmax.out", TORCH_FN(argmax_out));
  m.impl("argmin.out", TORCH_FN(argmin_out));
  m.impl("any.out", TORCH_FN(any_dim_out));
  m.impl("any.dims_out", TORCH_FN(any_dims_out));
  m.impl("any.all_out", TORCH_FN(any_all_out));
  m.impl("all.out", TORCH_FN(all_dim_out));
  m.impl("all.dims_out", TORCH_FN(all_dims_out));
  m.impl("all.all_out", TORCH_FN(all_all_out));
  m.impl("linalg_vector_norm.out", TORCH_FN(vector_norm_out));
  m.impl("norm.out", TORCH_FN(norm_out));
  m.impl("var.correction", TORCH_FN(var_correction));
  m.impl("var.correction_out", TORCH_FN(var_correction_out));
  m.impl("std.correction", TORCH_FN(std_correction));
  m.impl("std.correction_out", TORCH_FN(std_correction_out));
  m.impl("var_mean.correction", TORCH_FN(var_mean_correction));
  m.impl("std_mean.correction", TORCH_FN(std_mean_correction));
  m.impl("cumsum.out", TORCH_FN(cumsum_out));
  m.impl("cumprod.out", TORCH_FN(cumprod_out));
  m.impl("_logcumsumexp", TORCH_FN(logcumsumexp));
  m.impl("_logcumsumexp.out", TORCH_FN(logcumsumexp_out));
}


}  // namespace habana_torch
