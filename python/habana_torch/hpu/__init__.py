"""torch.hpu: the device module for the emulated Gaudi cards.

Names follow torch.cuda (and habana_frameworks.torch.hpu where Gaudi users
know them; habana_frameworks.torch.hpu is this module). Cards: HPU_NUM_CARDS
(default 8) filtered by HABANA_VISIBLE_MODULES or HABANA_VISIBLE_DEVICES
(when both are set, HABANA_VISIBLE_MODULES wins); memory per card:
HPU_CARD_MEMORY (default 16G); the Gaudi generation the cards report:
HPU_DEVICE_TYPE (GAUDI, GAUDI2 by default, or GAUDI3).
"""
import os
import sys
import threading

import torch

from .. import _C
from . import _utils  # noqa: F401  (torch.serialization looks it up)
from .memory import (  # noqa: F401
    empty_cache,
    max_memory_allocated,
    max_memory_cached,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_cached,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_peak_memory_stats,
)
from . import random
from .random import (  # noqa: F401
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from .streams import Event, Stream, current_stream, default_stream, set_stream, stream  # noqa: F401
from . import metrics  # noqa: F401
from .graphs import HPUGraph, ModuleCacher, graph, wrap_in_hpu_graph  # noqa: F401

_initialized = False
_init_lock = threading.Lock()
_in_bad_fork = False


def _after_fork_in_child():
    global _initialized, _in_bad_fork
    if _initialized:
        _in_bad_fork = True
    _initialized = False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _is_in_bad_fork():
    return _in_bad_fork


def _lazy_init():
    """Initialise the cards on first use (as torch.cuda._lazy_init)."""
    global _initialized
    if _initialized:
        return
    with _init_lock:
        if _initialized:
            return
        if _in_bad_fork:
            raise RuntimeError(
                "Cannot re-initialize the hpu runtime in a forked subprocess. "
                "To use hpu with multiprocessing, use the 'spawn' start method "
                "(e.g. torch.multiprocessing.set_start_method('spawn'))."
            )
        _C._init()
        random._run_queued_calls()  # seeds set before the cards started
        _initialized = True


def is_initialized():
    return _initialized and not _in_bad_fork


def is_available():
    """True when at least one card is visible (never raises)."""
    return _C._device_count() > 0


def device_count():
    return _C._device_count()


def _device_index(device, optional=False):
    return _utils._get_device_index(device, optional)


def current_device():
    _lazy_init()
    return _C._current_device()


def set_device(device):
    if isinstance(device, (str, torch.device)):
        d = torch.device(device)
        if d.type == "hpu" and d.index is None:
            # "hpu" names the current card, as on Gaudi: DeepSpeed's HPU
            # accelerator passes it (ZeRO-3's Init), and nothing changes.
            return
    idx = _device_index(device)
    if idx >= 0:
        _lazy_init()
        _C._set_device(idx)


def synchronize(device=None):
    """Waits for all work queued on a card (default: the current one)."""
    _lazy_init()
    # The default card without the general index lookup: an eager loop pays
    # for this call at every step (so it is done in C).
    _C._synchronize(_C._current_device() if device is None else _device_index(device, optional=True))


# The Gaudi generation the cards report (get_device_name(), the properties'
# name, habana_frameworks.torch.utils.experimental._get_device_type()), so
# code that branches on Gaudi 1/2/3 takes one known path. Read once.
_DEVICE_TYPES = {"GAUDI": "GAUDI", "GAUDI1": "GAUDI", "GAUDI2": "GAUDI2", "GAUDI3": "GAUDI3"}
_device_type = None


def _device_type_name():
    """"GAUDI", "GAUDI2" or "GAUDI3", from HPU_DEVICE_TYPE (default GAUDI2)."""
    global _device_type
    if _device_type is None:
        raw = os.environ.get("HPU_DEVICE_TYPE", "").strip()
        name = _DEVICE_TYPES.get(raw.upper()) if raw else "GAUDI2"
        if name is None:
            raise ValueError(f"invalid HPU_DEVICE_TYPE={raw!r}: expected GAUDI (or GAUDI1), GAUDI2 or GAUDI3")
        _device_type = name
    return _device_type


def get_device_name(device=None):
    """The card's Gaudi generation: "GAUDI2" unless HPU_DEVICE_TYPE says
    GAUDI (Gaudi 1) or GAUDI3."""
    _lazy_init()
    _device_index(device, optional=True)  # checks the index
    return _device_type_name()


class _DeviceProperties:
    def __init__(self, name, physical_id, total_memory):
        self.name = _device_type_name()
        self.physical_id = physical_id
        self.total_memory = total_memory
        self.type = "hpu"

    def __repr__(self):
        return (f"_HpuDeviceProperties(name='{self.name}', physical_id={self.physical_id}, "
                f"total_memory={self.total_memory // (1024 * 1024)}MB)")


def get_device_properties(device=None):
    _lazy_init()
    return _DeviceProperties(*_C._device_properties(_device_index(device, optional=True)))


def get_device_capability(device=None):
    return {}


class device:
    """Context manager that changes the current card."""

    def __init__(self, device):
        self.idx = _device_index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self):
        _lazy_init()
        self.prev_idx = _C._current_device()
        if self.idx >= 0 and self.idx != self.prev_idx:
            _C._set_device(self.idx)

    def __exit__(self, *exc):
        if self.prev_idx >= 0 and self.idx != self.prev_idx:
            _C._set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the card of a tensor current (cpu: no-op)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.device.type == "hpu" else -1)


