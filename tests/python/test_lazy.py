"""Lazy mode: recording, flush points, the recipe cache and its counters."""
import contextlib
import copy
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn

import habana_torch
import habana_torch.core as htcore
from habana_torch import _C
from habana_torch.hpu.metrics import metric_global, recompile_reasons
from conftest import run_python


@contextlib.contextmanager
def lazy_mode(enabled):
    """Runs the body in lazy (True) or eager (False) mode, then restores the
    mode the suite runs in (scripts/test.sh runs it in both)."""
    was = htcore.is_lazy()
    htcore._set_lazy_mode(enabled)
    try:
        yield
    finally:
        htcore.mark_step()
        htcore._set_lazy_mode(was)


@pytest.fixture
def lazy():
    with lazy_mode(True):
        yield


def stats(name):
    return dict(metric_global(name).stats())


def train(device, model, batches, lazy_steps):
    model = copy.deepcopy(model).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for x, y in batches:
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        htcore.mark_step()
        opt.step()
        htcore.mark_step()
        losses.append(loss.detach())
    return [float(l.item()) for l in losses], model


def make_batches(n=8, batch=16):
    g = torch.Generator().manual_seed(0)
    teacher = torch.randn(10, 3, generator=g)
    xs = [torch.randn(batch, 10, generator=g) for _ in range(n)]
    return [(x, (x @ teacher).argmax(1)) for x in xs]


MODEL = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))


def test_ops_are_recorded_until_a_flush(lazy):
    a = torch.ones(4, device="hpu")
    torch.hpu.synchronize()
    b = a * 2 + 1
    assert _C._lazy_pending(0) >= 2  # recorded, not run
    htcore.mark_step()
    assert _C._lazy_pending(0) == 0
    assert b.cpu().tolist() == [3.0] * 4


@pytest.mark.parametrize("trigger", ["item", "cpu", "print", "fallback", "synchronize", "event"])
def test_flush_triggers(lazy, trigger, capsys):
    a = torch.arange(4.0, device="hpu")
    torch.hpu.synchronize()
    b = a + 10
    assert _C._lazy_pending(0) > 0
    if trigger == "item":
        assert b[1].item() == 11.0
    elif trigger == "cpu":
        assert b.cpu().tolist() == [10.0, 11.0, 12.0, 13.0]
    elif trigger == "print":
        print(b)
        assert "10., 11., 12., 13." in capsys.readouterr().out
    elif trigger == "fallback":
        assert torch.cumsum(b, 0).cpu().tolist() == [10.0, 21.0, 33.0, 46.0]
    elif trigger == "synchronize":
        torch.hpu.synchronize()
    elif trigger == "event":
        e = torch.hpu.Event()
        e.record()
        e.synchronize()
        assert e.query()
    assert _C._lazy_pending(0) == 0


def test_graph_size_bound_flushes():
    r = run_python("""
        import torch, habana_torch
        from habana_torch import _C
        a = torch.zeros(8, device="hpu")
        for i in range(25):
            a.add_(1)
        print(_C._lazy_pending(0), a.cpu()[0].item())
    """, env={"PT_HPU_LAZY_MODE": "1", "PT_HPU_MAX_GRAPH_NODES": "10"})
    assert r.returncode == 0, r.stderr
    pending, value = r.stdout.split()
    # 26 recorded nodes (the zeros fill + 25 adds) with a bound of 10: two
    # graphs of 10 were launched on their own, 6 nodes still wait.
    assert int(pending) == 6 and float(value) == 25.0


def test_lazy_training_equals_eager_and_cpu():
    batches = make_batches()
    torch.manual_seed(0)
    model = copy.deepcopy(MODEL)
    with lazy_mode(False):
        eager_losses, eager_model = train("hpu", model, batches, False)
    with lazy_mode(True):
        lazy_losses, lazy_model = train("hpu", model, batches, True)
    cpu_losses, _ = train("cpu", model, batches, False)
    assert lazy_losses == eager_losses  # same kernels, same order: bitwise
    for p_l, p_e in zip(lazy_model.parameters(), eager_model.parameters()):
        assert torch.equal(p_l.cpu(), p_e.cpu())
    torch.testing.assert_close(torch.tensor(lazy_losses), torch.tensor(cpu_losses), rtol=1e-5, atol=1e-6)


