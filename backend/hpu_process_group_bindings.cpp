// The Python side of the "hccl" process-group backend: the module functions
// habana_torch.distributed calls to create, split and inspect backends.
// Each releases the GIL while HCCL works (creation waits for every rank).
#ifdef HPU_WITH_HCCL

#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils/pybind.h>

#include "hpu_process_group.h"

namespace py = pybind11;

namespace habana_torch {

void register_process_group(py::module_& m) {
  m.def(
      "_hccl_create_backend",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, int64_t timeout_ms, int device) {
        HANDLE_TH_ERRORS
        c10::intrusive_ptr<c10d::Backend> b;
        {
          py::gil_scoped_release no_gil;
          b = hccl_backend_create(store, rank, size, timeout_ms, device);
        }
        return b;
        END_HANDLE_TH_ERRORS_PYBIND
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_ms"), py::arg("device"));
  m.def(
      "_hccl_split_backend",
      [](const c10::intrusive_ptr<c10d::Backend>& parent, int color, int key, int rank, int size) {
        HANDLE_TH_ERRORS
        c10::intrusive_ptr<c10d::Backend> b;
        {
          py::gil_scoped_release no_gil;
          b = hccl_backend_split(parent, color, key, rank, size);
        }
        return b;
        END_HANDLE_TH_ERRORS_PYBIND
      },
      py::arg("parent"), py::arg("color"), py::arg("key"), py::arg("rank"), py::arg("size"));
  m.def("_hccl_backend_device", [](const c10::intrusive_ptr<c10d::Backend>& b) {
    return hccl_backend_device(b.get());
  });
  m.def("_hccl_version", [] {
    int v = 0;
    hcclGetVersion(&v);
    return v;
  });
}

}  // namespace habana_torch

#else  // !HPU_WITH_HCCL
#include <pybind11/pybind11.h>
namespace habana_torch {
void register_process_group(pybind11::module_&) {}
}  // namespace habana_torch
#endif
