"""Counters visible from Python; see habana_torch.hpu.metrics."""
from .hpu.metrics import cpu_fallback_counts, metric_global, metric_localcontext, metrics_names, recompile_reasons  # noqa: F401
