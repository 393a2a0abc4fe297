"""habana_torch.hpex: the Gaudi extensions (``habana_frameworks.torch.hpex``).

``hpex.hmp`` is the mixed-precision package: ``hmp.convert(...)`` and
``hmp.disable_casts()``. Importing it (``import habana_torch`` does) loads the
autocast op lists that ``torch.autocast("hpu")`` uses.
"""
from . import hmp

__all__ = ["hmp"]
