"""habana_frameworks.torch.hpex: hmp (mixed precision), optimizers
(FusedAdamW) and normalization (FusedClipNorm), habana_torch.hpex's modules.

Gaudi's other hpex kernels (hpex.kernels: FusedSDPA, the fused rotary
embedding, FusedRMSNorm, ...) are not provided: importing them raises
ImportError, and libraries that try them take their plain PyTorch path."""
import sys as _sys

from habana_torch.hpex import hmp

_sys.modules[__name__ + ".hmp"] = hmp

from . import normalization, optimizers  # noqa: E402

__all__ = ["hmp", "normalization", "optimizers"]
