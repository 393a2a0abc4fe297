"""The nn op family on hpu (reductions, softmax, layer norm, nll_loss, index
ops, cat, sort/topk) against the CPU result of the same PyTorch op."""
import warnings

import pytest
import torch
import torch.nn.functional as F

import habana_torch
from conftest import assert_close_to_cpu, steps_apart

FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
INTS = [torch.int64, torch.int32, torch.uint8, torch.bool]


EXACT = dict(rtol=0, atol=0)


def make(shape, dtype=torch.float32, seed=0, lo=-3, hi=3):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype == torch.uint8:
        lo = 0
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def tol(dtype, n=1):
    # summation order differs from PyTorch's; grow the tolerance with the count
    if dtype == torch.float32:
        return dict(rtol=1e-4, atol=1e-5 * max(1, n) ** 0.5)
    if dtype == torch.float64:
        return dict(rtol=1e-9, atol=1e-9)
    if dtype == torch.float16:
        return dict(rtol=2e-3, atol=1e-3 * max(1, n) ** 0.5)
    if dtype == torch.bfloat16:
        return dict(rtol=1.6e-2, atol=1e-2 * max(1, n) ** 0.5)
    return {}


def noncontig(t):
    """A non-contiguous tensor with t's values (transposed storage)."""
    if t.dim() < 2:
        return t
    return t.transpose(0, 1).contiguous().transpose(0, 1)


# ---- reductions ----------------------------------------------------------------------

RED_CASES = [((5, 7), None), ((5, 7), 1), ((5, 7), 0), ((2, 3, 4), (0, 2)), ((2, 3, 4), (-1,)),
             ((3, 0, 4), 1), ((3, 0, 4), 2), ((), None), ((6,), 0), ((2, 3, 4, 5), (1, 3)),
             # rows long enough for the vectorised row loops (blocks of 64 and a tail)
             ((3, 1000), 1), ((1000, 3), 0)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,dim", RED_CASES)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin", "prod", "norm"])
def test_float_reductions(op, dtype, shape, dim, keepdim):
    x = make(shape, dtype)
    if op in ("amax", "amin") and x.numel() == 0:
        dims = range(x.dim()) if dim is None else ([dim] if isinstance(dim, int) else dim)
        if any(x.shape[d] == 0 for d in dims):
            with pytest.raises(IndexError):
                getattr(torch, op)(x.to("hpu"), dim=dim if dim is not None else (), keepdim=keepdim)
            return
    if op == "prod":
        if dim is not None and not isinstance(dim, int):
            return
        fn = (lambda t: torch.prod(t)) if dim is None else (lambda t: torch.prod(t, dim, keepdim=keepdim))
    elif op == "norm":
        fn = lambda t: torch.linalg.vector_norm(t, 2, dim=dim, keepdim=keepdim)
    elif op in ("amax", "amin"):
        fn = lambda t: getattr(torch, op)(t, dim=dim if dim is not None else (), keepdim=keepdim)
    else:
        fn = lambda t: getattr(torch, op)(t, dim=dim, keepdim=keepdim)
    assert_close_to_cpu(fn(x.to("hpu")), fn(x), equal_nan=True, **tol(dtype, x.numel()))
    if x.dim() >= 2:
        xn = noncontig(x)
        assert_close_to_cpu(fn(xn.to("hpu")), fn(xn), equal_nan=True, **tol(dtype, x.numel()))


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("shape,dim", [((5, 7), None), ((5, 7), 1), ((2, 3, 4), (0, 2))])
def test_int_reductions(dtype, shape, dim):
    x = make(shape, dtype)
    for fn in [lambda t: torch.sum(t, dim=dim), lambda t: torch.any(t, dim=dim) if dim is not None else torch.any(t),
               lambda t: torch.all(t, dim=dim) if dim is not None else torch.all(t),
               lambda t: torch.amax(t, dim=dim if dim is not None else ())]:
        if dtype == torch.bool and fn is not None:
            try:
                expected = fn(x)
            except RuntimeError:
                continue
        else:
            expected = fn(x)
        assert_close_to_cpu(fn(x.to("hpu")), expected)


