"""habana_frameworks.torch.hpex.experimental.transformer_engine: the part of
Gaudi's fp8 transformer engine that lets a library ask whether fp8 is there.

habana_torch has no fp8 dtypes or kernels, so this module answers "no":
``fp8.is_fp8_available()`` returns ``(False, reason)``, and the fp8 layers and
``fp8_autocast`` are not provided (using them raises AttributeError). The
recipe types (``recipe.DelayedScaling``, ``recipe.Format``) are plain
descriptions of an fp8 scaling recipe; nothing here computes with them.

It exists because lightning-habana, once ``hl-smi`` reports release 1.14 or
later, imports this module and ``recipe.DelayedScaling`` unconditionally when
it is imported, then asks ``fp8.is_fp8_available()`` before any fp8 work:
with the answer False, ``precision="fp8"`` fails with its own clear
NotImplementedError and every other precision works.
"""
from . import fp8, recipe  # noqa: F401

__all__ = ["fp8", "recipe"]
