"""The decompositions AOTAutograd applies before a graph reaches the hpu.

An op keeps its own hpu kernel whenever it has one: a fused layer_norm or
softmax kernel beats its decomposition into several passes over memory. Of
PyTorch's registered decompositions (the core-ATen ones and the others, such
as native_dropout's) we take exactly those of ops the hpu has no kernel for:
they would otherwise run through the CPU fallback, which also cuts the
recorded graph in two (native_dropout did, 14 times per BERT step)."""
import functools

import torch


def has_hpu_kernel(op):
    """The op reaches an hpu kernel without the CPU fallback: it has one, or
    its .out overload has one (structured ops such as _softmax_backward_data
    get their functional form from it), or it is written once for every
    backend in terms of other ops (t, expand, clone, _to_copy)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    if has(op.name(), "HPU") or has(op.name(), "CompositeExplicitAutograd"):
        return True
    packet = op.overloadpacket
    for overload in packet.overloads():
        other = getattr(packet, overload)
        if other is not op and any(a.is_out for a in other._schema.arguments) and has(other.name(), "HPU"):
            return True
    return False


@functools.cache
def hpu_decompositions():
    from torch._decomp import decomposition_table

    return {op: fn for op, fn in decomposition_table.items()
            if isinstance(op, torch._ops.OpOverload) and op.namespace == "aten" and not has_hpu_kernel(op)}
