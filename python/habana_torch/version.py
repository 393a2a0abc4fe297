"""Versions habana_torch reports.

``__version__`` is this package's own version. ``GAUDI_API_VERSION`` is the
release of Intel Gaudi's PyTorch software whose public Python API and tools
habana_torch answers for: libraries built for Gaudi compare it against the
release they were validated with (through ``hl-smi``'s driver line and the
installed version of the ``habana-torch-plugin`` distribution), so every place
that reports a Gaudi release reads it from here.
"""

__version__ = "0.1.0"
GAUDI_API_VERSION = "1.21.0"
