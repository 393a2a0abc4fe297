"""FSDP2 (fully_shard) and FSDP1 on hpu through hccl: one training step on
each rank's half of a batch matches one CPU process on the whole batch.
Prints 'FSDP2 OK ...' / 'FSDP1 OK ...' on rank 0."""
import datetime
import sys

import torch
import torch.distributed as dist

import habana_torch.distributed.hccl as hccl

TOL = 1e-5


def make_model():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 4))


def data(n):
    g = torch.Generator().manual_seed(3)
    return torch.randn(n, 16, generator=g), torch.randn(n, 4, generator=g)


def reference(per_rank, world):
    m = make_model()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    x, y = data(per_rank * world)
    loss = torch.nn.functional.mse_loss(m(x), y)
    loss.backward()
    opt.step()
    return {k: v.detach() for k, v in m.named_parameters()}, loss.item()


def step(model, device, per_rank, world, rank):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = data(per_rank * world)
    sl = slice(rank * per_rank, (rank + 1) * per_rank)
    loss = torch.nn.functional.mse_loss(model(x[sl].to(device)), y[sl].to(device))
    loss.backward()
    opt.step()


def main():
    world, rank, local_rank = hccl.initialize_distributed_hpu()
    dist.init_process_group("hccl", timeout=datetime.timedelta(seconds=120))
    device = torch.device("hpu", local_rank)
    per_rank = 8
    ref, _ = reference(per_rank, world)
    failures = 0
    which = sys.argv[1].split(",") if len(sys.argv) > 1 else ["fsdp2", "fsdp1"]
    for kind in which:
        try:
            if kind == "fsdp2":
                from torch.distributed.fsdp import fully_shard
                from torch.distributed.tensor import DTensor
                model = make_model().to(device)
                for layer in model:
                    if isinstance(layer, torch.nn.Linear):
                        fully_shard(layer)
                fully_shard(model)
                step(model, device, per_rank, world, rank)
                got = {k: (v.full_tensor() if isinstance(v, DTensor) else v).detach().cpu()
                       for k, v in model.named_parameters()}
            else:
                from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, FullStateDictConfig, StateDictType
                model = FSDP(make_model().to(device), device_id=device, use_orig_params=True)
                step(model, device, per_rank, world, rank)
                with FSDP.summon_full_params(model):
                    got = {k.replace("_fsdp_wrapped_module.", ""): v.detach().cpu().clone()
                           for k, v in model.named_parameters()}
            diff = max((got[k] - v).abs().max().item() for k, v in ref.items())
            ok = diff <= TOL
            msg = f"max_abs_diff={diff:.2e} (tol {TOL})"
        except Exception as e:  # report and go on with the other kind
            ok, msg = False, f"{type(e).__name__}: {e}"
        failures += not ok
        if rank == 0:
            print(f"{kind.upper()} {'OK' if ok else 'FAIL'} world={world} {msg}", flush=True)
        dist.barrier()
    dist.destroy_process_group()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
