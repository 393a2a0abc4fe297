"""The vision ops on the card (csrc/kernels/vision_*.c) against PyTorch's CPU
kernels: upsampling (nearest, nearest-exact, linear, bilinear, trilinear,
align_corners both ways, scale factors), adaptive average pooling and
reflection / replication padding, forward and backward, on the cases OpInfo
does not stress (non-contiguous and channels_last inputs, batchless and
empty batches, many planes, inf / nan / -0.0, negative padding), each with
no CPU fallback, in float32, bf16 / fp16 and float64; bad arguments raise
the CPU's error class."""
import pytest
import torch
import torch.nn.functional as F


def _run(fn, x, dev, grad=True, seed=1):
    xd = x.detach().to(dev)
    if grad and xd.is_floating_point():
        xd.requires_grad_()
    y = fn(xd)
    g = None
    if grad and xd.is_floating_point() and y.numel():
        torch.manual_seed(seed)
        y.backward(torch.randn(y.shape).to(y.dtype).to(dev))
        g = xd.grad.cpu()
    return y.detach().cpu(), g, y


def _check(fn, x, fallback_counts, exact=True, grad=True):
    yc, gc, rc = _run(fn, x, "cpu", grad)
    yh, gh, rh = _run(fn, x, "hpu", grad)
    assert fallback_counts() == {}, fallback_counts()
    assert yh.dtype == yc.dtype and yh.shape == yc.shape
    assert rh.stride() == rc.stride(), (rh.stride(), rc.stride())
    if exact:
        torch.testing.assert_close(yh, yc, rtol=0, atol=0, equal_nan=True)
    else:
        _close(yh, yc)
    if gc is not None:
        _close(gh, gc)


def _close(h, c):
    if c.dtype in (torch.bfloat16, torch.float16):
        # we add in float and round once; the CPU rounds its reduced-precision
        # partial sums and quotients: a step or two of the largest magnitude
        scale = c.float().abs().max().item()
        torch.testing.assert_close(h.float(), c.float(), rtol=2 ** -7, atol=2 ** -7 * scale, equal_nan=True)
    else:
        torch.testing.assert_close(h, c, equal_nan=True)


UPSAMPLE = [
    # (shape, kwargs)
    ((2, 3, 5), dict(size=9, mode="nearest")),
    ((2, 3, 5), dict(scale_factor=1.7, mode="nearest-exact")),
    ((2, 3, 4, 5), dict(scale_factor=2, mode="nearest")),
    ((2, 3, 4, 5), dict(size=(7, 3), mode="nearest")),
    ((2, 3, 4, 5), dict(scale_factor=(2.5, 0.6), mode="nearest-exact")),
    ((1, 2, 3, 4, 5), dict(size=(4, 6, 9), mode="nearest")),
    ((1, 2, 3, 4, 5), dict(scale_factor=1.5, mode="nearest-exact")),
    ((2, 3, 5), dict(size=11, mode="linear", align_corners=True)),
    ((2, 3, 5), dict(scale_factor=0.5, mode="linear", align_corners=False)),
    ((2, 3, 4, 5), dict(scale_factor=2, mode="bilinear", align_corners=False)),
    ((2, 3, 4, 5), dict(scale_factor=2, mode="bilinear", align_corners=True)),
    ((2, 3, 7, 6), dict(size=(3, 13), mode="bilinear", align_corners=False)),
    ((2, 3, 4, 5), dict(scale_factor=1.3, mode="bilinear", recompute_scale_factor=False)),
    ((1, 2, 3, 4, 5), dict(size=(5, 3, 7), mode="trilinear", align_corners=False)),
    ((1, 2, 3, 4, 5), dict(scale_factor=2, mode="trilinear", align_corners=True)),
]


@pytest.mark.parametrize("case", UPSAMPLE, ids=lambda c: f"{c[1]['mode']}-{len(c[0]) - 2}d")
def test_interpolate_matches_cpu(case, fallback_counts):
    shape, kw = case
    torch.manual_seed(0)
    x = torch.randn(shape)
    linear = "linear" in kw["mode"]
    _check(lambda t: F.interpolate(t, **kw), x, fallback_counts, exact=not linear)


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_interpolate_layouts_and_edges(mode, fallback_counts):
    torch.manual_seed(0)
    x = torch.randn(3, 8, 6, 7)
    x[0, 0, 0, 0], x[0, 1, 2, 3], x[1, 2, 3, 4] = float("inf"), float("nan"), -0.0
    kw = dict(scale_factor=2, mode=mode) if mode == "nearest" else dict(size=(9, 5), mode=mode, align_corners=False)
    fn = lambda t: F.interpolate(t, **kw)
    _check(fn, x, fallback_counts, exact=mode == "nearest", grad=False)
    _check(fn, x.to(memory_format=torch.channels_last), fallback_counts, exact=mode == "nearest", grad=False)
    _check(fn, torch.randn(3, 8, 7, 6).transpose(2, 3), fallback_counts, exact=mode == "nearest")
    _check(fn, torch.randn(0, 8, 6, 7), fallback_counts, grad=False)
    # many planes: split over the thread pool
    _check(fn, torch.randn(4, 64, 16, 16), fallback_counts, exact=mode == "nearest")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.uint8])
