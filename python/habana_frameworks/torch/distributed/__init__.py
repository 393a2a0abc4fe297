"""habana_frameworks.torch.distributed: the hccl process-group backend."""
from . import hccl  # noqa: F401

__all__ = ["hccl"]
