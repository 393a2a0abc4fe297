"""BERT training step under torch.autocast("hpu", bf16) against PyTorch's
own CPU autocast bf16 and against fp32 on the hpu, in the same process.

A step is forward + backward + AdamW step on a small BERT classifier built
from a config (nothing downloaded), synthetic tokens. Reports the median
step time of each variant and two ratios, with their targets:
    hpu bf16 / cpu bf16   (target <= 1.0)
    hpu bf16 / hpu fp32   (target < 1.0)
Usage: python bench/autocast_bert.py [--steps 10] [--hidden 256] [--layers 4]
                                     [--seq 128] [--batch 8] [--threads N]
"""
import argparse
import statistics
import time

import torch
import transformers

import habana_torch  # noqa: F401
import habana_torch.core as htcore


def make_model(args):
    torch.manual_seed(0)
    cfg = transformers.BertConfig(hidden_size=args.hidden, num_hidden_layers=args.layers,
                                  num_attention_heads=args.hidden // 64, intermediate_size=4 * args.hidden,
                                  vocab_size=1000, max_position_embeddings=max(512, args.seq), num_labels=2,
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return transformers.BertForSequenceClassification(cfg)


def make_step(args, device, autocast):
    model = make_model(args).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 1000, (args.batch, args.seq), generator=g).to(device)
    labels = torch.randint(0, 2, (args.batch,), generator=g).to(device)

    def step():
        with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        htcore.mark_step()
        return loss.item()  # waits for the queued work

    return step


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--threads", type=int, default=0)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"BERT hidden={args.hidden} layers={args.layers} seq={args.seq} batch={args.batch} "
          f"threads={torch.get_num_threads()} torch={torch.__version__}")
    variants = (("cpu autocast bf16", "cpu", True), ("hpu autocast bf16", "hpu", True),
                ("hpu fp32", "hpu", False), ("cpu fp32", "cpu", False))
    steps = {name: make_step(args, device, autocast) for name, device, autocast in variants}
    times = {name: [] for name in steps}
    losses = {}
    # round robin, so that load from other processes hits every variant alike
    for i in range(args.warmup + args.steps):
        for name, step in steps.items():
            t0 = time.perf_counter()
            losses[name] = step()
            if i >= args.warmup:
                times[name].append(time.perf_counter() - t0)
    runs = {name: statistics.median(ts) for name, ts in times.items()}
    for name, t in runs.items():
        print(f"  {name:18s} {t * 1e3:9.1f} ms/step (median of {args.steps})   loss {losses[name]:.4f}")
    print(f"hpu bf16 / cpu bf16 = {runs['hpu autocast bf16'] / runs['cpu autocast bf16']:.2f}  (target <= 1.0)")
    print(f"hpu bf16 / hpu fp32 = {runs['hpu autocast bf16'] / runs['hpu fp32']:.2f}  (target < 1.0)")
    fb = habana_torch.metrics.cpu_fallback_counts()
    if fb:
        top = sorted(fb.items(), key=lambda kv: -kv[1])[:8]
        print("cpu fallbacks (top): " + ", ".join(f"{k}={v}" for k, v in top))


if __name__ == "__main__":
    main()