def test_sum_dtype_and_mean_int_error():
    x = make((4, 6), torch.bfloat16)
    assert_close_to_cpu(torch.sum(x.to("hpu"), 1, dtype=torch.float32), torch.sum(x, 1, dtype=torch.float32))
    i = make((4, 6), torch.int32)
    assert_close_to_cpu(torch.sum(i.to("hpu"), 0), torch.sum(i, 0))  # int32 -> int64
    with pytest.raises(RuntimeError, match="mean"):
        torch.mean(i.to("hpu"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("shape,dim", [((300, 400), -1), ((400000,), None), ((3, 200000), 1),
                                       ((200000, 3), 0), ((70000, 8), 1)])
def test_large_reductions(dtype, shape, dim):
    x = make(shape, dtype)
    for fn in [lambda t: t.sum(dim=dim), lambda t: t.mean(dim=dim),
               lambda t: torch.linalg.vector_norm(t, dim=dim),
               lambda t: torch.var(t, dim=dim), lambda t: t.amax(dim=dim if dim is not None else ())]:
        assert_close_to_cpu(fn(x.to("hpu")), fn(x), **tol(dtype, x.numel()))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows,n", [(37, 64), (1025, 1024), (3, 4096), (2, 4160), (33, 1000), (1, 1024)])
def test_row_sums(dtype, rows, n):
    """sum/mean over the last dim of rows (float32 rows of 64k <= 4096 run two
    rows per call): odd row counts, strided rows, keepdim; and a row's sum is
    bit for bit the same wherever the row sits (no dependence on pairing)."""
    x = make((rows, n + 7), dtype, seed=rows)
    h = x.to("hpu")
    for xs, hs in ((x[:, :n], h[:, :n]), (x[:, :n].contiguous(), h[:, :n].contiguous()),
                   (x[:, 7:].t().contiguous().t(), h[:, 7:].t().contiguous().t())):
        assert_close_to_cpu(hs.sum(-1), xs.sum(-1), **tol(dtype, n))
        assert_close_to_cpu(hs.mean(-1, keepdim=True), xs.mean(-1, keepdim=True), **tol(dtype, n))
    whole = h[:, :n].sum(-1).cpu()
    for k in sorted({0, rows // 2, rows - 1}):
        assert torch.equal(h[k:k + 1, :n].sum(-1).cpu(), whole[k:k + 1])
        assert torch.equal(h[k:, :n].sum(-1).cpu(), whole[k:])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape,dim", [((2048, 256), 0), ((16, 128, 1024), (0, 1)), ((65, 30), 0),
                                       ((4, 300, 64), 1), ((3, 40, 5, 48), (1, 2)), ((33, 17), 0),
                                       ((1000, 600), 0)])
def test_column_sums(dtype, shape, dim):
    """sum/mean over outer dims with a contiguous kept inner dim (bias and
    layer-norm weight gradients): rows added per column block, planes for
    the other kept dims; strided rows; the result independent of the thread
    count."""
    x = make(shape, dtype, seed=len(shape))
    h = x.to("hpu")
    n = x.numel() // x.shape[-1]
    for xs, hs in ((x, h), (x[..., 3:], h[..., 3:]), (x[..., :-5], h[..., :-5])):
        assert_close_to_cpu(hs.sum(dim), xs.sum(dim), **tol(dtype, n))
        assert_close_to_cpu(hs.mean(dim, keepdim=True), xs.mean(dim, keepdim=True), **tol(dtype, n))
    assert_close_to_cpu(h.sum(dim, dtype=torch.float32), x.sum(dim, dtype=torch.float32), **tol(torch.float32, n))
    whole = h.sum(dim).cpu()
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert torch.equal(h.sum(dim).cpu(), whole)
    finally:
        torch.set_num_threads(old)


@pytest.mark.parametrize("ord", [2, 1, float("inf"), float("-inf"), 0, 3, 0.5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_vector_norm_orders(ord, dtype):
    x = make((6, 9), dtype)
    for dim in [None, 1, (0, 1)]:
        assert_close_to_cpu(torch.linalg.vector_norm(x.to("hpu"), ord, dim=dim),
                            torch.linalg.vector_norm(x, ord, dim=dim), **tol(dtype, 54))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("correction", [0, 1, 2])
@pytest.mark.parametrize("dim", [None, 1, (0, 2)])
def test_var_std(dtype, correction, dim):
    x = make((3, 5, 4), dtype) + 10  # an offset tests the two-pass variance
    h = x.to("hpu")
    for op in ["var", "std"]:
        fn = getattr(torch, op)
        assert_close_to_cpu(fn(h, dim=dim, correction=correction), fn(x, dim=dim, correction=correction),
                            **tol(dtype, 60))
    for op in ["var_mean", "std_mean"]:
        fn = getattr(torch, op)
        got, exp = fn(h, dim=dim, correction=correction, keepdim=True), fn(x, dim=dim, correction=correction,
                                                                          keepdim=True)
        for g, e in zip(got, exp):
            assert_close_to_cpu(g, e, **tol(dtype, 60))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.float64])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_argmax(dtype, dim, keepdim):
    x = make((5, 6), dtype, lo=-4, hi=4)  # small ints: ties pick the first index
    h = x.to("hpu")
    for op in ["max", "min"]:
        gv, gi = getattr(torch, op)(h, dim, keepdim=keepdim)
        ev, ei = getattr(torch, op)(x, dim, keepdim=keepdim)
        assert_close_to_cpu(gv, ev)
        assert_close_to_cpu(gi, ei)
        assert_close_to_cpu(getattr(torch, op)(h), getattr(torch, op)(x))
    for op in ["argmax", "argmin"]:
        assert_close_to_cpu(getattr(torch, op)(h, dim, keepdim=keepdim), getattr(torch, op)(x, dim, keepdim=keepdim))
        assert_close_to_cpu(getattr(torch, op)(h), getattr(torch, op)(x))
        assert_close_to_cpu(getattr(torch, op)(h, keepdim=True), getattr(torch, op)(x, keepdim=True))


def test_max_nan_and_empty():
    x = torch.tensor([[1.0, float("nan"), 3.0], [2.0, 5.0, float("nan")]])
    h = x.to("hpu")
    assert_close_to_cpu(h.max(), x.max(), equal_nan=True)
    assert_close_to_cpu(h.amax(1), x.amax(1), equal_nan=True)
    assert_close_to_cpu(h.argmax(1), x.argmax(1))
    assert_close_to_cpu(h.max(1).indices, x.max(1).indices)
    with pytest.raises(RuntimeError, match="numel"):
        torch.empty(0, device="hpu").max()
    with pytest.raises(IndexError):
        torch.empty(3, 0, device="hpu").max(1)


@pytest.mark.parametrize("dtype,out_dtype", [(torch.float32, None), (torch.bfloat16, None), (torch.int64, None),
                                             (torch.int32, None), (torch.bool, None),
                                             (torch.float32, torch.float64), (torch.float64, None)])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum(dtype, out_dtype, dim):
    x = make((4, 7), dtype)
    assert_close_to_cpu(torch.cumsum(x.to("hpu"), dim, dtype=out_dtype), torch.cumsum(x, dim, dtype=out_dtype),
                        **tol(dtype, 7))
    xn = noncontig(x)
    assert_close_to_cpu(torch.cumsum(xn.to("hpu"), dim), torch.cumsum(xn, dim), **tol(dtype, 7))


@pytest.mark.parametrize("rows", [1, 4, 7, 9])
def test_cumsum_rows_same_bits(rows):
    """float32 rows (the four-rows-at-a-time path, with leftover rows)
    accumulate in double as PyTorch's CPU cumsum does: the same bits."""
    x = make((rows, 1000), torch.float32) * 100
    assert torch.equal(torch.cumsum(x.to("hpu"), -1).cpu(), torch.cumsum(x, -1))
    assert torch.equal(torch.cumsum(x.t().to("hpu"), 0).cpu(), torch.cumsum(x.t(), 0))


def test_foreach_norm_and_clip_grad_norm():
    torch.manual_seed(0)
    params = [torch.randn(s, requires_grad=True) for s in [(10, 4), (7,), (3, 3, 3)]]
    for p in params:
        p.grad = torch.randn_like(p)
    hparams = [p.detach().to("hpu").requires_grad_() for p in params]
    for p, h in zip(params, hparams):
        h.grad = p.grad.to("hpu")
    got = torch._foreach_norm([h.grad for h in hparams])
    exp = torch._foreach_norm([p.grad for p in params])
    for g, e in zip(got, exp):
        assert_close_to_cpu(g, e)
    tn_h = torch.nn.utils.clip_grad_norm_(hparams, 1.0)
    tn = torch.nn.utils.clip_grad_norm_(params, 1.0)
    assert_close_to_cpu(tn_h, tn)
    for p, h in zip(params, hparams):
        assert_close_to_cpu(h.grad, p.grad)


# ---- softmax -----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,dim", [((4, 10), -1), ((4, 10), 0), ((2, 3, 17), 1), ((5,), 0), ((), 0),
                                       ((3, 0), 1), ((2, 1000), -1), ((3, 4, 33), -1)])
@pytest.mark.parametrize("log", [False, True])
def test_softmax(dtype, shape, dim, log):
    x = make(shape, dtype) * 3
    fn = (lambda t: F.log_softmax(t, dim)) if log else (lambda t: F.softmax(t, dim))
    assert_close_to_cpu(fn(x.to("hpu")), fn(x), **tol(dtype))
    xn = noncontig(x)
    assert_close_to_cpu(fn(xn.to("hpu")), fn(xn), **tol(dtype))


