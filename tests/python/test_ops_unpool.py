"""Max unpooling, adaptive max pooling and unfold / fold (im2col / col2im) on
the card against PyTorch's CPU kernels: forward values, indices, result
strides and autograd gradients, bit for bit (the kernels follow the CPU's
window rules, NaN rule, write order and summation order, bf16 / fp16 sums
rounded per add as the CPU's), over 1-d to 3-d, batched and batchless,
channels_last and non-contiguous inputs, float32 / float64 / bf16 / fp16,
each with no CPU fallback. Bad arguments raise the CPU's error; a bad
unpooling index raises and leaves the process usable."""
import pytest
import torch
import torch.nn.functional as F

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def _exact(h, c):
    assert h.dtype == c.dtype and h.shape == c.shape, (h.dtype, c.dtype, h.shape, c.shape)
    torch.testing.assert_close(h, c, rtol=0, atol=0, equal_nan=True)


def _run(fn, args, dev, diff=(0,), seed=1):
    """fn(*args) on dev; the gradients of the args listed in diff for a random
    upstream gradient. Returns (outputs on the CPU, their strides, grads)."""
    a = [x.detach().to(dev) if torch.is_tensor(x) else x for x in args]
    for k in diff:
        a[k].requires_grad_()
    out = fn(*a)
    outs = out if isinstance(out, tuple) else (out,)
    grads = []
    if diff and outs[0].numel():
        torch.manual_seed(seed)
        outs[0].backward(torch.randn(outs[0].shape).to(outs[0].dtype).to(dev))
        grads = [a[k].grad.cpu() for k in diff]
    return [o.detach().cpu() for o in outs], [o.stride() for o in outs], grads


def _check(fn, args, fallback_counts, diff=(0,)):
    oc, sc, gc = _run(fn, args, "cpu", diff)
    oh, sh, gh = _run(fn, args, "hpu", diff)
    assert fallback_counts() == {}, fallback_counts()
    for h, c in zip(oh, oc):
        _exact(h, c)
    assert sh == sc, (sh, sc)
    assert len(gh) == len(gc)
    for h, c in zip(gh, gc):
        _exact(h, c)


def _layout(x, how):
    if how == "channels_last":
        return x.contiguous(memory_format=torch.channels_last if x.dim() == 4 else torch.channels_last_3d)
    if how == "strided":  # a non-contiguous view with the same values
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)
    return x


# ---- max unpooling ------------------------------------------------------------

UNPOOL = [
    # (nd, input shape, pool kwargs, unpool output_size or None)
    (1, (2, 3, 10), dict(kernel_size=2), None),
    (1, (3, 9), dict(kernel_size=3, stride=2, padding=1), (10,)),
    (2, (2, 3, 6, 8), dict(kernel_size=2), None),
    (2, (2, 3, 7, 9), dict(kernel_size=3, stride=2, padding=1), (8, 10)),
    (2, (3, 5, 6), dict(kernel_size=(2, 3), stride=(2, 1)), (5, 6)),
    (3, (2, 2, 4, 6, 6), dict(kernel_size=2), None),
    (3, (2, 5, 7, 4), dict(kernel_size=(2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0)), (5, 8, 5)),
]
POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
UNPOOL_FN = {1: F.max_unpool1d, 2: F.max_unpool2d, 3: F.max_unpool3d}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", UNPOOL, ids=lambda c: f"{c[0]}d-{len(c[1])}dims-{c[3]}")
def test_max_unpool_matches_cpu(case, dtype, fallback_counts):
    nd, shape, kw, osz = case
    torch.manual_seed(0)
    x = torch.randn(shape).to(dtype)
    y, idx = POOL[nd](x.float(), return_indices=True, **kw)
    y = y.to(dtype)
    ukw = dict(kernel_size=kw["kernel_size"], stride=kw.get("stride"), padding=kw.get("padding", 0), output_size=osz)
    _check(lambda t, i: UNPOOL_FN[nd](t, i, **ukw), [y, idx], fallback_counts)


@pytest.mark.parametrize("how", ["channels_last", "strided"])
@pytest.mark.parametrize("nd", [2, 3])
def test_max_unpool_layouts(nd, how, fallback_counts):
    torch.manual_seed(0)
    x = torch.randn((2, 3, 6, 8) if nd == 2 else (2, 3, 4, 6, 4))
    y, idx = POOL[nd](x, kernel_size=2, return_indices=True)
    y, idx = _layout(y, how), _layout(idx, how)
    # PyTorch's backward views the indices, which a strided tensor refuses
    diff = () if how == "strided" else (0,)
    _check(lambda t, i: UNPOOL_FN[nd](t, i, kernel_size=2), [y, idx], fallback_counts, diff=diff)


