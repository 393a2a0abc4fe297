"""hpu_backend: the dynamo backend (see habana_torch.dynamo).

AOTAutograd traces the captured region into functionalized aten graphs, a
forward and (when a gradient is needed) a backward, with the decompositions
of decompositions.py. Each graph is compiled into a callable that runs the
GraphModule's ops on the hpu inside scope.recording(): the graph engine gets
the whole FX graph as one recorded graph. The ops still pass through
PyTorch's dispatcher one by one while they are recorded; only the
computation is done by a cached, fused recipe. With mode="reduce-overhead"
inference graphs are replayed as HPU graphs instead (replay.py). Dropout is
traced in the form eager mode runs it (_tracing_dropout_as_eager), and
inference graphs update their inputs in place (inplace.py)."""
import contextlib
import threading

import torch
from torch._C import DispatchKey
from torch._dynamo.backends.common import aot_autograd

from . import scope
from .decompositions import eager_dropout_noise, hpu_decompositions
from .inplace import update_inputs_in_place

_counts_lock = threading.Lock()
_counts = {"forward": 0, "backward": 0, "inference": 0}

# torch.compile(mode=...) values. "reduce-overhead" replays inference graphs
# as HPU graphs (replay.py); the others all mean "compile with the graph
# engine" (max-autotune has nothing to tune here).
MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile_counts():
    with _counts_lock:
        return dict(_counts)


def _static_and_mutated_inputs():
    """The inputs AOTAutograd marks static (parameters, buffers) and those
    the graph updates in place, by position, for the graph being compiled."""
    from torch._guards import TracingContext

    ctx = TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None)
    if meta is None:
        return (), ()
    # effect tokens, when the graph has any, come first among the inputs
    # (static_input_indices already count them)
    first = len(getattr(meta, "tokens", None) or ())
    mutated = [first + i for i, info in enumerate(meta.input_info) if info.mutates_data]
    return tuple(meta.static_input_indices or ()), tuple(mutated)


def _compiler(kind, replay=False):
    def compile_graph(gm, example_inputs):
        with _counts_lock:
            _counts[kind] += 1
        if kind == "inference":
            update_inputs_in_place(gm)
        run = gm.forward

        def call(args):
            with scope.recording():
                return run(*args)

        call._boxed_call = True  # AOTAutograd passes the inputs as one list
        if replay:
            from .replay import ReplayedGraph

            # captured without the recording scope: a capture records the
            # ops itself, and switching lazy mode would end it
            return ReplayedGraph(call, lambda args: run(*args), *_static_and_mutated_inputs())
        return call

    compile_graph.__name__ = f"hpu_{kind}_compiler"
    return compile_graph


# Inference graphs keep their in-place updates of inputs (a buffer such as a
# static KV cache), which inplace.py turns back into in-place ops, and
# which a replayed graph (mode="reduce-overhead", replay.py) then writes
# into the buffer itself.
_aot = aot_autograd(
    fw_compiler=_compiler("forward"),
    bw_compiler=_compiler("backward"),
    inference_compiler=_compiler("inference"),
    decompositions=hpu_decompositions(),
    keep_inference_input_mutations=True,
)
_aot_replay = aot_autograd(
    fw_compiler=_compiler("forward"),
    bw_compiler=_compiler("backward"),
    inference_compiler=_compiler("inference", replay=True),
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
    aot = _aot_replay if mode == "reduce-overhead" else _aot
    with _tracing_dropout_as_eager():
        return aot(gm, example_inputs)