def test_softmax_masked_rows_and_half_to_float():
    x = torch.tensor([[0.0, float("-inf"), 1.0], [float("-inf")] * 3, [5.0, 5.0, 5.0]])
    for fn in [F.softmax, F.log_softmax]:
        assert_close_to_cpu(fn(x.to("hpu"), -1), fn(x, -1), equal_nan=True)
    # equal values give exactly uniform probabilities
    assert torch.equal(F.softmax(torch.full((3, 8), 2.5, device="hpu"), -1).cpu(), torch.full((3, 8), 0.125))
    xb = make((4, 9), torch.bfloat16)
    assert_close_to_cpu(torch._softmax(xb.to("hpu"), 1, False), torch._softmax(xb, 1, False), **tol(torch.bfloat16))
    xh = make((4, 9), torch.float32).half()
    assert_close_to_cpu(F.softmax(xh.to("hpu"), 1, dtype=torch.float32), F.softmax(xh, 1, dtype=torch.float32))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_log_softmax_rows_in_reduced_floats_are_bit_exact(dtype):
    # PyTorch's CPU keeps a bf16/fp16 row's sum of exponentials and its log
    # in the row's dtype; rounding only the output left 1 element in 5 one
    # ulp away. Through log_softmax and cross_entropy, which is built on it.
    x = make((64, 1000), dtype) * 3
    assert_close_to_cpu(F.log_softmax(x.to("hpu"), -1), F.log_softmax(x, -1), rtol=0, atol=0)
    t = torch.randint(0, 1000, (64,), generator=torch.Generator().manual_seed(3))
    assert_close_to_cpu(F.cross_entropy(x.to("hpu"), t.to("hpu"), reduction="none"),
                        F.cross_entropy(x, t, reduction="none"), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("dim", [-1, 1])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_grad(dtype, dim, log):
    x = make((3, 5, 7), dtype)
    g = make((3, 5, 7), dtype, seed=1)
    fn = F.log_softmax if log else F.softmax
    xc = x.clone().requires_grad_()
    fn(xc, dim).backward(g)
    xh = x.to("hpu").requires_grad_()
    fn(xh, dim).backward(g.to("hpu"))
    assert_close_to_cpu(xh.grad, xc.grad, **tol(dtype, 7))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1024, 1024), (4096, 256), (256, 4096)])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_rows_of_1m_elements(dtype, shape, log):
    # The benchmark's shapes (bench/softmax_rows.py): rows split over the
    # kernel threads, bf16 rows written and (softmax backward) read without
    # float copies. Forward and backward against the CPU.
    x = make(shape, dtype) * 3
    g = make(shape, dtype, seed=1)
    fn = F.log_softmax if log else F.softmax
    y = fn(x, -1)
    assert_close_to_cpu(fn(x.to("hpu"), -1), y, **tol(dtype))
    bw = torch.ops.aten._log_softmax_backward_data if log else torch.ops.aten._softmax_backward_data
    gh, yh = g.to("hpu"), y.to("hpu")
    assert_close_to_cpu(bw(gh, yh, -1, dtype), bw(g, y, -1, dtype), **tol(dtype))
    if dtype == torch.bfloat16 and not log:
        # bf16 rows are the float rows rounded once (docs/NUMERICS.md): the
        # same bits as the float32 kernel on the same values, then rounded
        assert torch.equal(fn(x.to("hpu"), -1).cpu(), fn(x.float().to("hpu"), -1).cpu().bfloat16())
        assert torch.equal(bw(gh, yh, -1, dtype).cpu(),
                           bw(gh.float(), yh.float(), -1, torch.float32).cpu().bfloat16())


# ---- layer norm --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,nshape", [((4, 16), (16,)), ((2, 3, 33), (33,)), ((2, 3, 4), (3, 4)), ((5, 1), (1,)),
                                          ((0, 8), (8,))])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_layer_norm(dtype, shape, nshape, affine):
    x = make(shape, dtype) * 2 + 1
    w = make(nshape, dtype, seed=1) if affine != "none" else None
    b = make(nshape, dtype, seed=2) if affine == "both" else None
    h = lambda t: t.to("hpu") if t is not None else None
    got = torch.native_layer_norm(h(x), nshape, h(w), h(b), 1e-5)
    exp = torch.native_layer_norm(x, nshape, w, b, 1e-5)
    for g, e in zip(got, exp):
        assert g.shape == e.shape
        assert_close_to_cpu(g, e, **tol(dtype, 4))


def test_layer_norm_constant_rows_and_mixed_dtype():
    x = torch.full((3, 8), 4.0)
    y = F.layer_norm(x.to("hpu"), (8,))
    assert torch.equal(y.cpu(), torch.zeros(3, 8))
    xb = make((4, 12), torch.bfloat16)
    w, b = make((12,), seed=1), make((12,), seed=2)
    got = torch.native_layer_norm(xb.to("hpu"), (12,), w.to("hpu"), b.to("hpu"), 1e-5)
    exp = torch.native_layer_norm(xb, (12,), w, b, 1e-5)
    for g, e in zip(got, exp):
        assert_close_to_cpu(g, e, **tol(torch.bfloat16))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("rows", [6, 300])
def test_layer_norm_grad(dtype, affine, rows):
    x = make((rows, 24), dtype)
    g = make((rows, 24), dtype, seed=3)
    ln = torch.nn.LayerNorm(24, elementwise_affine=affine).to(dtype)
    if affine:
        with torch.no_grad():
            ln.weight.copy_(make((24,), dtype, seed=4))
            ln.bias.copy_(make((24,), dtype, seed=5))
    lh = torch.nn.LayerNorm(24, elementwise_affine=affine).to(dtype).to("hpu")
    lh.load_state_dict(ln.state_dict())
    xc = x.clone().requires_grad_()
    ln(xc).backward(g)
    xh = x.to("hpu").requires_grad_()
    lh(xh).backward(g.to("hpu"))
    assert_close_to_cpu(xh.grad, xc.grad, **tol(dtype, 24))
    if affine:
        if dtype == torch.bfloat16:
            # PyTorch CPU sums bf16 weight/bias grads with bf16 roundings on
            # the way (errors ~0.5 here); the hpu sums in float, so compare
            # with the same CPU op run in float32
            ln.float()
            xc = x.float().requires_grad_()
            ln.zero_grad()
            ln(xc).backward(g.float())
        assert_close_to_cpu(lh.weight.grad, ln.weight.grad.to(dtype), **tol(dtype, rows))
        assert_close_to_cpu(lh.bias.grad, ln.bias.grad.to(dtype), **tol(dtype, rows))


def test_layer_norm_backward_output_mask():
    x, w, b = make((5, 8)), make((8,), seed=1), make((8,), seed=2)
    _, mean, rstd = torch.native_layer_norm(x, (8,), w, b, 1e-5)
    g = make((5, 8), seed=3)
    h = lambda t: t.to("hpu")
    for mask in [[True, False, False], [False, True, True], [False, False, True]]:
        got = torch.ops.aten.native_layer_norm_backward(h(g), h(x), [8], h(mean), h(rstd), h(w), h(b), mask)
        exp = torch.ops.aten.native_layer_norm_backward(g, x, [8], mean, rstd, w, b, mask)
        for gg, ee, m in zip(got, exp, mask):
            if m:
                assert_close_to_cpu(gg, ee, rtol=1e-4, atol=1e-5)


# ---- group norm ------------------------------------------------------------------------------

