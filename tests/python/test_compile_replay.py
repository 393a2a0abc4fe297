"""torch.compile(backend="hpu_backend"): every compiled graph (inference,
forward and backward) is captured as an HPU graph at its first call with an
input signature and replayed, rebound to each call's inputs and to fresh
outputs, at every later call (habana_torch/dynamo/replay.py).

Results are compared with the CPU running the same code uncompiled, and the
replay counters show the HPU-graph path was really taken (a replayed call
does not go through the dispatcher, so a wrongly bound input or an output
shared between calls would show as a wrong number, not as a slower run).
"""
import copy
import importlib.util
import pathlib

import pytest
import torch

import habana_torch
import habana_torch.core as htcore

TOL = dict(rtol=1e-5, atol=1e-5)


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # conftest.py


def counts_after(fn):
    before = habana_torch.dynamo.replay_counts()
    result = fn()
    after = habana_torch.dynamo.replay_counts()
    return result, {k: after[k] - before[k] for k in after}


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                               torch.nn.Linear(32, 5)).eval()


def compiled(fn, mode=None):
    return torch.compile(fn, backend="hpu_backend", mode=mode)


@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_inference_is_captured_once_then_replayed_and_outputs_are_fresh(mode):
    cpu = mlp()
    model = compiled(copy.deepcopy(cpu).to("hpu"), mode)
    xs = [torch.randn(4, 12, generator=torch.Generator().manual_seed(s)) for s in range(4)]
    with torch.no_grad():
        outs, n = counts_after(lambda: [model(x.to("hpu")) for x in xs])
        assert n == {"captures": 1, "replays": 3, "demoted": 0, "partitioned": 0}
        # every call's output is its own: the graph's output tensor is
        # rewritten by the next replay, the caller's copies are not
        for x, out in zip(xs, outs):
            torch.testing.assert_close(out.cpu(), cpu(x), **TOL)
        _, n = counts_after(lambda: model(torch.randn(7, 12).to("hpu")))
        assert n["captures"] == 1  # a new shape, a new graph


def test_dynamic_shapes_compile_once_and_capture_once_per_size():
    cpu = mlp()
    model = torch.compile(copy.deepcopy(cpu).to("hpu"), backend="hpu_backend", dynamic=True)
    with torch.no_grad():
        def calls():
            for n in (3, 5, 3, 7, 5, 5):
                x = torch.randn(n, 12, generator=torch.Generator().manual_seed(n))
                torch.testing.assert_close(model(x.to("hpu")).cpu(), cpu(x), **TOL)
        _, n = counts_after(calls)
    assert n == {"captures": 3, "replays": 3, "demoted": 0, "partitioned": 0}
    assert habana_torch.dynamo.compile_counts()["inference"] >= 1


def test_parameters_are_read_in_place_and_a_replaced_one_is_rebound():
    cpu = mlp()
    hpu = copy.deepcopy(cpu).to("hpu")
    model = compiled(hpu)
    x = torch.randn(4, 12)
    with torch.no_grad():
        model(x.to("hpu"))
        for m in (cpu[0], hpu[0]):
            m.weight.mul_(-0.5)  # in place: the captured graph reads the new values
        torch.testing.assert_close(model(x.to("hpu")).cpu(), cpu(x), **TOL)
        cpu[3].weight = torch.nn.Parameter(torch.randn(5, 32))
        hpu[3].weight = torch.nn.Parameter(cpu[3].weight.detach().to("hpu"))
        got, n = counts_after(lambda: model(x.to("hpu")))
        torch.testing.assert_close(got.cpu(), cpu(x), **TOL)
        # the new parameter is read where it is: no new capture
        assert n == {"captures": 0, "replays": 1, "demoted": 0, "partitioned": 0}


def test_an_input_updated_in_place_gets_its_new_value():
    def fn(acc, x):
        acc.add_(x * 2)
        return acc.sum(0)

    acc_c, acc_h = torch.zeros(3, 4), torch.zeros(3, 4).to("hpu")
    f = compiled(fn)
    with torch.no_grad():
        for s in range(3):
            x = torch.randn(3, 4, generator=torch.Generator().manual_seed(s))
            want = fn(acc_c, x)
            (got, n) = counts_after(lambda: f(acc_h, x.to("hpu")))
            torch.testing.assert_close(got.cpu(), want, **TOL)
            torch.testing.assert_close(acc_h.cpu(), acc_c, **TOL)
    assert habana_torch.dynamo.replay_counts()["replays"] >= 2


