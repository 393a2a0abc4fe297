#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

extern "C" {
#include "hpu/hpu.h"
}

namespace habana_torch {

struct HPUGeneratorImpl final : public c10::GeneratorImpl {
  HPUGeneratorImpl(c10::DeviceIndex index, hpu_generator_t* gen, bool owned);
  ~HPUGeneratorImpl() override;

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::HPU; }

  // Fills node.params.rng and advances the generator (thread-safe in C).
  void prepare(hpu_node_t& node);

 private:
  HPUGeneratorImpl* clone_impl() const override;
  hpu_generator_t* gen_;
  bool owned_;
};

// The generator a random op uses: the given one, or the card's default.
HPUGeneratorImpl* generator_for(const std::optional<at::Generator>& gen, c10::DeviceIndex index);

}  // namespace habana_torch
