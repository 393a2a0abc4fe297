"""searchsorted / bucketize, the histograms (histc, histogram, histogramdd),
unique / unique_consecutive, bincount and nonzero_static on hpu, against the
CPU result of the same PyTorch op, on cases OpInfo's samples do not reach
(NaN, sorters, unsorted boundaries, reduced precision, weights, data-chosen
ranges, bad input), with no CPU fallback."""
import pytest
import torch

from conftest import assert_close_to_cpu

EXACT = dict(rtol=0, atol=0, equal_nan=True)
NAN = float("nan")


def on_hpu(fn, *args, counts):
    """fn on hpu copies of args (tensors, or lists of them), asserting no op fell back."""
    def move(a):
        if isinstance(a, torch.Tensor):
            return a.to("hpu")
        if isinstance(a, list):
            return [move(x) for x in a]
        return a
    before = dict(counts())
    out = fn(*[move(a) for a in args])
    torch.hpu.synchronize()
    assert counts() == before, counts()
    return out


def same(hpu_out, cpu_out):
    if isinstance(cpu_out, torch.Tensor):
        assert_close_to_cpu(hpu_out, cpu_out, **EXACT)
        return
    assert len(hpu_out) == len(cpu_out)
    for h, c in zip(hpu_out, cpu_out):
        same(h, c)


def close(hpu_out, cpu_out):
    """Equal but for the last bits of float64 / float32."""
    if isinstance(cpu_out, torch.Tensor):
        assert_close_to_cpu(hpu_out, cpu_out, rtol=4 * torch.finfo(cpu_out.dtype).eps, atol=0)
        return
    assert len(hpu_out) == len(cpu_out)
    for h, c in zip(hpu_out, cpu_out):
        close(h, c)


# ---- searchsorted / bucketize ------------------------------------------------------

SEARCH_DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, torch.int32,
                 torch.int16, torch.int8, torch.uint8]


@pytest.mark.parametrize("dtype", SEARCH_DTYPES)
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_1d_and_nd(dtype, right, fallback_counts):
    g = torch.Generator().manual_seed(0)
    bd = torch.randint(0, 20, (3, 9), generator=g).sort(-1).values.to(dtype)  # repeats inside rows
    values = torch.randint(-2, 23, (3, 7), generator=g).to(dtype)
    fn = lambda b, v: torch.searchsorted(b, v, right=right)
    same(on_hpu(fn, bd, values, counts=fallback_counts), fn(bd, values))       # a row per values row
    same(on_hpu(fn, bd[1], values, counts=fallback_counts), fn(bd[1], values))  # one shared row
    fn32 = lambda b, v: torch.bucketize(v, b, right=right, out_int32=True)
    same(on_hpu(fn32, bd[2], values, counts=fallback_counts), fn32(bd[2], values))


def test_searchsorted_nan_sorter_side_and_unsorted(fallback_counts):
    bd = torch.tensor([[5.0, 1.0, NAN, 3.0, 3.0, 2.0], [0.5, -1.0, 4.0, 2.0, NAN, 0.0]])
    sorter = bd.argsort(-1)  # NaN last, as searchsorted expects
    values = torch.tensor([[3.0, NAN, -5.0, 6.0], [0.0, 2.0, NAN, 0.25]])
    for side in ("left", "right"):
        fn = lambda b, v, s: torch.searchsorted(b, v, side=side, sorter=s)
        same(on_hpu(fn, bd, values, sorter, counts=fallback_counts), fn(bd, values, sorter))
        # unsorted boundaries without a sorter: the answer is the CPU's binary search's
        fn = lambda b, v: torch.searchsorted(b, v, side=side)
        same(on_hpu(fn, bd, values, counts=fallback_counts), fn(bd, values))


