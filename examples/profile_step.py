"""Profile one training step of a small BERT classifier on the hpu cards.

    python examples/profile_step.py [--out trace.json]              one card
    torchrun --nproc_per_node=2 examples/profile_step.py            DDP: HCCL lane too

torch.profiler with ProfilerActivity.HPU puts each card in the trace as a
process "HPU <n>" with MME, TPC, DMA and HCCL lanes, every device event
linked to the host op that launched it. Prints the host ops with the most
device time, writes the Chrome trace (rank 0's under DDP; open it in
https://ui.perfetto.dev, or draw it with scripts/render_trace.py).
The model is built from a small local config (nothing is downloaded).
"""
import argparse
import os

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile
from transformers import BertConfig, BertForSequenceClassification

import habana_torch.core as htcore
import habana_torch.distributed.hccl as hccl


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="hpu_trace.json")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=32)
    args = p.parse_args()

    world, rank, local_rank = hccl.initialize_distributed_hpu()
    if world > 1:
        dist.init_process_group("hccl")
    device = torch.device("hpu", local_rank)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=256, max_position_embeddings=64, num_labels=3)
    model = BertForSequenceClassification(cfg).to(device)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    ids = torch.randint(0, 1000, (args.batch, args.seq), generator=g)
    labels = ids[:, 0] % 3

    def step():
        loss = model(input_ids=ids.to(device), labels=labels.to(device)).loss
        loss.backward()
        htcore.mark_step()
        opt.step()
        opt.zero_grad(set_to_none=True)
        htcore.mark_step()
        return loss.item()

    for _ in range(2):  # warm up: recipes compiled, buffers allocated
        step()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.HPU]) as prof:
        loss = step()
    if rank == 0:
        print(f"loss {loss:.4f}")
        print(prof.key_averages().table(sort_by="device_time_total", row_limit=12))
        prof.export_chrome_trace(args.out)
        print(f"trace: {os.path.abspath(args.out)}")
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