def test_interpolate_dtypes(dtype, fallback_counts):
    x = (torch.rand(2, 3, 5, 6) * 200).to(dtype)
    _check(lambda t: F.interpolate(t, scale_factor=1.5, mode="nearest"), x, fallback_counts, grad=False)
    if dtype != torch.uint8:
        _check(lambda t: F.interpolate(t, scale_factor=1.5, mode="bilinear"), x, fallback_counts, exact=False)


ADAPTIVE = [((2, 3, 10, 10), (3, 4)), ((3, 7, 5), (7, 5)), ((2, 3, 9, 13), (4, 1)), ((2, 3, 5, 6), (1, 1)),
            ((2, 3, 5, 6), (8, 9)), ((2, 3, 5, 6), (0, 3)), ((1, 2, 7, 5, 6), (3, 2, 4)), ((2, 5, 6, 7), (2, 3, 2))]


@pytest.mark.parametrize("case", ADAPTIVE, ids=str)
def test_adaptive_avg_pool_matches_cpu(case, fallback_counts):
    shape, out = case
    torch.manual_seed(0)
    x = torch.randn(shape)
    fn = F.adaptive_avg_pool3d if len(out) == 3 else F.adaptive_avg_pool2d
    # (1, 1) is a mean() on both sides, not this kernel: its own sum order
    _check(lambda t: fn(t, out), x, fallback_counts, exact=out != (1, 1))
    if len(shape) == 4:
        _check(lambda t: fn(t, out), x.to(memory_format=torch.channels_last), fallback_counts, exact=False)


def test_adaptive_avg_pool_edges(fallback_counts):
    x = torch.randn(2, 64, 9, 9)
    x[0, 0, 0, 0], x[1, 3, 4, 4] = float("inf"), float("nan")
    _check(lambda t: F.adaptive_avg_pool2d(t, (4, 3)), x, fallback_counts, grad=False)
    _check(lambda t: F.adaptive_avg_pool1d(t, 4), torch.randn(3, 5, 11), fallback_counts)
    _check(lambda t: F.adaptive_avg_pool2d(t, 3), torch.randn(2, 3, 8, 8).bfloat16(), fallback_counts, exact=False)


PADS = [
    ((2, 3, 6), (2, 3)), ((3, 6), (0, 5)), ((2, 3, 5, 6), (1, 2, 3, 4)), ((2, 3, 5, 6), (0, 0, 4, 0)),
    ((1, 2, 4, 5, 6), (1, 2, 0, 3, 2, 1)), ((2, 3, 5, 6), (-1, 2, 3, -2)), ((2, 3, 4, 6), (-7, 3, 0, -1)),
]


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("case", PADS, ids=str)
def test_pad_matches_cpu(case, mode, fallback_counts):
    shape, pad = case
    torch.manual_seed(0)
    x = torch.randn(shape)
    if mode == "reflect" and min(pad) < 0:
        pytest.skip("negative reflection padding is checked against the CPU in test_pad_negative_reflect")
    fn = lambda t: F.pad(t, pad, mode=mode)
    _check(fn, x, fallback_counts)
    _check(fn, x.transpose(-1, -2).contiguous().transpose(-1, -2), fallback_counts)
    if len(shape) == 4:
        _check(fn, x.to(memory_format=torch.channels_last), fallback_counts)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int8, torch.uint8, torch.bfloat16, torch.float16])
def test_pad_dtypes(dtype, fallback_counts):
    x = (torch.randn(2, 3, 5, 6) * 50).to(dtype)
    for mode in ("reflect", "replicate"):
        _check(lambda t: F.pad(t, (2, 1, 3, 0), mode=mode), x, fallback_counts, grad=dtype.is_floating_point)


def test_pad_negative_reflect(fallback_counts):
    x = torch.randn(2, 3, 6)
    _check(lambda t: torch.ops.aten.reflection_pad1d(t, [-2, 3]), x, fallback_counts)


