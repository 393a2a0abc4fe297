// The boxed CPU fallback for every aten op without an hpu kernel: inputs go
// to the CPU, PyTorch's CPU kernel runs, results come back. Each use is
// counted per op ("cpu_fallback::<op>"), can be logged as it happens
// (PT_HPU_LOG_CPU_FALLBACK=1 once per op, =all every call), and is an error
// instead when PT_HPU_CPU_FALLBACK=0 (strict mode).
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ATen.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <set>

#include "hpu_common.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace {

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}

void log_fallback(const std::string& op) {
  if (env_is("PT_HPU_LOG_CPU_FALLBACK", "all")) {
    std::cerr << "[habana_torch] cpu fallback: " << op << "\n";
    return;
  }
  if (!env_is("PT_HPU_LOG_CPU_FALLBACK", "1")) return;
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mu);
  if (seen.insert(op).second) std::cerr << "[habana_torch] cpu fallback: " << op << " (first use)\n";
}

// Same rule as native hpu ops (check_same_device): all tensors on one
// device, except CPU 0-dim tensors (scalars). Index tensors on the CPU are
// allowed, as on CUDA.
void check_devices(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t nargs) {
  if (op.schema().name().find("index") != std::string::npos) return;
  std::vector<at::Tensor> tensors;
  for (size_t i = stack.size() - nargs; i < stack.size(); i++) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) {
      tensors.push_back(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) tensors.push_back(t);
    } else if (v.isOptionalTensorList()) {
      for (const auto& ref : v.toOptionalTensorList()) {
        std::optional<at::Tensor> t = ref;
        if (t.has_value()) tensors.push_back(*t);
      }
    }
  }
  std::vector<const at::Tensor*> ptrs;
  for (const at::Tensor& t : tensors) ptrs.push_back(&t);
  check_same_device(c10::toString(op.schema().operator_name()).c_str(), ptrs);
}

}  // namespace

void note_cpu_fallback(const std::string& name) {
  if (env_is("PT_HPU_CPU_FALLBACK", "0")) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "hpu has no kernel for ", name,
                                " and CPU fallback is disabled (PT_HPU_CPU_FALLBACK=0); unset it "
                                "to run the op on the CPU, or keep the tensors on the CPU");
  }
  hpu_metric_add(("cpu_fallback::" + name).c_str(), 1);
  log_fallback(name);
}

namespace {

void note_fallback(const std::string& name) { note_cpu_fallback(name); }

void hpu_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::string name = c10::toString(op.schema().operator_name());
  TORCH_CHECK(hpu_capture_demote(current_device()), name,
              " has no hpu kernel and would run on the CPU, which is not possible while hpu:",
              current_device(), " is capturing an HPU graph; run it outside the captured region");
  note_fallback(name);
  check_devices(op, *stack, op.schema().arguments().size());
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, HPU, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&hpu_cpu_fallback>());
}

}  // namespace habana_torch
