"""New outputs of elementwise ops have the strides the CPU gives them
(TensorIterator's rule), so views, reshapes and in-place writes on results
alias or copy the same way on both devices."""
import pytest
import torch

import habana_torch  # noqa: F401


def _layouts():
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    return {
        "contiguous": r(6, 8),
        "transposed": r(8, 6).t(),
        "gapped": r(6, 16)[:, ::2],
        "gapped_transposed": r(16, 6)[::2].t(),
        "channels_last": r(2, 3, 4, 5).to(memory_format=torch.channels_last),
        "permuted3d": r(4, 5, 6).permute(2, 0, 1),
        "expanded": r(6, 1).expand(6, 8),
        "size1_odd_stride": r(300).as_strided((3, 1), (1, 100)),
    }


LAYOUTS = _layouts()

UNARY = {
    "relu": torch.relu, "neg": torch.neg, "exp": torch.exp, "abs": torch.abs,
    "sigmoid": torch.sigmoid, "tanh": torch.tanh, "add_scalar": lambda t: t + 1.5,
    "mul_scalar": lambda t: t * 3, "pow2": lambda t: t.pow(2), "to_bf16": lambda t: t.to(torch.bfloat16),
    "clamp": lambda t: t.clamp(-0.5, 0.5), "gt0": lambda t: t > 0,
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("op", list(UNARY))
def test_unary_output_strides_match_cpu(op, layout):
    x = LAYOUTS[layout]
    cpu = UNARY[op](x)
    hpu = UNARY[op](x.to("hpu") if x.is_contiguous() else _same_strides_on_hpu(x))
    assert hpu.shape == cpu.shape
    assert hpu.stride() == cpu.stride(), f"{op} on {layout} {tuple(x.stride())}"
    torch.testing.assert_close(hpu.cpu(), cpu, rtol=1e-5, atol=2e-6)


BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "maximum": torch.maximum, "lt": torch.lt,
}

PAIRS = [
    ("transposed", "contiguous"), ("contiguous", "transposed"), ("transposed", "transposed"),
    ("channels_last", "channels_last"), ("gapped", "transposed"), ("expanded", "transposed"),
]


@pytest.mark.parametrize("pair", PAIRS, ids=["-".join(p) for p in PAIRS])
@pytest.mark.parametrize("op", list(BINARY))
def test_binary_output_strides_match_cpu(op, pair):
    a, b = LAYOUTS[pair[0]], LAYOUTS[pair[1]]
    cpu = BINARY[op](a, b)
    hpu = BINARY[op](_same_strides_on_hpu(a), _same_strides_on_hpu(b))
    assert hpu.stride() == cpu.stride(), f"{op}({pair[0]} {a.stride()}, {pair[1]} {b.stride()})"
    torch.testing.assert_close(hpu.cpu(), cpu)


@pytest.mark.parametrize("op", list(BINARY))
def test_broadcast_against_a_row_and_a_column(op):
    a = LAYOUTS["transposed"]
    for b in (torch.randn(6, 1), torch.randn(8), torch.tensor(2.0)):
        cpu = BINARY[op](a, b)
        hpu = BINARY[op](_same_strides_on_hpu(a), b if b.dim() == 0 else b.to("hpu"))
        assert hpu.stride() == cpu.stride(), (op, tuple(b.shape))
        torch.testing.assert_close(hpu.cpu(), cpu)


def test_views_of_results_alias_as_on_the_cpu():
    """The user-visible consequence: .t().view(-1) of a result works on both
    devices (it needs the transposed layout), and an in-place write through
    a reshape reaches the result on both or on neither."""
    y = torch.randn(48, 64)
    for dev in ("cpu", "hpu"):
        r = torch.relu(y.t().to(dev) if dev == "cpu" else _same_strides_on_hpu(y.t()))
        flat = r.t().view(-1)  # raises if the layout differs from the CPU's
        flat.add_(1)
        assert bool((r.cpu() >= 1).all())


def _same_strides_on_hpu(x):
    """x on the hpu with x's own strides (an hpu copy of its base, viewed
    the same way), so both devices start from the same layout."""
    base = x
    while base._base is not None:
        base = base._base
    hb = base.to("hpu")
    return hb.as_strided(x.shape, x.stride(), x.storage_offset() - base.storage_offset())
