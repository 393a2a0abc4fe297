"""Gaudi's rotary position embedding helpers (hpex.kernels), as compositions
of hpu ops: x * cos + rotate(x) * sin, elementwise work that the lazy graph
fuses; gradients (to x, and to cos / sin when they need one) come from
autograd."""
import enum

import torch

__all__ = ["RotaryPosEmbeddingMode", "apply_rotary_pos_emb", "RotaryPosEmbeddingHelperV1",
           "RotaryPosEmbeddingHelperV2"]


class RotaryPosEmbeddingMode(enum.Enum):
    """BLOCKWISE rotates the two halves of the head dim (GPT-NeoX, LLaMA:
    rotate_half); PAIRWISE rotates each pair of neighbours (GPT-J,
    interleaved)."""
    BLOCKWISE = 0
    PAIRWISE = 1


def _rotate(x, mode):
    if mode == RotaryPosEmbeddingMode.PAIRWISE:
        pairs = x.unflatten(-1, (-1, 2))
        return torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _tables(x, cos, sin, position_ids, offset):
    if position_ids is not None:
        # cos / sin hold one row per position ([..., max_positions, D]);
        # position_ids [B, L] picks the rows of each sequence: [B, 1, L, D]
        c, s = cos.reshape(-1, cos.shape[-1]), sin.reshape(-1, sin.shape[-1])
        return c[position_ids].unsqueeze(1), s[position_ids].unsqueeze(1)
    seq = x.shape[-2]
    if cos.dim() >= 2 and cos.shape[-2] != seq:
        return cos[..., offset:offset + seq, :], sin[..., offset:offset + seq, :]
    return cos, sin


def apply_rotary_pos_emb(p, cos, sin, position_ids=None, offset=0, mode=RotaryPosEmbeddingMode.BLOCKWISE):
    """p * cos + rotate(p) * sin over p [..., L, D] (the rotated part is the
    full head dim D, which must be even). With position_ids [B, L], row
    position_ids[b, i] of cos / sin ([..., max_positions, D]) serves
    p[b, :, i]; without them, rows offset .. offset + L (or cos / sin as
    given when they already broadcast to p)."""
    if not isinstance(mode, RotaryPosEmbeddingMode):
        raise ValueError(f"apply_rotary_pos_emb: mode must be a RotaryPosEmbeddingMode, got {mode!r}")
    if p.shape[-1] % 2:
        raise ValueError(f"apply_rotary_pos_emb: the head dim must be even, got {p.shape[-1]}")
    if cos.shape != sin.shape or cos.shape[-1] != p.shape[-1]:
        raise ValueError(f"apply_rotary_pos_emb: cos {tuple(cos.shape)} and sin {tuple(sin.shape)} must have one "
                         f"shape whose last dim is the head dim {p.shape[-1]}")
    c, s = _tables(p, cos, sin, position_ids, offset)
    return p * c + _rotate(p, mode) * s


class RotaryPosEmbeddingHelperV1:
    """Gaudi's ``RotaryPosEmbeddingHelperV1.apply(p, sin, cos, offset)``
    (note sin before cos): blockwise rotation with cos / sin rows offset ..
    offset + L."""

    @staticmethod
    def apply(p, sin, cos, offset=0):
        return apply_rotary_pos_emb(p, cos, sin, None, offset, RotaryPosEmbeddingMode.BLOCKWISE)


class RotaryPosEmbeddingHelperV2:
    """Gaudi's ``RotaryPosEmbeddingHelperV2.apply(p, cos, sin, position_ids=None,
    offset=0, mode=RotaryPosEmbeddingMode.BLOCKWISE)``, as optimum-habana's
    LLaMA calls it: ``apply(q, cos[None, None], sin[None, None], position_ids)``
    with cos / sin [max_positions, D] and position_ids [B, L]."""

    @staticmethod
    def apply(p, cos, sin, position_ids=None, offset=0, mode=RotaryPosEmbeddingMode.BLOCKWISE):
        return apply_rotary_pos_emb(p, cos, sin, position_ids, offset, mode)
