"""habana_frameworks.torch.hpex.optimizers: FusedAdamW (habana_torch.hpex.optimizers')."""
from habana_torch.hpex.optimizers import FusedAdamW  # noqa: F401

__all__ = ["FusedAdamW"]
