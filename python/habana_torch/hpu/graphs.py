"""HPU graphs: capture a region of hpu work once, replay it with one launch.

    g = torch.hpu.HPUGraph()
    with torch.hpu.graph(g):
        static_out = model(static_in)     # recorded, not run
    static_in.copy_(new_batch)
    g.replay()                            # static_out now holds the result

During a capture nothing may wait for the card (.item(), .cpu(), print,
a CPU fallback op): those raise. Memory allocated in the capture belongs to
the graph until it is reset. Random ops draw new numbers at each replay.
"""
import collections
import copy
import functools
import os
import warnings

import torch
import torch.utils._pytree as pytree

from .. import _C
from .. import hpu as _hpu


class HPUGraph:
    """A captured graph (as habana_frameworks.torch.hpu.HPUGraph)."""

    def __init__(self):
        self._graph = None
        self._device = None

    def capture_begin(self, pool=None):
        self._begin(demotable=False)

    def _begin(self, demotable):
        _hpu._lazy_init()
        self.reset()
        self._device = _hpu.current_device()
        _C._capture_begin(self._device, demotable)

    def capture_end(self):
        """Ends the capture. Returns whether a graph was captured: False
        only for a demotable capture (wrap_in_hpu_graph's) that met an
        operation it cannot capture and ran as ordinary work from there."""
        if self._device is None:
            raise RuntimeError("capture_end() without capture_begin()")
        self._graph = _C._capture_end(self._device)
        return self._graph is not None

    def capture_abort(self):
        if self._device is not None:
            _C._capture_abort(self._device)

    def replay(self, asynchronous=True):
        if self._graph is None:
            raise RuntimeError("this HPUGraph holds no captured graph: capture it first")
        self._graph.replay()
        if not asynchronous:
            _hpu.synchronize(self._device)

    def reset(self):
        if self._graph is not None:
            self._graph.reset()
        self._graph = None

    @property
    def num_nodes(self):
        return self._graph.num_nodes if self._graph is not None else 0


class graph:
    """Context manager capturing the work in its body into `hpu_graph`."""

    def __init__(self, hpu_graph, pool=None, stream=None):
        self.hpu_graph = hpu_graph
        self.stream_ctx = _hpu.stream(stream) if stream is not None else None

    def __enter__(self):
        if self.stream_ctx is not None:
            self.stream_ctx.__enter__()
        self.hpu_graph.capture_begin()
        return self.hpu_graph

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.hpu_graph.capture_end()
            else:
                self.hpu_graph.capture_abort()
        finally:
            if self.stream_ctx is not None:
                self.stream_ctx.__exit__(exc_type, exc, tb)
        return False


_UNCAPTURABLE = object()

# Captured graphs kept per wrapped module (least recently used evicted first);
# each pins its outputs and temporaries in card memory, so inputs of ever new
# shapes must not grow the cache without end. 0: no limit.
GRAPH_CACHE_SIZE_ENV = "PT_HPU_WRAP_GRAPH_CACHE_SIZE"
DEFAULT_GRAPH_CACHE_SIZE = 64


def _default_max_graphs():
    value = os.environ.get(GRAPH_CACHE_SIZE_ENV, "").strip()
    if not value:
        return DEFAULT_GRAPH_CACHE_SIZE
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise ValueError(f"{GRAPH_CACHE_SIZE_ENV}={value!r}: expected the number of HPU graphs "
                         "wrap_in_hpu_graph keeps per module (a non-negative integer, 0: no limit)")
    return n or None


def evict_graphs(cache, size):
    """Drops the least recently used entries of an LRU cache of captured
    graphs (OrderedDict of (HPUGraph, ...) tuples, objects with a `graph`
    HPUGraph, or _UNCAPTURABLE) until at most `size` are left."""
    while len(cache) > size:
        _, entry = cache.popitem(last=False)
        if entry is not _UNCAPTURABLE:
            graph = entry[0] if isinstance(entry, tuple) else entry.graph
            graph.reset()  # its blocks go back to the card (outputs still held stay valid)