def test_searchsorted_promotes_scalars_and_outs(fallback_counts):
    bd = torch.tensor([0.5, 1.5, 2.5, 3.5])
    ints = torch.tensor([[0, 1], [2, 4]])
    fn = lambda b, v: torch.searchsorted(b, v)  # int64 values among float32 boundaries
    same(on_hpu(fn, bd, ints, counts=fallback_counts), fn(bd, ints))
    fn = lambda b: (torch.searchsorted(b, 2), torch.bucketize(1.5, b, right=True), torch.searchsorted(b, 7.0))
    same(on_hpu(fn, bd, counts=fallback_counts), fn(bd))
    values = torch.tensor([[3.0, 0.0, 1.5], [2.0, 9.0, -1.0]]).t()  # non-contiguous values

    def with_out(b, v):
        out = torch.full((5, 4), -7, dtype=torch.int64, device=b.device).t()[:3, :2]  # non-contiguous out
        r = torch.searchsorted(b, v, out=out)
        assert r.data_ptr() == out.data_ptr()
        return out
    same(on_hpu(with_out, bd, values, counts=fallback_counts), with_out(bd, values))


def test_searchsorted_bad_input():
    bd = torch.tensor([[1.0, 2.0], [3.0, 4.0]], device="hpu")
    with pytest.raises(RuntimeError, match="first N-1 dimensions"):
        torch.searchsorted(bd, torch.zeros(3, 1, device="hpu"))
    with pytest.raises(RuntimeError, match="side can only be 'left' or 'right'"):
        torch.searchsorted(bd, torch.zeros(2, 1, device="hpu"), side="middle")
    with pytest.raises(RuntimeError, match="sorter index out of range"):
        torch.searchsorted(bd, torch.zeros(2, 1, device="hpu"), sorter=torch.full((2, 2), 5, device="hpu"))
    with pytest.raises(RuntimeError, match="boundaries tensor must be 1 dimension"):
        torch.bucketize(torch.zeros(2, device="hpu"), bd)
    with pytest.raises(NotImplementedError, match="Bool"):
        torch.searchsorted(torch.tensor([False, True], device="hpu"), torch.tensor([True], device="hpu"))
    # the process goes on
    assert torch.searchsorted(bd, torch.tensor([[2.5], [3.0]], device="hpu")).cpu().tolist() == [[2], [0]]


# ---- histograms -------------------------------------------------------------------------


def one_thread(fn):
    """fn run by the CPU on one thread. The CPU adds one partial histogram
    per thread, so where the order of addition shows (weights; bf16 / fp16
    counts, which stop growing at 256 / 2048 per bin) its result depends on
    its thread count; hpu adds serially and equals the one-thread result."""
    def run(*args):
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return fn(*args)
        finally:
            torch.set_num_threads(threads)
    return run


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_histc(dtype, fallback_counts):
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(3000, generator=g) * 3).to(dtype)
    x[:5] = torch.tensor([NAN, 10.0, -10.0, 2.0, -2.0])  # NaN, both outside, both edges
    for bins, lo, hi in [(10, -2, 2), (1, -1, 5), (33, -3.3, 1.7)]:
        fn = lambda t: torch.histc(t, bins=bins, min=lo, max=hi)
        same(on_hpu(fn, x, counts=fallback_counts), one_thread(fn)(x))
    fn = lambda t: torch.histc(t, bins=7)  # min == max: the data's range (NaN left out of the data)
    same(on_hpu(fn, x[1:], counts=fallback_counts), one_thread(fn)(x[1:]))
    const = torch.full((4,), 2.5, dtype=dtype)  # min == max == every value: the range widened by 1
    fn = lambda t: torch.histc(t, bins=4)
    same(on_hpu(fn, const, counts=fallback_counts), fn(const))
    empty = torch.empty(0, dtype=dtype)
    same(on_hpu(fn, empty, counts=fallback_counts), fn(empty))


def test_histogram_weights_density_and_edges(fallback_counts):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 500, generator=g, dtype=torch.float64)
    w = torch.rand(2, 500, generator=g, dtype=torch.float64)
    edges = torch.tensor([-3.0, -1.0, -0.5, 0.0, 0.1, 2.0, 3.0], dtype=torch.float64)  # uneven bins
    for density in (False, True):
        # density divides by the total weight, a sum of the bins whose order
        # (ours, the CPU's vectorised one) can move the last bit
        check = close if density else same
        fn = lambda t, e, wt: torch.histogram(t, e, weight=wt, density=density)
        check(on_hpu(fn, x, edges, w, counts=fallback_counts), one_thread(fn)(x, edges, w))
        fn = lambda t, wt: torch.histogram(t, bins=13, range=(-1.0, 2.0), weight=wt, density=density)
        check(on_hpu(fn, x, w, counts=fallback_counts), one_thread(fn)(x, w))
        fn = lambda t: torch.histogram(t, bins=6, density=density)  # range from the data
        same(on_hpu(fn, x.float(), counts=fallback_counts), fn(x.float()))


