// Device, stream and event plumbing: the HPU hooks, the device guard and the
// helpers every other shim file uses. All state lives in the C core except
// the per-thread "current device / current stream", which c10 defines.
#include <ATen/detail/HPUHooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/CPUAllocator.h>

#include <array>
#include <atomic>
#include <mutex>
#include <vector>

#include "hpu_common.h"

namespace habana_torch {

void throw_status(hpu_status_t status, const char* what) {
  std::string msg = hpu_last_error();
  if (msg.empty()) msg = std::string(hpu_status_name(status)) + " from " + what;
  switch (status) {
    case HPU_ERROR_OUT_OF_MEMORY:
      TORCH_CHECK_WITH(OutOfMemoryError, false, msg);
    case HPU_ERROR_UNSUPPORTED:
      TORCH_CHECK_TYPE(false, msg);
    case HPU_ERROR_OUT_OF_RANGE:
      TORCH_CHECK_INDEX(false, msg);
    default:
      TORCH_CHECK(false, msg);
  }
}

void ensure_initialized() {
  static std::once_flag once;
  static hpu_status_t status = HPU_SUCCESS;
  static std::string message;
  std::call_once(once, [] {
    status = hpu_init();
    if (status != HPU_SUCCESS) message = hpu_last_error();
  });
  // A forked child must hear about it even though the parent initialised.
  if (status != HPU_SUCCESS) TORCH_CHECK(false, "hpu initialisation failed: ", message);
}

// Counting does not start the cards (see hpu_device_count): a bad
// environment still raises here, naming the variable.
int device_count() {
  int n = 0;
  HPU_CHECK(hpu_device_count(&n));
  return n;
}

void check_device_index(int64_t index) {
  int n = device_count();
  TORCH_CHECK_INDEX(index >= 0 && index < n, "invalid hpu device index ", index, ": ", n,
                    " card(s) visible (set HPU_NUM_CARDS / HABANA_VISIBLE_DEVICES to change this)");
}

namespace {
thread_local c10::DeviceIndex tls_device = 0;
// Current stream id per card for this thread; 0 = default stream.
thread_local std::array<int64_t, HPU_MAX_CARDS> tls_stream_ids{};
}  // namespace

c10::DeviceIndex current_device() { return tls_device; }

void set_current_device(c10::DeviceIndex index) {
  check_device_index(index);
  tls_device = index;
}

hpu_stream_t current_stream(c10::DeviceIndex index) {
  return hpu_stream_t{index, tls_stream_ids[index]};
}

void set_current_stream(const c10::Stream& stream) {
  check_device_index(stream.device_index());
  tls_stream_ids[stream.device_index()] = stream.id();
}

c10::Stream to_c10_stream(hpu_stream_t s) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::HPU, s.device), s.id);
}

hpu_stream_t from_c10_stream(const c10::Stream& s) {
  TORCH_CHECK(s.device_type() == c10::DeviceType::HPU, "expected an hpu stream, got ", s);
  return hpu_stream_t{s.device_index(), s.id()};
}

bool is_supported_dtype(at::ScalarType type) {
  switch (type) {
    case at::kBool: case at::kByte: case at::kChar: case at::kShort: case at::kInt:
    case at::kLong: case at::kHalf: case at::kBFloat16: case at::kFloat: case at::kDouble:
      return true;
    default:
      return false;
  }
}

hpu_dtype_t to_hpu_dtype(at::ScalarType type) {
  switch (type) {
    case at::kBool: return HPU_BOOL;
    case at::kByte: return HPU_UINT8;
    case at::kChar: return HPU_INT8;
    case at::kShort: return HPU_INT16;
    case at::kInt: return HPU_INT32;
    case at::kLong: return HPU_INT64;
    case at::kHalf: return HPU_FLOAT16;
    case at::kBFloat16: return HPU_BFLOAT16;
    case at::kFloat: return HPU_FLOAT32;
    case at::kDouble: return HPU_FLOAT64;
    default:
      TORCH_CHECK_TYPE(false, "hpu does not support dtype ", type,
                       " (supported: bool, uint8, int8, int16, int32, int64, float16, bfloat16, "
                       "float32, float64); keep such tensors on the CPU");
  }
}

// Writes only what a kernel reads (dims past ndim stay unset): the hot path
// fills operands of a node in place instead of zeroing and copying 200 bytes.
void fill_desc(hpu_tensor_t* d, const at::Tensor& t) {
  const int64_t nd = t.dim();
  TORCH_CHECK(nd <= HPU_MAX_DIMS, "hpu kernels take at most ", HPU_MAX_DIMS,
              " dims, got a tensor with ", nd);
  d->dtype = to_hpu_dtype(t.scalar_type());
  d->ndim = static_cast<int>(nd);
  const int64_t* sizes = t.sizes().data();
  const int64_t* strides = t.strides().data();
  for (int64_t i = 0; i < nd; i++) {
    d->sizes[i] = sizes[i];
    d->strides[i] = strides[i];
  }
  const auto& storage = t.storage();
  d->storage = storage.mutable_data();
  d->offset = t.storage_offset() * static_cast<int64_t>(t.element_size());
}

hpu_tensor_t to_desc(const at::Tensor& t) {
  hpu_tensor_t d{};
  fill_desc(&d, t);
  return d;
}

void launch(c10::DeviceIndex device, const hpu_node_t& node) {
  HPU_CHECK(hpu_submit(current_stream(device), &node));
}

namespace {

// c10 passes index -1 for "the current card".
c10::DeviceIndex resolve(c10::Device d) { return d.index() < 0 ? current_device() : d.index(); }

struct HPUGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType static_type = c10::DeviceType::HPU;

