"""Special functions (csrc/include/hpu/ops_special.def) on hpu against the
same PyTorch ops on the CPU, with no CPU fallback.

Tolerances (docs/NUMERICS.md, special functions): float32 rtol 1e-4 / atol
1e-5, OpInfo's (the kernels compute some float ops in double and round once
where the CPU computes in float: near a zero of a Bessel function or a
polynomial the CPU's float result is itself that far off), float64 rtol
1e-10 / atol 1e-12 (the CPU's series for trigamma and its asymptotic
forms are summed in another order), bf16 / fp16 one step of the dtype.
logit and entr on bf16 / fp16 go through the counted CPU fallback (the CPU
rounds their intermediate steps), so they are exempt from the no-fallback
check."""
import math

import pytest
import torch

import habana_torch  # noqa: F401

from conftest import steps_apart

S = torch.special
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]

# name -> (fn, low, high, takes bf16 / fp16)
UNARY = {
    "lgamma": (torch.lgamma, -6, 12, True),
    "digamma": (torch.digamma, -6, 12, True),
    "polygamma_0": (lambda x: torch.polygamma(0, x), -6, 12, True),
    "polygamma_1": (lambda x: torch.polygamma(1, x), -6, 12, True),
    "polygamma_3": (lambda x: torch.polygamma(3, x), 0.1, 12, True),
    "erfc": (torch.erfc, -6, 6, True),
    "erfinv": (torch.erfinv, -1, 1, True),
    "erfcx": (S.erfcx, -8, 60, False),
    "ndtri": (S.ndtri, 0, 1, False),
    "log_ndtr": (S.log_ndtr, -40, 8, False),
    "i0": (torch.i0, -20, 20, True),
    "i0e": (S.i0e, -20, 20, True),
    "i1": (S.i1, -20, 20, True),
    "i1e": (S.i1e, -20, 20, True),
    "sinc": (torch.sinc, -9, 9, True),
    "logit": (torch.logit, -0.2, 1.2, True),
    "logit_eps": (lambda x: torch.logit(x, eps=0.05), -0.2, 1.2, True),
    "entr": (S.entr, -1, 4, True),
    "spherical_bessel_j0": (S.spherical_bessel_j0, -20, 20, False),
    "airy_ai": (S.airy_ai, -12, 12, False),
    "bessel_j0": (S.bessel_j0, -30, 30, False),
    "bessel_j1": (S.bessel_j1, -30, 30, False),
    "bessel_y0": (S.bessel_y0, -1, 30, False),
    "bessel_y1": (S.bessel_y1, -1, 30, False),
    "modified_bessel_i0": (S.modified_bessel_i0, -20, 20, False),
    "modified_bessel_i1": (S.modified_bessel_i1, -20, 20, False),
    "modified_bessel_k0": (S.modified_bessel_k0, -1, 20, False),
    "modified_bessel_k1": (S.modified_bessel_k1, -1, 20, False),
    "scaled_modified_bessel_k0": (S.scaled_modified_bessel_k0, -1, 20, False),
    "scaled_modified_bessel_k1": (S.scaled_modified_bessel_k1, -1, 20, False),
}

# name -> (fn, x range, second operand range, takes bf16 / fp16)
BINARY = {
    "xlog1py": (S.xlog1py, (-3, 3), (-0.9, 5), True),
    "zeta": (S.zeta, (1, 8), (-3, 5), False),
    "chebyshev_t": (S.chebyshev_polynomial_t, (-1.2, 1.2), (-1, 12), False),
    "chebyshev_u": (S.chebyshev_polynomial_u, (-1.2, 1.2), (-1, 12), False),
    "chebyshev_v": (S.chebyshev_polynomial_v, (-1.2, 1.2), (-1, 12), False),
    "chebyshev_w": (S.chebyshev_polynomial_w, (-1.2, 1.2), (-1, 12), False),
    "shifted_chebyshev_t": (S.shifted_chebyshev_polynomial_t, (-0.2, 1.2), (-1, 12), False),
    "shifted_chebyshev_u": (S.shifted_chebyshev_polynomial_u, (-0.2, 1.2), (-1, 12), False),
    "shifted_chebyshev_v": (S.shifted_chebyshev_polynomial_v, (-0.2, 1.2), (-1, 12), False),
    "shifted_chebyshev_w": (S.shifted_chebyshev_polynomial_w, (-0.2, 1.2), (-1, 12), False),
    "hermite_h": (S.hermite_polynomial_h, (-3, 3), (-1, 10), False),
    "hermite_he": (S.hermite_polynomial_he, (-3, 3), (-1, 10), False),
    "laguerre_l": (S.laguerre_polynomial_l, (-3, 6), (-1, 10), False),
    "legendre_p": (S.legendre_polynomial_p, (-1.2, 1.2), (-1, 10), False),
}

