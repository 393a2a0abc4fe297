"""Fused attention (csrc/kernels/attention.c): F.scaled_dot_product_attention
on hpu and hpex.kernels.FusedSDPA against the CPU's
scaled_dot_product_attention, forward and backward; the rotary helpers and
FusedRMSNorm against the formulas transformers runs on the CPU."""
import warnings

import pytest
import torch
import torch.nn.functional as F

import habana_torch
from habana_torch.hpex.kernels import (FusedSDPA, RotaryPosEmbeddingHelperV1, RotaryPosEmbeddingHelperV2,
                                       RotaryPosEmbeddingMode, apply_rotary_pos_emb)
from habana_torch.hpex.normalization import FusedRMSNorm

FUSED = "ScaledDotProductFusedAttentionOverrideableBackward"


def _is_fused(out):  # the kernel's autograd node: torch's for F.sdpa, FusedSDPA's own
    return type(out.grad_fn).__name__ in (FUSED + "0", "FusedSDPABackward")
# NUMERICS.md: float32 (1e-4, 1e-5), bf16 (2e-2, 2e-2) forward; gradients
# float32 (1e-3, 1e-4), bf16 (3e-2, 3e-2)
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}
GRAD_TOL = {torch.float32: dict(rtol=1e-3, atol=1e-4), torch.bfloat16: dict(rtol=3e-2, atol=3e-2)}


def _inputs(B, H, L, S, D, dtype, mask, Dv=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, L, D, generator=g).to(dtype)
    k = torch.randn(B, H, S, D, generator=g).to(dtype)
    v = torch.randn(B, H, S, Dv or D, generator=g).to(dtype)
    m = None
    if mask == "bool":  # broadcast over heads; every row keeps its first key
        m = torch.rand(B, 1, L, S, generator=g) > 0.4
        m[..., 0] = True
    elif mask == "float":  # broadcast over the batch
        m = torch.randn(1, H, L, S, generator=g).to(dtype)
    elif mask == "keys":  # [B, 1, 1, S] padding mask, as BERT's
        m = torch.ones(B, 1, 1, S, dtype=torch.bool)
        m[0, ..., S // 2:] = False
    return q, k, v, m


def _run(fn, q, k, v, m, device, **kw):
    ts = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
    out = fn(*ts, None if m is None else m.to(device), **kw)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out.dtype)
    out.backward(grad.to(device))
    return out, [t.grad for t in ts]


def _sdpa(q, k, v, m, **kw):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)


def _fused(q, k, v, m, is_causal=False, scale=None):
    return FusedSDPA.apply(q, k, v, m, 0.0, is_causal, scale)


def _compare(B, H, L, S, D, dtype, mask, causal, fn=_sdpa, scale=None, Dv=None):
    q, k, v, m = _inputs(B, H, L, S, D, dtype, mask, Dv)
    ref, ref_grads = _run(_sdpa, q, k, v, m, "cpu", is_causal=causal, scale=scale)
    out, grads = _run(fn, q, k, v, m, "hpu", is_causal=causal, scale=scale)
    assert _is_fused(out)
    torch.testing.assert_close(out.cpu(), ref, **TOL[dtype])
    for name, a, b in zip("qkv", grads, ref_grads):
        assert a.dtype == b.dtype and a.shape == b.shape, name
        torch.testing.assert_close(a.cpu(), b, **GRAD_TOL[dtype], msg=lambda s, n=name: f"d{n}: {s}")


