"""Pointwise ops on hpu against the same PyTorch ops on the CPU.

Tolerances: ops whose math is the same as PyTorch's CPU kernels (arithmetic,
comparisons, rounding, sqrt, where, clamp, lerp, addcmul...) are compared
bitwise; transcendental functions (exp, log, tanh, sigmoid, erf, gelu, silu
and their backwards) use polynomial/libm implementations that may differ
from PyTorch's Sleef-based ones in the last bits: float32 rtol 1e-5 (atol
1e-6), float64 rtol 1e-12, and bf16/fp16 one unit in the last place
(they round the float result once, so a last-bit difference in float can
flip the rounding, and PyTorch rounds some intermediates to the dtype): up to
two units in the last place."""
import pytest
import torch

import habana_torch  # noqa: F401

from conftest import assert_close_to_cpu, steps_apart

FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
INTS = [torch.int32, torch.int64, torch.uint8, torch.int8]
EXACT = dict(rtol=0, atol=0)


def tol(dtype, exact):
    """gelu: PyTorch's own erf approximation is off by up to ~1.5e-6 absolute
    (ours is closer to the true value), hence atol 2e-6 for float32."""
    if exact:
        return EXACT
    return {torch.float32: dict(rtol=1e-5, atol=2e-6), torch.float64: dict(rtol=1e-12, atol=1e-14),
            torch.bfloat16: dict(rtol=1.6e-2, atol=1e-5), torch.float16: dict(rtol=2e-3, atol=1e-4)}[dtype]


