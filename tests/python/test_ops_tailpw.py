"""The pointwise tail (copysign, fmax / fmin, hypot, logaddexp(2), nextafter,
heaviside, gcd / lcm, frac, signbit, frexp, angle, shifts, round with
decimals, floor_divide, native_dropout_backward, channel_shuffle, renorm) against
the same PyTorch ops on the CPU, and the card's random distributions
(exponential_, cauchy_, geometric_, log_normal_, normal with tensor
parameters) checked by construction. Each op must run on the card: the
fallback counters stay empty.

Exactly determined results (all but hypot and logaddexp / logaddexp2) are
compared bit for bit, including the sign of zeros; hypot and logaddexp use
libm where PyTorch uses Sleef: float32 rtol and atol 1e-6, float64 1e-14,
bf16 / fp16 one step of the dtype (docs/NUMERICS.md)."""
import math

import pytest
import torch

import habana_torch  # noqa: F401

from conftest import steps_apart

FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


def make(shape, dtype, seed=0, low=-6.0, high=6.0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        x = (torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype)
        if x.numel() >= 8:  # exact zeros of both signs, integers, halves
            flat = x.view(-1)
            flat[0], flat[1], flat[2], flat[3] = 0.0, -0.0, 2.0, -2.5
        return x
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, shape, generator=g, dtype=dtype)


def same_bits(h, c):
    """Equal values, NaN where NaN, and the same sign on zeros."""
    h = h.cpu()
    assert h.dtype == c.dtype and h.shape == c.shape, (h.dtype, c.dtype, h.shape, c.shape)
    if c.dtype.is_floating_point:
        both_nan = h.isnan() & c.isnan()
        assert torch.equal(torch.where(both_nan, 0, h), torch.where(both_nan, 0, c)), (h, c)
        assert torch.equal(torch.where(both_nan, False, h.signbit()), torch.where(both_nan, False, c.signbit()))
    else:
        assert torch.equal(h, c), (h, c)


def close(h, c):
    h = h.cpu()
    assert h.dtype == c.dtype and h.shape == c.shape
    if c.dtype in (torch.bfloat16, torch.float16):
        assert steps_apart(h, c) <= 1
    else:
        tol = 1e-6 if c.dtype == torch.float32 else 1e-14  # atol: logaddexp's cancellation near 0
        torch.testing.assert_close(h, c, rtol=tol, atol=tol, equal_nan=True)


EDGE = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 1e-30, -1e-30, 3e38, -3e38, math.inf, -math.inf,
        math.nan, 7.0, -7.0, 1e-45, 65504.0, 1e10]


def edge_pair(dtype):
    """Every pair of edge values (x, y), as two 1-d tensors."""
    v = torch.tensor(EDGE, dtype=torch.float64)
    x, y = torch.meshgrid(v, v, indexing="ij")
    return x.reshape(-1).to(dtype), y.reshape(-1).to(dtype)


# name -> (fn, exact, dtypes)
BINARY = {
    "copysign": (torch.copysign, True, FLOATS + INTS + [torch.bool]),
    "fmax": (torch.fmax, True, FLOATS + INTS + [torch.bool]),
    "fmin": (torch.fmin, True, FLOATS + INTS + [torch.bool]),
    "nextafter": (torch.nextafter, True, FLOATS),
    "heaviside": (torch.heaviside, True, FLOATS + INTS + [torch.bool]),
    "hypot": (torch.hypot, False, FLOATS),
    "logaddexp": (torch.logaddexp, False, FLOATS),
    "logaddexp2": (torch.logaddexp2, False, FLOATS),
    "gcd": (torch.gcd, True, INTS),
    "lcm": (torch.lcm, True, INTS),
    "bitwise_left_shift": (torch.bitwise_left_shift, True, INTS),
    "bitwise_right_shift": (torch.bitwise_right_shift, True, INTS),
}
# (x shape, y shape): plain, broadcast both ways, 0-dim, empty, parallel-sized
SHAPES = [((17,), (17,)), ((3, 1, 5), (4, 1)), ((), (6,)), ((0, 3), (3,)), ((257, 301), (257, 301))]