CASES = [  # B, H, L, S, D, mask, causal
    (1, 2, 70, 70, 64, None, False),
    (2, 3, 33, 129, 80, "bool", False),
    (2, 2, 130, 90, 128, "float", True),
    (2, 2, 65, 200, 64, "keys", False),
    (1, 2, 5, 9, 16, None, True),    # L < S, causal: top-left
    (1, 2, 100, 40, 64, "bool", True),  # L > S, causal
    (1, 2, 300, 301, 64, None, True),   # several query and key blocks, the last key block odd
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", CASES)
def test_sdpa_matches_cpu(case, dtype):
    B, H, L, S, D, mask, causal = case
    _compare(B, H, L, S, D, dtype, mask, causal)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_sdpa_matches_cpu(dtype):
    _compare(2, 2, 70, 130, 64, dtype, "bool", False, fn=_fused)
    _compare(1, 2, 129, 129, 80, dtype, None, True, fn=_fused, scale=0.3)


def test_value_head_dim_and_strided_inputs():
    _compare(1, 2, 40, 50, 64, torch.float32, None, False, Dv=32)
    # q, k, v as the [B, L, H, D] projections' transposes (not contiguous)
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 70, 3, 64, generator=g).transpose(1, 2) for _ in range(3))
    out = F.scaled_dot_product_attention(q.to("hpu"), k.to("hpu"), v.to("hpu"), is_causal=True)
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v, is_causal=True), **TOL[torch.float32])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_column_strided_inputs_and_odd_head_dims(dtype):
    # head dims apart by a stride (q read through a copy, not in place), an
    # odd D (the bf16 dot kernel's last pair half empty), odd key counts
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, 3, 17, n, generator=g).to(dtype).transpose(-1, -2) for n in (70, 141, 141))
    assert q.stride(-1) != 1
    for causal in (False, True):
        out = F.scaled_dot_product_attention(q.to("hpu"), k.to("hpu"), v.to("hpu"), is_causal=causal)
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        tol = TOL[torch.bfloat16] if dtype != torch.float32 else TOL[dtype]
        torch.testing.assert_close(out.cpu().float(), ref, **tol)
    # the backward: fp16 takes the float32 tile path on copies, bf16 its own
    go = torch.randn(2, 3, 70, 17, generator=g).to(dtype)
    hs = [t.to("hpu").detach().requires_grad_() for t in (q, k, v)]
    cs = [t.float().detach().requires_grad_() for t in (q, k, v)]
    F.scaled_dot_product_attention(*hs, is_causal=True).backward(go.to("hpu"))
    F.scaled_dot_product_attention(*cs, is_causal=True).backward(go.float())
    gtol = GRAD_TOL[torch.bfloat16] if dtype != torch.float32 else GRAD_TOL[dtype]
    for name, a, b in zip("qkv", hs, cs):
        torch.testing.assert_close(a.grad.cpu().float(), b.grad, **gtol, msg=lambda m, n=name: f"d{n}: {m}")


def test_results_are_laid_out_as_the_fake_tensors_say():
    # compiled graphs view them with the meta registrations' strides:
    # the output and the gradients laid out as q (and k, v)
    q, k, v = (torch.randn(2, 9, 3, 16).transpose(1, 2).to("hpu") for _ in range(3))
    out, lse = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, k, v)[:2]
    assert out.stride() == q.stride() and lse.is_contiguous()
    go = torch.randn(out.shape).to("hpu")
    bias = torch.zeros(2, 3, 9, 9, device="hpu")
    dq, dk, dv, _ = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward(
        go, q, k, v, bias, [True, True, True, False], out, lse, lse, lse, 9, 9, 0.0, False, lse, lse)
    assert (dq.stride(), dk.stride(), dv.stride()) == (q.stride(), k.stride(), v.stride())
    ref = [t.detach().cpu().requires_grad_() for t in (q, k, v)]
    F.scaled_dot_product_attention(*ref).backward(go.cpu())
    for a, b in zip((dq, dk, dv), ref):
        torch.testing.assert_close(a.cpu(), b.grad, **GRAD_TOL[torch.float32])


def test_long_sequence_tiles():
    # 2048 x 2048 scores per head: 32 x 32 tiles, never stored whole
    _compare(1, 2, 2048, 2048, 64, torch.float32, None, True)


