"""DDP on hpu through hccl: a small BERT classifier trained for N steps reaches
the parameters one CPU process reaches with the combined batch.

Modes (all by default, each a fresh model): plain, no_sync (gradient
accumulation over two micro-batches), unused (find_unused_parameters with a
branch that never runs), bucket_view (gradient_as_bucket_view), compiled (DDP over
torch.compile(backend="hpu_backend"), its graphs replayed), hook (a comm
hook built on the Work's future). Rank 0 computes the CPU reference itself and
prints one 'DDP <mode> OK max_abs_diff=...' line per mode.
"""
import argparse
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import habana_torch
import habana_torch.core as htcore
import habana_torch.distributed.hccl as hccl

TOL = 1e-5  # max abs parameter difference after training (fp32; only the summation order differs)


def make_model(unused=False):
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(1234)
    cfg = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                     vocab_size=100, max_position_embeddings=64, num_labels=3, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    model = Classifier(BertForSequenceClassification(cfg), unused)
    return model


class Classifier(torch.nn.Module):
    def __init__(self, bert, unused):
        super().__init__()
        self.bert = bert
        self.extra = torch.nn.Linear(8, 8) if unused else None  # never used: find_unused_parameters

    def forward(self, ids, mask):
        return self.bert(input_ids=ids, attention_mask=mask).logits


def batch(step, micro, n, seq=16):
    g = torch.Generator().manual_seed(1000 * step + micro)
    ids = torch.randint(0, 100, (n, seq), generator=g)
    mask = torch.ones(n, seq, dtype=torch.long)
    mask[:, seq - 3:] = (torch.rand(n, 3, generator=g) > 0.5).long()
    labels = torch.randint(0, 3, (n,), generator=g)
    return ids, mask, labels


def train(model, device, steps, per_rank, world, rank, micro_batches, ddp_model=None, lr=0.05):
    net = ddp_model if ddp_model is not None else model
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    for step in range(steps):
        opt.zero_grad(set_to_none=True)
        for m in range(micro_batches):
            ids, mask, labels = batch(step, m, per_rank * world)
            if ddp_model is not None:  # this rank's slice of the global batch
                sl = slice(rank * per_rank, (rank + 1) * per_rank)
                ids, mask, labels = ids[sl], mask[sl], labels[sl]
            ids, mask, labels = ids.to(device), mask.to(device), labels.to(device)
            last = m == micro_batches - 1
            ctx = net.no_sync() if (ddp_model is not None and not last) else _null()
            with ctx:
                loss = loss_fn(net(ids, mask), labels)
                loss.backward()
        opt.step()
    return loss.detach().cpu()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def hook_on_future(state, bucket):
    # A user comm hook: allreduce (sum) then divide, chained on the Work's future.
    t = bucket.buffer()
    fut = dist.all_reduce(t, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0].div_(dist.get_world_size()))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--per_rank", type=int, default=4)
    p.add_argument("--modes", default="plain,no_sync,unused,bucket_view,compiled,hook")
    args = p.parse_args()
    world, rank, local_rank = hccl.initialize_distributed_hpu()
    torch.set_num_threads(1)
    dist.init_process_group("hccl", timeout=datetime.timedelta(seconds=120))
    device = torch.device("hpu", local_rank)
    failures = 0
    for mode in args.modes.split(","):
        micro = 2 if mode == "no_sync" else 1
        model = make_model(unused=(mode == "unused")).to(device)
        kw = {}
        if mode == "unused":
            kw["find_unused_parameters"] = True
        if mode == "bucket_view":
            kw["gradient_as_bucket_view"] = True
        # compiled: DDP over torch.compile(backend="hpu_backend"), whose
        # forward and backward graphs are captured once and replayed while
        # the reducer's all-reduces run from other threads
        inner = torch.compile(model, backend="hpu_backend") if mode == "compiled" else model
        ddp = DDP(inner, device_ids=None, bucket_cap_mb=1, **kw)
        if mode == "hook":
            ddp.register_comm_hook(None, hook_on_future)
        t0 = time.time()
        replays = habana_torch.dynamo.replay_counts()["replays"]
        train(model, device, args.steps, args.per_rank, world, rank, micro, ddp_model=ddp)
        elapsed = time.time() - t0
        replayed = habana_torch.dynamo.replay_counts()["replays"] - replays  # 2 per step after the first
        params = {k: v.detach().cpu() for k, v in model.named_parameters()}
        # every rank holds the same parameters
        flat = torch.cat([v.flatten() for v in params.values()]).to(device)
        ref0 = flat.clone()
        dist.broadcast(ref0, 0)
        same = torch.equal(ref0.cpu(), flat.cpu())
        if rank == 0:
            cpu_model = make_model(unused=(mode == "unused"))
            train(cpu_model, torch.device("cpu"), args.steps, args.per_rank * world, 1, 0, micro)
            diff = max((params[k] - v.detach()).abs().max().item() for k, v in cpu_model.named_parameters())
            moved = max((params[k] - v.detach()).abs().max().item()
                        for k, v in make_model(unused=(mode == "unused")).named_parameters())
            ok = diff <= TOL and same and moved > 1e-3 and (mode != "compiled" or replayed >= 2 * (args.steps - 1))
            failures += not ok
            print(f"DDP {mode} {'OK' if ok else 'FAIL'} world={world} steps={args.steps} max_abs_diff={diff:.2e} "
                  f"(tol {TOL}) ranks_identical={same} param_change={moved:.3f} time={elapsed:.1f}s "
                  f"lazy={int(htcore.is_lazy())} replays={replayed}", flush=True)
        dist.barrier()
    dist.destroy_process_group()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