@pytest.mark.parametrize("nd", [2, 3])
def test_max_unpool_duplicate_indices_last_write_wins(nd, fallback_counts):
    # every element of a plane aims at one of two spots: the CPU's serial
    # loop leaves the last one written
    torch.manual_seed(0)
    shape = (2, 3, 4, 5) if nd == 2 else (2, 3, 2, 3, 4)
    x = torch.randn(shape)
    idx = torch.randint(0, 2, shape)
    osz = (4, 5) if nd == 2 else (2, 3, 4)
    _check(lambda t, i: UNPOOL_FN[nd](t, i, kernel_size=1, output_size=osz), [x, idx], fallback_counts)


def test_max_unpool_empty_batch(fallback_counts):
    x, idx = torch.randn(0, 3, 2, 2), torch.zeros(0, 3, 2, 2, dtype=torch.long)
    _check(lambda t, i: F.max_unpool2d(t, i, 2), [x, idx], fallback_counts, diff=())


@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize("bad", [-1, 16])
def test_max_unpool_index_out_of_range_raises(nd, bad):
    shape = (1, 2, 2, 2) if nd == 2 else (1, 2, 1, 2, 2)
    idx = torch.zeros(shape, dtype=torch.long)
    idx.view(-1)[3] = bad if bad < 0 else (16 if nd == 2 else 32)
    x = torch.randn(shape)
    with pytest.raises((IndexError, RuntimeError), match="invalid max index"):
        UNPOOL_FN[nd](x.to("hpu"), idx.to("hpu"), kernel_size=2).cpu()
    # the card still works, and the same op with good indices agrees
    idx.view(-1)[3] = 1
    _exact(UNPOOL_FN[nd](x.to("hpu"), idx.to("hpu"), kernel_size=2).cpu(), UNPOOL_FN[nd](x, idx, kernel_size=2))


def test_max_unpool_backward_index_out_of_range_raises():
    # the backward is a gather of the gradient at the (bad) indices
    x = torch.randn(1, 1, 2, 2, device="hpu")
    idx = torch.tensor([[[[0, 1], [2, 99]]]], device="hpu")
    g = torch.ones(1, 1, 4, 4, device="hpu")
    with pytest.raises((IndexError, RuntimeError)):
        torch.ops.aten.gather(g.view(1, 1, -1), -1, idx.view(1, 1, -1)).cpu()
    assert (torch.ones(2, device="hpu") * 2).cpu().tolist() == [2.0, 2.0]


@pytest.mark.parametrize(
    "call",
    [
        lambda x, i: F.max_unpool2d(x, i.int(), 2),  # indices must be int64
        lambda x, i: F.max_unpool2d(x, i[..., :1], 2),  # shapes differ
        lambda x, i: torch.ops.aten.max_unpool2d(x[0, 0], i[0, 0], [4, 4]),  # 2-d input
        lambda x, i: torch.ops.aten.max_unpool2d(x, i, [4]),  # output_size of one
        lambda x, i: torch.ops.aten.max_unpool3d(x[None], i[None], [1, 4, 4], [0, 2, 2], [0, 0, 0]),  # stride 0
        lambda x, i: torch.ops.aten.max_unpool3d(x[None], i[None].int(), [1, 4, 4], [1, 2, 2], [0, 0, 0]),
        lambda x, i: F.max_unpool2d(x.int(), i, 2),  # no integer kernel on the CPU either
    ],
)
def test_max_unpool_bad_arguments_raise_like_cpu(call):
    x, i = torch.randn(1, 1, 2, 2), torch.tensor([[[[0, 3], [8, 15]]]])
    with pytest.raises(Exception) as cpu_err:
        call(x, i)
    with pytest.raises(type(cpu_err.value)) as hpu_err:
        call(x.to("hpu"), i.to("hpu")).cpu()
    assert str(cpu_err.value).split("\n")[0] in str(hpu_err.value)


# ---- adaptive max pooling ---------------------------------------------------

ADAPTIVE = [
    # (nd, input shape, output size): windows that overlap, that do not
    # divide the input, outputs bigger than the input (an element in many
    # windows: several gradient adds), size-1 and empty outputs
    (1, (2, 3, 10), 4),
    (1, (3, 5), 9),
    (2, (2, 3, 7, 9), (3, 4)),
    (2, (3, 5, 6), (7, 13)),
    (2, (2, 3, 4, 5), (1, 1)),
    (2, (2, 3, 8, 8), (0, 4)),
    (2, (0, 3, 8, 8), (2, 4)),
    (3, (2, 2, 5, 6, 7), (2, 3, 4)),
    (3, (2, 3, 4, 5), (5, 7, 6)),
    (3, (1, 2, 3, 3, 3), (1, 1, 1)),
]
AMAX = {1: F.adaptive_max_pool1d, 2: F.adaptive_max_pool2d, 3: F.adaptive_max_pool3d}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", ADAPTIVE, ids=lambda c: f"{c[0]}d-{c[1]}-{c[2]}")
def test_adaptive_max_pool_matches_cpu(case, dtype, fallback_counts):
    nd, shape, osz = case
    torch.manual_seed(0)
    x = torch.randn(shape).to(dtype)
    _check(lambda t: AMAX[nd](t, osz, return_indices=True), [x], fallback_counts)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("how", ["channels_last", "strided"])
