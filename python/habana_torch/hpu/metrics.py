"""Gaudi-style metrics: ``metric_global(name).stats()``.

Metrics known here:
  cpu_fallback        ops that ran on the CPU because hpu has no kernel for them:
                      [("TotalNumber", n), ("FallbackOps", {op: count})]
  graph_compilation   lazy-mode graph compilations (recipe-cache misses):
                      [("TotalNumber", n), ("TotalTime", us), ("AvgTime", us)]
  recipe_cache        [("Hits", n), ("Misses", n), ("Evictions", n), ("Size", n),
                       ("DiskHits", n), ("DiskStores", n), ("DiskRejected", n), ("DiskFull", n)]
                      (the Disk* ones with PT_HPU_RECIPE_CACHE_CONFIG=dir[,delete,max_MB])
  graph_launch        [("TotalNumber", graphs launched), ("TotalNodes", nodes in them),
                       ("RunAtWait", of those, graphs a synchronize or a read to the host ran
                       on its own thread, as the card's queue was idle)]
  fusion              [("FusedNodes", nodes run inside fused groups), ("Groups", n),
                       ("DroppedStores", intermediates never written to memory)]
  queue_wake          [("Deferred", pushes that left a sleeping queue worker asleep, as a
                       pool worker was awake), ("RunByPool", of those, the ops that awake pool
                       worker ran itself), ("ByPool", the ones it woke the queue worker for, as
                       it could not take them and nobody synchronized in time)]
  queue_full          [("Waits", pushes of a host thread that waited because the card's queue
                       held HPU_QUEUE_DEPTH tasks)]
  eager_inline        [("Large", eager ops of 1M+ elements over their operands that the calling
                       thread ran itself, as the card's queue was idle, instead of queueing them)]
"""
from .. import _C

_FALLBACK_PREFIX = "cpu_fallback::"


def cpu_fallback_counts():
    """{op name: number of times it ran through the CPU fallback}."""
    return {name[len(_FALLBACK_PREFIX):]: value
            for name, value in _C._metric_items(_FALLBACK_PREFIX) if value}


class Metric:
    def __init__(self, name):
        if name not in _METRICS:
            raise ValueError(f"unknown metric {name!r}; known: {sorted(_METRICS)}")
        self.name = name

    def stats(self):
        return _METRICS[self.name]()

    def reset(self):
        _RESETS[self.name]()

    def __repr__(self):
        return f"Metric({self.name!r}, {self.stats()})"


def _fallback_stats():
    ops = cpu_fallback_counts()
    return [("TotalNumber", sum(ops.values())), ("FallbackOps", ops)]


def _counter(name):
    return dict(_C._metric_items(name)).get(name, 0)


def _compile_stats():
    n, us = _counter("graph_compilation"), _counter("graph_compilation_us")
    return [("TotalNumber", n), ("TotalTime", us), ("AvgTime", us / n if n else 0.0)]


def _cache_stats():
    return [("Hits", _counter("recipe_cache_hit")), ("Misses", _counter("recipe_cache_miss")),
            ("Evictions", _counter("recipe_cache_evict")), ("Size", _C._recipe_cache_size()),
            # misses because the cached plans of these shapes assumed other
            # overlaps between operands; host time of the lookups (each hit
            # checks its fused plan against the graph's real overlaps)
            ("AliasMisses", _counter("recipe_cache_alias_miss")),
            ("LookupTime", _counter("recipe_cache_lookup_us")),
            # PT_HPU_RECIPE_CACHE_CONFIG: misses served from disk, files
            # written, files ignored (damaged, foreign), writes refused (full)
            ("DiskHits", _counter("recipe_cache_disk_hit")),
            ("DiskStores", _counter("recipe_cache_disk_store")),
            ("DiskRejected", _counter("recipe_cache_disk_rejected")),
            ("DiskFull", _counter("recipe_cache_disk_full"))]


def _launch_stats():
    return [("TotalNumber", _counter("graph_launch")), ("TotalNodes", _counter("graph_nodes")),
            ("RunAtWait", _counter("graph_launch_at_wait"))]


def _fusion_stats():
    return [("FusedNodes", _counter("fused_nodes")), ("Groups", _counter("fusion_groups")),
            ("DroppedStores", _counter("dropped_stores"))]


def _queue_wake_stats():
    return [("Deferred", _counter("queue_wake_deferred")), ("RunByPool", _counter("queue_wake_run_by_pool")),
            ("ByPool", _counter("queue_wake_by_pool"))]


def _queue_full_stats():
    return [("Waits", _counter("queue_full_wait"))]


def _eager_inline_stats():
    return [("Large", _counter("eager_inline_large"))]


def _reset(*names):
    def reset():
        for name in names:
            _C._metric_reset(name)
    return reset


_METRICS = {"cpu_fallback": _fallback_stats, "graph_compilation": _compile_stats,
            "recipe_cache": _cache_stats, "graph_launch": _launch_stats, "fusion": _fusion_stats,
            "queue_wake": _queue_wake_stats, "queue_full": _queue_full_stats,
            "eager_inline": _eager_inline_stats}
_RESETS = {"cpu_fallback": _reset(_FALLBACK_PREFIX),
           "graph_compilation": _reset("graph_compilation"),  # prefix: also clears _us
           "recipe_cache": _reset("recipe_cache_"),
           "graph_launch": _reset("graph_launch", "graph_nodes"),
           "fusion": _reset("fused_nodes", "fusion_groups", "dropped_stores"),
           "queue_wake": _reset("queue_wake_"),
           "queue_full": _reset("queue_full"),
           "eager_inline": _reset("eager_inline_")}


def recompile_reasons():
    """Why recent lazy-mode graphs compiled, newest first (at most 64), e.g.
    'hpu:0: node 3 (add): input 0 changed from [16, 128] to [8, 128]'."""
    return list(_C._recompile_reasons())


def metric_global(name):
    """The process-wide metric `name` (as habana_frameworks' metric_global)."""
    return Metric(name)


def metrics_names():
    return sorted(_METRICS)


class metric_localcontext:
    """Counts a metric over a ``with`` block: ``stats()`` gives the change."""

    def __init__(self, name):
        self.metric = Metric(name)
        self._start = None
        self._end = None

    def __enter__(self):
        self._start = self.metric.stats()
        return self

    def __exit__(self, *exc):
        self._end = self.metric.stats()
        return False

    def stats(self):
        end = self._end if self._end is not None else self.metric.stats()
        out = []
        for (key, before), (_, after) in zip(self._start, end):
            if isinstance(after, dict):
                diff = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}
                out.append((key, diff))
            else:
                out.append((key, after - before))
        return out
