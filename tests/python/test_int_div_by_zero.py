"""Integer division by zero on the hpu raises PyTorch's CPU error,
RuntimeError("ZeroDivisionError"), for div(rounding_mode="trunc"/"floor"),
remainder and fmod, and the card stays usable. A divisor on the card is
checked by the kernel, so in lazy mode (and for work queued in eager mode)
the error surfaces at the next synchronisation, as an out-of-range nll_loss
target does; a zero Python scalar raises at the call, as on the CPU."""
import pytest
import torch

import habana_torch  # noqa: F401

INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
OPS = {
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "remainder": torch.remainder,
    "fmod": torch.fmod,
}
IN_PLACE = {
    "div_trunc": lambda a, b: a.div_(b, rounding_mode="trunc"),
    "div_floor": lambda a, b: a.div_(b, rounding_mode="floor"),
    "remainder": lambda a, b: a.remainder_(b),
    "fmod": lambda a, b: a.fmod_(b),
}
OUT = {
    "div_trunc": lambda a, b, out: torch.div(a, b, rounding_mode="trunc", out=out),
    "div_floor": lambda a, b, out: torch.div(a, b, rounding_mode="floor", out=out),
    "remainder": lambda a, b, out: torch.remainder(a, b, out=out),
    "fmod": lambda a, b, out: torch.fmod(a, b, out=out),
}


def _operands(dtype):
    lo = -9 if dtype.is_signed else 0
    a = torch.arange(lo, lo + 24).to(dtype)
    b = torch.tensor([3, 1, 2, 5] * 6, dtype=dtype)
    if dtype.is_signed:
        b[1::4] = -1
        a[0] = torch.iinfo(dtype).min  # min / -1 and min % -1 do not trap
    return a, b


def _error_of(run):
    """The RuntimeError the call or the following synchronisation raises."""
    try:
        out = run()
        out.cpu()
    except RuntimeError as e:
        return e
    return None


def _cpu_error(run):
    with pytest.raises(RuntimeError) as info:
        run()
    return info.value


def _still_usable(op, dtype):
    a, b = _operands(dtype)
    torch.testing.assert_close(OPS[op](a.to("hpu"), b.to("hpu")).cpu(), OPS[op](a, b))


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("op", list(OPS))
def test_nonzero_divisors_match_the_cpu(op, dtype):
    _still_usable(op, dtype)
    a, b = _operands(dtype)
    torch.testing.assert_close(OPS[op](a.to("hpu"), 7).cpu(), OPS[op](a, 7))


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("op", list(OPS))
def test_a_zero_in_a_divisor_tensor_raises_as_on_the_cpu(op, dtype):
    a, b = _operands(dtype)
    b[5] = 0
    expected = _cpu_error(lambda: OPS[op](a, b))
    got = _error_of(lambda: OPS[op](a.to("hpu"), b.to("hpu")))
    assert got is not None, f"{op} {dtype}: no error"
    assert type(got) is type(expected) and str(got) == str(expected) == "ZeroDivisionError"
    _still_usable(op, dtype)


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("op", list(OPS))
def test_a_zero_scalar_divisor_raises_at_the_call(op, dtype):
    a, _ = _operands(dtype)
    expected = _cpu_error(lambda: OPS[op](a, 0))
    ha = a.to("hpu")
    with pytest.raises(RuntimeError) as info:
        OPS[op](ha, 0)  # no synchronisation needed: the divisor is on the host
    assert str(info.value) == str(expected) == "ZeroDivisionError"
    if dtype == torch.uint8:  # 256 is 0 in uint8, for the CPU too
        assert str(_cpu_error(lambda: OPS[op](a, 256))) == "ZeroDivisionError"
        with pytest.raises(RuntimeError, match="^ZeroDivisionError$"):
            OPS[op](ha, 256)
    _still_usable(op, dtype)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int32, torch.int64])
@pytest.mark.parametrize("op", list(OPS))
def test_zero_one_element_divisor_on_the_card_and_broadcast(op, dtype):
    a, _ = _operands(dtype)
    zero = torch.zeros((), dtype=dtype)
    assert str(_cpu_error(lambda: OPS[op](a, zero.reshape(1)))) == "ZeroDivisionError"
    got = _error_of(lambda: OPS[op](a.to("hpu"), zero.reshape(1).to("hpu")))
    assert got is not None and str(got) == "ZeroDivisionError"
    rows = torch.tensor([[1], [0]], dtype=dtype)  # broadcast over a's 24 columns
    assert str(_cpu_error(lambda: OPS[op](a, rows))) == "ZeroDivisionError"
    got = _error_of(lambda: OPS[op](a.to("hpu"), rows.to("hpu")))
    assert got is not None and str(got) == "ZeroDivisionError"
    _still_usable(op, dtype)


@pytest.mark.parametrize("op", list(OPS))
def test_in_place_and_out_variants_raise(op):
    a, b = _operands(torch.int32)
    b[0] = 0
    got = _error_of(lambda: IN_PLACE[op](a.to("hpu"), b.to("hpu")))
    assert got is not None and str(got) == "ZeroDivisionError"
    out = torch.empty(24, dtype=torch.int32, device="hpu")
    got = _error_of(lambda: OUT[op](a.to("hpu"), b.to("hpu"), out))
    assert got is not None and str(got) == "ZeroDivisionError"
    with pytest.raises(RuntimeError, match="^ZeroDivisionError$"):
        IN_PLACE[op](a.to("hpu"), 0)
    _still_usable(op, torch.int32)


@pytest.mark.parametrize("op", list(OPS))
def test_no_elements_no_error(op):
    a = torch.empty(0, dtype=torch.int64)
    assert OPS[op](a, 0).numel() == 0  # the CPU checks element by element
    assert OPS[op](a.to("hpu"), 0).cpu().numel() == 0
    assert OPS[op](a.to("hpu"), torch.zeros(0, dtype=torch.int64, device="hpu")).cpu().numel() == 0


def test_work_queued_before_the_error_and_after_it_is_right():
    x = torch.arange(10, device="hpu")
    before = x * 3
    got = _error_of(lambda: torch.remainder(x, torch.zeros(10, dtype=torch.int64, device="hpu")))
    assert got is not None and str(got) == "ZeroDivisionError"
    assert torch.equal(before.cpu(), torch.arange(10) * 3)
    assert torch.equal((x // 4).cpu(), torch.arange(10) // 4)
    torch.hpu.synchronize()  # nothing left over
