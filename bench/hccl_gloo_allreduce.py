"""torch.distributed gloo allreduce (float32 sum, CPU tensors) over a size
sweep; prints the same columns as hccl_mpi_allreduce. Starts its own ranks:
    python bench/hccl_gloo_allreduce.py NRANKS MINBYTES MAXBYTES FACTOR"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, n, minb, maxb, factor, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=n)
    if rank == 0:
        print(f"# gloo allreduce float sum, {n} ranks\n#{'size':>10} {'time(us)':>10} {'algbw':>7} {'busbw':>7}", flush=True)
    b = minb
    while b <= maxb:
        t = torch.zeros(max(1, b // 4), dtype=torch.float32)
        iters = 100 if b <= (1 << 20) else 10 if b <= (16 << 20) else 3
        for _ in range(3):
            dist.all_reduce(t)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        us = torch.tensor([(time.perf_counter() - t0) / iters * 1e6], dtype=torch.float64)
        dist.all_reduce(us, op=dist.ReduceOp.MAX)
        if rank == 0:
            us = us.item()
            print(f" {b:>10} {us:>10.2f} {b / us / 1e3:>7.2f} {b / us / 1e3 * 2 * (n - 1) / n:>7.2f}", flush=True)
        b = int(b * factor)
    dist.destroy_process_group()


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    minb = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    maxb = int(sys.argv[3]) if len(sys.argv) > 3 else 256 << 20
    factor = float(sys.argv[4]) if len(sys.argv) > 4 else 8
    port = 29000 + os.getpid() % 2000
    mp.spawn(worker, args=(n, minb, maxb, factor, port), nprocs=n)
