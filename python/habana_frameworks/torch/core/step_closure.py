"""habana_frameworks.torch.core.step_closure: step closures and
_mark_step_if_lazy (habana_torch.core's)."""
from habana_torch.core import _mark_step_if_lazy, add_step_closure  # noqa: F401

__all__ = ["add_step_closure"]
