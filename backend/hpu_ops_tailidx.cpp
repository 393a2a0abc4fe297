// The tail family (csrc/include/hpu/ops_tailidx.def): scatter_reduce,
// index_reduce, cummax / cummin, take, put_ and index_fill_. Each forwarder
// raises PyTorch's errors for bad arguments, shapes the result, and launches
// one node; the kernels (csrc/kernels/tail_*.c) do the work. Index values
// are device data: a bad one fails the node and the next synchronize raises
// IndexError, as for the nn family's index ops.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <limits>
#include <string_view>
#include <vector>

#include "hpu_common.h"
#include "hpu_nn_node.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace {

// ---- scatter_reduce / index_reduce --------------------------------------------

hpu_tail_reduce_t parse_reduce(std::string_view reduce, bool index_reduce) {
  if (!index_reduce && reduce == "sum") return HPU_TAIL_SUM;
  if (reduce == "prod") return HPU_TAIL_PROD;
  if (reduce == "mean") return HPU_TAIL_MEAN;
  if (reduce == "amax") return HPU_TAIL_AMAX;
  if (reduce == "amin") return HPU_TAIL_AMIN;
  TORCH_CHECK(!index_reduce, "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got ", reduce,
              ".");
  TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin.");
}

at::Tensor& launch_reduce(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                          hpu_tail_reduce_t kind, bool include_self, bool index_mode, at::Tensor& out) {
  at::native::resize_output(out, self.sizes());
  if (!out.is_same(self)) out.copy_(self);
  if (index.numel() == 0 || out.numel() == 0) return out;
  hpu_node_t n = make_node(HPU_OP_TAIL_SCATTER_REDUCE);
  add_in(n, index);
  add_in(n, src);
  add_out(n, out);
  n.compute_dtype = n.outputs[0].dtype;
  n.params.nn.i[0] = dim;
  n.params.nn.i[1] = kind;
  n.params.nn.i[2] = include_self;
  n.params.nn.i[3] = index_mode;
  launch(dev_of(out), n);
  return out;
}

at::Tensor& scatter_reduce_two_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                   std::string_view reduce, bool include_self, at::Tensor& out) {
  const char* op = "scatter_reduce";
  check_hpu_dtype(self.scalar_type(), op);
  check_same_device(op, {&self, &index, &src, &out});
  dim = at::maybe_wrap_dim(dim, self.dim());
  hpu_tail_reduce_t kind = parse_reduce(reduce, false);
  TORCH_CHECK(index.numel() == 0 || index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "scatter(): Expected dtype int32/int64 for index");
  TORCH_CHECK(src.scalar_type() == self.scalar_type(), "scatter(): Expected self.dtype to be equal to src.dtype");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), op, "(): Expected out.dtype to be equal to self.dtype");
  int64_t sd = std::max<int64_t>(self.dim(), 1), id = std::max<int64_t>(index.dim(), 1),
          rd = std::max<int64_t>(src.dim(), 1);
  TORCH_CHECK(index.numel() == 0 || (sd == id && rd == id),
              "Index tensor must have the same number of dimensions as self tensor");
  for (int64_t d = 0; index.numel() && d < index.dim(); d++) {
    TORCH_CHECK(d == dim || index.size(d) <= (self.dim() ? self.size(d) : 1), "Size does not match at dimension ", d,
                " expected index ", index.sizes(), " to be no larger than self ", self.sizes(),
                " apart from dimension ", dim);
    TORCH_CHECK(index.size(d) <= (src.dim() ? src.size(d) : 1), "Expected index ", index.sizes(),
                " to be no larger than src ", src.sizes());
  }
  return launch_reduce(self, dim, index, src, kind, include_self, false, out);
}

