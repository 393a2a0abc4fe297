"""Ops outside bench/ops.py's table that hpu runs natively: group_norm
forward and backward, the activations with their own kernels, the losses'
elementwise steps, flip / roll, mse_loss and logcumsumexp. Eager mode, op +
synchronize, torch CPU in the same process, timed by bench/ops.py's
time_pair (interleaved, each timed call after a 30 ms lead-in of the same
side, so torch's spinning OpenMP workers do not hold the cores during an
hpu call); prints torch-time / hpu-time by best and by median (above 1:
hpu faster). No targets: this tells where these ops stand.

    python bench/ops_extra.py [--reps 10] [--budget 1.0] [--threads 2]
"""
import argparse
import pathlib
import statistics
import sys

import torch
import torch.nn.functional as F

import habana_torch  # noqa: F401
import habana_torch.core as htcore

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ops import time_pair  # noqa: E402


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
    out["smooth_l1_loss 1M fp32"] = (lambda a, b: F.smooth_l1_loss(a, b, beta=0.5), [x1m, d1m])
    out["huber_loss 1M fp32"] = (lambda a, b: F.huber_loss(a, b, delta=0.5), [x1m, d1m])
    out["smooth_l1 backward 1M fp32"] = (
        lambda g_, a, b: torch.ops.aten.smooth_l1_loss_backward(g_, a, b, 0, 0.5), [x1m, d1m, x1m])
    p1m, t1m = torch.sigmoid(x1m), torch.rand(1 << 20, generator=g)
    out["binary_cross_entropy 1M fp32"] = (lambda p_, t_: F.binary_cross_entropy(p_, t_), [p1m, t1m])
    out["binary_cross_entropy backward 1M fp32"] = (
        lambda g_, p_, t_: torch.ops.aten.binary_cross_entropy_backward(g_, p_, t_, None, 0), [d1m, p1m, t1m])
    out["softshrink 1M fp32"] = (lambda t: F.softshrink(t, 0.5), [x1m])
    out["glu [1024x2048] fp32"] = (lambda t: F.glu(t, -1), [torch.cat([x1m, d1m]).view(1024, 2048)])
    out["glu backward [1024x2048] fp32"] = (
        lambda g_, t: torch.ops.aten.glu_backward(g_, t, -1), [x1m.view(1024, 1024), torch.cat([x1m, d1m]).view(1024, 2048)])
    m = x1m.view(1024, 1024)
    out["flip(1) [1024x1024]"] = (lambda t: t.flip(1), [m])
    out["roll(5, 1) [1024x1024]"] = (lambda t: t.roll(5, 1), [m])
    out["logcumsumexp(1) [1024x1024] fp32"] = (lambda t: torch.logcumsumexp(t, 1), [m])
    out["logcumsumexp(1) [1024x1024] bf16"] = (lambda t: torch.logcumsumexp(t, 1), [m.bfloat16()])
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
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--budget", type=float, default=1.0, help="seconds per op")
    ap.add_argument("--settle", type=float, default=0.03)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    htcore._set_lazy_mode(False)
    print(f"{'op':42s} {'torch ms':>9s} {'hpu ms':>9s} {'best':>6s} {'median':>7s}")
    for name, (fn, cpu_args) in cases().items():
        hpu_args = [a.to("hpu") for a in cpu_args]

        def hpu_fn():
            fn(*hpu_args)
            torch.hpu.synchronize()

        tc, th = time_pair(lambda: fn(*cpu_args), hpu_fn, args.reps, args.budget, args.settle)
        print(f"{name:42s} {min(tc) * 1e3:9.3f} {min(th) * 1e3:9.3f} {min(tc) / min(th):6.2f} "
              f"{statistics.median(tc) / statistics.median(th):7.2f}", flush=True)


if __name__ == "__main__":
    main()
