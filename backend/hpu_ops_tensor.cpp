// The ops every backend must own: tensor creation, storage and metadata,
// views, copies between devices, scalar reads, fill. Views reuse PyTorch's
// device-independent metadata code; data movement is one C COPY node.
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "hpu_common.h"
#include "hpu_ops.h"

namespace habana_torch {

hpu_scalar_t to_hpu_scalar(const c10::Scalar& s) {
  hpu_scalar_t out{};
  if (s.isBoolean()) {
    out.kind = HPU_SCALAR_BOOL;
    out.i = s.toBool();
    out.f = static_cast<double>(out.i);
  } else if (s.isIntegral(false)) {
    out.kind = HPU_SCALAR_INT;
    out.i = s.toLong();
    out.f = static_cast<double>(out.i);
  } else {
    TORCH_CHECK_TYPE(!s.isComplex(), "hpu does not support complex scalars");
    out.kind = HPU_SCALAR_FLOAT;
    out.f = s.toDouble();
  }
  return out;
}

void check_hpu_dtype(at::ScalarType type, const char* op) {
  TORCH_CHECK_TYPE(is_supported_dtype(type), op, ": hpu does not support dtype ", type,
                   " (supported: bool, uint8, int8, int16, int32, int64, float16, bfloat16, "
                   "float32, float64); keep such tensors on the CPU");
}

namespace {

c10::DeviceIndex device_index_of(std::optional<c10::Device> device) {
  if (!device.has_value() || !device->has_index()) return current_device();
  check_device_index(device->index());
  return device->index();
}

at::Tensor hpu_empty(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                     std::optional<at::Layout> layout, std::optional<c10::Device> device,
                     std::optional<bool> pin_memory,
                     std::optional<at::MemoryFormat> memory_format) {
  ensure_initialized();
  auto type = c10::dtype_or_default(dtype);
  check_hpu_dtype(type, "empty");
  TORCH_CHECK(!layout.has_value() || *layout == at::kStrided,
              "hpu supports only strided tensors, got layout ", *layout);
  return new_hpu_tensor(size, type, device_index_of(device), memory_format);
}

at::Tensor hpu_empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                             std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                             std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  ensure_initialized();
  auto type = c10::dtype_or_default(dtype);
  check_hpu_dtype(type, "empty_strided");
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::HPU, device_index_of(device)));
  return at::detail::empty_strided_generic(size, stride, allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::HPU), type);
}

// Grows the storage of an hpu tensor so that its current sizes/strides fit,
// keeping the old bytes (resize_ semantics).
void ensure_storage_fits(const at::Tensor& self) {
  auto* impl = self.unsafeGetTensorImpl();
  size_t needed = at::detail::computeStorageNbytes(self.sizes(), self.strides(),
                                                   self.element_size(), self.storage_offset());
  const at::Storage& storage = impl->unsafe_storage();
  if (self.numel() == 0 || needed <= storage.nbytes()) return;
  TORCH_CHECK(storage.resizable(), "trying to resize storage that is not resizable");
  c10::DeviceGuard guard(self.device());
  at::DataPtr fresh = allocator()->allocate(needed);
  if (storage.nbytes() > 0) copy_bytes(fresh.get(), storage.data(), storage.nbytes());
  storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(fresh));
  storage.unsafeGetStorageImpl()->set_nbytes(needed);
}

const at::Tensor& hpu_resize_(const at::Tensor& self, at::IntArrayRef size,
                              std::optional<at::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  if (memory_format.has_value() && *memory_format != at::MemoryFormat::Preserve)
    impl->empty_tensor_restride(*memory_format);
  ensure_storage_fits(self);
  return self;
}

at::Tensor& hpu_set_storage(at::Tensor& self, at::Storage source, int64_t storage_offset,
                            at::IntArrayRef size, at::IntArrayRef stride) {
  TORCH_CHECK(source.device().type() == c10::DeviceType::HPU,
              "set_: expected an hpu storage for an hpu tensor, got storage on ", source.device());
  TORCH_CHECK(storage_offset >= 0, "set_: storage offset must be >= 0, got ", storage_offset);
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  impl->set_storage_offset(storage_offset);
  if (stride.empty() && !size.empty())
    impl->set_sizes_contiguous(size);
  else
    impl->set_sizes_and_strides(size, stride);
  ensure_storage_fits(self);
  return self;
}

