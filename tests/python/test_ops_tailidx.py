"""The tail ops on hpu (scatter_reduce, index_reduce, cummax / cummin, take,
put_, index_fill_) against the CPU result of the same PyTorch op, on cases
OpInfo does not stress, and with no CPU fallback."""
import pytest
import torch

from conftest import assert_close_to_cpu

ALL = [torch.float32, torch.bfloat16, torch.float16, torch.float64,
       torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]
EXACT = dict(rtol=0, atol=0, equal_nan=True)


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    lo = 0 if dtype == torch.uint8 else -4
    return torch.randint(lo, 5, shape, generator=g).to(dtype)


def on_hpu(fn, *args, counts):
    """fn on hpu copies of args (tensors), asserting no op fell back."""
    before = dict(counts())
    out = fn(*[a.to("hpu") if isinstance(a, torch.Tensor) else a for a in args])
    torch.hpu.synchronize()
    assert counts() == before, counts()
    return out


REDUCES = ["sum", "prod", "mean", "amax", "amin"]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(dtype, reduce, include_self, fallback_counts):
    self = make((4, 6), dtype, 1)
    src = make((5, 6), dtype, 2)
    g = torch.Generator().manual_seed(3)
    index = torch.randint(0, 4, (5, 6), generator=g)  # repeats: several values per target
    fn = lambda s, i, x: s.scatter_reduce(0, i, x, reduce, include_self=include_self)
    assert_close_to_cpu(on_hpu(fn, self, index, src, counts=fallback_counts), fn(self, index, src), **EXACT)


@pytest.mark.parametrize("reduce", REDUCES)
def test_scatter_reduce_cases(reduce, fallback_counts):
    # non-contiguous self and src, an index smaller than src, dim 1, a 0-d
    # case, NaN and -0.0 in the source, an empty index
    self = make((6, 5), torch.float32, 1).t()
    src = make((7, 8), torch.float32, 2).t()[:, ::2]
    src[0, 0], src[1, 1] = float("nan"), -0.0
    index = torch.tensor([[0, 1, 0], [5, 5, 5], [2, 2, 1], [0, 0, 0]]).t()
    for include_self in (True, False):
        fn = lambda s, i, x: s.scatter_reduce(1, i, x, reduce, include_self=include_self)
        assert_close_to_cpu(on_hpu(fn, self, index, src, counts=fallback_counts), fn(self, index, src), **EXACT)
    s0, i0, x0 = torch.tensor(2.5), torch.tensor(0), torch.tensor(4.0)
    fn = lambda s, i, x: s.scatter_reduce(0, i, x, reduce)
    assert_close_to_cpu(on_hpu(fn, s0, i0, x0, counts=fallback_counts), fn(s0, i0, x0), **EXACT)
    e = torch.empty(0, 5, dtype=torch.long)
    assert_close_to_cpu(on_hpu(fn, self, e, src, counts=fallback_counts), fn(self, e, src), **EXACT)


def test_scatter_reduce_large_and_grad(fallback_counts):
    # many values per target: the sum's order is the CPU's, bit for bit
    src = make((20000, 3), torch.float32, 4)
    index = torch.randint(0, 7, (20000, 3), generator=torch.Generator().manual_seed(5))
    self = torch.zeros(7, 3)
    fn = lambda s, i, x: s.scatter_reduce(0, i, x, "sum")
    assert_close_to_cpu(on_hpu(fn, self, index, src, counts=fallback_counts), fn(self, index, src), **EXACT)
    for reduce in REDUCES:
        x = make((5, 3), torch.float64, 6).requires_grad_()
        s = make((3, 3), torch.float64, 7).requires_grad_()
        idx = torch.tensor([[0, 1, 2], [0, 0, 1], [2, 1, 0], [1, 1, 1], [0, 2, 2]])
        y = s.scatter_reduce(0, idx, x, reduce).sum()
        gs, gx = torch.autograd.grad(y, (s, x))
        xh, sh = x.detach().to("hpu").requires_grad_(), s.detach().to("hpu").requires_grad_()
        yh = sh.scatter_reduce(0, idx.to("hpu"), xh, reduce).sum()
        ghs, ghx = torch.autograd.grad(yh, (sh, xh))
        torch.testing.assert_close(ghs.cpu(), gs)
        torch.testing.assert_close(ghx.cpu(), gx)