at::Tensor& index_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                             std::string_view reduce, bool include_self, at::Tensor& out) {
  const char* op = "index_reduce";
  hpu_tail_reduce_t kind = parse_reduce(reduce, true);
  check_hpu_dtype(self.scalar_type(), op);
  check_same_device(op, {&self, &index, &source, &out});
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_reduce_(): Index is supposed to be a vector, but got dim: ", index.dim(),
                    " with type: ", index.scalar_type(), " and size: ", index.sizes());
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_reduce_(): Expected dtype int32/int64 for index but got: ", index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "index_reduce_(): self (", self.scalar_type(),
              ") and source (", source.scalar_type(), ") must have the same scalar type");
  TORCH_CHECK(dim == 0 || dim < source.dim(), "index_reduce_(): Indexing dim ", dim,
              " is out of bounds of the source tensor with dim ", source.dim());
  int64_t len = source.dim() == 0 ? 1 : source.size(dim);
  TORCH_CHECK(index.numel() == len, "index_reduce_(): Number of indices (", index.numel(),
              ") should be equal to source.size(dim): (", len, "), for dim: ", dim);
  TORCH_CHECK(std::max<int64_t>(self.dim(), 1) == std::max<int64_t>(source.dim(), 1),
              "index_reduce_(): Source/destination tensor must have same slice shapes");
  for (int64_t d = 0; d < self.dim(); d++)
    TORCH_CHECK(d == dim || self.size(d) == source.size(d),
                "index_reduce_(): Source/destination tensor must have same slice shapes");
  return launch_reduce(self, dim, index, source, kind, include_self, true, out);
}

// ---- cummax / cummin ----------------------------------------------------------

void cummaxmin_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim, bool min) {
  const char* op = min ? "cummin" : "cummax";
  check_hpu_dtype(self.scalar_type(), op);
  check_same_device(op, {&self, &values, &indices});
  dim = at::maybe_wrap_dim(dim, self.dim());
  at::native::resize_output(values, self.sizes());
  at::native::resize_output(indices, self.sizes());
  if (self.numel() == 0) return;
  hpu_node_t n = make_node(HPU_OP_TAIL_CUMMAXMIN);
  add_in(n, self);
  add_out(n, values);
  add_out(n, indices);
  n.compute_dtype = n.outputs[0].dtype;
  n.params.nn.i[0] = dim;
  n.params.nn.i[1] = min;
  launch(dev_of(self), n);
}
void cummax_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  cummaxmin_helper(self, values, indices, dim, false);
}
void cummin_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  cummaxmin_helper(self, values, indices, dim, true);
}

// ---- take / put_ ---------------------------------------------------------------

at::Tensor& take_out(const at::Tensor& self, const at::Tensor& index, at::Tensor& out) {
  check_hpu_dtype(self.scalar_type(), "take");
  check_same_device("take", {&self, &index, &out});
  TORCH_CHECK(index.scalar_type() == at::kLong, "take(): Expected a long tensor for index, but found ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "take(): self and out expected to have the same dtype, but got self.dtype = ",
              self.scalar_type(), " and out.dtype = ", out.scalar_type());
  TORCH_CHECK_INDEX(!(self.numel() == 0 && index.numel() != 0), "take(): tried to take from an empty tensor");
  at::native::resize_output(out, index.sizes());
  if (index.numel() == 0) return out;
  hpu_node_t n = make_node(HPU_OP_TAIL_TAKE_PUT);
  add_in(n, self);
  add_in(n, index);
  add_out(n, out);
  n.compute_dtype = n.outputs[0].dtype;
  launch(dev_of(self), n);
  return out;
}
at::Tensor take(const at::Tensor& self, const at::Tensor& index) {
  at::Tensor out = at::empty(index.sizes(), self.options());
  return take_out(self, index, out);
}

