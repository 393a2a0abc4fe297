"""Fault test: the last rank dies (SIGKILL) in the middle of DDP training; every
other rank must raise torch.distributed.DistBackendError (or RuntimeError)
within the process-group timeout, then exit. Survivors print
'FAULT OK rank=<r> raised_after=<s>s'."""
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import habana_torch.distributed.hccl as hccl

TIMEOUT_S = float(os.environ.get("FAULT_TIMEOUT_S", "10"))


def main():
    world, rank, local_rank = hccl.initialize_distributed_hpu()
    dist.init_process_group("hccl", timeout=datetime.timedelta(seconds=TIMEOUT_S))
    device = torch.device("hpu", local_rank)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 64).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    victim = world - 1
    t_fail = None
    try:
        for step in range(1000):
            if step == 5 and rank == victim:
                os.kill(os.getpid(), signal.SIGKILL)
            if step == 5:
                t_fail = time.time()
            loss = model(torch.randn(8, 64).to(device)).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            torch.hpu.synchronize()
    except (dist.DistBackendError, RuntimeError) as e:
        waited = time.time() - (t_fail or time.time())
        ok = waited <= TIMEOUT_S + 10
        print(f"FAULT {'OK' if ok else 'FAIL'} rank={rank} raised_after={waited:.1f}s "
              f"(timeout {TIMEOUT_S}s) {type(e).__name__}: {str(e).splitlines()[0][:160]}", flush=True)
        try:
            dist.destroy_process_group()
        except Exception:
            pass
        os._exit(0 if ok else 1)
    print(f"FAULT FAIL rank={rank}: training finished although rank {victim} died", flush=True)
    os._exit(1)


if __name__ == "__main__":
    main()