def test_steady_state_compiles_nothing(lazy):
    batches = make_batches(n=6)
    model = copy.deepcopy(MODEL).to("hpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    compiles = []
    for step, (x, y) in enumerate(batches):
        for group in opt.param_groups:  # a per-step scalar must not recompile
            group["lr"] = 0.1 / (step + 1)
        loss = nn.functional.cross_entropy(model(x.to("hpu")), y.to("hpu"))
        opt.zero_grad()
        loss.backward()
        htcore.mark_step()
        opt.step()
        htcore.mark_step()
        compiles.append(stats("graph_compilation")["TotalNumber"])
    assert compiles[2] > 0
    assert compiles[-1] == compiles[2], compiles  # from step 3 on: nothing new
    assert stats("recipe_cache")["Hits"] > 0


def test_a_cnn_training_loop_stops_compiling_whatever_blocks_the_allocator_reuses(lazy):
    """A ResNet-18 (examples/train_resnet.py's, 4 wide), SGD with momentum
    and weight decay, and
    the losses kept on the card (a list that grows every step, so the
    caching allocator reuses other blocks in every step): from the third
    step on nothing is compiled. Graph signatures and fused plans used to
    follow which freed block the allocator handed to which tensor (an old
    tensor of the same view at a reused address taken for a producer, a
    store kept for a block a smaller tensor reused), so such a loop
    recompiled one of its graphs in almost every step."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "train_resnet.py"
    spec = importlib.util.spec_from_file_location("train_resnet_for_lazy", path)
    train_resnet = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train_resnet)
    torch.manual_seed(0)
    model = train_resnet.build_model("resnet18", 4).to("hpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    g = torch.Generator().manual_seed(1)
    compiles, kept = [], []
    for step in range(10):
        x, y = torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 10, (8,), generator=g)
        loss = nn.functional.cross_entropy(model(x.to("hpu")), y.to("hpu"))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        htcore.mark_step()
        opt.step()
        htcore.mark_step()
        kept.append(loss.detach())
        compiles.append(stats("graph_compilation")["TotalNumber"])
    assert compiles[-1] == compiles[2], (compiles, recompile_reasons()[:4])
    assert all(torch.isfinite(torch.stack(kept).cpu()))


def test_new_batch_shape_recompiles_once_and_says_why(lazy):
    w = torch.randn(16, 8, device="hpu")
    def step(batch):
        x = torch.randn(batch, 16, device="hpu")
        y = (x @ w).relu() * 2
        htcore.mark_step()
        return y
    step(4)
    step(4)
    before = stats("graph_compilation")["TotalNumber"]
    step(6)
    after_first = stats("graph_compilation")["TotalNumber"]
    step(6)
    step(4)
    assert after_first == before + 1
    assert stats("graph_compilation")["TotalNumber"] == after_first  # 6 and 4 both cached now
    reason = [r for r in recompile_reasons() if "[4, 16]" in r and "[6, 16]" in r]
    assert reason, recompile_reasons()[:3]


def test_compile_log(tmp_path):
    r = run_python("""
        import torch, habana_torch, habana_torch.core as htcore
        for n in (3, 5):
            x = torch.ones(n, device="hpu") * 2
            htcore.mark_step()
    """, env={"PT_HPU_LAZY_MODE": "1", "PT_HPU_LOG_GRAPH_COMPILE": "1"})
    assert r.returncode == 0, r.stderr
    assert "graph compile hpu:0" in r.stderr
    assert "changed from [3] to [5]" in r.stderr


def test_errors_surface_at_the_op_in_lazy_mode(lazy):
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(2, device="hpu") + torch.ones(2)
    with pytest.raises(RuntimeError, match="size of tensor"):
        torch.ones(2, 3, device="hpu") * torch.ones(4, device="hpu")
    assert (torch.ones(2, device="hpu") * 3).cpu().tolist() == [3.0, 3.0]


def chain(x, y):
    """Six elementwise ops; the intermediates die at once."""
    return (((x * 2 + y) / 3 - x).relu() * y + 0.5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n", [1000, 300_001])
def test_fused_chain_equals_eager_bitwise(dtype, n):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(n, generator=g).to(dtype), torch.randn(n, generator=g).to(dtype)
    xh, yh = x.to("hpu"), y.to("hpu")
    with lazy_mode(False):
        eager = chain(xh, yh).cpu()
    with lazy_mode(True):
        before = stats("fusion")
        lazy = chain(xh, yh)
        htcore.mark_step()
        lazy = lazy.cpu()
        after = stats("fusion")
    assert torch.equal(lazy, eager)
    torch.testing.assert_close(lazy, chain(x, y), **({} if dtype == torch.float32 else dict(atol=2e-2, rtol=2e-2)))
    assert after["FusedNodes"] - before["FusedNodes"] >= 6
    assert after["DroppedStores"] - before["DroppedStores"] >= 4  # temporaries never written


def gelu_new(x):
    """transformers' NewGELUActivation (GPT-2): eight elementwise ops."""
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3.0))))


