"""habana_torch.hpex.kernels (``habana_frameworks.torch.hpex.kernels``):
Gaudi's fused kernels that model code imports.

- ``FusedSDPA``: fused scaled dot-product attention on the core's tiled
  attention kernel (fused_sdpa.py);
- ``RotaryPosEmbeddingHelperV1`` / ``V2``, ``apply_rotary_pos_emb`` and
  ``RotaryPosEmbeddingMode``: rotary position embeddings, compositions of
  hpu ops (rotary.py).

FusedRMSNorm lives in hpex.normalization, as on Gaudi."""
from .fused_sdpa import FusedSDPA
from .rotary import (RotaryPosEmbeddingHelperV1, RotaryPosEmbeddingHelperV2, RotaryPosEmbeddingMode,
                     apply_rotary_pos_emb)

__all__ = ["FusedSDPA", "RotaryPosEmbeddingHelperV1", "RotaryPosEmbeddingHelperV2", "RotaryPosEmbeddingMode",
           "apply_rotary_pos_emb"]
