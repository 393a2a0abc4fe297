"""habana_torch: the Gaudi (HPU) software stack for PyTorch, on the CPU.

Importing it registers the built-in ``hpu`` device with PyTorch::

    import torch, habana_torch
    x = torch.randn(4, 8).to("hpu")

``habana_torch.hpu`` becomes ``torch.hpu``; ``habana_torch.core`` mirrors
``habana_frameworks.torch.core`` (``mark_step``).
"""
import torch

from . import _C  # noqa: F401  (loads the C core and registers the hpu kernels)
from . import hpu
from . import core
from . import metrics
from . import hpex  # loads the autocast op lists (hmp/); hpex.hmp is Gaudi's HMP

if not hasattr(torch, "hpu"):
    torch._register_device_module("hpu", hpu)

hpu._install_torch_hooks()

__version__ = "0.1.0"
__all__ = ["hpu", "core", "metrics"]