@pytest.mark.parametrize("nd", [2, 3])
def test_adaptive_max_pool_layouts(nd, how, dtype, fallback_counts):
    torch.manual_seed(0)
    x = _layout(torch.randn((2, 5, 7, 9) if nd == 2 else (2, 3, 4, 5, 6)).to(dtype), how)
    osz = (3, 5) if nd == 2 else (3, 2, 4)
    _check(lambda t: AMAX[nd](t, osz, return_indices=True), [x], fallback_counts)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_adaptive_max_pool_nan_inf_and_ties(nd, fallback_counts):
    # the CPU's rule: from -inf at the window's first position, a larger
    # value or any NaN takes over (ties keep the first, NaN the last);
    # all -inf windows report their first position
    torch.manual_seed(0)
    shape = {1: (2, 3, 12), 2: (2, 3, 6, 6), 3: (2, 2, 4, 4, 4)}[nd]
    x = torch.randint(-2, 3, shape).float()
    flat = x.view(-1)
    flat[torch.randperm(flat.numel())[:10]] = float("nan")
    flat[torch.randperm(flat.numel())[:10]] = float("-inf")
    x[0, 0] = float("-inf")
    osz = {1: 5, 2: (4, 3), 3: (3, 2, 3)}[nd]
    _check(lambda t: AMAX[nd](t, osz, return_indices=True), [x], fallback_counts)


def test_adaptive_max_pool_backward_direct(fallback_counts):
    # the aten op with a gradient of another layout than the input
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 7)
    y, idx = torch.ops.aten.adaptive_max_pool2d(x, [9, 4])
    g = torch.randn(y.shape).contiguous(memory_format=torch.channels_last)
    want = torch.ops.aten.adaptive_max_pool2d_backward(g, x, idx)
    got = torch.ops.aten.adaptive_max_pool2d_backward(g.to("hpu"), x.to("hpu"), idx.to("hpu"))
    assert fallback_counts() == {}
    _exact(got.cpu(), want)
    assert got.stride() == want.stride()


def test_adaptive_max_pool_backward_bad_index_raises():
    # the CPU writes out of bounds here; the card refuses
    x = torch.randn(1, 2, 3, 3, device="hpu")
    idx = torch.full((1, 2, 2, 2), 9, dtype=torch.long, device="hpu")
    with pytest.raises((IndexError, RuntimeError), match="out of bounds"):
        torch.ops.aten.adaptive_max_pool2d_backward(torch.ones(1, 2, 2, 2, device="hpu"), x, idx).cpu()
    assert (torch.ones(2, device="hpu") + 1).cpu().tolist() == [2.0, 2.0]


@pytest.mark.parametrize(
    "call",
    [
        lambda x: F.adaptive_max_pool2d(x[0, 0], 2),  # 2-d input
        lambda x: F.adaptive_max_pool3d(x[0], 2),  # 3-d input
        lambda x: torch.ops.aten.adaptive_max_pool2d(x[:, :0], [2, 2]),  # empty channels
        lambda x: torch.ops.aten.adaptive_max_pool2d(x, [2, -1]),  # negative size
        lambda x: F.adaptive_max_pool2d(x.int(), 2),  # no integer kernel on the CPU either
        lambda x: torch.ops.aten.adaptive_max_pool2d_backward(
            torch.ones(1, 2, 2, 2, dtype=torch.float64, device=x.device), x, torch.zeros(1, 2, 2, 2, dtype=torch.long, device=x.device)
        ),  # dtypes differ
        lambda x: torch.ops.aten.adaptive_max_pool2d_backward(
            torch.ones(1, 2, 2, 3, device=x.device), x, torch.zeros(1, 2, 2, 2, dtype=torch.long, device=x.device)
        ),  # gradient and indices shapes differ
    ],
)
def test_adaptive_max_pool_bad_arguments_raise_like_cpu(call):
    x = torch.randn(1, 2, 4, 4)
    with pytest.raises(Exception) as cpu_err:
        call(x)
    with pytest.raises(type(cpu_err.value)) as hpu_err:
        r = call(x.to("hpu"))
        [t.cpu() for t in (r if isinstance(r, tuple) else (r,))]
    assert str(cpu_err.value).split("\n")[0] in str(hpu_err.value)


