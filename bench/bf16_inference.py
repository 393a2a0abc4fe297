"""BERT encoder inference in bfloat16 (the model cast with .to(bfloat16), no
autocast): hpu lazy and hpu eager against torch CPU eager, in this process.

A small BERT built from a config (nothing downloaded; h256, 4 layers, 4
heads, eager attention, so its matmul, softmax and elementwise ops are
separate ops that lazy mode fuses), synthetic tokens. The three sides run
round robin, --rounds rounds of --reps forward passes each after a warm-up;
prints each side's best and median forward time and speed = torch's best
time / the side's best (above 1: faster than torch). The hpu outputs are
checked against the CPU's first (bf16 tolerance).

    python bench/bf16_inference.py [--batch 8] [--seq 128] [--reps 10] [--rounds 2] [--threads 2]
"""
import argparse
import statistics
import time

import torch
import transformers

import habana_torch  # noqa: F401
import habana_torch.core as htcore


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = transformers.BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                  intermediate_size=1024, vocab_size=1000, attn_implementation="eager")
    cpu_model = transformers.BertModel(cfg).eval().to(torch.bfloat16)
    hpu_model = transformers.BertModel(cfg).eval().to(torch.bfloat16)
    hpu_model.load_state_dict(cpu_model.state_dict())
    hpu_model = hpu_model.to("hpu")
    ids = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), generator=torch.Generator().manual_seed(1))
    ids_h = ids.to("hpu")

    def cpu_side():
        with torch.no_grad():
            return cpu_model(ids).last_hidden_state

    def hpu_side(lazy):
        def run():
            with torch.no_grad():
                out = hpu_model(ids_h).last_hidden_state
            if lazy:
                htcore.mark_step()
            torch.hpu.synchronize()
            return out
        return run

    sides = {"torch cpu eager": (cpu_side, None), "hpu lazy": (hpu_side(True), True),
             "hpu eager": (hpu_side(False), False)}
    want = cpu_side().float()
    for name, (fn, lazy) in sides.items():
        if lazy is not None:
            htcore._set_lazy_mode(lazy)
            torch.testing.assert_close(fn().cpu().float(), want, rtol=5e-2, atol=5e-2,
                                       msg=lambda m, n=name: f"{n}: {m}")
    times = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, (fn, lazy) in sides.items():
            if lazy is not None:
                htcore._set_lazy_mode(lazy)
            for _ in range(3):
                fn()
            for _ in range(args.reps):
                t = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t)
    print(f"BERT h256 L4 bf16 inference, batch {args.batch} x {args.seq}, {args.threads} threads, "
          f"torch {torch.__version__}")
    base = min(times["torch cpu eager"])
    for name, ts in times.items():
        print(f"  {name:16s} best {min(ts) * 1e3:7.2f} ms  median {statistics.median(ts) * 1e3:7.2f} ms"
              f"  speed {base / min(ts):.2f}")


if __name__ == "__main__":
    main()
