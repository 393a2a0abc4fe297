"""torch.distributed all_reduce through hccl (hpu tensors) vs gloo (CPU
tensors), 1 MB - 256 MB, on one host. Run under torchrun with 2 ranks:

    torchrun --nproc_per_node=2 bench/ddp_allreduce.py [--sizes_mb 1,4,16,64,256] [--iters N]

Both backends live in one process group ("cpu:gloo,hpu:hccl"), so every size
is timed on both with the same processes. Rank 0 prints a table and the
ratio gloo time / hccl time (the target is >= 3x).
"""
import argparse
import datetime
import os
import time

import torch
import torch.distributed as dist

import habana_torch.distributed.hccl as hccl


def time_once(t, sync):
    sync()
    t0 = time.perf_counter()
    dist.all_reduce(t)
    sync()
    return time.perf_counter() - t0


def timeit_pair(th, tc, iters, hsync):
    """Best of `iters` for each backend, the two interleaved call by call so
    that load from other processes hits both alike."""
    for _ in range(2):  # warm: first touch of peers' memory, gloo's buffers
        time_once(th, hsync)
        time_once(tc, lambda: None)
    hs, gs = float("inf"), float("inf")
    for _ in range(iters):
        hs = min(hs, time_once(th, hsync))
        gs = min(gs, time_once(tc, lambda: None))
    return hs, gs


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes_mb", default="1,4,16,64,256")
    p.add_argument("--iters", type=int, default=5)
    args = p.parse_args()
    world, rank, local_rank = hccl.initialize_distributed_hpu()
    torch.set_num_threads(1)
    dist.init_process_group("cpu:gloo,hpu:hccl", timeout=datetime.timedelta(minutes=10))
    dev = torch.device("hpu", local_rank)
    rows = []
    for mb in [int(s) for s in args.sizes_mb.split(",")]:
        n = mb * (1 << 20) // 4
        iters = max(2, args.iters * 4 if mb <= 16 else args.iters if mb <= 64 else args.iters // 2)
        th = torch.ones(n, device=dev)
        tc = torch.ones(n)
        hs, gs = timeit_pair(th, tc, iters, lambda: torch.hpu.synchronize(local_rank))
        del th, tc
        rows.append((mb, hs, gs))
    if rank == 0:
        print(f"world={world} threads/rank=1 (best of N, interleaved, seconds; busbw = 2(n-1)/n * bytes / t)")
        print(f"{'size':>8} {'hccl(hpu)':>11} {'GB/s':>7} {'gloo(cpu)':>11} {'GB/s':>7} {'ratio':>6}")
        for mb, hs, gs in rows:
            f = 2 * (world - 1) / world * mb * (1 << 20) / 1e9
            print(f"{mb:>6}MB {hs:>11.4f} {f / hs:>7.2f} {gs:>11.4f} {f / gs:>7.2f} {gs / hs:>5.1f}x", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
