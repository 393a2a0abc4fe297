"""habana_frameworks.torch.utils.internal: is_lazy."""
from habana_torch.core import is_lazy  # noqa: F401

__all__ = ["is_lazy"]
