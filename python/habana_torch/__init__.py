"""habana_torch: the Gaudi (HPU) software stack for PyTorch, on the CPU.

Importing it registers the built-in ``hpu`` device with PyTorch::

    import torch, habana_torch
    x = torch.randn(4, 8).to("hpu")

``habana_torch.hpu`` becomes ``torch.hpu``; ``habana_torch.core`` mirrors
``habana_frameworks.torch.core`` (``mark_step``); ``torch.compile(model,
backend="hpu_backend")`` compiles for the hpu (``habana_torch.dynamo``). The package
``habana_frameworks.torch``, installed alongside, is Gaudi's import path
over these modules, so scripts and libraries written for Gaudi find them.
"""
import os as _os

import torch

# HPU_KERNEL_ISA=avx2 stands for a CPU without AVX-512: OpenBLAS (our GEMMs
# past the AVX2 kernel's shapes, LAPACK) picks its kernels for the CPU it
# finds when _C loads it, so it is told the same (unless the user chose).
if _os.environ.get("HPU_KERNEL_ISA") == "avx2":
    _os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")

from . import _C  # noqa: F401  (loads the C core and registers the hpu kernels)
from . import hpu
from . import core
from . import metrics
from . import hpex  # loads the autocast op lists (hmp/); hpex.hmp is Gaudi's HMP
from . import dynamo  # torch.compile(backend="hpu_backend"); dynamo itself loads on first use

if not hasattr(torch, "hpu"):
    torch._register_device_module("hpu", hpu)


def _alias_hpu_submodules():
    """`import torch.hpu.random` (and the other submodules) finds the loaded
    module instead of loading its file a second time."""
    import sys

    for name, module in list(sys.modules.items()):
        if name.startswith("habana_torch.hpu.") and module is not None:
            sys.modules.setdefault("torch.hpu." + name[len("habana_torch.hpu."):], module)


_alias_hpu_submodules()

hpu._install_torch_hooks()

from . import _torchvision_compat  # noqa: E402

_torchvision_compat.install()


def _join_autograd_device_threads():
    """At exit, before the interpreter finalises: wait until PyTorch's autograd
    thread of every card has finished its last backward (a handshake through
    the engine's own queues, backend/hpu_autograd_exit.cpp). Such a thread
    may hold the last reference to the finished graph task, whose Python
    objects need the GIL to be freed; during finalisation that aborts the
    process ("terminate called without an active exception")."""
    if hpu.is_initialized():
        _C._autograd_exit_handshake()


import atexit as _atexit  # noqa: E402

_atexit.register(_join_autograd_device_threads)


if torch.accelerator.current_accelerator() is None:
    import warnings as _warnings

    _warnings.warn(
        "habana_torch was imported after PyTorch had already looked for its accelerator "
        "(something imported before it, e.g. transformers, asked torch.accelerator), so "
        "torch.accelerator and autograd cannot see the hpu. Install habana_torch with pip "
        "(it then loads with `import torch`), or import habana_torch before other libraries; "
        "TORCH_DEVICE_BACKEND_AUTOLOAD=0 disables the automatic load.")

from habana_torch.version import __version__, GAUDI_API_VERSION  # noqa: E402
__all__ = ["hpu", "core", "metrics"]
