"""accelerate on several cards: under torchrun, Accelerator() picks
DistributedType.MULTI_HPU over the hccl backend, each process on its own
card, and a short training loop (model, optimizer and data prepared by
accelerate: DDP, sharded batches) reaches the parameters one CPU process
reaches with the combined batches. Every rank checks; rank 0 prints
'ACCELERATE MULTI_HPU OK world=N lazy=L max_abs_diff=...'.

    torchrun --nproc_per_node=2 tests/dist/accelerate_worker.py
"""
import copy
import os
import sys

import torch
import torch.distributed as dist

STEPS, BATCH, TOL = 6, 8, 1e-5  # fp32; only the summation order differs from the CPU


def make_model():
    torch.manual_seed(1234)
    return torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                               torch.nn.Linear(32, 3))


def make_data(world):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(STEPS * BATCH * world, 10, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    return torch.utils.data.TensorDataset(x, y)


def train(model, opt, data, backward, step_end=lambda: None):
    losses = []
    for xb, yb in data:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        backward(loss)
        opt.step()
        step_end()
        losses.append(loss.detach())
    return losses


def main():
    from accelerate import Accelerator
    from accelerate.utils import DistributedType

    import habana_torch.core as htcore

    acc = Accelerator()
    world, rank, local_rank = acc.num_processes, acc.process_index, acc.local_process_index
    assert world == int(os.environ["WORLD_SIZE"]) > 1, world
    assert acc.distributed_type == DistributedType.MULTI_HPU, acc.distributed_type
    assert dist.get_backend() == "hccl", dist.get_backend()
    assert acc.device == torch.device("hpu", local_rank), (acc.device, local_rank)
    assert torch.hpu.current_device() == local_rank

    data = make_data(world)
    model = make_model()
    cpu_model = copy.deepcopy(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=False)
    model, opt, loader = acc.prepare(model, opt, loader)
    assert isinstance(model, torch.nn.parallel.DistributedDataParallel)
    assert next(model.parameters()).device == acc.device
    losses = train(model, opt, loader, acc.backward, htcore.mark_step)
    assert len(losses) == STEPS, len(losses)
    mean_losses = [acc.gather(loss).mean().item() for loss in losses]

    # One CPU process over the combined batches: accelerate deals batch i to
    # rank i % world, and DDP averages the gradients of equal-size batches.
    cpu_opt = torch.optim.AdamW(cpu_model.parameters(), lr=1e-2)
    cpu_loader = torch.utils.data.DataLoader(data, batch_size=BATCH * world, shuffle=False)
    cpu_losses = [loss.item() for loss in train(cpu_model, cpu_opt, cpu_loader, lambda loss: loss.backward())]
    torch.testing.assert_close(mean_losses, cpu_losses, rtol=1e-4, atol=TOL)
    diff = max((p.detach().cpu() - q.detach()).abs().max().item()
               for p, q in zip(acc.unwrap_model(model).parameters(), cpu_model.parameters()))
    assert diff <= TOL, f"rank {rank}: parameters differ from the CPU reference by {diff}"
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = acc.gather(flat.unsqueeze(0))
    assert torch.equal(everyone.cpu(), flat.cpu().unsqueeze(0).expand(world, -1)), "ranks disagree"
    acc.wait_for_everyone()
    if rank == 0:
        print(f"ACCELERATE MULTI_HPU OK world={world} lazy={int(htcore.is_lazy())} max_abs_diff={diff:.2e}",
              flush=True)
    acc.end_training()  # destroys the process group
    assert not dist.is_initialized()


if __name__ == "__main__":
    sys.exit(main())
