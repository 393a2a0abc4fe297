// HPU graphs for Python: a handle owning a captured graph (hpu/capture.h).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Exceptions.h>

#include "hpu_common.h"

namespace py = pybind11;

namespace habana_torch {
namespace {

struct CapturedGraph {
  hpu_captured_t* graph = nullptr;
  int device = 0;
  ~CapturedGraph() { hpu_captured_destroy(graph); }
  void replay() {
    TORCH_CHECK(graph, "this HPU graph was reset; capture it again");
    HPU_CHECK(hpu_captured_replay(graph, current_stream(device)));
  }
  // A replay with storages moved (hpu_captured_replay_rebound): from[i],
  // a storage the capture recorded, is to[i] of to_bytes[i] bytes.
  void replay_rebound(const std::vector<uintptr_t>& from, const std::vector<uintptr_t>& to,
                      const std::vector<size_t>& to_bytes) {
    TORCH_CHECK(graph, "this HPU graph was reset; capture it again");
    TORCH_CHECK(from.size() == to.size() && to.size() == to_bytes.size(),
                "replay_rebound: ", from.size(), " captured storages, ", to.size(), " new ones and ",
                to_bytes.size(), " sizes");
    std::vector<hpu_rebind_t> binds(from.size());
    for (size_t i = 0; i < from.size(); i++)
      binds[i] = {reinterpret_cast<const void*>(from[i]), reinterpret_cast<void*>(to[i]), to_bytes[i]};
    HPU_CHECK(hpu_captured_replay_rebound(graph, current_stream(device), binds.data(),
                                          static_cast<int>(binds.size())));
  }
  // False when the block is not one the capture allocated, or another
  // operand of the graph reaches into it.
  bool release_block(uintptr_t ptr) {
    TORCH_CHECK(graph, "this HPU graph was reset; capture it again");
    return hpu_captured_release_block(graph, reinterpret_cast<void*>(ptr)) == HPU_SUCCESS;
  }
  bool owns(uintptr_t ptr) const {
    TORCH_CHECK(graph, "this HPU graph was reset; capture it again");
    return hpu_captured_owns(graph, reinterpret_cast<const void*>(ptr)) != 0;
  }
  uint64_t extent(uintptr_t storage) const {
    TORCH_CHECK(graph, "this HPU graph was reset; capture it again");
    return hpu_captured_extent(graph, reinterpret_cast<const void*>(storage));
  }
  void reset() {
    hpu_captured_destroy(graph);
    graph = nullptr;
  }
  int num_nodes() const { return hpu_captured_num_nodes(graph); }
};

}  // namespace

void init_graph_bindings(py::module_& m) {
  py::class_<CapturedGraph>(m, "_CapturedGraph")
      .def("replay", [](CapturedGraph& g) {
        HANDLE_TH_ERRORS
        g.replay();
        END_HANDLE_TH_ERRORS_PYBIND
      })
      .def("replay_rebound",
           [](CapturedGraph& g, const std::vector<uintptr_t>& from, const std::vector<uintptr_t>& to,
              const std::vector<size_t>& to_bytes) {
             HANDLE_TH_ERRORS
             g.replay_rebound(from, to, to_bytes);
             END_HANDLE_TH_ERRORS_PYBIND
           })
      .def("release_block",
           [](CapturedGraph& g, uintptr_t ptr) {
             HANDLE_TH_ERRORS
             return g.release_block(ptr);
             END_HANDLE_TH_ERRORS_PYBIND
           })
      .def("owns", &CapturedGraph::owns)
      .def("extent", &CapturedGraph::extent)
      .def("reset", &CapturedGraph::reset)
      .def_property_readonly("num_nodes", &CapturedGraph::num_nodes)
      .def_readonly("device", &CapturedGraph::device);
  m.def(
      "_capture_begin",
      [](int device, bool demotable) {
        HANDLE_TH_ERRORS
        check_device_index(device);
        HPU_CHECK(demotable ? hpu_capture_begin_demotable(device) : hpu_capture_begin(device));
        END_HANDLE_TH_ERRORS_PYBIND
      },
      py::arg("device"), py::arg("demotable") = false);
  // None when a demotable capture turned into ordinary execution.
  m.def("_capture_end", [](int device) -> py::object {
    HANDLE_TH_ERRORS
    auto g = std::make_unique<CapturedGraph>();
    g->device = device;
    HPU_CHECK(hpu_capture_end(device, &g->graph));
    if (!g->graph) return py::none();
    return py::cast(std::move(g));
    END_HANDLE_TH_ERRORS_PYBIND
  });
  m.def("_capture_abort", [](int device) { hpu_capture_abort(device); });
  m.def("_capture_active", [](int device) { return hpu_capture_active(device) != 0; });
}

}  // namespace habana_torch
