"""BERT training step (h256 L4, batch 16, seq 128, fp32, AdamW) under
torch.compile(backend="hpu_backend") in eager mode, against eager hpu, lazy
hpu, torch CPU eager and torch.compile with inductor on the CPU.
Targets (issue 32): compiled hpu <= lazy hpu, <= 0.75x torch CPU eager,
<= 0.9x inductor CPU.

The model's forward and backward are compiled; the optimizer step runs as
in the other variants (op by op in eager mode, recorded in lazy mode),
except in the variant that compiles opt.step as well. All
variants run in this process, round robin, on --threads threads; the figure
is the median step time after warm-up (compiled variants compile during the
checks and the warm-up; their compile time is printed). Before timing, one
step with dropout off must give the same loss on every variant.

    python bench/compile_bert.py [--steps 10] [--warmup 3] [--threads 2] [--no-inductor]
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
                                  num_labels=2, problem_type="single_label_classification")
    torch.manual_seed(seed)
    return transformers.BertForSequenceClassification(cfg)


def make_step(base, ids, labels, device, lazy=None, backend=None, compile_opt=False):
    model = copy.deepcopy(base).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    i, l = ids.to(device), labels.to(device)

    def fwd_bwd():
        loss = model(input_ids=i, labels=l).loss
        loss.backward()
        return loss

    run = torch.compile(fwd_bwd, backend=backend) if backend else fwd_bwd
    opt_step = torch.compile(opt.step, backend=backend) if compile_opt else opt.step

    def step():
        was = htcore.is_lazy()
        if lazy is not None:
            htcore._set_lazy_mode(lazy)
        try:
            opt.zero_grad(set_to_none=True)
            loss = run()
            htcore.mark_step()
            opt_step()
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
    ap.add_argument("--no-inductor", action="store_true", help="skip torch.compile with inductor on the CPU")
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
        "hpu compiled (eager mode)": make_step(base, ids, labels, "hpu", lazy=False, backend="hpu_backend"),
        "hpu compiled, AdamW compiled too": make_step(base, ids, labels, "hpu", lazy=False, backend="hpu_backend",
                                                      compile_opt=True),
    }
    if not args.no_inductor:
        variants["torch cpu compile (inductor)"] = make_step(base, ids, labels, "cpu", backend="inductor")

    losses = {}
    for name, (model, step) in variants.items():
        model.eval()
        t = time.perf_counter()
        try:
            losses[name] = step()
        except Exception as e:  # inductor needs a working C++ compiler
            if "inductor" not in name:
                raise
            print(f"{name}: cannot run here ({type(e).__name__}: {str(e).splitlines()[0][:200]}); skipped")
            continue
        if "compile" in name:
            print(f"{name}: first (eval) step incl. compilation {time.perf_counter() - t:.1f} s", flush=True)
        model.train()
    variants = {name: v for name, v in variants.items() if name in losses}
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
    comp = med["hpu compiled (eager mode)"]
    print(f"compiled hpu / lazy hpu: {comp / med['hpu lazy']:.2f} (target <= 1.0)")
    print(f"compiled hpu / eager hpu: {comp / med['hpu eager']:.2f}")
    print(f"compiled hpu / torch cpu eager: {comp / cpu:.2f} (target <= 0.75)")
    if "torch cpu compile (inductor)" in med:
        print(f"compiled hpu / inductor cpu: {comp / med['torch cpu compile (inductor)']:.2f} (target <= 0.9)")
    both = med["hpu compiled, AdamW compiled too"]
    print(f"with AdamW compiled too: / lazy hpu {both / med['hpu lazy']:.2f}, / torch cpu eager {both / cpu:.2f}")


if __name__ == "__main__":
    main()
