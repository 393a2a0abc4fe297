"""Train a small BERT classifier with DistributedDataParallel on hpu cards.

    torchrun --nproc_per_node=2 examples/ddp_bert.py --steps 50
    mpirun -np 2 python examples/ddp_bert.py                      (as root: --allow-run-as-root --oversubscribe)
    python examples/gaudi_spawn.py --world_size 2 [--use_mpi] examples/ddp_bert.py

The model is built from a small local config (nothing is downloaded); the data
are random token ids with a learnable rule (label = first token mod 3).
Prints loss and samples/s on rank 0.
"""
import argparse
import datetime
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import BertConfig, BertForSequenceClassification

import habana_torch.core as htcore
import habana_torch.distributed.hccl as hccl


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=16, help="per rank")
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=3, help="steps not timed")
    p.add_argument("--cpu", action="store_true", help="train on the CPU with gloo (for comparison)")
    p.add_argument("--cpu-stats", action="store_true", help="print each rank's CPU time per step and busy share")
    args = p.parse_args()

    world, rank, local_rank = hccl.initialize_distributed_hpu()
    if args.cpu:
        dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=5))
        device = torch.device("cpu")
    else:
        dist.init_process_group("hccl", timeout=datetime.timedelta(minutes=5))
        device = torch.device("hpu", local_rank)
    torch.manual_seed(0)
    cfg = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                     vocab_size=100, max_position_embeddings=128, num_labels=3,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # see the note in bench/RESULTS.md
    model = DDP(BertForSequenceClassification(cfg).to(device))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    g = torch.Generator().manual_seed(100 + rank)
    t0, timed = None, 0
    for step in range(args.steps):
        if step == args.warmup:
            if device.type == "hpu":
                torch.hpu.synchronize()
            t0, c0 = time.time(), time.process_time()
        ids = torch.randint(0, 100, (args.batch, args.seq), generator=g)
        labels = ids[:, 0] % 3
        logits = model(input_ids=ids.to(device), attention_mask=torch.ones_like(ids).to(device)).logits
        loss = torch.nn.functional.cross_entropy(logits, labels.to(device))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device.type == "hpu":
            htcore.mark_step()
        if step >= args.warmup:
            timed += 1
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step:4d} loss {loss.item():.4f}", flush=True)
    if device.type == "hpu":
        torch.hpu.synchronize()
    elapsed = time.time() - t0 if t0 else float("nan")
    cpu = time.process_time() - c0 if t0 else float("nan")
    sps = timed * args.batch * world / elapsed if timed else float("nan")
    if rank == 0:
        print(f"RESULT world={world} device={device.type} samples_per_s={sps:.1f} steps={timed} "
              f"elapsed={elapsed:.2f}s", flush=True)
    if args.cpu_stats and timed:
        # Where a rank's wall time goes: CPU time of all its threads (host,
        # card queue, autograd, collective watcher) per step, and the share of
        # the wall time that the process kept a CPU busy (< 1 on one core per
        # rank: the rank waited, for its peer or for a CPU taken by others).
        print(f"CPU rank={rank} cpu_ms_per_step={1000 * cpu / timed:.2f} wall_ms_per_step={1000 * elapsed / timed:.2f} "
              f"busy={cpu / elapsed:.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
