"""hpu_backend: the dynamo backend (see habana_torch.dynamo).

AOTAutograd traces the captured region into functionalized aten graphs, a
forward and (when a gradient is needed) a backward, with the decompositions
of decompositions.py. Each graph is compiled into a ReplayedGraph
(replay.py): its first call with an input signature runs the GraphModule's
ops once into an HPU graph capture, which the graph engine compiles as one
graph (fusion, buffer plan); every later call replays it with one launch,
on the call's own inputs and into fresh outputs, without the dispatcher. A
graph with ops that fall back to the CPU is split around them into
captured segments (partition.py); one that cannot be captured otherwise
runs its ops inside scope.recording(), so the engine still gets the FX
graph as one recorded graph. Dropout is traced in
the form eager mode runs it (_tracing_dropout_as_eager), and inference
graphs update their inputs in place (inplace.py)."""
import contextlib
import threading

import torch
from torch._C import DispatchKey
from torch._dynamo.backends.common import aot_autograd

from .decompositions import eager_dropout_noise, hpu_decompositions
from .inplace import update_inputs_in_place
from .replay import replayed

_counts_lock = threading.Lock()
_counts = {"forward": 0, "backward": 0, "inference": 0}

# torch.compile(mode=...) values. All mean "compile with the graph engine
# and replay" (replay.py): reduce-overhead's HPU graphs are what every mode
# does here, and max-autotune has nothing to tune.
MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile_counts():
    with _counts_lock:
        return dict(_counts)


def _compiler(kind):
    def compile_graph(gm, example_inputs):
        with _counts_lock:
            _counts[kind] += 1
        if kind == "inference":
            update_inputs_in_place(gm)
        return replayed(gm, kind)

    compile_graph.__name__ = f"hpu_{kind}_compiler"
    return compile_graph


# Inference graphs keep their in-place updates of inputs (a buffer such as a
# static KV cache), which inplace.py turns back into in-place ops, and
# which a replay (replay.py) then writes into the buffer itself.
_aot = aot_autograd(
    fw_compiler=_compiler("forward"),
    bw_compiler=_compiler("backward"),
    inference_compiler=_compiler("inference"),
    decompositions=hpu_decompositions(),
    keep_inference_input_mutations=True,
)


def _dropout_as_eager(original):
    """aten.dropout as ATen runs it eagerly on the hpu (eager_dropout_noise
    times the input), where
    PyTorch's tracing form is native_dropout (rand_like(input) > p, and a
    backward of two products over a bool mask, which do not fuse). Traced,
    its backward is grad * noise, one product over the saved draw, and the
    draw comes from the same place in the card's RNG stream as in eager and
    lazy mode, so a compiled step with dropout gives their numbers. The
    cases that draw nothing keep PyTorch's form."""
    def dropout(input, p, train):
        if not train or not 0 < p < 1 or not input.is_floating_point():
            return original(input, p, train)
        return input * eager_dropout_noise(input, p)

    return dropout


# Held while the kernels are swapped; reentrant, should a compile start
# another one on the same thread.
_dropout_lock = threading.RLock()


@contextlib.contextmanager
def _tracing_dropout_as_eager():
    """While AOTAutograd traces, aten.dropout's Python kernels (PyTorch's
    decomposition into native_dropout, at the Autograd and
    CompositeImplicitAutograd keys) are ours: every dropout, also one called
    inside another op's composite kernel (SDPA's math path), is traced in
    the eager form. The Python kernels are only consulted while the Python
    dispatcher is on, that is while tracing, so nothing else sees this."""
    op = torch.ops.aten.dropout.default
    keys = (DispatchKey.Autograd, DispatchKey.CompositeImplicitAutograd)
    saved = {k: op.py_kernels.get(k) for k in keys}
    with _dropout_lock:
        try:
            for k in keys:
                if saved[k] is not None:
                    op.py_kernels[k] = _dropout_as_eager(saved[k])
            op._dispatch_cache.clear()
            yield
        finally:
            for k in keys:
                if saved[k] is not None:
                    op.py_kernels[k] = saved[k]
            op._dispatch_cache.clear()


def hpu_backend(gm, example_inputs, mode=None, options=None):
    """The dynamo backend: torch.compile(model, backend="hpu_backend")."""
    if mode not in MODES:
        raise ValueError(f"hpu_backend: unknown mode {mode!r}; expected one of "
                         f"{', '.join(repr(m) for m in MODES if m)}")
    if options:
        raise ValueError(f"hpu_backend: takes no options, got {sorted(options)}")
    with _tracing_dropout_as_eager():
        return _aot(gm, example_inputs)