def test_fully_masked_rows_are_zero_as_on_the_cpu():
    q, k, v, _ = _inputs(1, 1, 6, 8, 16, torch.float32, None)
    m = torch.ones(1, 1, 6, 8, dtype=torch.bool)
    m[..., 2, :] = False
    ref, ref_grads = _run(_sdpa, q, k, v, m, "cpu")
    out, grads = _run(_sdpa, q, k, v, m, "hpu")
    assert _is_fused(out)
    torch.testing.assert_close(out.cpu(), ref, **TOL[torch.float32])
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a.cpu(), b, **GRAD_TOL[torch.float32])


def test_grouped_query_attention():
    g = torch.Generator().manual_seed(4)
    q, k, v = torch.randn(2, 8, 30, 64, generator=g), torch.randn(2, 2, 30, 64, generator=g), \
        torch.randn(2, 2, 30, 64, generator=g)
    ref, ref_grads = _run(lambda a, b, c, m, **kw: _sdpa(a, b, c, m, enable_gqa=True, **kw), q, k, v, None, "cpu",
                          is_causal=True)
    out, grads = _run(_fused, q, k, v, None, "hpu", is_causal=True)
    torch.testing.assert_close(out.cpu(), ref, **TOL[torch.float32])
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a.cpu(), b, **GRAD_TOL[torch.float32])
    # F.scaled_dot_product_attention keeps the math path for it, and agrees
    out = F.scaled_dot_product_attention(q.to("hpu"), k.to("hpu"), v.to("hpu"), is_causal=True, enable_gqa=True)
    torch.testing.assert_close(out.cpu(), ref, **TOL[torch.float32])


def test_dropout_takes_the_math_path():
    q, k, v, _ = _inputs(1, 2, 16, 16, 32, torch.float32, None)
    qh, kh, vh = (t.to("hpu").requires_grad_() for t in (q, k, v))
    out = FusedSDPA.apply(qh, kh, vh, None, 0.5, False)
    assert not _is_fused(out)
    out.sum().backward()
    assert qh.grad is not None and torch.isfinite(qh.grad.cpu()).all()
    out = F.scaled_dot_product_attention(qh, kh, vh, dropout_p=0.5)
    assert not _is_fused(out)
    # without dropout the kernel runs again and matches the CPU
    with torch.no_grad():
        torch.testing.assert_close(FusedSDPA.apply(qh, kh, vh).cpu(), _sdpa(q, k, v, None), **TOL[torch.float32])


@pytest.mark.parametrize("side", ["left", "right"])
def test_valid_sequence_lengths_hide_the_padding(side):
    # a padded causal prompt, as optimum-habana's LLaMA passes it; the CPU
    # reference attends to the valid keys only, and padding rows are zero
    q, k, v, _ = _inputs(2, 2, 12, 12, 16, torch.float32, None)
    lens = torch.tensor([12, 7])
    pos = torch.arange(12)
    keep = (pos >= 12 - lens.view(-1, 1) if side == "left" else pos < lens.view(-1, 1)).view(2, 1, 1, 12)
    m = keep & torch.ones(12, 12, dtype=torch.bool).tril()
    ref, ref_grads = _run(_sdpa, q, k, v, m, "cpu")
    out, grads = _run(lambda a, b, c, _m: FusedSDPA.apply(a, b, c, None, 0.0, True, None, "None", None,
                                                          lens.to("hpu"), side), q, k, v, None, "hpu")
    assert _is_fused(out)
    torch.testing.assert_close(out.cpu(), ref, **TOL[torch.float32])
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a.cpu(), b, **GRAD_TOL[torch.float32])


def test_options_gaudi_passes_are_accepted():
    q, k, v, m = _inputs(1, 2, 16, 16, 32, torch.float32, "bool")
    ref = _sdpa(q, k, v, m)
    for mode in ("None", "fast"):
        out = FusedSDPA.apply(q.to("hpu"), k.to("hpu"), v.to("hpu"), m.to("hpu"), 0.0, False, None, mode, True)
        torch.testing.assert_close(out.cpu(), ref, **TOL[torch.float32])


