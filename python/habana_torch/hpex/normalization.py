"""habana_frameworks.torch.hpex.normalization: gradient-norm clipping and RMS norm."""
import math

import torch

__all__ = ["FusedClipNorm", "FusedRMSNorm"]


class FusedClipNorm:
    """Clips the gradients of parameters to a total norm of at most
    `max_norm`, as habana_frameworks.torch.hpex.normalization.FusedClipNorm::

        clipper = FusedClipNorm(model.parameters(), max_norm=1.0)
        ...
        total_norm = clipper.clip_norm(model.parameters())

    clip_norm returns the total norm of the gradients before clipping (a
    0-dim tensor on their device) and scales them in place, exactly as
    torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type) does,
    whose kernels it runs (the norm and the scaling stay on the hpu: no
    value goes to the host)."""

    def __init__(self, parameters, max_norm, norm_type=2.0):
        if isinstance(max_norm, bool) or not isinstance(max_norm, (int, float)) or not math.isfinite(max_norm) \
                or max_norm <= 0:
            raise ValueError(f"FusedClipNorm: max_norm must be a positive finite number, not {max_norm!r}")
        if isinstance(norm_type, bool) or not isinstance(norm_type, (int, float)) or norm_type <= 0:
            raise ValueError(f"FusedClipNorm: norm_type must be a positive number or inf, not {norm_type!r}")
        self.max_norm = float(max_norm)
        self.norm_type = float(norm_type)

    def clip_norm(self, parameters):
        if isinstance(parameters, torch.Tensor):
            parameters = [parameters]
        return torch.nn.utils.clip_grad_norm_(list(parameters), self.max_norm, self.norm_type)


class FusedRMSNorm:
    """Gaudi's ``FusedRMSNorm.apply(x, weight, eps)``: x / sqrt(mean(x^2 over
    the last dim) + eps) * weight, computed in float32 and rounded to x's
    dtype before the weight multiplies (as transformers' LlamaRMSNorm, whose
    Gaudi path calls this). A composition of hpu ops (the lazy graph fuses
    the elementwise steps); autograd gives the gradients of x and weight."""

    @staticmethod
    def apply(x, weight, eps=1e-6):
        if not isinstance(x, torch.Tensor) or not isinstance(weight, torch.Tensor):
            raise TypeError("FusedRMSNorm: x and weight must be tensors")
        if not x.is_floating_point():
            raise TypeError(f"FusedRMSNorm: x must be floating point, got {x.dtype}")
        if weight.shape != x.shape[-1:]:
            raise ValueError(f"FusedRMSNorm: weight must have shape ({x.shape[-1]},) (x's last dim), got "
                             f"{tuple(weight.shape)}")
        xf = x.to(torch.float32)
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        return weight * y.to(x.dtype)
