"""mode="reduce-overhead": an inference graph replayed as an HPU graph.

torch.compile(model, backend="hpu_backend", mode="reduce-overhead") runs
each inference graph (a forward under no_grad) the way CUDA graphs serve
inductor's reduce-overhead mode: the first call with a given input
signature captures the graph's ops into an HPU graph, every later call
replays it with one launch, without PyTorch's dispatcher, the shim or the
recording of a single op. That is what a decode step of text generation
spends most of its time on.

- Static inputs (the parameters and buffers AOTAutograd marks as such) are
  used in place: the graph reads and writes their memory directly, so an
  in-place update of a buffer (a static KV cache) lands in the buffer
  itself. Their addresses are part of the signature: a module whose
  parameter is replaced by another tensor gets a new capture.
- Every other tensor input is copied into the graph's own input tensor
  before the replay; one the graph updates in place is copied back.
- Outputs are returned as copies, so a caller may hold the results of
  several calls (the captured outputs are rewritten at every replay).
- Called while the card captures an HPU graph of the caller's, the ops
  are recorded into that capture as in the default mode.
- A graph that cannot be captured (it reads a value on the host, or an op
  falls back to the CPU) runs as ordinary work for that signature from
  then on, counted by metric hpu_graph_demoted; training graphs (forward
  and backward) are not replayed.
- At most PT_HPU_WRAP_GRAPH_CACHE_SIZE signatures per graph are kept (as
  wrap_in_hpu_graph's), least recently used dropped first; a kept graph
  holds its static inputs (a replaced parameter stays alive until its
  graph is dropped).

habana_torch.dynamo.replay_counts() counts captures, replays and demotions."""
import collections
import threading

import torch

from .. import _C
from .. import hpu as _hpu
from ..hpu.graphs import _UNCAPTURABLE, HPUGraph, _default_max_graphs, evict_graphs

_counts_lock = threading.Lock()
_counts = {"captures": 0, "replays": 0, "demoted": 0}


def replay_counts():
    with _counts_lock:
        return dict(_counts)


def _count(key):
    with _counts_lock:
        _counts[key] += 1


class ReplayedGraph:
    """A boxed callable (it takes the list of the graph's inputs) running
    the graph through HPU graphs, one per input signature: `capture(args)`
    runs its ops for a capture, `run(args)` as ordinary work."""

    _boxed_call = True

    def __init__(self, run, capture, static_indices, mutated_indices):
        self.run = run
        self.capture = capture
        self.static = frozenset(static_indices)
        self.static_order = tuple(sorted(self.static))
        self.dynamic_order = None  # the other positions, set at the first call
        self.mutated = tuple(mutated_indices)
        self.max_graphs = _default_max_graphs()
        self.cache = collections.OrderedDict()
        # One call at a time: the graph's own input and output tensors are
        # shared by every call of a signature.
        self.lock = threading.Lock()

    def _key(self, args):
        """The signature of a call. Dynamo's guards already hold every
        input's dtype, device, shape and strides fixed for this graph (a
        size it treats as symbolic arrives as a number among the inputs),
        so the key is the numbers, the static inputs' addresses and, to be
        safe and cheaply, the other tensors' shapes and strides."""
        key = [args[i].data_ptr() for i in self.static_order]
        for i in self.dynamic_order:
            a = args[i]
            key.append((a.shape, a.stride(), a.dtype, a.device) if isinstance(a, torch.Tensor) else (type(a), a))
        return tuple(key)

    @staticmethod
    def _capturable(args):
        return all(a.device.type == "hpu" if isinstance(a, torch.Tensor)
                   else isinstance(a, (int, float, bool)) or a is None for a in args)

    def __call__(self, args):
        args = list(args)
        if self.dynamic_order is None:
            self.dynamic_order = tuple(i for i in range(len(args)) if i not in self.static)
        if _C._capture_active(_hpu.current_device()):
            return self.run(args)  # inside a user's capture, the ops join it
        key = self._key(args)
        with self.lock:
            return self._replay(key, args)

    def _replay(self, key, args):
        entry = self.cache.get(key)
        if entry is not None:
            self.cache.move_to_end(key)
        if entry is _UNCAPTURABLE:
            return self.run(args)
        if entry is None:
            if not self._capturable(args):  # a CPU tensor, or an input of a type not in the key
                self.cache[key] = _UNCAPTURABLE
                return self.run(args)
            return self._capture(key, args)
        graph, static_args, static_out = entry
        for i in self.dynamic_order:
            if isinstance(args[i], torch.Tensor):
                static_args[i].copy_(args[i])
        graph.replay()
        _count("replays")
        return self._finish(static_args, static_out, args)

    def _finish(self, static_args, static_out, args, captured=True):
        for i in self.mutated:
            if static_args[i] is not args[i]:
                args[i].copy_(static_args[i])
        if not captured:
            return static_out  # ordinary results, the graph's no more
        return [o.clone() if isinstance(o, torch.Tensor) else o for o in static_out]

    def _capture(self, key, args):
        if self.max_graphs is not None:
            evict_graphs(self.cache, self.max_graphs - 1)
        static_args = [a if i in self.static or not isinstance(a, torch.Tensor) else a.clone()
                       for i, a in enumerate(args)]
        graph = HPUGraph()
        # Demotable: an op that cannot be captured turns the rest of the
        # capture into ordinary execution, so the graph runs exactly once
        # either way (see hpu/graphs.py).
        graph._begin(demotable=True)
        try:
            static_out = self.capture(list(static_args))
        except BaseException:
            graph.capture_abort()
            raise
        if not graph.capture_end():
            self.cache[key] = _UNCAPTURABLE
            _count("demoted")
            return self._finish(static_args, static_out, args, captured=False)
        self.cache[key] = (graph, static_args, static_out)
        _count("captures")
        graph.replay()  # the capture recorded the work; run it for this call
        return self._finish(static_args, static_out, args)
