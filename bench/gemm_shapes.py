"""GEMM shapes of the BERT benchmark step: hpu against torch
on the CPU, same process, both on the same thread count.

The autocast BERT step (bench/autocast_bert.py: hidden 256, 4 layers, 4
heads, intermediate 1024, batch 16 x seq 128 = 2048 tokens) spends its time
in bf16 linear / bmm of the shapes below, forward and backward, so these
matter more than square matrices. Each case runs both sides interleaved
after a warm-up (bench/ops.py's time_pair), best and median of N repetitions; "speed" = cpu time / hpu
time (= GFLOP/s ratio, > 1: hpu faster). The hpu result is checked against
the CPU result once, so a fast wrong kernel cannot pass.

    python bench/gemm_shapes.py [--dtype bf16|fp32|both] [--reps 20] [--threads 2] [--settle 0.01]
                                [--square] [--only SUBSTRING]
"""
import argparse
import statistics
import subprocess

import torch
import torch.nn.functional as F

import habana_torch  # noqa: F401
from ops import time_pair  # the same interleaved timing loop as bench/ops.py (this file's directory)

T, H, FF, B, S, NH, HD = 2048, 256, 1024, 16, 128, 4, 64


def cases(square):
    """(name, flops, make(dtype, device) -> callable)."""
    out = []

    def lin(m, k, n):  # x[m,k] @ W[n,k]^T + b  (nn.Linear forward: addmm, B transposed)
        def make(dt, dev, g):
            x, w, b = (torch.randn(m, k, generator=g), torch.randn(n, k, generator=g) / k ** 0.5,
                       torch.randn(n, generator=g))
            x, w, b = (t.to(dt).to(dev) for t in (x, w, b))
            return lambda: F.linear(x, w, b)
        out.append((f"linear fwd [{m}x{k}]@[{n}x{k}]^T", 2 * m * n * k, make))

    def dgrad(m, k, n):  # dy[m,n] @ W[n,k]  (linear backward, grad input: mm, plain layout)
        def make(dt, dev, g):
            dy, w = torch.randn(m, n, generator=g), torch.randn(n, k, generator=g) / n ** 0.5
            dy, w = (t.to(dt).to(dev) for t in (dy, w))
            return lambda: dy @ w
        out.append((f"linear dX [{m}x{n}]@[{n}x{k}]", 2 * m * n * k, make))

    def wgrad(m, k, n):  # dy[m,n]^T @ x[m,k]  (grad weight: A transposed, long k)
        def make(dt, dev, g):
            dy, x = torch.randn(m, n, generator=g) / m ** 0.5, torch.randn(m, k, generator=g)
            dy, x = (t.to(dt).to(dev) for t in (dy, x))
            return lambda: dy.t() @ x
        out.append((f"linear dW [{n}x{m}]^T@[{m}x{k}]", 2 * m * n * k, make))

    def bmm(name, bt, m, k, n, ta, tb):
        def make(dt, dev, g):
            a = torch.randn(bt, k, m, generator=g) if ta else torch.randn(bt, m, k, generator=g)
            b = torch.randn(bt, n, k, generator=g) if tb else torch.randn(bt, k, n, generator=g)
            a, b = a.to(dt).to(dev), (b / k ** 0.5).to(dt).to(dev)
            a = a.transpose(1, 2) if ta else a
            b = b.transpose(1, 2) if tb else b
            return lambda: torch.bmm(a, b)
        out.append((f"bmm {name} {bt}x[{m}x{k}]@[{k}x{n}]", 2 * bt * m * n * k, make))

    for k, n in ((H, H), (H, FF), (FF, H)):
        lin(T, k, n)
        dgrad(T, k, n)
        wgrad(T, k, n)
    bh = B * NH
    bmm("QK^T", bh, S, HD, S, False, True)
    bmm("PV", bh, S, S, HD, False, False)
    bmm("dP=dO V^T", bh, S, HD, S, False, True)
    bmm("dV=P^T dO", bh, S, S, HD, True, False)
    bmm("dQ=dS K", bh, S, S, HD, False, False)
    bmm("dK=dS^T Q", bh, S, S, HD, True, False)
    if square:
        for s in (256, 512, 1024, 2048):
            def make(dt, dev, g, s=s):
                a, b = (torch.randn(s, s, generator=g).to(dt).to(dev) for _ in range(2))
                return lambda: a @ b
            out.append((f"square {s}", 2 * s ** 3, make))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dtype", default="both", choices=("bf16", "fp32", "both"))
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--square", action="store_true")
    p.add_argument("--only", default="")
    p.add_argument("--settle", type=float, default=0.01, help="as bench/ops.py --settle (0: plain alternation)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    up = lambda: subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"threads={torch.get_num_threads()} torch={torch.__version__}  {up()}")
    dts = {"bf16": [torch.bfloat16], "fp32": [torch.float32],
           "both": [torch.bfloat16, torch.float32]}[args.dtype]
    total = {}
    for dt in dts:
        dn = "bf16" if dt == torch.bfloat16 else "fp32"
        for name, flops, make in cases(args.square):
            if args.only and args.only not in name:
                continue
            cpu_fn = make(dt, "cpu", torch.Generator().manual_seed(1))
            hpu_op = make(dt, "hpu", torch.Generator().manual_seed(1))
            tol = dict(rtol=1e-4, atol=1e-3) if dt == torch.float32 else dict(rtol=1.6e-2, atol=1e-2)
            torch.testing.assert_close(hpu_op().cpu(), cpu_fn(), **tol)

            def hpu_fn():
                hpu_op()
                torch.hpu.synchronize()

            tc, th = time_pair(cpu_fn, hpu_fn, args.reps, 0, args.settle)
            bc, bh = min(tc), min(th)
            mc, mh = statistics.median(tc), statistics.median(th)
            if not name.startswith("square"):
                s = total.setdefault(dn, [0.0, 0.0])
                s[0] += mc
                s[1] += mh
            print(f"{dn} {name:38s} cpu {bc * 1e6:8.1f} us ({flops / bc / 1e9:6.1f} GF/s)  "
                  f"hpu {bh * 1e6:8.1f} us ({flops / bh / 1e9:6.1f} GF/s)  speed best {bc / bh:5.2f}  "
                  f"median {mc / mh:5.2f}", flush=True)
    for dn, (c, h) in total.items():
        print(f"{dn} sum of BERT-shape medians: cpu {c * 1e3:.2f} ms, hpu {h * 1e3:.2f} ms, speed {c / h:.2f}")
    print(up())


if __name__ == "__main__":
    main()
