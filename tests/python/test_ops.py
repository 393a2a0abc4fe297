"""Native hpu ops against the CPU result of the same PyTorch op."""
import pytest
import torch

from conftest import assert_close_to_cpu

FLOAT_DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
INT_DTYPES = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    return torch.randint(1, 20, shape, generator=g).to(dtype)


SHAPES = [((4, 5), (4, 5)), ((4, 1), (1, 5)), ((3, 4, 5), (5,)), ((), (2, 3)), ((2, 0), (2, 1)),
          ((7,), ())]


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES + INT_DTYPES)
@pytest.mark.parametrize("shapes", SHAPES)
def test_binary_matches_cpu(op, dtype, shapes):
    a, b = make(shapes[0], dtype, 1), make(shapes[1], dtype, 2)
    fn = getattr(torch, op)
    expected = fn(a, b)
    got = fn(a.to("hpu"), b.to("hpu"))
    assert_close_to_cpu(got, expected)


@pytest.mark.parametrize("a_dtype,b_dtype", [(torch.float32, torch.int64), (torch.int32, torch.float64),
                                             (torch.bfloat16, torch.float32), (torch.float16, torch.bfloat16),
                                             (torch.uint8, torch.int8), (torch.bool, torch.int32),
                                             (torch.int64, torch.bfloat16)])
@pytest.mark.parametrize("op", ["add", "mul", "div"])
def test_type_promotion(a_dtype, b_dtype, op):
    a, b = make((3, 4), a_dtype, 3), make((4,), b_dtype, 4)
    fn = getattr(torch, op)
    assert_close_to_cpu(fn(a.to("hpu"), b.to("hpu")), fn(a, b))


@pytest.mark.parametrize("scalar", [2, 0.5, True, -3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16])
def test_scalar_operands(scalar, dtype):
    a = make((5, 3), dtype, 5)
    h = a.to("hpu")
    assert_close_to_cpu(h + scalar, a + scalar)
    assert_close_to_cpu(h * scalar, a * scalar)
    assert_close_to_cpu(scalar * h, scalar * a)
    assert_close_to_cpu(h / scalar, a / scalar)
    assert_close_to_cpu(h * torch.tensor(scalar), a * torch.tensor(scalar))  # cpu 0-dim tensor
    if not isinstance(scalar, bool):  # PyTorch refuses subtraction with bools
        assert_close_to_cpu(h - torch.tensor(scalar), a - torch.tensor(scalar))
        assert_close_to_cpu(scalar - h, scalar - a)


def test_alpha_and_rounding_modes():
    a, b = torch.randn(6, 4) * 10, torch.randn(6, 4) * 3 + 0.5
    h, hb = a.to("hpu"), b.to("hpu")
    assert_close_to_cpu(torch.add(h, hb, alpha=2.5), torch.add(a, b, alpha=2.5))
    assert_close_to_cpu(torch.sub(h, hb, alpha=-1.5), torch.sub(a, b, alpha=-1.5))
    for mode in ("trunc", "floor"):
        assert_close_to_cpu(torch.div(h, hb, rounding_mode=mode), torch.div(a, b, rounding_mode=mode))
    ia, ib = torch.tensor([7, -7, 9, -9]), torch.tensor([2, 2, -4, -4])
    for mode in ("trunc", "floor"):
        assert_close_to_cpu(torch.div(ia.to("hpu"), ib.to("hpu"), rounding_mode=mode),
                            torch.div(ia, ib, rounding_mode=mode))
    assert_close_to_cpu(ia.to("hpu") / ib.to("hpu"), ia / ib)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_rounding_division_in_reduced_floats_is_bit_exact(dtype, mode):
    # PyTorch's CPU rounds every step of a bf16/fp16 tensor-by-tensor trunc
    # or floor division to the dtype (one quotient in six lands on the next
    # integer before the trunc); a one-element divisor runs in float instead.
    g = torch.Generator().manual_seed(11)
    a = (torch.randn(20000, generator=g) * 50).to(dtype)
    b = torch.randn(20000, generator=g).to(dtype)
    b[:10], a[10:20], a[20:25], b[25:30], a[30:35] = 0, 0, float("inf"), float("-inf"), float("nan")
    cases = {"same shape": (a, b), "strided": (a[::2], b[::2]),
             "broadcast": (a.view(100, 200), b[:100].view(100, 1)), "one-element divisor": (a, b[123:124]),
             "0-dim divisor": (a, b[7]), "python divisor": (a, 0.37), "python dividend": (3.5, b)}
    for name, (x, y) in cases.items():
        hx, hy = (v.to("hpu") if isinstance(v, torch.Tensor) else v for v in (x, y))
        assert_close_to_cpu(torch.div(hx, hy, rounding_mode=mode), torch.div(x, y, rounding_mode=mode),
                            rtol=0, atol=0, equal_nan=True, msg=lambda m, name=name: f"{name}: {m}")
    h = a.to("hpu")
    h.div_(b.to("hpu"), rounding_mode=mode)
    assert_close_to_cpu(h, torch.div(a, b, rounding_mode=mode), rtol=0, atol=0, equal_nan=True)


