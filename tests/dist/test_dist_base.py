"""PyTorch's own distributed test base (DistributedTest._DistTestBase) against
hccl, with the plugin pattern third-party backends (torch_ucc) use: the
backend registers itself, is declared a "plugin" to the test cases, and the
base class runs under TestDistBackend's spawned ranks.

    BACKEND=hccl WORLD_SIZE=2 TEMP_DIR=$(mktemp -d) python tests/dist/test_dist_base.py [-k pattern ...]

hccl is registered for hpu; here it also serves CPU tensors (the base class
uses CPU tensors for every backend that is not nccl), which HCCL takes as
host buffers: the same collective code paths. Ranks share card 0
(PT_HPU_SHARE_CARDS=1, the test-runner setting).
"""
import os
import sys

os.environ.setdefault("BACKEND", "hccl")
os.environ.setdefault("WORLD_SIZE", "2")
os.environ.setdefault("PT_HPU_SHARE_CARDS", "1")
if "TEMP_DIR" not in os.environ:
    import tempfile

    os.environ["TEMP_DIR"] = tempfile.mkdtemp(prefix="hccl-disttest-")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import habana_torch.distributed.hccl  # noqa: E402,F401  (registers "hccl")

dist.Backend.backend_capability["hccl"] = ["hpu", "cpu"]

from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

for feature in ("plugin", "subgroup", "ddp"):
    DistTestCases.backend_feature[feature].add("hccl")
DistTestCases.skip_collective["sendrecv anysource"].add("hccl")
DistTestCases.skip_collective["allgather_coalesced"].discard("hccl")

from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


class TestHcclWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


if __name__ == "__main__":
    run_tests()
