"""habana_frameworks.torch.hpex: hmp (mixed precision), optimizers
(FusedAdamW), normalization (FusedClipNorm, FusedRMSNorm) and kernels
(FusedSDPA, RotaryPosEmbeddingHelperV1 / V2), habana_torch.hpex's modules.

Gaudi's other hpex kernels (fp8, RotaryPosEmbeddingHelperV3, ...) are not
provided: importing them raises ImportError."""
import sys as _sys

from habana_torch.hpex import hmp

_sys.modules[__name__ + ".hmp"] = hmp

from . import kernels, normalization, optimizers  # noqa: E402

__all__ = ["hmp", "kernels", "normalization", "optimizers"]