def test_scatter_reduce_bad_input():
    self = torch.zeros(3, 4, device="hpu")
    src = torch.ones(3, 4, device="hpu")
    with pytest.raises(RuntimeError, match="reduce argument must be"):
        self.scatter_reduce(0, torch.zeros(3, 4, dtype=torch.long, device="hpu"), src, "max")
    with pytest.raises(RuntimeError, match="self.dtype to be equal to src.dtype"):
        self.scatter_reduce(0, torch.zeros(3, 4, dtype=torch.long, device="hpu"), src.double(), "sum")
    with pytest.raises(IndexError, match="out of bounds"):
        self.scatter_reduce(0, torch.full((3, 4), 3, device="hpu"), src, "sum").cpu()
    with pytest.raises(IndexError, match="out of bounds"):
        self.scatter_reduce(0, torch.full((3, 4), -1, device="hpu"), src, "amax").cpu()
    assert self.add(1).sum().item() == 12  # still usable


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dim", [0, 1])
def test_index_reduce(dtype, reduce, include_self, dim, fallback_counts):
    self = make((4, 5), dtype, 1)
    src = make((4, 5), dtype, 2)
    index = torch.tensor([3, 0, 3, 1, 0][: self.shape[dim] if dim == 0 else 5])
    index = index[: src.shape[dim]]
    fn = lambda s, i, x: s.index_reduce(dim, i, x, reduce, include_self=include_self)
    assert_close_to_cpu(on_hpu(fn, self, index, src, counts=fallback_counts), fn(self, index, src), **EXACT)