def operands(name, dtype, sx, sy):
    x, y = make(sx, dtype, 1), make(sy, dtype, 2)
    if name in ("bitwise_left_shift", "bitwise_right_shift"):  # shift counts around the width
        bits = 8 * torch.tensor([], dtype=dtype).element_size()
        lo = 0 if dtype == torch.uint8 else -3
        y = torch.randint(lo, bits + 3, sy, generator=torch.Generator().manual_seed(3)).to(dtype)
    return x, y


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary(name, shapes, fallback_counts):
    fn, exact, dtypes = BINARY[name]
    for dtype in dtypes:
        x, y = operands(name, dtype, *shapes)
        h = fn(x.to("hpu"), y.to("hpu"))
        (same_bits if exact else close)(h, fn(x, y))
    assert fallback_counts() == {}


@pytest.mark.parametrize("name", [n for n, v in BINARY.items() if v[2][0] == torch.float32])
def test_binary_edge_values(name, fallback_counts):
    fn, exact, dtypes = BINARY[name]
    for dtype in [d for d in dtypes if d.is_floating_point]:
        x, y = edge_pair(dtype)
        (same_bits if exact else close)(fn(x.to("hpu"), y.to("hpu")), fn(x, y))
    assert fallback_counts() == {}


def test_integer_edges(fallback_counts):
    for dtype in INTS:
        info = torch.iinfo(dtype)
        v = torch.tensor(sorted({info.min, info.min + 1, -7, -1, 0, 1, 6, 12, info.max - 1, info.max}),
                         dtype=torch.int64).clamp(info.min, info.max).to(dtype)
        x, y = torch.meshgrid(v, v, indexing="ij")
        for fn in (torch.gcd, torch.lcm, torch.fmax, torch.fmin, torch.heaviside, torch.copysign):
            a, b = x, y
            if fn is torch.lcm and dtype in (torch.int32, torch.int64):  # the CPU traps (SIGFPE) on INT_MIN
                keep = (x != info.min) & (y != info.min)
                a, b = x[keep], y[keep]
            same_bits(fn(a.to("hpu"), b.to("hpu")), fn(a, b))
        bits = 8 * v.element_size()
        s = torch.tensor([-1, 0, 1, bits - 2, bits - 1, bits, bits + 1, 127], dtype=torch.int64)
        s = s.clamp(info.min, info.max).to(dtype)
        a, b = torch.meshgrid(v, s, indexing="ij")
        for fn in (torch.bitwise_left_shift, torch.bitwise_right_shift):
            same_bits(fn(a.to("hpu"), b.to("hpu")), fn(a, b))
    assert fallback_counts() == {}


def test_non_contiguous_scalars_inplace_out(fallback_counts):
    x = make((40, 30), torch.float32, 4)[::2, ::3].t()
    y = make((30, 40), torch.float32, 5)[::3, ::2]
    hx, hy = x.to("hpu"), y.to("hpu")
    same_bits(torch.copysign(hx.t().contiguous().t(), hy), torch.copysign(x, y))
    same_bits(torch.copysign(hx, -1.0), torch.copysign(x, -1.0))
    same_bits(torch.fmax(hx, torch.tensor(0.5)), torch.fmax(x, torch.tensor(0.5)))
    same_bits(torch.nextafter(hx, torch.tensor(math.inf)), torch.nextafter(x, torch.tensor(math.inf)))
    for name in ("copysign", "hypot", "nextafter", "heaviside"):
        c = x.clone()
        h = c.to("hpu")
        getattr(h, name + "_")(hy)
        getattr(c, name + "_")(y)
        (close if name == "hypot" else same_bits)(h, c)
    out = torch.empty(0, dtype=torch.float64, device="hpu")  # out= of a wider dtype
    torch.fmin(hx, hy, out=out)
    same_bits(out, torch.fmin(x, y, out=torch.empty(0, dtype=torch.float64)))
    a = torch.randint(-50, 50, (64,), dtype=torch.int32)
    b = torch.randint(0, 40, (64,), dtype=torch.int32)
    ha = a.to("hpu")
    ha.bitwise_left_shift_(b.to("hpu"))
    same_bits(ha, a.bitwise_left_shift(b))
    same_bits(torch.bitwise_right_shift(a.to("hpu"), 3), torch.bitwise_right_shift(a, 3))
    same_bits(torch.gcd(a.to("hpu"), b.to(torch.int64).to("hpu")), torch.gcd(a, b.to(torch.int64)))
    same_bits(torch.copysign(a.to("hpu"), b.to("hpu")), torch.copysign(a, b))  # integers promote
    assert fallback_counts() == {}


