"""habana_frameworks.torch.hpex.normalization: FusedClipNorm and FusedRMSNorm (habana_torch.hpex.normalization's)."""
from habana_torch.hpex.normalization import FusedClipNorm, FusedRMSNorm  # noqa: F401

__all__ = ["FusedClipNorm", "FusedRMSNorm"]
