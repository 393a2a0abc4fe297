// HPU graphs for Python: a handle owning a captured graph (hpu/capture.h).
#include <pybind11/pybind11.h>
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
