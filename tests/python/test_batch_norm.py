"""Batch norm on the card (csrc/kernels/batch_norm.c) against PyTorch's CPU
kernel: training and eval, output, saved statistics, running statistics and
all three gradients, 2-d/3-d/4-d inputs, with and without affine parameters,
float32 and bf16 (with float32 parameters, as autocast leaves them),
float64, the _native_batch_norm_legit family, no CPU fallback, bad input."""
import pytest
import torch
import torch.nn.functional as F

aten = torch.ops.aten


def close(h, c, dtype):
    assert h.dtype == c.dtype and h.shape == c.shape
    if dtype == torch.float32:
        torch.testing.assert_close(h.cpu(), c, rtol=1e-4, atol=1e-5)
    elif dtype == torch.float64:  # double rounding apart; float32 math would be ~1e-7 off
        torch.testing.assert_close(h.cpu(), c, rtol=1e-11, atol=1e-12)
    else:
        # float math, one rounding at the end: a step of the tensor's scale
        scale = c.float().abs().max().item()
        torch.testing.assert_close(h.cpu().float(), c.float(), rtol=2 ** -7, atol=2 ** -8 * scale)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("shape", [(4, 3), (4, 5, 7), (3, 6, 5, 4), (1, 2, 9, 9), (3, 4, 16, 21)])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_matches_cpu(dtype, shape, affine, training, fallback_counts):
    torch.manual_seed(0)
    C = shape[1]
    x = (torch.randn(shape) * 3 + 2).to(dtype)
    pt = torch.float64 if dtype == torch.float64 else torch.float32  # the parameters' dtype
    if dtype == torch.float64:  # bits below float32's
        x += 1e-9 * torch.randn(shape, dtype=dtype)
    w, b = (torch.randn(C, dtype=pt), torch.randn(C, dtype=pt)) if affine else (None, None)
    rm, rv = torch.randn(C, dtype=pt), torch.rand(C, dtype=pt) + 0.5
    gy = torch.randn(shape).to(dtype)
    res = {}
    for dev in ("cpu", "hpu"):
        xd = x.detach().to(dev).requires_grad_()
        wd = w.detach().to(dev).requires_grad_() if affine else None
        bd = b.detach().to(dev).requires_grad_() if affine else None
        rmd, rvd = rm.clone().to(dev), rv.clone().to(dev)
        y = F.batch_norm(xd, rmd, rvd, wd, bd, training=training, momentum=0.3, eps=1e-4)
        y.backward(gy.to(dev))
        res[dev] = [y, xd.grad, rmd, rvd] + ([wd.grad, bd.grad] if affine else [])
    for h, c in zip(res["hpu"], res["cpu"]):
        close(h, c, dtype if h.shape == x.shape else pt)
    assert fallback_counts() == {}


@pytest.mark.parametrize("training", [True, False])
def test_native_batch_norm_saved_stats_and_legit(training, fallback_counts):
    torch.manual_seed(0)
    x, w, b = torch.randn(5, 4, 3, 3) * 2 + 1, torch.randn(4), torch.randn(4)
    rm, rv = torch.randn(4), torch.rand(4) + 0.5
    hp = [t.to("hpu") for t in (x, w, b, rm, rv)]
    cpu = aten.native_batch_norm(x, w, b, rm.clone(), rv.clone(), training, 0.1, 1e-5)
    hpu = aten.native_batch_norm(*hp[:3], hp[3].clone(), hp[4].clone(), training, 0.1, 1e-5)
    for h, c in zip(hpu, cpu):
        torch.testing.assert_close(h.cpu(), c, rtol=1e-5, atol=1e-5)
    # the _legit family gives the same results as native_batch_norm
    rmh, rvh, rmc, rvc = hp[3].clone(), hp[4].clone(), rm.clone(), rv.clone()
    for h, c in zip(aten._native_batch_norm_legit(*hp[:3], rmh, rvh, training, 0.1, 1e-5),
                    aten._native_batch_norm_legit(x, w, b, rmc, rvc, training, 0.1, 1e-5)):
        torch.testing.assert_close(h.cpu(), c, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rmh.cpu(), rmc)
    torch.testing.assert_close(rvh.cpu(), rvc)
    for h, c in zip(aten._native_batch_norm_legit.no_stats(*hp[:3], True, 0.1, 1e-5),
                    aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5)):
        torch.testing.assert_close(h.cpu(), c, rtol=1e-5, atol=1e-5)
    for h, c in zip(aten._native_batch_norm_legit_no_training(*hp, 0.1, 1e-5),
                    aten._native_batch_norm_legit_no_training(x, w, b, rm, rv, 0.1, 1e-5)):
        torch.testing.assert_close(h.cpu(), c, rtol=1e-5, atol=1e-5)
    assert fallback_counts() == {}