@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_a_buffer_whose_old_value_is_read_is_not_updated_early(mode):
    """inplace.py must not move the update of an input before a read of its
    old value: here the old rows are read after the index_copy_."""
    def fn(buf, idx, x):
        old = buf * 1
        buf.index_copy_(0, idx, x)
        return old + buf

    f = torch.compile(fn, backend="hpu_backend", mode=mode)
    buf_c = torch.arange(12.0).view(4, 3)
    buf_h = buf_c.to("hpu")
    with torch.no_grad():
        for s in range(3):
            idx, x = torch.tensor([s, 3]), torch.full((2, 3), float(s + 10))
            want = fn(buf_c, idx, x)
            torch.testing.assert_close(f(buf_h, idx.to("hpu"), x.to("hpu")).cpu(), want)
            torch.testing.assert_close(buf_h.cpu(), buf_c)


@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_a_compiled_optimizer_step_updates_parameters_and_state_in_place(mode, monkeypatch):
    """AdamW's step, compiled: each parameter's and state's chain of updates
    runs in place on it (no copy back), and three steps give the CPU's
    parameters and moments. Tolerance: PyTorch's compiled AdamW rounds
    differently from its eager one (1e-7 after one step, here as with the
    pass switched off), and the next gradients carry that on."""
    from habana_torch.dynamo import backend, inplace

    rewrites = []
    monkeypatch.setattr(backend, "update_inputs_in_place",
                        lambda gm: rewrites.append(inplace.update_inputs_in_place(gm)))
    cpu = mlp().train()
    hpu = copy.deepcopy(cpu).to("hpu")
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1) for m in (cpu, hpu)]
    step = compiled(opts[1].step, mode)
    for s in range(3):
        x = torch.randn(4, 12, generator=torch.Generator().manual_seed(s))
        for m in (cpu, hpu):
            m.zero_grad()
            m(x.to(next(m.parameters()).device)).square().sum().backward()
        opts[0].step()
        step()
    n_params = len(list(cpu.parameters()))
    assert rewrites and rewrites[0] == 4 * n_params  # step, exp_avg, exp_avg_sq, the parameter
    for (name, p_c), p_h in zip(cpu.named_parameters(), hpu.parameters()):
        torch.testing.assert_close(p_h.detach().cpu(), p_c.detach(), rtol=1e-4, atol=1e-5, msg=name)
        for key in ("exp_avg", "exp_avg_sq", "step"):
            torch.testing.assert_close(opts[1].state[p_h][key].cpu(), opts[0].state[p_c][key],
                                       rtol=1e-4, atol=1e-5, msg=f"{name} {key}")


def test_a_graph_with_a_cpu_fallback_is_split_around_it():
    """igamma falls back to the CPU: the first capture is demoted and the
    graph split around it; the ops before and after it become two captured
    segments, replayed from the third call on, and the fallback runs (and is
    counted) at every call."""
    def fn(x, y):
        a = (x * 2 + 1).relu()
        b = torch.igamma(a + 1, y.abs() + 1)
        return (b * 3 + a).sum(-1), a.exp()

    f = compiled(fn, "reduce-overhead")
    want = [{"captures": 0, "replays": 0, "demoted": 1, "partitioned": 1},
            {"captures": 2, "replays": 0, "demoted": 0, "partitioned": 0},
            {"captures": 0, "replays": 2, "demoted": 0, "partitioned": 0}]
    with torch.no_grad():
        for s in range(4):
            g = torch.Generator().manual_seed(s)
            x, y = torch.randn(6, 9, generator=g), torch.randn(6, 9, generator=g)
            fell_back = habana_torch.metrics.cpu_fallback_counts().get("aten::igamma.out", 0)
            got, n = counts_after(lambda: f(x.to("hpu"), y.to("hpu")))
            for a, b in zip(got, fn(x, y)):
                torch.testing.assert_close(a.cpu(), b, **TOL)
            assert n == want[min(s, 2)]
            assert habana_torch.metrics.cpu_fallback_counts()["aten::igamma.out"] == fell_back + 1


