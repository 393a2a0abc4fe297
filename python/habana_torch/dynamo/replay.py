"""A compiled graph captured once per input signature, then replayed.

Every graph hpu_backend compiles (forward, backward and inference) runs
this way: the first call with a given input signature runs the FX graph's
ops once through PyTorch's dispatcher into an HPU graph capture, and the
graph engine compiles what was recorded (fusion, buffer plan) into one
captured graph. Every later call is one launch of that graph: no
dispatcher, no shim, no recording of a single op, which is what a decode
step of text generation or a small training step spends most of its host
time on.

A replay is rebound (hpu_captured_replay_rebound): each tensor input's
storage as captured is replaced by the storage of the call's own argument,
so the graph reads the caller's tensors and writes an in-place update (a
static KV cache, an optimizer state) into them directly, without copies;
each output the capture allocated is replaced by fresh memory allocated for
this call, so a caller may hold the results of any number of calls (the
activations a forward saves for its backward). The capture's own output
blocks go back to the card's pool (the first call returns them), since no
replay writes them again; the graph keeps only its temporaries.

- The signature is each tensor's dtype, shape, strides and storage offset,
  which inputs share a storage, and the value of every other input. (A
  call whose input storage is smaller than the graph reaches into, which
  a functional graph reading only its views never meets, runs as ordinary
  work.) Dynamo's guards already fix most of it; a size dynamo treats as
  symbolic arrives as a number, so each concrete size gets its own capture.
- Called while the card captures an HPU graph of the caller's, the ops are
  recorded into that capture.
- A graph whose capture met an op that falls back to the CPU or reads a
  value on the host is split around such ops (partition.py): its other ops
  run as captured segments, for every signature from then on.
- A graph that cannot be captured otherwise (no node of its own can be
  blamed) runs as ordinary work for that signature from then on, counted
  by metric hpu_graph_demoted; so does a call with an input on another
  device.
- At most PT_HPU_WRAP_GRAPH_CACHE_SIZE signatures per graph are kept (as
  wrap_in_hpu_graph's), least recently used dropped first.

habana_torch.dynamo.replay_counts() counts captures, replays, demotions and
split graphs."""
import collections
import threading

import torch

from .. import _C
from .. import hpu as _hpu
from . import scope
from ..hpu.graphs import _UNCAPTURABLE, HPUGraph, _default_max_graphs, evict_graphs
from ..hpu.metrics import cpu_fallback_counts

_counts_lock = threading.Lock()
_counts = {"captures": 0, "replays": 0, "demoted": 0, "partitioned": 0}


def replay_counts():
    with _counts_lock:
        return dict(_counts)


def _count(key):
    with _counts_lock:
        _counts[key] += 1


class _Call:
    """One call's inputs: the signature, and each distinct storage (its
    address, size and the first input on it)."""

    __slots__ = ("key", "ptrs", "nbytes", "first_arg", "group_of_ptr")

    def __init__(self, args):
        self.ptrs, self.nbytes, self.first_arg = [], [], []
        self.group_of_ptr = {}
        key = []
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                if a.device.type != "hpu":
                    self.key = None  # a CPU tensor: nothing to capture for it
                    return
                storage = a.untyped_storage()
                ptr = storage.data_ptr()
                group = self.group_of_ptr.get(ptr) if ptr else -1
                if group is None:
                    group = self.group_of_ptr[ptr] = len(self.ptrs)
                    self.ptrs.append(ptr)
                    self.nbytes.append(storage.nbytes())
                    self.first_arg.append(i)
                key.append((a.dtype, a.shape, a.stride(), a.storage_offset(), group))
            elif a is None or isinstance(a, (int, float, bool)):
                key.append((type(a), a))
            else:
                self.key = None  # a value the key cannot hold
                return
        self.key = tuple(key)


class _Output:
    """How a replay makes one output: a view of an input's storage, a view
    of a fresh storage, a fresh empty tensor, or the captured value itself
    (a number, or a tensor the graph did not allocate)."""

    __slots__ = ("kind", "where", "dtype", "shape", "stride", "offset", "value")

    def __init__(self, kind, where=None, tensor=None, value=None):
        self.kind, self.where, self.value = kind, where, value
        if tensor is not None:
            self.dtype, self.shape = tensor.dtype, tensor.shape
            self.stride, self.offset = tensor.stride(), tensor.storage_offset()


