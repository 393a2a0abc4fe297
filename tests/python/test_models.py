"""Transformers models on hpu: training steps and greedy generation give the
same results as the same model on the CPU, with no op falling back to the CPU.

Small configs built locally (never downloaded): BertForSequenceClassification,
GPT2LMHeadModel, BloomForCausalLM with hidden 64, 2 layers, 4 heads, vocab
100. Every test runs in eager and in lazy mode (PT_HPU_LAZY_MODE=1 style:
ops recorded and flushed at mark_step / host reads).

Tolerances: both devices run the same float32 math; differences come only
from summation order (BLAS blocking, reduction blocks) and grow over steps.
Adam divides by sqrt(v) + eps, which amplifies differences in tiny
gradients, so parameters get a looser bound than losses.
"""
import copy

import pytest
import torch

import habana_torch
import habana_torch.core as htcore

transformers = pytest.importorskip("transformers")
transformers.utils.logging.set_verbosity_error()

VOCAB, BATCH, SEQ, STEPS = 100, 4, 16, 3
# Measured on this CPU: losses differ by <= 5e-7, parameters by <= 5e-6
# (float32), bfloat16 losses by <= 3e-4 and parameters by <= 5e-3 (one bf16
# ulp near 1 is 7.8e-3); the bounds leave about 10x room.
LOSS_TOL = dict(rtol=1e-5, atol=1e-5)
PARAM_TOL = dict(rtol=1e-4, atol=5e-5)
BF16_LOSS_TOL = dict(rtol=5e-3, atol=5e-3)
BF16_PARAM_TOL = dict(rtol=2e-2, atol=2e-2)


def make_model(name, dropout, init_range=0.02):
    """init_range: the weights' std; larger than the default (0.02) makes
    greedy generation from random weights pick varied tokens with clear
    margins instead of repeating one token."""
    torch.manual_seed(0)
    if name == "bert":
        cfg = transformers.BertConfig(
            vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=128, max_position_embeddings=64, num_labels=3, initializer_range=init_range,
            hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
        return transformers.BertForSequenceClassification(cfg)
    if name == "gpt2":
        cfg = transformers.GPT2Config(
            vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=64,
            resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout, initializer_range=init_range,
            bos_token_id=1, eos_token_id=2)
        return transformers.GPT2LMHeadModel(cfg)
    cfg = transformers.BloomConfig(
        vocab_size=VOCAB, hidden_size=64, n_layer=2, n_head=4,
        hidden_dropout=dropout, attention_dropout=dropout, initializer_range=init_range, bos_token_id=1, eos_token_id=2)
    return transformers.BloomForCausalLM(cfg)


def make_batches(name, steps=STEPS):
    """Token ids with some padding (ignored positions in the loss)."""
    g = torch.Generator().manual_seed(1)
    batches = []
    for _ in range(steps):
        ids = torch.randint(3, VOCAB, (BATCH, SEQ), generator=g)
        mask = torch.ones_like(ids)
        mask[1, SEQ - 5:] = 0  # right padding
        mask[3, SEQ - 2:] = 0
        if name == "bert":
            labels = torch.randint(0, 3, (BATCH,), generator=g)
        else:
            labels = ids.masked_fill(mask == 0, -100)
        batches.append((ids, mask, labels))
    return batches


def graph_launches():
    return dict(habana_torch.metrics.metric_global("graph_launch").stats())["TotalNumber"]


@pytest.fixture(params=["eager", "lazy"])
def mode(request):
    was = htcore.is_lazy()
    htcore._set_lazy_mode(request.param == "lazy")
    habana_torch.metrics.metric_global("cpu_fallback").reset()
    launches = graph_launches()
    yield request.param
    htcore.mark_step()
    if request.param == "lazy":
        assert graph_launches() > launches  # the hpu work really went through lazy graphs
    htcore._set_lazy_mode(was)


def assert_no_fallback():
    assert habana_torch.metrics.cpu_fallback_counts() == {}


def train(model, device, batches, opt_name, dtype=torch.float32):
    model = copy.deepcopy(model).to(device=device, dtype=dtype)
    model.train()
    params = list(model.parameters())
    if opt_name == "sgd":
        opt = torch.optim.SGD(params, lr=0.05, momentum=0.9)
    else:
        kw = {"adamw": dict(foreach=False), "adamw_foreach": dict(foreach=True),
              "adamw_fused": dict(fused=True)}[opt_name]
        opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, **kw)
    losses = []
    for ids, mask, labels in batches:
        out = model(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device))
        opt.zero_grad()
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(params, max_norm=1.0)
        htcore.mark_step()
        opt.step()
        htcore.mark_step()
        losses.append(out.loss.detach())
    return torch.stack(losses).float().cpu(), model


