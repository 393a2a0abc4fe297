"""habana_torch.hpex: the Gaudi extensions (``habana_frameworks.torch.hpex``).

``hpex.hmp`` is the mixed-precision package: ``hmp.convert(...)`` and
``hmp.disable_casts()``. Importing it (``import habana_torch`` does) loads the
autocast op lists that ``torch.autocast("hpu")`` uses.

``hpex.optimizers.FusedAdamW`` (AdamW as one fused kernel),
``hpex.normalization.FusedClipNorm`` (gradient clipping) and
``FusedRMSNorm``, and ``hpex.kernels`` (``FusedSDPA`` on the core's tiled
attention kernel, the rotary embedding helpers ``RotaryPosEmbeddingHelperV1``
/ ``V2``) are the kernels of Gaudi's hpex that run here, with
``torch.ops.hpu.optimizer_adamw`` (the fused AdamW step DeepSpeed's
FusedAdam calls; hpex/optimizer_adamw.py). Gaudi's other hpex kernels (fp8,
RotaryPosEmbeddingHelperV3, ...) are not provided.
"""
from . import hmp
from . import kernels, normalization, optimizers
from . import optimizer_adamw as _optimizer_adamw  # noqa: F401  (registers torch.ops.hpu.optimizer_adamw)

__all__ = ["hmp", "kernels", "normalization", "optimizers"]
