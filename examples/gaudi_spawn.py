"""optimum-habana's gaudi_spawn.py for habana_torch: see habana_torch.distributed.launch.

    python examples/gaudi_spawn.py --world_size 2 [--use_mpi] [--hostfile F] [--master_port P] train.py ...
"""
import sys

from habana_torch.distributed.launch import main

if __name__ == "__main__":
    sys.exit(main())
