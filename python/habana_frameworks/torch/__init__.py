"""habana_frameworks.torch: Gaudi's import path for the hpu, over habana_torch.

Scripts written for Gaudi import these names and run unchanged::

    import habana_frameworks.torch.core as htcore      # mark_step, is_lazy, ...
    import habana_frameworks.torch.hpu as hthpu         # is torch.hpu
    import habana_frameworks.torch.distributed.hccl     # registers "hccl"
    from habana_frameworks.torch.hpex import hmp
    from habana_frameworks.torch.hpex.optimizers import FusedAdamW
    from habana_frameworks.torch.hpex.normalization import FusedClipNorm

Every name here is habana_torch's (no second implementation):
``habana_frameworks.torch.hpu`` and its submodules (``hpu.random``, ...),
``hpex.hmp`` and the ``hpex`` kernel modules are the very module objects
of habana_torch. Importing this package loads core, hpu and
distributed.hccl, as on Gaudi.
"""
import sys as _sys

import habana_torch as _habana_torch
import habana_torch.hpu as _hpu


def _alias(name, module):
    """Makes `module` importable as habana_frameworks.torch.<name>, the same
    object (a second import of its file would make a second copy of its
    state)."""
    _sys.modules[f"{__name__}.{name}"] = module


# hpu and its submodules are habana_torch's (and torch.hpu's) objects.
_alias("hpu", _hpu)
for _name, _module in list(_sys.modules.items()):
    if _name.startswith("habana_torch.hpu.") and _module is not None:
        _alias("hpu." + _name[len("habana_torch.hpu."):], _module)
hpu = _hpu

from . import core  # noqa: E402  (reloads changed autocast op lists)
from . import distributed  # noqa: E402
from . import hpex  # noqa: E402
from . import utils  # noqa: E402
from .distributed import hccl as _hccl  # noqa: E402,F401

__version__ = _habana_torch.__version__
__all__ = ["core", "hpu", "distributed", "hpex", "utils"]
