// At interpreter exit: wait until PyTorch's autograd device threads that serve
// the hpu cards are past their last backward (habana_torch registers this with
// atexit).
//
// Why it is needed. PyTorch runs the backward of device tensors on one engine
// thread per device index (the hpu has a DeviceGuardImpl, so it gets them as
// CUDA does). The thread that finishes a GraphTask wakes the caller and only
// then, at the end of its loop iteration, drops its reference to the task; if
// the caller has already let go, that is the last one. In torch 2.13 every
// backward() stores a contextvars.Context in the caller's ATen TLS, which the
// GraphTask copies (torch.autograd.graph._engine_run_backward), and a graph may
// hold Python hooks or custom Functions too: destroying the task then takes the
// GIL. Once the interpreter is finalising, taking the GIL ends the thread with
// pthread_exit, whose forced unwind through that noexcept destructor aborts the
// process: "terminate called without an active exception". CUDA's device
// threads share the race; PyTorch does not close it (its Engine::stop() at
// static destruction only stops idle threads).
//
// The handshake. A device thread takes its next task only after finishing the
// previous iteration, task reference dropped. So, with the GIL released (the
// thread may need it for that drop), we run one backward per card whose only
// node runs on that card's engine thread, and wait for it. The probe graph
// holds no Python object, so whichever thread frees it needs no GIL.
// Nothing is waited for in a process that never started the engine threads.
#include <ATen/ATen.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/anomaly_mode.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "hpu_common.h"

namespace py = pybind11;

namespace habana_torch {
namespace {

using torch::autograd::Engine;
using torch::autograd::variable_list;

struct ExitProbe final : torch::autograd::Node {
  variable_list apply(variable_list&& inputs) override { return {}; }
  std::string name() const override { return "HpuAutogradExitProbe"; }
};

// Whether the engine has started its device threads (it fills
// device_ready_queues_ when it does, once). The member is protected; a
// pointer to it formed in a derived class is how C++ lets others read it.
// Without this test a process that never ran a backward would start the
// threads only to probe them.
struct EngineDeviceQueues : Engine {
  static bool started(Engine& engine) {
    auto queues = &EngineDeviceQueues::device_ready_queues_;
    return !(engine.*queues).empty();
  }
};

// Seconds to wait for the engine threads: PyTorch's own limit for its
// shutdown wait (Engine::stop), default 10. A backward still running in a
// daemon thread must not turn exit into a hang.
double wait_limit_seconds() {
  const char* s = std::getenv("TORCH_AUTOGRAD_SHUTDOWN_WAIT_LIMIT");
  return s ? std::atof(s) : 10.0;
}

struct Probe {
  c10::intrusive_ptr<ExitProbe> node;
  at::Tensor grad;  // C++ only: no Python object to free
};

// The probes run on a thread of their own: the graph task copies its
// caller's TLS, and this thread's holds no Python object (the caller's may,
// e.g. torch function modes). It outlives a timed-out wait, so it owns
// everything it touches.
struct Handshake {
  std::vector<Probe> probes;
  std::promise<void> done;
};

void run_probes(const std::shared_ptr<Handshake>& hs) {
  try {
    Engine& engine = Engine::get_default_engine();
    for (Probe& p : hs->probes) {
      // Returns once the card's engine thread has run the probe.
      engine.execute({torch::autograd::Edge(p.node, 0)}, {p.grad}, /*keep_graph=*/false,
                     /*create_graph=*/false, /*accumulate_grad=*/true);
    }
    hs->done.set_value();
  } catch (...) {
    hs->done.set_exception(std::current_exception());
  }
}

void autograd_exit_handshake() {
  if (!EngineDeviceQueues::started(Engine::get_default_engine())) return;
  // Engine threads run hpu work only once the cards have started; a process
  // that only ran autograd on the CPU must not start them at exit.
  if (!hpu_is_initialized()) return;
  const double limit = wait_limit_seconds();
  if (limit <= 0) return;
  auto hs = std::make_shared<Handshake>();
  // Anomaly mode would give each probe node a Python traceback.
  const bool anomaly = torch::autograd::AnomalyMode::is_enabled();
  const bool check_nan = torch::autograd::AnomalyMode::should_check_nan();
  torch::autograd::AnomalyMode::set_enabled(false);
  std::future_status status = std::future_status::ready;
  std::future<void> done = hs->done.get_future();
  try {
    for (int card = 0, n = device_count(); card < n; card++) {
      Probe p{c10::make_intrusive<ExitProbe>(),
              at::empty({0}, at::TensorOptions().device(c10::Device(c10::DeviceType::HPU, card)))};
      p.node->add_input_metadata(p.grad);
      hs->probes.push_back(std::move(p));
    }
    std::thread helper(run_probes, hs);
    {
      // The engine threads may need the GIL to finish what they hold.
      py::gil_scoped_release no_gil;
      status = done.wait_for(std::chrono::duration<double>(limit));
    }
    if (status == std::future_status::ready) {
      helper.join();
    } else {
      helper.detach();
    }
  } catch (...) {
    torch::autograd::AnomalyMode::set_enabled(anomaly, check_nan);
    throw;
  }
  torch::autograd::AnomalyMode::set_enabled(anomaly, check_nan);
  if (status == std::future_status::ready) {
    done.get();  // rethrows a failure of the probes
  } else {
    TORCH_WARN("hpu: PyTorch's autograd threads were still busy after ", limit,
               " s at exit (TORCH_AUTOGRAD_SHUTDOWN_WAIT_LIMIT); exiting without them");
  }
}

}  // namespace

void init_autograd_exit_bindings(py::module_& m) {
  m.def("_autograd_exit_handshake", [] {
    HANDLE_TH_ERRORS
    autograd_exit_handshake();
    END_HANDLE_TH_ERRORS_PYBIND
  });
}

}  // namespace habana_torch