def test_histogramdd(fallback_counts):
    g = torch.Generator().manual_seed(3)
    pts = torch.randn(4, 100, 3, generator=g)
    w = torch.rand(4, 100, generator=g)
    fn = lambda p, wt: torch.histogramdd(p, bins=[4, 1, 6], weight=wt, density=True)
    close(on_hpu(fn, pts, w, counts=fallback_counts), one_thread(fn)(pts, w))
    fn = lambda p: torch.histogramdd(p, bins=3, range=[-1.0, 1.0, 0.0, 2.0, -2.0, 0.0])
    same(on_hpu(fn, pts, counts=fallback_counts), fn(pts))
    edges = [torch.tensor([-2.0, 0.0, 0.5, 2.0]), torch.tensor([-1.0, 1.0]), torch.tensor([0.0, 0.3, 0.6, 0.9])]
    fn = lambda p, e: torch.histogramdd(p, bins=e)
    same(on_hpu(fn, pts, edges, counts=fallback_counts), fn(pts, edges))


def test_histogram_bad_input():
    x = torch.randn(10, device="hpu")
    with pytest.raises(NotImplementedError, match="Long"):
        torch.histc(torch.arange(4, device="hpu"))
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(x, bins=3, min=2, max=1)
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        torch.histc(x, bins=0)
    with pytest.raises(RuntimeError, match=r"range of \[nan, nan\] is not finite"):  # NaN in the data's range
        torch.histc(torch.tensor([1.0, NAN], device="hpu"))
    with pytest.raises(RuntimeError, match="is not finite"):
        torch.histogram(torch.tensor([1.0, float("inf")], device="hpu"), bins=2)
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.histogram(x, torch.tensor([0, 1, 2], device="hpu"))
    with pytest.raises(RuntimeError, match="same shape as the input"):
        torch.histogram(x, bins=2, weight=torch.ones(3, device="hpu"))
    with pytest.raises(RuntimeError, match="same device"):
        torch.histogram(x, torch.tensor([0.0, 1.0]))
    assert torch.histc(x, bins=2, min=-100, max=100).sum().item() == 10


# ---- unique / unique_consecutive -----------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64, torch.int32,
                                   torch.int8, torch.uint8, torch.bool])
def test_unique(dtype, fallback_counts):
    g = torch.Generator().manual_seed(4)
    x = torch.randint(0, 6, (5, 7), generator=g).to(dtype)
    if dtype.is_floating_point:
        x[0, 0], x[3, 1], x[4, 6] = NAN, NAN, -0.0
    for sorted_ in (True, False):
        fn = lambda t: torch.unique(t, sorted=sorted_, return_inverse=True, return_counts=True)
        (values, inverse, count), cpu = on_hpu(fn, x, counts=fallback_counts), fn(x)
        same((values, count), (cpu[0], cpu[2]))
        # every NaN is its own value; which NaN slot each NaN element names
        # is the CPU sort's (unstable) order: equal elsewhere, and the
        # inverse rebuilds the input
        nan = x.isnan() if dtype.is_floating_point else torch.zeros_like(x, dtype=torch.bool)
        assert torch.equal(inverse.cpu()[~nan], cpu[1][~nan])
        torch.testing.assert_close(values[inverse].cpu(), x, rtol=0, atol=0, equal_nan=True)
    fn = lambda t: torch.unique(t)
    same(on_hpu(fn, x.t(), counts=fallback_counts), fn(x.t()))  # strided input
    fn = lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True)
    run = x.reshape(-1).repeat_interleave(torch.randint(1, 4, (35,), generator=g)).reshape(-1)
    same(on_hpu(fn, run, counts=fallback_counts), fn(run))
    same(on_hpu(fn, x, counts=fallback_counts), fn(x))


