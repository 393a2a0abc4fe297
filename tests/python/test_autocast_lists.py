"""torch.autocast("hpu") and HMP follow the op lists in hmp/.

For every op in every default list the dtype it runs in (the dtypes of the
floating tensors that reach the op below the autocast layer, recorded with a
TorchDispatchMode) is the one its list says, and its values match the same op
run on the CPU without autocast on inputs cast as the list says. Ops in no
list run in their input dtypes. The list files are read here as data; a list
entry without a sample call below fails the coverage test.
"""
import os
import threading

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import habana_torch
from habana_torch.hpex import hmp

from conftest import run_python

aten = torch.ops.aten
BF16, F32 = torch.bfloat16, torch.float32
CASTS = {aten._to_copy.default, aten.copy_.default, aten.empty_like.default,
         aten.empty_strided.default, aten.empty.memory_format, aten.clone.default,
         aten.detach.default, aten.lift_fresh.default}


def read_list(path):
    """Names in an op list file (the format of hmp/README.md)."""
    names = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                names.append(line[6:] if line.startswith("aten::") else line)
    return names


DEFAULTS = hmp.default_list_paths()
LISTS = {kind: read_list(path) for kind, path in DEFAULTS.items()}


class Recorder(TorchDispatchMode):
    """Records (op, floating input dtypes, floating output dtypes) of every op
    that reaches the kernels (below autocast and autograd)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        flat_in = torch.utils._pytree.tree_leaves((args, kwargs or {}))
        flat_out = torch.utils._pytree.tree_leaves(out)
        fdt = lambda xs: tuple(str(x.dtype).replace("torch.", "") for x in xs  # noqa: E731
                               if isinstance(x, torch.Tensor) and x.is_floating_point())
        self.calls.append((func, fdt(flat_in), fdt(flat_out)))
        return out


def H(*shape, dtype=F32, low=None, high=None):
    """A random hpu tensor (uniform in [low, high) if given, else normal)."""
    g = torch.Generator().manual_seed(hash(shape) % 1000)
    if low is None:
        t = torch.randn(*shape, generator=g)
    else:
        t = torch.rand(*shape, generator=g) * (high - low) + low
    return t.to(dtype).to("hpu")


def L(high, *shape):
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(3)).to("hpu")


def sign(*shape, dtype=F32):
    return (torch.randint(0, 2, shape, generator=torch.Generator().manual_seed(4)) * 2 - 1).to(dtype).to("hpu")


# op name -> (overload packet call, args). Lower-precision samples take fp32
# inputs, fp32 samples take bf16 inputs (where the op accepts floats).
def lower_samples():
    return {
        "mm": (aten.mm.default, (H(3, 4), H(4, 5))),
        "bmm": (aten.bmm.default, (H(2, 3, 4), H(2, 4, 5))),
        "addmm": (aten.addmm.default, (H(3, 5), H(3, 4), H(4, 5))),
        "addbmm": (aten.addbmm.default, (H(3, 5), H(2, 3, 4), H(2, 4, 5))),
        "baddbmm": (aten.baddbmm.default, (H(2, 3, 5), H(2, 3, 4), H(2, 4, 5))),
        "addmv": (aten.addmv.default, (H(3), H(3, 4), H(4))),
        "addr": (aten.addr.default, (H(3, 4), H(3), H(4))),
        "mv": (aten.mv.default, (H(3, 4), H(4))),
        "dot": (aten.dot.default, (H(4), H(4))),
        "matmul": (aten.matmul.default, (H(2, 3, 4), H(4, 5))),
        "linear": (aten.linear.default, (H(2, 3, 4), H(5, 4), H(5))),
        "einsum": (aten.einsum.default, ("ij,jk->ik", [H(3, 4), H(4, 5)])),
        "chain_matmul": (aten.chain_matmul.default, ([H(3, 4), H(4, 5), H(5, 2)],)),
        "linalg_multi_dot": (aten.linalg_multi_dot.default, ([H(3, 4), H(4, 5), H(5, 2)],)),
        "linalg_vecdot": (aten.linalg_vecdot.default, (H(3, 4), H(3, 4))),
        "conv1d": (aten.conv1d.default, (H(2, 3, 8), H(4, 3, 3), H(4))),
        "conv2d": (aten.conv2d.default, (H(2, 3, 6, 6), H(4, 3, 3, 3), H(4))),
        "conv3d": (aten.conv3d.default, (H(1, 2, 4, 4, 4), H(3, 2, 2, 2, 2), H(3))),
        "conv_transpose1d": (aten.conv_transpose1d.default, (H(2, 3, 8), H(3, 4, 3), H(4))),
        "conv_transpose2d": (aten.conv_transpose2d.input, (H(2, 3, 5, 5), H(3, 4, 3, 3), H(4))),
        "conv_transpose3d": (aten.conv_transpose3d.input, (H(1, 2, 3, 3, 3), H(2, 3, 2, 2, 2), H(3))),
        "conv_tbc": (aten.conv_tbc.default, (H(8, 2, 3), H(3, 3, 4), H(4), 1)),
        "convolution": (aten.convolution.default,
                        (H(2, 3, 6, 6), H(4, 3, 3, 3), H(4), [1, 1], [0, 0], [1, 1], False, [0, 0], 1)),
        "_convolution": (aten._convolution.default,
                         (H(2, 3, 6, 6), H(4, 3, 3, 3), H(4), [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
                          False, False, False, False)),
        "scaled_dot_product_attention": (aten.scaled_dot_product_attention.default,
                                         (H(2, 2, 5, 8), H(2, 2, 5, 8), H(2, 2, 5, 8))),
        "_native_multi_head_attention": (aten._native_multi_head_attention.default,
                                         (H(2, 5, 8), H(2, 5, 8), H(2, 5, 8), 8, 2, H(24, 8), H(24),
                                          H(8, 8), H(8))),
        "lstm_cell": (aten.lstm_cell.default, (H(2, 4), [H(2, 5), H(2, 5)], H(20, 4), H(20, 5), H(20), H(20))),
        "gru_cell": (aten.gru_cell.default, (H(2, 4), H(2, 5), H(15, 4), H(15, 5), H(15), H(15))),
        "rnn_tanh_cell": (aten.rnn_tanh_cell.default, (H(2, 4), H(2, 5), H(5, 4), H(5, 5), H(5), H(5))),
        "rnn_relu_cell": (aten.rnn_relu_cell.default, (H(2, 4), H(2, 5), H(5, 4), H(5, 5), H(5), H(5))),
    }


def fp32_samples():
    B = lambda *s, **kw: H(*s, dtype=BF16, **kw)  # noqa: E731
    pos = lambda *s: B(*s, low=0.5, high=2.0)  # noqa: E731
    unit = lambda *s: B(*s, low=-0.9, high=0.9)  # noqa: E731
    prob = lambda *s: B(*s, low=0.05, high=0.95)  # noqa: E731
    logp = torch.randn(6, 2, 4).log_softmax(2).to(BF16).to("hpu")
    return {
        "cross_entropy_loss": (aten.cross_entropy_loss.default, (B(4, 5), L(5, 4))),
        "nll_loss": (aten.nll_loss.default, (B(4, 5), L(5, 4))),
        "nll_loss2d": (aten.nll_loss2d.default, (B(2, 3, 4, 4), L(3, 2, 4, 4))),
        "nll_loss_nd": (aten.nll_loss_nd.default, (B(4, 5), L(5, 4))),
        "mse_loss": (aten.mse_loss.default, (B(4, 5), B(4, 5))),
        "l1_loss": (aten.l1_loss.default, (B(4, 5), B(4, 5))),
        "smooth_l1_loss": (aten.smooth_l1_loss.default, (B(4, 5), B(4, 5))),
        "huber_loss": (aten.huber_loss.default, (B(4, 5), B(4, 5))),
        "binary_cross_entropy": (aten.binary_cross_entropy.default, (prob(4, 5), prob(4, 5))),
        "binary_cross_entropy_with_logits": (aten.binary_cross_entropy_with_logits.default,
                                             (B(4, 5), prob(4, 5))),
        "kl_div": (aten.kl_div.default, (B(4, 5), prob(4, 5))),
        "poisson_nll_loss": (aten.poisson_nll_loss.default, (B(4, 5), pos(4, 5), True, False, 1e-8, 1)),
        "cosine_embedding_loss": (aten.cosine_embedding_loss.default, (B(4, 5), B(4, 5), sign(4, dtype=BF16))),
        "hinge_embedding_loss": (aten.hinge_embedding_loss.default, (B(4, 5), sign(4, 5, dtype=BF16))),
        "margin_ranking_loss": (aten.margin_ranking_loss.default, (B(4), B(4), sign(4, dtype=BF16))),
        "soft_margin_loss": (aten.soft_margin_loss.default, (B(4, 5), sign(4, 5, dtype=BF16))),
        "multilabel_margin_loss": (aten.multilabel_margin_loss.default, (B(4, 5), L(5, 4, 5))),
        "multi_margin_loss": (aten.multi_margin_loss.default, (B(4, 5), L(5, 4))),
        "triplet_margin_loss": (aten.triplet_margin_loss.default, (B(4, 5), B(4, 5), B(4, 5))),
        "ctc_loss": (aten.ctc_loss.IntList,
                     (logp, torch.randint(1, 4, (2, 3)).to("hpu"), [6, 6], [3, 3])),
        "softmax": (aten.softmax.int, (B(4, 5), 1)),
        "log_softmax": (aten.log_softmax.int, (B(4, 5), 1)),
        "logsumexp": (aten.logsumexp.default, (B(4, 5), [1])),
        "exp": (aten.exp.default, (B(4, 5),)),
        "expm1": (aten.expm1.default, (B(4, 5),)),
        "log": (aten.log.default, (pos(4, 5),)),
        "log1p": (aten.log1p.default, (pos(4, 5),)),
        "log2": (aten.log2.default, (pos(4, 5),)),
        "log10": (aten.log10.default, (pos(4, 5),)),
        "pow": (aten.pow.Tensor_Scalar, (pos(4, 5), 2.5)),
        "rsqrt": (aten.rsqrt.default, (pos(4, 5),)),
        "reciprocal": (aten.reciprocal.default, (pos(4, 5),)),
        "softplus": (aten.softplus.default, (B(4, 5),)),
        "erfinv": (aten.erfinv.default, (unit(4, 5),)),
        "sinh": (aten.sinh.default, (B(4, 5),)),
        "cosh": (aten.cosh.default, (B(4, 5),)),
        "tan": (aten.tan.default, (unit(4, 5),)),
        "acos": (aten.acos.default, (unit(4, 5),)),
        "asin": (aten.asin.default, (unit(4, 5),)),
        "layer_norm": (aten.layer_norm.default, (B(4, 5), [5], B(5), B(5))),
        "group_norm": (aten.group_norm.default, (B(2, 4, 3), 2, B(4), B(4))),
        "batch_norm": (aten.batch_norm.default,
                       (B(4, 3), B(3), B(3), H(3), H(3, low=0.5, high=2.0), False, 0.1, 1e-5, False)),
        "instance_norm": (aten.instance_norm.default,
                          (B(2, 3, 5), B(3), B(3), None, None, True, 0.1, 1e-5, False)),
        "rms_norm": (aten.rms_norm.default, (B(4, 5), [5], B(5), 1e-5)),
        "norm": (aten.norm.Scalar, (B(4, 5), 2)),
        "linalg_vector_norm": (aten.linalg_vector_norm.default, (B(4, 5),)),
        "renorm": (aten.renorm.default, (B(4, 5), 2, 0, 1.0)),
        "dist": (aten.dist.default, (B(4, 5), B(4, 5))),
        "cdist": (aten.cdist.default, (B(3, 5), B(4, 5))),
        "pdist": (aten.pdist.default, (B(4, 5),)),
        "cosine_similarity": (aten.cosine_similarity.default, (B(4, 5), B(4, 5))),
        "cumsum": (aten.cumsum.default, (B(4, 5), 1)),
        "cumprod": (aten.cumprod.default, (B(4, 5), 1)),
        "prod": (aten.prod.default, (B(4, 5),)),
        "topk": (aten.topk.default, (B(4, 5), 2)),
    }


def promote_samples(first):
    """Mixed inputs: the first floating tensor has dtype `first`, the others fp32."""
    A = lambda *s, **kw: H(*s, dtype=first, **kw)  # noqa: E731
    return {
        "add": (aten.add.Tensor, (A(4, 5), H(4, 5))),
        "sub": (aten.sub.Tensor, (A(4, 5), H(4, 5))),
        "mul": (aten.mul.Tensor, (A(4, 5), H(4, 5))),
        "div": (aten.div.Tensor, (A(4, 5), H(4, 5, low=0.5, high=2.0))),
        "addcmul": (aten.addcmul.default, (A(4, 5), H(4, 5), H(4, 5))),
        "addcdiv": (aten.addcdiv.default, (A(4, 5), H(4, 5), H(4, 5, low=0.5, high=2.0))),
        "lerp": (aten.lerp.Tensor, (A(4, 5), H(4, 5), H(4, 5, low=0.0, high=1.0))),
        "atan2": (aten.atan2.default, (A(4, 5), H(4, 5))),
        "cat": (aten.cat.default, ([A(4, 5), H(4, 5)],)),
        "stack": (aten.stack.default, ([A(4, 5), H(4, 5)],)),
        "where": (aten.where.self, (H(4, 5) > 0, A(4, 5), H(4, 5))),
        "index_copy": (aten.index_copy.default, (A(5, 3), 0, torch.tensor([0, 2]).to("hpu"), H(2, 3))),
        "index_put": (aten.index_put.default, (A(5, 3), [torch.tensor([0, 2]).to("hpu")], H(2, 3))),
        "scatter_add": (aten.scatter_add.default, (A(3, 5), 1, L(5, 3, 2), H(3, 2))),
    }


def run_recorded(op, args, autocast=True, dtype=BF16):
    rec = Recorder()
    if autocast:
        with torch.autocast("hpu", dtype=dtype), rec:
            out = op(*args)
    else:
        with rec:
            out = op(*args)
    return out, rec.calls


def to_cpu(x, cast=None):
    if isinstance(x, torch.Tensor):
        x = x.cpu()
        return x.to(cast) if cast is not None and x.is_floating_point() else x
    if isinstance(x, (list, tuple)):
        return type(x)(to_cpu(v, cast) for v in x)
    return x


def on_hpu(args, cast=None):
    """args with floating hpu tensors cast to `cast` (what autocast should do)."""
    def f(x):
        if isinstance(x, torch.Tensor) and x.is_floating_point() and cast is not None:
            return x.to(cast)
        return x
    return torch.utils._pytree.tree_map(f, args)


def assert_runs_in(op, args, dtype, name, autocast_dtype=BF16):
    """The op under autocast does exactly what it does without autocast on
    inputs cast to `dtype` by hand: the same ops reach the kernels with the
    same dtypes, after the autocast layer's own casts (which come first and
    all go to `dtype`). Returns the autocast result."""
    out, calls = run_recorded(op, args, dtype=autocast_dtype)
    want = str(dtype).replace("torch.", "")
    n = sum(1 for x in torch.utils._pytree.tree_leaves(args)
            if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != dtype)
    for i in range(n):
        assert calls[i][0] is aten._to_copy.default and calls[i][2] == (want,), \
            f"{name}: expected {n} casts to {want} first, got {calls[:n]}"
    i = n
    _, ref = run_recorded(op, on_hpu(args, dtype), autocast=False)
    assert calls[i:] == ref, f"{name}: under autocast\n{calls[i:]}\nby hand in {want}\n{ref}"
    assert any(f not in CASTS for f, _, _ in ref), f"{name}: no op reached the kernels"
    return out


def assert_values(out, ref, dtype, name):
    outs = torch.utils._pytree.tree_leaves(out)
    refs = torch.utils._pytree.tree_leaves(ref)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype != F32 else dict(rtol=1e-4, atol=1e-4)
    for o, r in zip(outs, refs):
        if isinstance(o, torch.Tensor):
            assert o.device.type == "hpu", name
            assert o.dtype == r.dtype, (name, o.dtype, r.dtype)
            torch.testing.assert_close(o.cpu(), r, msg=name, **tol)


def test_every_list_entry_has_a_sample():
    assert set(LISTS["lower"]) == set(lower_samples()), "sync lower_samples() with hmp/lower_precision_ops.txt"
    assert set(LISTS["fp32"]) == set(fp32_samples()), "sync fp32_samples() with hmp/fp32_ops.txt"
    assert set(LISTS["promote"]) == set(promote_samples(BF16)), "sync promote_samples() with hmp/promote_ops.txt"


def test_loaded_policies_are_the_default_files():
    loaded = hmp.lists()
    kinds = {"lower": "lower_precision", "fp32": "fp32", "promote": "promote"}
    for kind, names in LISTS.items():
        for name in names:
            got = {v for k, v in loaded.items() if k == name or k.startswith(name + ".")}
            assert got == {kinds[kind]}, (name, got)
    # in-place and out= overloads are never autocast
    assert "add.out" not in loaded and "add_.Tensor" not in loaded and "add.Tensor" in loaded


@pytest.mark.parametrize("dtype", [BF16, torch.float16])
@pytest.mark.parametrize("name", LISTS["lower"])
def test_lower_precision_list(name, dtype):
    op, args = lower_samples()[name]
    out = assert_runs_in(op, args, dtype, name, autocast_dtype=dtype)
    if dtype == BF16:
        # same op on the CPU, inputs cast as the list says, no autocast
        assert_values(out, op(*to_cpu(args, dtype)), dtype, name)


@pytest.mark.parametrize("name", LISTS["fp32"])
def test_fp32_list(name):
    op, args = fp32_samples()[name]
    out = assert_runs_in(op, args, F32, name)
    assert_values(out, op(*to_cpu(args, F32)), F32, name)


@pytest.mark.parametrize("name", LISTS["promote"])
def test_promote_list(name):
    op, args = promote_samples(BF16)[name]
    out = assert_runs_in(op, args, F32, name)  # bf16 meets fp32: fp32
    assert_values(out, op(*to_cpu(args, F32)), F32, name)
    op, args = promote_samples(F32)[name]
    args = to_cpu(args, BF16)
    args = torch.utils._pytree.tree_map(lambda x: x.to("hpu") if isinstance(x, torch.Tensor) else x, args)
    assert_runs_in(op, args, BF16, name)  # all bf16: stays bf16, never cast down or up


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("name,op,make", [
    ("relu", aten.relu.default, lambda d: (H(4, 5, dtype=d),)),
    ("gelu", aten.gelu.default, lambda d: (H(4, 5, dtype=d),)),
    ("tanh", aten.tanh.default, lambda d: (H(4, 5, dtype=d),)),
    ("sigmoid", aten.sigmoid.default, lambda d: (H(4, 5, dtype=d),)),
    ("sum", aten.sum.default, lambda d: (H(4, 5, dtype=d),)),
    ("mean", aten.mean.default, lambda d: (H(4, 5, dtype=d),)),
    ("embedding", aten.embedding.default, lambda d: (H(10, 4, dtype=d), L(10, 3))),
    ("dropout", aten.dropout.default, lambda d: (H(4, 5, dtype=d), 0.0, True)),
    ("transpose", aten.transpose.int, lambda d: (H(4, 5, dtype=d), 0, 1)),
])
def test_unlisted_ops_run_in_input_dtype(name, op, make, dtype):
    for kind in LISTS.values():
        assert name not in kind
    out, calls = run_recorded(op, make(dtype))
    _, ref = run_recorded(op, make(dtype), autocast=False)
    assert calls == ref and not any(f is aten._to_copy.default for f, _, _ in calls)
    assert out.dtype == dtype


def test_outside_autocast_nothing_is_cast():
    op, args = lower_samples()["addmm"]
    out, calls = run_recorded(op, args, autocast=False)
    assert out.dtype == F32 and not any(f in CASTS for f, _, _ in calls)
    with torch.autocast("hpu", enabled=False):
        assert op(*args).dtype == F32


def test_cpu_tensors_are_not_cast_by_hpu_autocast():
    with torch.autocast("hpu"):
        assert torch.mm(torch.randn(2, 3), torch.randn(3, 2)).dtype == F32


def test_autocast_default_dtype_is_bf16_and_float16_works():
    assert torch._C._is_autocast_available("hpu")
    assert torch.get_autocast_dtype("hpu") == BF16
    a, b = H(4, 8), H(8, 3)
    with torch.autocast("hpu"):
        assert (a @ b).dtype == BF16
    with torch.autocast("hpu", dtype=torch.float16):
        y = a @ b
        assert y.dtype == torch.float16
        assert torch.softmax(y, -1).dtype == F32
    torch.testing.assert_close(y.cpu(), a.cpu().half() @ b.cpu().half(), rtol=2e-3, atol=2e-3)


def test_weight_casts_are_cached_within_a_region():
    """As PyTorch's CPU/CUDA autocast: an fp32 leaf weight that requires grad
    is cast once per region; the cache is dropped when the region exits."""
    lin = torch.nn.Linear(8, 8).to("hpu")
    x = H(2, 8)
    with torch.autocast("hpu"), Recorder() as rec:
        lin(x), lin(x), lin(x)
    casts = [ins for f, ins, outs in rec.calls if f is aten._to_copy.default]
    # three casts of x, one of the weight, one of the bias
    assert len(casts) == 5, rec.calls
    with torch.autocast("hpu"), Recorder() as rec:
        lin(x)
    assert sum(f is aten._to_copy.default for f, _, _ in rec.calls) == 3  # cache was cleared at exit
    # a weight updated in place between regions is cast afresh
    with torch.no_grad():
        lin.weight.add_(1.0)
    with torch.autocast("hpu"):
        y = lin(x)
    ref = torch.nn.functional.linear(x.cpu().bfloat16(), lin.weight.detach().cpu().bfloat16(),
                                     lin.bias.detach().cpu().bfloat16())
    torch.testing.assert_close(y.cpu(), ref, rtol=2e-2, atol=2e-2)


def test_autocast_backward_gives_fp32_grads():
    lin = torch.nn.Linear(8, 4).to("hpu")
    x = H(3, 8)
    with torch.autocast("hpu"):
        out = lin(x)
        assert out.dtype == BF16
        loss = torch.nn.functional.cross_entropy(out, L(4, 3))
        assert loss.dtype == F32
    loss.backward()
    assert lin.weight.grad.dtype == F32 and lin.weight.grad.device.type == "hpu"
    assert torch.isfinite(lin.weight.grad.cpu()).all()


def test_autocast_state_is_per_thread():
    seen = {}

    def worker():
        seen["enabled"] = torch.is_autocast_enabled("hpu")
        seen["dtype"] = (H(2, 3) @ H(3, 2)).dtype

    with torch.autocast("hpu"):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert (H(2, 3) @ H(3, 2)).dtype == BF16
    assert seen == {"enabled": False, "dtype": F32}


def test_grad_scaler_scales_and_unscales_on_hpu():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4).to("hpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("hpu", init_scale=1024.0)
    x, y = H(16, 8), L(4, 16)
    with torch.autocast("hpu"):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    scaled = scaler.scale(loss)
    assert scaled.device.type == "hpu"
    torch.testing.assert_close(scaled.cpu(), loss.cpu() * 1024.0)
    scaled.backward()
    scaled_grad = model.weight.grad.clone()
    scaler.unscale_(opt)
    torch.testing.assert_close(model.weight.grad.cpu(), scaled_grad.cpu() / 1024.0)
    w0 = model.weight.detach().clone()
    scaler.step(opt)
    scaler.update()
    assert not torch.equal(model.weight.detach().cpu(), w0.cpu())  # the step ran
    assert scaler.get_scale() == 1024.0
    # an inf gradient skips the step and backs the scale off
    opt.zero_grad()
    model.weight.grad = torch.full_like(model.weight, float("inf"))
    model.bias.grad = torch.zeros_like(model.bias)
    w1 = model.weight.detach().clone()
    scaler.step(opt)
    scaler.update()
    assert torch.equal(model.weight.detach().cpu(), w1.cpu())
    assert scaler.get_scale() == 512.0


# ---------------------------------------------------------------- HMP

def in_thread(fn):
    """Runs fn in a fresh thread (HMP state is per thread: the test's own
    thread stays untouched) and returns its result or raises its error."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001
            box["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_hmp_o1_uses_the_lists_and_disable_casts():
    def body():
        hmp.convert(opt_level="O1")
        a, b = H(4, 8), H(8, 3)
        r = {"mm": (a @ b).dtype, "softmax": torch.softmax((a @ b), -1).dtype,
             "relu": torch.relu(a).dtype, "converted": hmp.is_converted()}
        with hmp.disable_casts():
            r["mm_disabled"] = (a @ b).dtype
            r["converted_disabled"] = hmp.is_converted()
        r["mm_after"] = (a @ b).dtype
        return r

    r = in_thread(body)
    assert r == {"mm": BF16, "softmax": F32, "relu": F32, "converted": True,
                 "mm_disabled": F32, "converted_disabled": False, "mm_after": BF16}
    assert not hmp.is_converted() and (H(2, 3) @ H(3, 2)).dtype == F32  # this thread: untouched


def test_hmp_o2_only_matmuls_in_bf16():
    def body():
        hmp.convert(opt_level="O2")
        a, b = H(4, 8), H(8, 3)
        with Recorder() as rec:
            y = a @ b
            s = torch.softmax(y, -1)
        return y.dtype, s.dtype, rec.calls

    y_dtype, s_dtype, calls = in_thread(body)
    assert y_dtype == F32 and s_dtype == F32  # the result goes on in fp32
    ran = {str(f): ins for f, ins, _ in calls if f not in CASTS}
    assert ran["aten.mm.default"] == ("bfloat16", "bfloat16")
    assert ran["aten._softmax.default"] == ("float32",)


def test_hmp_verbose_prints_each_cast(capfd):
    def body():
        hmp.convert(opt_level="O1", isVerbose=True)
        try:
            torch.addmm(H(3), H(2, 4), H(4, 3))
            torch.relu(H(2, 2))
        finally:
            habana_torch._C._hmp_set_verbose(False)

    in_thread(body)
    out = capfd.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("[hmp]")]
    assert lines == ["[hmp] aten::addmm: self Float -> BFloat16",
                     "[hmp] aten::addmm: mat1 Float -> BFloat16",
                     "[hmp] aten::addmm: mat2 Float -> BFloat16"], out


