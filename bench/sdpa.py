"""Fused attention: torch.nn.functional.scaled_dot_product_attention on hpu
(the tiled kernel, csrc/kernels/attention.c) against the same call on the
CPU (torch's own fused CPU kernel), in one process, same thread count.

Cases: BERT-base self-attention (B=8, H=12, L=128, D=64, no mask), a
sequence of 512 (B=2, H=12, L=512, D=64) and a long causal one (B=1, H=16,
L=2048, D=64), fp32 and bf16, forward alone and forward + backward. The
sides run interleaved after a warm-up; the best of --reps runs per side is
printed with the median, and speed = t_cpu / t_hpu (> 1: the hpu is
faster). A third side, the same attention written out on the hpu as
matmul, softmax, matmul (what the fused kernel replaces; causal by
masked_fill), gives "vs unfused" = its best time over the fused kernel's.
Each timed call follows --settle seconds (at least one call) of untimed
calls of the same side, so that torch's OpenMP workers, which spin for
milliseconds after a parallel region, do not share the cores with the next
side's timed call (see bench/timing.py). The hpu result is checked against
the CPU once. hpu times end with torch.hpu.synchronize() (and mark_step in
lazy mode).

    python bench/sdpa.py [--reps 7] [--threads 2] [--modes lazy,eager] [--dtypes fp32,bf16] [--settle 0.03]
"""
import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F

import habana_torch  # noqa: F401
import habana_torch.core as htcore

CASES = {"bert": (8, 12, 128, 128, 64, False), "seq512": (2, 12, 512, 512, 64, False),
         "long-causal": (1, 16, 2048, 2048, 64, True)}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


def uptime():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def make(device, B, H, L, S, D, dt, grad):
    g = torch.Generator().manual_seed(0)
    ts = [torch.randn(B, H, n, D, generator=g).to(dt).to(device) for n in (L, S, S)]
    go = torch.randn(B, H, L, D, generator=g).to(dt).to(device)
    return [t.requires_grad_(grad) for t in ts], go


def unfused(q, k, v, is_causal=False):
    s = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if is_causal:
        L, S = s.shape[-2:]
        s = s.masked_fill(torch.ones(L, S, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return s.softmax(-1) @ v


def step(ts, go, causal, grad, fn=F.scaled_dot_product_attention):
    out = fn(*ts, is_causal=causal)
    if grad:
        out.backward(go)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--settle", type=float, default=0.03)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--modes", default="lazy,eager")
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)  # also sizes the hpu kernel pool
    print(f"torch {torch.__version__}, threads {args.threads}; load average before: {uptime()}")
    print(f"{'mode':5s} {'case':26s} {'cpu best':>9s} {'hpu best':>9s} {'cpu med':>9s} {'hpu med':>9s} {'speed':>6s}"
          f" {'unfused':>9s} {'vs unfused':>10s}")
    for mode in args.modes.split(","):
        lazy = mode == "lazy"
        htcore._set_lazy_mode(lazy)

        def sync():
            if lazy:
                htcore.mark_step()
            torch.hpu.synchronize()

        for case in args.cases.split(","):
            B, H, L, S, D, causal = CASES[case]
            for dname in args.dtypes.split(","):
                dt = DTYPES[dname]
                for grad in (False, True):
                    cts, cgo = make("cpu", B, H, L, S, D, dt, grad)
                    hts, hgo = make("hpu", B, H, L, S, D, dt, grad)
                    got = step(hts, hgo, causal, grad)
                    sync()
                    torch.testing.assert_close(got.cpu(), step(cts, cgo, causal, grad).detach(), **TOL[dt])

                    def run_cpu():
                        step(cts, cgo, causal, grad)

                    def run_hpu():
                        step(hts, hgo, causal, grad)
                        sync()

                    def run_unfused():
                        step(hts, hgo, causal, grad, fn=unfused)
                        sync()

                    tc, th, tu = [], [], []
                    for fn in (run_cpu, run_hpu, run_unfused):
                        fn()
                    for _ in range(args.reps):
                        for fn, ts in ((run_cpu, tc), (run_hpu, th), (run_unfused, tu)):
                            t = time.perf_counter()
                            fn()
                            while time.perf_counter() - t < args.settle:
                                fn()
                            t = time.perf_counter()
                            fn()
                            ts.append(time.perf_counter() - t)
                    name = f"{case} {dname} {'fwd+bwd' if grad else 'fwd'}"
                    print(f"{mode:5s} {name:26s} {min(tc) * 1e3:8.2f}ms {min(th) * 1e3:8.2f}ms "
                          f"{statistics.median(tc) * 1e3:8.2f}ms {statistics.median(th) * 1e3:8.2f}ms "
                          f"{min(tc) / min(th):6.2f} {min(tu) * 1e3:7.2f}ms {min(tu) / min(th):10.2f}", flush=True)
    print(f"load average after: {uptime()}")


if __name__ == "__main__":
    main()
