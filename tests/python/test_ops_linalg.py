"""The linear algebra family on hpu (LU, solves, inverse, det / slogdet,
Cholesky, SVD, eigh, QR, triangular solves, and the vector / matrix-vector
ops dot, vdot, mv, addmv, addbmm, trace, cross, eye, equal) against the CPU
result of the same PyTorch op: batches, broadcasting, non-contiguous and
empty operands, singular and non-positive-definite matrices, gradients, and
no CPU fallback for any of them."""
import pytest
import torch

import habana_torch  # noqa: F401
from conftest import assert_close_to_cpu

HPU = "hpu"
DTYPES = [torch.float32, torch.float64]


def tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-9, atol=1e-9)


def make(shape, dtype=torch.float64, seed=0, well_conditioned=True):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(shape, generator=g, dtype=torch.float64)
    if well_conditioned and len(shape) >= 2 and shape[-1] == shape[-2] and shape[-1] > 0:
        t = t + shape[-1] * torch.eye(shape[-1], dtype=torch.float64)
    return t.to(dtype)


def spd(shape, dtype, seed=0):
    a = make(shape, torch.float64, seed, well_conditioned=False)
    return (a @ a.mT + shape[-1] * torch.eye(shape[-1], dtype=torch.float64)).to(dtype)


def noncontig(t):
    """t's values in transposed storage (the last two dims)."""
    return t.mT.contiguous().mT if t.dim() >= 2 else t


def close(h, c, dtype):
    if isinstance(c, (tuple, list)):
        for a, b in zip(h, c):
            close(a, b, dtype)
        return
    assert_close_to_cpu(h, c, equal_nan=True, **(tol(dtype) if c.is_floating_point() else dict(rtol=0, atol=0)))


