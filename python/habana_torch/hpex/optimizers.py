"""Optimizers of habana_frameworks.torch.hpex.optimizers that run as fused
kernels on the hpu.

``FusedAdamW`` is ``torch.optim.AdamW`` with ``fused=True``: one
``_fused_adamw_`` kernel per parameter group and dtype updates every
parameter, its moments (and, with amsgrad, the running maximum) in one pass.
"""
import torch

__all__ = ["FusedAdamW"]


class FusedAdamW(torch.optim.AdamW):
    """AdamW (decoupled weight decay) as one fused kernel per step, as
    habana_frameworks.torch.hpex.optimizers.FusedAdamW. Same arguments,
    defaults and results as torch.optim.AdamW; the parameters must be
    floating-point tensors on the hpu (or the CPU)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
                 *, maximize=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         maximize=maximize, fused=True)
