"""habana_torch.core: the names of habana_frameworks.torch.core.

Lazy mode (PT_HPU_LAZY_MODE=1, the default): ops are recorded into a per-card graph and
run when the graph is flushed: at mark_step(), when a value is needed on the
host (.item(), .cpu(), printing), before a CPU fallback or a collective, on
synchronize(), and when the graph reaches PT_HPU_MAX_GRAPH_NODES nodes.
Eager mode (PT_HPU_LAZY_MODE=0): each op is launched
as it is called, and mark_step() only waits when sync=True.
"""
import threading

import torch

from .. import _C
from .. import hpu as _hpu

_closures = threading.local()


def add_step_closure(closure, args=(), run_async=False):
    """Runs closure(*args) at the next mark_step(), after the step's graph
    has run, as habana_frameworks.torch.core.add_step_closure: the place to
    read values (loss.item()) without cutting the graph in the middle of a
    step. run_async is accepted for compatibility; closures run in order on
    the calling thread."""
    if not hasattr(_closures, "pending"):
        _closures.pending = []
    _closures.pending.append((closure, tuple(args)))


def _run_step_closures():
    pending = getattr(_closures, "pending", None)
    if not pending:
        return
    _closures.pending = []
    for closure, args in pending:
        closure(*args)


def iter_mark_step(iterable):
    """Yields the items of `iterable`, calling mark_step() before each next
    item (and after the last), as habana_frameworks.torch.core.iter_mark_step."""
    for item in iterable:
        yield item
        mark_step()


def mark_step(device_str="", sync=False):
    """End of a step: launches the recorded graph of every card (or of
    `device_str`) asynchronously; with sync=True also waits for it. Step
    closures registered with add_step_closure run afterwards."""
    if not _hpu.is_initialized():
        _run_step_closures()
        return
    device = -1
    if device_str:
        device = _hpu._utils._get_device_index(torch.device(device_str), optional=True)
    _C._mark_step(device)
    if sync:
        for i in ([device] if device >= 0 else range(_hpu.device_count())):
            _hpu.synchronize(i)
    _run_step_closures()


def is_lazy():
    """True when ops are recorded into graphs (PT_HPU_LAZY_MODE=1)."""
    return _C._is_lazy()


def _mark_step_if_lazy():
    """mark_step() in lazy mode; nothing in eager mode (Gaudi's
    step_closure._mark_step_if_lazy, which libraries call after each
    optimizer step)."""
    if is_lazy():
        mark_step()


def _set_lazy_mode(enabled):
    """Switches lazy mode on or off for the whole process (pending graphs are
    flushed first). Meant for tests and notebooks; scripts set
    PT_HPU_LAZY_MODE before starting."""
    _C._set_lazy(bool(enabled))


__all__ = ["mark_step", "is_lazy", "add_step_closure", "iter_mark_step"]