def test_hmp_file_paths_replace_the_lists(tmp_path):
    bf16 = tmp_path / "my_bf16.txt"
    fp32 = tmp_path / "my_fp32.txt"
    bf16.write_text("# my bf16 ops\nrelu\n")
    fp32.write_text("mm  # keep matmuls exact\n")

    def body():
        hmp.convert(opt_level="O1", bf16_file_path=str(bf16), fp32_file_path=str(fp32))
        a = H(4, 4)
        return torch.relu(a).dtype, (a @ a).dtype, (a.bfloat16() @ a.bfloat16()).dtype

    assert in_thread(body) == (BF16, F32, F32)
    # torch.autocast keeps its own lists
    with torch.autocast("hpu"):
        assert torch.relu(H(2, 2)).dtype == F32 and (H(2, 2) @ H(2, 2)).dtype == BF16


def test_hmp_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="opt_level"):
        hmp.convert(opt_level="O3")
    missing = tmp_path / "nope.txt"
    with pytest.raises(OSError, match="nope.txt"):
        in_thread(lambda: hmp.convert(opt_level="O1", bf16_file_path=str(missing)))
    bad = tmp_path / "bad.txt"
    bad.write_text("mm\n\nnot_an_op_at_all\n")
    with pytest.raises(ValueError, match=r"bad.txt:3: 'not_an_op_at_all' is not a PyTorch op"):
        in_thread(lambda: hmp.convert(opt_level="O1", fp32_file_path=str(bad)))


