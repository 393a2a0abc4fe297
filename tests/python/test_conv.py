"""Convolutions on the card (csrc/kernels/conv.c) against PyTorch's CPU
convolution: forward and all three gradients, 1-d and 2-d, stride, padding,
dilation, groups (depthwise too), bias or not, float32, bf16 and float64,
transposed convolutions (as the input gradient of the convolution they
transpose),
the int64 forward exactly, and no CPU fallback. Bad arguments raise PyTorch's errors."""
import pytest
import torch
import torch.nn.functional as F


# (N, C, H, W, Co, kernel, stride, padding, dilation, groups)
CASES_2D = [
    (2, 3, 8, 8, 4, 3, 1, 1, 1, 1),          # ResNet 3x3
    (2, 4, 9, 7, 6, 3, 2, 1, 1, 2),          # stride 2, groups, odd sizes
    (3, 8, 10, 10, 8, 3, 1, 2, 2, 8),        # depthwise, dilated
    (2, 4, 6, 6, 8, 1, 1, 0, 1, 1),          # 1x1: straight GEMM
    (2, 4, 7, 7, 8, 1, 2, 0, 1, 1),          # 1x1 stride 2 (downsample)
    (2, 3, 12, 12, 5, (7, 5), (2, 3), (3, 1), (1, 2), 1),  # stem-like, rectangular
    (5, 6, 4, 4, 6, 3, 1, 1, 1, 3),          # several images per column panel
    (1, 16, 40, 40, 8, 3, 1, 1, 1, 1),       # one image over several row bands
    # 3x3 / 1 with >= 16 channels: Winograd F(2x2, 3x3) on AVX-512 CPUs
    (2, 16, 9, 11, 24, 3, 1, 1, 1, 1),       # tiles in tasks, odd sizes
    (3, 20, 13, 5, 17, 3, 1, 2, 1, 1),       # padding 2
    (1, 96, 6, 6, 80, 3, 1, 0, 1, 1),        # few tiles, many channels: three passes
    (2, 16, 4, 70, 16, 3, 1, (1, 0), 1, 1),  # a tile row over several panels
    (9, 16, 4, 4, 24, 3, 1, 1, 1, 1),        # short tile rows: spans across rows and images
    (7, 16, 5, 3, 20, 3, 1, 1, 1, 1),        # spans, the last tile row and column cut
    (21, 16, 2, 2, 16, 3, 1, 1, 1, 1),       # one tile per image, spans over 16 images
    # 3x3 / 1, >= 32 channels, outputs up to 16x16, >= 128 tiles: the weight gradient by Winograd tiles too
    (24, 32, 5, 7, 40, 3, 1, 1, 1, 1),       # odd sizes: last tile row and column cut
    (36, 32, 4, 4, 32, 3, 1, 1, 1, 1),       # spans across images
    (6, 33, 9, 11, 35, 3, 1, 2, 1, 1),       # padding 2, channels not a multiple of 16
    # stride 2, one group, on AVX-512: the implicit GEMM over phase planes (conv_igemm.c)
    (2, 16, 9, 11, 24, 3, 2, 1, 1, 1),
    (3, 8, 13, 6, 12, 3, 2, 2, 1, 1),
    (2, 16, 9, 11, 24, 1, 2, 0, 1, 1),       # 1x1 / 2: gathers
    # ... and from 512 outputs an image, read from the phase planes in place (conv_direct.c)
    (2, 8, 64, 62, 12, 3, 2, 1, 1, 1),
    (2, 3, 70, 66, 8, 7, 2, 3, 1, 1),        # the 7x7 / 2 stem, odd height
    (2, 5, 50, 48, 7, 5, 2, 2, 1, 1),        # 5x5, even padding
    # few channels: the weight gradient summed by image chunks (conv_tmpl.h)
    (9, 8, 7, 7, 8, 3, 1, 1, 1, 1),          # 9 images in 8 chunks
    (12, 16, 4, 4, 16, 3, 2, 1, 1, 1),       # several images per panel in a chunk
    (3, 8, 48, 48, 8, 3, 1, 1, 1, 1),        # an image over row bands in a chunk
]


def on_devices(call, tensors, dtype):
    """call(*leaves) and its backward on the CPU, on the card and, for bf16,
    exactly (float64 on the CPU from the same bf16 values): [y, grads...]
    of each, the exact one None for the other dtypes."""
    exact = dtype == torch.bfloat16
    out = []
    for dev in ("cpu", "hpu", "exact") if exact else ("cpu", "hpu"):
        cast = (lambda t: t.double()) if dev == "exact" else (lambda t: t.to(dev))
        leaves = [cast(t.detach()).requires_grad_() for t in tensors]
        y = call(*leaves)
        torch.manual_seed(1)
        y.backward(cast(torch.randn(y.shape, dtype=dtype)))
        out.append([y.detach().cpu()] + [t.grad.cpu() for t in leaves])
    return out if exact else out + [None]