UNARY = {
    "frac": (torch.frac, FLOATS),
    "signbit": (torch.signbit, FLOATS + INTS + [torch.bool]),
    "angle": (torch.angle, FLOATS + INTS + [torch.bool]),
    "round_0": (lambda x: torch.round(x, decimals=0), FLOATS),
    "round_3": (lambda x: torch.round(x, decimals=3), FLOATS),
    "round_neg_2": (lambda x: torch.round(x, decimals=-2), FLOATS),
    "frexp_mantissa": (lambda x: torch.frexp(x).mantissa, FLOATS),
    "frexp_exponent": (lambda x: torch.frexp(x).exponent, FLOATS),
}


@pytest.mark.parametrize("shape", [(17,), (3, 5, 7), (), (0, 4), (300, 401)], ids=str)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name, shape, fallback_counts):
    fn, dtypes = UNARY[name]
    for dtype in dtypes:
        x = make(shape, dtype, 6, low=-3000.0, high=3000.0) if "round" in name else make(shape, dtype, 6)
        same_bits(fn(x.to("hpu")), fn(x))
        if x.dim() == 2:  # a transposed view
            same_bits(fn(x.to("hpu").t()), fn(x.t()))
    assert fallback_counts() == {}


def test_unary_edge_values_and_forms(fallback_counts):
    for dtype in FLOATS:
        x = torch.tensor(EDGE + [1.0049, -1.0051, 0.0005, 2.675, 123456.5], dtype=torch.float64).to(dtype)
        h = x.to("hpu")
        for fn in (torch.frac, torch.signbit, torch.angle, lambda t: torch.round(t, decimals=2),
                   lambda t: torch.round(t, decimals=-1), lambda t: torch.round(t, decimals=40)):
            same_bits(fn(h), fn(x))
        m, e = torch.frexp(h)
        cm, ce = torch.frexp(x)
        finite = x.isfinite()  # C leaves the exponent of inf / NaN unspecified
        same_bits(m, cm)
        same_bits(e.cpu()[finite], ce[finite])
        c = x.clone()
        h = c.to("hpu")
        h.frac_()
        same_bits(h, c.frac_())
        h = x.to("hpu")
        h.round_(decimals=1)
        same_bits(h, x.clone().round_(decimals=1))
    mo, eo = torch.empty(0, device="hpu"), torch.empty(0, dtype=torch.int32, device="hpu")
    x = make((9,), torch.float32)
    torch.frexp(x.to("hpu"), out=(mo, eo))
    same_bits(mo, torch.frexp(x).mantissa)
    same_bits(eo, torch.frexp(x).exponent)
    assert fallback_counts() == {}


def test_composites(fallback_counts):
    a = make((33, 7), torch.float32, 8)
    b = make((7,), torch.float32, 9)
    same_bits(torch.floor_divide(a.to("hpu"), b.to("hpu")), torch.floor_divide(a, b))
    i = torch.arange(-20, 20, dtype=torch.int64)
    same_bits(torch.floor_divide(i.to("hpu"), 3), torch.floor_divide(i, 3))
    h = i.to("hpu")
    h.floor_divide_(torch.tensor(-7))
    same_bits(h, i.clone().floor_divide_(torch.tensor(-7)))
    grad, mask = make((64, 9), torch.float32, 10), torch.rand(64, 9) > 0.3
    same_bits(torch.ops.aten.native_dropout_backward(grad.to("hpu"), mask.to("hpu"), 1.25),
              torch.ops.aten.native_dropout_backward(grad, mask, 1.25))
    for shape, g in [((2, 6, 3), 3), ((4, 8, 5, 5), 2), ((1, 4, 2, 3, 2), 4), ((0, 6, 2), 2)]:
        x = make(shape, torch.float32, 11)
        same_bits(torch.nn.functional.channel_shuffle(x.to("hpu"), g),
                  torch.nn.functional.channel_shuffle(x, g))
    x = make((2, 6, 4, 4), torch.bfloat16).to(memory_format=torch.channels_last)
    same_bits(torch.nn.functional.channel_shuffle(x.to("hpu"), 3), torch.nn.functional.channel_shuffle(x, 3))
    assert fallback_counts() == {}