  c10::DeviceType type() const override { return static_type; }

  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(static_type, current_device()); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == static_type, "expected an hpu device, got ", d);
    set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override { tls_device = d.index(); }

  c10::Stream getStream(c10::Device d) const override {
    return to_c10_stream(current_stream(resolve(d)));
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return to_c10_stream(hpu_stream_t{resolve(d), 0});
  }
  c10::Stream getNewStream(c10::Device d, int priority = 0) const override {
    ensure_initialized();
    hpu_stream_t s;
    HPU_CHECK(hpu_stream_create(resolve(d), &s));
    return to_c10_stream(s);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority = false) const override {
    // A small round-robin pool per card, created on first use, like CUDA's.
    constexpr int kPool = 32;
    static std::mutex mu;
    static std::vector<std::vector<int64_t>> pools(HPU_MAX_CARDS);
    static std::atomic<uint32_t> next{0};
    c10::DeviceIndex index = resolve(d);
    check_device_index(index);
    std::lock_guard<std::mutex> lock(mu);
    auto& pool = pools[index];
    if (pool.empty()) {
      for (int i = 0; i < kPool; i++) {
        hpu_stream_t s;
        HPU_CHECK(hpu_stream_create(index, &s));
        pool.push_back(s.id);
      }
    }
    return to_c10_stream(hpu_stream_t{index, pool[next++ % kPool]});
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    auto old = getStream(s.device());
    set_current_stream(s);
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    try {
      return static_cast<c10::DeviceIndex>(device_count());
    } catch (...) {
      return 0;
    }
  }
  bool queryStream(const c10::Stream& s) const override {
    hpu_status_t st = hpu_stream_query(from_c10_stream(s));
    if (st == HPU_ERROR_NOT_READY) return false;
    HPU_CHECK(st);
    return true;
  }
  void synchronizeStream(const c10::Stream& s) const override {
    HPU_CHECK(hpu_stream_synchronize(from_c10_stream(s)));
  }
  void synchronizeDevice(const c10::DeviceIndex index) const override {
    HPU_CHECK(hpu_device_synchronize(index));
  }

  // Events: created on first record, with timing when PyTorch asks for the
  // backend default (torch.Event(enable_timing=True)), as CUDA does.
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "event device index ", device_index, " does not match the stream's device ",
                stream.device_index());
    if (*event == nullptr) {
      hpu_event_t e;
      HPU_CHECK(hpu_event_create(&e, flag == c10::EventFlag::BACKEND_DEFAULT));
      *event = e;
    }
    HPU_CHECK(hpu_event_record(static_cast<hpu_event_t>(*event), from_c10_stream(stream)));
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (!event) return;
    HPU_CHECK(hpu_stream_wait_event(from_c10_stream(stream), static_cast<hpu_event_t>(event)));
  }
  bool queryEvent(void* event) const override {
    if (!event) return true;
    hpu_status_t st = hpu_event_query(static_cast<hpu_event_t>(event));
    if (st == HPU_ERROR_NOT_READY) return false;
    HPU_CHECK(st);
    return true;
  }
  void synchronizeEvent(void* event) const override {
    if (event) HPU_CHECK(hpu_event_synchronize(static_cast<hpu_event_t>(event)));
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end, "both events must be recorded before measuring elapsed time");
    float ms = 0;
    HPU_CHECK(hpu_event_elapsed_ms(static_cast<hpu_event_t>(start),
                                   static_cast<hpu_event_t>(end), &ms));
    return ms;
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    if (event) hpu_event_destroy(static_cast<hpu_event_t>(event));
  }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {
    // All streams of a card share one in-order queue: nothing to track.
  }
};

C10_REGISTER_GUARD_IMPL(HPU, HPUGuardImpl);

}  // namespace

// Class name HPUHooks: PyTorch creates the hooks by this registry key.
struct HPUHooks final : public at::HPUHooksInterface {
  explicit HPUHooks(at::HPUHooksArgs) {}

  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return hasHPU(); }
  bool hasHPU() const override {
    try {
      return device_count() > 0;
    } catch (...) {
      return false;
    }
  }
  void init() const override { ensure_initialized(); }
  bool hasPrimaryContext(c10::DeviceIndex index) const override { return hpu_is_initialized(); }
  c10::DeviceIndex deviceCount() const override {
    try {
      return static_cast<c10::DeviceIndex>(device_count());
    } catch (...) {
      return 0;
    }
  }
  void setCurrentDevice(c10::DeviceIndex index) const override { set_current_device(index); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex index) const override {
    auto old = current_device();
    set_current_device(index);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex index) const override {
    return exchangeDevice(index);
  }
  c10::Device getDeviceFromPtr(void* data) const override {
    int dev = -1;
    HPU_CHECK(hpu_pointer_get_device(data, &dev));
    TORCH_CHECK(dev >= 0, "pointer ", data, " is not hpu device memory");
    return c10::Device(c10::DeviceType::HPU, static_cast<c10::DeviceIndex>(dev));
  }
  bool isPinnedPtr(const void*) const override { return false; }
  at::Allocator* getPinnedMemoryAllocator() const override { return c10::GetCPUAllocator(); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    return default_generator(index < 0 ? current_device() : index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    return new_generator(index < 0 ? current_device() : index);
  }
};

}  // namespace habana_torch

namespace at {
// The registry lives in namespace at; the macro names it unqualified.
using HPUHooks = habana_torch::HPUHooks;
REGISTER_HPU_HOOKS(HPUHooks);
}  // namespace at
