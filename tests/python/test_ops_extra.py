"""Ops composed of other hpu ops (backend/hpu_ops_extra.cpp): isin,
isneginf / isposinf, nonzero, masked_select, masked_scatter, index_copy.
Same results as on the CPU, in eager and lazy mode, with no CPU fallback."""
import pytest
import torch

import habana_torch.core as htcore
from conftest import assert_close_to_cpu


@pytest.fixture(params=["eager", "lazy"])
def mode(request, fallback_counts):
    was = htcore.is_lazy()
    htcore._set_lazy_mode(request.param == "lazy")
    yield
    htcore.mark_step()
    htcore._set_lazy_mode(was)
    assert fallback_counts() == {}


@pytest.mark.parametrize("n,m,dtype", [
    (50, 3, torch.long),      # few test elements: compare all pairs
    (1000, 200, torch.long),  # many: the sorting algorithm
    (1000, 300, torch.float),
    (37, 1000, torch.int32),
    (0, 5, torch.long),
    (10, 0, torch.long),
])
def test_isin(n, m, dtype, mode):
    g = torch.Generator().manual_seed(n + m)
    e = torch.randint(0, 60, (n,), generator=g).to(dtype)
    t = torch.randint(0, 60, (m,), generator=g).to(dtype)
    if dtype.is_floating_point:
        e[::7], t[::5] = float("nan"), float("nan")  # NaN is never in the set
        e[1], t[0] = -0.0, 0.0
    if n % 2 == 0:
        e = e.reshape(-1, 2)
    for invert in (False, True):
        for assume_unique in (False, True):
            r = torch.isin(e.to("hpu"), t.to("hpu"), invert=invert, assume_unique=assume_unique)
            assert r.device.type == "hpu"
            assert torch.equal(r.cpu(), torch.isin(e, t, invert=invert)), (invert, assume_unique)


def test_isin_scalars_and_promotion(mode):
    x = torch.tensor([[1, 2], [3, 4]])
    h = x.to("hpu")
    assert torch.equal(torch.isin(h, 3).cpu(), torch.isin(x, 3))
    assert torch.equal(torch.isin(h, 3, invert=True).cpu(), torch.isin(x, 3, invert=True))
    assert torch.equal(torch.isin(3, h).cpu(), torch.isin(3, x))
    assert torch.equal(torch.isin(h, torch.tensor(3)).cpu(), torch.isin(x, torch.tensor(3)))  # CPU scalar
    f = torch.tensor([2.0, 4.5])
    assert torch.equal(torch.isin(h, f.to("hpu")).cpu(), torch.isin(x, f))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.long])
def test_isneginf_isposinf(dtype, mode):
    x = torch.tensor([1.0, -float("inf"), float("inf"), float("nan"), 0.0, -3.0]).to(dtype)
    h = x.to("hpu")
    assert torch.equal(torch.isneginf(h).cpu(), torch.isneginf(x))
    assert torch.equal(torch.isposinf(h).cpu(), torch.isposinf(x))
    out = torch.empty(0, dtype=torch.bool, device="hpu")
    torch.isneginf(h, out=out)
    assert torch.equal(out.cpu(), torch.isneginf(x))


@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 5), (), (0, 3), (4, 0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bool, torch.long, torch.bfloat16])
def test_nonzero(shape, dtype, mode):
    g = torch.Generator().manual_seed(len(shape))
    x = torch.randn(shape, generator=g).relu().to(dtype)
    if dtype == torch.float32 and x.numel():
        x.view(-1)[0] = float("nan")  # NaN is nonzero
    h = x.to("hpu")
    r = h.nonzero()
    assert r.device.type == "hpu"
    assert torch.equal(r.cpu(), x.nonzero())
    out = torch.empty(0, dtype=torch.long, device="hpu")
    torch.nonzero(h, out=out)
    assert torch.equal(out.cpu(), x.nonzero())


def test_masked_select_and_bool_indexing(mode):
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(3))
    h = x.to("hpu")
    for mask in (x > 0, torch.tensor([True, False, True, True]), torch.zeros(4, dtype=torch.bool)):
        assert torch.equal(torch.masked_select(h, mask.to("hpu")).cpu(), torch.masked_select(x, mask))
    assert torch.equal(h[h > 0].cpu(), x[x > 0])
    h[h > 0] = 0
    assert torch.equal(h.cpu(), x.clamp(max=0))


@pytest.mark.parametrize("shape,dim,n", [
    ((2, 4, 16, 8), 2, 1),    # a static KV cache: one new position
    ((2, 4, 16, 8), -2, 3),
    ((5, 7), 0, 5),           # every row, permuted
    ((5, 7), 1, 2),
    ((9,), 0, 4),
    ((), 0, 1),               # a scalar
    ((3, 4), 1, 0),           # no index
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.long])
def test_index_copy(shape, dim, n, dtype, mode):
    g = torch.Generator().manual_seed(len(shape) * 10 + n)
    self_ = (torch.randn(shape, generator=g) * 10).to(dtype)
    size = self_.size(dim) if self_.dim() else 1
    index = torch.randperm(size, generator=g)[:n]
    src_shape = list(shape)
    if src_shape:
        src_shape[dim] = n
    source = (torch.randn(src_shape, generator=g) * 10).to(dtype)
    want = self_.index_copy(dim, index, source)
    got = self_.to("hpu").index_copy(dim, index.to("hpu"), source.to("hpu"))
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)
    inplace = self_.to("hpu")
    inplace.index_copy_(dim, index.to("hpu"), source.to("hpu"))
    torch.testing.assert_close(inplace.cpu(), want, rtol=0, atol=0)
    out = torch.empty(0, dtype=dtype, device="hpu")
    torch.index_copy(self_.to("hpu"), dim, index.to("hpu"), source.to("hpu"), out=out)
    torch.testing.assert_close(out.cpu(), want, rtol=0, atol=0)


