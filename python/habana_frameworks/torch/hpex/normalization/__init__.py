"""habana_frameworks.torch.hpex.normalization: FusedClipNorm (habana_torch.hpex.normalization's)."""
from habana_torch.hpex.normalization import FusedClipNorm  # noqa: F401

__all__ = ["FusedClipNorm"]
