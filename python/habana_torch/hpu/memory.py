"""Device-memory statistics of the caching allocator (torch.cuda names)."""
from .. import _C
from . import _utils


def _index(device):
    from . import _lazy_init

    _lazy_init()
    return _utils._get_device_index(device, optional=True)


def memory_stats(device=None):
    """The allocator's counters as a flat dict (torch.cuda.memory_stats keys
    where they exist; 'limit' is the card's capacity)."""
    return dict(sorted(_C._memory_stats(_index(device)).items()))


def memory_allocated(device=None):
    return _C._memory_stats(_index(device))["allocated_bytes.all.current"]


def max_memory_allocated(device=None):
    return _C._memory_stats(_index(device))["allocated_bytes.all.peak"]


def memory_reserved(device=None):
    return _C._memory_stats(_index(device))["reserved_bytes.all.current"]


def max_memory_reserved(device=None):
    return _C._memory_stats(_index(device))["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device=None):
    _C._reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device=None):
    _C._reset_accumulated_memory_stats(_index(device))


def empty_cache():
    """Returns cached free segments of every initialised card to its arena."""
    from . import device_count, is_initialized

    if not is_initialized():
        return
    for d in range(device_count()):
        _C._empty_cache(d)


def mem_get_info(device=None):
    """(free, total) bytes of a card, as torch.cuda.mem_get_info."""
    return tuple(_C._mem_get_info(_index(device)))


def memory_summary(device=None, abbreviated=False):
    stats = memory_stats(device)
    lines = [f"hpu:{_index(device)} memory summary"]
    for key, value in stats.items():
        lines.append(f"  {key:40s} {value}")
    return "\n".join(lines)
