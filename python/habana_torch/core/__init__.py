"""habana_torch.core: the names of habana_frameworks.torch.core.

In eager mode (this release) every op is launched as it is called, so
mark_step() has no graph to flush: it only waits for the cards when
``sync=True``. Lazy mode will make it the graph flush point.
"""
import torch

from .. import hpu as _hpu


def mark_step(device_str="", sync=False):
    """End of a step. Eager mode: nothing is pending on the host side, so
    this returns at once; ``sync=True`` also waits for the queued work."""
    if not _hpu.is_initialized():
        return
    if sync:
        if device_str:
            _hpu.synchronize(torch.device(device_str))
        else:
            for i in range(_hpu.device_count()):
                _hpu.synchronize(i)


def is_lazy():
    return False


__all__ = ["mark_step", "is_lazy"]