def test_batchnorm_module_channels_last_and_autocast(fallback_counts):
    torch.manual_seed(0)
    bn_c, bn_h = torch.nn.BatchNorm2d(6), torch.nn.BatchNorm2d(6).to("hpu")
    x = torch.randn(4, 6, 5, 5).to(memory_format=torch.channels_last)
    for _ in range(3):
        torch.testing.assert_close(bn_h(x.to("hpu")).cpu(), bn_c(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(bn_h.running_mean.cpu(), bn_c.running_mean)
    torch.testing.assert_close(bn_h.running_var.cpu(), bn_c.running_var)
    assert bn_h.num_batches_tracked.item() == 3
    with torch.autocast("hpu", dtype=torch.bfloat16):
        y = bn_h(x.to("hpu").bfloat16())
    assert y.dtype == torch.float32  # batch_norm is on the fp32 list
    assert fallback_counts() == {}


@pytest.mark.parametrize("bad, match", [
    (lambda x: F.batch_norm(x, None, None, torch.ones(4, device="hpu"), training=True), "weight"),
    (lambda x: F.batch_norm(x, torch.zeros(4, device="hpu"), torch.ones(4, device="hpu")), "running_mean"),
    (lambda x: F.batch_norm(x, None, None, torch.ones(3), training=True), "device"),
])
def test_batch_norm_bad_input(bad, match):
    x = torch.randn(2, 3, 4, 4, device="hpu")
    with pytest.raises((RuntimeError, ValueError), match=match):
        bad(x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_batch_norm_with_update_matches_cpu(dtype, fallback_counts):
    """_batch_norm_with_update and batch_norm_backward (what export and
    torch.compile trace training batch norm to) run on the card: outputs,
    saved statistics, updated running stats, the empty reserve, gradients."""
    torch.manual_seed(0)
    x, w, b = (torch.randn(s, dtype=dtype) for s in ((4, 3, 5, 5), 3, 3))
    res = []
    for dev in ("cpu", "hpu"):
        xd, wd, bd = (t.detach().clone().to(dev).requires_grad_() for t in (x, w, b))
        rm, rv = torch.zeros(3, device=dev, dtype=dtype), torch.ones(3, device=dev, dtype=dtype)
        out, sm, sv, reserve = torch.ops.aten._batch_norm_with_update(xd, wd, bd, rm, rv, 0.1, 1e-5)
        out.backward(torch.arange(out.numel(), dtype=dtype).view(out.shape).to(dev) / 50)
        res.append(([t.detach().cpu() for t in (out, sm, sv, rm, rv, xd.grad, wd.grad, bd.grad)],
                    (reserve.shape, reserve.dtype)))
    for h, c in zip(res[1][0], res[0][0]):
        assert h.dtype == dtype
        close(h, c, dtype)
    assert res[1][1] == res[0][1]
    assert fallback_counts() == {}


@pytest.mark.parametrize("xd, pd", [(torch.float64, torch.float32), (torch.float32, torch.float64)])
def test_batch_norm_mixed_dtypes_raise_like_cpu(xd, pd):
    """The parameters must have the input's dtype (float is only allowed
    with a bf16 / fp16 input): the CPU refuses the rest, and so does hpu
    instead of computing in one of the two."""
    x, w = torch.randn(2, 3, 4, dtype=xd), torch.randn(3, dtype=pd)
    for dev in ("cpu", "hpu"):
        with pytest.raises(RuntimeError, match="mixed dtype"):
            F.batch_norm(x.to(dev), None, None, w.to(dev), w.to(dev), training=True)
