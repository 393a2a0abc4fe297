"""DeepSpeed ZeRO on several cards: under torchrun, DeepSpeed picks its HPU
accelerator (habana_frameworks.torch.hpu imports) and the hccl backend, and
a few ZeRO stage 1, 2 and 3 training steps (fp32, gradients clipped by
their global norm, DeepSpeed's FusedAdam, which runs
torch.ops.hpu.optimizer_adamw) reach the parameters that

  - one CPU process reaches with torch.optim.AdamW over the combined batches
    (what data-parallel ZeRO must equal), checked in every run, and
  - the same DeepSpeed run on the CPU reaches (DS_ACCELERATOR=cpu, gloo;
    its optimizer is torch's AdamW there, DeepSpeed's CPU FusedAdam being a
    C++ extension to compile): --save FILE writes its parameters, --compare
    FILE checks the hpu run against them.

Every rank checks; rank 0 prints 'DEEPSPEED ZERO<stage> OK accel=... world=N
lazy=L ...' per stage.

    DS_ACCELERATOR=cpu torchrun --nproc_per_node=2 tests/dist/deepspeed_worker.py --save /tmp/ref.pt
    torchrun --nproc_per_node=2 tests/dist/deepspeed_worker.py --compare /tmp/ref.pt
"""
import argparse
import importlib
import logging
import os
import sys

import torch
import torch.distributed as dist

STEPS, BATCH, LR, WD, CLIP = 5, 4, 1e-2, 0.01, 1.0
# DeepSpeed's FusedAdam on the hpu folds the bias correction of the second
# moment into the step, so its eps acts as eps * sqrt(1 - beta2**t) in
# torch's formula: with a tiny eps both are the same to rounding (the op
# itself is compared with that formula in tests/python/test_deepspeed.py).
EPS = 1e-12
TOL = 2e-5  # fp32; only the summation order differs from the reference


def make_model():
    torch.manual_seed(1234)
    return torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                               torch.nn.Linear(32, 3))


def make_data(world):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(STEPS, BATCH * world, 10, generator=g)
    y = (x[..., 0] > 0).long() + (x[..., 1] > 0).long()
    return x, y


def reference(world):
    """One CPU process, the combined batches, gradients clipped to a norm
    of CLIP, torch's AdamW."""
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WD, eps=EPS)
    x, y = make_data(world)
    losses = []
    for s in range(STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[s]), y[s])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        losses.append(loss.item())
    return [p.detach().clone() for p in model.parameters()], losses


def run_zero(stage, accel, world, rank):
    import deepspeed

    on_cpu = accel.device_name() == "cpu"
    config = {
        "train_micro_batch_size_per_gpu": BATCH,
        "gradient_accumulation_steps": 1,
        "optimizer": {"type": "AdamW", "params": {"lr": LR, "weight_decay": WD, "eps": EPS, "torch_adam": on_cpu}},
        # Stage 3 partitions every parameter (by default small ones stay whole).
        "zero_optimization": {"stage": stage, **({"stage3_param_persistence_threshold": 0} if stage == 3 else {})},
        "gradient_clipping": CLIP,
        "steps_per_print": 10**6,
    }
    model = make_model()
    engine, opt, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    if not on_cpu:
        from deepspeed.ops.adam import FusedAdam
        assert isinstance(opt.optimizer, FusedAdam), type(opt.optimizer)
    assert engine.zero_optimization_stage() == stage
    device = accel.current_device_name()
    # DeepSpeed's HPU accelerator names the device 'hpu' (the current card).
    where = next(engine.module.parameters()).device
    assert str(where) == device, (where, device)
    x, y = make_data(world)
    losses = []
    for s in range(STEPS):
        xb = x[s, rank * BATCH:(rank + 1) * BATCH].to(device)
        yb = y[s, rank * BATCH:(rank + 1) * BATCH].to(device)
        loss = torch.nn.functional.cross_entropy(engine(xb), yb)
        engine.backward(loss)
        engine.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / world)
    if stage == 3:
        parts = list(engine.module.parameters())
        assert all(p.ds_tensor.numel() < p.ds_numel for p in parts), "ZeRO-3 left a parameter whole"
        with deepspeed.zero.GatheredParameters(parts):
            params = [p.detach().cpu().clone() for p in parts]
    else:
        params = [p.detach().cpu().clone() for p in engine.module.parameters()]
    engine.destroy()
    return params, losses


def max_diff(a, b):
    return max((p - q).abs().max().item() for p, q in zip(a, b))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stages", default="1,2,3")
    parser.add_argument("--save", help="write this run's parameters (a reference for --compare)")
    parser.add_argument("--compare", help="check the parameters against a --save of another run")
    args = parser.parse_args()

    import deepspeed
    from deepspeed.accelerator import get_accelerator

    deepspeed.utils.logger.setLevel(logging.WARNING)
    accel = get_accelerator()
    expected = os.environ.get("DS_ACCELERATOR", "hpu")
    assert accel.device_name() == expected, (accel.device_name(), expected)
    if expected == "cpu":
        # DeepSpeed's CPU accelerator would compile its shared-memory
        # all-reduce extension (minutes of C++) and reduce through it; the
        # CPU reference reduces over gloo.
        # (deepspeed.comm's attribute "torch" is PyTorch: take the module.)
        importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    deepspeed.init_distributed(dist_backend=accel.communication_backend_name())
    world, rank = dist.get_world_size(), dist.get_rank()
    assert world == int(os.environ["WORLD_SIZE"]) > 1, world
    backend = dist.get_backend()
    assert backend == ("hccl" if expected == "hpu" else "gloo"), backend
    if expected == "hpu":
        accel.set_device(int(os.environ["LOCAL_RANK"]))
        import habana_frameworks.torch.utils.internal as internal
        lazy = int(internal.is_lazy())
    else:
        lazy = 0

    ref_params, ref_losses = reference(world)
    saved = {}
    other = torch.load(args.compare) if args.compare else None
    for stage in [int(s) for s in args.stages.split(",")]:
        params, losses = run_zero(stage, accel, world, rank)
        torch.testing.assert_close(losses, ref_losses, rtol=1e-4, atol=TOL)
        diff = max_diff(params, ref_params)
        assert diff <= TOL, f"rank {rank} ZeRO-{stage}: parameters differ from torch's AdamW by {diff}"
        msg = f"max_abs_diff_torch={diff:.2e}"
        if other is not None:
            d2 = max_diff(params, other[stage])
            assert d2 <= TOL, f"rank {rank} ZeRO-{stage}: parameters differ from the --compare run by {d2}"
            msg += f" max_abs_diff_compare={d2:.2e}"
        # Data-parallel ranks end with the same parameters.
        flat = torch.cat([p.reshape(-1) for p in params]).to(accel.current_device_name())
        everyone = [torch.empty_like(flat) for _ in range(world)]
        dist.all_gather(everyone, flat)
        assert all(torch.equal(e.cpu(), flat.cpu()) for e in everyone), f"ZeRO-{stage}: ranks disagree"
        saved[stage] = params
        if rank == 0:
            print(f"DEEPSPEED ZERO{stage} OK accel={backend} world={world} lazy={lazy} {msg}", flush=True)
    if args.save and rank == 0:
        torch.save(saved, args.save)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