at::Tensor& put_(at::Tensor& self, const at::Tensor& index, const at::Tensor& source, bool accumulate) {
  check_hpu_dtype(self.scalar_type(), "put_");
  check_same_device("put_", {&self, &index, &source});
  TORCH_CHECK(index.scalar_type() == at::kLong, "put_(): Expected a long tensor for index, but found ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "put_(): self and source expected to have the same dtype, but got self.dtype = ", self.scalar_type(),
              " and source.dtype = ", source.scalar_type());
  TORCH_CHECK(source.numel() == index.numel(),
              "put_(): Expected source and index to have the same number of elements, but got source.numel() = ",
              source.numel(), ", index.numel() = ", index.numel());
  TORCH_CHECK_INDEX(!(self.numel() == 0 && index.numel() != 0), "put_(): Tried to put elements into an empty tensor");
  if (index.numel() == 0) return self;
  hpu_node_t n = make_node(HPU_OP_TAIL_TAKE_PUT);
  add_in(n, index);
  add_in(n, source);
  add_out(n, self);
  n.compute_dtype = n.outputs[0].dtype;
  n.params.nn.i[0] = 1;
  n.params.nn.i[1] = accumulate;
  launch(dev_of(self), n);
  return self;
}

// ---- index_fill_ -----------------------------------------------------------------

at::Tensor& index_fill_scalar(at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value) {
  check_hpu_dtype(self.scalar_type(), "index_fill_");
  check_same_device("index_fill_", {&self, &index});
  TORCH_CHECK_INDEX(index.scalar_type() == at::kLong, "index_fill_(): Expected dtype int64 for index.");
  TORCH_CHECK(index.dim() <= 1, "Index has to be a vector/scalar");
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (index.numel() == 0 || self.numel() == 0) return self;
  hpu_node_t n = make_node(HPU_OP_TAIL_INDEX_FILL);
  add_in(n, index);
  add_out(n, self);
  n.compute_dtype = n.outputs[0].dtype;
  n.params.nn.i[0] = dim;
  n.params.nn.s[0] = to_hpu_scalar(value);
  launch(dev_of(self), n);
  return self;
}
at::Tensor& index_fill_tensor(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "index_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  // the CPU reads the value on the host as well
  return index_fill_scalar(self, dim, index, value.item());
}


// ---- kthvalue / median / nanmedian / mode -------------------------------------------

std::tuple<at::Tensor&, at::Tensor&> select_out(const at::Tensor& self, int64_t dim, bool keepdim, int mode, int64_t k,
                                                at::Tensor& values, at::Tensor& indices, const char* op) {
  check_hpu_dtype(self.scalar_type(), op);
  check_same_device(op, {&self, &values, &indices});
  // the CPU orders no bools but for mode
  TORCH_CHECK_NOT_IMPLEMENTED(mode == HPU_TAIL_SELECT_MODE || self.scalar_type() != at::kBool, "\"", op,
                              "\" not implemented for 'Bool'");
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), op, "(): Expected out tensor to have dtype ",
              self.scalar_type(), ", but got ", values.scalar_type(), " instead");
  TORCH_CHECK(indices.scalar_type() == at::kLong, op, "(): Expected out tensor to have dtype long, but got ",
              indices.scalar_type(), " instead");
  dim = at::maybe_wrap_dim(dim, self.dim());
  int64_t len = self.dim() ? self.size(dim) : 1;
  // nanmedian's message names median, as the CPU's
  TORCH_CHECK_INDEX(self.dim() == 0 || len > 0, mode == HPU_TAIL_SELECT_NANMEDIAN ? "median" : op,
                    "(): Expected reduction dim ", dim, " to have non-zero size.");
  if (mode == HPU_TAIL_SELECT_KTH)
    TORCH_CHECK(k >= 1 && k <= len, "kthvalue(): selected number k out of range for dimension ", dim);
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.dim()) shape[dim] = 1;
  at::Tensor v = at::empty(shape, values.options()), i = at::empty(shape, indices.options());
  if (self.numel() > 0) {
    hpu_node_t n = make_node(HPU_OP_TAIL_SELECT);
    add_in(n, self);
    add_out(n, v);
    add_out(n, i);
    n.compute_dtype = n.outputs[0].dtype;
    n.params.nn.i[0] = dim;
    n.params.nn.i[1] = mode;
    n.params.nn.i[2] = k;
    launch(dev_of(self), n);
  }
  if (!keepdim && self.dim()) {
    v = v.squeeze(dim);
    i = i.squeeze(dim);
  }
  at::native::resize_output(values, v.sizes());
  at::native::resize_output(indices, i.sizes());
  values.copy_(v);
  indices.copy_(i);
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> kthvalue_out(const at::Tensor& self, int64_t k, int64_t dim, bool keepdim,
                                                  at::Tensor& values, at::Tensor& indices) {
  return select_out(self, dim, keepdim, HPU_TAIL_SELECT_KTH, k, values, indices, "kthvalue");
}
std::tuple<at::Tensor&, at::Tensor&> median_dim_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                                    at::Tensor& values, at::Tensor& indices) {
  return select_out(self, dim, keepdim, HPU_TAIL_SELECT_MEDIAN, 0, values, indices, "median");
}
std::tuple<at::Tensor&, at::Tensor&> nanmedian_dim_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                                       at::Tensor& values, at::Tensor& indices) {
  return select_out(self, dim, keepdim, HPU_TAIL_SELECT_NANMEDIAN, 0, values, indices, "nanmedian");
}
std::tuple<at::Tensor&, at::Tensor&> mode_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& values,
                                              at::Tensor& indices) {
  return select_out(self, dim, keepdim, HPU_TAIL_SELECT_MODE, 0, values, indices, "mode");
}
std::tuple<at::Tensor, at::Tensor> mode(const at::Tensor& self, int64_t dim, bool keepdim) {
  at::Tensor v = at::empty({0}, self.options()), i = at::empty({0}, self.options().dtype(at::kLong));
  mode_out(self, dim, keepdim, v, i);
  return {v, i};
}

