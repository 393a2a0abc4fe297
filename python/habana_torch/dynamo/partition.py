"""Compiled graphs split around the ops that cannot be captured.

A graph with an op that falls back to the CPU, or reads a value on the host
(linalg ops that run through the CPU's LAPACK, for one), cannot be captured
whole: the op needs its inputs on the host. Its first capture is demoted,
and two things name the ops to blame: the cpu_fallback counter (every op
that fell back during that call), and the node during which the capture
stopped (DemotionWatch runs the first capture node by node and notes it).
The FX graph is then split (torch.fx split_module) into segments: each
maximal run of nodes between those ops becomes a graph of its own,
captured and replayed like any compiled graph (replay.py), and each op
split out runs between them through the ordinary hpu path, where the
cpu_fallback counter counts every call of a fallback op. From then on
every call of the graph, whatever its input signature, runs the split
form. A segment is watched the same way at its first capture, so a second
such op further on splits that segment in turn.

Fallback ops are matched by name (an out= or overload variant counts for
the op: a composite igamma falls back as aten::igamma.out), so every node
of such an op is split out; the node that stopped the capture is split out
itself (another node of its op may well be capturable). If no node can be
blamed, nothing is split and the graph stays demoted for that signature.

habana_torch.dynamo.replay_counts()["partitioned"] counts split graphs;
TORCH_LOGS=habana_torch.dynamo.partition prints which ops each split graph
runs outside its segments."""
import logging
import operator

import torch
from torch.fx.passes.split_module import split_module

from .. import _C

log = logging.getLogger(__name__)


def _op_name(target, args=()):
    """aten::igamma for torch.ops.aten.igamma.default (no overload); for an
    effectful op (with_effects(token, op, ...), as AOTAutograd wraps the
    error check of linalg ops), the op's."""
    if target is torch.ops.higher_order.with_effects and len(args) > 1:
        return _op_name(args[1])
    schema = getattr(target, "_schema", None)
    return schema.name if schema is not None else None


def outside_nodes(gm, names):
    """The graph's call nodes whose op is named ('aten::igamma.out' names
    aten::igamma)."""
    names = {n.split(".", 1)[0] for n in names}
    return [n for n in gm.graph.nodes if n.op == "call_function" and _op_name(n.target, n.args) in names]


class DemotionWatch(torch.fx.Interpreter):
    """Runs gm node by node during its first capture on `device` and notes
    in `culprit` the node during which the capture stopped being one (the
    core demoted it: the node read a value on the host or fell back). Only
    first captures run this way; replays never run the nodes."""

    def __init__(self, gm, device):
        super().__init__(gm)
        self.device = device
        self.culprit = None

    def run_node(self, n):
        out = super().run_node(n)
        if self.culprit is None and n.op == "call_function" and not _C._capture_active(self.device):
            self.culprit = n
        return out


class _Segment(torch.nn.Module):
    """A run of supported nodes, captured and replayed on its own."""

    def __init__(self, sub, name):
        super().__init__()
        from .replay import replayed

        self.sub = sub
        self.graph = replayed(sub, name)

    def forward(self, *args):
        return tuple(self.graph(list(args)))


def split_around(gm, names, name, nodes=()):
    """A boxed callable running gm as segments around `nodes` and the nodes
    of the ops named, or None when there are none."""
    outside = set(outside_nodes(gm, names)) | set(nodes)
    if not outside:
        return None
    part, pid, outside_ids = {}, 0, set()
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "output"):
            continue
        if n in outside:
            pid += 1
            part[n] = pid
            outside_ids.add(pid)
            pid += 1
        elif n.target is operator.getitem and n.args[0] in outside:
            part[n] = part[n.args[0]]  # an output of a fallback op stays with it
        else:
            part[n] = pid
    try:
        split = split_module(gm, None, lambda n: part[n], keep_original_order=True, tuple_return=True)
    except Exception as e:  # the graph stays demoted, which is still right
        log.warning("compiled graph %s: could not be split around the ops that cannot be captured (%s); "
                    "it runs uncaptured",
                    name, e)
        return None
    segments = 0
    for child, sub in list(split.named_children()):
        if int(child.rsplit("_", 1)[1]) in outside_ids:
            continue
        setattr(split, child, _Segment(sub, f"{name} segment {child.rsplit('_', 1)[1]}"))
        segments += 1
    ops = sorted({_op_name(n.target, n.args) for n in outside})
    log.info("compiled graph %s: %d ops that cannot be captured (%s) run uncaptured between %d captured "
             "segments", name, len(outside), ", ".join(ops), segments)

    def run(args):
        return split(*args)

    return run