# ------------------------------------------- override files and bad files

def test_env_override_files_replace_defaults(tmp_path):
    lower = tmp_path / "lower.txt"
    fp32 = tmp_path / "fp32.txt"
    lower.write_text("aten::relu\ngelu\n")
    fp32.write_text("# matmuls exact\nmm\naddmm\n")
    r = run_python("""
        import torch, habana_torch
        a = torch.randn(4, 4).to("hpu")
        with torch.autocast("hpu"):
            print(torch.relu(a).dtype, torch.nn.functional.gelu(a).dtype, (a @ a).dtype,
                  (a.bfloat16() @ a.bfloat16()).dtype, torch.softmax(a.bfloat16(), -1).dtype)
    """, env={"PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST": str(lower),
              "PT_HPU_AUTOCAST_FP32_OPS_LIST": str(fp32)})
    assert r.returncode == 0, r.stderr
    # relu/gelu now bf16, mm now fp32 (even from bf16), softmax in no list any more
    assert r.stdout.split() == ["torch.bfloat16", "torch.bfloat16", "torch.float32", "torch.float32",
                                "torch.bfloat16"]


def test_env_override_of_one_list_wins_over_the_other_default(tmp_path):
    lower = tmp_path / "lower.txt"
    lower.write_text("softmax\nmm\n")  # softmax is in the default fp32 list
    r = run_python("""
        import torch, habana_torch
        from habana_torch.hpex import hmp
        a = torch.randn(4, 4).to("hpu")
        with torch.autocast("hpu"):
            print(torch.softmax(a, -1).dtype, torch.log_softmax(a.bfloat16(), -1).dtype)
    """, env={"PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST": str(lower)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["torch.bfloat16", "torch.float32"]


@pytest.mark.parametrize("content,message", [
    ("mm\nbmm\nnot_a_real_op\n", r"{path}:3: 'not_a_real_op' is not a PyTorch op"),
    ("mm\n\n  # ok\naddmm extra\n", r"{path}:4: malformed line 'addmm extra'"),
    ("mm\nmm.no_such_overload\n", r"{path}:2: aten::mm has no overload 'no_such_overload'"),
    ("mm\nadd_\n", r"{path}:2: aten::add_ writes to its arguments"),
    ("mm\n1abc\n", r"{path}:2: malformed line '1abc'"),
    ("mm\nsoftmax\nlinear\n", None),  # fine
])
def test_bad_env_files_fail_at_import_naming_file_and_line(tmp_path, content, message):
    path = tmp_path / "lower.txt"
    path.write_text(content)
    r = run_python("import habana_torch; print('loaded')",
                   env={"PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST": str(path)})
    if message is None:
        assert r.returncode == 0 and "loaded" in r.stdout, r.stderr
        return
    assert r.returncode != 0
    import re
    assert re.search("ValueError: " + message.format(path=re.escape(str(path))), r.stderr), r.stderr


def test_unreadable_or_conflicting_env_files(tmp_path):
    missing = tmp_path / "missing.txt"
    r = run_python("import habana_torch", env={"PT_HPU_AUTOCAST_FP32_OPS_LIST": str(missing)})
    assert r.returncode != 0 and "OSError" in r.stderr and str(missing) in r.stderr, r.stderr
    r = run_python("import habana_torch", env={"PT_HPU_AUTOCAST_FP32_OPS_LIST": str(tmp_path)})
    assert r.returncode != 0 and str(tmp_path) in r.stderr, r.stderr
    lower, fp32 = tmp_path / "l.txt", tmp_path / "f.txt"
    lower.write_text("mm\nbmm\n")
    fp32.write_text("softmax\n\nbmm\n")
    r = run_python("import habana_torch", env={"PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST": str(lower),
                                               "PT_HPU_AUTOCAST_FP32_OPS_LIST": str(fp32)})
    assert r.returncode != 0
    assert f"{fp32}:3: 'bmm' is also in {lower}:2" in r.stderr, r.stderr