at::Tensor& hpu_set_source_storage(at::Tensor& self, at::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.element_size());
  return hpu_set_storage(self, std::move(source), 0, {n}, {});
}

at::Tensor& hpu_set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return hpu_set_storage(self, source.storage(), source.storage_offset(), source.sizes(),
                         source.strides());
}

at::Tensor& hpu_set_empty(at::Tensor& self) {
  c10::DeviceGuard guard(self.device());
  at::Storage storage(at::Storage::use_byte_size_t(), 0, allocator(), /*resizable=*/true);
  return hpu_set_storage(self, std::move(storage), 0, {0}, {});
}

at::Tensor& hpu_copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  copy_between(self, src);
  return self;
}

at::Tensor hpu_copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor out = dst;
  copy_between(out, self);
  return dst;
}

at::Tensor hpu_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) {
    TORCH_CHECK(dst.numel() == 0 || dst.sizes() == self.sizes(),
                "_copy_from_and_resize: destination of shape ", dst.sizes(),
                " cannot take a tensor of shape ", self.sizes());
    if (dst.is_cpu())
      dst.resize_(self.sizes());
    else
      hpu_resize_(dst, self.sizes(), std::nullopt);
  }
  at::Tensor out = dst;
  copy_between(out, self);
  return dst;
}

c10::Scalar hpu_local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  at::Tensor host = at::empty({}, self.options().device(c10::kCPU));
  copy_between(host, self.reshape({}));
  return host.item();
}

at::Tensor& hpu_fill_scalar(at::Tensor& self, const c10::Scalar& value) {
  fill_tensor(self, to_hpu_scalar(value));
  return self;
}

at::Tensor& hpu_fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ",
              value.dim(), " dimensions.");
  return hpu_fill_scalar(self, value.item());
}

at::Tensor& hpu_zero_(at::Tensor& self) {
  fill_tensor(self, hpu_scalar_int(0));
  return self;
}

at::Tensor hpu_view(const at::Tensor& self, at::IntArrayRef size) {
  return at::native::view(self, size);
}

at::Tensor hpu_as_strided(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride,
                          std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor hpu_reshape_alias(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

at::Tensor hpu_unfold(const at::Tensor& self, int64_t dim, int64_t size, int64_t step) {
  return at::native::unfold(self, dim, size, step);
}

}  // namespace

void check_same_device(const char* op, c10::ArrayRef<const at::Tensor*> tensors) {
  std::optional<c10::Device> device;
  for (const at::Tensor* t : tensors) {
    if (!t->defined() || is_cpu_scalar(*t)) continue;
    if (!device) {
      device = t->device();
    } else {
      TORCH_CHECK(*device == t->device(),
                  "Expected all tensors to be on the same device, but found at least two devices, ",
                  *device, " and ", t->device(), "! (in ", op,
                  "; move the tensors to one device with .to(\"hpu\") or .cpu())");
    }
  }
}

at::Tensor new_hpu_tensor(at::IntArrayRef size, at::ScalarType type, c10::DeviceIndex device,
                          std::optional<at::MemoryFormat> memory_format) {
  auto make = [&] {
    return at::detail::empty_generic(size, allocator(), c10::DispatchKeySet(c10::DispatchKey::HPU),
                                     type, memory_format);
  };
  if (device == current_device()) return make();
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::HPU, device));
  return make();
}

c10::MaybeOwned<at::Tensor> on_device(const at::Tensor& t, const at::Tensor& like) {
  if (!is_cpu_scalar(t) || !is_hpu(like)) return c10::MaybeOwned<at::Tensor>::borrowed(t);
  // A FILL node rather than a host-to-device copy: no wait for the card, so
  // it also works inside lazy graphs and HPU graph captures.
  check_hpu_dtype(t.scalar_type(), "scalar operand");
  at::Tensor out = at::empty({}, like.options().dtype(t.scalar_type()));
  fill_tensor(out, to_hpu_scalar(t.item()));
  return c10::MaybeOwned<at::Tensor>::owned(std::move(out));
}