def test_renorm(fallback_counts):
    """renorm's norm is a reduction (not exactly determined for every p):
    float32 rtol 1e-5, float64 1e-12, bf16 / fp16 one step."""
    for dtype in FLOATS:
        for shape, p, dim, maxnorm in [((5, 4), 2, 0, 1.0), ((3, 4, 5), 1, 1, 2.0), ((3, 4, 5), 3.5, -1, 0.5),
                                       ((6, 3), 2, 1, 100.0), ((0, 3), 2, 0, 1.0), ((4, 3), math.inf, 0, 1.0),
                                       ((64, 300), 2, 0, 5.0)]:
            x = make(shape, dtype, 15)
            h, c = torch.renorm(x.to("hpu"), p, dim, maxnorm).cpu(), torch.renorm(x, p, dim, maxnorm)
            if dtype in (torch.bfloat16, torch.float16):
                assert steps_apart(h, c) <= 1
            else:
                tol = 1e-5 if dtype == torch.float32 else 1e-12
                torch.testing.assert_close(h, c, rtol=tol, atol=tol)
    x = make((4, 6), torch.float32, 16)
    h = x.to("hpu").t()
    h.renorm_(2, 0, 1.0)
    torch.testing.assert_close(h.cpu(), x.t().renorm(2, 0, 1.0), rtol=1e-5, atol=1e-6)
    assert fallback_counts() == {}


def test_gradients_match_cpu():
    for fn in (torch.copysign, torch.hypot, torch.logaddexp, torch.logaddexp2, torch.fmax, torch.fmin):
        x = make((5, 6), torch.float64, 12)
        y = make((5, 6), torch.float64, 13)
        xs = [x.clone().requires_grad_(), y.clone().requires_grad_()]
        xh = [x.to("hpu").requires_grad_(), y.to("hpu").requires_grad_()]
        fn(*xs).sum().backward()
        fn(*xh).sum().backward()
        for c, h in zip(xs, xh):
            torch.testing.assert_close(h.grad.cpu(), c.grad, rtol=1e-12, atol=1e-12, equal_nan=True)
    x = make((40,), torch.float32, 14)
    xc, xh = x.clone().requires_grad_(), x.to("hpu").requires_grad_()
    torch.frac(xc).sum().backward()
    torch.frac(xh).sum().backward()
    same_bits(xh.grad, xc.grad)


BAD = [
    (lambda d: torch.hypot(torch.ones(2, dtype=torch.int32, device=d), torch.ones(2, dtype=torch.int32, device=d)),
     NotImplementedError, "hypot_cpu"),
    (lambda d: torch.gcd(torch.ones(2, device=d), torch.ones(2, device=d)), NotImplementedError, "gcd_cpu"),
    (lambda d: torch.bitwise_left_shift(torch.ones(2, device=d), torch.ones(2, device=d)),
     NotImplementedError, "lshift_cpu"),
    (lambda d: torch.heaviside(torch.ones(2, device=d), torch.ones(2, dtype=torch.float64, device=d)),
     RuntimeError, "different dtypes"),
    (lambda d: torch.frac(torch.ones(2, dtype=torch.int64, device=d)), NotImplementedError, "frac_cpu"),
    (lambda d: torch.frexp(torch.ones(2, dtype=torch.int64, device=d)), RuntimeError, "floating-point"),
    (lambda d: torch.round(torch.ones(2, dtype=torch.int64, device=d), decimals=2), NotImplementedError, "round_cpu"),
    (lambda d: torch.floor_divide(torch.ones(2, dtype=torch.bool, device=d), torch.ones(2, dtype=torch.bool, device=d)),
     NotImplementedError, "div_floor_cpu"),
    (lambda d: torch.nn.functional.channel_shuffle(torch.ones(2, 6, 3, device=d), 4), RuntimeError, "divisible"),
    (lambda d: torch.nn.functional.channel_shuffle(torch.ones(2, 6, 3, device=d), 0), RuntimeError, "positive"),
    (lambda d: torch.nn.functional.channel_shuffle(torch.ones(6, 3, device=d), 2), RuntimeError, "> 2 dims"),
    (lambda d: torch.copysign(torch.ones(2, device=d), torch.ones(3, device=d)), RuntimeError, "must match"),
    (lambda d: torch.renorm(torch.ones(2, 3, device=d), 0, 0, 1.0), RuntimeError, "non-positive-norm"),
    (lambda d: torch.renorm(torch.ones(2, 3, device=d), 2, 0, -1.0), RuntimeError, "maxnorm to be >= 0"),
    (lambda d: torch.renorm(torch.ones(3, device=d), 2, 0, 1.0), RuntimeError, "at least 2 dimensions"),
    (lambda d: torch.renorm(torch.ones(2, 3, device=d), 2, 5, 1.0), IndexError, "Dimension out of range"),
    (lambda d: torch.renorm(torch.ones(2, 3, dtype=torch.long, device=d), 2, 0, 1.0), RuntimeError,
     "Expected a floating point"),
]


