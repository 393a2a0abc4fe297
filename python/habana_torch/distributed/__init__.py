"""habana_torch.distributed: the ``hccl`` backend of torch.distributed for hpu.

``import habana_torch.distributed.hccl`` registers it (importing this package
does too) and provides ``initialize_distributed_hpu()``; ``launch`` is the
``gaudi_spawn.py``-style launcher (torchrun or mpirun).
"""
from . import hccl
from .hccl import initialize_distributed_hpu

__all__ = ["hccl", "initialize_distributed_hpu"]
