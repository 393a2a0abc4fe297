// habana_torch._C: the Python face of the core. Everything here forwards to
// the C API or to the shim's device helpers; Python builds torch.hpu on it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hpu_common.h"

namespace py = pybind11;

namespace habana_torch {
namespace {

// C errors reach Python as the same exception types PyTorch raises.
template <typename F>
auto translate(F&& f) -> decltype(f()) {
  HANDLE_TH_ERRORS
  return f();
  END_HANDLE_TH_ERRORS_PYBIND
}

std::map<std::string, int64_t> memory_stats(int device) {
  check_device_index(device);
  hpu_memory_stats_t s;
  HPU_CHECK(hpu_memory_get_stats(device, &s));
  return {
      {"allocated_bytes.all.current", (int64_t)s.allocated_bytes},
      {"allocated_bytes.all.peak", (int64_t)s.peak_allocated_bytes},
      {"requested_bytes.all.current", (int64_t)s.requested_bytes},
      {"reserved_bytes.all.current", (int64_t)s.reserved_bytes},
      {"reserved_bytes.all.peak", (int64_t)s.peak_reserved_bytes},
      {"active.all.current", (int64_t)s.active_blocks},
      {"allocation.all.allocated", (int64_t)s.num_allocs},
      {"allocation.all.freed", (int64_t)s.num_frees},
      {"segment.all.current", (int64_t)s.num_segments},
      {"inactive_split.all.current", (int64_t)s.inactive_split_blocks},
      {"inactive_split_bytes.all.current", (int64_t)s.inactive_split_bytes},
      {"num_ooms", (int64_t)s.num_ooms},
      {"num_alloc_retries", (int64_t)s.num_alloc_retries},
      {"limit", (int64_t)s.capacity},
  };
}

std::vector<std::pair<std::string, int64_t>> metric_items(const std::string& prefix) {
  std::vector<std::pair<std::string, int64_t>> out;
  size_t n = hpu_metric_count(prefix.c_str());
  for (size_t i = 0; i < n; i++) {
    char name[HPU_METRIC_NAME_MAX];
    int64_t value = 0;
    if (hpu_metric_at(prefix.c_str(), i, name, &value)) out.emplace_back(name, value);
  }
  return out;
}

}  // namespace

void init_graph_bindings(py::module_& m);     // hpu_graphs.cpp
void init_autocast_bindings(py::module_& m);  // hpu_autocast.cpp
void init_autograd_exit_bindings(py::module_& m);  // hpu_autograd_exit.cpp
void register_process_group(py::module_& m);  // hpu_process_group_bindings.cpp (the hccl backend)
void register_profiler();                     // hpu_profiler.cpp (the cards in torch.profiler)
}  // namespace habana_torch

PYBIND11_MODULE(_C, m) {
  using namespace habana_torch;
  m.doc() = "habana_torch native module: the hpu device on the C core";
  register_profiler();

  m.def("_init", [] { translate([] { ensure_initialized(); }); });
  m.def("_is_initialized", [] { return hpu_is_initialized() != 0; });
  m.def("_trace_active", [] { return hpu_trace_active() != 0; });  // a profiler records the cards
  m.def("_device_count", [] {
    return translate([] {
      try {
        return device_count();
      } catch (const c10::Error&) {
        return 0;  // a bad environment makes is_available() False, not a crash
      }
    });
  });
  m.def("_init_error", [] {
    hpu_status_t st = hpu_init();
    return st == HPU_SUCCESS ? std::string() : std::string(hpu_last_error());
  });
  m.def("_current_device", [] { return translate([] { ensure_initialized(); return (int)current_device(); }); });
  m.def("_set_device", [](int d) { translate([&] { set_current_device(d); }); });
  m.def("_check_device", [](int64_t d) { translate([&] { check_device_index(d); }); });
  m.def("_synchronize", [](int d) {
    translate([&] {
      check_device_index(d);
      py::gil_scoped_release no_gil;
      HPU_CHECK(hpu_device_synchronize(d));
    });
  });
  m.def("_device_properties", [](int d) {
    return translate([&] {
      check_device_index(d);
      hpu_device_props_t p;
      HPU_CHECK(hpu_device_get_props(d, &p));
      return std::make_tuple(std::string(p.name), p.physical_id, (int64_t)p.total_memory);
    });
  });
  m.def("_current_stream", [](int d) {
    return translate([&] {
      check_device_index(d);
      hpu_stream_t s = current_stream(d);
      return std::make_pair((int64_t)s.id, s.device);
    });
  });
  m.def("_set_stream", [](int64_t id, int d) {
    translate([&] { set_current_stream(to_c10_stream(hpu_stream_t{d, id})); });
  });

  m.def("_memory_stats", [](int d) { return translate([&] { return memory_stats(d); }); });
  m.def("_reset_peak_memory_stats", [](int d) {
    translate([&] { check_device_index(d); HPU_CHECK(hpu_memory_reset_peak(d)); });
  });
  m.def("_reset_accumulated_memory_stats", [](int d) {
    translate([&] { check_device_index(d); HPU_CHECK(hpu_memory_reset_accumulated(d)); });
  });
  m.def("_empty_cache", [](int d) {
    translate([&] { check_device_index(d); HPU_CHECK(hpu_memory_empty_cache(d)); });
  });
  m.def("_mem_get_info", [](int d) {
    return translate([&] {
      check_device_index(d);
      size_t free_bytes = 0, total = 0;
      HPU_CHECK(hpu_mem_get_info(d, &free_bytes, &total));
      return std::make_pair((int64_t)free_bytes, (int64_t)total);
    });
  });

  // The card's default generator as a torch.Generator (shared, not a copy).
  m.def("_default_generator", [](int d) {
    return translate([&] {
      check_device_index(d);
      PyObject* obj = THPGenerator_Wrap(default_generator(d));
      if (!obj) throw py::error_already_set();
      return py::reinterpret_steal<py::object>(obj);
    });
  });
  m.def("_metric_items", &metric_items, py::arg("prefix") = "");
  m.def("_metric_reset", [](const std::string& prefix) { hpu_metric_reset(prefix.c_str()); },
        py::arg("prefix") = "");
  m.def("_is_lazy", [] { return hpu_lazy_enabled() != 0; });
  m.def("_set_lazy", [](bool on) { translate([&] { hpu_lazy_set_enabled(on); }); });
  m.def("_mark_step", [](int device) {
    translate([&] {
      if (device >= 0) {
        HPU_CHECK(hpu_lazy_mark_step(device));
        return;
      }
      for (int d = 0; d < device_count(); d++) HPU_CHECK(hpu_lazy_mark_step(d));
    });
  });
  m.def("_lazy_pending", [](int device) { return hpu_lazy_pending(device); });
  m.def("_recipe_cache_size", [] { return hpu_recipe_cache_size(); });
  m.def("_recipe_cache_clear", [] { hpu_recipe_cache_clear(); });
  m.def("_recompile_reasons", [] {
    std::vector<std::string> out;
    char buf[1024];
    for (size_t i = 0; hpu_recompile_reason(i, buf, sizeof buf); i++) out.emplace_back(buf);
    return out;
  });
  m.def("_recompile_note", [](int device, const std::string& why) { hpu_recompile_note(device, why.c_str()); });
  m.def("_set_num_threads", [](int n) { translate([&] { HPU_CHECK(hpu_set_num_threads(n)); }); });
  m.def("_get_num_threads", [] { return hpu_get_num_threads(); });
  init_graph_bindings(m);
  init_autocast_bindings(m);
  init_autograd_exit_bindings(m);
  register_process_group(m);
}