# Each op of the family, as (name, function, inputs); run on the CPU and on
# the card with the same inputs. SVD / eigh / QR outputs are compared through
# quantities LAPACK determines (values, reconstructions) where the CPU's
# LAPACK may choose other signs.
def _cases(dtype):
    a = make((3, 4, 4), dtype)
    b = make((3, 4, 2), dtype, seed=1)
    r = make((3, 5, 3), dtype, seed=2, well_conditioned=False)
    s = spd((3, 4, 4), dtype)
    tri = torch.triu(make((3, 4, 4), dtype, seed=3))
    return [
        ("lu_factor", lambda a: torch.linalg.lu_factor(a), (a,)),
        ("lu_factor_ex", lambda a: torch.linalg.lu_factor_ex(a), (r,)),
        ("lu", lambda a: torch.linalg.lu(a), (a,)),
        ("lu_solve", lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b), (a, b)),
        ("lu_solve_adjoint_right",
         lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b.mT, left=False, adjoint=True), (a, b)),
        ("solve", lambda a, b: torch.linalg.solve(a, b), (a, b)),
        ("solve_vector", lambda a, b: torch.linalg.solve(a, b[..., 0]), (a, b)),
        ("solve_right", lambda a, b: torch.linalg.solve(a, b.mT, left=False), (a, b)),
        ("solve_ex", lambda a, b: torch.linalg.solve_ex(a, b), (a, b)),
        ("inv", lambda a: torch.linalg.inv(a), (a,)),
        ("inv_ex", lambda a: torch.linalg.inv_ex(a), (a,)),
        ("det", lambda a: torch.linalg.det(a), (a,)),
        ("det_noncontig", lambda a: torch.linalg.det(a), (noncontig(a),)),
        ("slogdet", lambda a: torch.linalg.slogdet(a), (a,)),
        ("logdet", lambda a: torch.logdet(a), (s,)),
        ("cholesky", lambda s: torch.linalg.cholesky(s), (s,)),
        ("cholesky_upper", lambda s: torch.linalg.cholesky(s, upper=True), (s,)),
        ("cholesky_ex", lambda s: torch.linalg.cholesky_ex(s), (s,)),
        ("svdvals", lambda r: torch.linalg.svdvals(r), (r,)),
        ("svd_reconstruct", lambda r: (lambda u, s_, vh: (u * s_.unsqueeze(-2)) @ vh)(*torch.linalg.svd(r, full_matrices=False)), (r,)),
        ("svd_full_abs", lambda r: [x.abs() for x in torch.linalg.svd(r, full_matrices=True)][1], (r,)),
        ("pinv", lambda r: torch.linalg.pinv(r), (r,)),
        ("matrix_rank", lambda r: torch.linalg.matrix_rank(r), (r,)),
        ("eigvalsh", lambda s: torch.linalg.eigvalsh(s), (s,)),
        ("eigvalsh_upper", lambda s: torch.linalg.eigvalsh(s, UPLO="U"), (s,)),
        ("eigh_reconstruct",
         lambda s: (lambda w, v: (v * w.unsqueeze(-2)) @ v.mT)(*torch.linalg.eigh(s)), (s,)),
        ("qr", lambda r: torch.linalg.qr(r), (r,)),
        ("qr_complete", lambda r: torch.linalg.qr(r, mode="complete"), (r,)),
        ("qr_r", lambda r: torch.linalg.qr(r, mode="r")[1], (r.mT,)),
        ("solve_triangular", lambda t, b: torch.linalg.solve_triangular(t, b, upper=True), (tri, b)),
        ("solve_triangular_right",
         lambda t, b: torch.linalg.solve_triangular(t, b.mT, upper=True, left=False, unitriangular=True), (tri, b)),
        ("triangular_solve", lambda t, b: torch.triangular_solve(b, t, upper=True, transpose=True), (tri, b)),
        ("lu_unpack", lambda a: torch.lu_unpack(*torch.linalg.lu_factor(a)), (r,)),
        ("geqrf", lambda r: torch.geqrf(r), (r,)),
        ("householder_product", lambda r: torch.linalg.householder_product(*torch.geqrf(r)), (r,)),
        ("ormqr", lambda r, c: torch.ormqr(*torch.geqrf(r), c, transpose=True), (r, make((3, 5, 2), dtype, 4))),
        ("ormqr_right", lambda r, c: torch.ormqr(*torch.geqrf(r), c.mT, left=False), (r, make((3, 5, 2), dtype, 4))),
        ("cholesky_deprecated", lambda s: torch.cholesky(s), (s,)),
        ("cholesky_inverse", lambda s: torch.cholesky_inverse(torch.linalg.cholesky(s)), (s,)),
        ("cholesky_inverse_upper", lambda s: torch.cholesky_inverse(torch.linalg.cholesky(s, upper=True), upper=True),
         (s,)),
        ("cholesky_solve", lambda s, b: torch.cholesky_solve(b, torch.linalg.cholesky(s)), (s, b)),
        ("ldl_factor", lambda a: torch.linalg.ldl_factor(a + a.mT), (a,)),
        ("ldl_solve", lambda a, b: torch.linalg.ldl_solve(*torch.linalg.ldl_factor(a + a.mT), b), (a, b)),
        ("lstsq_tall", lambda r: torch.linalg.lstsq(r, r[..., :2] + 1), (r,)),
        ("lstsq_gels", lambda r: torch.linalg.lstsq(r, r[..., :2] * 2 + 1, driver="gels"), (r,)),
        ("lstsq_gels_vector", lambda r: torch.linalg.lstsq(r, r[..., 0] + 1, driver="gels"), (r,)),
        ("lstsq_wide", lambda r: torch.linalg.lstsq(r.mT, r.mT[..., :1]), (r,)),
        ("tensorinv", lambda a: torch.linalg.tensorinv(a[0].reshape(4, 2, 2), ind=1), (a,)),
        ("dot", lambda x, y: torch.dot(x[0, 0], y[0, 0]), (a, a.flip(0))),
        ("vdot", lambda x, y: torch.vdot(x[0, 0], y[0, 0]), (a, a.flip(0))),
        ("mv", lambda x, y: torch.mv(x[0], y[0, :, 0]), (a, b)),
        ("addmv", lambda x, y: torch.addmv(y[0, :, 1], x[0], y[0, :, 0], beta=0.5, alpha=2), (a, b)),
        ("matmul_vec", lambda x, y: y[0, :, 0] @ x[0], (a, b)),
        ("addbmm", lambda x, y: torch.addbmm(x[0, :, :2], x, y, beta=2, alpha=-1), (a, b)),
        ("trace", lambda x: torch.trace(x[1]), (a,)),
        ("cross", lambda x, y: torch.linalg.cross(x[:, :3, :3], y[:1, :3, :3], dim=1), (a, a.flip(1))),
        ("matrix_power", lambda x: torch.linalg.matrix_power(x, 0), (a,)),
        ("eye_out", lambda x: torch.eye(3, 5, out=torch.empty(0, dtype=x.dtype, device=x.device)), (a,)),
    ]


CASE_NAMES = [c[0] for c in _cases(torch.float64)]


def _run(name, dtype):
    fn, args = {c[0]: c for c in _cases(dtype)}[name][1:]
    return fn(*[t.to(HPU) for t in args]), fn(*args)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", CASE_NAMES)
def test_matches_cpu_without_fallback(name, dtype, fallback_counts):
    h, c = _run(name, dtype)
    close(h, c, dtype)
    assert fallback_counts() == {}, name