def test_index_reduce_cases(fallback_counts):
    self = make((6, 4), torch.float32, 1).t()  # non-contiguous
    src = make((4, 3), torch.float32, 2)
    src[0, 0] = float("nan")
    index = torch.tensor([5, 0, 5], dtype=torch.int32)
    for reduce in ("prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            fn = lambda s, i, x: s.index_reduce(1, i, x, reduce, include_self=include_self)
            assert_close_to_cpu(on_hpu(fn, self, index, src, counts=fallback_counts), fn(self, index, src), **EXACT)
    with pytest.raises(RuntimeError, match="Expected reduce to be one of"):
        self.to("hpu").index_reduce(1, index.to("hpu"), src.to("hpu"), "sum")
    with pytest.raises(IndexError):
        self.to("hpu").index_reduce(1, torch.tensor([6, 0, 1], device="hpu"), src.to("hpu"), "amax").cpu()


@pytest.mark.parametrize("dtype", ALL + [torch.bool])
@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummaxmin(dtype, op, fallback_counts):
    x = make((5, 7), dtype, 3)  # small range: many ties, whose index is the later one
    for dim in (0, 1, -1):
        v, i = on_hpu(lambda t: getattr(torch, op)(t, dim), x, counts=fallback_counts)
        cv, ci = getattr(torch, op)(x, dim)
        assert_close_to_cpu(v, cv, **EXACT)
        assert_close_to_cpu(i, ci, **EXACT)


@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummaxmin_cases(op, fallback_counts):
    x = torch.tensor([[1.0, float("nan"), 3.0, float("nan"), -0.0, 0.0, float("inf"), -float("inf")]] * 2).t()
    for t in (x, x.t(), torch.tensor(2.0), torch.empty(0, 3)):
        v, i = on_hpu(lambda a: getattr(torch, op)(a, 0), t, counts=fallback_counts)
        cv, ci = getattr(torch, op)(t, 0)
        assert_close_to_cpu(v, cv, **EXACT)
        assert_close_to_cpu(i, ci, **EXACT)
    g = make((6, 4), torch.float64, 9).requires_grad_()
    (getattr(torch, op)(g, 0)[0] * torch.arange(24.0, dtype=torch.float64).view(6, 4)).sum().backward()
    gh = g.detach().to("hpu").requires_grad_()
    (getattr(torch, op)(gh, 0)[0] * torch.arange(24.0, dtype=torch.float64).view(6, 4).to("hpu")).sum().backward()
    torch.testing.assert_close(gh.grad.cpu(), g.grad)


@pytest.mark.parametrize("dtype", ALL + [torch.bool])
def test_take_put(dtype, fallback_counts):
    x = make((4, 5), dtype, 1).t()  # non-contiguous
    idx = torch.tensor([[0, -1, 7], [19, 3, 3]])
    assert_close_to_cpu(on_hpu(torch.take, x, idx, counts=fallback_counts), torch.take(x, idx), **EXACT)
    src = make((2, 3), dtype, 2)
    uniq = torch.tensor([[0, -1, 7], [19, 3, 4]])
    for acc, ii in ((False, uniq), (True, idx)):
        fn = lambda a, i, s: a.clone().put_(i, s, accumulate=acc)
        assert_close_to_cpu(on_hpu(fn, x, ii, src, counts=fallback_counts), fn(x, ii, src), **EXACT)


def test_take_put_bad_input():
    x = torch.arange(6.0, device="hpu")
    with pytest.raises(IndexError, match="out of range"):
        torch.take(x, torch.tensor([6], device="hpu")).cpu()
    with pytest.raises(RuntimeError, match="Expected a long tensor"):
        torch.take(x, torch.tensor([1], dtype=torch.int32, device="hpu"))
    with pytest.raises(IndexError, match="out of range"):
        x.clone().put_(torch.tensor([-7], device="hpu"), torch.tensor([1.0], device="hpu")).cpu()
    with pytest.raises(RuntimeError, match="same number of elements"):
        x.put_(torch.tensor([1, 2], device="hpu"), torch.tensor([1.0], device="hpu"))
    assert x.sum().item() == 15


@pytest.mark.parametrize("dtype", ALL + [torch.bool])
def test_index_fill(dtype, fallback_counts):
    x = make((4, 6), dtype, 1)
    for dim, idx in ((0, torch.tensor([0, -1])), (1, torch.tensor([5, 2, 2])), (1, torch.tensor(3))):
        for value in (1, True, torch.tensor(0)):
            if dtype != torch.bool and value is True:
                continue
            fn = lambda a, i: a.clone().index_fill_(dim, i, value)
            assert_close_to_cpu(on_hpu(fn, x, idx, counts=fallback_counts), fn(x, idx), **EXACT)
    if dtype.is_floating_point:
        fn = lambda a, i: a.t().index_fill(0, i, -2.5)
        assert_close_to_cpu(on_hpu(fn, x, torch.tensor([1]), counts=fallback_counts), fn(x, torch.tensor([1])), **EXACT)
    with pytest.raises(IndexError):
        x.to("hpu").index_fill_(0, torch.tensor([4], device="hpu"), 1).cpu()


# ---- nansum, count_nonzero, aminmax, equal ---------------------------------------------

@pytest.mark.parametrize("dtype", ALL + [torch.bool])
def test_nansum_count_nonzero_aminmax(dtype, fallback_counts):
    x = make((5, 6), dtype, 4)
    if dtype.is_floating_point:
        x[0, 0], x[2, 3], x[4, 5] = float("nan"), float("inf"), -0.0
    cases = [lambda t: torch.count_nonzero(t), lambda t: torch.count_nonzero(t, 1),
             lambda t: torch.count_nonzero(t.t(), (0, 1)), lambda t: torch.nansum(t), lambda t: torch.nansum(t, 0),
             lambda t: torch.nansum(t.t(), 1, keepdim=True)]
    if dtype.is_floating_point:
        cases += [lambda t: torch.nanmean(t, 1)]
    for fn in cases:
        assert_close_to_cpu(on_hpu(fn, x, counts=fallback_counts), fn(x), equal_nan=True)
    for kw in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}):
        mn, mx = on_hpu(lambda t: torch.aminmax(t, **kw), x, counts=fallback_counts)
        cmn, cmx = torch.aminmax(x, **kw)
        assert_close_to_cpu(mn, cmn, **EXACT)
        assert_close_to_cpu(mx, cmx, **EXACT)


