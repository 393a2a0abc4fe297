"""habana_frameworks.torch.hpex.kernels: habana_torch.hpex.kernels' names."""
from habana_torch.hpex.kernels import (FusedSDPA, RotaryPosEmbeddingHelperV1, RotaryPosEmbeddingHelperV2,  # noqa: F401
                                       RotaryPosEmbeddingMode, apply_rotary_pos_emb)

__all__ = ["FusedSDPA", "RotaryPosEmbeddingHelperV1", "RotaryPosEmbeddingHelperV2", "RotaryPosEmbeddingMode",
           "apply_rotary_pos_emb"]
