"""Compiled graphs split around the ops the card has no kernel for.

A graph with an op that falls back to the CPU cannot be captured whole: the
fallback reads its inputs on the host. When the first capture of a graph is
demoted and the cpu_fallback counter names the ops that fell back during
it, the FX graph is split (torch.fx split_module) into segments: each
maximal run of nodes between those ops becomes a graph of its own, captured
and replayed like any compiled graph (replay.py), and each fallback op runs
between them through the ordinary hpu path, where the cpu_fallback counter
counts every call. From then on every call of the graph, whatever its input
signature, runs the split form.

The ops are matched by name (an out= or overload variant counts for the op:
a composite igamma falls back as aten::igamma.out). If none of the graph's
own nodes carries a name that fell back (the fallback happened inside
another op's composite kernel), nothing is split and the graph stays
demoted for that signature, as before.

habana_torch.dynamo.replay_counts()["partitioned"] counts split graphs;
TORCH_LOGS=habana_torch.dynamo.partition prints which ops each split graph
runs outside its segments."""
import logging
import operator

import torch
from torch.fx.passes.split_module import split_module

log = logging.getLogger(__name__)


def _op_name(target):
    """aten::igamma for torch.ops.aten.igamma.default (no overload)."""
    schema = getattr(target, "_schema", None)
    return schema.name if schema is not None else None


def outside_nodes(gm, fallback_names):
    """The graph's call nodes whose op fell back ('aten::igamma.out' names
    aten::igamma)."""
    names = {n.split(".", 1)[0] for n in fallback_names}
    return [n for n in gm.graph.nodes if n.op == "call_function" and _op_name(n.target) in names]


class _Segment(torch.nn.Module):
    """A run of supported nodes, captured and replayed on its own."""

    def __init__(self, sub, name):
        super().__init__()
        from .replay import replayed

        self.sub = sub
        self.graph = replayed(sub, name, splittable=False)

    def forward(self, *args):
        return tuple(self.graph(list(args)))


def split_around(gm, fallback_names, name):
    """A boxed callable running gm as segments around its fallback ops, or
    None when none of gm's nodes fell back."""
    outside = set(outside_nodes(gm, fallback_names))
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
        log.warning("compiled graph %s: could not be split around its CPU fallbacks (%s); it runs uncaptured",
                    name, e)
        return None
    segments = 0
    for child, sub in list(split.named_children()):
        if int(child.rsplit("_", 1)[1]) in outside_ids:
            continue
        setattr(split, child, _Segment(sub, f"{name} segment {child.rsplit('_', 1)[1]}"))
        segments += 1
    ops = sorted({_op_name(n.target) for n in outside})
    log.info("compiled graph %s: %d ops with no hpu kernel (%s) run through the CPU fallback between %d "
             "captured segments", name, len(outside), ", ".join(ops), segments)

    def run(args):
        return split(*args)

    return run