def test_bad_input_raises_clearly():
    q, k, v, _ = _inputs(1, 2, 8, 8, 16, torch.float32, None)
    qh, kh, vh = q.to("hpu"), k.to("hpu"), v.to("hpu")
    with pytest.raises(RuntimeError, match="head dims differ"):
        FusedSDPA.apply(qh, kh[..., :8], vh)
    with pytest.raises(RuntimeError, match="head dims differ"):
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(qh, kh[..., :8], vh)
    with pytest.raises(ValueError, match="key must be an hpu tensor"):
        FusedSDPA.apply(qh, k, vh)
    with pytest.raises(TypeError, match="query must be float32"):
        FusedSDPA.apply(qh.int(), kh.int(), vh.int())
    with pytest.raises(TypeError, match="float32, bfloat16 or float16"):
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(qh.int(), kh.int(), vh.int())
    with pytest.raises(TypeError, match="one dtype"):
        FusedSDPA.apply(qh, kh.bfloat16(), vh)
    with pytest.raises(ValueError, match="4-d"):
        FusedSDPA.apply(qh[0], kh[0], vh[0])
    with pytest.raises(RuntimeError, match="does not broadcast"):
        FusedSDPA.apply(qh, kh, vh, torch.ones(3, 8, dtype=torch.bool, device="hpu"))
    with pytest.raises(ValueError, match="valid_sequence_lengths"):
        FusedSDPA.apply(qh, kh, vh, None, 0.0, True, None, "None", None, torch.tensor([8.0], device="hpu"))
    with pytest.raises(ValueError, match="softmax_mode"):
        FusedSDPA.apply(qh, kh, vh, None, 0.0, False, None, "fp8")


def test_lazy_graph_replays_with_new_data():
    # the same graph twice (a recipe-cache hit in lazy mode) on new inputs
    for seed in (5, 6):
        q, k, v, m = _inputs(2, 2, 40, 40, 32, torch.float32, "float", seed=seed)
        out = F.scaled_dot_product_attention(q.to("hpu"), k.to("hpu"), v.to("hpu"), attn_mask=m.to("hpu"))
        habana_torch.core.mark_step()
        torch.testing.assert_close(out.cpu(), _sdpa(q, k, v, m), **TOL[torch.float32])


