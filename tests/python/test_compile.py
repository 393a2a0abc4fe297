"""torch.compile(backend="hpu_backend"): the name is known, and compiled
models give the results of eager hpu and of the CPU, gradients included.

Every test runs in the suite's mode (scripts/test.sh: PT_HPU_LAZY_MODE=1,
then 0). In eager mode a compiled graph must run as one recorded graph of
the graph engine (graph_launch and fusion counters move), not op by op.
Models are built from small configs; nothing is downloaded.

Tolerances: the same float32 math on both devices, differing only in
summation order (see test_models.py).
"""
import copy
import json
import os

import pytest
import torch

import habana_torch
import habana_torch.core as htcore
from conftest import run_python

TOL = dict(rtol=1e-5, atol=1e-5)
GRAD_TOL = dict(rtol=1e-4, atol=5e-5)
HERE = os.path.dirname(os.path.abspath(__file__))


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # conftest.py


def stat(name, key):
    return dict(habana_torch.metrics.metric_global(name).stats()).get(key, 0)


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                               torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 5))


def step(model, x, y):
    """Forward, cross-entropy loss and backward; the loss and the gradients."""
    model.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    htcore.mark_step()
    return loss.detach().cpu(), [p.grad.cpu() for p in model.parameters()]


def assert_grads_close(got, want, **tol):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        torch.testing.assert_close(g, w, msg=f"gradient {i}", **tol)


def test_hpu_backend_is_listed():
    assert "hpu_backend" in torch._dynamo.list_backends()


def test_import_torch_registers_it_without_loading_dynamo():
    """The autoload imports habana_torch with `import torch`; that makes the
    name known, and dynamo (seconds to import) is loaded only when used."""
    r = run_python("""
        import sys, torch
        print('torch._dynamo' in sys.modules)
        print('hpu_backend' in torch._dynamo.list_backends())
        print(torch.compile(lambda x: x * 2 + 1, backend="hpu_backend")(torch.ones(3, device="hpu")).cpu().tolist())
    """)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split("\n")[:3] == ["False", "True", "[3.0, 3.0, 3.0]"]


def test_mlp_forward_backward_matches_eager_and_cpu():
    model = mlp()
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(16, 12, generator=g), torch.randint(0, 5, (16,), generator=g)
    loss_c, grads_c = step(model, x, y)
    eager = copy.deepcopy(model).to("hpu")
    loss_e, grads_e = step(eager, x.to("hpu"), y.to("hpu"))
    compiled_model = copy.deepcopy(model).to("hpu")
    compiled = torch.compile(compiled_model, backend="hpu_backend")
    before = habana_torch.dynamo.compile_counts()
    for _ in range(2):  # the second call reuses the compiled graphs and the recipes
        loss_h, grads_h = step(compiled, x.to("hpu"), y.to("hpu"))
        torch.testing.assert_close(loss_h, loss_c, **TOL)
        torch.testing.assert_close(loss_h, loss_e, **TOL)
        assert_grads_close(grads_h, grads_c, **GRAD_TOL)
        assert_grads_close(grads_h, grads_e, **GRAD_TOL)
    after = habana_torch.dynamo.compile_counts()
    assert after["forward"] - before["forward"] == 1
    assert after["backward"] - before["backward"] == 1
    assert habana_torch.metrics.cpu_fallback_counts() == {}


def test_compiled_graph_runs_as_one_engine_graph():
    """In either mode the forward's ~10 ops reach the card as one graph,
    captured at the first call and replayed at every later one (one launch,
    no op through the dispatcher), with its pointwise ops fused."""
    model = copy.deepcopy(mlp()).to("hpu")
    compiled = torch.compile(model, backend="hpu_backend")
    x = torch.randn(16, 12).to("hpu")
    with torch.no_grad():
        compiled(x)
        htcore.mark_step()
        torch.hpu.synchronize()
        launches, fused = stat("graph_launch", "TotalNumber"), stat("fusion", "FusedNodes")
        replays = habana_torch.dynamo.replay_counts()["replays"]
        out = compiled(x)
        htcore.mark_step()
        torch.hpu.synchronize()
        assert habana_torch.dynamo.replay_counts()["replays"] - replays == 1
        assert stat("graph_launch", "TotalNumber") - launches == 0  # no lazy graph besides it
        assert stat("fusion", "FusedNodes") > fused
        torch.testing.assert_close(out.cpu(), model(x).cpu(), **TOL)