def test_a_graph_that_reads_a_value_on_the_host_is_split_around_it():
    """linalg.inv checks its LAPACK info on the host (AOTAutograd's
    _linalg_check_errors, an effectful op): no fallback counter names it,
    the node during which the first capture stopped does. The ops around
    it become two captured segments, replayed from the third call on; a
    training step through it gives the CPU's gradients."""
    def fn(x):
        a = x @ x.T + torch.eye(x.shape[0], device=x.device) * 4
        return (torch.linalg.inv(a) @ x).relu() * 2 + 1

    f = compiled(fn)
    want = [{"captures": 0, "replays": 0, "demoted": 1, "partitioned": 1},
            {"captures": 2, "replays": 0, "demoted": 0, "partitioned": 0},
            {"captures": 0, "replays": 2, "demoted": 0, "partitioned": 0}]
    with torch.no_grad():
        for s in range(4):
            x = torch.randn(5, 5, generator=torch.Generator().manual_seed(s))
            got, n = counts_after(lambda: f(x.to("hpu")))
            torch.testing.assert_close(got.cpu(), fn(x), rtol=1e-4, atol=1e-4)
            assert n == want[min(s, 2)]
    for s in range(3):
        x = torch.randn(5, 5, generator=torch.Generator().manual_seed(10 + s))
        xc, xh = x.clone().requires_grad_(), x.to("hpu").requires_grad_()
        fn(xc).sum().backward()
        f(xh).sum().backward()
        torch.testing.assert_close(xh.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-4)


def test_split_graphs_take_symbolic_sizes_and_fallbacks_with_several_outputs():
    """dynamic=True: the sizes reach the segments as numbers, one capture
    per size; fractional_max_pool2d (no hpu kernel) returns two tensors,
    which stay with it outside the segments."""
    def f(x, y):
        return torch.igamma(x.abs() + 1, y.abs() + 1).sum(-1) * 2 + x.shape[0]

    def g(x, samples):
        out, idx = torch.ops.aten.fractional_max_pool2d(x * 2, [2, 2], [3, 3], samples)
        return out + 1, idx

    cf, cg = torch.compile(f, backend="hpu_backend", dynamic=True), compiled(g)
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for n in (4, 5, 6, 5):
            x, y = torch.randn(n, 3, generator=gen), torch.randn(n, 3, generator=gen)
            torch.testing.assert_close(cf(x.to("hpu"), y.to("hpu")).cpu(), f(x, y), **TOL)
        x, s = torch.randn(1, 2, 8, 8, generator=gen), torch.rand(1, 2, 2, generator=gen)
        for _ in range(3):
            (out, idx), n = counts_after(lambda: cg(x.to("hpu"), s.to("hpu")))
            want, want_idx = g(x, s)
            torch.testing.assert_close(out.cpu(), want, **TOL)
            assert torch.equal(idx.cpu(), want_idx)
        assert n["replays"] >= 1 and n["demoted"] == 0


def test_training_graphs_with_cpu_fallbacks_are_split_and_match_the_cpu():
    """cdist's forward and backward fall back: both training graphs are
    split, and three steps give the CPU's loss and gradients."""
    torch.manual_seed(0)
    cpu = torch.nn.Linear(6, 5)
    dev = copy.deepcopy(cpu).to("hpu")

    def loss_fn(m, x, y):
        h = m(x).tanh()
        return torch.cdist(h, y).pow(2).mean() + h.sum() * 0.1

    f = compiled(lambda x, y: loss_fn(dev, x, y))
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(7, 6, generator=g), torch.randn(4, 5, generator=g)
    for step in range(3):
        cpu.zero_grad()
        dev.zero_grad()
        want = loss_fn(cpu, x, y)
        want.backward()

        def step_on_hpu():
            loss = f(x.to("hpu"), y.to("hpu"))
            loss.backward()
            return loss

        got, n = counts_after(step_on_hpu)
        torch.testing.assert_close(got.detach().cpu(), want.detach(), **TOL)
        for p, q in zip(dev.parameters(), cpu.parameters()):
            torch.testing.assert_close(p.grad.cpu(), q.grad, **TOL)
        if step == 0:
            assert n["partitioned"] == 2 and n["demoted"] == 2  # forward and backward
        if step == 2:
            assert n["replays"] >= 4 and n["captures"] == 0 and n["demoted"] == 0