# values on and around poles, domain limits, zeros, infinities
EDGES = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, -3.0, 0.5, -0.5, 1e-30, -1e-30, 1e-6, 1 - 1e-7,
         1.4616321449683622, 8.0, -8.0, 50.0, 60.0, -26.0, -30.0, 1e5, -1e5, 1e300,
         math.inf, -math.inf, math.nan]


def make(shape, dtype, low, high, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype)


def check(got, exp, steps=1, rtol32=1e-4):
    assert got.device.type == "hpu"
    got = got.cpu()
    assert got.dtype == exp.dtype and got.shape == exp.shape
    if exp.dtype in (torch.bfloat16, torch.float16):
        assert steps_apart(got, exp) <= steps
        return
    tol = {torch.float32: dict(rtol=rtol32, atol=1e-5), torch.float64: dict(rtol=1e-10, atol=1e-12)}
    torch.testing.assert_close(got, exp, equal_nan=True, **tol[exp.dtype])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_cpu(name, dtype, fallback_counts):
    f, low, high, reduced = UNARY[name]
    if dtype in (torch.bfloat16, torch.float16) and not reduced:
        with pytest.raises(NotImplementedError):
            f(torch.ones(3, dtype=dtype))
        with pytest.raises(NotImplementedError):
            f(torch.ones(3, dtype=dtype, device="hpu"))
        return
    # 0-dim, empty, non-contiguous, and large enough to run multi-threaded
    # polygamma n >= 2: zeta in double where the CPU mixes float and the
    # reduced dtype: up to three steps (fp16, near its subnormals)
    steps = 3 if name == "polygamma_3" else 1
    for x in [make((), dtype, low, high), make((0, 3), dtype, low, high),
              make((7, 9), dtype, low, high).t(), make((300, 401), dtype, low, high)]:
        check(f(x.to("hpu")), f(x), steps)
    edges = torch.tensor(EDGES, dtype=torch.float64)
    if dtype != torch.float64:  # float loses the phase of oscillating functions out there
        edges = edges[~(edges.abs() > 1e4) | edges.isinf()]
    edges = edges.to(dtype)
    check(f(edges.to("hpu")), f(edges), steps)
    if not (name.startswith(("logit", "entr", "i0e")) and dtype in (torch.bfloat16, torch.float16)):
        assert fallback_counts() == {}


@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfc", "i0", "i1e", "entr", "ndtri"])
def test_integer_inputs_promote(name, fallback_counts):
    f = UNARY[name][0]
    for dtype in (torch.int64, torch.int32, torch.uint8, torch.bool):
        x = torch.arange(-3, 5).to(dtype) if dtype != torch.bool else torch.tensor([True, False])
        check(f(x.to("hpu")), f(x))
    assert fallback_counts() == {}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_matches_cpu(name, dtype, fallback_counts):
    f, (xl, xh), (nl, nh), reduced = BINARY[name]
    x, n = make((6, 1, 5), dtype, xl, xh), make((4, 1), dtype, nl, nh, seed=1)
    if name != "xlog1py" and name != "zeta":
        n = n.round()  # degrees; a fraction truncates
        n[0, 0] = 2.5
    if dtype in (torch.bfloat16, torch.float16) and not reduced:
        with pytest.raises(NotImplementedError):
            f(x.to("hpu"), n.to("hpu"))
        return
    # Hermite values reach 1e5 with cancellation: the CPU's float recurrence
    # is itself off by up to ~1e-3 relative there
    r = 2e-3 if name.startswith("hermite") else 1e-4
    check(f(x.to("hpu"), n.to("hpu")), f(x, n), rtol32=r)        # broadcast
    check(f(x.to("hpu"), n[1, 0].item()), f(x, n[1, 0].item()), rtol32=r)  # Scalar operand
    check(f(x[0, 0, 1].item(), n.to("hpu")), f(x[0, 0, 1].item(), n), rtol32=r)
    big, bign = make((300, 401), dtype, xl, xh), make((300, 401), dtype, nl, nh, seed=2)
    check(f(big.to("hpu"), bign.to("hpu")), f(big, bign), rtol32=r)
    edges = torch.tensor(EDGES, dtype=torch.float64).to(dtype)
    for other in [edges, edges.flip(0), torch.full_like(edges, 3.0), torch.full_like(edges, 7.0)]:
        check(f(edges.to("hpu"), other.to("hpu")), f(edges, other), rtol32=r)
    assert fallback_counts() == {}


def test_out_and_inplace(fallback_counts):
    x = make((5, 6), torch.float32, 0.1, 0.9)
    for f_ in ["lgamma_", "digamma_", "erfc_", "erfinv_", "i0_", "sinc_", "logit_"]:
        exp = getattr(x.clone(), f_)()
        got = x.to("hpu")
        getattr(got, f_)()
        check(got, exp)
    out = torch.empty(0, device="hpu")
    torch.polygamma(2, x.to("hpu"), out=out)
    check(out, torch.polygamma(2, x))
    out = torch.empty(0, device="hpu")
    S.zeta(x.to("hpu") + 1.5, x.to("hpu"), out=out)
    check(out, S.zeta(x + 1.5, x))
    out = torch.empty(0, device="hpu")
    S.i1(x.to("hpu"), out=out)
    check(out, S.i1(x))
    assert fallback_counts() == {}


