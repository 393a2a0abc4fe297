// at::Generator for hpu: a forwarder to the C core's Philox generator
// (seed + offset). The state PyTorch saves is those two numbers, 16 bytes.
#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/util/CallOnce.h>

#include <deque>
#include <mutex>

#include "hpu_common.h"
#include "hpu_generator.h"

namespace habana_torch {

HPUGeneratorImpl::HPUGeneratorImpl(c10::DeviceIndex index, hpu_generator_t* gen, bool owned)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::HPU, index),
                         c10::DispatchKeySet(c10::DispatchKey::HPU)),
      gen_(gen),
      owned_(owned) {}

HPUGeneratorImpl::~HPUGeneratorImpl() {
  if (owned_) hpu_generator_destroy(gen_);
}

void HPUGeneratorImpl::set_current_seed(uint64_t seed) { hpu_generator_set_seed(gen_, seed); }
uint64_t HPUGeneratorImpl::current_seed() const { return hpu_generator_get_seed(gen_); }
void HPUGeneratorImpl::set_offset(uint64_t offset) { hpu_generator_set_offset(gen_, offset); }
uint64_t HPUGeneratorImpl::get_offset() const { return hpu_generator_get_offset(gen_); }

uint64_t HPUGeneratorImpl::seed() {
  uint64_t s = c10::detail::getNonDeterministicRandom();
  set_current_seed(s);
  return s;
}

c10::intrusive_ptr<c10::TensorImpl> HPUGeneratorImpl::get_state() const {
  auto state = at::empty({16}, at::TensorOptions().dtype(at::kByte));
  uint64_t words[2] = {current_seed(), get_offset()};
  std::memcpy(state.data_ptr(), words, sizeof words);
  return state.getIntrusivePtr();
}

void HPUGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK_TYPE(new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>() &&
                       new_state.device().is_cpu(),
                   "hpu RNG state must be a CPU torch.ByteTensor");
  TORCH_CHECK_VALUE(new_state.numel() == 16,
                    "hpu RNG state must have 16 bytes (seed and offset), got ", new_state.numel());
  uint64_t words[2];
  std::memcpy(words, new_state.data(), sizeof words);
  set_current_seed(words[0]);
  set_offset(words[1]);
}

HPUGeneratorImpl* HPUGeneratorImpl::clone_impl() const {
  hpu_generator_t* g = nullptr;
  HPU_CHECK(hpu_generator_create(current_seed(), &g));
  hpu_generator_set_offset(g, get_offset());
  return new HPUGeneratorImpl(device().index(), g, true);
}

void HPUGeneratorImpl::prepare(hpu_node_t& node) {
  HPU_CHECK(hpu_generator_prepare(gen_, &node));
}

const at::Generator& default_generator(c10::DeviceIndex index) {
  static std::mutex mu;
  static std::deque<at::Generator> gens;  // deque: references stay valid
  check_device_index(index);
  std::lock_guard<std::mutex> lock(mu);
  if (gens.empty()) {
    for (int d = 0; d < device_count(); d++) {
      hpu_generator_t* g = nullptr;
      HPU_CHECK(hpu_generator_default(d, &g));
      gens.push_back(at::make_generator<HPUGeneratorImpl>(static_cast<c10::DeviceIndex>(d), g, false));
    }
  }
  return gens[index];
}

at::Generator new_generator(c10::DeviceIndex index) {
  check_device_index(index);
  hpu_generator_t* g = nullptr;
  HPU_CHECK(hpu_generator_create(c10::default_rng_seed_val, &g));
  return at::make_generator<HPUGeneratorImpl>(index, g, true);
}

HPUGeneratorImpl* generator_for(const std::optional<at::Generator>& gen, c10::DeviceIndex index) {
  const at::Generator& g = gen.has_value() && gen->defined() ? *gen : default_generator(index);
  TORCH_CHECK(g.device().type() == c10::DeviceType::HPU,
              "expected an hpu generator for an hpu tensor, got a generator on ", g.device());
  return static_cast<HPUGeneratorImpl*>(g.unsafeGetGeneratorImpl());
}

}  // namespace habana_torch
