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
from bert_step import base_variants, check_same_loss, make_step, median_times, parse_args


def main():
    args = parse_args("--no-inductor", "skip torch.compile with inductor on the CPU")
    base, ids, labels, variants = base_variants()
    variants["hpu compiled (eager mode)"] = make_step(base, ids, labels, "hpu", lazy=False, backend="hpu_backend")
    variants["hpu compiled, AdamW compiled too"] = make_step(base, ids, labels, "hpu", lazy=False,
                                                             backend="hpu_backend", compile_opt=True)
    if not args.no_inductor:
        variants["torch cpu compile (inductor)"] = make_step(base, ids, labels, "cpu", backend="inductor")

    variants = check_same_loss(variants)
    med = median_times(variants, args.warmup, args.steps, args.threads)
    cpu = med["torch cpu eager"]
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
