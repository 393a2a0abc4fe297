"""Device-memory statistics of the caching allocator (torch.cuda names)."""
from .. import _C
from . import _utils


def _index(device):
    from . import _lazy_init

    _lazy_init()
    return _utils._get_device_index(device, optional=True)


# Gaudi's memory_stats keys, from the allocator's counters. This allocator
# has one level (segments carved from the card's memory, split into blocks),
# so Gaudi's "system" counters are the same counts as the plain ones, and it
# does not record each allocation's size: MaxAllocSize is the peak of bytes
# in use, which bounds the largest single allocation from above.
_GAUDI_KEYS = (
    ("Limit", "limit"),                                  # the card's capacity
    ("InUse", "allocated_bytes.all.current"),            # = memory_allocated()
    ("MaxInUse", "allocated_bytes.all.peak"),            # = max_memory_allocated()
    ("NumAllocs", "allocation.all.allocated"),           # since reset_accumulated_memory_stats()
    ("NumFrees", "allocation.all.freed"),
    ("ActiveAllocs", "active.all.current"),              # live blocks
    ("MaxAllocSize", "allocated_bytes.all.peak"),
    ("TotalSystemAllocs", "allocation.all.allocated"),
    ("TotalSystemFrees", "allocation.all.freed"),
    ("TotalActiveAllocs", "active.all.current"),
)


def memory_stats(device=None):
    """The allocator's counters as a flat dict: torch.cuda.memory_stats keys
    where they exist ('limit' is the card's capacity), and Gaudi's keys
    (Limit, InUse, MaxInUse, NumAllocs, NumFrees, ActiveAllocs, MaxAllocSize,
    TotalSystemAllocs, TotalSystemFrees, TotalActiveAllocs) from the same
    counters: InUse is memory_allocated(), MaxInUse max_memory_allocated().
    MaxAllocSize is not tracked per allocation; it reports MaxInUse, an
    upper bound of the largest one."""
    stats = _C._memory_stats(_index(device))
    for gaudi, ours in _GAUDI_KEYS:
        stats[gaudi] = stats[ours]
    return dict(sorted(stats.items()))


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


def reset_max_memory_allocated(device=None):
    """Resets the peak of allocated bytes (as torch.cuda's, which resets
    every peak: reset_peak_memory_stats)."""
    reset_peak_memory_stats(device)


def memory_cached(device=None):
    """Bytes held by the caching allocator: memory_reserved() (the older name)."""
    return memory_reserved(device)


def max_memory_cached(device=None):
    """Peak of memory_cached(): max_memory_reserved() (the older name)."""
    return max_memory_reserved(device)


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