def test_lu_and_pivots_are_the_cpus():
    a = make((2, 5, 3), torch.float64, well_conditioned=False)
    h = torch.linalg.lu_factor_ex(a.to(HPU))
    c = torch.linalg.lu_factor_ex(a)
    assert h.pivots.dtype == torch.int32
    close(tuple(h), tuple(c), torch.float64)
    p, l, u = torch.linalg.lu(a.to(HPU))
    close((p, l, u), tuple(torch.linalg.lu(a)), torch.float64)


@pytest.mark.parametrize("shape", [(0, 3, 3), (2, 0, 0), (3, 0), (0, 4)])
def test_empty(shape, fallback_counts):
    a = torch.zeros(shape, dtype=torch.float64)
    if shape[-1] == shape[-2]:
        close(torch.linalg.det(a.to(HPU)), torch.linalg.det(a), torch.float64)
        close(torch.linalg.inv(a.to(HPU)), torch.linalg.inv(a), torch.float64)
        close(torch.linalg.cholesky(a.to(HPU)), torch.linalg.cholesky(a), torch.float64)
        close(torch.linalg.eigvalsh(a.to(HPU)), torch.linalg.eigvalsh(a), torch.float64)
    close(torch.linalg.svdvals(a.to(HPU)), torch.linalg.svdvals(a), torch.float64)
    close(tuple(torch.linalg.qr(a.to(HPU), mode="complete")), tuple(torch.linalg.qr(a, mode="complete")),
          torch.float64)
    close(tuple(torch.linalg.lu_factor(a.to(HPU))), tuple(torch.linalg.lu_factor(a)), torch.float64)
    assert fallback_counts() == {}


def test_broadcast_batches(fallback_counts):
    a = make((2, 1, 4, 4), torch.float32)
    b = make((3, 4, 5), torch.float32, seed=1)
    close(torch.linalg.solve(a.to(HPU), b.to(HPU)), torch.linalg.solve(a, b), torch.float32)
    lu, piv = torch.linalg.lu_factor(a)
    close(torch.linalg.lu_solve(lu.to(HPU), piv.to(HPU), b.to(HPU)), torch.linalg.lu_solve(lu, piv, b),
          torch.float32)
    t = torch.tril(a)
    close(torch.linalg.solve_triangular(t.to(HPU), b.to(HPU), upper=False),
          torch.linalg.solve_triangular(t, b, upper=False), torch.float32)
    assert fallback_counts() == {}


def test_large_and_many(fallback_counts):
    """A matrix big enough for OpenBLAS's threads, and a long batch."""
    a = make((160, 160), torch.float64)
    b = make((160, 7), torch.float64, seed=1)
    close(torch.linalg.solve(a.to(HPU), b.to(HPU)), torch.linalg.solve(a, b), torch.float64)
    s = spd((200, 6, 6), torch.float32)
    close(torch.linalg.cholesky(s.to(HPU)), torch.linalg.cholesky(s), torch.float32)
    close(torch.linalg.eigvalsh(s.to(HPU)), torch.linalg.eigvalsh(s), torch.float32)
    x = make((4000,), torch.float32)
    close(torch.dot(x.to(HPU), x.to(HPU)), torch.dot(x, x), torch.float32)
    assert fallback_counts() == {}


def test_singular_and_not_positive_definite():
    a = torch.tensor([[1.0, 2.0], [2.0, 4.0]])
    h = torch.linalg.inv_ex(a.to(HPU))
    assert h.info.item() == torch.linalg.inv_ex(a).info.item() == 2
    for fn in (torch.linalg.inv, lambda x: torch.linalg.solve(x, x), torch.linalg.lu_factor_ex):
        if fn is torch.linalg.lu_factor_ex:
            assert fn(a.to(HPU)).info.item() == 2
            continue
        with pytest.raises(torch.linalg.LinAlgError, match="singular"):
            fn(a.to(HPU))
    close(torch.linalg.det(a.to(HPU)), torch.linalg.det(a), torch.float32)
    close(tuple(torch.linalg.slogdet(a.to(HPU))), tuple(torch.linalg.slogdet(a)), torch.float32)
    npd = torch.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=torch.float64)
    assert torch.linalg.cholesky_ex(npd.to(HPU)).info.item() == 2
    with pytest.raises(torch.linalg.LinAlgError, match="positive-definite"):
        torch.linalg.cholesky(npd.to(HPU))
    with pytest.raises(torch.linalg.LinAlgError, match="non-finite"):
        torch.linalg.svd(torch.tensor([[1.0, float("nan")], [0.0, 1.0]], device=HPU))
    # the process stays usable
    close(torch.linalg.inv(npd.to(HPU)), torch.linalg.inv(npd), torch.float64)