def assert_params_close(model_h, model_c, **tol):
    for (name, p_h), (_, p_c) in zip(model_h.named_parameters(), model_c.named_parameters()):
        assert p_h.device.type == "hpu", name
        torch.testing.assert_close(p_h.detach().cpu(), p_c.detach(), msg=name, **tol)


@pytest.mark.parametrize("opt_name", ["adamw", "adamw_foreach", "adamw_fused", "sgd"])
@pytest.mark.parametrize("name", ["bert", "gpt2", "bloom"])
def test_training_matches_cpu(name, opt_name, mode):
    """No dropout (masks would differ between devices): losses and the final
    parameters match the CPU run from the same initial weights."""
    model = make_model(name, dropout=0.0)
    batches = make_batches(name)
    losses_h, model_h = train(model, "hpu", batches, opt_name)
    assert_no_fallback()
    losses_c, model_c = train(model, "cpu", batches, opt_name)
    torch.testing.assert_close(losses_h, losses_c, **LOSS_TOL)
    assert_params_close(model_h, model_c, **PARAM_TOL)


@pytest.mark.parametrize("name", ["bert", "gpt2", "bloom"])
def test_training_with_dropout(name, mode):
    """Dropout on (hpu masks are not the CPU's): no fallback, finite losses,
    and the loss on a repeated batch goes down."""
    model = make_model(name, dropout=0.1)
    batch = make_batches(name, steps=1) * 6
    losses, model_h = train(model, "hpu", batch, "adamw_fused")
    assert_no_fallback()
    assert torch.isfinite(losses).all(), losses
    assert losses[-1] < losses[0], losses
    assert all(torch.isfinite(p.detach().cpu()).all() for p in model_h.parameters())


def test_training_bfloat16_matches_cpu(mode):
    """GPT2 in bfloat16 (model.to(torch.bfloat16)) against the same on the CPU."""
    model = make_model("gpt2", dropout=0.0)
    batches = make_batches("gpt2")
    losses_h, model_h = train(model, "hpu", batches, "adamw", dtype=torch.bfloat16)
    assert_no_fallback()
    losses_c, model_c = train(model, "cpu", batches, "adamw", dtype=torch.bfloat16)
    assert model_h.lm_head.weight.dtype == torch.bfloat16
    torch.testing.assert_close(losses_h, losses_c, **BF16_LOSS_TOL)
    assert_params_close(model_h, model_c, **BF16_PARAM_TOL)


@pytest.mark.parametrize("name", ["gpt2", "bloom"])
def test_greedy_generation_matches_cpu(name, mode):
    """model.generate(do_sample=False, use_cache=True) with left padding: the
    same tokens as on the CPU."""
    model = make_model(name, dropout=0.0, init_range=1.0).eval()
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(3, VOCAB, (BATCH, 10), generator=g)
    mask = torch.ones_like(ids)
    mask[0, :3] = 0  # left padding
    mask[2, :1] = 0
    ids = ids.masked_fill(mask == 0, 0)
    kw = dict(do_sample=False, use_cache=True, max_new_tokens=12, pad_token_id=0)
    model_h = copy.deepcopy(model).to("hpu")
    with torch.no_grad():
        out_h = model_h.generate(input_ids=ids.to("hpu"), attention_mask=mask.to("hpu"), **kw)
        assert out_h.device.type == "hpu"
        out_h = out_h.cpu()
        assert_no_fallback()
        out_c = model.generate(input_ids=ids, attention_mask=mask, **kw)
    assert out_c.shape[1] > ids.shape[1]
    assert all(len(set(row[ids.shape[1]:].tolist())) > 1 for row in out_c)  # not one repeated token
    assert torch.equal(out_h, out_c), (out_h, out_c)
