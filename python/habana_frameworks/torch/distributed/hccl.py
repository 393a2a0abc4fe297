"""habana_frameworks.torch.distributed.hccl: importing it registers the
``hccl`` backend of torch.distributed for hpu tensors (habana_torch's)::

    import habana_frameworks.torch.distributed.hccl as hccl
    world_size, rank, local_rank = hccl.initialize_distributed_hpu()
    torch.distributed.init_process_group("hccl")
"""
from habana_torch.distributed.hccl import HCCL_VERSION, acquire_card, initialize_distributed_hpu  # noqa: F401

__all__ = ["initialize_distributed_hpu"]
