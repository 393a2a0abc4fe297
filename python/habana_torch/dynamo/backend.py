"""hpu_backend: the dynamo backend (see habana_torch.dynamo).

AOTAutograd traces the captured region into functionalized aten graphs, a
forward and (when a gradient is needed) a backward, with the decompositions
of decompositions.py. Each graph is compiled into a callable that runs the
GraphModule's ops on the hpu inside scope.recording(): the graph engine gets
the whole FX graph as one recorded graph. The ops still pass through
PyTorch's dispatcher one by one while they are recorded; only the
computation is done by a cached, fused recipe."""
import threading

import torch
from torch._dynamo.backends.common import aot_autograd

from . import scope
from .decompositions import hpu_decompositions

_counts_lock = threading.Lock()
_counts = {"forward": 0, "backward": 0, "inference": 0}

# torch.compile(mode=...) values; they all mean "compile with the graph
# engine" here. reduce-overhead (replaying an HPU graph) and max-autotune
# have no separate path yet.
MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile_counts():
    with _counts_lock:
        return dict(_counts)


def _compiler(kind):
    def compile_graph(gm, example_inputs):
        with _counts_lock:
            _counts[kind] += 1
        run = gm.forward

        def call(args):
            with scope.recording():
                return run(*args)

        call._boxed_call = True  # AOTAutograd passes the inputs as one list
        return call

    compile_graph.__name__ = f"hpu_{kind}_compiler"
    return compile_graph


_aot = aot_autograd(
    fw_compiler=_compiler("forward"),
    bw_compiler=_compiler("backward"),
    inference_compiler=_compiler("inference"),
    decompositions=hpu_decompositions(),
)


def hpu_backend(gm, example_inputs, mode=None, options=None):
    """The dynamo backend: torch.compile(model, backend="hpu_backend")."""
    if mode not in MODES:
        raise ValueError(f"hpu_backend: unknown mode {mode!r}; expected one of "
                         f"{', '.join(repr(m) for m in MODES if m)}")
    if options:
        raise ValueError(f"hpu_backend: takes no options, got {sorted(options)}")
    return _aot(gm, example_inputs)