@pytest.mark.parametrize("call", [
    lambda x: torch.linalg.inv(x.to(torch.bfloat16)),
    lambda x: torch.linalg.det(x.to(torch.float16)),
    lambda x: torch.linalg.cholesky(x.long()),
    lambda x: torch.linalg.inv(x[:, :3]),
    lambda x: torch.linalg.solve(x, x[:3]),
    lambda x: torch.linalg.eigh(x, UPLO="X"),
    lambda x: torch.dot(x[0], x[1, :3]),
    lambda x: torch.mv(x, x[0, :3]),
    lambda x: torch.trace(x[0]),
    lambda x: torch.linalg.cross(x, x),
])
def test_bad_arguments_raise_as_on_cpu(call):
    x = make((4, 4), torch.float32)
    with pytest.raises(Exception) as cpu_err:
        call(x)
    with pytest.raises(type(cpu_err.value)) as hpu_err:
        call(x.to(HPU))
    assert str(hpu_err.value).split("\n")[0] == str(cpu_err.value).split("\n")[0]


@pytest.mark.parametrize("name,fn,make_input", [
    ("det", torch.linalg.det, lambda: make((2, 3, 3))),
    ("slogdet", lambda a: torch.linalg.slogdet(a)[1], lambda: make((2, 3, 3))),
    ("inv", torch.linalg.inv, lambda: make((2, 3, 3))),
    ("solve", lambda a: torch.linalg.solve(a, a[..., :1] * 2 + 1), lambda: make((2, 3, 3))),
    ("cholesky", torch.linalg.cholesky, lambda: spd((2, 3, 3), torch.float64)),
    ("eigvalsh", torch.linalg.eigvalsh, lambda: spd((2, 3, 3), torch.float64)),
    ("svdvals", torch.linalg.svdvals, lambda: make((2, 4, 3), well_conditioned=False)),
    ("qr", lambda a: torch.linalg.qr(a)[1], lambda: make((2, 4, 3), well_conditioned=False)),
    ("pinv", torch.linalg.pinv, lambda: make((2, 4, 3), well_conditioned=False)),
    ("solve_triangular", lambda a: torch.linalg.solve_triangular(a, a.mT, upper=True),
     lambda: torch.triu(make((2, 3, 3)))),
    ("addbmm", lambda a: torch.addbmm(a[0], a, a), lambda: make((2, 3, 3))),
    ("cross", lambda a: torch.linalg.cross(a, a.flip(0)), lambda: make((3, 3))),
])
def test_gradients(name, fn, make_input):
    x = make_input()
    xc = x.clone().requires_grad_()
    xh = x.to(HPU).requires_grad_()
    g = make(fn(x).shape, torch.float64, seed=5, well_conditioned=False)
    (fn(xc) * g).sum().backward()
    (fn(xh) * g.to(HPU)).sum().backward()
    close(xh.grad, xc.grad, torch.float64)


def test_vector_ops_edge_values(fallback_counts):
    x = torch.tensor([1.0, float("inf"), -0.0, 2.0])
    y = torch.tensor([0.0, 1.0, 3.0, float("nan")])
    close(torch.dot(x.to(HPU), y.to(HPU)), torch.dot(x, y), torch.float32)
    i = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    close(torch.trace(i.to(HPU)), torch.trace(i), torch.float32)  # int64 result
    close(torch.dot(i[0].to(HPU), i[1].to(HPU)), torch.dot(i[0], i[1]), torch.float32)
    m = make((3, 4), torch.float32)
    v = make((4,), torch.float32, seed=1)
    nan_self = torch.full((3,), float("nan"))
    close(torch.addmv(nan_self.to(HPU), m.to(HPU), v.to(HPU), beta=0),
          torch.addmv(nan_self, m, v, beta=0), torch.float32)  # beta 0 ignores NaN
    close(torch.mv(noncontig(make((5, 4), torch.float32)).to(HPU), v.to(HPU)),
          torch.mv(noncontig(make((5, 4), torch.float32)), v), torch.float32)
    close(torch.mv(torch.zeros(3, 0).to(HPU), torch.zeros(0).to(HPU)), torch.mv(torch.zeros(3, 0), torch.zeros(0)),
          torch.float32)
    n = torch.tensor([1.0, float("nan")], device=HPU)
    assert not torch.equal(n, n.clone()) and torch.equal(n, n)  # the CPU's alias shortcut
    assert torch.equal(m.to(HPU), m.to(HPU)) and not torch.equal(m.to(HPU), m[:2].to(HPU))
    assert fallback_counts() == {}


def test_cov_corrcoef(fallback_counts):
    x = make((3, 10), torch.float32)
    fw = torch.randint(1, 4, (10,))
    close(torch.cov(x.to(HPU), fweights=fw.to(HPU)), torch.cov(x, fweights=fw), torch.float32)
    close(torch.corrcoef(x.to(HPU)), torch.corrcoef(x), torch.float32)
    assert fallback_counts() == {}
