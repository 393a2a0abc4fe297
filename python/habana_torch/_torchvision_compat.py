"""`import torchvision` with PyPI's wheel over the CPU torch.

PyPI's Linux torchvision wheels are built against the CUDA torch: their
compiled operator library (`torchvision/_C.so`) needs libtorch_cuda.so and
does not load here. torchvision copes with that for every op but two: it
registers fake (meta) kernels for `torchvision::nms` and `torchvision::qnms`
without first checking that its library loaded, so the import itself fails
("operator torchvision::nms does not exist"), and with it everything that
imports torchvision (its models, transforms and datasets, which are plain
PyTorch; optimum-habana imports it unconditionally).

When torchvision is imported and its `_C` cannot load, this declares the
schemas of those two operators, with no kernel, before torchvision's own
code runs. The import then succeeds; `torchvision.ops.nms` and the other
compiled ops still raise torchvision's own "Couldn't load custom C++ ops"
error, and a warning says so once. Nothing happens when `_C` loads (a
torchvision built for the CPU torch) or when torchvision is not installed.
"""
import ctypes
import glob
import importlib.abc
import importlib.machinery
import os
import sys
import warnings

import torch

# The operators torchvision 0.28 registers fake kernels for unconditionally.
_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)
_library = None  # the torch.library.Library holding the declarations (kept alive)


def _compiled_ops_load(package_dir):
    """Whether torchvision's compiled operator library loads in this process."""
    found = glob.glob(os.path.join(package_dir, "_C.so")) + glob.glob(os.path.join(package_dir, "_C.*.so"))
    if not found:
        return False
    try:
        ctypes.CDLL(found[0], mode=os.RTLD_LAZY | os.RTLD_LOCAL)
    except OSError:
        return False
    return True


def _declare_schemas(reason):
    global _library
    if _library is not None:
        return
    library = torch.library.Library("torchvision", "FRAGMENT")
    for schema in _SCHEMAS:
        try:
            library.define(schema)
        except RuntimeError:  # already declared (another library did the same)
            pass
    _library = library
    warnings.warn(
        f"torchvision's compiled operators do not load with this PyTorch ({reason}); habana_torch "
        "declared the schemas torchvision needs at import, so its models, transforms and datasets "
        "work, while torchvision.ops' compiled operators (nms, roi_align, deform_conv2d, ...) raise "
        "torchvision's own error.", stacklevel=3)


class _TorchvisionFinder(importlib.abc.MetaPathFinder):
    """Sees the first `import torchvision`, prepares it, then steps aside."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "torchvision":
            return None
        self.remove()
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.submodule_search_locations:
            _prepare(list(spec.submodule_search_locations)[0])
        return spec

    def remove(self):
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def _prepare(package_dir):
    if not _compiled_ops_load(package_dir):
        _declare_schemas("its wheel is built for another PyTorch, e.g. the CUDA one")


def install():
    """Called once when habana_torch loads."""
    module = sys.modules.get("torchvision")
    if module is not None:
        # `import torchvision` imported torch, which loaded habana_torch: the
        # package is still initialising, before its registrations.
        spec = getattr(module, "__spec__", None)
        if spec is not None and getattr(spec, "_initializing", False) and spec.submodule_search_locations:
            _prepare(list(spec.submodule_search_locations)[0])
        return
    sys.meta_path.insert(0, _TorchvisionFinder())
