"""FusedSDPA: Gaudi's fused scaled dot-product attention, on the core's
tiled attention kernel (csrc/kernels/attention.c)."""
import torch
import torch.nn.functional as F

__all__ = ["FusedSDPA"]

_SOFTMAX_MODES = ("None", "none", "fast", None)


def _check(q, k, v, attn_mask, dropout_p, softmax_mode, valid_sequence_lengths, padding_side):
    for name, t in (("query", q), ("key", k), ("value", v), ("attn_mask", attn_mask)):
        if t is None and name == "attn_mask":
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"FusedSDPA: {name} must be a tensor, got {type(t).__name__}")
        if t.device.type != "hpu":
            raise ValueError(f"FusedSDPA: {name} must be an hpu tensor, got one on {t.device}")
    for name, t in (("query", q), ("key", k), ("value", v)):
        if t.dim() != 4:
            raise ValueError(f"FusedSDPA: {name} must be 4-d [batch, heads, seq, head_dim], got shape "
                             f"{tuple(t.shape)}")
        if t.dtype not in (torch.float32, torch.bfloat16, torch.float16):
            raise TypeError(f"FusedSDPA: {name} must be float32, bfloat16 or float16, got {t.dtype}")
    if not 0.0 <= float(dropout_p) < 1.0:
        raise ValueError(f"FusedSDPA: dropout_p must be in [0, 1), got {dropout_p}")
    if softmax_mode not in _SOFTMAX_MODES:
        raise ValueError(f"FusedSDPA: softmax_mode must be 'None' or 'fast', got {softmax_mode!r}")
    if valid_sequence_lengths is not None:
        t = valid_sequence_lengths
        if not isinstance(t, torch.Tensor) or t.dim() != 1 or t.shape[0] != q.shape[0] or t.is_floating_point() \
                or t.is_complex() or t.dtype == torch.bool:
            raise ValueError("FusedSDPA: valid_sequence_lengths must be an integer tensor of shape [batch] "
                             f"({q.shape[0]},), got {t!r}")
    if padding_side not in ("left", "right"):
        raise ValueError(f"FusedSDPA: padding_side must be 'left' or 'right', got {padding_side!r}")


def _with_padding(attn_mask, lengths, padding_side, S, device):
    """attn_mask with the padded keys of each batch row hidden."""
    pos = torch.arange(S, device=device)
    lens = lengths.to(device).view(-1, 1, 1, 1)
    keep = pos >= S - lens if padding_side == "left" else pos < lens  # [B, 1, 1, S]
    if attn_mask is None:
        return keep
    if attn_mask.dtype == torch.bool:
        return attn_mask & keep
    return attn_mask.masked_fill(~keep, float("-inf"))


class FusedSDPA(torch.autograd.Function):
    """softmax(q @ k^T * scale + mask) @ v, as Gaudi's
    ``habana_frameworks.torch.hpex.kernels.FusedSDPA``::

        out = FusedSDPA.apply(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                              softmax_mode="None", recompute_mode=None, valid_sequence_lengths=None,
                              padding_side="left")

    q [B, H, L, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv] on the hpu, float32,
    bfloat16 or float16 (one dtype); Hkv may divide H (grouped-query
    attention: each key/value head serves H / Hkv query heads). attn_mask
    is bool (False = masked out) or floating (added to the scores) and
    broadcasts to [B, H, L, S]; it gets no gradient. is_causal masks key
    j > query i (top-left aligned, as torch's scaled_dot_product_attention);
    scale defaults to 1 / sqrt(D).

    The forward and the backward run the tiled attention kernel: float32
    accumulation, an online softmax, the [L, S] scores never stored, the
    backward recomputing the probabilities from the saved log-sum-exp
    (which is what Gaudi's recompute_mode asks for, so recompute_mode is
    accepted and changes nothing). softmax_mode "fast" runs the same exact
    kernel. With dropout_p > 0 the call runs the math composition
    (torch.nn.functional.scaled_dot_product_attention on hpu ops: matmul,
    softmax, dropout) instead.

    valid_sequence_lengths (integer [B]) marks padding, as optimum-habana
    passes it for a padded causal prompt: batch row b attends only to its
    last valid_sequence_lengths[b] keys (padding_side "left") or its first
    ones ("right"), on top of attn_mask and is_causal. A query row that is
    left with no key (a padding row) gets zeros."""

    @classmethod
    def apply(cls, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
              softmax_mode="None", recompute_mode=None, valid_sequence_lengths=None, padding_side="left"):
        _check(query, key, value, attn_mask, dropout_p, softmax_mode, valid_sequence_lengths, padding_side)
        hq, hkv = query.shape[1], key.shape[1]
        if hkv != hq:
            if hkv == 0 or hq % hkv or value.shape[1] != hkv:
                raise ValueError(f"FusedSDPA: query has {hq} heads, key {hkv} and value {value.shape[1]}: the "
                                 "key/value heads must be equal and divide the query heads")
            # outside the Function: autograd sums the repeated heads' gradients
            key = key.repeat_interleave(hq // hkv, dim=1)
            value = value.repeat_interleave(hq // hkv, dim=1)
        if valid_sequence_lengths is not None:
            attn_mask = _with_padding(attn_mask, valid_sequence_lengths, padding_side, key.shape[2], query.device)
        if dropout_p > 0.0:
            return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                                                  is_causal=is_causal, scale=scale)
        return super().apply(query, key, value, attn_mask, bool(is_causal), scale)

    @staticmethod
    def forward(ctx, query, key, value, attn_mask, is_causal, scale):
        r = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(
            query, key, value, attn_mask, 0.0, is_causal, False, scale=scale)
        out, lse = r[0], r[1]
        ctx.save_for_backward(query, key, value, attn_mask, out, lse)
        ctx.is_causal, ctx.scale = is_causal, scale
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, mask, out, lse = ctx.saved_tensors
        if mask is None:
            # the op's attn_bias is not optional: a zero bias, one element broadcast
            mask = torch.zeros((), dtype=torch.float32, device=q.device).expand(
                q.shape[0], q.shape[1], q.shape[2], k.shape[2])
        L, S = q.shape[2], k.shape[2]
        seed = torch.empty((), dtype=torch.long, device=q.device)
        dq, dk, dv, _ = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward(
            grad_out.contiguous(), q, k, v, mask, [True, True, True, False], out, lse, seed, seed, L, S, 0.0,
            ctx.is_causal, seed, seed, scale=ctx.scale)
        return dq, dk, dv, None, None, None
