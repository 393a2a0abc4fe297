"""Eager "op, then synchronize" by size: hpu time / torch CPU time per op.

An eager op that is not tiny (over 4096 elements in all its operands) goes
to the card's queue; a synchronize right after it waits for it. This is the
step of a loop that reads a result back every op (and of bench/ops.py's
rows), where the hand-off to the queue is not hidden behind Python. The
kernels are the same at every size, so the ratio falls with the fixed cost
of the hand-off as the ops get smaller. The "add x40" row is the other use:
40 ops in a row, then one synchronize (times per op), where the queue lets
Python run ahead of the kernels.

Rounds alternate torch and hpu in this process; each round takes the 10th
percentile of `--reps` timed calls per side (after 30 ms of untimed calls), and the median over rounds of
the per-round speed (torch time / hpu time, > 1: hpu faster) is printed
with its range. Both sides use `--threads` threads.

    python bench/op_sync.py [--rows 16,64,256,1024] [--rounds 11] [--reps 300] [--threads 2] [--chain 40]
"""
import argparse
import statistics

import torch

import habana_torch  # noqa: F401
import habana_torch.core as htcore
from timing import p10


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="16,64,256,1024", help="rows of 1024 floats per operand")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--chain", type=int, default=40, help="ops per call in the 'add xN' row (one synchronize)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    htcore._set_lazy_mode(False)
    sync = torch.hpu.synchronize
    print(f"torch {torch.__version__}, {args.threads} threads, eager; speed = torch time / hpu time")
    print(f"{'op':8s} {'shape':>12s} {'torch us':>9s} {'hpu us':>8s}  speed (median [range] of {args.rounds} rounds)")
    for rows in [int(r) for r in args.rows.split(",")]:
        g = torch.Generator().manual_seed(rows)
        x, y = torch.randn(rows, 1024, generator=g), torch.randn(rows, 1024, generator=g)
        z = torch.empty_like(x)
        xh, yh, zh = x.to("hpu"), y.to("hpu"), z.to("hpu")
        n = args.chain

        def chain(a, b, c):
            for _ in range(n):
                torch.add(a, b, out=c)
            return c

        cases = [
            ("add out=", 1, lambda: torch.add(x, y, out=z), lambda: (torch.add(xh, yh, out=zh), sync())),
            ("amax", 1, lambda: x.amax(-1), lambda: (xh.amax(-1), sync())),
            ("softmax", 1, lambda: x.softmax(-1), lambda: (xh.softmax(-1), sync())),
            # a stream of ops with one synchronize at the end (times per op)
            (f"add x{n}", n, lambda: chain(x, y, z), lambda: (chain(xh, yh, zh), sync())),
        ]
        for name, ops, cpu_fn, hpu_fn in cases:
            torch.testing.assert_close(hpu_fn()[0].cpu(), cpu_fn(), rtol=1e-5, atol=1e-6)
            speeds, tc, th = [], [], []
            for _ in range(args.rounds):
                c, h = p10(cpu_fn, max(1, args.reps // ops)), p10(hpu_fn, max(1, args.reps // ops))
                tc.append(c / ops)
                th.append(h / ops)
                speeds.append(c / h)
            print(f"{name:8s} {f'[{rows}x1024]':>12s} {statistics.median(tc) * 1e6:9.1f} "
                  f"{statistics.median(th) * 1e6:8.1f}  {statistics.median(speeds):.2f} "
                  f"[{min(speeds):.2f}-{max(speeds):.2f}]", flush=True)


if __name__ == "__main__":
    main()
