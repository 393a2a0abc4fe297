"""Copies between cpu and hpu and between cards; views and in-place ops on them."""
import pytest
import torch

from conftest import assert_close_to_cpu

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
          torch.int16, torch.int8, torch.uint8, torch.bool]


@pytest.mark.parametrize("dtype", DTYPES)
def test_roundtrip_exact(dtype):
    x = (torch.randn(3, 5, 7) * 50).to(dtype)
    h = x.to("hpu")
    assert h.device.type == "hpu" and h.dtype == dtype
    assert torch.equal(h.cpu(), x)


@pytest.mark.parametrize("src,dst", [(torch.float32, torch.bfloat16), (torch.float32, torch.float16),
                                     (torch.float64, torch.int32), (torch.float32, torch.bool),
                                     (torch.int64, torch.float32), (torch.bfloat16, torch.float32),
                                     (torch.uint8, torch.int8)])
def test_dtype_conversion_matches_cpu(src, dst):
    x = (torch.randn(64) * 100).to(src)
    assert torch.equal(x.to("hpu").to(dst).cpu(), x.to(dst))
    assert torch.equal(x.to("hpu", dst).cpu(), x.to(dst))


def test_non_contiguous_sources_and_destinations():
    x = torch.randn(6, 8, 10)
    for view in (x.transpose(0, 2), x[:, ::2, 1::3], x.permute(2, 0, 1)[3], x[..., 4]):
        h = view.to("hpu")
        assert torch.equal(h.cpu(), view)
    h = torch.zeros(10, 8, device="hpu")
    h.t().copy_(torch.arange(80.0).view(8, 10))
    assert torch.equal(h.cpu(), torch.arange(80.0).view(8, 10).t())


def test_broadcast_copy_and_zero_size():
    h = torch.zeros(4, 3, device="hpu")
    h.copy_(torch.tensor([1.0, 2.0, 3.0]))
    assert torch.equal(h.cpu(), torch.tensor([1.0, 2.0, 3.0]).expand(4, 3))
    e = torch.empty(0, 5).to("hpu")
    assert e.shape == (0, 5) and e.cpu().shape == (0, 5)
    s = torch.tensor(3.5).to("hpu")
    assert s.dim() == 0 and s.item() == 3.5


def test_views_share_storage():
    h = torch.arange(24.0).view(4, 6).to("hpu")
    v = h[1:3, ::2]
    v.mul_(10)
    expected = torch.arange(24.0).view(4, 6)
    expected[1:3, ::2] *= 10
    assert torch.equal(h.cpu(), expected)
    t = h.t()
    assert t.data_ptr() == h.data_ptr() and t.stride() == (1, 6)
    assert torch.equal(h.view(-1).cpu(), expected.view(-1))
    assert torch.equal(h.reshape(3, 8).cpu(), expected.reshape(3, 8))
    assert torch.equal(h.unfold(1, 2, 2).cpu(), expected.unfold(1, 2, 2))
    assert torch.equal(h.as_strided((2, 2), (1, 6), 1).cpu(), expected.as_strided((2, 2), (1, 6), 1))
    ex = h[0].expand(3, 6)
    assert ex.stride() == (0, 1)
    assert torch.equal(ex.cpu(), expected[0].expand(3, 6))


def test_between_cards():
    x = torch.randn(1000)
    a = x.to("hpu:0")
    b = a.to("hpu:5")
    assert b.device == torch.device("hpu:5")
    assert torch.equal(b.cpu(), x)
    c = torch.empty(1000, device="hpu:2")
    c.copy_(b)
    assert torch.equal(c.cpu(), x)


def test_resize_and_set():
    h = torch.arange(6.0).to("hpu")
    h.resize_(10)
    assert h.shape == (10,)
    assert torch.equal(h[:6].cpu(), torch.arange(6.0))
    e = torch.empty(0, device="hpu")
    e.set_(h.untyped_storage(), 2, (2, 2), (2, 1))
    assert torch.equal(e.cpu(), torch.tensor([[2.0, 3.0], [4.0, 5.0]]))