def pointwise_mix(x, y):
    """Unary, binary and ternary pointwise ops with scalar operands, a
    one-element tensor and two tensors, mixed with the arithmetic ops."""
    s = torch.full((), 0.25, dtype=x.dtype, device=x.device)
    z = torch.sigmoid(x) * torch.exp(-y.abs()) + torch.maximum(x, y * s)
    z = torch.where(z > 0, z, torch.zeros_like(z))  # comparison output is bool: not fused
    z = torch.clamp(z, -1.5, 1.5).lerp(y, 0.3)
    return torch.nn.functional.silu(z).addcmul(x, y, value=0.5).rsqrt().nan_to_num(0.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("fn,min_fused", [(gelu_new, 8), (pointwise_mix, 10)])
def test_fused_pointwise_ops_equal_eager_bitwise(fn, min_fused, dtype):
    g = torch.Generator().manual_seed(1)
    x, y = (torch.randn(200_003, generator=g) * 3).to(dtype), torch.randn(200_003, generator=g).to(dtype)
    xh, yh = x.to("hpu"), y.to("hpu")
    with lazy_mode(False):
        eager = fn(xh, yh).cpu() if fn is not gelu_new else fn(xh).cpu()
    with lazy_mode(True):
        before = stats("fusion")
        out = fn(xh, yh) if fn is not gelu_new else fn(xh)
        htcore.mark_step()
        lazy = out.cpu()
        after = stats("fusion")
    assert torch.equal(lazy, eager)
    cpu = fn(x, y) if fn is not gelu_new else fn(x)
    torch.testing.assert_close(lazy, cpu, equal_nan=True,
                               **(dict(atol=1e-5, rtol=1e-4) if dtype == torch.float32 else dict(atol=2e-2, rtol=2e-2)))
    assert after["FusedNodes"] - before["FusedNodes"] >= min_fused


def attention_probs(x, y):
    """Scores scaled plus an additive mask (of the scores' shape; broadcast
    operands do not fuse), then softmax: the scale and the mask fuse, and the
    softmax runs on each block of rows as they are produced."""
    mask = ((y > 1.0) * -10000.0).to(x.dtype)
    return torch.softmax(x * 0.125 + mask, dim=-1)


def residual_norm(x, y):
    """The residual add feeding layer_norm, the add's result kept (it is the
    next residual): both outputs returned."""
    w = torch.linspace(0.5, 1.5, x.shape[-1], dtype=x.dtype, device=x.device)
    b = w * 0.1
    h = x + y * 0.5
    return h, torch.nn.functional.layer_norm(h, (x.shape[-1],), w, b)


def dead_residual_log_softmax(x, y):
    return torch.log_softmax((x - y) * 2.0, dim=-1)


def _row_mask(y):
    """An additive mask that broadcasts into y's shape as BERT's does:
    [B, 1, 1, S] for 4-d scores, [1, S] for 2-d."""
    src = y[:1] if y.dim() == 2 else y[:, :1, :1, :]
    return ((src > 1.0) * -10000.0).to(y.dtype)


def attention_probs_broadcast_mask(x, y):
    """BERT's scores * scale + mask [B,1,1,S] -> softmax: the mask is read
    with stride 0 inside the group. (The mask is made first, as BERT makes
    it once per forward: groups are runs of consecutive nodes.)"""
    mask = _row_mask(y)
    return torch.softmax(x * 0.125 + mask, dim=-1)


def row_sum(x, y):
    return (x * 0.5 + y).sum(-1)


def row_mean_keepdim_broadcast(x, y):
    # the mask held, as BERT holds it (a temporary's freed block may be
    # reused by the group's output: then the group stops, to read it first)
    mask = _row_mask(y)
    return ((x - mask) * y).mean(dim=-1, keepdim=True)


def row_var_std(x, y):
    """var and std (two groups), and var_mean's two outputs (a third)."""
    d = x - y
    v = (d * 0.5).var(-1)
    s = torch.std((x + y) * 2.0, dim=-1, correction=0)
    vm = torch.var_mean(torch.relu(x) * y, dim=-1, keepdim=True)
    return (v, s) + tuple(vm)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("fn", [attention_probs, residual_norm, dead_residual_log_softmax,
                                attention_probs_broadcast_mask, row_sum,
                                row_mean_keepdim_broadcast, row_var_std])
@pytest.mark.parametrize("shape", [(8, 4, 33, 128), (3, 3000)])
def test_row_ops_fused_with_their_producers_equal_eager_bitwise(fn, dtype, shape):
    g = torch.Generator().manual_seed(2)
    x, y = (torch.randn(shape, generator=g) * 4).to(dtype), torch.randn(shape, generator=g).to(dtype)
    xh, yh = x.to("hpu"), y.to("hpu")

    def run(a, b):
        out = fn(a, b)
        return list(out) if isinstance(out, tuple) else [out]
    with lazy_mode(False):
        eager = [t.cpu() for t in run(xh, yh)]
    with lazy_mode(True):
        before = stats("fusion")
        out = run(xh, yh)
        htcore.mark_step()
        lazy = [t.cpu() for t in out]
        after = stats("fusion")
    for e, l in zip(eager, lazy):
        assert torch.equal(l, e)
    tol = dict(atol=1e-5, rtol=1e-4) if dtype == torch.float32 else dict(atol=3e-2, rtol=3e-2)
    for c, l in zip(run(x, y), lazy):
        torch.testing.assert_close(l, c, **tol)
    # the elementwise producers and the row op itself ran as one group
    # (row_var_std: three such groups of three nodes; without the reductions
    # fused its producers alone would count 6)
    assert after["FusedNodes"] - before["FusedNodes"] >= (9 if fn is row_var_std else 3)


def test_fused_inplace_and_views_equal_eager():
    def work(a):
        b = a.clone()
        b.mul_(2).add_(1).relu_()             # in place: one buffer, fused
        c = b[1:] + b[:-1]                    # shifted views of one buffer
        b[:-1].mul_(3)                        # writes what c's inputs read
        d = c * 2 - b[1:]
        return b, c, d
    a = torch.randn(5000).to("hpu")
    with lazy_mode(False):
        eager = [t.cpu() for t in work(a)]
    with lazy_mode(True):
        out = work(a)
        htcore.mark_step()
        lazy = [t.cpu() for t in out]
    for e, l in zip(eager, lazy):
        assert torch.equal(e, l)
    ref = [t for t in work(a.cpu())]
    for r, l in zip(ref, lazy):
        torch.testing.assert_close(l, r)


def test_fused_broadcast_operand_overwritten_in_the_group_equals_eager():
    """A member reads row 0 of b broadcast over all rows, and a later member
    writes b in place: fused tile by tile, row 0 would change before the
    later tiles read it, so the writer must not join (and results match)."""
    def work(a, m):
        b = a.clone()
        row = b[:1]                 # [1, N] view of b's first row
        c = (b * 2 + row) * m       # row and m [N] broadcast into [R, N]
        b.mul_(3).add_(1)           # writes row after c read it (eager order)
        return b, c
    g = torch.Generator().manual_seed(5)
    a, m = torch.randn(64, 300, generator=g), torch.randn(300, generator=g)
    ah, mh = a.to("hpu"), m.to("hpu")
    with lazy_mode(False):
        eager = [t.cpu() for t in work(ah, mh)]
    with lazy_mode(True):
        before = stats("fusion")
        out = work(ah, mh)
        htcore.mark_step()
        lazy = [t.cpu() for t in out]
        after = stats("fusion")
    for e, l in zip(eager, lazy):
        assert torch.equal(e, l)
    for r, l in zip(work(a, m), lazy):
        torch.testing.assert_close(l, r)
    # the broadcasting ones fused (mul, add, mul), and so did the in-place pair
    assert after["FusedNodes"] - before["FusedNodes"] >= 5


def test_live_intermediates_are_stored(lazy):
    x = torch.randn(1000, device="hpu")
    t1 = x * 2          # kept by the caller: must be written
    t2 = t1 + 1
    htcore.mark_step()
    assert torch.equal(t1.cpu(), x.cpu() * 2)
    assert torch.equal(t2.cpu(), x.cpu() * 2 + 1)


def test_step_closures_run_after_the_graph(lazy):
    seen = []
    x = torch.ones(3, device="hpu")
    y = x * 5
    htcore.add_step_closure(lambda t, tag: seen.append((tag, t.cpu().tolist())), (y, "loss"))
    assert seen == []  # nothing ran yet; the graph is still pending
    assert _C._lazy_pending(0) > 0
    htcore.mark_step()
    assert seen == [("loss", [5.0, 5.0, 5.0])]


def test_iter_mark_step(lazy):
    total = torch.zeros(2, device="hpu")
    flushed = []
    for i in htcore.iter_mark_step(range(3)):
        total.add_(i)
        flushed.append(_C._lazy_pending(0))
    assert _C._lazy_pending(0) == 0
    assert total.cpu().tolist() == [3.0, 3.0]
    assert flushed[1] <= 1  # mark_step ran between items


def test_graph_dump_text_and_dot(tmp_path):
    r = run_python("""
        import torch, habana_torch, habana_torch.core as htcore
        x = torch.randn(1000, device="hpu")
        y = ((x * 2 + 1).relu() - x) / 4
        z = torch.softmax(y.view(10, 100) * 2 - 1, dim=-1)
        htcore.mark_step()
        print(y.cpu().shape)
    """, env={"PT_HPU_LAZY_MODE": "1", "PT_HPU_GRAPH_DUMP_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    texts = sorted(tmp_path.glob("hpu0_graph*.txt"))
    dots = sorted(tmp_path.glob("hpu0_graph*.dot"))
    assert texts and dots
    text = "\n".join(t.read_text() for t in texts)
    assert "fused groups" in text and "relu" in text and "kept in cache only:" in text
    assert "on each block of rows" in text  # the softmax that ends the group
    fused = [d.read_text() for d in dots if "relu" in d.read_text()]
    assert fused, [d.read_text() for d in dots]
    assert fused[0].startswith("digraph") and "cluster_g0" in fused[0] and "->" in fused[0]


def test_lazy_step_peak_memory_at_most_eager():
    """Allocation happens when ops are recorded and frees when the host lets
    go, exactly as in eager mode; the fused groups allocate nothing more."""
    batches = make_batches(n=3, batch=64)

    def peak(lazy):
        with lazy_mode(lazy):
            torch.hpu.synchronize()
            torch.hpu.empty_cache()
            torch.hpu.reset_peak_memory_stats()
            base = torch.hpu.memory_allocated()
            train("hpu", MODEL, batches, lazy)
            torch.hpu.synchronize()
            return torch.hpu.max_memory_allocated() - base

    eager, lazy_peak = peak(False), peak(True)
    assert 0 < lazy_peak <= eager, (lazy_peak, eager)


def test_lazy_is_the_default_and_eager_is_one_variable_away():
    code = "import habana_torch.core as htcore; print(htcore.is_lazy())"
    env = {k: v for k, v in os.environ.items() if k != "PT_HPU_LAZY_MODE"}
    for extra, want in (({}, "True"), ({"PT_HPU_LAZY_MODE": "0"}, "False"),
                        ({"PT_HPU_LAZY_MODE": "1"}, "True")):
        out = subprocess.run([sys.executable, "-c", code], env={**env, **extra},
                             capture_output=True, text=True, timeout=120)
        assert out.stdout.split() == [want], (extra, out.stderr[-2000:])


RECIPE_STEP = """
    import torch, habana_torch, habana_torch.core as htcore
    from habana_torch.hpu.metrics import metric_global
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).to("hpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 16).to("hpu")
    for _ in range(3):
        loss = (model(x) * 2 + 1).relu().sum()
        loss.backward()
        htcore.mark_step()
        opt.step()
        opt.zero_grad()
        htcore.mark_step()
    value = round(loss.item(), 5)
    c = dict(metric_global("recipe_cache").stats())
    n = dict(metric_global("graph_compilation").stats())["TotalNumber"]
    print(n, c["DiskHits"], c["DiskStores"], c["DiskRejected"], value)
"""


def test_recipes_persist_on_disk_across_processes(tmp_path):
    env = {"PT_HPU_LAZY_MODE": "1", "PT_HPU_RECIPE_CACHE_CONFIG": f"{tmp_path}/recipes,false,64"}
    first = run_python(RECIPE_STEP, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    compiled, hits, stores, rejected, loss = first.stdout.split()
    assert int(compiled) >= 2 and int(hits) == 0 and int(stores) == int(compiled)
    files = list((tmp_path / "recipes").glob("*.recipe"))
    assert len(files) == int(stores)

    second = run_python(RECIPE_STEP, env=env)
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stdout.split() == ["0", compiled, "0", "0", loss]  # nothing compiled

    # Damaged files (truncated, or a flipped last byte: in the plan or the
    # signature) are ignored (counted), compiled again, and replaced.
    for i, f in enumerate(files):
        data = bytearray(f.read_bytes())
        if i % 2:
            data = data[:40]
        else:
            data[-1] ^= 0x10
        f.write_bytes(bytes(data))
    third = run_python(RECIPE_STEP, env=env)
    assert third.returncode == 0, third.stderr[-3000:]
    assert third.stdout.split() == [compiled, "0", compiled, compiled, loss]

    # "true" as the second field clears the directory at start.
    fourth = run_python(RECIPE_STEP, env={**env, "PT_HPU_RECIPE_CACHE_CONFIG": f"{tmp_path}/recipes,true"})
    assert fourth.stdout.split()[:2] == [compiled, "0"]
