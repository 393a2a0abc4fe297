"""Input updates done in place again, in inference graphs.

A forward that updates a buffer in place (a static KV cache's
`cache.index_copy_(2, pos, k)`) reaches us functionalized, with the graph
keeping the input mutation (keep_inference_input_mutations)::

    new = aten.index_copy(cache, 2, pos, k)    # the whole cache copied
    ... reads of new ...
    aten.copy_(cache, new)                      # and copied back

Two passes over the whole cache to write one position. When nothing else in
the graph reads the buffer's old value, this is the same as::

    new = aten.index_copy_(cache, 2, pos, k)    # one position written
    ... reads of new ...

which is what eager mode runs. PyTorch's own re-inplacing pass
(torch.fx.passes.reinplace) leaves graph inputs alone; this one handles
exactly that case and nothing else."""
import torch


def _in_place_variant(op):
    """aten.X.overload -> aten.X_.overload when it exists and mutates its
    first argument (index_copy -> index_copy_, index_put -> index_put_)."""
    if not isinstance(op, torch._ops.OpOverload) or op.namespace != "aten":
        return None
    packet = getattr(torch.ops.aten, op.__name__.split(".")[0] + "_", None)
    variant = getattr(packet, op._overloadname, None) if packet is not None else None
    if variant is None:
        return None
    args = variant._schema.arguments
    if not args or args[0].alias_info is None or not args[0].alias_info.is_write:
        return None
    return variant


def _same_layout(a, b):
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype
            and a.shape == b.shape and a.stride() == b.stride() and a.device == b.device)


def update_inputs_in_place(gm):
    """Rewrites `new = op(input, ...) ... copy_(input, new)` into
    `new = op_(input, ...)` where `input` is a graph input read by nothing
    else. Returns the number of rewrites."""
    rewrites = 0
    for ph in gm.graph.find_nodes(op="placeholder"):
        users = list(ph.users)
        if len(users) != 2:
            continue
        copies = [u for u in users if u.target is torch.ops.aten.copy_.default and u.args[0] is ph]
        if len(copies) != 1:
            continue
        copy = copies[0]
        op = next(u for u in users if u is not copy)
        new = copy.args[1]
        if new is not op or op.op != "call_function" or op.args[:1] != (ph,) or ph in op.args[1:] \
                or ph in op.kwargs.values() or len(copy.users) != 0:
            continue
        variant = _in_place_variant(op.target)
        if variant is None or not _same_layout(op.meta.get("val"), ph.meta.get("val")):
            continue
        op.target = variant
        gm.graph.erase_node(copy)
        rewrites += 1
    if rewrites:
        gm.graph.lint()
        gm.recompile()
    return rewrites
