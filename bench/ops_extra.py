"""Ops outside the issue's speed table that hpu runs natively since session
18 (before, most ran as counted CPU fallbacks or, for group_norm, as
PyTorch's decomposition): group_norm forward and backward, the activations
with their own kernels, flip / roll and mse_loss. Eager mode, op + synchronize,
torch CPU in the same process, rounds interleaved; prints the median
ratio torch-time / hpu-time (above 1: hpu faster). No targets: this tells
where these ops stand.

    python bench/ops_extra.py [--rounds 5] [--threads 2]
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import habana_torch  # noqa: F401
import habana_torch.core as htcore


def timed(fn, sync, reps):
    for _ in range(3):
        fn()
    sync()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def cases():
    g = torch.Generator().manual_seed(0)
    x1m = torch.randn(1 << 20, generator=g)
    d1m = torch.randn(1 << 20, generator=g)
    out = {}
    for name, f in [("elu", F.elu), ("softplus", F.softplus), ("hardswish", F.hardswish),
                    ("mish", F.mish), ("logsigmoid", F.logsigmoid)]:
        out[f"{name} 1M fp32"] = (lambda t, f=f: f(t), [x1m])
    out["mish backward 1M fp32"] = (lambda g_, t: torch.ops.aten.mish_backward(g_, t), [d1m, x1m])
    out["mse_loss 1M fp32"] = (lambda a, b: F.mse_loss(a, b), [x1m, d1m])
    m = x1m.view(1024, 1024)
    out["flip(1) [1024x1024]"] = (lambda t: t.flip(1), [m])
    out["roll(5, 1) [1024x1024]"] = (lambda t: t.roll(5, 1), [m])
    for dt in (torch.float32, torch.bfloat16):
        tag = "fp32" if dt == torch.float32 else "bf16"
        x = torch.randn(2, 320, 64, 64, generator=g).to(dt)
        w = torch.randn(320, generator=g).to(dt)
        b = torch.randn(320, generator=g).to(dt)
        out[f"group_norm [2,320,64,64] G32 {tag}"] = (lambda t, w_, b_: F.group_norm(t, 32, w_, b_), [x, w, b])
        dy = torch.randn(2, 320, 4096, generator=g).to(dt)
        _, mean, rstd = torch.native_group_norm(x, w, b, 2, 320, 4096, 32, 1e-5)
        out[f"group_norm backward [2,320,64,64] {tag}"] = (
            lambda dy_, x_, m_, r_, w_: torch.ops.aten.native_group_norm_backward(
                dy_, x_, m_, r_, w_, 2, 320, 4096, 32, [True, True, True]),
            [dy, x.view(2, 320, 4096), mean, rstd, w])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    htcore._set_lazy_mode(False)
    sync = torch.hpu.synchronize
    print(f"{'op':42s} {'torch ms':>9s} {'hpu ms':>9s} {'ratio':>6s}  [min-max]")
    for name, (fn, cpu_args) in cases().items():
        hpu_args = [a.to("hpu") for a in cpu_args]
        ratios, tc, th = [], [], []
        for _ in range(args.rounds):
            c = timed(lambda: fn(*cpu_args), lambda: None, args.reps)
            h = timed(lambda: fn(*hpu_args), sync, args.reps)
            tc.append(c)
            th.append(h)
            ratios.append(c / h)
        print(f"{name:42s} {statistics.median(tc) * 1e3:9.3f} {statistics.median(th) * 1e3:9.3f} "
              f"{statistics.median(ratios):6.2f}  [{min(ratios):.2f}-{max(ratios):.2f}]", flush=True)


if __name__ == "__main__":
    main()