@pytest.mark.parametrize("name", ["lgamma", "digamma", "polygamma_1", "erfc", "erfinv", "i0", "i0e",
                                  "i1", "i1e", "sinc", "logit", "logit_eps", "entr", "erfcx",
                                  "log_ndtr", "ndtri"])
def test_gradients_match_cpu(name, fallback_counts):
    f, low, high, _ = UNARY[name]
    if name.startswith("logit"):
        low, high = 0.01, 0.99
    x = make((40, 30), torch.float64, low, high)
    g = torch.randn(x.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    xc, xh = x.clone().requires_grad_(), x.to("hpu").requires_grad_()
    f(xc).backward(g)
    f(xh).backward(g.to("hpu"))
    check(xh.grad, xc.grad)
    assert fallback_counts() == {}


def test_logit_backward_edges(fallback_counts):
    x = torch.tensor([-0.5, 0.0, 0.02, 0.5, 0.98, 1.0, 1.5, math.nan], dtype=torch.float64)
    g = torch.linspace(-2, 2, x.numel(), dtype=torch.float64)
    for eps in [None, 0.05, 0.0]:
        exp = torch.ops.aten.logit_backward(g, x, eps)
        # At x = NaN PyTorch's CPU answers by its kernel: NaN from the
        # scalar and AVX-512 loops (the formula's), 0 from the AVX2 loop
        # when eps is given (ATEN_CPU_CAPABILITY=avx2). The card follows
        # the formula on every CPU.
        exp = torch.where(x.isnan(), math.nan, exp)
        got = torch.ops.aten.logit_backward(g.to("hpu"), x.to("hpu"), eps)
        check(got, exp)
    assert fallback_counts() == {}


def test_binary_gradients_match_cpu(fallback_counts):
    x = make((20, 30), torch.float64, -2, 2)
    y = make((20, 30), torch.float64, -0.5, 3, seed=1)
    xc, yc = x.clone().requires_grad_(), y.clone().requires_grad_()
    xh, yh = x.to("hpu").requires_grad_(), y.to("hpu").requires_grad_()
    S.xlog1py(xc, yc).sum().backward()
    S.xlog1py(xh, yh).sum().backward()
    check(xh.grad, xc.grad)
    check(yh.grad, yc.grad)
    assert fallback_counts() == {}


def test_mvlgamma_runs_on_the_card(fallback_counts):
    x = make((4, 5), torch.float32, 2.5, 6)
    for p in (1, 3, 5):
        check(torch.mvlgamma(x.to("hpu"), p), torch.mvlgamma(x, p))
    assert fallback_counts() == {}


# The CPU computes these in float for bfloat16 / float16 and rounds once: every
# value of the dtype, against the CPU, bit for bit.
ALL16 = {
    "digamma": torch.digamma, "erfinv": torch.erfinv, "sinc": torch.sinc, "erfc": torch.erfc,
    "i0": torch.i0, "polygamma_1": lambda x: torch.polygamma(1, x),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_every_16_bit_value_matches_cpu(dtype, fallback_counts):
    x = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
    xh = x.to("hpu")
    differ = {}
    for name, f in ALL16.items():
        exp, got = f(x), f(xh).cpu()
        bad = ~((exp == got) | (exp.isnan() & got.isnan()))
        if bad.any():
            differ[name] = int(bad.sum())
    assert differ == {}, f"values that differ from the CPU's: {differ}"
    assert fallback_counts() == {}


def test_bad_arguments_raise_as_on_cpu():
    x = torch.rand(3)
    for dev in ("cpu", "hpu"):
        with pytest.raises(RuntimeError, match="does not support negative n"):
            torch.polygamma(-1, x.to(dev))
        with pytest.raises(NotImplementedError, match='"zeta_cpu" not implemented for \'Half\''):
            S.zeta(x.to(dev).half(), x.to(dev).half())
        with pytest.raises(NotImplementedError, match='"ndtri_cpu" not implemented for \'BFloat16\''):
            S.ndtri(x.to(dev).bfloat16())
        with pytest.raises(RuntimeError, match="can't be cast"):
            torch.lgamma(x.to(dev), out=torch.empty(3, dtype=torch.int64, device=dev))
    with pytest.raises(RuntimeError, match="same device"):
        S.xlog1py(torch.rand(3, device="hpu"), torch.rand(3))
    # the process stays usable
    check(torch.lgamma(x.to("hpu")), torch.lgamma(x))