def test_a_split_graph_updates_an_input_in_place():
    """An inference graph adding a fallback op's result into a buffer (as a
    cache update would): the buffer holds the CPU's value after each call."""
    def upd(buf, a, b):
        buf.add_(torch.igamma(a.abs() + 1, b.abs() + 1))
        return buf * 2

    f = compiled(upd)
    buf_c = torch.zeros(8)
    buf_h = buf_c.to("hpu")
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for _ in range(3):
            a, b = torch.randn(8, generator=g), torch.randn(8, generator=g)
            want = upd(buf_c, a, b)
            got, n = counts_after(lambda: f(buf_h, a.to("hpu"), b.to("hpu")))
            torch.testing.assert_close(got.cpu(), want, **TOL)
            torch.testing.assert_close(buf_h.cpu(), buf_c, **TOL)
    assert habana_torch.dynamo.replay_counts()["partitioned"] >= 1


def test_training_graphs_are_captured_once_then_replayed():
    """Forward and backward are captured at the first step and replayed at
    the next ones. Two forwards run before their backwards: each keeps its
    own saved activations (a replay writes fresh outputs, never the last
    call's)."""
    cpu = mlp().train()
    hpu = copy.deepcopy(cpu).to("hpu")
    loss_fn = torch.nn.functional.cross_entropy
    f = compiled(hpu)
    for step in range(3):
        g = torch.Generator().manual_seed(step)
        xs = [torch.randn(4, 12, generator=g) for _ in range(2)]
        ys = [torch.randint(0, 5, (4,), generator=g) for _ in range(2)]
        for m in (cpu, hpu):
            m.zero_grad()

        def hpu_step():
            losses = [loss_fn(f(x.to("hpu")), y.to("hpu")) for x, y in zip(xs, ys)]
            for loss in reversed(losses):
                loss.backward()
            return losses

        losses, n = counts_after(hpu_step)
        for x, y, loss in zip(xs, ys, losses):
            want = loss_fn(cpu(x), y)
            want.backward()
            torch.testing.assert_close(loss.detach().cpu(), want.detach(), **TOL)
        assert n == ({"captures": 2, "replays": 2, "demoted": 0, "partitioned": 0} if step == 0 else
                     {"captures": 0, "replays": 4, "demoted": 0, "partitioned": 0})
        for p_h, p_c in zip(hpu.parameters(), cpu.parameters()):
            torch.testing.assert_close(p_h.grad.cpu(), p_c.grad, rtol=1e-4, atol=5e-5)


def test_outputs_that_view_an_input_or_share_a_storage():
    def fn(x):
        y = torch.tanh(x) * 2
        return y[:2], y[2:].t(), x[1:], y.sum()

    f = compiled(fn)
    with torch.no_grad():
        outs = []
        for s in range(3):
            x = torch.randn(5, 3, generator=torch.Generator().manual_seed(s))
            xh = x.to("hpu")
            outs.append((x, xh, f(xh)))
        for x, xh, got in outs:  # every call's outputs are still its own
            for g, w in zip(got, fn(x)):
                torch.testing.assert_close(g.cpu(), w, **TOL)
            assert got[2].untyped_storage().data_ptr() == xh.untyped_storage().data_ptr()
    assert habana_torch.dynamo.replay_counts()["replays"] >= 2


def test_a_new_storage_offset_is_a_new_signature():
    def fn(x):
        return x * 3 + 1

    f = compiled(fn)
    big = torch.arange(40.0).view(10, 4)
    big_h = big.to("hpu")
    with torch.no_grad():
        for start in (1, 1, 2, 1):
            got, n = counts_after(lambda: f(big_h[start:start + 5]))
            torch.testing.assert_close(got.cpu(), fn(big[start:start + 5]))
    assert any("storage offset changed from 4 to 8" in r for r in habana_torch.metrics.recompile_reasons())