@pytest.mark.parametrize("case", range(len(BAD)))
def test_bad_arguments_raise_as_on_cpu(case):
    fn, exc, text = BAD[case]
    with pytest.raises(exc, match=text):
        fn("cpu")
    with pytest.raises(exc, match=text):
        fn("hpu")
    assert torch.equal(torch.fmax(torch.ones(2, device="hpu"), torch.zeros(2, device="hpu")).cpu(), torch.ones(2))


# Random distributions --------------------------------------------------------------

N = 200_000


def ks_statistic(sample, cdf):
    """Kolmogorov-Smirnov distance between a sample and a distribution."""
    s, _ = torch.sort(sample.double().cpu())
    n = s.numel()
    f = cdf(s)
    i = torch.arange(1, n + 1, dtype=torch.float64)
    return max((i / n - f).max().item(), (f - (i - 1) / n).max().item())


# The KS distance of a sample of N from its own distribution exceeds
# 1.95 / sqrt(N) with probability 1e-3; the seed is fixed, so this never flakes.
KS_BOUND = 1.95 / math.sqrt(N)

DISTS = {
    "exponential": (lambda t: t.exponential_(2.0),
                    lambda s: 1 - torch.exp(-2.0 * s)),
    "cauchy": (lambda t: t.cauchy_(1.0, 0.5),
               lambda s: 0.5 + torch.atan((s - 1.0) / 0.5) / math.pi),
    "log_normal": (lambda t: t.log_normal_(0.5, 0.75),
                   lambda s: 0.5 * (1 + torch.erf((torch.log(s) - 0.5) / (0.75 * math.sqrt(2))))),
}


@pytest.mark.parametrize("name", list(DISTS))
def test_continuous_distribution(name, fallback_counts):
    draw, cdf = DISTS[name]
    torch.hpu.manual_seed(11)
    x = draw(torch.empty(N, device="hpu"))
    assert x.dtype == torch.float32
    xc = x.cpu()
    assert xc.isfinite().all()
    if name != "cauchy":
        assert (xc >= 0).all()
    assert ks_statistic(xc, cdf) < KS_BOUND
    torch.hpu.manual_seed(11)
    assert torch.equal(draw(torch.empty(N, device="hpu")).cpu(), xc)  # reproducible
    assert not torch.equal(draw(torch.empty(N, device="hpu")).cpu(), xc)  # the stream moved on
    for dtype in (torch.float64, torch.bfloat16, torch.float16):  # every float dtype, in place on a view
        base = torch.zeros(64, 2, dtype=dtype, device="hpu")
        r = draw(base[:, 0])
        assert r.data_ptr() == base.data_ptr() and r.dtype == dtype
        assert (base[:, 1].cpu() == 0).all() and (base[:, 0].cpu() != 0).any()
    assert fallback_counts() == {}


def test_exponential_moments_and_geometric(fallback_counts):
    torch.hpu.manual_seed(3)
    e = torch.empty(N, dtype=torch.float64, device="hpu").exponential_(0.25).cpu()
    assert abs(e.mean().item() - 4.0) < 4 * 4.0 / math.sqrt(N)
    assert abs(e.var().item() - 16.0) < 0.03 * 16
    for p, dtype in [(0.3, torch.int64), (0.05, torch.float32), (0.9, torch.int16), (0.5, torch.uint8)]:
        g = torch.empty(N, dtype=dtype, device="hpu").geometric_(p).cpu()
        assert g.dtype == dtype and (g >= 1).all()
        mean, var = 1 / p, (1 - p) / p ** 2
        assert abs(g.double().mean().item() - mean) < 5 * math.sqrt(var / N)
        for k in (1, 2, 3):  # P(X = k) = (1 - p)^(k - 1) p
            f = (g == k).double().mean().item()
            want = (1 - p) ** (k - 1) * p
            assert abs(f - want) < 5 * math.sqrt(want * (1 - want) / N), (p, k, f, want)
    assert fallback_counts() == {}


