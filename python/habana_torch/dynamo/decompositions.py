"""The decompositions AOTAutograd applies before a graph reaches the hpu.

An op keeps its own hpu kernel whenever it has one: a fused layer_norm or
softmax kernel beats its decomposition into several passes over memory. Of
PyTorch's registered decompositions (the core-ATen ones and the others, such
as native_dropout's) we take exactly those of ops the hpu has no kernel for:
they would otherwise run through the CPU fallback, which also cuts the
recorded graph in two (native_dropout did, 14 times per BERT step).

One decomposition is our own: native_dropout's (see _native_dropout)."""
import functools

import torch


def has_hpu_kernel(op):
    """The op reaches an hpu kernel without the CPU fallback: it has one, or
    its .out overload has one (structured ops such as _softmax_backward_data
    get their functional form from it), or it is written once for every
    backend in terms of other ops (t, expand, clone, _to_copy; and the
    scatter forms of views, slice_scatter or diagonal_scatter, whose
    "non-functional" kernels mutate a fresh clone: fine after
    functionalization, where PyTorch's decompositions of them into
    prims.copy_to are not)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    if any(has(op.name(), key) for key in ("HPU", "CompositeExplicitAutograd",
                                           "CompositeExplicitAutogradNonFunctional")):
        return True
    packet = op.overloadpacket
    for overload in packet.overloads():
        other = getattr(packet, overload)
        if other is not op and any(a.is_out for a in other._schema.arguments) and has(other.name(), "HPU"):
            return True
    return False


def or_the_op_itself(fn):
    """A decomposition that cannot trace a call (bucketize's cannot take a
    0-dim input, for one) leaves the op in the graph as it is, where it runs
    through the counted CPU fallback (or raises the op's own error on bad
    input) rather than failing the whole compile."""
    @functools.wraps(fn)
    def decompose(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception:  # noqa: BLE001 - NotImplemented tells the tracer to keep the op
            return NotImplemented
    return decompose


def eager_dropout_noise(input, p):
    """The scaled keep mask eager mode draws for dropout on the hpu (ATen's
    _dropout_impl): a Bernoulli(1 - p) draw divided by 1 - p; the output is
    input * noise. backend.py traces aten.dropout in this form too.
    Functional ops, as a decomposition must use; the draw is of the detached
    input's shape, so autograd sees no path through it."""
    aten = torch.ops.aten
    return aten.div.Scalar(aten.bernoulli.p(input.detach(), 1 - p), 1 - p)


def _native_dropout(torch_decomposition):
    """native_dropout in eager mode's form (eager_dropout_noise), instead of
    PyTorch's rand_like(input) > p. The compiled graph then draws the same
    mask from the same place in the card's RNG stream as eager and lazy mode
    do, so a compiled training step with dropout gives their numbers, and
    the draw is the Bernoulli kernel's one pass (the uniform draw, compare
    and two products cost a BERT step 8% more). The cases that draw nothing
    (eval, p = 0, p = 1, no elements) keep PyTorch's decomposition."""
    def native_dropout(input, p, train):
        if not train or p == 0 or p == 1 or input.numel() == 0 or not input.is_floating_point():
            return torch_decomposition(input, p, train)
        noise = eager_dropout_noise(input, p)
        return input * noise, noise != 0

    return native_dropout


@functools.cache
def hpu_decompositions():
    from torch._decomp import decomposition_table

    table = {op: or_the_op_itself(fn) for op, fn in decomposition_table.items()
             if isinstance(op, torch._ops.OpOverload) and op.namespace == "aten" and not has_hpu_kernel(op)}
    dropout = torch.ops.aten.native_dropout.default
    if dropout in table:
        table[dropout] = or_the_op_itself(_native_dropout(decomposition_table[dropout]))
    return table