class _Captured:
    """A captured graph and how to bind it: the storages it was captured
    on (inputs', then outputs'), and how to make each output."""

    __slots__ = ("graph", "input_ptrs", "input_extents", "output_ptrs", "output_nbytes", "outputs", "whole",
                 "kept")

    def __init__(self, graph, call, outputs):
        self.graph = graph
        self.input_ptrs = list(call.ptrs)
        self.input_extents = [graph._graph.extent(p) for p in call.ptrs]
        self.output_ptrs, self.output_nbytes, self.outputs = [], [], []
        self.kept = set()  # output storages the graph keeps (see first_outputs)
        fresh = {}
        for o in outputs:
            if not isinstance(o, torch.Tensor):
                self.outputs.append(_Output("value", value=o))
                continue
            storage = o.untyped_storage()
            ptr = storage.data_ptr()
            if not ptr:
                self.outputs.append(_Output("empty", tensor=o))
            elif ptr in call.group_of_ptr:
                self.outputs.append(_Output("input", call.first_arg[call.group_of_ptr[ptr]], tensor=o))
            elif ptr in fresh:
                self.outputs.append(_Output("fresh", fresh[ptr], tensor=o))
            elif graph._graph.owns(ptr):
                # Allocated by the capture: each replay writes it into fresh
                # memory, as large as the graph's operands on it reach (the
                # capture may have put a larger temporary there first).
                slot = fresh[ptr] = len(self.output_ptrs)
                self.output_ptrs.append(ptr)
                self.output_nbytes.append(max(storage.nbytes(), graph._graph.extent(ptr)))
                self.outputs.append(_Output("fresh", slot, tensor=o))
                if not graph._graph.release_block(ptr):
                    self.kept.add(slot)
            else:  # memory from before the capture (a constant of the graph)
                self.outputs.append(_Output("value", value=o))
        # Outputs that are the only view of their storage and cover it
        # exactly are allocated as themselves (one op instead of two).
        uses = collections.Counter(o.where for o in self.outputs if o.kind == "fresh")
        self.whole = [uses[o.where] == 1 and o.offset == 0 and
                      _extent(o) == self.output_nbytes[o.where] if o.kind == "fresh" else False
                      for o in self.outputs]

    def first_outputs(self, outputs):
        """The capture call's results: the captured outputs themselves,
        whose blocks went back to the pool, except those the graph keeps
        (another operand of it reaches into the block, so replays still
        write there): those are returned as copies."""
        return [o.clone() if out.kind == "fresh" and out.where in self.kept else o
                for o, out in zip(outputs, self.outputs)]

    def fits(self, call):
        """Whether every input storage is as large as the graph's operands
        on it reach (the signature holds each view, not its storage's
        size)."""
        return all(have >= need for have, need in zip(call.nbytes, self.input_extents))

    def replay(self, call, args, device):
        storages = [None] * len(self.output_ptrs)
        for o, whole in zip(self.outputs, self.whole):
            if whole:
                storages[o.where] = torch.empty_strided(o.shape, o.stride, dtype=o.dtype, device=device)
        for slot, nbytes in enumerate(self.output_nbytes):
            if storages[slot] is None:
                storages[slot] = torch.empty(nbytes, dtype=torch.uint8, device=device)
        to = list(call.ptrs) + [s.data_ptr() for s in storages]
        to_bytes = list(call.nbytes) + list(self.output_nbytes)
        self.graph._graph.replay_rebound(self.input_ptrs + self.output_ptrs, to, to_bytes)
        result = []
        for o, whole in zip(self.outputs, self.whole):
            if o.kind == "value":
                result.append(o.value)
            elif o.kind == "empty":
                result.append(torch.empty_strided(o.shape, o.stride, dtype=o.dtype, device=device))
            elif whole:
                result.append(storages[o.where])
            elif o.kind == "input":
                result.append(args[o.where].as_strided(o.shape, o.stride, o.offset))
            else:
                base = torch.empty(0, dtype=o.dtype, device=device)
                result.append(base.set_(storages[o.where].untyped_storage(), o.offset, o.shape, o.stride))
        return result


def replayed(gm, name):
    """gm as a ReplayedGraph: captured without the recording scope (a
    capture records the ops itself, and switching lazy mode would end it),
    run as ordinary work inside it."""
    run = gm.forward

    def ordinary(args):
        with scope.recording():
            return run(*args)

    return ReplayedGraph(ordinary, name, gm)