# ---- unfold / fold (im2col / col2im) ------------------------------------------

FOLD = [
    # (image shape, kernel, dilation, padding, stride): overlapping blocks
    # (several adds per pixel in fold), gaps (stride > kernel), dilation,
    # padding, batchless
    ((2, 3, 6, 7), (2, 3), 1, 0, 1),
    ((2, 3, 9, 8), 3, (2, 1), (1, 2), (2, 1)),
    ((3, 7, 7), (2, 2), 1, 1, 3),
    ((1, 2, 5, 5), 5, 1, 2, 1),
    ((0, 2, 5, 5), 2, 1, 0, 1),
]


def _fold_kw(case):
    _, k, d, p, s = case
    return dict(kernel_size=k, dilation=d, padding=p, stride=s)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", FOLD, ids=lambda c: f"{c[0]}-k{c[1]}-d{c[2]}-p{c[3]}-s{c[4]}")
def test_unfold_and_fold_match_cpu(case, dtype, fallback_counts):
    torch.manual_seed(0)
    kw = _fold_kw(case)
    x = torch.randn(case[0]).to(dtype)
    _check(lambda t: F.unfold(t, **kw), [x], fallback_counts)
    cols = F.unfold(x.float(), **kw).to(dtype)
    cols = torch.randn(cols.shape).to(dtype)
    _check(lambda t: F.fold(t, case[0][-2:], **kw), [cols], fallback_counts)


@pytest.mark.parametrize("how", ["channels_last", "strided"])
def test_unfold_and_fold_layouts(how, fallback_counts):
    torch.manual_seed(0)
    kw = dict(kernel_size=(3, 2), padding=1, stride=(1, 2))
    x = _layout(torch.randn(2, 4, 6, 7), how)
    _check(lambda t: F.unfold(t, **kw), [x], fallback_counts)
    cols = F.unfold(torch.randn(2, 4, 6, 7), **kw).transpose(1, 2).contiguous().transpose(1, 2)
    _check(lambda t: F.fold(t, (6, 7), **kw), [cols], fallback_counts)


def test_unfold_bool_is_a_copy(fallback_counts):
    x = torch.rand(2, 3, 5, 6) > 0.5
    _check(lambda t: F.unfold(t, 2, padding=1), [x], fallback_counts, diff=())


def test_fold_bf16_sums_round_per_add(fallback_counts):
    # a pixel covered by 16 blocks: the CPU adds in bf16, rounding each step,
    # which a single rounding of the float sum does not reproduce
    torch.manual_seed(3)
    cols = (torch.rand(1, 16, 25) * 3 + 1).to(torch.bfloat16)
    want = F.fold(cols, (8, 8), kernel_size=4)
    once = F.fold(cols.float(), (8, 8), kernel_size=4).to(torch.bfloat16)
    assert not torch.equal(want, once)  # the case tells the two apart
    got = F.fold(cols.to("hpu"), (8, 8), kernel_size=4)
    assert fallback_counts() == {}
    _exact(got.cpu(), want)


@pytest.mark.parametrize(
    "call",
    [
        lambda x, c: F.unfold(x, (2, 0)),
        lambda x, c: F.unfold(x, 2, dilation=0),
        lambda x, c: F.unfold(x, 2, stride=0, padding=-1),
        lambda x, c: F.unfold(x, 9),
        lambda x, c: torch.ops.aten.im2col(x[:, :0], [2, 2], [1, 1], [0, 0], [1, 1]),
        lambda x, c: torch.ops.aten.im2col(x, [2], [1, 1], [0, 0], [1, 1]),
        lambda x, c: F.unfold(x.int(), 2),  # no integer kernel on the CPU either
        lambda x, c: F.fold(c, (4, 5), 2),  # block count does not match
        lambda x, c: F.fold(c, (5, 6), 3),  # channels not divisible by kernel
        lambda x, c: F.fold(c, (5, 6), 2, stride=0),
        lambda x, c: torch.ops.aten.col2im(c[:, :, :0], [5, 6], [2, 2], [1, 1], [0, 0], [1, 1]),
        lambda x, c: F.fold(c.int(), (5, 6), 2),
    ],
)
def test_unfold_fold_bad_arguments_raise_like_cpu(call):
    x, c = torch.randn(2, 3, 5, 6), torch.randn(2, 12, 20)
    with pytest.raises(Exception) as cpu_err:
        call(x, c)
    with pytest.raises(type(cpu_err.value)) as hpu_err:
        call(x.to("hpu"), c.to("hpu")).cpu()
    assert str(cpu_err.value).split("\n")[0] in str(hpu_err.value)
