"""Max and average pooling on the card (csrc/kernels/pool.c) against PyTorch's CPU
kernel: values, indices and gradients for kernel / stride / padding /
dilation / ceil_mode combinations, 3-d and 4-d inputs, float32, bf16 and
float64 (with bits below float32's), the integer forwards exactly,
NaN and ties, no CPU fallback; bad arguments raise PyTorch's errors."""
import pytest
import torch
import torch.nn.functional as F

CASES = [
    # (shape, kernel, stride, padding, dilation, ceil_mode)
    ((2, 3, 8, 8), 2, None, 0, 1, False),
    ((2, 4, 9, 9), 3, 2, 1, 1, False),      # ResNet's stem pool
    ((1, 2, 7, 10), (3, 2), (2, 1), (1, 0), (1, 2), False),
    ((2, 2, 7, 7), 3, 2, 0, 1, True),       # ceil_mode adds a partial window
    ((3, 6, 6), 2, 2, 1, 2, True),          # batchless, dilated
]


def _input(shape, dtype):
    x = torch.randn(shape).to(dtype)
    if dtype == torch.float64:  # values float32 would round together
        x += 1e-9 * torch.randn(shape, dtype=dtype)
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("case", CASES)
def test_max_pool2d_matches_cpu(case, dtype, fallback_counts):
    shape, k, s, p, d, ceil = case
    torch.manual_seed(0)
    x = _input(shape, dtype)
    x.view(-1)[::7] = x.view(-1)[1]  # ties: the first max wins
    res = []
    for dev in ("cpu", "hpu"):
        xd = x.detach().to(dev).requires_grad_()
        y, ix = F.max_pool2d(xd, k, s, p, d, ceil_mode=ceil, return_indices=True)
        torch.manual_seed(1)
        y.backward(_input(y.shape, dtype).to(dev))
        res.append((y.detach().cpu(), ix.cpu(), xd.grad.cpu()))
    (yc, ic, gc), (yh, ih, gh) = res
    assert yh.dtype == dtype and torch.equal(yh, yc) and torch.equal(ih, ic)
    if dtype in (torch.float32, torch.float64):
        torch.testing.assert_close(gh, gc, rtol=0, atol=0)  # sums of a few grads, same order
    else:
        # overlapping windows: we add in float and round once, the CPU
        # rounds each bf16 partial sum: a step apart
        torch.testing.assert_close(gh.float(), gc.float(), rtol=2 ** -7, atol=0)
    assert fallback_counts() == {}


def test_max_pool2d_nan_layout_and_module(fallback_counts):
    x = torch.randn(2, 3, 6, 6)
    x[0, 1, 2, 3] = float("nan")
    pool = torch.nn.MaxPool2d(3, 2, 1)
    for xin in (x, x.to(memory_format=torch.channels_last)):
        torch.testing.assert_close(pool(xin.to("hpu")).cpu(), pool(xin), equal_nan=True)
    assert fallback_counts() == {}


@pytest.mark.parametrize("kw, match", [
    (dict(kernel_size=0), "kernel size should be greater than zero"),
    (dict(kernel_size=2, stride=0), "stride should be greater than zero"),
    (dict(kernel_size=2, padding=2), "pad should be at most half"),
    (dict(kernel_size=9), "Output size is too small"),
])
def test_max_pool2d_bad_input(kw, match):
    x = torch.randn(1, 2, 5, 5, device="hpu")
    with pytest.raises(RuntimeError, match=match):
        F.max_pool2d(x, **kw)


AVG_CASES = [
    # (shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    ((2, 3, 8, 8), 2, None, 0, False, True, None),
    ((2, 4, 9, 9), 3, 2, 1, False, True, None),
    ((2, 4, 9, 9), 3, 2, 1, False, False, None),   # padding not counted
    ((1, 2, 7, 10), (3, 2), (2, 1), (1, 0), True, False, None),
    ((3, 7, 7), 3, 2, 1, True, True, 5),           # batchless, divisor_override
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("case", AVG_CASES)
def test_avg_pool2d_matches_cpu(case, dtype, fallback_counts):
    shape, k, s, p, ceil, incl, div = case
    torch.manual_seed(0)
    x = _input(shape, dtype)
    res = []
    for dev in ("cpu", "hpu"):
        xd = x.detach().to(dev).requires_grad_()
        y = F.avg_pool2d(xd, k, s, p, ceil_mode=ceil, count_include_pad=incl, divisor_override=div)
        torch.manual_seed(1)
        y.backward(_input(y.shape, dtype).to(dev))
        res.append((y.detach().cpu(), xd.grad.cpu()))
    for h, c in zip(res[1], res[0]):
        assert h.dtype == dtype
        if dtype in (torch.float32, torch.float64):  # the CPU's windows, divisors and sum order
            torch.testing.assert_close(h, c, rtol=0, atol=0)
        else:  # float sums rounded once; the CPU rounds some bf16 partial sums
            torch.testing.assert_close(h.float(), c.float(), rtol=2 ** -7, atol=2 ** -8 * c.abs().max().item())
    assert fallback_counts() == {}


def test_avg_pool2d_bad_input():
    x = torch.randn(1, 2, 5, 5, device="hpu")
    with pytest.raises(RuntimeError, match="divisor must be not zero"):
        F.avg_pool2d(x, 2, divisor_override=0)
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        F.avg_pool2d(x, 2, padding=2)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
@pytest.mark.parametrize("case", CASES)
def test_max_pool2d_integers_match_cpu(case, dtype, fallback_counts):
    """The integer types the CPU pools run on the card: values and indices
    exact (ties: the first max), no fallback."""
    shape, k, s, p, d, ceil = case
    torch.manual_seed(0)
    x = torch.randint(0 if dtype == torch.uint8 else -100, 100, shape, dtype=dtype)
    yh, ih = F.max_pool2d(x.to("hpu"), k, s, p, d, ceil_mode=ceil, return_indices=True)
    yc, ic = F.max_pool2d(x, k, s, p, d, ceil_mode=ceil, return_indices=True)
    assert yh.dtype == dtype and torch.equal(yh.cpu(), yc) and torch.equal(ih.cpu(), ic)
    assert fallback_counts() == {}


@pytest.mark.parametrize("case", AVG_CASES)
def test_avg_pool2d_int64_matches_cpu(case, fallback_counts):
    """int64 averages are the CPU's: an int64 sum, a division truncating
    toward zero (negative sums too)."""
    shape, k, s, p, ceil, incl, div = case
    torch.manual_seed(0)
    x = torch.randint(-1000, 1000, shape)
    kw = dict(ceil_mode=ceil, count_include_pad=incl, divisor_override=div)
    y = F.avg_pool2d(x.to("hpu"), k, s, p, **kw)
    assert y.dtype == torch.int64 and torch.equal(y.cpu(), F.avg_pool2d(x, k, s, p, **kw))
    assert fallback_counts() == {}