def run(fn, args, kw, dtype, bias):
    """Forward and backward of fn: on_devices's three results."""
    torch.manual_seed(0)
    x, w = (torch.randn(*s, dtype=dtype) for s in args)
    if bias:
        return on_devices(lambda *t: fn(*t, **kw), (x, w, torch.randn(w.shape[0], dtype=dtype)), dtype)
    return on_devices(lambda *t: fn(*t, None, **kw), (x, w), dtype)


def compare(cpu, hpu, dtype, exact=None):
    for i, (c, h) in enumerate(zip(cpu, hpu)):
        assert h.dtype == c.dtype and h.shape == c.shape
        if dtype == torch.float32:
            scale = c.abs().max().item() + 1
            torch.testing.assert_close(h, c, rtol=1e-5, atol=2e-6 * scale)
        elif dtype == torch.float64:
            # dgemm on the card, the CPU's own order of sums: double rounding
            # apart (a float32 computation would be ~1e-7 off)
            scale = c.abs().max().item() + 1
            torch.testing.assert_close(h, c, rtol=1e-12, atol=1e-13 * scale)
        else:
            # float accumulation, one rounding, as the CPU's bf16 kernels: a
            # step apart at most (steps of the tensor's largest magnitude, as
            # a sum that cancels to near 0 keeps the error of its terms).
            scale = c.float().abs().max().item()
            step = 2 ** -8 * scale
            if exact is not None and (h.float() - c.float()).abs().max().item() > step:
                # Without AVX512_BF16, oneDNN's bf16 convolutions can round
                # more than once (on valgrind's AVX2 CPU: a 3x3's input
                # gradient, a grouped 4x4 / 2 transposed one, 2 steps from
                # the exact result where the card is 1): then the card must
                # be at least as close to the exact result.
                e = exact[i]
                cpu_err = (c.double() - e).abs().max().item()
                hpu_err = (h.double() - e).abs().max().item()
                assert hpu_err <= max(cpu_err, step), (i, hpu_err, cpu_err, step)
                continue
            torch.testing.assert_close(h.float(), c.float(), rtol=2 ** -8, atol=step)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", CASES_2D)