def test_unique_edge_shapes(fallback_counts):
    for t in (torch.tensor(3.0), torch.empty(0), torch.empty(2, 0)):
        fn = lambda a: torch.unique(a, return_inverse=True, return_counts=True)
        same(on_hpu(fn, t, counts=fallback_counts), fn(t))
        fn = lambda a: torch.unique_consecutive(a, return_inverse=True, return_counts=True)
        same(on_hpu(fn, t, counts=fallback_counts), fn(t))


def test_unique_consecutive_dim(fallback_counts):
    x = torch.tensor([[1.0, 2.0], [1.0, 2.0], [NAN, 2.0], [NAN, 2.0], [3.0, 4.0], [1.0, 2.0]])
    for dim in (0, 1, -1):
        fn = lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True, dim=dim)
        same(on_hpu(fn, x, counts=fallback_counts), fn(x))
    cube = torch.tensor([0, 0, 1, 1, 1, 2]).repeat(2, 3, 1).movedim(-1, 1).contiguous()
    fn = lambda t: torch.unique_consecutive(t, return_counts=True, dim=1)
    same(on_hpu(fn, cube, counts=fallback_counts), fn(cube))
    fn = lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True, dim=0)
    same(on_hpu(fn, torch.empty(0, 3), counts=fallback_counts), fn(torch.empty(0, 3)))
    with pytest.raises(RuntimeError, match="0 sized dimensions"):
        torch.unique_consecutive(torch.empty(2, 0, device="hpu"), dim=0)


# ---- bincount -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
def test_bincount(dtype, fallback_counts):
    g = torch.Generator().manual_seed(5)
    x = torch.randint(0, 9, (200,), generator=g).to(dtype)
    fn = lambda t: torch.bincount(t)
    same(on_hpu(fn, x, counts=fallback_counts), fn(x))
    fn = lambda t: torch.bincount(t, minlength=20)
    same(on_hpu(fn, x, counts=fallback_counts), fn(x))
    # float32 weights sum in float, any other weights in double, in input order
    for w in (torch.randn(200, generator=g), torch.randn(200, generator=g).half(), torch.arange(200)):
        fn = lambda t, wt: torch.bincount(t, weights=wt)
        same(on_hpu(fn, x, w, counts=fallback_counts), one_thread(fn)(x, w))
    empty = torch.empty(0, dtype=dtype)
    fn = lambda t: torch.bincount(t, minlength=3)
    same(on_hpu(fn, empty, counts=fallback_counts), fn(empty))


def test_bincount_bad_input():
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.bincount(torch.tensor([1, -1], device="hpu"))
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.bincount(torch.tensor([[1]], device="hpu"))
    with pytest.raises(RuntimeError, match="same length"):
        torch.bincount(torch.tensor([1, 2], device="hpu"), weights=torch.ones(3, device="hpu"))
    with pytest.raises(NotImplementedError, match="Float"):
        torch.bincount(torch.tensor([1.0], device="hpu"))
    assert torch.bincount(torch.tensor([2, 2], device="hpu")).cpu().tolist() == [0, 0, 2]


# ---- nonzero_static ---------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 5, 12, 40])
def test_nonzero_static(size, fallback_counts):
    g = torch.Generator().manual_seed(6)
    x = torch.randint(0, 3, (3, 4, 2), generator=g) * (torch.rand(3, 4, 2, generator=g) > 0.4)
    for t in (x, x.float().transpose(0, 2), x.bool(), torch.tensor(2.0), torch.tensor(0), torch.zeros(0, 3)):
        for fill in (-1, 7):
            fn = lambda a: torch.nonzero_static(a, size=size, fill_value=fill)
            same(on_hpu(fn, t, counts=fallback_counts), fn(t))


def test_nonzero_static_bad_input():
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.nonzero_static(torch.ones(3, device="hpu"), size=-1)
    assert torch.nonzero_static(torch.ones(2, device="hpu"), size=1).cpu().tolist() == [[0]]