def test_index_copy_bad_input(mode):
    """The errors of the CPU op, and a card that stays usable."""
    new = torch.ones(2, 1, 4)
    cases = [
        (torch.tensor([1], dtype=torch.int32), new, "long tensor for index"),
        (torch.tensor([1, 2]), new, "Number of indices"),
        (torch.tensor([1]), new.double(), "same dtype"),
        (torch.tensor([1]), torch.ones(2, 1, 5), "slice shapes"),
    ]
    for index, source, message in cases:
        with pytest.raises(Exception, match=message) as on_cpu:
            torch.zeros(2, 8, 4).index_copy_(1, index, source)
        with pytest.raises(on_cpu.type, match=message):
            torch.zeros(2, 8, 4, device="hpu").index_copy_(1, index.to("hpu"), source.to("hpu"))
    # A bad index value is data: the card reports it at the next wait.
    cache = torch.zeros(2, 8, 4, device="hpu")
    with pytest.raises(IndexError, match="index 8 is out of bounds for dimension 1 with size 8"):
        cache.index_copy_(1, torch.tensor([8], device="hpu"), new.to("hpu"))
        torch.hpu.synchronize()
    cache.index_copy_(1, torch.tensor([7], device="hpu"), new.to("hpu"))
    want = torch.zeros(2, 8, 4)
    want[:, 7] = 1
    torch.testing.assert_close(cache.cpu(), want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_masked_scatter(dtype, mode, fallback_counts):
    g = torch.Generator().manual_seed(3)
    x = torch.randint(-5, 5, (7, 300), generator=g).to(dtype)
    mask = torch.rand(7, 300, generator=g) > 0.4
    src = torch.randint(-50, 50, (2200,), generator=g).to(dtype)
    h = x.to("hpu")
    cases = [(mask, src), (mask[0], src), (mask[:, :1], src),
             (torch.zeros(7, 300, dtype=torch.bool), src[:0]), (mask, src.view(100, 22))]
    for m, s in cases:
        assert_close_to_cpu(h.clone().masked_scatter_(m.to("hpu"), s.to("hpu")), x.clone().masked_scatter_(m, s),
                            rtol=0, atol=0)
    # a transposed self; the functional form broadcasting self to the mask
    assert_close_to_cpu(h.t().clone().t().masked_scatter_(mask.to("hpu"), src.to("hpu")),
                        x.clone().masked_scatter_(mask, src), rtol=0, atol=0)
    # several of the kernel's 64K-element blocks, each starting mid-source
    large = torch.arange(3 * 70001).to(dtype).view(3, 70001)
    lmask = torch.rand(3, 70001, generator=g) > 0.3
    lsrc = (torch.arange(3 * 70001) * 7 % 1000).to(dtype)
    assert_close_to_cpu(large.to("hpu").masked_scatter_(lmask.to("hpu"), lsrc.to("hpu")),
                        large.clone().masked_scatter_(lmask, lsrc), rtol=0, atol=0)
    big = torch.ones(2, 7, 300, dtype=torch.bool)
    assert_close_to_cpu(h.masked_scatter(big.to("hpu"), torch.cat([src, src]).to("hpu")),
                        x.masked_scatter(big, torch.cat([src, src])), rtol=0, atol=0)
    assert fallback_counts() == {}


def test_masked_scatter_gradient_and_bad_input(mode, fallback_counts):
    x = torch.randn(4, 70)
    mask = torch.rand(4, 70, generator=torch.Generator().manual_seed(1)) > 0.5
    src = torch.randn(300)
    xc, sc = x.clone().requires_grad_(), src.clone().requires_grad_()
    xh, sh = x.to("hpu").requires_grad_(), src.to("hpu").requires_grad_()
    g = torch.randn(4, 70)
    xc.masked_scatter(mask, sc).backward(g)
    xh.masked_scatter(mask.to("hpu"), sh).backward(g.to("hpu"))
    assert_close_to_cpu(xh.grad, xc.grad, rtol=0, atol=0)
    assert_close_to_cpu(sh.grad, sc.grad, rtol=0, atol=0)
    assert fallback_counts() == {}
    h = x.to("hpu")
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones in mask"):
        h.clone().masked_scatter_(mask.to("hpu"), src[:5].to("hpu")).cpu()
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        h.clone().masked_scatter_(mask.int().to("hpu"), src.to("hpu"))
    with pytest.raises(RuntimeError, match="expected self and source to have same dtypes"):
        h.clone().masked_scatter_(mask.to("hpu"), src.double().to("hpu"))
    # the card stays usable
    assert_close_to_cpu(h.clone().masked_scatter_(mask.to("hpu"), src.to("hpu")),
                        x.clone().masked_scatter_(mask, src), rtol=0, atol=0)