def test_fill_and_zero():
    h = torch.empty(3, 4, device="hpu")
    h.fill_(2.5)
    assert torch.equal(h.cpu(), torch.full((3, 4), 2.5))
    h[:, 1].zero_()
    ref = torch.full((3, 4), 2.5)
    ref[:, 1] = 0
    assert torch.equal(h.cpu(), ref)
    h.fill_(torch.tensor(7))
    assert torch.equal(h.cpu(), torch.full((3, 4), 7.0))
    assert_close_to_cpu(torch.ones(2, 2, device="hpu", dtype=torch.bfloat16),
                        torch.ones(2, 2, dtype=torch.bfloat16))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.bfloat16, torch.float32, torch.int64])
def test_row_copies_shifted_by_a_few_bytes(dtype):
    # Rows of a strided copy whose destination sits 1-63 bytes ahead of its
    # source (modulo 4 KiB) take their own copy loop rather than memmove
    # (kernels/bytes.c). Both halves of one buffer, rows of 4 KiB, so the
    # shift by k elements is exactly k elements' bytes; rows of over 512
    # bytes whose length is not a multiple of the loop's 32-byte step.
    esz = torch.tensor([], dtype=dtype).element_size()
    w = 4096 // esz
    x = (torch.arange(2 * 8 * w) % 251).to(dtype).view(2, 8, w)
    h = x.to("hpu")
    for k in range(1, 64 // esz + 2):
        h[1].zero_()
        h[1][:, k:].copy_(h[0][:, :-k])
        exp = x.clone()
        exp[1].zero_()
        exp[1][:, k:].copy_(exp[0][:, :-k])
        assert torch.equal(h.cpu(), exp), k
        # and the other direction: the destination behind the source
        got = h[0][:, k:].clone()
        got[:, :-k].copy_(h[0][:, 2 * k:])
        ref = x[0][:, k:].clone()
        ref[:, :-k].copy_(x[0][:, 2 * k:])
        assert torch.equal(got.cpu(), ref), k


def test_overlapping_contiguous_copy_moves_like_memmove():
    # one run whose source and destination overlap: memmove semantics
    x = torch.arange(3000.0)
    h = x.to("hpu")
    h[3:].copy_(h[:-3].clone())
    h[:-5].copy_(h[5:].clone())
    exp = x.clone()
    exp[3:] = x[:-3].clone()
    exp[:-5] = exp[5:].clone()
    assert torch.equal(h.cpu(), exp)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_short_row_copies_match_the_cpu(dtype):
    # Same-dtype copies whose inner dim is contiguous on both sides but whose
    # rows lie apart (kernels/copy.c, copy_rows): cat along the last dim,
    # narrowed destinations over 3 and 4 dims, sources with permuted or
    # stepped outer dims, and enough rows to be split over the kernel pool.
    g = torch.Generator().manual_seed(0)

    def make(*shape):
        return (torch.randn(*shape, generator=g) * 20).to(dtype)

    parts = [make(5, 7, 33, w) for w in (1, 16, 64, 3)]
    assert torch.equal(torch.cat([p.to("hpu") for p in parts], -1).cpu(), torch.cat(parts, -1))
    big = [make(3, 40, 300, 24) for _ in range(2)]  # 36,000 rows of 24
    assert torch.equal(torch.cat([p.to("hpu") for p in big], -1).cpu(), torch.cat(big, -1))
    src = make(6, 9, 11, 40)
    hsrc = src.to("hpu")
    for pick in (lambda t: t.permute(2, 0, 1, 3), lambda t: t[::2, 1:, ::3], lambda t: t.transpose(0, 1)[:, 2:5]):
        want, got = pick(src), pick(hsrc)
        dst = torch.zeros(*want.shape[:-1], 50, dtype=dtype)
        hdst = dst.to("hpu")
        dst[..., 5:45].copy_(want)
        hdst[..., 5:45].copy_(got)
        assert torch.equal(hdst.cpu(), dst)