def test_conv2d_matches_cpu(case, bias, dtype, fallback_counts):
    N, C, H, W, Co, k, s, p, d, g = case
    kh, kw = (k, k) if isinstance(k, int) else k
    cpu, hpu, exact = run(F.conv2d, [(N, C, H, W), (Co, C // g, kh, kw)],
                          dict(stride=s, padding=p, dilation=d, groups=g), dtype, bias)
    compare(cpu, hpu, dtype, exact)
    assert fallback_counts() == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("case", [(2, 3, 20, 4, 5, 2, 3, 2, 1), (3, 4, 9, 4, 3, 1, 1, 1, 2)])
def test_conv1d_matches_cpu(case, dtype, fallback_counts):
    N, C, L, Co, k, s, p, d, g = case
    cpu, hpu, exact = run(F.conv1d, [(N, C, L), (Co, C // g, k)],
                          dict(stride=s, padding=p, dilation=d, groups=g), dtype, True)
    compare(cpu, hpu, dtype, exact)
    assert fallback_counts() == {}


# Transposed: (N, Cin, H, W, Cout, kernel, stride, padding, output_padding, dilation, groups)
CASES_T = [
    (2, 4, 5, 6, 3, 3, 1, 1, 0, 1, 1),           # stride 1: the dx-as-convolution path
    (2, 8, 5, 6, 4, 2, 2, 0, 0, 1, 1),           # U-Net up-sampling: 2x2, stride 2
    (1, 6, 7, 5, 6, 3, 2, 1, 1, 1, 3),           # output_padding, groups
    (2, 4, 5, 6, 3, (3, 2), (2, 3), (1, 0), (1, 2), (2, 1), 1),  # rectangular everything
    (3, 4, 4, 4, 8, 4, 2, 1, 0, 1, 4),           # DCGAN-style 4x4 stride 2, grouped
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("case", CASES_T)
def test_conv_transpose2d_matches_cpu(case, dtype, fallback_counts):
    N, C, H, W, Co, k, s, p, op, d, g = case
    kh, kw = (k, k) if isinstance(k, int) else k
    torch.manual_seed(0)
    x, w, b = torch.randn(N, C, H, W, dtype=dtype), torch.randn(C, Co // g, kh, kw, dtype=dtype), \
        torch.randn(Co, dtype=dtype)
    kwargs = dict(stride=s, padding=p, output_padding=op, dilation=d, groups=g)
    cpu, hpu, exact = on_devices(lambda *t: F.conv_transpose2d(*t, **kwargs), (x, w, b), dtype)
    compare(cpu, hpu, dtype, exact)
    cpu, hpu, exact = on_devices(lambda *t: F.conv_transpose2d(*t, None, **kwargs), (x, w), dtype)
    compare(cpu, hpu, dtype, exact)
    assert fallback_counts() == {}


def test_conv_transpose1d_unbatched_and_grad_subsets(fallback_counts):
    torch.manual_seed(0)
    up = torch.nn.ConvTranspose1d(4, 5, 3, stride=2, padding=1, output_padding=1)
    hup = torch.nn.ConvTranspose1d(4, 5, 3, stride=2, padding=1, output_padding=1).to("hpu")
    hup.load_state_dict(up.state_dict())
    x = torch.randn(2, 4, 9)
    for xin in (x, x[0], x.transpose(1, 2).contiguous().transpose(1, 2)):  # batched, unbatched, strided
        torch.testing.assert_close(hup(xin.to("hpu")).cpu(), up(xin), rtol=1e-5, atol=1e-5)
    # frozen weights: the input gradient alone; then the weight gradient alone
    hup.requires_grad_(False)
    up.requires_grad_(False)
    xc, xh = x.clone().requires_grad_(), x.to("hpu").requires_grad_()
    up(xc).square().sum().backward()
    hup(xh).square().sum().backward()
    torch.testing.assert_close(xh.grad.cpu(), xc.grad, rtol=1e-5, atol=1e-4)
    up.weight.requires_grad_(True)
    hup.weight.requires_grad_(True)
    up(x).square().sum().backward()
    hup(x.to("hpu")).square().sum().backward()
    torch.testing.assert_close(hup.weight.grad.cpu(), up.weight.grad, rtol=1e-5, atol=1e-4)
    assert fallback_counts() == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_conv_transpose_output_padding_past_stride(dtype, fallback_counts):
    """output_padding may reach the dilation, past the stride: the input is
    then the output gradient of its convolution with zero rows appended."""
    torch.manual_seed(0)
    x, w, b = torch.randn(2, 2, 4, 4), torch.randn(2, 3, 4, 5), torch.randn(3)
    if dtype == torch.int64:
        x, w, b = (t.mul(4).round().long() for t in (x, w, b))
    kw = dict(stride=(3, 2), padding=(1, 2), output_padding=(2, 3), dilation=(4, 4))
    leaves = [t.clone().requires_grad_(dtype.is_floating_point) for t in (x, w, b)]
    hleaves = [t.to("hpu").requires_grad_(dtype.is_floating_point) for t in (x, w, b)]
    y, yh = F.conv_transpose2d(*leaves, **kw), F.conv_transpose2d(*hleaves, **kw)
    if dtype == torch.int64:
        assert torch.equal(yh.cpu(), y)
    else:
        g = torch.randn(y.shape)
        y.backward(g)
        yh.backward(g.to("hpu"))
        compare([y.detach()] + [t.grad for t in leaves], [yh.detach().cpu()] + [t.grad.cpu() for t in hleaves], dtype)
    assert fallback_counts() == {}


def test_conv_layouts_and_batchless(fallback_counts):
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(4, 6, 3, padding=1)
    x = torch.randn(2, 4, 7, 7)
    hconv = torch.nn.Conv2d(4, 6, 3, padding=1).to("hpu")
    hconv.load_state_dict(conv.state_dict())
    # channels_last and a non-contiguous slice give the same numbers
    for xin in (x.to(memory_format=torch.channels_last), x[:, :, :, :]):
        torch.testing.assert_close(hconv(xin.to("hpu")).cpu(), conv(xin), rtol=1e-5, atol=1e-5)
    xt = torch.randn(4, 7, 9).transpose(1, 2)
    torch.testing.assert_close(hconv(xt.to("hpu")).cpu(), conv(xt), rtol=1e-5, atol=1e-5)
    # batchless input, and an empty batch
    torch.testing.assert_close(hconv(x[0].to("hpu")).cpu(), conv(x[0]), rtol=1e-5, atol=1e-5)
    e = hconv(torch.randn(0, 4, 7, 7, device="hpu"))
    assert e.shape == (0, 6, 7, 7)
    assert fallback_counts() == {}


@pytest.mark.parametrize("case", [(16, 16, 12, 12, 16, 3, 1, 1), (9, 8, 10, 10, 32, 3, 2, 1),
                                  (12, 32, 8, 8, 48, 3, 1, 1)])
def test_conv_weight_grad_is_the_same_on_any_thread_count(case, fallback_counts):
    """The weight gradient sums its image chunks (or its Winograd tiles)
    in a fixed order, so one thread and two give the same bits."""
    N, C, H, W, Co, k, s, p = case
    torch.manual_seed(0)
    x, w = torch.randn(N, C, H, W).to("hpu"), torch.randn(Co, C, k, k).to("hpu")
    gy = torch.randn(F.conv2d(x.cpu(), w.cpu(), stride=s, padding=p).shape).to("hpu")
    old = torch.get_num_threads()
    grads = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            grads.append(torch.ops.aten.convolution_backward(
                gy, x, w, None, [s, s], [p, p], [1, 1], False, [0, 0], 1, [False, True, False])[1].cpu())
    finally:
        torch.set_num_threads(old)
    assert torch.equal(grads[0], grads[1])
    assert fallback_counts() == {}


def test_conv_input_grad_only(fallback_counts):
    """Frozen weights: only the input gradient is asked for."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 6, 6)
    w = torch.randn(5, 3, 3, 3)
    xc = x.clone().requires_grad_()
    F.conv2d(xc, w, stride=2, padding=1).sum().backward()
    xh = x.to("hpu").requires_grad_()
    F.conv2d(xh, w.to("hpu"), stride=2, padding=1).sum().backward()
    torch.testing.assert_close(xh.grad.cpu(), xc.grad, rtol=1e-5, atol=1e-5)
    assert fallback_counts() == {}


def test_conv_under_autocast(fallback_counts):
    torch.manual_seed(0)
    x, w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    with torch.autocast("hpu", dtype=torch.bfloat16):
        yh = F.conv2d(x.to("hpu"), w.to("hpu"), padding=1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        yc = F.conv2d(x, w, padding=1)
    assert yh.dtype == torch.bfloat16
    torch.testing.assert_close(yh.cpu().float(), yc.float(), rtol=2 ** -8, atol=2 ** -8 * yc.abs().max().item())
    assert fallback_counts() == {}


@pytest.mark.parametrize("bad, match", [
    (lambda x, w: F.conv2d(x, w[:, :2]), "channels"),
    (lambda x, w: F.conv2d(x, w, padding=-1), "negative padding"),
    (lambda x, w: F.conv2d(x, w, stride=0), "stride"),
    (lambda x, w: F.conv2d(x, w, groups=2), "groups|channels"),
    (lambda x, w: F.conv2d(x[:, :, :2, :2], w), "Kernel size"),
    (lambda x, w: F.conv2d(x, w.cpu()), "device"),
    (lambda x, w: F.conv_transpose2d(x, w[:, :, :2]), "channels|weight"),
    (lambda x, w: F.conv_transpose2d(x[:, :, :1, :1], w.transpose(0, 1), padding=3), "output size|too small"),
    (lambda x, w: F.conv_transpose2d(x, w.transpose(0, 1), output_padding=2, stride=2), "output padding"),
])
def test_conv_bad_input(bad, match):
    x = torch.randn(2, 3, 8, 8, device="hpu")
    w = torch.randn(4, 3, 3, 3, device="hpu")
    with pytest.raises((RuntimeError, ValueError), match=match):
        bad(x, w)


@pytest.mark.parametrize("case", CASES_2D[:4])
def test_conv_int64_forward_matches_cpu(case, fallback_counts):
    """int64 convolution (no gradient, as on the CPU) is exact: the same
    integers, with and without bias, 2-d and 1-d."""
    N, C, H, W, Co, k, s, p, d, g = case
    torch.manual_seed(0)
    x = torch.randint(-50, 50, (N, C, H, W))
    w = torch.randint(-9, 9, (Co, C // g, k, k))
    b = torch.randint(-1000, 1000, (Co,))
    kw = dict(stride=s, padding=p, dilation=d, groups=g)
    y = F.conv2d(x.to("hpu"), w.to("hpu"), b.to("hpu"), **kw)
    assert y.dtype == torch.int64 and torch.equal(y.cpu(), F.conv2d(x, w, b, **kw))
    y1 = F.conv1d(x[:, :, 0].to("hpu"), w[:, :, 0].to("hpu"), None, stride=s, padding=p, dilation=d, groups=g)
    assert torch.equal(y1.cpu(), F.conv1d(x[:, :, 0], w[:, :, 0], None, stride=s, padding=p, dilation=d, groups=g))
    # the transposed convolution of the same tensors (w read as [Cin, Cout / g, k, k])
    wt = torch.randint(-9, 9, (C, Co // g, k, k))
    kt = dict(stride=s, padding=min(p, d * (k - 1)), dilation=d, groups=g)
    yt = F.conv_transpose2d(x.to("hpu"), wt.to("hpu"), b.to("hpu"), **kt)
    assert yt.dtype == torch.int64 and torch.equal(yt.cpu(), F.conv_transpose2d(x, wt, b, **kt))
    assert fallback_counts() == {}