def test_backward_is_deterministic():
    torch.manual_seed(0)
    x = torch.randn(8, 32, 16, 16, device="hpu", requires_grad=True)
    g = torch.randn(8, 32, 37, 29, device="hpu")
    grads = []
    for _ in range(3):
        x.grad = None
        F.interpolate(x, size=(37, 29), mode="bilinear", align_corners=False).backward(g)
        grads.append(x.grad.cpu())
    assert all(torch.equal(grads[0], t) for t in grads[1:])


@pytest.mark.parametrize("fn, exc", [
    (lambda t: F.pad(t, (6, 0), mode="reflect"), RuntimeError),
    (lambda t: F.pad(t, (1, 2, 3), mode="replicate"), (RuntimeError, ValueError, NotImplementedError)),
    (lambda t: F.interpolate(t, size=(0, 3), mode="nearest"), RuntimeError),
    (lambda t: F.interpolate(t, size=(2, 3, 4), mode="bilinear"), ValueError),
    (lambda t: F.adaptive_avg_pool2d(t, (2, 3, 4)), RuntimeError),
    (lambda t: F.adaptive_avg_pool2d(t[:, :, :0], (2, 3)), RuntimeError),
    (lambda t: torch.ops.aten.upsample_nearest2d_backward(t, [3, 3], [2, 3, 4, 4]), RuntimeError),
])
def test_bad_arguments_raise_like_cpu(fn, exc):
    x = torch.randn(2, 3, 5, 6)
    with pytest.raises(exc) as cpu_err:
        fn(x)
    with pytest.raises(exc) as hpu_err:
        fn(x.to("hpu"))
    assert type(hpu_err.value) is type(cpu_err.value)
    # the card stays usable
    assert torch.equal(F.pad(x.to("hpu"), (1, 1, 1, 1), mode="replicate").cpu(), F.pad(x, (1, 1, 1, 1), mode="replicate"))


FLOAT64 = [
    # (id, shape, fn, exact): float64 runs the kernels' double copies
    ("nearest-2d", (2, 3, 4, 5), lambda t: F.interpolate(t, size=(7, 3), mode="nearest"), True),
    ("nearest-exact-1d", (2, 3, 5), lambda t: F.interpolate(t, scale_factor=1.7, mode="nearest-exact"), True),
    ("nearest-3d", (1, 2, 3, 4, 5), lambda t: F.interpolate(t, size=(4, 6, 9), mode="nearest"), True),
    ("linear-ac", (2, 3, 5), lambda t: F.interpolate(t, size=11, mode="linear", align_corners=True), False),
    ("bilinear", (2, 3, 7, 6), lambda t: F.interpolate(t, size=(3, 13), mode="bilinear"), False),
    ("bilinear-scale", (2, 3, 4, 5),
     lambda t: F.interpolate(t, scale_factor=1.3, mode="bilinear", recompute_scale_factor=False), False),
    ("trilinear", (1, 2, 3, 4, 5), lambda t: F.interpolate(t, size=(5, 3, 7), mode="trilinear"), False),
    ("trilinear-ac", (1, 2, 3, 4, 5),
     lambda t: F.interpolate(t, scale_factor=2, mode="trilinear", align_corners=True), False),
    ("area", (2, 3, 10, 10), lambda t: F.interpolate(t, size=(3, 4), mode="area"), False),
    ("adaptive-2d", (2, 3, 9, 13), lambda t: F.adaptive_avg_pool2d(t, (4, 5)), False),
    ("adaptive-3d", (1, 2, 7, 5, 6), lambda t: F.adaptive_avg_pool3d(t, (3, 2, 4)), False),
    ("reflect-2d", (2, 3, 5, 6), lambda t: F.pad(t, (2, 1, 1, 2), mode="reflect"), True),
    ("replicate-3d", (1, 2, 3, 4, 5), lambda t: F.pad(t, (1, 2, 0, 1, 2, 1), mode="replicate"), True),
]


@pytest.mark.parametrize("case", FLOAT64, ids=lambda c: c[0])
def test_float64_matches_cpu(case, fallback_counts):
    """float64 on the card, forward and backward, to double rounding (a
    float32 computation would be ~1e-7 off): values with bits below float32's."""
    _, shape, fn, exact = case
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=torch.float64) * 3 + 1e-9 * torch.randn(shape, dtype=torch.float64)
    yc, gc, rc = _run(fn, x, "cpu")
    yh, gh, rh = _run(fn, x, "hpu")
    assert fallback_counts() == {}, fallback_counts()
    assert yh.dtype == torch.float64 and gh.dtype == torch.float64 and rh.stride() == rc.stride()
    tol = 0 if exact else 1e-13
    torch.testing.assert_close(yh, yc, rtol=tol, atol=tol)
    torch.testing.assert_close(gh, gc, rtol=1e-13, atol=1e-13)