def _extent(o):
    """Bytes from the storage's start to one past the last element."""
    if 0 in o.shape:
        return o.offset * o.dtype.itemsize
    last = sum((n - 1) * s for n, s in zip(o.shape, o.stride))
    return (o.offset + last + 1) * o.dtype.itemsize


def _describe(was, now):
    """What changed between two inputs' signatures (see _Call)."""
    if len(was) != 5 or len(now) != 5:
        if was[0] is not now[0]:
            return "changed type"
        what = "(a size dynamo keeps symbolic) " if was[0] is int else ""
        return f"{what}changed from {was[1]!r} to {now[1]!r}"
    for name, part in (("dtype", 0), ("shape", 1), ("strides", 2), ("storage offset", 3),
                       ("storage sharing", 4)):
        if was[part] != now[part]:
            show = (lambda v: list(v)) if part in (1, 2) else (lambda v: v)
            return f"{name} changed from {show(was[part])} to {show(now[part])}"
    return "changed"


class ReplayedGraph:
    """A boxed callable (it takes the list of the graph's inputs) running
    the GraphModule gm through rebound HPU graphs, one per input signature:
    a capture runs gm node by node (partition.DemotionWatch), `run(args)`
    runs it as ordinary work. gm is split around the ops that stop its
    first capture (partition.py)."""

    def __init__(self, run, name, gm):
        # AOTAutograd passes the inputs as one list. An attribute of the
        # instance, not the class: the backward is wrapped by
        # torch._dynamo.disable, whose functools.wraps copies __dict__.
        self._boxed_call = True
        self.run = run
        self.name = name
        self.max_graphs = _default_max_graphs()
        self.cache = collections.OrderedDict()
        self.lock = threading.Lock()
        self.gm = gm
        self.split = None  # the split form, once a capture was demoted

    def __call__(self, args):
        args = list(args)
        device = _hpu.current_device()
        if _C._capture_active(device):
            return self.run(args)  # inside a user's capture, the ops join it
        if self.split is not None:
            return self.split(args)
        call = _Call(args)
        if call.key is None:
            return self.run(args)
        with self.lock:
            entry = self.cache.get(call.key)
            if entry is None:
                return self._capture(call, args, device)
            self.cache.move_to_end(call.key)
            if entry is _UNCAPTURABLE or not entry.fits(call):
                return self.run(args)
            out = entry.replay(call, args, torch.device("hpu", device))
        _count("replays")
        return out

    def _note_recompile(self, key, device):
        """Says why a graph that has run before is captured again: the
        first input whose signature differs from the last call's."""
        last = next(reversed(self.cache))
        for i, (was, now) in enumerate(zip(last, key)):
            if was != now:
                _C._recompile_note(device, f"compiled graph {self.name}: input {i} {_describe(was, now)}")
                return

    def _capture(self, call, args, device):
        if self.cache:
            self._note_recompile(call.key, device)
        if self.max_graphs is not None:
            evict_graphs(self.cache, self.max_graphs - 1)
        graph = HPUGraph()
        # Demotable: an op that cannot be captured turns the rest of the
        # capture into ordinary execution, so the graph runs exactly once
        # either way (see hpu/graphs.py).
        try:
            graph._begin(demotable=True)
        except RuntimeError as e:
            if "already capturing" not in str(e):
                raise
            # another thread is capturing a graph on this card (one capture
            # at a time per card): this call runs as ordinary work, and the
            # next call of the signature tries again
            return self.run(args)
        from .partition import DemotionWatch

        fell_back = cpu_fallback_counts()
        watch = DemotionWatch(self.gm, device)
        try:
            outputs = watch.run(*args)
        except BaseException:
            graph.capture_abort()
            raise
        if not graph.capture_end():
            self.cache[call.key] = _UNCAPTURABLE
            _count("demoted")
            self._split_after_demotion(fell_back, watch.culprit)
            return outputs
        captured = self.cache[call.key] = _Captured(graph, call, outputs)
        _count("captures")
        graph.replay()  # the capture recorded the work; run it for this call
        return captured.first_outputs(outputs)

    def _split_after_demotion(self, before, culprit):
        """After a demoted capture: the graph split around the ops whose
        fallback count grew during it (those that are its own nodes) and
        the node that stopped it."""
        from .partition import split_around

        after = cpu_fallback_counts()
        names = [op for op, n in after.items() if n > before.get(op, 0)]
        nodes = [culprit] if culprit is not None else []
        if names or nodes:
            self.split = split_around(self.gm, names, self.name, nodes)
            if self.split is not None:
                _count("partitioned")
