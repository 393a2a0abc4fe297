"""habana_torch.hpex: the Gaudi extensions (``habana_frameworks.torch.hpex``).

``hpex.hmp`` is the mixed-precision package: ``hmp.convert(...)`` and
``hmp.disable_casts()``. Importing it (``import habana_torch`` does) loads the
autocast op lists that ``torch.autocast("hpu")`` uses.

``hpex.optimizers.FusedAdamW`` (AdamW as one fused kernel) and
``hpex.normalization.FusedClipNorm`` (gradient clipping) are the kernels of
Gaudi's hpex that run here, with ``torch.ops.hpu.optimizer_adamw`` (the
fused AdamW step DeepSpeed's FusedAdam calls; hpex/optimizer_adamw.py). Gaudi's other hpex kernels (FusedSDPA, the
fused rotary embedding, FusedRMSNorm, ...) are not provided, so libraries
that try to import them take their plain PyTorch path.
"""
from . import hmp
from . import normalization, optimizers
from . import optimizer_adamw as _optimizer_adamw  # noqa: F401  (registers torch.ops.hpu.optimizer_adamw)

__all__ = ["hmp", "normalization", "optimizers"]
