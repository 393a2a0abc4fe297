"""habana_frameworks.torch.utils.library_loader: loading the hpu module.

The hpu kernels load with ``import torch`` (or ``import habana_torch``);
load_habana_module() makes sure they are loaded and is otherwise a no-op."""
import importlib

import torch

__all__ = ["load_habana_module", "is_habana_available"]


def load_habana_module():
    """Loads the hpu device (habana_torch) if it is not loaded yet."""
    importlib.import_module("habana_torch")


def is_habana_available():
    """True when the hpu device is loaded and at least one card is visible."""
    load_habana_module()
    return hasattr(torch, "hpu") and torch.hpu.is_available()