class _Uncacheable(Exception):
    """The call's arguments cannot be matched to a captured graph."""


class _GraphedForward:
    """A module's forward run through HPU graphs, one per input signature:
    the pytree structure of the arguments, shape, dtype, device and strides
    of each tensor and the type and value of every other leaf. A call with a
    known signature copies its tensors into the captured inputs and replays;
    its outputs are the captured output tensors, rewritten by the next
    replay. At most `max_graphs` signatures are kept (least recently used
    evicted, its card memory released). Calls that need gradients run the
    plain forward, and so do calls with an unhashable non-tensor argument:
    its contents cannot be compared with the captured one, and a graph
    captured for other contents would silently give wrong results. A
    signature whose forward cannot be captured (it reads values on the host,
    or falls back to the CPU) runs the plain forward from then on, with a
    warning."""

    def __init__(self, module, forward, max_graphs=None):
        if max_graphs is None:
            max_graphs = _default_max_graphs()
        elif not isinstance(max_graphs, int) or max_graphs <= 0:
            raise ValueError(f"wrap_in_hpu_graph: max_graphs must be a positive int or None, got {max_graphs!r}")
        self.module = module
        self.forward = forward
        # inspect.signature(module.forward) must still see forward's
        # parameters: transformers' generate passes attention_mask (and
        # other inputs) only when the forward's signature names them.
        functools.update_wrapper(self, forward)
        self.max_graphs = max_graphs
        self.cache = collections.OrderedDict()
        self._warned_uncached = False

    @staticmethod
    def _key(leaves, spec):
        parts = []
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor):
                parts.append((torch.Tensor, tuple(leaf.shape), leaf.dtype, leaf.device, tuple(leaf.stride())))
            else:
                # The type too: 1, 1.0 and True are equal keys but not the
                # same argument (torch.full(s, 1) is int64, with 1.0 float).
                parts.append((type(leaf), leaf))
        key = (spec, tuple(parts))
        try:
            hash(key)
        except TypeError as e:
            raise _Uncacheable(e) from None
        return key

    def _lookup(self, key):
        try:
            entry = self.cache.get(key)
        except Exception as e:  # an argument whose == raises or is not a bool
            raise _Uncacheable(e) from None
        if entry is not None:
            self.cache.move_to_end(key)
        return entry

    def _uncached(self, why, args, kwargs):
        if not self._warned_uncached:
            self._warned_uncached = True
            warnings.warn(f"wrap_in_hpu_graph({type(self.module).__name__}): an argument cannot be matched "
                          f"to a captured graph ({why}); calls with such arguments run without HPU graphs")
        return self.forward(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        leaves, spec = pytree.tree_flatten((args, kwargs))
        tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
        if torch.is_grad_enabled() and (any(t.requires_grad for t in tensors) or
                                        any(p.requires_grad for p in self.module.parameters())):
            return self.forward(*args, **kwargs)  # training: autograd needs the real ops
        if any(t.device.type != "hpu" for t in tensors):
            return self.forward(*args, **kwargs)
        try:
            key = self._key(leaves, spec)
            entry = self._lookup(key)
        except _Uncacheable as e:
            return self._uncached(e, args, kwargs)
        if entry is _UNCAPTURABLE:
            return self.forward(*args, **kwargs)
        if entry is None:
            return self._capture(key, leaves, spec)
        hpu_graph, static_leaves, static_out, written = entry
        for static, leaf in zip(static_leaves, leaves):
            if isinstance(leaf, torch.Tensor) and static is not leaf:
                static.copy_(leaf)
        hpu_graph.replay()
        self._write_back(written, static_leaves, leaves)
        return static_out

    @staticmethod
    def _write_back(written, static_leaves, leaves):
        """The forward updated these arguments in place (a static KV cache,
        say); the replay updated the captured copies, so the caller's
        tensors get their new values, as from the plain forward."""
        for i in written:
            if static_leaves[i] is not leaves[i]:
                leaves[i].copy_(static_leaves[i])

    def _evict_to(self, size):
        evict_graphs(self.cache, size)

    def _capture(self, key, leaves, spec):
        if self.max_graphs is not None:
            self._evict_to(self.max_graphs - 1)
        static_leaves = [leaf.clone() if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]
        versions = [t._version if isinstance(t, torch.Tensor) else None for t in static_leaves]
        args, kwargs = pytree.tree_unflatten(static_leaves, spec)
        hpu_graph = HPUGraph()
        # Demotable: an operation that cannot be captured (a host read, a
        # CPU fallback) turns the capture into ordinary execution from
        # there, so the forward runs exactly once either way. Aborting and
        # running it again would leave whatever the first, unexecuted half
        # stored on the module (a cache, a buffer) holding values never
        # computed, and apply its in-place updates twice.
        hpu_graph._begin(demotable=True)
        try:
            static_out = self.forward(*args, **kwargs)
        except BaseException:
            hpu_graph.capture_abort()
            raise
        captured = hpu_graph.capture_end()
        # In-place writes to an argument bump its version counter.
        written = [i for i, (t, v) in enumerate(zip(static_leaves, versions))
                   if isinstance(t, torch.Tensor) and t._version != v]
        if not captured:
            warnings.warn(f"wrap_in_hpu_graph({type(self.module).__name__}): this forward cannot be captured "
                          "(it reads a value on the host, or an op falls back to the CPU); it runs without HPU "
                          "graphs for these input shapes (metric hpu_graph_demoted counts these)")
            self.cache[key] = _UNCAPTURABLE
        else:
            self.cache[key] = (hpu_graph, static_leaves, static_out, written)
            hpu_graph.replay()  # the capture recorded the work; run it for this call
        self._write_back(written, static_leaves, leaves)
        return static_out

    def clear_cache(self):
        self._evict_to(0)


class ModuleCacher:
    """Runs a module's forward through HPU graphs, one per input signature,
    keeping at most `max_graphs` of them (the least recently used is
    dropped; None: PT_HPU_WRAP_GRAPH_CACHE_SIZE, default 64), as
    habana_frameworks.torch.hpu.ModuleCacher::

        model = ModuleCacher(max_graphs=10)(model=model, inplace=True)

    Training calls (gradients needed) run the plain forward. Returns the
    module (a deep copy when inplace=False); module.clear_cache() drops its
    graphs. The other keyword arguments of Gaudi's are accepted and have no
    effect here: graphs are replayed asynchronously and captured tensors are
    kept either way."""

    def __init__(self, max_graphs=None):
        if max_graphs is not None and (isinstance(max_graphs, bool) or not isinstance(max_graphs, int)
                                       or max_graphs < 1):
            raise ValueError(f"ModuleCacher: max_graphs must be a positive int or None, not {max_graphs!r}")
        self.max_graphs = max_graphs

    def __call__(self, model, inplace=True, allow_unused_input=False, asynchronous=False,
                 disable_tensor_cache=False, dry_run=False, verbose=False):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"ModuleCacher: model must be a torch.nn.Module, not {type(model).__name__}")
        if not inplace:
            model = copy.deepcopy(model)
        graphed = _GraphedForward(model, model.forward, max_graphs=self.max_graphs)
        model.forward = graphed
        model.clear_cache = graphed.clear_cache
        return model


def wrap_in_hpu_graph(module, asynchronous=False, disable_tensor_cache=False, dry_run=False,
                      max_graphs=None, verbose=False):
    """Runs `module`'s forward through HPU graphs (see _GraphedForward), as
    habana_frameworks.torch.hpu.wrap_in_hpu_graph. Returns the module;
    module.clear_cache() drops its graphs. max_graphs: graphs kept (one per
    input signature, least recently used evicted); None: the value of
    PT_HPU_WRAP_GRAPH_CACHE_SIZE (default 64; 0 there means no limit)."""
    return ModuleCacher(max_graphs)(module, inplace=True, asynchronous=asynchronous,
                                    disable_tensor_cache=disable_tensor_cache, dry_run=dry_run,
                                    verbose=verbose)