# ---- rotary embeddings and RMS norm -----------------------------------------------------------


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _rope_tables(n, D):
    inv = 1.0 / (10000 ** (torch.arange(0, D, 2).float() / D))
    freqs = torch.outer(torch.arange(n).float(), inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def test_rotary_v2_as_llama_calls_it():
    g = torch.Generator().manual_seed(7)
    q = torch.randn(2, 4, 10, 64, generator=g, requires_grad=True)
    cos, sin = _rope_tables(32, 64)
    pos = torch.stack([torch.arange(10), torch.arange(5, 15)])
    # transformers' apply_rotary_pos_emb with cos[position_ids], sin[position_ids]
    ref = q * cos[pos].unsqueeze(1) + _rotate_half(q) * sin[pos].unsqueeze(1)
    ref.sum().backward()
    qh = q.detach().to("hpu").requires_grad_()
    out = RotaryPosEmbeddingHelperV2.apply(qh, cos[None, None].to("hpu"), sin[None, None].to("hpu"), pos.to("hpu"))
    out.sum().backward()
    torch.testing.assert_close(out.cpu(), ref, **TOL[torch.float32])
    torch.testing.assert_close(qh.grad.cpu(), q.grad, **GRAD_TOL[torch.float32])


def test_rotary_v1_offset_and_pairwise():
    g = torch.Generator().manual_seed(8)
    x = torch.randn(1, 2, 6, 16, generator=g)
    cos, sin = _rope_tables(20, 16)
    ref = x * cos[3:9] + _rotate_half(x) * sin[3:9]
    out = RotaryPosEmbeddingHelperV1.apply(x.to("hpu"), sin.to("hpu"), cos.to("hpu"), 3)
    torch.testing.assert_close(out.cpu(), ref, **TOL[torch.float32])
    # PAIRWISE: diffusers' interleaved form (x0, x1) -> (-x1, x0)
    c, s = cos[:6].repeat_interleave(2, -1)[..., :16], sin[:6].repeat_interleave(2, -1)[..., :16]
    pairs = x.unflatten(-1, (-1, 2))
    ref = x * c + torch.stack((-pairs[..., 1], pairs[..., 0]), -1).flatten(-2) * s
    out = apply_rotary_pos_emb(x.to("hpu"), c.to("hpu"), s.to("hpu"), None, 0, RotaryPosEmbeddingMode.PAIRWISE)
    torch.testing.assert_close(out.cpu(), ref, **TOL[torch.float32])
    with pytest.raises(ValueError, match="head dim"):
        apply_rotary_pos_emb(x.to("hpu"), c[..., :8].to("hpu"), s[..., :8].to("hpu"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_rms_norm_as_llama(dtype):
    g = torch.Generator().manual_seed(9)
    x = torch.randn(3, 5, 64, generator=g).to(dtype).requires_grad_()
    w = (1 + 0.1 * torch.randn(64, generator=g)).to(dtype).requires_grad_()
    xf = x.float()  # transformers' LlamaRMSNorm.forward
    ref = w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(dtype)
    ref.sum().backward()
    xh, wh = x.detach().to("hpu").requires_grad_(), w.detach().to("hpu").requires_grad_()
    out = FusedRMSNorm.apply(xh, wh, 1e-6)
    out.sum().backward()
    torch.testing.assert_close(out.cpu(), ref, **TOL[dtype])
    torch.testing.assert_close(xh.grad.cpu(), x.grad, **GRAD_TOL[dtype])
    torch.testing.assert_close(wh.grad.cpu(), w.grad, **GRAD_TOL[dtype])
    with pytest.raises(ValueError, match="weight must have shape"):
        FusedRMSNorm.apply(xh, wh[:10], 1e-6)


def test_mask_needing_a_gradient_takes_the_math_path():
    q, k, v, m = _inputs(1, 2, 12, 12, 16, torch.float32, "float")
    mc = m.clone().requires_grad_()
    F.scaled_dot_product_attention(q, k, v, attn_mask=mc).sum().backward()
    mh = m.to("hpu").requires_grad_()
    out = F.scaled_dot_product_attention(q.to("hpu"), k.to("hpu"), v.to("hpu"), attn_mask=mh)
    assert not _is_fused(out)
    out.sum().backward()
    torch.testing.assert_close(mh.grad.cpu(), mc.grad, **GRAD_TOL[torch.float32])


def test_captured_in_an_hpu_graph():
    class Attn(torch.nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def counter(name):
        return dict(habana_torch._C._metric_items(name)).get(name, 0)

    captures, replays = counter("hpu_graph_capture"), counter("hpu_graph_replay")
    model = habana_torch.hpu.wrap_in_hpu_graph(Attn().to("hpu").eval())
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed capture only warns and runs eagerly
        for seed in (10, 11, 12):  # capture, then replays on new data
            q, k, v, _ = _inputs(1, 2, 20, 20, 32, torch.float32, None, seed=seed)
            out = model(q.to("hpu"), k.to("hpu"), v.to("hpu"))
            torch.testing.assert_close(out.cpu(), _sdpa(q, k, v, None, is_causal=True), **TOL[torch.float32])
    assert (counter("hpu_graph_capture") - captures, counter("hpu_graph_replay") - replays) == (1, 3)