def test_normal_tensor_parameters(fallback_counts):
    torch.hpu.manual_seed(5)
    mean = torch.tensor([[-3.0], [0.0], [10.0]], device="hpu")
    std = torch.tensor([0.5, 1.0, 2.0, 0.0], device="hpu")
    reps = 20000
    x = torch.normal(mean.expand(3, 4).repeat(1, reps).reshape(3, reps, 4)[:, :, 0:1].reshape(3, reps)
                     .unsqueeze(-1), std)
    assert x.shape == (3, reps, 4)
    xc = x.cpu()
    for i, m in enumerate([-3.0, 0.0, 10.0]):
        for j, s in enumerate([0.5, 1.0, 2.0, 0.0]):
            col = xc[i, :, j]
            assert abs(col.mean().item() - m) < 5 * s / math.sqrt(reps) + 1e-6
            assert abs(col.std().item() - s) < 0.05 * s + 1e-6
    y = torch.normal(mean, 2.0)
    assert y.shape == mean.shape
    z = torch.normal(1.5, std.repeat(N // 4))
    zc = z.cpu().view(-1, 4)
    assert abs(zc[:, 2].mean().item() - 1.5) < 5 * 2 / math.sqrt(N // 4)
    assert (zc[:, 3] == 1.5).all()
    out = torch.empty(0, device="hpu")
    torch.normal(mean, std, out=out)
    assert out.shape == (3, 4)
    torch.hpu.manual_seed(9)
    a = torch.normal(mean, std).cpu()
    torch.hpu.manual_seed(9)
    assert torch.equal(torch.normal(mean, std).cpu(), a)
    assert fallback_counts() == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_multinomial_frequencies(dtype, fallback_counts):
    """Draw frequencies against the row's probabilities (a zero-probability
    category never drawn), for the with-replacement path (cumulative
    distribution search), the one-sample path text generation takes, and
    the without-replacement path (Gumbel top-k)."""
    weights = torch.tensor([[1.0, 0.0, 6.0, 3.0], [2.0, 2.0, 2.0, 2.0], [0.0, 0.0, 0.0, 5.0]], dtype=dtype)
    probs = (weights.double() / weights.double().sum(1, keepdim=True))
    torch.hpu.manual_seed(21)
    draws = torch.multinomial(weights.to("hpu"), N // 4, replacement=True)
    ones = torch.cat([torch.multinomial(weights.to("hpu"), 1) for _ in range(400)], dim=1)
    assert draws.dtype == ones.dtype == torch.int64 and draws.shape == (3, N // 4) and ones.shape == (3, 400)
    for sample in (draws.cpu(), ones.cpu()):
        n = sample.shape[1]
        freq = torch.stack([torch.bincount(r, minlength=4) for r in sample]).double() / n
        bound = 5 * torch.sqrt(probs * (1 - probs) / n) + 1e-12
        assert ((freq - probs).abs() <= bound).all(), (freq, probs)
    # without replacement: distinct categories, every nonzero one before any zero one
    picks = torch.multinomial(weights.to("hpu"), 4).cpu()
    for row, w in zip(picks, weights):
        assert sorted(row.tolist()) == [0, 1, 2, 3]
        nonzero = int((w > 0).sum())
        assert all(w[c] > 0 for c in row[:nonzero])
    # the first pick of a two-category row follows its odds
    first = torch.multinomial(torch.tensor([[1.0, 3.0]], dtype=dtype, device="hpu").expand(4000, 2), 2)[:, 0]
    share = (first.cpu() == 1).double().mean().item()
    assert abs(share - 0.75) < 5 * math.sqrt(0.75 * 0.25 / 4000)
    assert fallback_counts() == {}


def test_multinomial_reproducible_out_and_1d(fallback_counts):
    p = torch.tensor([0.2, 0.5, 0.3], device="hpu")
    for replacement, n in ((True, 50), (False, 3), (True, 1)):
        gen = torch.Generator(device="hpu").manual_seed(4)
        a = torch.multinomial(p, n, replacement, generator=gen).cpu()
        gen.manual_seed(4)
        out = torch.empty(7, dtype=torch.long, device="hpu")
        b = torch.multinomial(p, n, replacement, generator=gen, out=out)
        assert b.data_ptr() == out.data_ptr() and out.shape == (n,)
        assert torch.equal(out.cpu(), a)
        torch.hpu.manual_seed(4)  # the default generator too
        c = torch.multinomial(p, n, replacement).cpu()
        torch.hpu.manual_seed(4)
        assert torch.equal(torch.multinomial(p, n, replacement).cpu(), c)
    # and the stream moves on
    assert not torch.equal(torch.multinomial(p, 50, True).cpu(), torch.multinomial(p, 50, True).cpu())
    assert fallback_counts() == {}


BAD_RANDOM = [
    (lambda d: torch.empty(3, device=d).exponential_(0), RuntimeError, "lambda > 0.0"),
    (lambda d: torch.empty(3, dtype=torch.long, device=d).exponential_(1), RuntimeError, "floating point"),
    (lambda d: torch.empty(3, device=d).cauchy_(0, -1), RuntimeError, "sigma > 0.0"),
    (lambda d: torch.empty(3, dtype=torch.int32, device=d).cauchy_(0, 1), RuntimeError, "floating point"),
    (lambda d: torch.empty(3, device=d).geometric_(1), RuntimeError, r"p to be in \(0, 1\)"),
    (lambda d: torch.empty(3, dtype=torch.bool, device=d).geometric_(0.5), NotImplementedError, "geometric_cpu"),
    (lambda d: torch.empty(3, device=d).log_normal_(0, 0), RuntimeError, "std > 0.0"),
    (lambda d: torch.empty(3, dtype=torch.long, device=d).log_normal_(0, 1), NotImplementedError, "log_normal_cpu"),
    (lambda d: torch.normal(torch.zeros(3, device=d), -torch.ones(3, device=d)), RuntimeError, "all elements of std"),
    (lambda d: torch.normal(torch.zeros(3, device=d), torch.tensor([1.0, math.nan, 1.0], device=d)),
     RuntimeError, "all elements of std"),
    (lambda d: torch.normal(torch.zeros(3, device=d), -1.0), RuntimeError, "std >= 0.0"),
    (lambda d: torch.normal(torch.zeros(3, device=d), torch.ones(4, device=d)), RuntimeError, "must match"),
    (lambda d: torch.normal(torch.zeros(3, dtype=torch.long, device=d), 1.0), NotImplementedError,
     "normal_kernel_cpu"),
    (lambda d: torch.multinomial(torch.zeros(2, device=d), 1), RuntimeError, r"sum of probabilities <= 0"),
    (lambda d: torch.multinomial(torch.tensor([[1.0, 1.0], [0.0, 0.0]], device=d), 3, True), RuntimeError,
     r"sum of probabilities <= 0"),
    (lambda d: torch.multinomial(torch.tensor([1.0, -1.0, 3.0], device=d), 2, True), RuntimeError,
     "probability entry < 0"),
    (lambda d: torch.multinomial(torch.tensor([1.0, math.inf], device=d), 2, True), RuntimeError,
     "infinity or NaN"),
    (lambda d: torch.multinomial(torch.tensor([1.0, math.nan], device=d), 1), RuntimeError,
     "either `inf`, `nan` or element < 0"),
    (lambda d: torch.multinomial(torch.ones(3, device=d), 4), RuntimeError, "without replacement"),
    (lambda d: torch.multinomial(torch.ones(3, device=d), 0), RuntimeError, "n_sample <= 0"),
    (lambda d: torch.multinomial(torch.ones(2, 2, 2, device=d), 1), RuntimeError, "1 or 2 dim"),
    (lambda d: torch.multinomial(torch.ones(3, dtype=torch.long, device=d), 1), RuntimeError,
     "floating-point dtypes"),
]


@pytest.mark.parametrize("case", range(len(BAD_RANDOM)))
def test_bad_random_arguments_raise_as_on_cpu(case):
    fn, exc, text = BAD_RANDOM[case]
    with pytest.raises(exc, match=text):
        fn("cpu")
    with pytest.raises(exc, match=text):
        fn("hpu")
    assert torch.empty(4, device="hpu").exponential_().cpu().min() >= 0  # still usable
