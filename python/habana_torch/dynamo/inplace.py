"""Input updates done in place again, in inference graphs.

A forward that updates a buffer in place (a static KV cache's
`cache.index_copy_(2, pos, k)`) reaches us functionalized, with the graph
keeping the input mutation (keep_inference_input_mutations)::

    new = aten.index_copy(cache, 2, pos, k)    # the whole cache copied
    ... reads of new ...
    aten.copy_(cache, new)                      # and copied back

Two passes over the whole cache to write one position. When nothing reads
the buffer's old value afterwards, this is the same as::

    new = aten.index_copy_(cache, 2, pos, k)    # one position written
    ... reads of new ...

which is what eager mode runs. The same holds for a chain of updates, as an
optimizer step makes them (`p.mul_(1 - lr * wd)` then `p.addcdiv_(...)`,
functionalized into `t = mul(p, c); new = addcdiv(t, ...); copy_(p, new)`):
each op of the chain becomes in place when every other read of the value it
overwrites comes before it. PyTorch's own re-inplacing pass
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


def _returns_alias(node):
    """The node's output may share memory with an input (a view)."""
    op = node.target
    if not isinstance(op, torch._ops.OpOverload):
        return node.op == "call_function"  # unknown: assume it may
    return any(r.alias_info is not None for r in op._schema.returns)


def _update_chain(ph, copy, order):
    """The ops from the input `ph` to the value `copy` writes back, first
    to last, each taking the previous one's result as its first argument;
    None if they cannot all run in place on ph's memory."""
    chain, node = [], copy.args[1]
    while node is not ph:
        if not isinstance(node, torch.fx.Node) or node.op != "call_function" or not node.args:
            return None
        chain.append(node)
        node = node.args[0]
    chain.reverse()
    if not chain:
        return None
    values = [ph] + chain
    for i, writer in enumerate(chain):
        before = values[i]  # the value `writer` overwrites
        if before in writer.args[1:] or before in writer.kwargs.values():
            return None
        if _in_place_variant(writer.target) is None or not _same_layout(writer.meta.get("val"), ph.meta.get("val")):
            return None
        for reader in before.users:
            if reader is writer or (reader is copy and before is ph):
                continue
            # another read of the old value must be done before the write,
            # and must not keep a view of the memory being overwritten
            if reader is copy or reader in chain or order[reader] > order[writer] or _returns_alias(reader):
                return None
    return chain


def update_inputs_in_place(gm):
    """Rewrites `new = op(input, ...) ... copy_(input, new)` (or a chain of
    such ops) into `new = op_(input, ...)` where that is safe (see above).
    Returns the number of inputs rewritten."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    rewrites = 0
    for ph in list(gm.graph.find_nodes(op="placeholder")):
        copies = [u for u in ph.users if u.target is torch.ops.aten.copy_.default and u.args[0] is ph]
        if len(copies) != 1 or len(copies[0].users) != 0:
            continue
        chain = _update_chain(ph, copies[0], order)
        if chain is None:
            continue
        for op in chain:
            op.target = _in_place_variant(op.target)
        gm.graph.erase_node(copies[0])
        rewrites += 1
    if rewrites:
        gm.graph.lint()
        gm.recompile()
    return rewrites
