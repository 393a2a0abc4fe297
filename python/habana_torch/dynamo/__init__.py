"""torch.compile for the hpu: the dynamo backend ``hpu_backend``.

``torch.compile(model, backend="hpu_backend")`` (what transformers and
accelerate pick when they see an hpu) runs the model's FX graphs through the
graph engine: AOTAutograd turns each captured region into a forward and a
backward graph of aten ops (``backend.py``); the first call of such a graph
with an input signature captures its ops as one HPU graph, which the engine
fuses and plans, and every later call replays it with one launch, rebound to
the call's own inputs and to fresh outputs (``replay.py``). A graph with an
op that falls back to the CPU is split around it into captured segments
(``partition.py``); one that cannot be captured otherwise (a host read)
records its ops into lazy graphs instead (``scope.py``). The same holds in
eager and in lazy mode.

Importing habana_torch only registers the name (``registry.py``); dynamo and
AOTAutograd are imported when a model is compiled.
"""
from .registry import install as _install

_install()


def compile_counts():
    """How many FX graphs hpu_backend has compiled in this process, by kind:
    {"forward": n, "backward": n, "inference": n}."""
    from .backend import compile_counts as counts

    return counts()


def replay_counts():
    """Compiled graphs run as HPU graphs (see replay.py): captures,
    replays, captures demoted to ordinary execution, and graphs split
    around their CPU fallbacks (partition.py):
    {"captures": n, "replays": n, "demoted": n, "partitioned": n}."""
    from .replay import replay_counts as counts

    return counts()


__all__ = ["compile_counts", "replay_counts"]
