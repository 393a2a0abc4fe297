// The boxed CPU fallback for every aten op without an hpu kernel: inputs go
// to the CPU, PyTorch's CPU kernel runs, results come back. Each use is
// counted per op ("cpu_fallback::<op>"), can be logged as it happens
// (PT_HPU_LOG_CPU_FALLBACK=1 once per op, =all every call), and is an error
// instead when PT_HPU_CPU_FALLBACK=0 (strict mode).
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <set>

#include "hpu_common.h"

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

// Same rule as native hpu ops: all tensors on one device, except CPU 0-dim
// tensors (scalars). Index tensors on the CPU are allowed, as on CUDA.
void check_devices(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t nargs) {
  const std::string& name = op.schema().name();
  if (name.find("index") != std::string::npos) return;
  std::optional<c10::Device> device;
  auto visit = [&](const at::Tensor& t) {
    if (!t.defined() || (t.is_cpu() && t.dim() == 0)) return;
    if (!device) {
      device = t.device();
    } else {
      TORCH_CHECK(*device == t.device(),
                  "Expected all tensors to be on the same device, but found at least two devices, ",
                  *device, " and ", t.device(), "! (in ", op.schema().operator_name(),
                  "; move the tensors to one device with .to(\"hpu\") or .cpu())");
    }
  };
  for (size_t i = stack.size() - nargs; i < stack.size(); i++) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) {
      visit(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) visit(t);
    } else if (v.isOptionalTensorList()) {
      for (const auto& ref : v.toOptionalTensorList()) {
        std::optional<at::Tensor> t = ref;
        if (t.has_value()) visit(*t);
      }
    }
  }
}

void hpu_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::string name = c10::toString(op.schema().operator_name());
  if (env_is("PT_HPU_CPU_FALLBACK", "0")) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "hpu has no kernel for ", name,
                                " and CPU fallback is disabled (PT_HPU_CPU_FALLBACK=0); unset it "
                                "to run the op on the CPU, or keep the tensors on the CPU");
  }
  check_devices(op, *stack, op.schema().arguments().size());
  hpu_metric_add(("cpu_fallback::" + name).c_str(), 1);
  log_fallback(name);
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, HPU, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&hpu_cpu_fallback>());
}

}  // namespace habana_torch