def is_bf16_supported(including_emulation=True):
    return True


# Dynamic shapes: on Gaudi a switch of the graph compiler. Here every graph
# is compiled for the shapes it meets and cached per shape set either way;
# the switch is kept so code that sets it and reads it back runs unchanged.
_dynamic_shape = False


def enable_dynamic_shape():
    global _dynamic_shape
    _dynamic_shape = True


def disable_dynamic_shape():
    global _dynamic_shape
    _dynamic_shape = False


def get_dynamic_shape_status():
    """What enable_dynamic_shape / disable_dynamic_shape last set (False at
    start)."""
    return _dynamic_shape


def set_num_threads(n):
    """Threads of the kernel pool (torch.set_num_threads also sets it)."""
    _C._set_num_threads(int(n))


def _install_torch_hooks():
    """Make torch.manual_seed / torch.set_num_threads reach the hpu too, as
    they reach CUDA: users seed once and expect every device seeded. Like
    CUDA's, the hpu seed waits for the cards' first use (hpu.random) rather
    than starting the runtime, so seeding then forking stays fork-safe."""
    if getattr(torch.manual_seed, "_hpu_wrapped", False):
        return
    original_manual_seed = torch.manual_seed
    original_set_num_threads = torch.set_num_threads

    def manual_seed_with_hpu(seed_value):
        gen = original_manual_seed(seed_value)
        if not _in_bad_fork:
            manual_seed_all(seed_value)
        return gen

    def set_num_threads_with_hpu(n):
        original_set_num_threads(n)
        set_num_threads(n)

    manual_seed_with_hpu._hpu_wrapped = True
    manual_seed_with_hpu.__doc__ = original_manual_seed.__doc__
    set_num_threads_with_hpu.__doc__ = original_set_num_threads.__doc__
    torch.manual_seed = manual_seed_with_hpu
    torch.random.manual_seed = manual_seed_with_hpu
    torch.set_num_threads = set_num_threads_with_hpu
    # Same pool size as PyTorch's intra-op pool from the start.
    set_num_threads(torch.get_num_threads())


__all__ = [
    "is_available", "device_count", "current_device", "set_device", "device", "device_of",
    "synchronize", "get_device_name", "get_device_properties", "is_initialized",
    "Stream", "Event", "current_stream", "default_stream", "set_stream", "stream",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "memory_stats", "memory_summary", "reset_peak_memory_stats", "reset_accumulated_memory_stats",
    "empty_cache", "mem_get_info",
    "reset_max_memory_allocated", "memory_cached", "max_memory_cached",
    "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed",
    "get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all",
    "HPUGraph", "graph", "wrap_in_hpu_graph", "ModuleCacher",
    "enable_dynamic_shape", "disable_dynamic_shape", "get_dynamic_shape_status",
]

# habana_frameworks.torch.hpu.hpu is the module itself on Gaudi.
hpu = sys.modules[__name__]