def make_bert():
    transformers = pytest.importorskip("transformers")
    transformers.utils.logging.set_verbosity_error()
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=100, hidden_size=64, num_hidden_layers=1, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=64, num_labels=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        problem_type="single_label_classification")  # set up front: BERT sets it at its first call, a recompile
    return transformers.BertForSequenceClassification(cfg)


def bert_batches(steps, batch=4, seq=16):
    g = torch.Generator().manual_seed(1)
    out = []
    for _ in range(steps):
        ids = torch.randint(3, 100, (batch, seq), generator=g)
        mask = torch.ones_like(ids)
        mask[1, seq - 5:] = 0
        out.append((ids, mask, torch.randint(0, 3, (batch,), generator=g)))
    return out


def train_bert(model, device, batches, compile_it):
    model = copy.deepcopy(model).to(device)
    run = torch.compile(model, backend="hpu_backend") if compile_it else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, foreach=False)
    losses = []
    for ids, mask, labels in batches:
        out = run(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device))
        opt.zero_grad()
        out.loss.backward()
        htcore.mark_step()
        opt.step()
        htcore.mark_step()
        losses.append(out.loss.detach().cpu())
    model.eval()
    with torch.no_grad():
        ids, mask, _ = batches[0]
        logits = run(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.cpu()
    return torch.stack(losses), logits, model


def test_bert_training_and_eval_match_eager_and_cpu():
    model, batches = make_bert(), bert_batches(2)
    losses_h, logits_h, model_h = train_bert(model, "hpu", batches, compile_it=True)
    assert habana_torch.metrics.cpu_fallback_counts() == {}
    losses_e, logits_e, model_e = train_bert(model, "hpu", batches, compile_it=False)
    losses_c, logits_c, model_c = train_bert(model, "cpu", batches, compile_it=False)
    counts = habana_torch.dynamo.compile_counts()
    assert counts["backward"] >= 1 and counts["inference"] >= 1
    torch.testing.assert_close(losses_h, losses_c, **TOL)
    torch.testing.assert_close(losses_h, losses_e, **TOL)
    torch.testing.assert_close(logits_h, logits_c, **GRAD_TOL)
    for (name, p_h), (_, p_e), (_, p_c) in zip(model_h.named_parameters(), model_e.named_parameters(),
                                               model_c.named_parameters()):
        torch.testing.assert_close(p_h.detach().cpu(), p_c.detach(), msg=name, **GRAD_TOL)
        torch.testing.assert_close(p_h.detach().cpu(), p_e.detach().cpu(), msg=name, **GRAD_TOL)


@pytest.mark.parametrize("dynamic", [None, True])
def test_changing_batch_size_recompiles_a_bounded_number_of_times(dynamic):
    """Batch sizes 4..9: dynamo compiles the region at most twice (the first
    size, then one symbolic graph); the engine makes a recipe per size."""
    model = mlp()
    compiled_model = copy.deepcopy(model).to("hpu")
    compiled = torch.compile(compiled_model, backend="hpu_backend", dynamic=dynamic)
    before = habana_torch.dynamo.compile_counts()
    g = torch.Generator().manual_seed(3)
    for batch in range(4, 10):
        x, y = torch.randn(batch, 12, generator=g), torch.randint(0, 5, (batch,), generator=g)
        loss_h, grads_h = step(compiled, x.to("hpu"), y.to("hpu"))
        loss_c, grads_c = step(model, x, y)
        torch.testing.assert_close(loss_h, loss_c, **TOL)
        assert_grads_close(grads_h, grads_c, **GRAD_TOL)
    after = habana_torch.dynamo.compile_counts()
    forwards = after["forward"] - before["forward"]
    assert 1 <= forwards <= (1 if dynamic else 2)
    assert after["backward"] - before["backward"] == forwards
    # a captured graph per size, and why: the recompile reason names the
    # shape, or the symbolic size that carries it
    # (dynamo makes the batch symbolic at its second size, also by default)
    changed = ("symbolic) changed from 8 to 9", "shape changed from [8, 12] to [9, 12]")
    assert any("compiled graph forward" in r and any(c in r for c in changed)
               for r in habana_torch.metrics.recompile_reasons())


def test_fullgraph():
    model = copy.deepcopy(mlp()).to("hpu")
    x = torch.randn(3, 12).to("hpu")
    out = torch.compile(model, backend="hpu_backend", fullgraph=True)(x)
    torch.testing.assert_close(out.cpu(), model(x).cpu(), **TOL)

    def breaks(t):
        print("", end="")  # a graph break
        return t + 1

    with pytest.raises(torch._dynamo.exc.Unsupported):
        torch.compile(breaks, backend="hpu_backend", fullgraph=True)(x)


@pytest.mark.parametrize("mode", ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"])
def test_modes_are_accepted(mode):
    model = copy.deepcopy(mlp()).to("hpu")
    x = torch.randn(3, 12).to("hpu")
    out = torch.compile(model, backend="hpu_backend", mode=mode)(x)
    torch.testing.assert_close(out.cpu(), model(x).cpu(), **TOL)


def test_unknown_mode_and_options_are_named():
    x = torch.randn(3).to("hpu")
    with pytest.raises(Exception, match="unknown mode 'fastest'"):
        torch.compile(lambda t: t + 1, backend="hpu_backend", mode="fastest")(x)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="takes no options"):
        torch.compile(lambda t: t + 1, backend="hpu_backend", options={"x": 1})(x)


def test_autocast_inside_the_compiled_region():
    """autocast("hpu") entered inside the compiled function: linear runs in
    bfloat16 as in eager hpu autocast; the result is the CPU's within
    bfloat16 precision."""
    model = mlp()
    model_h = copy.deepcopy(model).to("hpu")

    def fn(m, x):
        with torch.autocast("hpu", dtype=torch.bfloat16):
            return m(x)

    x = torch.randn(8, 12)
    out_h = torch.compile(fn, backend="hpu_backend")(model_h, x.to("hpu"))
    out_e = fn(model_h, x.to("hpu"))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out_c = model(x)
    assert out_h.dtype == out_e.dtype == torch.bfloat16
    torch.testing.assert_close(out_h.cpu(), out_e.cpu(), rtol=0, atol=0)
    torch.testing.assert_close(out_h.float().cpu(), out_c.float(), rtol=0, atol=3e-2)


def trainer_worker(out_dir):
    """Runs in a fresh interpreter: transformers patches torch.compile for
    the whole process once it sees an hpu."""
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=32, num_labels=2,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                     problem_type="single_label_classification")

    class Data(torch.utils.data.Dataset):
        def __init__(self):
            g = torch.Generator().manual_seed(1)
            self.ids = torch.randint(5, 100, (16, 16), generator=g)

        def __len__(self):
            return 16

        def __getitem__(self, i):
            return {"input_ids": self.ids[i], "attention_mask": torch.ones(16, dtype=torch.long),
                    "labels": self.ids[i, 1] % 2}

    runs = {}
    for name, use_cpu, compile_it in (("compiled", False, True), ("cpu", True, False)):
        torch.manual_seed(0)
        args = TrainingArguments(output_dir=os.path.join(out_dir, name), per_device_train_batch_size=8,
                                 max_steps=2, learning_rate=2e-3, logging_steps=1, report_to=[],
                                 save_strategy="no", seed=0, use_cpu=use_cpu, torch_compile=compile_it,
                                 disable_tqdm=True, dataloader_num_workers=0)
        trainer = Trainer(model=BertForSequenceClassification(cfg), args=args, train_dataset=Data())
        trainer.train()
        runs[name] = {"backend": args.torch_compile_backend, "device": str(args.device),
                      "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h]}
    runs["counts"] = habana_torch.dynamo.compile_counts()
    runs["fallbacks"] = habana_torch.metrics.cpu_fallback_counts()
    print("RESULT " + json.dumps(runs))


def test_trainer_torch_compile_picks_hpu_backend(tmp_path):
    r = run_python(f"import sys; sys.path.insert(0, {HERE!r}); import test_compile as t; "
                   f"t.trainer_worker({str(tmp_path)!r})", timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, r.stdout[-2000:]
    runs = json.loads(lines[0][len("RESULT "):])
    assert runs["compiled"]["backend"] == "hpu_backend" and runs["compiled"]["device"] == "hpu:0"
    assert runs["counts"]["forward"] >= 1 and runs["counts"]["backward"] >= 1
    assert runs["fallbacks"] == {}
    assert len(runs["compiled"]["losses"]) == 2
    torch.testing.assert_close(runs["compiled"]["losses"], runs["cpu"]["losses"], rtol=1e-4, atol=1e-5)


def test_compile_then_capture_in_an_hpu_graph():
    """A compiled module (already compiled: dynamo cannot trace while a card
    captures) captured in an HPU graph: each replay reads the new input."""
    cpu_model = mlp().eval()
    compiled = torch.compile(copy.deepcopy(cpu_model).to("hpu"), backend="hpu_backend")
    static_x = torch.randn(4, 12).to("hpu")
    with torch.no_grad():
        compiled(static_x)  # compiles
        htcore.mark_step()
        g = torch.hpu.HPUGraph()
        with torch.hpu.graph(g):
            static_out = compiled(static_x)
        assert g.num_nodes >= 6
        for seed in (5, 6):
            x = torch.randn(4, 12, generator=torch.Generator().manual_seed(seed))
            static_x.copy_(x.to("hpu"))
            g.replay()
            torch.testing.assert_close(static_out.cpu(), cpu_model(x), **TOL)


def test_an_op_without_kernel_falls_back_and_is_counted():
    """igamma has no hpu kernel and no decomposition: inside a compiled graph
    it runs through the CPU fallback, counted, between recorded parts."""
    def fn(x):
        return torch.igamma(x * x + 1, x.abs() + 0.5).relu() - 1

    x = torch.randn(6, 9)
    out = torch.compile(fn, backend="hpu_backend")(x.to("hpu"))
    torch.testing.assert_close(out.cpu(), fn(x), **TOL)
    assert any(op.startswith("aten::igamma") for op in habana_torch.metrics.cpu_fallback_counts())


def test_dropout_is_decomposed_not_a_fallback():
    """Training-mode dropout has no hpu kernel of its own (native_dropout):
    it is traced into the graph as eager mode runs it (a Bernoulli draw,
    scaled), so it stays in the recorded graph. Each output is 0 or the
    input / (1 - p), and the gradient uses the same mask."""
    drop = torch.nn.Dropout(0.25).train()
    x = (torch.rand(64, 32) + 0.5).to("hpu").requires_grad_()
    out = torch.compile(drop, backend="hpu_backend")(x)
    out.sum().backward()
    assert habana_torch.metrics.cpu_fallback_counts() == {}
    o, xi, grad = out.detach().cpu(), x.detach().cpu(), x.grad.cpu()
    kept = o != 0
    assert 0.6 < kept.float().mean().item() < 0.9
    torch.testing.assert_close(o[kept], xi[kept] / 0.75)
    torch.testing.assert_close(grad, kept.float() / 0.75)


def test_compiled_dropout_draws_what_eager_draws():
    """With the same seed, a compiled dropout (F.dropout, the one inside
    SDPA's math path, and a direct native_dropout) draws the very mask eager
    hpu draws, and output and gradient are bit for bit eager's."""
    drop = torch.nn.Dropout(0.25).train()
    x = (torch.rand(64, 32) + 0.5).to("hpu").requires_grad_()
    fn = torch.compile(lambda t: drop(t) * 2, backend="hpu_backend")
    native = torch.compile(lambda t: torch.ops.aten.native_dropout(t, 0.25, True), backend="hpu_backend")
    fn(x), native(x)  # compiled here: tracing draws nothing, but keep the draws below in step

    def run(f):
        torch.manual_seed(3)
        out = f(x)
        out = out[0] * 2 if isinstance(out, tuple) else out
        out.sum().backward()
        grad, x.grad = x.grad.cpu(), None
        return out.detach().cpu(), grad

    want, want_grad = run(lambda t: drop(t) * 2)
    assert 0.6 < (want != 0).float().mean().item() < 0.9
    for f in (fn, native):
        got, got_grad = run(f)
        assert torch.equal(got, want)
        assert torch.equal(got_grad, want_grad)
    torch.manual_seed(3)
    _, mask = native(x)
    assert mask.dtype == torch.bool and torch.equal(mask.cpu(), want != 0)

    q, k, v = (torch.randn(2, 3, 16, 8, generator=torch.Generator().manual_seed(s)).to("hpu").requires_grad_()
               for s in range(3))

    def attention(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=0.3)

    def attention_run(f):
        torch.manual_seed(5)
        out = f(q, k, v)
        out.sum().backward()
        grads = [t.grad.cpu() for t in (q, k, v)]
        for t in (q, k, v):
            t.grad = None
        return out.detach().cpu(), grads

    compiled_attention = torch.compile(attention, backend="hpu_backend")
    compiled_attention(q, k, v)
    want, want_grads = attention_run(attention)
    got, got_grads = attention_run(compiled_attention)
    assert torch.equal(got, want)
    assert all(torch.equal(g, w) for g, w in zip(got_grads, want_grads))


def test_card_rng_calls_inside_a_compiled_function_run_as_written():
    # torch.hpu's RNG functions are not aten ops: dynamo must leave them out
    # of the graph (a graph break), as it does torch.cuda's. Traced, the
    # restore in PyTorch's own freeze_rng_state (which OpInfo's samples use)
    # failed under its no_dispatch().
    from torch.testing._utils import freeze_rng_state

    def seeded_softmax(x):
        with freeze_rng_state():
            torch.manual_seed(42)
            return torch.softmax(x, 0)

    torch._dynamo.reset()
    x = torch.randn(64)
    before = torch.hpu.get_rng_state()
    got = torch.compile(seeded_softmax, backend="hpu_backend")(x.to("hpu"))
    assert torch.equal(torch.hpu.get_rng_state(), before)
    torch.testing.assert_close(got.cpu(), torch.softmax(x, 0))


def test_a_captured_graph_is_dumped_and_logged(tmp_path):
    """PT_HPU_GRAPH_DUMP_DIR writes the engine graph each capture makes,
    fused groups included, and PT_HPU_LOG_GRAPH_COMPILE=1 says why a
    compiled graph was captured again."""
    r = run_python("""
        import torch, habana_torch
        f = torch.compile(lambda x: ((x * 2 + 1).relu() - x) / 4, backend="hpu_backend", dynamic=True)
        with torch.no_grad():
            for n in (1000, 1000, 1200):
                f(torch.randn(n, device="hpu"))
        torch.hpu.synchronize()
        print(habana_torch.dynamo.replay_counts())
    """, env={"PT_HPU_GRAPH_DUMP_DIR": str(tmp_path), "PT_HPU_LOG_GRAPH_COMPILE": "1"})
    assert r.returncode == 0, r.stderr
    assert "'captures': 2, 'replays': 1" in r.stdout
    text = "\n".join(t.read_text() for t in sorted(tmp_path.glob("hpu0_graph*.txt")))
    assert "fusion groups" in text and "relu" in text
    assert "compiled graph inference: input 0 (a size dynamo keeps symbolic) changed from 1000 to 1200" in r.stderr
