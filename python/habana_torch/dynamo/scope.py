"""The recording scope a compiled graph runs in.

In eager mode (PT_HPU_LAZY_MODE=0) a compiled graph's ops are recorded into
the card's lazy graph instead of being launched one by one, and the graph is
flushed when the outermost scope ends: one recorded graph per FX graph, which
the graph engine fuses, plans and caches like any lazy graph (the recipe
cache's signature covers shapes and strides, so a size dynamo treats as
symbolic gets one recipe per concrete size, with the recompile reason in
habana_torch.metrics.recompile_reasons()). An op that falls back to the CPU
inside the scope flushes what was recorded before it, as in lazy mode, and is
counted by the cpu_fallback counter.

Lazy mode is a process-wide switch in the C core, so the scope counts how
many threads are inside (the forward on the main thread and a backward on
the card's autograd thread may overlap); the last one out switches it back
and flushes. Work another thread submits meanwhile is recorded too, which
is still correct: recording delays the computation, never its result.

In lazy mode (PT_HPU_LAZY_MODE=1) the scope does nothing: compiled graphs
join the step's lazy graph, flushed at mark_step or a host read."""
import contextlib
import threading

from .. import _C

_lock = threading.Lock()
_depth = 0
_switched = False


@contextlib.contextmanager
def recording():
    global _depth, _switched
    with _lock:
        _depth += 1
        if _depth == 1 and not _C._is_lazy():
            _C._set_lazy(True)
            _switched = True
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _switched:
                _switched = False
                _C._set_lazy(False)  # flushes (launches, does not wait for) the recorded graphs
