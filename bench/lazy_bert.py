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
from bert_step import base_variants, check_same_loss, make_step, median_times, parse_args


def main():
    args = parse_args("--no-compile", "skip the torch.compile variant")
    base, ids, labels, variants = base_variants()
    if not args.no_compile:
        variants["torch cpu compile (inductor)"] = make_step(base, ids, labels, "cpu", backend="inductor")

    variants = check_same_loss(variants)
    med = median_times(variants, args.warmup, args.steps, args.threads)
    cpu = med["torch cpu eager"]
    print(f"hpu lazy / torch cpu eager: {med['hpu lazy'] / cpu:.2f} (target <= 0.8)")
    if "torch cpu compile (inductor)" in med:
        print(f"hpu lazy / torch cpu compile: {med['hpu lazy'] / med['torch cpu compile (inductor)']:.2f}")


if __name__ == "__main__":
    main()
