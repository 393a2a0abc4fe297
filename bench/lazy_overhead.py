"""Host time per op on a graph-cache hit (lazy mode) vs torch CPU eager's
per-op time, for a loop of tiny adds (16 floats: all overhead, no math).
Target: lazy host time per recorded op <= torch CPU's.

The hpu figures are host time: the loop and mark_step (recording, hashing,
the recipe-cache lookup, the launch); the graph then runs on the card's
queue. Best of --reps, rounds interleaved, all in this process.

    python bench/lazy_overhead.py [--ops 200] [--reps 30] [--rounds 5] [--threads 2]
"""
import argparse
import time

import torch

import habana_torch  # noqa: F401
import habana_torch.core as htcore
from habana_torch.hpu.metrics import metric_global


def per_op(device, n_ops, reps, lazy=None):
    was = htcore.is_lazy()
    if lazy is not None:
        htcore._set_lazy_mode(lazy)
    try:
        x = torch.randn(16, device=device)
        y = torch.randn(16, device=device)
        best = float("inf")
        for _ in range(reps):
            if device == "hpu":
                torch.hpu.synchronize()
            t = time.perf_counter()
            z = x
            for _ in range(n_ops):
                z = z + y
            if device == "hpu":
                htcore.mark_step()
            best = min(best, time.perf_counter() - t)
        if device == "hpu":
            torch.hpu.synchronize()
        return best / n_ops
    finally:
        htcore._set_lazy_mode(was)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=200)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    best = {"torch cpu eager": float("inf"), "hpu eager (host)": float("inf"),
            "hpu lazy, cache hit (host)": float("inf")}
    per_op("hpu", args.ops, 2, lazy=True)  # compile the recipe once
    compiled = dict(metric_global("graph_compilation").stats())["TotalNumber"]
    for _ in range(args.rounds):
        best["torch cpu eager"] = min(best["torch cpu eager"], per_op("cpu", args.ops, args.reps))
        best["hpu eager (host)"] = min(best["hpu eager (host)"], per_op("hpu", args.ops, args.reps, lazy=False))
        best["hpu lazy, cache hit (host)"] = min(best["hpu lazy, cache hit (host)"],
                                                 per_op("hpu", args.ops, args.reps, lazy=True))
    recompiled = dict(metric_global("graph_compilation").stats())["TotalNumber"] - compiled
    cpu = best["torch cpu eager"]
    print(f"{args.ops} tiny adds per step, best of {args.reps} x {args.rounds} rounds, {args.threads} threads; "
          f"compilations while timing: {recompiled}")
    print("| run | us per op | vs torch cpu eager |")
    print("|---|---:|---:|")
    for name, t in best.items():
        print(f"| {name} | {t * 1e6:.2f} | {t / cpu:.2f} |")
    print(f"lazy cache-hit host time per op / torch cpu: {best['hpu lazy, cache hit (host)'] / cpu:.2f} "
          f"(target <= 1.0)")


if __name__ == "__main__":
    main()