def test_reduce_bad_input_and_equal(fallback_counts):
    with pytest.raises(RuntimeError, match="cannot compute aminmax over an empty"):
        torch.aminmax(torch.empty(0, device="hpu"))
    with pytest.raises(IndexError):
        torch.aminmax(torch.empty(2, 0, device="hpu"), dim=1)
    a = torch.tensor([1.0, float("nan"), 3.0])
    pairs = [(a, a.clone()), (a[[0, 2]], torch.tensor([1.0, 3.0])), (a, a[:2]), (torch.empty(0), torch.empty(0)),
             (torch.arange(6).view(2, 3), torch.arange(6).view(3, 2).t().contiguous().t()),
             (torch.arange(6).view(2, 3), torch.arange(6).view(2, 3))]
    for p, q in pairs:
        before = dict(fallback_counts())
        assert torch.equal(p.to("hpu"), q.to("hpu")) == torch.equal(p, q)
        assert fallback_counts() == before
    # mixed dtypes: the CPU compares the values (through the counted fallback)
    for b in (a.double(), (a + 0.1).double()):
        assert torch.equal(a.to("hpu"), b.to("hpu")) == torch.equal(a, b)


# ---- kthvalue, median, nanmedian, mode ----------------------------------------------

def check_picks(x, dim, keepdim, got, want):
    """Values bit for bit; indices (ties are unspecified) select those values."""
    v, i = got
    cv, ci = want
    assert_close_to_cpu(v, cv, **EXACT)
    assert i.dtype == torch.int64 and i.shape == ci.shape
    if x.dim() == 0:
        assert i.item() == 0
        return
    ii = i.cpu() if keepdim else i.cpu().unsqueeze(dim)
    picked = x.gather(dim, ii)
    torch.testing.assert_close(picked if keepdim else picked.squeeze(dim), cv, rtol=0, atol=0, equal_nan=True)


SELECTS = {
    "kthvalue": lambda t, d, k: torch.kthvalue(t, 2 if t.dim() and t.shape[d] >= 2 else 1, d, keepdim=k),
    "median": lambda t, d, k: torch.median(t, d, keepdim=k),
    "nanmedian": lambda t, d, k: torch.nanmedian(t, d, keepdim=k),
    "mode": lambda t, d, k: torch.mode(t, d, keepdim=k),
}


@pytest.mark.parametrize("dtype", ALL + [torch.bool])
@pytest.mark.parametrize("op", sorted(SELECTS))
def test_select(op, dtype, fallback_counts):
    x = make((6, 7), dtype, 5)
    if dtype == torch.bool and op != "mode":  # the CPU orders no bools but for mode
        with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
            SELECTS[op](x.to("hpu"), 1, False)
        return  # a small range: many ties
    if dtype.is_floating_point:
        x[1, 2], x[1, 5], x[3, 0] = float("nan"), float("nan"), -float("inf")
        x[4] = float("nan")
    fn = SELECTS[op]
    for t, d, k in ((x, 1, False), (x, 0, True), (x.t(), -1, False), (torch.tensor(3, dtype=dtype), 0, False),
                    (x[:, :0].t(), 1, False)):
        check_picks(t, d, k, on_hpu(lambda a: fn(a, d, k), t, counts=fallback_counts), fn(t, d, k))
    if op in ("median", "nanmedian"):
        full = getattr(torch, op)
        for t in (x, torch.empty(0, dtype=dtype)):
            assert_close_to_cpu(on_hpu(full, t, counts=fallback_counts), full(t), **EXACT)


def test_select_large_and_grad(fallback_counts):
    x = make((300, 257), torch.float32, 6)  # many rows: several threads
    for op, fn in SELECTS.items():
        check_picks(x, 1, False, on_hpu(lambda a: fn(a, 1, False), x, counts=fallback_counts), fn(x, 1, False))
    g = make((4, 5), torch.float64, 7).requires_grad_()
    gh = g.detach().to("hpu").requires_grad_()
    for op in ("kthvalue", "median", "nanmedian", "mode"):
        fn = SELECTS[op]
        (c,) = torch.autograd.grad(fn(g, 1, False)[0].sum(), g)
        (h,) = torch.autograd.grad(fn(gh, 1, False)[0].sum(), gh)
        torch.testing.assert_close(h.cpu(), c)


def test_select_bad_input():
    x = torch.ones(3, 0, device="hpu")
    for op in ("median", "nanmedian", "mode"):
        with pytest.raises(IndexError, match="to have non-zero size"):
            getattr(torch, op)(x, 1)
    with pytest.raises(RuntimeError, match="k out of range"):
        torch.kthvalue(torch.ones(3, device="hpu"), 4)
    assert torch.median(torch.arange(5.0, device="hpu")).item() == 2.0