// median() / nanmedian() of all elements: the value only; NaN when empty.
at::Tensor median_all(const at::Tensor& self, int mode, const char* op) {
  check_hpu_dtype(self.scalar_type(), op);
  // empty: NaN in self's dtype, converted as the CPU converts it (integers get its cast of NaN)
  if (self.numel() == 0)
    return at::full({}, std::numeric_limits<double>::quiet_NaN(), at::TensorOptions().dtype(at::kDouble))
        .to(self.scalar_type())
        .to(self.device());
  at::Tensor v = at::empty({0}, self.options()), i = at::empty({0}, self.options().dtype(at::kLong));
  select_out(self.reshape({-1}), 0, false, mode, 0, v, i, op);
  return v;
}
at::Tensor median(const at::Tensor& self) { return median_all(self, HPU_TAIL_SELECT_MEDIAN, "median"); }
at::Tensor nanmedian(const at::Tensor& self) { return median_all(self, HPU_TAIL_SELECT_NANMEDIAN, "nanmedian"); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("scatter_reduce.two_out", TORCH_FN(scatter_reduce_two_out));
  m.impl("index_reduce.out", TORCH_FN(index_reduce_out));
  m.impl("_cummax_helper", TORCH_FN(cummax_helper));
  m.impl("_cummin_helper", TORCH_FN(cummin_helper));
  m.impl("take", TORCH_FN(take));
  m.impl("take.out", TORCH_FN(take_out));
  m.impl("put_", TORCH_FN(put_));
  m.impl("index_fill_.int_Scalar", TORCH_FN(index_fill_scalar));
  m.impl("index_fill_.int_Tensor", TORCH_FN(index_fill_tensor));
  m.impl("kthvalue.values", TORCH_FN(kthvalue_out));
  m.impl("median", TORCH_FN(median));
  m.impl("median.dim_values", TORCH_FN(median_dim_out));
  m.impl("nanmedian", TORCH_FN(nanmedian));
  m.impl("nanmedian.dim_values", TORCH_FN(nanmedian_dim_out));
  m.impl("mode", TORCH_FN(mode));
  m.impl("mode.values", TORCH_FN(mode_out));
}

}  // namespace habana_torch