GN_CASES = [((4, 6, 5), 3), ((2, 8, 4, 4), 4), ((3, 4, 2, 3, 2), 2), ((2, 6, 1), 3), ((1, 4, 70, 70), 1),
            ((0, 4, 3), 2), ((2, 4), 2), ((2, 4, 0), 2)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,groups", GN_CASES)
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_group_norm_forward_and_backward(dtype, shape, groups, affine, fallback_counts):
    # native_group_norm and its backward are hpu kernels that round where
    # PyTorch's CPU kernel does: bf16 / fp16 outputs and gradients are the
    # CPU's to one step of the dtype (the statistics are summed in another
    # order), float32 to summation-order rounding.
    C = shape[1]
    x = make(shape, dtype) * 2 + 0.5
    w = make((C,), dtype, seed=1) if affine != "none" else None
    b = make((C,), dtype, seed=2) if affine == "both" else None
    g = make(shape, dtype, seed=3)
    h = lambda t: t.to("hpu").requires_grad_() if t is not None else None
    c = lambda t: t.clone().requires_grad_() if t is not None else None
    xc, wc, bc = c(x), c(w), c(b)
    xh, wh, bh = h(x), h(w), h(b)
    yc = F.group_norm(xc, groups, wc, bc)
    yh = F.group_norm(xh, groups, wh, bh)
    yc.backward(g)
    yh.backward(g.to("hpu"))
    pairs = [(yh, yc), (xh.grad, xc.grad)] + [(p.grad, q.grad) for p, q in ((wh, wc), (bh, bc)) if p is not None]
    n = x[0].numel() // groups if x.numel() else 1
    for got, exp in pairs:
        assert got.shape == exp.shape
        assert_close_to_cpu(got, exp, equal_nan=True, **tol(dtype, n))
    if dtype in (torch.bfloat16, torch.float16) and x.numel():
        assert steps_apart(yh.detach().cpu(), yc.detach()) <= 1
    assert fallback_counts() == {}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_group_norm_statistics_and_mixed_parameters(dtype):
    # mean and rstd are returned in the input's dtype, or in float32 when a
    # bf16 / fp16 input meets float32 parameters (as autocast's fp32 list
    # gives them); the backward takes those statistics back.
    x = make((3, 8, 5, 5), dtype)
    for w, b in [(make((8,), dtype, seed=1), make((8,), dtype, seed=2)), (make((8,), seed=1), make((8,), seed=2))]:
        got = torch.native_group_norm(x.to("hpu"), w.to("hpu"), b.to("hpu"), 3, 8, 25, 4, 1e-5)
        exp = torch.native_group_norm(x, w, b, 3, 8, 25, 4, 1e-5)
        for gg, ee in zip(got, exp):
            assert gg.dtype == ee.dtype and gg.shape == ee.shape
            assert_close_to_cpu(gg, ee, **tol(dtype, 50))
        dy = make((3, 8, 5, 5), dtype, seed=4)
        gb = torch.ops.aten.native_group_norm_backward(dy.to("hpu"), x.to("hpu"), got[1], got[2], w.to("hpu"),
                                                       3, 8, 25, 4, [True, True, True])
        eb = torch.ops.aten.native_group_norm_backward(dy, x, exp[1], exp[2], w, 3, 8, 25, 4, [True, True, True])
        for gg, ee in zip(gb, eb):
            assert gg.dtype == ee.dtype
            assert_close_to_cpu(gg, ee, **tol(dtype, 75))


def test_group_norm_layouts_and_masks(fallback_counts):
    # a channels-last or transposed input gives the CPU's values; each
    # output of the backward can be asked for alone
    x = make((2, 6, 7, 5)) * 3
    w, b = make((6,), seed=1), make((6,), seed=2)
    h = lambda t: t.to("hpu")
    for xx in (x.to(memory_format=torch.channels_last), x.transpose(2, 3)):
        assert_close_to_cpu(F.group_norm(h(xx), 3, h(w), h(b)), F.group_norm(xx, 3, w, b), rtol=1e-5, atol=1e-5)
    _, mean, rstd = torch.native_group_norm(x, w, b, 2, 6, 35, 3, 1e-5)
    dy = make((2, 6, 7, 5), seed=3)
    for mask in [[True, False, False], [False, True, False], [False, False, True], [False, False, False]]:
        got = torch.ops.aten.native_group_norm_backward(h(dy), h(x), h(mean), h(rstd), h(w), 2, 6, 35, 3, mask)
        exp = torch.ops.aten.native_group_norm_backward(dy, x, mean, rstd, w, 2, 6, 35, 3, mask)
        for gg, ee, m in zip(got, exp, mask):
            assert (gg is None or not gg.defined()) if not m else True
            if m:
                assert_close_to_cpu(gg, ee, rtol=1e-4, atol=1e-4)
    assert fallback_counts() == {}


def test_group_norm_bad_input():
    x = make((2, 6, 4)).to("hpu")
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        F.group_norm(x, 4)
    with pytest.raises(RuntimeError, match="greater than 0"):
        torch.native_group_norm(x, None, None, 2, 6, 4, 0, 1e-5)
    with pytest.raises(RuntimeError, match="Expected weight to be a vector of size equal to the number of channels"):
        F.group_norm(x, 3, make((5,)).to("hpu"))
    with pytest.raises(RuntimeError, match="N \\* C \\* HxW"):
        torch.native_group_norm(x, None, None, 2, 6, 5, 3, 1e-5)
    with pytest.raises(NotImplementedError, match="GroupNormKernelImpl"):
        torch.native_group_norm(x.int(), None, None, 2, 6, 4, 3, 1e-5)
    with pytest.raises(RuntimeError, match="weight and bias must be"):
        torch.native_group_norm(x, make((6,), torch.bfloat16).to("hpu"), None, 2, 6, 4, 3, 1e-5)
    _, m, r = torch.native_group_norm(x, None, None, 2, 6, 4, 3, 1e-5)
    with pytest.raises(RuntimeError, match="X and dY"):
        torch.ops.aten.native_group_norm_backward(x.bfloat16(), x, m, r, None, 2, 6, 4, 3, [True, False, False])
    # the process goes on
    assert_close_to_cpu(F.group_norm(x, 3), F.group_norm(x.cpu(), 3), rtol=1e-5, atol=1e-5)


# ---- losses ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_mse_and_l1_loss(dtype, reduction, fallback_counts):
    # mse_loss and its backward round each step to bf16 / fp16 as the CPU's
    # kernel does: bit for bit there; float32 / float64 by summation order
    x, t = make((23, 17), dtype), make((23, 17), dtype, seed=1)
    for loss in (F.mse_loss, F.l1_loss):
        xc, xh = x.clone().requires_grad_(), x.to("hpu").requires_grad_()
        lc, lh = loss(xc, t, reduction=reduction), loss(xh, t.to("hpu"), reduction=reduction)
        g = make(lc.shape, dtype, seed=2)
        lc.backward(g)
        lh.backward(g.to("hpu"))
        exact = dtype in (torch.bfloat16, torch.float16)
        if exact and loss is F.mse_loss:
            assert_close_to_cpu(lh, lc.detach(), rtol=0, atol=0)
            assert_close_to_cpu(xh.grad, xc.grad, rtol=0, atol=0)
        else:
            assert_close_to_cpu(lh, lc.detach(), **tol(dtype, x.numel()))
            assert_close_to_cpu(xh.grad, xc.grad, **tol(dtype))
    # broadcasting target, and out=
    out = torch.empty(0, dtype=dtype, device="hpu")
    torch.ops.aten.mse_loss.out(x.to("hpu"), t[:1].to("hpu"), 0, out=out)
    assert_close_to_cpu(out, torch.ops.aten.mse_loss(x, t[:1], 0), **tol(dtype))
    assert fallback_counts() == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_flip_and_roll(dtype, fallback_counts):
    x = make((4, 5, 6), dtype)
    h = x.to("hpu")
    for dims in [(0,), (-1,), (0, 2), (0, 1, 2), ()]:
        assert_close_to_cpu(h.flip(dims), x.flip(dims), rtol=0, atol=0)
    assert_close_to_cpu(h.t().flip(0) if x.dim() == 2 else h.transpose(0, 2).flip(1), x.transpose(0, 2).flip(1),
                        rtol=0, atol=0)
    for shifts, dims in [(2, 0), (-7, 1), ((1, -2), (0, 2)), (13, None), ((0,), (1,))]:
        kw = {} if dims is None else {"dims": dims}
        assert_close_to_cpu(h.roll(shifts, **kw), x.roll(shifts, **kw), rtol=0, atol=0)
    # flip returns a new tensor even when nothing moves
    one = h[:1]
    assert one.flip(0).data_ptr() != one.data_ptr()
    assert_close_to_cpu(torch.empty(0, 3, dtype=dtype, device="hpu").roll(1, 0), torch.empty(0, 3, dtype=dtype).roll(1, 0))
    assert fallback_counts() == {}
    with pytest.raises(RuntimeError, match="dims has duplicates"):
        h.flip((0, 0))
    with pytest.raises(RuntimeError, match="shifts and dimensions must align"):
        h.roll((1, 2), (0,))
    with pytest.raises(IndexError):
        h.flip(5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [-100, 2])
def test_nll_loss_and_grad(dtype, reduction, weighted, ignore_index):
    x = make((7, 5), dtype)
    t = torch.tensor([0, 2, 4, 1, 2, -100, 3]) if ignore_index == -100 else torch.tensor([0, 2, 4, 1, 2, 2, 3])
    w = make((5,), dtype, seed=2).abs() + 0.1 if weighted else None
    xc = x.clone().requires_grad_()
    lc = F.nll_loss(F.log_softmax(xc, 1), t, weight=w, reduction=reduction, ignore_index=ignore_index)
    xh = x.to("hpu").requires_grad_()
    lh = F.nll_loss(F.log_softmax(xh, 1), t.to("hpu"), weight=w.to("hpu") if weighted else None,
                    reduction=reduction, ignore_index=ignore_index)
    assert_close_to_cpu(lh, lc, **tol(dtype, 7))
    lc.sum().backward()
    lh.sum().backward()
    assert_close_to_cpu(xh.grad, xc.grad, **tol(dtype, 7))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss2d_and_cross_entropy_over_pixels(dtype, reduction, weighted, fallback_counts):
    # [N, C, H, W] scores against [N, H, W] targets: segmentation's loss
    x = make((2, 5, 3, 4), dtype)
    t = make((2, 3, 4), torch.int64, lo=0, hi=5)
    t[0, 1, 2] = -100
    w = make((5,), dtype, seed=2).abs() + 0.1 if weighted else None
    xc = x.clone().requires_grad_()
    xh = x.to("hpu").requires_grad_()
    lc = F.cross_entropy(xc, t, weight=w, reduction=reduction)
    lh = F.cross_entropy(xh, t.to("hpu"), weight=w.to("hpu") if weighted else None, reduction=reduction)
    assert lh.shape == lc.shape
    assert_close_to_cpu(lh, lc.detach(), **tol(dtype, 24))
    g = make(lc.shape, dtype, seed=3)
    lc.backward(g)
    lh.backward(g.to("hpu"))
    assert_close_to_cpu(xh.grad, xc.grad, **tol(dtype, 24))
    assert fallback_counts() == {}


def test_nll_loss2d_bad_input():
    x = torch.randn(2, 3, 4, 5, device="hpu")
    t = torch.randint(0, 3, (2, 4, 5), device="hpu")
    nll2d = torch.ops.aten.nll_loss2d_forward
    with pytest.raises(RuntimeError, match="only batches of spatial inputs supported"):
        nll2d(x[0], t, None, 1, -100)
    with pytest.raises(RuntimeError, match="only batches of spatial targets supported"):
        nll2d(x, t[0], None, 1, -100)
    with pytest.raises(RuntimeError, match="size mismatch"):
        nll2d(x, t[:, :3], None, 1, -100)
    with pytest.raises(RuntimeError, match="weight tensor should be defined either for all or no classes"):
        nll2d(x, t, torch.ones(4, device="hpu"), 1, -100)
    with pytest.raises(IndexError, match="out of bounds"):
        nll2d(x, t + 3, None, 1, -100)[0].cpu()
    loss, _ = nll2d(x, t, None, 1, -100)
    assert_close_to_cpu(loss, torch.ops.aten.nll_loss2d_forward(x.cpu(), t.cpu(), None, 1, -100)[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64,
                                   torch.int32, torch.uint8])
def test_cumprod(dtype, fallback_counts):
    x = make((5, 40), dtype, lo=-2, hi=3) if not dtype.is_floating_point else make((5, 40), dtype) * 0.9
    x[1, 3] = 0  # zeros stop the product
    h = x.to("hpu")
    # bf16 / fp16 accumulate in float as the CPU's: the same bits
    exact = dtype in (torch.bfloat16, torch.float16) or not dtype.is_floating_point
    for dim in (0, 1, -1):
        assert_close_to_cpu(torch.cumprod(h, dim), torch.cumprod(x, dim), **(EXACT if exact else tol(dtype, 40)))
    assert_close_to_cpu(torch.cumprod(h.t(), 0), torch.cumprod(x.t(), 0), **(EXACT if exact else tol(dtype, 40)))
    if dtype in (torch.bfloat16, torch.float16):
        # long products of values near 1, where the accumulation type shows
        near1 = (1 + make((4, 2000), torch.float32, seed=5) * 0.02).to(dtype)
        assert_close_to_cpu(torch.cumprod(near1.to("hpu"), 1), torch.cumprod(near1, 1), **EXACT)
    # a result dtype of its own: the input is cast to it first, as on the CPU
    assert_close_to_cpu(torch.cumprod(h, 1, dtype=torch.float64), torch.cumprod(x, 1, dtype=torch.float64))
    if dtype.is_floating_point and dtype != torch.float16:
        xc, xh = x.clone().requires_grad_(), h.clone().requires_grad_()
        g = make((5, 40), dtype, seed=4)
        torch.cumprod(xc, 1).backward(g)
        torch.cumprod(xh, 1).backward(g.to("hpu"))
        assert_close_to_cpu(xh.grad, xc.grad, **tol(dtype, 40))
    assert fallback_counts() == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_logcumsumexp(dtype, fallback_counts):
    """The CPU's arithmetic: float for bf16 / fp16, double for float32 /
    float64 (the same libm calls), so the same bits, infinities and NaN
    included."""
    x = (make((6, 333), torch.float32, seed=7) * 5).to(dtype)
    x[0, 7] = float("inf")
    x[1, 0] = float("-inf")
    x[2, 9] = float("nan")
    x[3, :] = float("-inf")  # stays -inf (log of 0)
    x[4, 4:6] = float("inf")  # inf + inf stays inf, not NaN
    h = x.to("hpu")
    for dim in (0, 1, -1):
        assert_close_to_cpu(torch.logcumsumexp(h, dim), torch.logcumsumexp(x, dim), **EXACT, equal_nan=True)
    assert_close_to_cpu(torch.logcumsumexp(h[:, ::3], 1), torch.logcumsumexp(x[:, ::3], 1), **EXACT, equal_nan=True)
    out = torch.empty(0, dtype=dtype, device="hpu")
    torch.logcumsumexp(h.t(), 1, out=out)
    assert_close_to_cpu(out, torch.logcumsumexp(x.t(), 1), **EXACT, equal_nan=True)
    if dtype in (torch.bfloat16, torch.float16):  # every value after a few running values
        v = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(dtype)
        for start in (0.0, -3.5, 7.25, float("inf"), float("-inf")):
            pair = torch.stack([torch.full_like(v, start), v], 1)
            assert_close_to_cpu(torch.logcumsumexp(pair.to("hpu"), 1), torch.logcumsumexp(pair, 1), **EXACT,
                                equal_nan=True)
    assert_close_to_cpu(torch.logcumsumexp(torch.tensor(2.0, dtype=dtype).to("hpu"), 0),
                        torch.logcumsumexp(torch.tensor(2.0, dtype=dtype), 0), **EXACT)
    assert torch.logcumsumexp(torch.empty(0, 3, dtype=dtype, device="hpu"), 1).shape == (0, 3)
    if dtype in (torch.float32, torch.float64):
        xc = make((5, 40), dtype, seed=8).requires_grad_()
        xh = xc.detach().to("hpu").requires_grad_()
        g = make((5, 40), dtype, seed=9)
        torch.logcumsumexp(xc, 1).backward(g)
        torch.logcumsumexp(xh, 1).backward(g.to("hpu"))
        assert_close_to_cpu(xh.grad, xc.grad, **tol(dtype, 40))
    assert fallback_counts() == {}


def test_logcumsumexp_bad_input():
    with pytest.raises(NotImplementedError, match="logcumsumexp_out_cpu.*Long"):
        torch.logcumsumexp(torch.tensor([1, 2], device="hpu"), 0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.logcumsumexp(torch.zeros(2, 3, device="hpu"), 2)
    with pytest.raises(RuntimeError, match="expected scalar_type Float but found Double"):
        torch.logcumsumexp(torch.zeros(3, device="hpu"), 0, out=torch.empty(3, dtype=torch.float64, device="hpu"))


def test_nll_loss_1d_input():
    x = F.log_softmax(make((5,)), 0)
    t = torch.tensor(3)
    assert_close_to_cpu(F.nll_loss(x.to("hpu"), t.to("hpu")), F.nll_loss(x, t))


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_cross_entropy(fallback_counts, label_smoothing):
    x = make((6, 11))
    t = torch.tensor([1, 0, 10, 4, -100, 7])
    xc = x.clone().requires_grad_()
    F.cross_entropy(xc, t, label_smoothing=label_smoothing).backward()
    xh = x.to("hpu").requires_grad_()
    loss = F.cross_entropy(xh, t.to("hpu"), label_smoothing=label_smoothing)
    loss.backward()
    assert_close_to_cpu(loss, F.cross_entropy(x, t, label_smoothing=label_smoothing))
    assert_close_to_cpu(xh.grad, xc.grad)
    counts = fallback_counts()
    for op in ["nll_loss", "log_softmax", "sum", "mean"]:
        assert not any(op in k for k in counts), counts


def test_nll_loss_target_out_of_range_raises_and_recovers():
    x = F.log_softmax(make((3, 4)), 1).to("hpu")
    loss = F.nll_loss(x, torch.tensor([0, 7, 1], device="hpu"))
    with pytest.raises(IndexError, match="out of bounds"):
        loss.cpu()
    # the process and the card stay usable
    assert_close_to_cpu(F.nll_loss(x, torch.tensor([0, 3, 1], device="hpu")),
                        F.nll_loss(x.cpu(), torch.tensor([0, 3, 1])))


# ---- embedding and index ops -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(dtype, dim):
    x = make((5, 6, 4), dtype)
    idx = torch.tensor([3, 0, 3, 1])
    assert_close_to_cpu(torch.index_select(x.to("hpu"), dim, idx.to("hpu")), torch.index_select(x, dim, idx))
    xn = x.transpose(0, 2)
    assert_close_to_cpu(torch.index_select(xn.to("hpu"), dim, idx.int().to("hpu")), torch.index_select(xn, dim, idx))
    assert_close_to_cpu(torch.index_select(x.to("hpu"), dim, idx[:0].to("hpu")), torch.index_select(x, dim, idx[:0]))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.bfloat16, torch.float32, torch.int64])