def make(shape, dtype, low=-4.0, high=4.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    lo = 0 if dtype == torch.uint8 else -20
    return torch.randint(lo, 20, shape, generator=g, dtype=dtype)


SHAPES = [(17,), (3, 5, 7), (), (0, 4), (300, 401)]  # the last one takes the parallel path

# name -> (fn, exact, positive domain)
UNARY_FLOAT = {
    "exp": (torch.exp, False, False), "exp2": (torch.exp2, False, False),
    "log": (torch.log, False, True), "log2": (torch.log2, False, True),
    "log10": (torch.log10, False, True), "log1p": (torch.log1p, False, True),
    # PyTorch's vectorised sqrt is not correctly rounded (ours is): 1 ulp
    "expm1": (torch.expm1, False, False), "sqrt": (torch.sqrt, False, True),
    "rsqrt": (torch.rsqrt, False, True), "reciprocal": (torch.reciprocal, True, False),
    "sin": (torch.sin, False, False), "cos": (torch.cos, False, False), "tan": (torch.tan, False, False),
    "tanh": (torch.tanh, False, False), "sigmoid": (torch.sigmoid, False, False),
    "erf": (torch.erf, False, False), "gelu": (torch.nn.functional.gelu, False, False),
    "gelu_tanh": (lambda x: torch.nn.functional.gelu(x, approximate="tanh"), False, False),
    "silu": (torch.nn.functional.silu, False, False),
    "neg": (torch.neg, True, False), "abs": (torch.abs, True, False), "floor": (torch.floor, True, False),
    "ceil": (torch.ceil, True, False), "round": (torch.round, True, False), "trunc": (torch.trunc, True, False),
    "sign": (torch.sign, True, False), "isnan": (torch.isnan, True, False),
    "logical_not": (torch.logical_not, True, False),
    "leaky_relu": (lambda x: torch.nn.functional.leaky_relu(x, 0.1), True, False),
    "hardtanh": (lambda x: torch.nn.functional.hardtanh(x, -1.5, 2.0), True, False),
    "threshold": (lambda x: torch.nn.functional.threshold(x, 0.5, -3.0), True, False),
    "clamp": (lambda x: torch.clamp(x, -1.0, 2.5), True, False),
    "clamp_min": (lambda x: torch.clamp_min(x, 0.5), True, False),
    "clamp_max": (lambda x: x.clamp(max=0.5), True, False),
    "pow2": (lambda x: torch.pow(x, 2), True, False), "pow3": (lambda x: x ** 3, True, False),
    "pow_half": (lambda x: x ** 0.5, False, True), "pow_m1": (lambda x: x ** -1, True, False),
    "pow_2.5": (lambda x: x ** 2.5, False, True), "rpow": (lambda x: 2.0 ** x, False, False),
    "nan_to_num": (lambda x: torch.nan_to_num(x / 0.0), True, False),
    "eq_s": (lambda x: x == 0.5, True, False), "lt_s": (lambda x: x < 1, True, False),
}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", list(UNARY_FLOAT))
def test_unary_float(name, dtype, shape, fallback_counts):
    fn, exact, positive = UNARY_FLOAT[name]
    if name == "pow3" and dtype in (torch.bfloat16, torch.float16):
        exact = False  # PyTorch rounds x * x to the dtype before the last multiply
    x = make(shape, dtype, 0.01 if positive else -4.0, 4.0)
    assert_close_to_cpu(fn(x.to("hpu")), fn(x), **tol(dtype, exact))
    assert fallback_counts() == {}


UNARY_INT = {
    "neg": torch.neg, "abs": torch.abs, "sign": torch.sign, "bitwise_not": torch.bitwise_not,
    "floor": torch.floor, "clamp": lambda x: x.clamp(-3, 5), "pow2": lambda x: x ** 2,
    "exp": torch.exp, "sqrt_abs": lambda x: torch.sqrt(x.abs()), "eq": lambda x: x.eq(3),
    "logical_not": torch.logical_not, "isnan": torch.isnan,
}


@pytest.mark.parametrize("dtype", INTS + [torch.bool], ids=str)
@pytest.mark.parametrize("name", list(UNARY_INT))
def test_unary_int(name, dtype, fallback_counts):
    if dtype == torch.bool and name in ("neg", "clamp", "pow2", "abs", "floor"):
        pytest.skip("not defined for bool")
    if dtype == torch.bool and name == "sqrt_abs":
        pytest.skip("abs is not defined for bool")
    if dtype == torch.uint8 and name == "neg":
        pytest.skip("wraps")
    x = make((5, 9), dtype)
    fn = UNARY_INT[name]
    exact = name not in ("exp", "sqrt_abs")
    assert_close_to_cpu(fn(x.to("hpu")), fn(x), **(EXACT if exact else tol(torch.float32, False)))
    assert fallback_counts() == {}


BINARY = {
    "maximum": torch.maximum, "minimum": torch.minimum, "remainder": torch.remainder,
    "fmod": torch.fmod, "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le,
    "gt": torch.gt, "ge": torch.ge, "logical_and": torch.logical_and, "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor, "atan2": torch.atan2, "pow": torch.pow,
    "rsub": lambda a, b: torch.rsub(a, b, alpha=2), "add_s": lambda a, b: a + 1.5 * b,
    "max_other": torch.max, "where": lambda a, b: torch.where(a > b, a, b),
    "lerp": lambda a, b: torch.lerp(a, b, 0.3), "lerp_t": lambda a, b: torch.lerp(a, b, b.abs() / 4),
    "clamp_t": lambda a, b: torch.clamp(a, min=b, max=b + 1),
    "clamp_min_t": lambda a, b: torch.clamp(a, min=b),
    "addcmul": lambda a, b: torch.addcmul(a, a, b, value=0.7),
    "addcdiv": lambda a, b: torch.addcdiv(a, a, b, value=-0.3),
    "masked_fill": lambda a, b: a.masked_fill(b > 0, -2.5),
    "tanh_backward": lambda a, b: torch.ops.aten.tanh_backward(a, b),
    "sigmoid_backward": lambda a, b: torch.ops.aten.sigmoid_backward(a, b),
    "silu_backward": lambda a, b: torch.ops.aten.silu_backward(a, b),
    "gelu_backward": lambda a, b: torch.ops.aten.gelu_backward(a, b),
    "gelu_tanh_backward": lambda a, b: torch.ops.aten.gelu_backward(a, b, approximate="tanh"),
    "threshold_backward": lambda a, b: torch.ops.aten.threshold_backward(a, b, 0.0),
}
BINARY_EXACT = {"maximum", "minimum", "remainder", "fmod", "eq", "ne", "lt", "le", "gt", "ge",
                "logical_and", "logical_or", "logical_xor", "rsub", "add_s", "max_other", "where",
                "lerp", "lerp_t", "clamp_t", "clamp_min_t", "addcmul", "addcdiv", "masked_fill",
                "tanh_backward", "sigmoid_backward", "threshold_backward"}
BSHAPES = [((4, 5), (4, 5)), ((3, 1, 6), (5, 1)), ((), (7,)), ((250, 300), (250, 300)), ((0, 3), (3,))]


@pytest.mark.parametrize("shapes", BSHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_float(name, dtype, shapes, fallback_counts):
    a, b = make(shapes[0], dtype, seed=1), make(shapes[1], dtype, seed=2)
    if name in ("pow",):
        a = a.abs() + 0.1
    if name == "lerp_t" or name == "masked_fill" or "backward" in name:
        if shapes[0] != shapes[1]:
            pytest.skip("same-shape op in this test")
    fn = BINARY[name]
    exact = name in BINARY_EXACT
    if name in ("addcdiv", "addcmul", "sigmoid_backward") and dtype in (torch.bfloat16, torch.float16):
        exact = False
    assert_close_to_cpu(fn(a.to("hpu"), b.to("hpu")), fn(a, b), **tol(dtype, exact))
    assert fallback_counts() == {}


BINARY_INT = ["maximum", "minimum", "remainder", "fmod", "eq", "lt", "ge", "logical_and",
              "bitwise_and", "bitwise_or", "bitwise_xor", "pow", "where", "add_s", "clamp_t"]


@pytest.mark.parametrize("dtype", INTS, ids=str)
@pytest.mark.parametrize("name", BINARY_INT)
def test_binary_int(name, dtype, fallback_counts):
    a, b = make((6, 7), dtype, seed=1), make((7,), dtype, seed=2)
    if name in ("remainder", "fmod"):
        b = torch.where(b == 0, torch.ones_like(b), b)
    if name == "pow":
        b = b.abs() % 5
    fn = BINARY.get(name) or getattr(torch, name)
    assert_close_to_cpu(fn(a.to("hpu"), b.to("hpu")), fn(a, b), **EXACT)
    assert fallback_counts() == {}


def test_mixed_dtypes_and_cpu_scalars(fallback_counts):
    a = make((4, 6), torch.bfloat16)
    b = make((6,), torch.float32, seed=3)
    i = make((4, 6), torch.int64)
    s = torch.tensor(0.25)  # CPU 0-dim tensor: a scalar operand
    for fn in (torch.maximum, torch.eq, torch.lt, torch.atan2, torch.remainder):
        assert_close_to_cpu(fn(a.to("hpu"), b.to("hpu")), fn(a, b), **EXACT if fn is not torch.atan2 else {})
    assert_close_to_cpu(torch.maximum(i.to("hpu"), b.to("hpu")), torch.maximum(i, b), **EXACT)
    assert_close_to_cpu(torch.where(i.to("hpu") > 0, a.to("hpu"), s), torch.where(i > 0, a, s), **EXACT)
    assert_close_to_cpu(torch.exp(i.to("hpu")), torch.exp(i))
    assert_close_to_cpu(i.to("hpu") < 2.5, i < 2.5, **EXACT)
    assert_close_to_cpu(torch.pow(i.to("hpu"), 0.5), torch.pow(i, 0.5), equal_nan=True)
    assert fallback_counts() == {}


def test_inplace_out_and_noncontiguous(fallback_counts):
    x = make((8, 10), torch.float32)
    h = x.to("hpu")
    for m in ("exp_", "neg_", "sigmoid_", "tanh_", "floor_", "sqrt_", "abs_", "clamp_"):
        xc, hc = x.clone(), h.clone()
        args = (-1.0, 1.0) if m == "clamp_" else ()
        getattr(xc, m)(*args)
        r = getattr(hc, m)(*args)
        assert r.data_ptr() == hc.data_ptr()
        assert_close_to_cpu(hc, xc, equal_nan=True)
    # transposed and strided views
    xt, ht = x.t(), h.t()
    assert_close_to_cpu(torch.exp(ht), torch.exp(xt))
    assert_close_to_cpu(torch.maximum(ht, h[:, ::2].t().repeat(2, 1)), torch.maximum(xt, x[:, ::2].t().repeat(2, 1)), **EXACT)
    out = torch.empty(0, device="hpu")
    torch.tanh(h, out=out)
    assert_close_to_cpu(out, torch.tanh(x))
    ob = torch.empty(8, 10, dtype=torch.bool, device="hpu")
    torch.gt(h, 0, out=ob)
    assert_close_to_cpu(ob, x > 0, **EXACT)
    # in place on a view
    xv, hv = x.clone(), h.clone()
    xv[:, 1::3].mul_(2).add_(1).exp_()
    hv[:, 1::3].mul_(2).add_(1).exp_()
    assert_close_to_cpu(hv, xv)
    assert fallback_counts() == {}


def test_triu_tril_arange(fallback_counts):
    x = make((3, 5, 6), torch.float32)
    for d in (-2, 0, 1, 4):
        assert_close_to_cpu(torch.triu(x.to("hpu"), d), torch.triu(x, d), **EXACT)
        assert_close_to_cpu(torch.tril(x.to("hpu"), d), torch.tril(x, d), **EXACT)
    h = x.to("hpu").transpose(1, 2)
    assert_close_to_cpu(h.tril_(), x.transpose(1, 2).tril(), **EXACT)
    mask = torch.full((7, 7), float("-inf"), device="hpu").triu(1)
    assert_close_to_cpu(mask, torch.full((7, 7), float("-inf")).triu(1), **EXACT)
    for args, kw in [((10,), {}), ((2, 20, 3), {}), ((0, 1, 0.1), {}), ((5, -3, -0.5), {}),
                     ((100000,), dict(dtype=torch.float32)), ((7,), dict(dtype=torch.bfloat16))]:
        assert_close_to_cpu(torch.arange(*args, device="hpu", **kw), torch.arange(*args, **kw), **EXACT)
    assert fallback_counts() == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_large_contiguous(dtype, fallback_counts):
    x = make((1 << 20) + 3, dtype, -10, 10)
    h = x.to("hpu")
    for fn, exact in ((torch.exp, False), (torch.tanh, False), (torch.nn.functional.gelu, False),
                      (torch.sigmoid, False), (lambda t: t * 3 - 1, True),
                      (lambda t: torch.where(t > 0, t, -t), True), (torch.sqrt, False)):
        assert_close_to_cpu(fn(h), fn(x), equal_nan=True, **tol(dtype, exact))
    assert fallback_counts() == {}


def test_add_mul_streamed_outputs(fallback_counts):
    """float32 add / sub / mul with an output of 16 MiB or more write it with
    non-temporal stores (binary.c, an AVX-512 and an AVX2 body): bit for bit
    as PyTorch, with a misaligned start (the scalar head), an odd tail, a
    scalar operand, alpha and out=; and in place, which keeps normal stores."""
    n = (1 << 22) + 37
    x, y = make(n + 3, torch.float32, seed=1), make(n + 3, torch.float32, seed=2)
    xs, ys = x[3:], y[3:]  # 12 bytes past a 64-byte boundary
    hx, hy = x.to("hpu")[3:], y.to("hpu")[3:]
    for fn in (lambda a, b: a + b, lambda a, b: a * b, lambda a, b: torch.sub(a, b, alpha=0.3),
               lambda a, b: torch.add(a, b, alpha=-1.7), lambda a, b: a * 2.5, lambda a, b: a + 0.1):
        assert_close_to_cpu(fn(hx, hy), fn(xs, ys), **EXACT)
    ho = torch.empty(n, device="hpu")
    torch.add(hx, hy, out=ho)
    assert_close_to_cpu(ho, xs + ys, **EXACT)
    hx.mul_(hy)
    assert_close_to_cpu(hx, xs * ys, **EXACT)
    assert fallback_counts() == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gelu_erf_rational(dtype, fallback_counts):
    """gelu (erf form) runs a rational erf clamped at |x / sqrt(2)| = 3.925:
    a dense sweep across the clamp and the tails, odd sizes (vector tails),
    non-contiguous views, and the special values that must pass through it."""
    x = torch.linspace(-12, 12, 200003, dtype=torch.float64).to(dtype)
    near = torch.tensor([3.925 * 2 ** 0.5], dtype=torch.float64)
    x = torch.cat([x, near + torch.linspace(-1e-3, 1e-3, 1001, dtype=torch.float64).to(dtype),
                   -near + torch.linspace(-1e-3, 1e-3, 1001, dtype=torch.float64).to(dtype),
                   torch.linspace(-1e-4, 1e-4, 999, dtype=torch.float64).to(dtype)]).to(dtype)
    h = x.to("hpu")
    f = torch.nn.functional.gelu
    assert_close_to_cpu(f(h), f(x), **tol(dtype, False))
    # -0 where the product underflows at negative x, as PyTorch's AVX-512
    # kernel gives; its AVX2 kernel gives +0 there (seen on a Zen 3 host), so
    # on such a host the zeros' sign is checked against the rule itself.
    got = f(h).cpu()
    if torch.backends.cpu.get_cpu_capability() == "AVX512":
        assert torch.equal(got.signbit(), f(x).signbit())
    else:
        zeros = got == 0
        assert torch.equal(got[zeros].signbit(), x[zeros] < 0)
    for n in (1, 15, 17, 33, 1023):
        assert_close_to_cpu(f(h[:n]), f(x[:n]), **tol(dtype, False))
    m, mh = x[: 500 * 401].view(500, 401), h[: 500 * 401].view(500, 401)
    assert_close_to_cpu(f(mh.t()), f(m.t()), **tol(dtype, False))
    assert_close_to_cpu(f(mh[::3, 1::2]), f(m[::3, 1::2]), **tol(dtype, False))
    special = torch.tensor([float("nan"), 0.0, -0.0, 1e-30, -1e-30, 1e30, -1e30], dtype=dtype)
    got = f(special.to("hpu")).cpu()
    assert torch.isnan(got[0])
    assert_close_to_cpu(f(special[1:].to("hpu")), f(special[1:]), **tol(dtype, False))
    assert torch.equal(torch.signbit(got[1:3]), torch.tensor([False, True]))
    assert fallback_counts() == {}


def test_bad_input():
    h = torch.randn(3, device="hpu")
    with pytest.raises(RuntimeError, match="same device"):
        torch.maximum(h, torch.randn(3))
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.exp(torch.arange(3, device="hpu"), out=torch.empty(3, dtype=torch.int64, device="hpu"))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        h.maximum_ if hasattr(h, "maximum_") else h[:1].atan2_(h)
    with pytest.raises(RuntimeError, match="Negation"):
        -torch.ones(2, dtype=torch.bool, device="hpu")
    with pytest.raises(RuntimeError, match="approximate"):
        torch.nn.functional.gelu(h, approximate="bad")
    with pytest.raises(RuntimeError, match="negative integer powers"):
        torch.arange(3, device="hpu") ** -1
    with pytest.raises(RuntimeError, match="boolean"):
        h.masked_fill(torch.ones(3, device="hpu"), 0)
    with pytest.raises(RuntimeError, match="(?i)at least one of"):
        torch.clamp(h)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        torch.triu(h)


@pytest.mark.parametrize("fn", ["gelu", "gelu_tanh", "tanh", "silu", "sigmoid", "relu", "leaky_relu"])
def test_gradients(fn, fallback_counts):
    f = {"gelu": torch.nn.functional.gelu,
         "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
         "tanh": torch.tanh, "silu": torch.nn.functional.silu, "sigmoid": torch.sigmoid,
         "relu": torch.relu, "leaky_relu": lambda x: torch.nn.functional.leaky_relu(x, 0.2)}[fn]
    x = make((33, 17), torch.float32, seed=5)
    g = make((33, 17), torch.float32, seed=6)
    xc = x.clone().requires_grad_()
    xh = x.to("hpu").requires_grad_()
    f(xc).backward(g)
    f(xh).backward(g.to("hpu"))
    assert_close_to_cpu(xh.grad, xc.grad, rtol=1e-5, atol=1e-6)
    assert fallback_counts() == {}


F = torch.nn.functional
# Activations with their own hpu kernels (forward and backward), as their
# CPU kernels write them: bf16 / fp16 compute in float and round once, so
# they are the CPU's to one step of the dtype (bit for bit on these inputs
# when this test was written).
ACTIVATIONS = {
    "elu": lambda x: F.elu(x), "elu_alpha": lambda x: F.elu(x, alpha=0.7), "selu": F.selu,
    "celu": lambda x: F.celu(x, alpha=1.3), "softplus": F.softplus,
    "softplus_beta": lambda x: F.softplus(x, beta=2.0, threshold=5.0), "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid, "mish": F.mish, "logsigmoid": F.logsigmoid,
}


def _activation_input(dtype):
    # both sides of every branch point (0, +-3, the softplus threshold),
    # large values, infinities and NaN; first, where PyTorch's vectorised
    # loop takes them (its scalar loop for the last n % 8 or 16 elements
    # sends NaN down the other branch of elu's and hardswish's backward)
    special = torch.tensor([0.0, -0.0, 3.0, -3.0, 2.5, -2.5, 10.0, 20.0, 21.0, -20.0, 1e-8, 90.0, -90.0,
                            float("inf"), float("-inf"), float("nan")], dtype=torch.float64)
    return torch.cat([special, make((1008,), torch.float64, low=-8, high=8, seed=3)]).to(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_forward_and_backward(name, dtype, fallback_counts):
    f = ACTIVATIONS[name]
    x = _activation_input(dtype)
    g = make(x.shape, dtype, seed=4)
    xc, xh = x.clone().requires_grad_(), x.to("hpu").requires_grad_()
    yc, yh = f(xc), f(xh)
    yc.backward(g)
    yh.backward(g.to("hpu"))
    for got, exp in ((yh, yc), (xh.grad, xc.grad)):
        if dtype in (torch.bfloat16, torch.float16):
            assert got.dtype == exp.dtype and torch.equal(got.isnan().cpu(), exp.isnan())
            assert steps_apart(got.detach().cpu(), exp.detach()) <= 1
        else:
            assert_close_to_cpu(got, exp, equal_nan=True, **tol(dtype, False))
    assert fallback_counts() == {}


# Every bf16 / fp16 value through these ops (and their backwards, with a
# fixed random gradient) gives the CPU's bits. Left out, each a last-bit
# difference of the float math before the one rounding, on a few values
# unless said: gelu (PyTorch's erf approximation, also erf itself below
# |x| ~ 1e-7: it returns 0), fp16 sin, mish and log_sigmoid; the backwards
# of gelu, and of fp16 mish and silu.
ALL16_FORWARD = {
    "exp": torch.exp, "log": torch.log, "log1p": torch.log1p, "expm1": torch.expm1, "tanh": torch.tanh,
    "sigmoid": torch.sigmoid, "silu": F.silu, "cos": torch.cos, "rsqrt": torch.rsqrt, "sqrt": torch.sqrt,
    "reciprocal": torch.reciprocal, "pow_half": lambda t: t.pow(0.5), "pow_minus_half": lambda t: t.pow(-0.5),
    "pow_minus_one": lambda t: t.pow(-1), "square": lambda t: t.pow(2), "pow_1_5": lambda t: t.pow(1.5),
    "relu": torch.relu, "elu": F.elu, "selu": F.selu, "softplus": F.softplus, "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid, "leaky_relu": F.leaky_relu, "hardtanh": F.hardtanh, "log2": torch.log2,
    "exp2": torch.exp2, "tan": torch.tan, "log10": torch.log10,
}
ALL16_FORWARD.update({"acos": torch.acos, "atan": torch.atan, "asinh": torch.asinh, "acosh": torch.acosh,
                      "atanh": torch.atanh, "sgn": torch.sgn, "softshrink": F.softshrink,
                      "hardshrink": F.hardshrink})
# bf16 sinh / cosh of +-89 overflow to inf on the CPU (its float sinh goes
# through e^89), hpu gives the finite bf16 result; fp16 asin differs in two.
ALL16_FORWARD_ONLY = {
    torch.bfloat16: {"sin": torch.sin, "mish": F.mish, "logsigmoid": F.logsigmoid, "asin": torch.asin},
    torch.float16: {"sinh": torch.sinh, "cosh": torch.cosh},
}
ALL16_BACKWARD = {"elu": F.elu, "selu": F.selu, "softplus": F.softplus, "hardswish": F.hardswish,
                  "hardsigmoid": F.hardsigmoid, "logsigmoid": F.logsigmoid, "tanh": torch.tanh,
                  "sigmoid": torch.sigmoid, "leaky_relu": F.leaky_relu, "softshrink": F.softshrink,
                  "hardshrink": F.hardshrink}
ALL16_BACKWARD_BF16_ONLY = {"mish": F.mish, "silu": F.silu}
# (x, y) -> elementwise values; checked with their gradients wrt x and y.
ALL16_PAIRS = {"smooth_l1": lambda a, b: F.smooth_l1_loss(a, b, reduction="none", beta=0.7),
               "smooth_l1 beta 0": lambda a, b: F.smooth_l1_loss(a, b, reduction="none", beta=0.0),
               "huber": lambda a, b: F.huber_loss(a, b, reduction="none", delta=1.3),
               "glu": lambda a, b: F.glu(torch.cat([a, b]), 0)}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_every_16_bit_value_matches_cpu(dtype, fallback_counts):
    x = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
    xh = x.to("hpu")
    g = torch.randn(x.shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    forward = dict(ALL16_FORWARD, **ALL16_FORWARD_ONLY[dtype])
    backward = dict(ALL16_BACKWARD, **(ALL16_BACKWARD_BF16_ONLY if dtype == torch.bfloat16 else {}))
    differ = {}
    for name, f in forward.items():
        exp, got = f(x), f(xh).cpu()
        bad = ~((exp == got) | (exp.isnan() & got.isnan()))
        if bad.any():
            differ[name] = int(bad.sum())
    for name, f in backward.items():
        xc, xg = x.clone().requires_grad_(), xh.clone().requires_grad_()
        f(xc).backward(g)
        f(xg).backward(g.to("hpu"))
        exp, got = xc.grad, xg.grad.cpu()
        bad = ~((exp == got) | (exp.isnan() & got.isnan()))
        if bad.any():
            differ[name + " backward"] = int(bad.sum())
    y = torch.randn(x.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    y[::7] = 0
    exp, got = torch.xlogy(y, x), torch.xlogy(y.to("hpu"), xh).cpu()
    if not ((exp == got) | (exp.isnan() & got.isnan())).all():
        differ["xlogy"] = int((~((exp == got) | (exp.isnan() & got.isnan()))).sum())
    # every value against random partners (y as above, with its zeros)
    for name, f in ALL16_PAIRS.items():
        xc, yc = x.clone().requires_grad_(), y.clone().requires_grad_()
        xg, yg = xh.clone().requires_grad_(), y.to("hpu").requires_grad_()
        outc, outg = f(xc, yc), f(xg, yg)
        outc.backward(g)
        outg.backward(g.to("hpu"))
        for what, exp, got in [("", outc.detach(), outg.detach().cpu()), (" grad x", xc.grad, xg.grad.cpu()),
                               (" grad y", yc.grad, yg.grad.cpu())]:
            bad = ~((exp == got) | (exp.isnan() & got.isnan()))
            if bad.any():
                differ[name + what] = int(bad.sum())
    assert differ == {}, f"values that differ from the CPU's: {differ}"
    assert fallback_counts() == {}


# name -> (fn, low, high): the inverse and hyperbolic functions on their domains
TRIG = {"asin": (torch.asin, -0.99, 0.99), "acos": (torch.acos, -0.99, 0.99), "atan": (torch.atan, -6, 6),
        "sinh": (torch.sinh, -6, 6), "cosh": (torch.cosh, -6, 6), "asinh": (torch.asinh, -6, 6),
        "acosh": (torch.acosh, 1.01, 8), "atanh": (torch.atanh, -0.99, 0.99), "sgn": (torch.sgn, -3, 3)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("name", list(TRIG))
def test_trig_and_sgn_with_gradients(name, dtype, fallback_counts):
    f, lo, hi = TRIG[name]
    x = make((41, 13), dtype, low=lo, high=hi, seed=11)
    g = make((41, 13), dtype, seed=12)
    xc, xh = x.clone().requires_grad_(), x.to("hpu").requires_grad_()
    yc, yh = f(xc), f(xh)
    yc.backward(g)
    yh.backward(g.to("hpu"))
    assert_close_to_cpu(yh, yc.detach(), **tol(dtype, False))
    assert_close_to_cpu(xh.grad, xc.grad, **tol(dtype, False))
    # integers promote to the default float, as on the CPU
    if name != "sgn":
        assert_close_to_cpu(f(torch.arange(1, 4, device="hpu")), f(torch.arange(1, 4)), equal_nan=True,
                            **tol(torch.float32, False))
    assert fallback_counts() == {}  # sgn's zero gradient is made on the card too


def test_xlogy_kl_div(fallback_counts):
    x, y = make((9, 8), torch.float32, low=0, high=3, seed=1), make((9, 8), torch.float32, low=0, high=3, seed=2)
    x[0, :3] = 0
    y[1, :2] = 0
    y[2, 0] = float("nan")
    h = lambda t: t.to("hpu")
    assert_close_to_cpu(torch.xlogy(h(x), h(y)), torch.xlogy(x, y), equal_nan=True, rtol=1e-6, atol=1e-6)
    assert_close_to_cpu(torch.xlogy(h(x), 2.5), torch.xlogy(x, 2.5), rtol=1e-6, atol=1e-6)
    out = torch.empty(0, device="hpu")
    torch.xlogy(h(x), h(y), out=out)
    assert_close_to_cpu(out, torch.xlogy(x, y), equal_nan=True, rtol=1e-6, atol=1e-6)
    p, q = torch.log_softmax(x, 1), torch.softmax(y.nan_to_num(), 1)
    assert_close_to_cpu(F.kl_div(h(p), h(q), reduction="batchmean"), F.kl_div(p, q, reduction="batchmean"),
                        rtol=1e-5, atol=1e-6)
    assert fallback_counts() == {}


def test_activation_variants_and_errors(fallback_counts):
    x = make((6, 7), torch.float32, seed=8)
    h = x.to("hpu")
    for fn in (F.elu, F.hardswish, F.hardsigmoid, F.mish, F.selu, F.celu):
        # in place, and on a non-contiguous view
        assert_close_to_cpu(fn(h.clone(), inplace=True), fn(x.clone(), inplace=True), rtol=1e-5, atol=1e-6)
        assert_close_to_cpu(fn(h.t()), fn(x.t()), rtol=1e-5, atol=1e-6)
    out = torch.empty(0, device="hpu")
    torch.ops.aten.softplus.out(h, 2.0, 5.0, out=out)
    assert_close_to_cpu(out, F.softplus(x, 2.0, 5.0), rtol=1e-5, atol=1e-6)
    out, buf = torch.ops.aten.log_sigmoid_forward(h)
    assert_close_to_cpu(out, F.logsigmoid(x), rtol=1e-5, atol=1e-6)
    # elu's backward from the result (an in-place forward inside autograd)
    xc, xh = x.clone().requires_grad_(), h.clone().requires_grad_()
    F.elu(xc * 1, alpha=0.5, inplace=True).sum().backward()
    F.elu(xh * 1, alpha=0.5, inplace=True).sum().backward()
    assert_close_to_cpu(xh.grad, xc.grad, rtol=1e-5, atol=1e-6)
    assert fallback_counts() == {}
    with pytest.raises(RuntimeError, match="negative slope"):
        torch.ops.aten.elu_backward(h, -1.0, 1.0, 1.0, True, h)
    for fn, cpu_name in ((F.elu, "elu_cpu"), (F.softplus, "softplus_cpu"), (F.hardswish, "hardswish_cpu"),
                         (F.mish, "mish_cpu"), (F.logsigmoid, "log_sigmoid_cpu")):
        with pytest.raises(NotImplementedError, match=cpu_name):
            fn(torch.arange(3, device="hpu"))


def _model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.Linear(32, 32),
                               torch.nn.Tanh(), torch.nn.Linear(32, 4))


POINTWISE_PREFIXES = ("aten::_foreach", "aten::_fused", "aten::add", "aten::mul", "aten::div",
                      "aten::sub", "aten::sqrt", "aten::lerp", "aten::addc", "aten::maximum",
                      "aten::pow", "aten::neg", "aten::clamp", "aten::reciprocal", "aten::gelu",
                      "aten::tanh", "aten::where", "aten::eq", "aten::ne", "aten::lt", "aten::ge")


@pytest.mark.parametrize("opt", [
    ("AdamW", dict(foreach=False)), ("AdamW", dict(foreach=True)), ("AdamW", dict(fused=True)),
    ("Adam", dict(foreach=False)), ("Adam", dict(foreach=True)), ("Adam", dict(fused=True)),
    ("Adam", dict(fused=True, amsgrad=True, weight_decay=0.1)),
    ("AdamW", dict(foreach=True, amsgrad=True)),
    ("SGD", dict(foreach=False, momentum=0.9)), ("SGD", dict(foreach=True, momentum=0.9, nesterov=True)),
    ("SGD", dict(fused=True, momentum=0.9, weight_decay=0.01)), ("SGD", dict(fused=True)),
], ids=lambda o: o[0] + "-" + "-".join(f"{k}={v}" for k, v in o[1].items()))
def test_optimizers(opt, fallback_counts):
    """5 steps on hpu and on the CPU (same optimizer settings) with gradient
    clipping: parameters within rtol 1e-5 / atol 1e-6 (matmul and reduction
    results may differ in the last bits between the two)."""
    name, kw = opt
    x = make((16, 12), torch.float32, seed=3)
    y = make((16, 4), torch.float32, seed=4)
    params = []
    for dev in ("cpu", "hpu"):
        m = _model().to(dev)
        o = getattr(torch.optim, name)(m.parameters(), lr=1e-2, **kw)
        for _ in range(5):
            o.zero_grad()
            loss = ((m(x.to(dev)) - y.to(dev)) ** 2).mean()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
            o.step()
        params.append([p.detach() for p in m.parameters()])
    for pc, ph in zip(*params):
        assert_close_to_cpu(ph, pc, rtol=1e-5, atol=1e-6)
    bad = {k: v for k, v in fallback_counts().items() if k.startswith(POINTWISE_PREFIXES)}
    assert bad == {}


def test_fused_adam_bf16_and_grad_scale(fallback_counts):
    ps = [make((37, 5), torch.bfloat16, seed=s) for s in range(3)]
    gs = [make((37, 5), torch.bfloat16, seed=10 + s) for s in range(3)]
    res = []
    for dev in ("cpu", "hpu"):
        p = [t.clone().to(dev) for t in ps]  # updated in place
        g = [t.clone().to(dev) for t in gs]
        ea = [torch.zeros_like(t) for t in p]
        eas = [torch.zeros_like(t) for t in p]
        steps = [torch.tensor(3.0, device=dev) for _ in p]
        scale = torch.tensor(2.0, device=dev)
        inf = torch.tensor(0.0, device=dev)
        torch._fused_adamw_(p, g, ea, eas, [], steps, lr=0.01, beta1=0.9, beta2=0.99,
                            weight_decay=0.1, eps=1e-8, amsgrad=False, maximize=False,
                            grad_scale=scale, found_inf=inf)
        res.append(p + g + ea + eas)
    for c, h in zip(*res):
        assert_close_to_cpu(h, c, **tol(torch.bfloat16, False))
    assert fallback_counts() == {}


LOSSES = {"smooth_l1": lambda a, b, r: F.smooth_l1_loss(a, b, reduction=r, beta=0.5),
          "huber": lambda a, b, r: F.huber_loss(a, b, reduction=r, delta=0.8)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("name", list(LOSSES))
def test_smooth_l1_and_huber_losses(name, reduction, dtype, fallback_counts):
    f = LOSSES[name]
    x, t = make((37, 5), dtype, seed=3), make((37, 5), dtype, seed=4)
    xc, xh = x.clone().requires_grad_(), x.to("hpu").requires_grad_()
    lc, lh = f(xc, t, reduction), f(xh, t.to("hpu"), reduction)
    g = make(lc.shape, dtype, seed=5)
    lc.backward(g)
    lh.backward(g.to("hpu"))
    loose = dict(rtol=2e-2, atol=1e-2) if dtype == torch.bfloat16 and reduction != "none" else tol(dtype, False)
    assert_close_to_cpu(lh, lc.detach(), **loose)
    assert_close_to_cpu(xh.grad, xc.grad, **tol(dtype, False))
    # a broadcast target, and out=
    out = torch.empty(0, dtype=dtype, device="hpu")
    op = getattr(torch.ops.aten, name + "_loss").out
    op(x.to("hpu"), t[:1].to("hpu"), 0, 0.5, out=out)
    assert_close_to_cpu(out, getattr(torch.ops.aten, name + "_loss")(x, t[:1], 0, 0.5), **tol(dtype, False))
    assert fallback_counts() == {}


def test_shrink_and_glu_with_gradients(fallback_counts):
    x = make((6, 10), torch.float32, seed=6)
    for f in (lambda t: F.softshrink(t, 0.7), lambda t: F.hardshrink(t, 1.5), lambda t: F.glu(t, 1),
              lambda t: F.glu(t.t(), 0), lambda t: F.glu(t, 0)):
        xc, xh = x.clone().requires_grad_(), x.to("hpu").requires_grad_()
        yc, yh = f(xc), f(xh)
        g = make(yc.shape, torch.float32, seed=7)
        yc.backward(g)
        yh.backward(g.to("hpu"))
        assert_close_to_cpu(yh, yc.detach(), **tol(torch.float32, False))
        assert_close_to_cpu(xh.grad, xc.grad, **tol(torch.float32, False))
    out = torch.empty(0, device="hpu")
    torch.ops.aten.glu.out(x.to("hpu"), -1, out=out)
    assert_close_to_cpu(out, F.glu(x, -1), **tol(torch.float32, False))
    torch.ops.aten.softshrink.out(x.to("hpu"), 0.5, out=out)
    assert_close_to_cpu(out, F.softshrink(x, 0.5), rtol=0, atol=0)
    assert fallback_counts() == {}


def test_losses_shrink_glu_bad_input():
    h = torch.randn(4, 3, device="hpu")
    i = torch.arange(4, device="hpu")
    cases = [
        (RuntimeError, "does not support negative values for beta", lambda: F.smooth_l1_loss(h, h, beta=-1.0)),
        (RuntimeError, "does not support non-positive values for delta", lambda: F.huber_loss(h, h, delta=0.0)),
        (RuntimeError, r"lambda must be in range \[0, 3.40282e\+38\] for input dtype Float, but found -1",
         lambda: F.softshrink(h, -1.0)),
        (RuntimeError, "Halving dimension must be even, but dimension 1 is size 3", lambda: F.glu(h, 1)),
        (RuntimeError, "glu does not support scalars", lambda: F.glu(torch.tensor(1.0, device="hpu"))),
        (NotImplementedError, "smooth_l1_cpu", lambda: torch.ops.aten.smooth_l1_loss(i, i, 1, 1.0)),
        (NotImplementedError, "huber_cpu", lambda: torch.ops.aten.huber_loss(i, i, 1, 1.0)),
        (NotImplementedError, "softshrink_check", lambda: F.softshrink(i)),
        (NotImplementedError, "hardshrink_cpu", lambda: F.hardshrink(i)),
        (NotImplementedError, "glu_cpu", lambda: F.glu(i)),
        (RuntimeError, "same device", lambda: F.smooth_l1_loss(h, h.cpu())),
    ]
    for exc, msg, f in cases:
        with pytest.raises(exc, match=msg):
            f()
    # the card stays usable
    assert_close_to_cpu(F.softshrink(h, 0.5), F.softshrink(h.cpu(), 0.5), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_binary_cross_entropy_and_grad(dtype, reduction, fallback_counts):
    # bf16 / fp16: every value of [0, 1] (a multiple of 16 of them, so that
    # none falls in the CPU's scalar tail loop), bit for bit, loss and gradient
    if dtype in (torch.bfloat16, torch.float16):
        every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
        x = every[(every >= 0) & (every <= 1)]
        x = x[: x.numel() // 16 * 16]
    else:
        x = make((4096,), dtype, low=0, high=1, seed=8)
        x[:2] = torch.tensor([0.0, 1.0])
    n = x.numel()
    y = make((n,), dtype, low=0, high=1, seed=9)
    y[::5], y[1::5] = 0, 1
    w = make((n,), dtype, low=0, high=2, seed=10)
    for weight in (None, w):
        xc, xh = x.clone().requires_grad_(), x.to("hpu").requires_grad_()
        lc = F.binary_cross_entropy(xc, y, weight=weight, reduction=reduction)
        lh = F.binary_cross_entropy(xh, y.to("hpu"), weight=None if weight is None else weight.to("hpu"),
                                    reduction=reduction)
        g = make(lc.shape, dtype, seed=11)
        lc.backward(g)
        lh.backward(g.to("hpu"))
        exact = dtype in (torch.bfloat16, torch.float16)
        # (x = 0 with y = 0: 0 / 0 in fp16, whose 1e-12 floor is 0, as on the CPU)
        assert_close_to_cpu(lh, lc.detach(), equal_nan=True,
                            **(EXACT if exact and reduction == "none" else tol(dtype, False)))
        assert_close_to_cpu(xh.grad, xc.grad, equal_nan=True, **(EXACT if exact else tol(dtype, False)))
    assert fallback_counts() == {}


def test_binary_cross_entropy_bad_input():
    h = torch.tensor([0.25, 0.5, 0.75], device="hpu")
    # out of [0, 1]: raised when the result is waited for, as the CPU's check does
    for x, t, what in [(h + 1, h, "input"), (h, h - 1, "target"), (h * float("nan"), h, "input")]:
        with pytest.raises(RuntimeError, match=f"all elements of {what} should be between 0 and 1"):
            F.binary_cross_entropy(x, t).item()
    with pytest.raises(RuntimeError, match="Found dtype Double but expected Float"):
        torch.ops.aten.binary_cross_entropy(h, h.double())
    with pytest.raises(NotImplementedError, match="binary_cross_entropy"):
        torch.ops.aten.binary_cross_entropy(h.long(), h.long())
    # the card stays usable; out= and a broadcast target
    out = torch.empty(0, device="hpu")
    torch.ops.aten.binary_cross_entropy.out(h.view(3, 1).expand(3, 2), h[:2], None, 0, out=out)
    c = h.cpu()
    assert_close_to_cpu(out, torch.ops.aten.binary_cross_entropy(c.view(3, 1).expand(3, 2), c[:2], None, 0),
                        rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_prelu_with_gradients(dtype, fallback_counts):
    x = make((3, 4, 5), dtype, seed=12)
    x[0, 0, :3] = torch.tensor([0.0, float("nan"), -0.0])
    for w in (make((1,), dtype, seed=13), make((4,), dtype, seed=14)):
        xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
        xh, wh = x.to("hpu").requires_grad_(), w.to("hpu").requires_grad_()
        yc, yh = F.prelu(xc, wc), F.prelu(xh, wh)
        g = make(yc.shape, dtype, seed=15)
        yc.backward(g)
        yh.backward(g.to("hpu"))
        assert_close_to_cpu(yh, yc.detach(), equal_nan=True, **EXACT)
        assert_close_to_cpu(xh.grad, xc.grad, equal_nan=True, **EXACT)
        assert_close_to_cpu(wh.grad, wc.grad, equal_nan=True, **tol(dtype, False))
    assert fallback_counts() == {}
    with pytest.raises(RuntimeError, match="Mismatch of parameter numbers and input channel size"):
        F.prelu(x.to("hpu"), torch.ones(2, dtype=dtype, device="hpu"))
    with pytest.raises(NotImplementedError, match="prelu_cpu"):
        torch.ops.aten._prelu_kernel(torch.arange(3, device="hpu"), torch.arange(3, device="hpu"))


def test_rrelu_evaluation_and_training(fallback_counts):
    x = make((6, 50), torch.float32, seed=16)
    x[0, :3] = torch.tensor([0.0, float("nan"), -0.0])
    xh = x.to("hpu")
    # evaluation: leaky_relu with the mean slope, bit for bit; noise untouched
    noise = torch.full((6, 50), 7.0, device="hpu")
    got = torch.ops.aten.rrelu_with_noise(xh, noise, 0.1, 0.3, False)
    assert_close_to_cpu(got, torch.ops.aten.rrelu_with_noise(x, torch.empty(6, 50), 0.1, 0.3, False),
                        equal_nan=True, **EXACT)
    assert (noise.cpu() == 7).all()
    # training: draws (the card's, not the CPU's) in [lower, upper] where x <= 0, 1 elsewhere
    xg = xh.clone().requires_grad_()
    y = F.rrelu(xg, 0.1, 0.3, training=True)
    factor = torch.where(x <= 0, y.detach().cpu() / x, torch.ones(()))
    neg = (x < 0)
    assert ((factor[neg] >= 0.1) & (factor[neg] <= 0.3)).all()
    assert torch.equal(y.detach().cpu()[x > 0], x[x > 0]) and y.detach().cpu()[0, 1].isnan()
    y.backward(torch.ones(6, 50, device="hpu"))
    grad = xg.grad.cpu()
    assert torch.allclose(grad[neg], factor[neg]) and (grad[x > 0] == 1).all()
    # in place, and the draws differ from one call to the next
    a = xh.clone()
    F.rrelu(a, 0.1, 0.3, training=True, inplace=True)
    assert not torch.equal(a.cpu()[neg], y.detach().cpu()[neg])
    assert fallback_counts() == {}
