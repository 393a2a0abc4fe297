"""BERT training step (h256 L4, batch 16, seq 128, fp32, AdamW): hpu lazy vs
torch CPU eager, and vs torch.compile on the CPU (inductor).
Target: hpu lazy <= 0.8x torch CPU eager; the compiled
ratio is reported.

All variants run in this process, round robin, both sides on --threads
threads; the figure is the median step time after warm-up (the compiled
variant compiles during its warm-up; its compile time is printed). Before
timing, one step with dropout off must give the same loss on every variant.

    python bench/lazy_bert.py [--steps 10] [--warmup 3] [--threads 2] [--no-compile]
"""
import argparse
import copy
import statistics
import time

import torch

import habana_torch  # noqa: F401
import habana_torch.core as htcore


def build(seed=0):
    import transformers
    cfg = transformers.BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                  intermediate_size=1024, vocab_size=1000, max_position_embeddings=512,
                                  num_labels=2)
    torch.manual_seed(seed)
    return transformers.BertForSequenceClassification(cfg)


def make_step(base, ids, labels, device, lazy=None, compiled=False):
    model = copy.deepcopy(base).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    i, l = ids.to(device), labels.to(device)

    def fwd_bwd():
        loss = model(input_ids=i, labels=l).loss
        loss.backward()
        return loss

    run = torch.compile(fwd_bwd) if compiled else fwd_bwd

    def step():
        was = htcore.is_lazy()
        if lazy is not None:
            htcore._set_lazy_mode(lazy)
        try:
            opt.zero_grad(set_to_none=True)
            loss = run()
            htcore.mark_step()
            opt.step()
            htcore.mark_step()
            return loss.item()  # waits for the queued work
        finally:
            htcore._set_lazy_mode(was)

    return model, step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile variant")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    base = build()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 1000, (16, 128), generator=g)
    labels = torch.randint(0, 2, (16,), generator=g)
    variants = {
        "torch cpu eager": make_step(base, ids, labels, "cpu"),
        "hpu eager": make_step(base, ids, labels, "hpu", lazy=False),
        "hpu lazy": make_step(base, ids, labels, "hpu", lazy=True),
    }
    if not args.no_compile:
        variants["torch cpu compile (inductor)"] = make_step(base, ids, labels, "cpu", compiled=True)

    # Same loss everywhere with dropout off (the compiled variant compiles
    # here for eval mode; training mode compiles again in the warm-up).
    losses = {}
    for name, (model, step) in variants.items():
        model.eval()
        t = time.perf_counter()
        losses[name] = step()
        if "compile" in name:
            print(f"{name}: first (eval) step incl. compilation {time.perf_counter() - t:.1f} s", flush=True)
        model.train()
    ref = losses["torch cpu eager"]
    for name, loss in losses.items():
        if abs(loss - ref) > 1e-4 * max(1.0, abs(ref)):
            raise SystemExit(f"{name}: loss {loss} differs from the CPU's {ref}")

    times = {name: [] for name in variants}
    for i in range(args.warmup + args.steps):
        for name, (_, step) in variants.items():
            t = time.perf_counter()
            step()
            if i >= args.warmup:
                times[name].append(time.perf_counter() - t)
            elif i == 0 and "compile" in name:
                print(f"{name}: first training step incl. compilation {time.perf_counter() - t:.1f} s",
                      flush=True)
    med = {name: statistics.median(v) for name, v in times.items()}
    cpu = med["torch cpu eager"]
    print(f"BERT h256 L4 train step, batch 16 x 128, fp32, AdamW, {args.threads} threads, "
          f"median of {args.steps} (same loss on every variant)")
    print("| variant | step (ms) | time vs torch cpu eager |")
    print("|---|---:|---:|")
    for name, t in med.items():
        print(f"| {name} | {t * 1e3:.1f} | {t / cpu:.2f} |")
    print(f"hpu lazy / torch cpu eager: {med['hpu lazy'] / cpu:.2f} (target <= 0.8)")
    if "torch cpu compile (inductor)" in med:
        print(f"hpu lazy / torch cpu compile: {med['hpu lazy'] / med['torch cpu compile (inductor)']:.2f}")


if __name__ == "__main__":
    main()