def test_index_select_runs_of_indices(dtype):
    # indices that step by +1 or -1 throughout are copied (or reversed) as
    # whole runs; anything else, or a run with a bad index, is a gather
    x = make((3, 7, 150), dtype)
    h = x.to("hpu")
    cases = [list(range(150)), list(range(149, -1, -1)), list(range(20, 90)), list(range(90, 20, -1)),
             [4, 5], [5, 4], [3, 2, 1, 0, 5], [0, 1, 2, 4], [7, 7, 7], [9]]
    for idx in cases:
        i = torch.tensor(idx)
        assert_close_to_cpu(torch.index_select(h, 2, i.to("hpu")), torch.index_select(x, 2, i), rtol=0, atol=0)
        j = torch.tensor([v % 7 for v in idx][:7])
        assert_close_to_cpu(torch.index_select(h, 1, j.to("hpu")), torch.index_select(x, 1, j), rtol=0, atol=0)
    # a non-contiguous source and destination go through the gather
    assert_close_to_cpu(torch.index_select(h.transpose(1, 2), 1, torch.arange(149, -1, -1, device="hpu")),
                        torch.index_select(x.transpose(1, 2), 1, torch.arange(149, -1, -1)), rtol=0, atol=0)
    for bad in ([2, 1, 0, -1], [148, 149, 150]):
        with pytest.raises(IndexError, match="out of (bounds|range)"):
            torch.index_select(h, 2, torch.tensor(bad, device="hpu")).cpu()
    assert_close_to_cpu(torch.index_select(h, 2, torch.tensor([1, 0], device="hpu")), x[..., [1, 0]], rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("padding_idx", [None, 2])
@pytest.mark.parametrize("scale", [False, True])
def test_embedding_and_grad(dtype, padding_idx, scale):
    emb = torch.nn.Embedding(10, 6, padding_idx=padding_idx, scale_grad_by_freq=scale).to(dtype)
    eh = torch.nn.Embedding(10, 6, padding_idx=padding_idx, scale_grad_by_freq=scale).to(dtype).to("hpu")
    eh.load_state_dict(emb.state_dict())
    ids = torch.tensor([[1, 2, 3, 2], [9, 0, 2, 1]])
    g = make((2, 4, 6), dtype, seed=1)
    out = emb(ids)
    out.backward(g)
    oh = eh(ids.to("hpu"))
    oh.backward(g.to("hpu"))
    assert_close_to_cpu(oh, out)
    assert_close_to_cpu(eh.weight.grad, emb.weight.grad, **tol(dtype, 4))


def test_embedding_backward_large_vocab():
    V, H, n = 3000, 16, 20000
    ids = torch.randint(0, V, (n,), generator=torch.Generator().manual_seed(0))
    g = make((n, H))
    exp = torch.ops.aten.embedding_dense_backward(g, ids, V, -1, False)
    got = torch.ops.aten.embedding_dense_backward(g.to("hpu"), ids.to("hpu"), V, -1, False)
    assert_close_to_cpu(got, exp, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("dim", [0, 1])
def test_gather_scatter(dtype, dim):
    x = make((4, 5), dtype)
    idx = torch.tensor([[0, 1, 3], [2, 2, 0], [1, 0, 1]])
    h = lambda t: t.to("hpu")
    assert_close_to_cpu(torch.gather(h(x), dim, h(idx)), torch.gather(x, dim, idx))
    src = make((3, 3), dtype, seed=1)
    # unique targets per column/row for plain scatter (duplicates are order-dependent)
    uidx = torch.tensor([[0, 1, 3], [2, 3, 0], [1, 0, 1]]) if dim == 0 else torch.tensor([[0, 1, 3], [2, 4, 0], [1, 0, 2]])
    assert_close_to_cpu(torch.scatter(h(x), dim, h(uidx), h(src)), torch.scatter(x, dim, uidx, src))
    assert_close_to_cpu(torch.scatter(h(x), dim, h(uidx), 7), torch.scatter(x, dim, uidx, 7))
    assert_close_to_cpu(torch.scatter_add(h(x), dim, h(idx), h(src)), torch.scatter_add(x, dim, idx, src),
                        **tol(dtype, 3))
    y, yh = x.clone(), h(x)
    y.scatter_add_(dim, idx, src)
    yh.scatter_add_(dim, h(idx), h(src))
    assert_close_to_cpu(yh, y, **tol(dtype, 3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_multiply_and_int32_index(dtype, dim, fallback_counts):
    # scatter's reduce='multiply' (the legacy reduce argument) and int32
    # indices, both of which PyTorch's CPU takes; repeated targets multiply.
    x = make((4, 5), dtype)
    idx = torch.tensor([[0, 1, 3], [2, 2, 0], [1, 0, 1]])
    src = make((3, 3), dtype, seed=1)
    h = lambda t: t.to("hpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "The reduce argument ... is deprecated"
        for i in (idx, idx.int()):
            assert_close_to_cpu(torch.scatter(h(x), dim, h(i), h(src), reduce="multiply"),
                                torch.scatter(x, dim, i, src, reduce="multiply"), rtol=0, atol=0)
            # the scalar is first rounded to the dtype: 1.3 is not a bf16 value
            assert_close_to_cpu(torch.scatter(h(x), dim, h(i), 1.3, reduce="multiply"),
                                torch.scatter(x, dim, i, 1.3, reduce="multiply"), rtol=0, atol=0)
            assert_close_to_cpu(torch.scatter(h(x), dim, h(i), 1.3, reduce="add"),
                                torch.scatter(x, dim, i, 1.3, reduce="add"), rtol=0, atol=0)
            assert_close_to_cpu(torch.gather(h(x), dim, h(i)), torch.gather(x, dim, i))
            assert_close_to_cpu(torch.scatter_add(h(x), dim, h(i), h(src)), torch.scatter_add(x, dim, i, src),
                                **tol(dtype, 3))
        with pytest.raises(RuntimeError, match="must be either add or multiply"):
            torch.scatter(h(x), dim, h(idx), h(src), reduce="mean")
        with pytest.raises(RuntimeError, match="int32/int64"):
            torch.gather(h(x), dim, h(idx.short()))
        empty = torch.empty(3, 0, dtype=torch.uint8)  # any dtype when empty, as on the CPU
        assert_close_to_cpu(torch.gather(h(x), dim, h(empty)), torch.gather(x, dim, empty))
        assert_close_to_cpu(torch.scatter(h(x), dim, h(empty), 1.0), torch.scatter(x, dim, empty, 1.0))
    if dtype.is_floating_point:  # gather's backward scatters into the same int32 index
        xg, xh = x.float().requires_grad_(), h(x.float()).detach().requires_grad_()
        torch.gather(xg, dim, idx.int()).pow(2).sum().backward()
        torch.gather(xh, dim, h(idx.int())).pow(2).sum().backward()
        assert_close_to_cpu(xh.grad, xg.grad)
    assert fallback_counts() == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_accumulating_index_ops_round_as_cpu(dtype, fallback_counts):
    # 400 updates into 4 rows: PyTorch's CPU sums (and multiplies) repeated
    # targets of a bf16/fp16 scatter_add / scatter reduce / index_add in
    # float and rounds once, except index_add with alpha != 1, which rounds
    # alpha * src and every step to the dtype; float32 index_add fuses
    # alpha * src + self. Bit for bit.
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 6, generator=g).to(dtype)
    src = torch.randn(400, 6, generator=g).to(dtype)
    near_one = (torch.rand(400, 6, generator=g) * 0.1 + 0.96).to(dtype)
    idx = torch.randint(0, 4, (400,), generator=g)
    wide = idx.view(400, 1).expand(400, 6)
    h = lambda t: t.to("hpu")
    exact = dict(rtol=0, atol=0)
    assert_close_to_cpu(h(x).scatter_add(0, h(wide), h(src)), x.scatter_add(0, wide, src), **exact)
    assert_close_to_cpu(h(x).t().scatter_add(1, h(wide).t(), h(src).t()), x.t().scatter_add(1, wide.t(), src.t()),
                        **exact)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "The reduce argument ... is deprecated"
        assert_close_to_cpu(h(x).scatter(0, h(wide), h(near_one), reduce="multiply"),
                            x.scatter(0, wide, near_one, reduce="multiply"), **exact)
        assert_close_to_cpu(h(x).scatter(0, h(wide[:40]), 1.01, reduce="multiply"),
                            x.scatter(0, wide[:40], 1.01, reduce="multiply"), **exact)
    for alpha in (1, 0.3):
        assert_close_to_cpu(h(x).index_add(0, h(idx), h(src), alpha=alpha), x.index_add(0, idx, src, alpha=alpha),
                            **exact)
    assert fallback_counts() == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("dim", [0, 1])
def test_index_add(dtype, dim):
    x = make((5, 4), dtype)
    idx = torch.tensor([4, 0, 4, 1] if dim == 0 else [3, 0, 3, 1])
    src = make((4, 4) if dim == 0 else (5, 4), dtype, seed=1)
    h = lambda t: t.to("hpu")
    assert_close_to_cpu(torch.index_add(h(x), dim, h(idx), h(src), alpha=2), torch.index_add(x, dim, idx, src, alpha=2),
                        **tol(dtype, 3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_advanced_indexing(dtype):
    x = make((5, 6, 7), dtype)
    h = x.to("hpu")
    i1, i2 = torch.tensor([0, 4, -1, 2]), torch.tensor([[1], [3]])
    cases = [lambda t, d: t[d(i1)], lambda t, d: t[:, d(i1)], lambda t, d: t[..., d(i1)],
             lambda t, d: t[d(i1), d(i1)], lambda t, d: t[d(i2), :, d(i1)], lambda t, d: t[:, d(i2), d(i1)],
             lambda t, d: t[d(i1), 2], lambda t, d: t[1:, d(i2)]]
    for c in cases:
        assert_close_to_cpu(c(h, lambda i: i.to("hpu")), c(x, lambda i: i))
        assert_close_to_cpu(c(h, lambda i: i), c(x, lambda i: i))  # cpu indices, as on cuda
    mask = make((5, 6), torch.bool, seed=3)
    assert_close_to_cpu(h[mask.to("hpu")], x[mask])
    assert_close_to_cpu(h[:, :, 3][mask.to("hpu")], x[:, :, 3][mask])


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_index_put(accumulate, dtype):
    x = make((5, 6), dtype)
    idx = torch.tensor([0, 3, 3, 1]) if accumulate else torch.tensor([0, 3, 4, 1])
    v = make((4, 6), dtype, seed=1)
    y, yh = x.clone(), x.to("hpu")
    y.index_put_((idx,), v, accumulate=accumulate)
    yh.index_put_((idx.to("hpu"),), v.to("hpu"), accumulate=accumulate)
    assert_close_to_cpu(yh, y, **tol(dtype, 2))
    y, yh = x.clone(), x.to("hpu")
    y[:, idx] = 5
    yh[:, idx.to("hpu")] = 5
    assert_close_to_cpu(yh, y)
    m = make((5, 6), torch.bool, seed=2)
    y, yh = x.clone(), x.to("hpu")
    y[m] = 0
    yh[m.to("hpu")] = 0
    assert_close_to_cpu(yh, y)
    # advanced-index gradient: index_put with accumulate through autograd
    if dtype == torch.float32:
        a = x.clone().requires_grad_()
        a[idx, 1:3].sum().backward()
        ah = x.to("hpu").requires_grad_()
        ah[idx.to("hpu"), 1:3].sum().backward()
        assert_close_to_cpu(ah.grad, a.grad)


@pytest.mark.parametrize("op", ["index_select", "gather", "scatter", "index", "embedding", "index_put"])
def test_index_out_of_range_raises_index_error(op):
    x = make((4, 5)).to("hpu")
    bad = torch.tensor([1, 9], device="hpu")
    with pytest.raises(IndexError, match="out of"):
        if op == "index_select":
            torch.index_select(x, 0, bad).cpu()
        elif op == "gather":
            torch.gather(x, 1, torch.tensor([[0, 7]], device="hpu")).cpu()
        elif op == "scatter":
            x.clone().scatter_(1, torch.tensor([[0, 7]], device="hpu"), 1.0).cpu()
        elif op == "index":
            x[bad].cpu()
        elif op == "embedding":
            F.embedding(bad, x).cpu()
        else:
            y = x.clone()
            y[bad] = 1.0
            y.cpu()
    # a cpu index is checked at the op itself
    with pytest.raises(IndexError, match="out of"):
        x[torch.tensor([-5])]
    # the card is usable afterwards
    assert_close_to_cpu(x[torch.tensor([1, 3], device="hpu")], x.cpu()[torch.tensor([1, 3])])


# ---- cat, sort, topk -------------------------------------------------------------------------

def test_cat_shapes_dtypes(fallback_counts):
    a, b, c = make((2, 3)), make((4, 3), torch.bfloat16), make((1, 3), torch.int64)
    h = lambda t: t.to("hpu")
    assert_close_to_cpu(torch.cat([h(a), h(b), h(c)]), torch.cat([a, b, c]))
    assert_close_to_cpu(torch.cat([h(a), h(a.T.contiguous().T)], 1), torch.cat([a, a], 1))
    e = torch.empty(0)
    assert_close_to_cpu(torch.cat([h(e), h(a), h(e)]), torch.cat([e, a, e]))
    assert_close_to_cpu(torch.cat([h(a[:0]), h(a)]), torch.cat([a[:0], a]))
    assert_close_to_cpu(torch.stack([h(a), h(a)], 1), torch.stack([a, a], 1))
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
        torch.cat([h(a), h(make((2, 4)))])
    assert not any("cat" in k or "stack" in k for k in fallback_counts())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("dim", [0, -1])
def test_sort_topk(dtype, dim):
    x = make((6, 9), dtype, lo=-3, hi=3)  # many ties: checks stability
    h = x.to("hpu")
    for desc in [False, True]:
        gv, gi = torch.sort(h, dim=dim, descending=desc, stable=True)
        ev, ei = torch.sort(x, dim=dim, descending=desc, stable=True)
        assert_close_to_cpu(gv, ev)
        assert_close_to_cpu(gi, ei)
        assert_close_to_cpu(torch.argsort(h, dim=dim, descending=desc, stable=True),
                            torch.argsort(x, dim=dim, descending=desc, stable=True))
    xf = make((6, 9), dtype, seed=5) if dtype.is_floating_point else x
    for largest in [True, False]:
        gv, gi = torch.topk(xf.to("hpu"), 3, dim=dim, largest=largest)
        ev, ei = torch.topk(xf, 3, dim=dim, largest=largest)
        assert_close_to_cpu(gv, ev)
        torch.testing.assert_close(torch.gather(xf, dim, gi.cpu()), ev)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("dim", [0, -1])
def test_topk_long_rows(dtype, dim):
    """k much smaller than the row (the selection path): values as the CPU's,
    indices those of a stable sort's first k (ties in index order), NaN as
    the largest value."""
    x = make((4, 1000), dtype, lo=-50, hi=50)  # ties in every row
    if dtype.is_floating_point:
        x[1, 17] = float("nan")
        x[2, 999] = float("nan")
    x = x if dim == -1 else x.t().contiguous()
    for largest in [True, False]:
        gv, gi = torch.topk(x.to("hpu"), 5, dim=dim, largest=largest)
        ev, _ = torch.topk(x, 5, dim=dim, largest=largest)
        assert_close_to_cpu(gv, ev, equal_nan=True)
        sv, si = torch.sort(x, dim=dim, descending=largest, stable=True)
        assert_close_to_cpu(gi, si.narrow(dim, 0, 5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("dim", [0, -1])
def test_max_argmax_long_rows(dtype, dim):
    """Rows of 1000 (the vectorised path along -1): the first index of the
    max / min among ties, NaN wins (in the blocks and in the tail),
    infinities, signed zeros; the values bit for bit."""
    x = make((6, 1000), dtype, lo=-50, hi=50)  # ties in every row
    x[1, 17] = float("nan")
    x[2, 999] = float("nan")
    x[3, 500], x[3, 0] = float("inf"), float("-inf")
    x[4] = float("-inf")
    x[5] = torch.where(torch.arange(1000) % 3 == 0, -0.0, 0.0).to(dtype)
    x = x if dim == -1 else x.t().contiguous()
    h = x.to("hpu")
    bits = torch.int16 if dtype == torch.bfloat16 else torch.int32
    for op in ["max", "min"]:
        gv, gi = getattr(torch, op)(h, dim)
        ev, ei = getattr(torch, op)(x, dim)
        assert torch.equal(gv.cpu().view(bits), ev.view(bits)), op
        assert_close_to_cpu(gi, ei)
        assert_close_to_cpu(getattr(torch, "a" + op)(h, dim), getattr(torch, "a" + op)(x, dim), equal_nan=True)
        assert_close_to_cpu(getattr(torch, "arg" + op)(h, dim), getattr(torch, "arg" + op)(x, dim))


def test_sort_nan():
    x = torch.tensor([3.0, float("nan"), -1.0, 2.0, float("nan")])
    for desc in [False, True]:
        gv, gi = torch.sort(x.to("hpu"), descending=desc, stable=True)
        ev, ei = torch.sort(x, descending=desc, stable=True)
        assert_close_to_cpu(gv, ev, equal_nan=True)
        assert_close_to_cpu(gi, ei)


# ---- models --------------------------------------------------------------------------------------

NN_OPS = ["sum", "mean", "softmax", "layer_norm", "batch_norm", "nll_loss", "index", "embedding", "cat", "gather",
          "argmax", "max", "any", "all", "norm", "cumsum", "scaled_dot_product", "_fused_sdp", "topk", "sort"]


def _nn_fallbacks(counts):
    return {k: v for k, v in counts.items() if any(op in k for op in NN_OPS)}


@pytest.mark.parametrize("arch", ["gpt2", "bert", "bloom"])
def test_transformer_training_step_uses_no_nn_fallback(fallback_counts, arch):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if arch == "gpt2":
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=50,
                                                                     n_positions=32))
    elif arch == "bert":
        model = transformers.BertForSequenceClassification(transformers.BertConfig(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, vocab_size=50))
    else:
        model = transformers.BloomForCausalLM(transformers.BloomConfig(hidden_size=32, n_layer=2, n_head=4,
                                                                       vocab_size=50))
    model.eval()  # no dropout: the hpu and cpu runs see the same computation
    ids = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(1))
    labels = torch.tensor([0, 1]) if arch == "bert" else ids
    ref = model(input_ids=ids, labels=labels)
    ref.loss.backward()
    ref_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model.to("hpu")
    out = model(input_ids=ids.to("hpu"), labels=labels.to("hpu"))
    out.loss.backward()
    torch.testing.assert_close(out.loss.cpu(), ref.loss, rtol=1e-4, atol=1e-4)
    for p, g in zip(model.parameters(), ref_grads):
        torch.testing.assert_close(p.grad.cpu(), g, rtol=1e-3, atol=1e-4)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    assert norm.device.type == "hpu"
    if arch != "bert":
        g = model.generate(ids[:1, :4].to("hpu"), max_new_tokens=3, do_sample=False, use_cache=True, pad_token_id=0)
        model.to("cpu")
        gc = model.generate(ids[:1, :4], max_new_tokens=3, do_sample=False, use_cache=True, pad_token_id=0)
        assert torch.equal(g.cpu(), gc)
    assert _nn_fallbacks(fallback_counts()) == {}


def test_more_index_tensors_than_the_kernel_takes_fall_back_counted(fallback_counts):
    # The index node takes 3 index tensors; a fourth (x[i, j, k, l], or an
    # index_put_ through 4 dims, as grid_sample's decomposition does) runs
    # on the CPU, counted, with the same values and errors.
    g = torch.Generator().manual_seed(7)
    x = torch.randn(3, 4, 5, 6, generator=g)
    i, j, k, l = torch.tensor([0, -1, 2]), torch.tensor([1, 3, 0]), torch.tensor([4, 0, -2]), torch.tensor([5, 5, 0])
    h = lambda t: t.to("hpu")
    assert torch.equal(h(x)[h(i), h(j), h(k), h(l)].cpu(), x[i, j, k, l])
    v = torch.randn(3, generator=g)
    y, hy = x.clone(), h(x)
    y.index_put_((i, j, k, l), v, accumulate=True)
    hy.index_put_((h(i), h(j), h(k), h(l)), h(v), accumulate=True)
    assert torch.equal(hy.cpu(), y)
    assert fallback_counts() == {"aten::index.Tensor_out": 1, "aten::_index_put_impl_": 1}
    with pytest.raises(IndexError, match="out of bounds"):
        h(x)[h(i), h(j), h(k), h(torch.tensor([6, 0, 0]))]
    assert torch.equal(h(x)[h(i), h(j), h(k)].cpu(), x[i, j, k])  # still usable
