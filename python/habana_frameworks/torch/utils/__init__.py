"""habana_frameworks.torch.utils: internal, library_loader, experimental."""
from . import experimental, internal, library_loader  # noqa: F401

__all__ = ["experimental", "internal", "library_loader"]