at::ScalarType result_of(std::initializer_list<Arg> args) {
  at::native::ResultTypeState state{};
  for (const Arg& a : args) {
    if (a.t)
      state = at::native::update_result_type_state(*a.t, state);
    else
      state = at::native::update_result_type_state(a.s, state);
  }
  return at::native::result_type(state);
}

at::ScalarType default_float() { return c10::typeMetaToScalarType(at::get_default_dtype()); }

void fill_tensor(const at::Tensor& self, hpu_scalar_t value) {
  if (self.numel() == 0) return;
  hpu_node_t node{};
  node.op = HPU_OP_FILL;
  node.num_outputs = 1;
  node.outputs[0] = to_desc(self);
  node.compute_dtype = node.outputs[0].dtype;
  node.params.fill.value = value;
  launch(self.device().index(), node);
}

void copy_between(const at::Tensor& dst, const at::Tensor& src) {
  TORCH_CHECK(dst.defined() && src.defined(), "copy_: undefined tensor");
  for (const auto* t : {&dst, &src}) {
    TORCH_CHECK(t->is_cpu() || t->device().type() == c10::DeviceType::HPU,
                "hpu copy_ supports hpu and cpu tensors, got one on ", t->device());
  }
  if (dst.is_same(src) || dst.numel() == 0) return;
  check_hpu_dtype(dst.scalar_type(), "copy_");
  check_hpu_dtype(src.scalar_type(), "copy_");
  at::Tensor source = src.resolve_conj().resolve_neg().expand_as(dst);
  hpu_node_t node{};
  node.op = HPU_OP_COPY;
  node.num_inputs = 1;
  node.num_outputs = 1;
  node.outputs[0] = to_desc(dst);
  node.inputs[0] = to_desc(source);
  node.compute_dtype = node.outputs[0].dtype;

  const bool dst_hpu = !dst.is_cpu(), src_hpu = !src.is_cpu();
  c10::DeviceIndex dev = dst_hpu ? dst.device().index() : src.device().index();
  bool cross_card = dst_hpu && src_hpu && dst.device() != src.device();
  if (cross_card) HPU_CHECK(hpu_device_synchronize(src.device().index()));
  hpu_stream_t stream = current_stream(dev);
  HPU_CHECK(hpu_submit(stream, &node));
  // Host buffers may be read or freed once we return, and a source on
  // another card may be reused by that card's queue: wait for the copy.
  if (!dst_hpu || !src_hpu || cross_card) HPU_CHECK(hpu_stream_synchronize(stream));
}

at::Tensor& into_out(const at::Tensor& r, at::Tensor& out) {
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("empty.memory_format", TORCH_FN(hpu_empty));
  m.impl("empty_strided", TORCH_FN(hpu_empty_strided));
  m.impl("resize_", TORCH_FN(hpu_resize_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(hpu_set_storage));
  m.impl("set_.source_Storage", TORCH_FN(hpu_set_source_storage));
  m.impl("set_.source_Tensor", TORCH_FN(hpu_set_source_tensor));
  m.impl("set_", TORCH_FN(hpu_set_empty));
  m.impl("copy_", TORCH_FN(hpu_copy_));
  m.impl("_copy_from", TORCH_FN(hpu_copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(hpu_copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(hpu_local_scalar_dense));
  m.impl("fill_.Scalar", TORCH_FN(hpu_fill_scalar));
  m.impl("fill_.Tensor", TORCH_FN(hpu_fill_tensor));
  m.impl("zero_", TORCH_FN(hpu_zero_));
  m.impl("view", TORCH_FN(hpu_view));
  m.impl("as_strided", TORCH_FN(hpu_as_strided));
  m.impl("_reshape_alias", TORCH_FN(hpu_reshape_alias));
  m.impl("unfold", TORCH_FN(hpu_unfold));
}

}  // namespace habana_torch