def test_the_first_calls_outputs_go_back_to_the_pool():
    """The capture's output blocks are ordinary memory once the call
    returns (replays write elsewhere): freeing the first result frees its
    bytes, and further calls do not grow what the card holds."""
    def fn(x):
        return torch.relu(x) + 1

    f = compiled(fn)
    x = torch.randn(1 << 20).to("hpu")
    with torch.no_grad():
        out = f(x)
        torch.hpu.synchronize()
        held = torch.hpu.memory_allocated()
        del out
        assert held - torch.hpu.memory_allocated() >= 4 << 20
        for _ in range(3):
            f(x)
        torch.hpu.synchronize()
        assert torch.hpu.memory_allocated() <= held - (4 << 20)


def test_inside_a_users_capture_the_ops_join_it():
    cpu = mlp()
    model = compiled(copy.deepcopy(cpu).to("hpu"))
    static_x = torch.randn(4, 12).to("hpu")
    with torch.no_grad():
        model(static_x)
        htcore.mark_step()
        g = torch.hpu.HPUGraph()
        with torch.hpu.graph(g):
            static_out = model(static_x)
        x = torch.randn(4, 12)
        static_x.copy_(x.to("hpu"))
        g.replay()
        torch.testing.assert_close(static_out.cpu(), cpu(x), **TOL)


transformers = pytest.importorskip("transformers")
_path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "text_generation.py"
_spec = importlib.util.spec_from_file_location("text_generation", _path)
tg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tg)


@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_gpt2_decoding_with_a_static_kv_cache_matches_the_cpu(mode, monkeypatch):
    """The decode step updates the KV cache buffers in place: compiled, the
    update is an in-place index_copy_ again (inplace.py), which a replay
    writes into the buffers directly (they are static inputs); 24 greedy
    tokens are the CPU's in both modes."""
    from habana_torch.dynamo import backend, inplace

    rewrites = []
    monkeypatch.setattr(backend, "update_inputs_in_place",
                        lambda gm: rewrites.append(inplace.update_inputs_in_place(gm)))
    hf = tg.small_gpt2(n_positions=64)
    prompt = torch.randint(1, hf.config.vocab_size, (2, 8), generator=torch.Generator().manual_seed(1))
    want = tg.generate(tg.StaticGPT2(hf, 2, 32), prompt, 24, lambda: None)[0]
    model = tg.StaticGPT2(hf, 2, 32).to("hpu")
    model.forward = torch.compile(model.forward, backend="hpu_backend", mode=mode)
    (got, n) = counts_after(lambda: tg.generate(model, prompt.to("hpu"), 24, torch.hpu.synchronize)[0])
    assert torch.equal(got, want)
    assert rewrites == [2 * hf.config.n_layer]  # every layer's key and value cache
    assert n["captures"] == 1 and n["replays"] == 22
    assert habana_torch.metrics.cpu_fallback_counts() == {}


def test_while_another_thread_captures_a_call_runs_as_ordinary_work():
    """One capture at a time per card: a compiled graph met while another
    thread holds the card's capture (its own compiled graph, say) runs its
    ops as usual, outside that capture, and is captured at a later call."""
    import threading

    from habana_torch import _C

    def fn(x):
        return torch.sin(x) * 2 + x

    f = compiled(fn)
    x = torch.randn(8, 5)
    capturing, done = threading.Event(), threading.Event()

    def hold_a_capture():
        _C._capture_begin(torch.hpu.current_device(), True)
        capturing.set()
        done.wait(60)
        _C._capture_abort(torch.hpu.current_device())

    t = threading.Thread(target=hold_a_capture)
    t.start()
    try:
        assert capturing.wait(60)
        with torch.no_grad():
            got, n = counts_after(lambda: f(x.to("hpu")))
            torch.testing.assert_close(got.cpu(), fn(x), **TOL)
        assert n == {"captures": 0, "replays": 0, "demoted": 0, "partitioned": 0}
    finally:
        done.set()
        t.join()
    with torch.no_grad():
        got, n = counts_after(lambda: f(x.to("hpu")))
    torch.testing.assert_close(got.cpu(), fn(x), **TOL)
    assert n["captures"] == 1
