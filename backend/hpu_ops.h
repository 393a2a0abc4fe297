// Helpers shared by the files that register aten ops for hpu.
#pragma once

#include <ATen/ATen.h>

#include "hpu_common.h"

namespace habana_torch {

hpu_scalar_t to_hpu_scalar(const c10::Scalar& s);
// Raises TypeError naming the op when the core lacks the dtype.
void check_hpu_dtype(at::ScalarType type, const char* op);
// dst <- src for any mix of hpu and cpu tensors (src broadcast to dst,
// dtype converted); waits when the host is involved.
void copy_between(const at::Tensor& dst, const at::Tensor& src);
void fill_tensor(const at::Tensor& self, hpu_scalar_t value);
// An out= variant of an op computed functionally: out resized to r's shape
// (as resize_output, which warns when a non-empty out changes shape), then r
// copied into it.
at::Tensor& into_out(const at::Tensor& r, at::Tensor& out);

inline bool is_hpu(const at::Tensor& t) { return t.device().type() == c10::DeviceType::HPU; }
// A CPU 0-dim tensor next to hpu tensors is a scalar, as on CUDA.
inline bool is_cpu_scalar(const at::Tensor& t) { return t.is_cpu() && t.dim() == 0; }
// An integer division / remainder whose divisor is a CPU scalar equal to 0 in
// `compute` raises PyTorch's "ZeroDivisionError" now, as the CPU does; a
// divisor on the card is checked by the kernel (reported at the next sync).
void check_host_divisor(const at::Tensor& divisor, at::ScalarType compute);
// Raises PyTorch's "Expected all tensors to be on the same device" error
// (naming `op`) unless every defined tensor, CPU scalars aside, is on one device.
void check_same_device(const char* op, c10::ArrayRef<const at::Tensor*> tensors);
// `t` moved to `like`'s hpu card if it is a CPU scalar (for kernel inputs
// that must be device memory); otherwise `t` itself, borrowed: copying a
// tensor Python owns takes the GIL (torch >= 2.13 ties the PyObject's life to
// the C++ refcount), which would cost every op a GIL round trip.
c10::MaybeOwned<at::Tensor> on_device(const at::Tensor& t, const at::Tensor& like);
at::ScalarType default_float();
// Flat positions of self's elements, nonzero ones first in their order (a
// stable sort on "is zero", no host read); is_zero (optional) gets the
// int64 "is zero" vector it sorted. nonzero, masked_select, nonzero_static.
at::Tensor nonzero_first(const at::Tensor& self, at::Tensor* is_zero = nullptr);
// Row-major coordinates [k, sizes.size()] of the flat positions `flat`.
at::Tensor coordinates_of(const at::Tensor& flat, at::IntArrayRef sizes);
// Every route to the CPU goes through here (hpu_fallback.cpp): strict mode
// (PT_HPU_CPU_FALLBACK=0 raises), the per-op counter, logging.
void note_cpu_fallback(const std::string& name);

// A math operand: a tensor or a scalar.
struct Arg {
  const at::Tensor* t = nullptr;
  c10::Scalar s;
  Arg(const at::Tensor& x) : t(&x) {}  // NOLINT: implicit on purpose
  Arg(const c10::Scalar& x) : s(x) {}  // NOLINT
};
// at::result_type over tensors and Scalars, in PyTorch's categories, without
// at::result_type's trip through the dispatcher.
at::ScalarType result_of(std::initializer_list<Arg> args);
// A new hpu tensor on card `device` (contiguous unless `memory_format` says
// otherwise), allocated without a trip through the dispatcher: the output
// of nearly every functional op, and the empty op itself.
at::Tensor new_hpu_tensor(at::IntArrayRef shape, at::ScalarType dtype, c10::DeviceIndex device,
                          std::optional<at::MemoryFormat> memory_format = std::nullopt);

}  // namespace habana_torch
