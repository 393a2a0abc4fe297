// Shared by the shim's files: C status -> PyTorch exception, at::Tensor ->
// C tensor descriptor, the current device and stream of this thread.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Stream.h>
#include <c10/util/Exception.h>

extern "C" {
#include "hpu/hpu.h"
}

namespace habana_torch {

// Raises the PyTorch exception matching a failed C call, with the C core's
// message: OutOfMemoryError, TypeError (unsupported dtype/op), IndexError
// (bad card index), RuntimeError otherwise.
[[noreturn]] void throw_status(hpu_status_t status, const char* what);

#define HPU_CHECK(expr)                                    \
  do {                                                     \
    hpu_status_t hpu_check_status_ = (expr);               \
    if (hpu_check_status_ != HPU_SUCCESS)                  \
      ::habana_torch::throw_status(hpu_check_status_, #expr); \
  } while (0)

// Initialises the core once (reads the environment), raising on failure.
void ensure_initialized();
int device_count();
// Raises IndexError naming the index and the visible card count.
void check_device_index(int64_t index);

// This thread's current card, as c10 guards see it.
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);

// This thread's current stream on a card (default stream unless set).
hpu_stream_t current_stream(c10::DeviceIndex index);
void set_current_stream(const c10::Stream& stream);
c10::Stream to_c10_stream(hpu_stream_t stream);
hpu_stream_t from_c10_stream(const c10::Stream& stream);

// Element type mapping; raises TypeError for dtypes the core lacks.
hpu_dtype_t to_hpu_dtype(at::ScalarType type);
bool is_supported_dtype(at::ScalarType type);

// Descriptor of a tensor (hpu or cpu) for an op node. Raises for too many
// dims or an unsupported dtype.
hpu_tensor_t to_desc(const at::Tensor& t);
void fill_desc(hpu_tensor_t* d, const at::Tensor& t);

// Starts a node with no operands and zeroed params. Operands are then
// written with fill_desc as they are added: zeroing the whole 2 KB node
// (most of it operand slots an op does not have) shows in the per-op host
// cost, and the core never reads past num_inputs / num_outputs.
inline void init_node(hpu_node_t* n, hpu_op_t op) {
  n->op = op;
  n->num_inputs = 0;
  n->num_outputs = 0;
  n->compute_dtype = HPU_FLOAT32;
  n->params = hpu_op_params_t{};
}

// The default generator of a card and a new one (used by the hooks).
const at::Generator& default_generator(c10::DeviceIndex index);
at::Generator new_generator(c10::DeviceIndex index);

// The device allocator (also registered for DeviceType::HPU).
c10::Allocator* allocator();
// Byte copy where at least one side is hpu memory; waits when a host
// buffer is involved.
void copy_bytes(void* dest, const void* src, size_t count);

// Runs a node on the card's current stream: at once (eager, a one-node
// graph) or recorded into the card's pending graph (lazy mode).
void launch(c10::DeviceIndex device, const hpu_node_t& node);

}  // namespace habana_torch
