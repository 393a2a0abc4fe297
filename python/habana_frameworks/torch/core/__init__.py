"""habana_frameworks.torch.core: the step boundary and the execution mode
(habana_torch.core's functions).

Its first import also re-reads the autocast op lists when
PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST / PT_HPU_AUTOCAST_FP32_OPS_LIST
changed after ``import torch`` loaded them (see habana_torch.hpex.hmp).
"""
from habana_torch import hpu  # noqa: F401
from habana_torch.core import _set_lazy_mode, add_step_closure, is_lazy, iter_mark_step, mark_step  # noqa: F401
from habana_torch.hpex import hmp as _hmp

from . import step_closure  # noqa: F401

_hmp._reload_autocast_lists_if_env_changed()

__all__ = ["mark_step", "is_lazy", "add_step_closure", "iter_mark_step", "hpu", "step_closure"]
