"""torch.compile for the hpu: the dynamo backend ``hpu_backend``.

``torch.compile(model, backend="hpu_backend")`` (what transformers and
accelerate pick when they see an hpu) runs the model's FX graphs through the
graph engine: AOTAutograd turns each captured region into a forward and a
backward graph of aten ops (``backend.py``), and every call of such a graph
records its ops into one lazy graph (``scope.py``), which is flushed as a
whole: fused, buffer-planned and looked up in the recipe cache, as in lazy
mode. So eager mode (PT_HPU_LAZY_MODE=0) with torch.compile gets lazy mode's
graphs. In lazy mode the compiled graphs join the step's lazy graph, as any
other op does.

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
    """Inference graphs of mode="reduce-overhead" (see replay.py): HPU graphs
    captured, replays, and captures demoted to ordinary execution:
    {"captures": n, "replays": n, "demoted": n}."""
    from .replay import replay_counts as counts

    return counts()


__all__ = ["compile_counts", "replay_counts"]
