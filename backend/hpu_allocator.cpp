// The c10 allocator for DeviceType::HPU: a forwarder to the C core's caching
// allocator, plus the statistics torch.accelerator / torch.hpu read.
#include <c10/core/CachingDeviceAllocator.h>

#include "hpu_common.h"

namespace habana_torch {
namespace {

void free_device_ptr(void* ptr) {
  if (!ptr) return;
  int dev = -1;
  if (hpu_pointer_get_device(ptr, &dev) == HPU_SUCCESS && dev >= 0) hpu_free(dev, ptr);
}

void fill_stat(c10::CachingDeviceAllocator::StatArray& stat, int64_t current, int64_t peak,
               int64_t allocated, int64_t freed) {
  for (auto& s : stat) {
    s.current = current;
    s.peak = peak;
    s.allocated = allocated;
    s.freed = freed;
  }
}

struct HPUAllocator final : public c10::DeviceAllocator {
  c10::DataPtr allocate(size_t nbytes) override {
    ensure_initialized();
    c10::DeviceIndex dev = current_device();
    void* ptr = nullptr;
    HPU_CHECK(hpu_malloc(dev, nbytes, &ptr));
    return {ptr, ptr, &free_device_ptr, c10::Device(c10::DeviceType::HPU, dev)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_device_ptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    copy_bytes(dest, src, count);
  }

  bool initialized() override { return hpu_is_initialized(); }
  void emptyCache(c10::MempoolId_t) override {
    if (!hpu_is_initialized()) return;
    for (int d = 0; d < device_count(); d++) HPU_CHECK(hpu_memory_empty_cache(d));
  }
  void recordStream(const c10::DataPtr&, c10::Stream) override {
    // One in-order queue per card: every stream's use is already ordered.
  }
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex dev) override {
    hpu_memory_stats_t s;
    HPU_CHECK(hpu_memory_get_stats(dev, &s));
    c10::CachingDeviceAllocator::DeviceStats out;
    fill_stat(out.allocated_bytes, s.allocated_bytes, s.peak_allocated_bytes, 0, 0);
    fill_stat(out.active_bytes, s.allocated_bytes, s.peak_allocated_bytes, 0, 0);
    fill_stat(out.reserved_bytes, s.reserved_bytes, s.peak_reserved_bytes, 0, 0);
    fill_stat(out.requested_bytes, s.requested_bytes, s.requested_bytes, 0, 0);
    fill_stat(out.allocation, s.active_blocks, s.active_blocks, s.num_allocs, s.num_frees);
    fill_stat(out.active, s.active_blocks, s.active_blocks, s.num_allocs, s.num_frees);
    fill_stat(out.segment, s.num_segments, s.num_segments, 0, 0);
    fill_stat(out.inactive_split, s.inactive_split_blocks, s.inactive_split_blocks, 0, 0);
    fill_stat(out.inactive_split_bytes, s.inactive_split_bytes, s.inactive_split_bytes, 0, 0);
    out.num_alloc_retries = s.num_alloc_retries;
    out.num_ooms = s.num_ooms;
    return out;
  }
  void resetAccumulatedStats(c10::DeviceIndex dev) override {
    HPU_CHECK(hpu_memory_reset_accumulated(dev));
  }
  void resetPeakStats(c10::DeviceIndex dev) override { HPU_CHECK(hpu_memory_reset_peak(dev)); }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex dev) override {
    size_t free_bytes = 0, total = 0;
    HPU_CHECK(hpu_mem_get_info(dev, &free_bytes, &total));
    return {free_bytes, total};
  }
};

HPUAllocator allocator_instance;

}  // namespace

c10::Allocator* allocator() { return &allocator_instance; }

void copy_bytes(void* dest, const void* src, size_t count) {
  if (count == 0) return;
  int dst_dev = -1, src_dev = -1;
  HPU_CHECK(hpu_pointer_get_device(dest, &dst_dev));
  HPU_CHECK(hpu_pointer_get_device(src, &src_dev));
  int dev = dst_dev >= 0 ? dst_dev : src_dev;
  TORCH_CHECK(dev >= 0, "copy_bytes: neither pointer is hpu memory");
  // Work queued on the source card must have produced the bytes first.
  if (src_dev >= 0 && src_dev != dev) HPU_CHECK(hpu_device_synchronize(src_dev));
  hpu_node_t node{};
  node.op = HPU_OP_COPY;
  node.num_inputs = 1;
  node.num_outputs = 1;
  node.compute_dtype = HPU_UINT8;
  int64_t n = static_cast<int64_t>(count);
  hpu_tensor_init_contiguous(&node.outputs[0], dest, HPU_UINT8, 1, &n);
  hpu_tensor_init_contiguous(&node.inputs[0], const_cast<void*>(src), HPU_UINT8, 1, &n);
  hpu_stream_t stream = current_stream(static_cast<c10::DeviceIndex>(dev));
  HPU_CHECK(hpu_submit(stream, &node));
  // A host side may read or free its buffer as soon as we return, and the
  // source card's queue may reuse the source block as soon as it is freed:
  // wait for the copy (as _copy_from does across cards).
  if (dst_dev < 0 || src_dev < 0 || src_dev != dst_dev) HPU_CHECK(hpu_stream_synchronize(stream));
}

}  // namespace habana_torch

REGISTER_ALLOCATOR(c10::DeviceType::HPU, habana_torch::allocator());