def test_inplace_and_out_variants():
    a, b = torch.randn(4, 5), torch.randn(5)
    h = a.to("hpu")
    h.add_(b.to("hpu"), alpha=3)
    h.mul_(2).sub_(1).div_(4)
    torch.testing.assert_close(h.cpu(), ((a + 3 * b) * 2 - 1) / 4)
    out = torch.empty(0, device="hpu")
    torch.mul(h, h, out=out)
    torch.testing.assert_close(out.cpu(), h.cpu() * h.cpu())
    hi = torch.ones(3, dtype=torch.int64, device="hpu")
    with pytest.raises(RuntimeError, match="can't be cast"):
        hi.add_(torch.ones(3, device="hpu") * 0.5)


def test_relu():
    for dtype in FLOAT_DTYPES + [torch.int64]:
        a = make((7, 9), dtype, 6)
        assert_close_to_cpu(torch.relu(a.to("hpu")), torch.relu(a))
        h = a.to("hpu")
        h.relu_()
        assert_close_to_cpu(h, torch.relu(a))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
def test_matmul_family(dtype):
    tol = dict(atol=1e-1, rtol=2e-2) if dtype == torch.bfloat16 else {}
    a, b, c = make((17, 33), dtype, 7), make((33, 9), dtype, 8), make((9,), dtype, 9)
    assert_close_to_cpu(a.to("hpu") @ b.to("hpu"), a @ b, **tol)
    assert_close_to_cpu(torch.addmm(c.to("hpu"), a.to("hpu"), b.to("hpu"), beta=2, alpha=3),
                        torch.addmm(c, a, b, beta=2, alpha=3), **tol)
    # transposed operands, no copy on the way in
    assert_close_to_cpu(b.t().to("hpu") @ a.t().to("hpu"), b.t() @ a.t(), **tol)
    at = a.t().contiguous().to("hpu").t()
    assert not at.is_contiguous()
    assert_close_to_cpu(at @ b.to("hpu"), a @ b, **tol)
    x, y = make((4, 5, 6), dtype, 10), make((4, 6, 3), dtype, 11)
    assert_close_to_cpu(torch.bmm(x.to("hpu"), y.to("hpu")), torch.bmm(x, y), **tol)
    assert_close_to_cpu(torch.matmul(x.to("hpu"), y[0].to("hpu")), torch.matmul(x, y[0]), **tol)
    if dtype.is_floating_point:
        lin = torch.nn.functional.linear(a.to("hpu"), b.t().to("hpu"), c.to("hpu"))
        assert_close_to_cpu(lin, torch.nn.functional.linear(a, b.t(), c), **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("k,n", [(1, 1), (7, 5), (256, 768), (33, 130), (300, 17)])
def test_matrix_vector_products(dtype, k, n):
    """One row of A (a decode step): both dense layouts of B, batches, beta,
    alpha, a strided output and widths that leave partial vector blocks."""
    tol = dict(atol=1e-1, rtol=2e-2) if dtype != torch.float32 else dict(atol=1e-4, rtol=1e-4)
    x, w, bias = make((1, k), dtype, 1), make((k, n), dtype, 2), make((n,), dtype, 3)
    h = lambda t: t.to("hpu")  # noqa: E731
    assert_close_to_cpu(h(x) @ h(w), x @ w, **tol)                              # B rows contiguous
    wt = make((n, k), dtype, 4)
    assert_close_to_cpu(torch.nn.functional.linear(h(x), h(wt), h(bias)),
                        torch.nn.functional.linear(x, wt, bias), **tol)        # B columns contiguous
    assert_close_to_cpu(torch.addmm(h(bias), h(x), h(w), beta=0.5, alpha=2),
                        torch.addmm(bias, x, w, beta=0.5, alpha=2), **tol)
    q, kc = make((3, 1, k), dtype, 5), make((3, n, k), dtype, 6)
    assert_close_to_cpu(h(q) @ h(kc).transpose(1, 2), q @ kc.transpose(1, 2), **tol)  # batched, Q @ K^T
    p, vc = make((3, 1, n), dtype, 7), make((3, n, k), dtype, 8)
    assert_close_to_cpu(h(p) @ h(vc), p @ vc, **tol)                            # batched, P @ V
    out = torch.zeros(n, 2, dtype=dtype)
    out_h = h(out)
    torch.mm(h(x), h(w), out=out_h.t()[:1])                                     # strided output row
    torch.mm(x, w, out=out.t()[:1])
    assert_close_to_cpu(out_h, out, **tol)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_matmul_large_blocks(dtype, threads):
    """Products large enough that gemm.c packs A once per product and spreads
    column / row parts over the threads (k > one k block, several B blocks
    per part, edge panels in both directions), plain and transposed A,
    addmm's beta, and a batch count that does not split evenly."""
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        tol = dict(atol=2e-1, rtol=2e-2) if dtype == torch.bfloat16 else dict(atol=1e-3, rtol=1e-4)
        m, k, n = (205, 2050, 2060) if dtype == torch.bfloat16 else (103, 2050, 1100)
        a, b, c = make((m, k), dtype, 21), make((k, n), dtype, 22), make((m, n), dtype, 23)
        assert_close_to_cpu(a.to("hpu") @ b.to("hpu"), a @ b, **tol)
        at = a.t().contiguous().to("hpu").t()  # A with unit row stride
        assert_close_to_cpu(torch.addmm(c.to("hpu"), at, b.to("hpu"), beta=0.5),
                            torch.addmm(c, a, b, beta=0.5), **tol)
        x, y = make((3, m, k), dtype, 24), make((3, k, n // 2), dtype, 25)
        assert_close_to_cpu(torch.bmm(x.to("hpu"), y.to("hpu")), torch.bmm(x, y), **tol)
        a, b = make((600, 300), dtype, 28), make((300, 70), dtype, 29)  # split by rows
        assert_close_to_cpu(a.to("hpu") @ b.to("hpu"), a @ b, **tol)
        x, y = make((9, 40, 70), dtype, 26), make((9, 70, 50), dtype, 27)
        assert_close_to_cpu(torch.bmm(x.to("hpu"), y.to("hpu")), torch.bmm(x, y), **tol)
        # A transposed, packed 4 panels at a time (110 rows: 2 groups, a panel, an edge), odd k
        a, b = make((2501, 110), dtype, 30), make((2501, 300), dtype, 31)
        assert_close_to_cpu(a.to("hpu").t() @ b.to("hpu"), a.t() @ b, **tol)
        # A over 512 KB in bf16 read in place by one column part per thread (plain and B^T, linear)
        a, b = make((520, 1030), dtype, 32), make((1030, 256), dtype, 33)
        assert_close_to_cpu(a.to("hpu") @ b.to("hpu"), a @ b, **tol)
        w, bias = make((250, 1031), dtype, 34), make((250,), dtype, 35)
        a = make((520, 1031), dtype, 36)
        assert_close_to_cpu(torch.nn.functional.linear(a.to("hpu"), w.to("hpu"), bias.to("hpu")),
                            torch.nn.functional.linear(a, w, bias), **tol)
    finally:
        torch.set_num_threads(old)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_matmul_broadcast_batches_strided(dtype):
    """Batched matmul over broadcast batch dims with non-contiguous operands
    (views made on the device, so the kernels see the strides): transposed
    last dims, a stepped batch dim, permuted batch dims, BERT's attention
    views of [batch, seq, heads, dim]; row counts that leave every kind of
    bottom edge (128 = 10 x 12 + 8, 37, 13) and odd k."""
    tol = dict(atol=2e-1, rtol=2e-2) if dtype == torch.bfloat16 else dict(atol=1e-4, rtol=1e-4)

    def both(x, view):  # the same view of x on the cpu and of its copy on the hpu
        return view(x), view(x.to("hpu"))

    # [2, 1, 3] x [4, 1] batch dims -> [2, 4, 3]; A transposed in its last dims
    a, ah = both(make((2, 1, 3, 21, 37), dtype, 40), lambda t: t.transpose(-1, -2))
    b, bh = both(make((4, 1, 21, 45), dtype, 41), lambda t: t)
    assert_close_to_cpu(ah @ bh, a @ b, **tol)
    # B every other batch of a larger tensor, transposed; A's batch dims permuted
    a, ah = both(make((3, 2, 13, 33), dtype, 42), lambda t: t.permute(1, 0, 2, 3))
    b, bh = both(make((6, 45, 33), dtype, 43), lambda t: t[::2].transpose(-1, -2))
    assert_close_to_cpu(ah @ bh, a @ b, **tol)
    # attention: heads split out of [batch, seq, hidden] as views (no copies)
    split = lambda t: t.view(2, 128, 4, 64).transpose(1, 2)  # noqa: E731
    q, qh = both(make((2, 128, 256), dtype, 44), split)
    k, kh = both(make((2, 128, 256), dtype, 45), split)
    s, sh = q @ k.transpose(-1, -2), qh @ kh.transpose(-1, -2)
    assert_close_to_cpu(sh, s, **tol)
    v, vh = both(make((2, 128, 256), dtype, 46), split)
    p, ph = both(s.float().softmax(-1).to(dtype), lambda t: t)  # the same P on both sides
    assert_close_to_cpu(ph @ vh, p @ v, **tol)
    assert_close_to_cpu(ph.transpose(-1, -2) @ vh, p.transpose(-1, -2) @ v, **tol)  # dV = P^T dO
    # one operand broadcast over the batch through a stride-0 expand
    w, wh = both(make((64, 37), dtype, 47), lambda t: t.expand(2, 4, 64, 37))
    assert_close_to_cpu(vh @ wh, v @ w, **tol)


def test_matmul_bf16_rounding_exact():
    """bf16 products round their fp32 sums once, to nearest even, exactly as
    PyTorch converts fp32 to bf16. Small integers keep every fp32 sum exact
    whatever the order, so the results must match torch's bf16 matmul bit
    for bit (ties included); a NaN input gives NaN where torch's does.
    24 x 64 fills whole 12 x 32 tiles. (Denormals are not compared: the
    AVX512_BF16 dot product flushes them, and so does torch's oneDNN.)"""
    g = torch.Generator().manual_seed(5)
    a = torch.randint(-8, 9, (24, 64), generator=g).to(torch.bfloat16)
    b = torch.randint(-8, 9, (64, 64), generator=g).to(torch.bfloat16)
    assert_close_to_cpu(a.to("hpu") @ b.to("hpu"), a @ b, atol=0, rtol=0)
    assert (a.float() @ b.float()).abs().max() > 256  # beyond bf16's 8 significant bits: rounding
    an = a.clone()
    an[3, 5] = float("nan")
    assert_close_to_cpu(an.to("hpu") @ b.to("hpu"), an @ b, atol=0, rtol=0, equal_nan=True)


def test_matmul_errors():
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.randn(2, 3, device="hpu") @ torch.randn(4, 5, device="hpu")
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.mm(torch.randn(2, 3, device="hpu"), torch.randn(3, 2, device="hpu", dtype=torch.float64))


def test_native_ops_do_not_fall_back(fallback_counts):
    a = torch.randn(8, 8, device="hpu")
    b = (a @ a.T + 1).relu() * 2 - a / 3
    torch.addmm(a, a, a).add_(b)
    torch.empty(5, device="hpu").uniform_().normal_()
    assert fallback_counts() == {}
