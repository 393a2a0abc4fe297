"""Convolutions of ResNet-50 at batch 8 (224x224 input), or with
`--shapes cifar` those of examples/train_resnet.py's CIFAR ResNet-18
(width 16, 32x32 input) at its batch of 64: torch's CPU
convolution (oneDNN) against hpu's (csrc/kernels/conv.c), forward and
backward (dx and dW; dbias too where the layer has one), float32; then
the same model's batch norms (training mode: batch statistics, forward
and backward) and, for ResNet-50, its 3x3/2 max pool. Eager mode, op +
synchronize, both sides in this process, timed by bench/ops.py's
time_pair (interleaved, with a lead-in of the same side); prints
torch-time / hpu-time by best and by median (above 1: hpu faster) and,
for the convolutions, the hpu's rate as a share of the machine's fp32 FMA
peak (bench/ops.py's cpu_info: one core's measured FMA rate x threads),
counting the direct form's multiply-adds (2 x N x Co x C x KH x KW x OH
x OW flops forward, twice that backward), so Winograd rows can pass 100%.

    python bench/conv.py [--reps 5] [--budget 2.0] [--threads 2] [--batch 8]
    python bench/conv.py --shapes cifar [--batch 64]
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
from ops import cpu_info, time_pair  # noqa: E402

# (name, C, H, Co, kernel, stride, padding): ResNet-50's distinct shapes
SHAPES = [
    ("stem 7x7/2 3->64 @224", 3, 224, 64, 7, 2, 3),
    ("1x1 64->64 @56", 64, 56, 64, 1, 1, 0),
    ("3x3 64->64 @56", 64, 56, 64, 3, 1, 1),
    ("1x1 64->256 @56", 64, 56, 256, 1, 1, 0),
    ("3x3/2 128->128 @56", 128, 56, 128, 3, 2, 1),
    ("3x3 256->256 @14", 256, 14, 256, 3, 1, 1),
    ("1x1/2 1024->2048 @14", 1024, 14, 2048, 1, 2, 0),
    ("3x3 512->512 @7", 512, 7, 512, 3, 1, 1),
]

# examples/train_resnet.py's default model: CIFAR ResNet-18 at width 16
CIFAR_SHAPES = [
    ("stem 3x3 3->16 @32", 3, 32, 16, 3, 1, 1),
    ("3x3 16->16 @32", 16, 32, 16, 3, 1, 1),
    ("3x3/2 16->32 @32", 16, 32, 32, 3, 2, 1),
    ("1x1/2 16->32 @32", 16, 32, 32, 1, 2, 0),
    ("3x3 32->32 @16", 32, 16, 32, 3, 1, 1),
    ("3x3/2 32->64 @16", 32, 16, 64, 3, 2, 1),
    ("1x1/2 32->64 @16", 32, 16, 64, 1, 2, 0),
    ("3x3 64->64 @8", 64, 8, 64, 3, 1, 1),
    ("3x3/2 64->128 @8", 64, 8, 128, 3, 2, 1),
    ("1x1/2 64->128 @8", 64, 8, 128, 1, 2, 0),
    ("3x3 128->128 @4", 128, 4, 128, 3, 1, 1),
]


# (name, C, H): the batch norms' distinct shapes
BN_SHAPES = [("bn 64 @112", 64, 112), ("bn 256 @56", 256, 56), ("bn 512 @28", 512, 28),
             ("bn 1024 @14", 1024, 14), ("bn 2048 @7", 2048, 7)]
CIFAR_BN_SHAPES = [("bn 16 @32", 16, 32), ("bn 32 @16", 32, 16), ("bn 64 @8", 64, 8), ("bn 128 @4", 128, 4)]
# (name, C, H): ResNet-50's max pool, 3x3 / 2, padding 1
POOL_SHAPES = [("max pool 3x3/2 64 @112", 64, 112)]


def other_cases(batch, bn_shapes, pool_shapes, g):
    """(name, {pass: (fn, cpu args, hpu args)}) of the batch norms and pools."""
    for name, C, H in bn_shapes:
        x = torch.randn(batch, C, H, H, generator=g)
        w, b = torch.rand(C, generator=g) + 0.5, torch.randn(C, generator=g)
        _, mean, invstd = torch.ops.aten.native_batch_norm(x, w, b, None, None, True, 0.1, 1e-5)
        dy = torch.randn(x.shape, generator=g)
        fwd = lambda a, ww, bb: torch.ops.aten.native_batch_norm(a, ww, bb, None, None, True, 0.1, 1e-5)
        bwd = lambda d, a, ww, m, r: torch.ops.aten.native_batch_norm_backward(
            d, a, ww, None, None, m, r, True, 1e-5, [True, True, True])
        cpu_b, hpu_b = (dy, x, w, mean, invstd), tuple(t.to("hpu") for t in (dy, x, w, mean, invstd))
        yield name, {"forward": (fwd, (x, w, b), tuple(t.to("hpu") for t in (x, w, b))),
                     "backward": (bwd, cpu_b, hpu_b)}
    for name, C, H in pool_shapes:
        x = torch.randn(batch, C, H, H, generator=g)
        y, idx = torch.ops.aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1])
        dy = torch.randn(y.shape, generator=g)
        xh = x.to("hpu")
        idxh = torch.ops.aten.max_pool2d_with_indices(xh, [3, 3], [2, 2], [1, 1])[1]
        fwd = lambda a: torch.ops.aten.max_pool2d_with_indices(a, [3, 3], [2, 2], [1, 1])
        bwd = lambda d, a, i: torch.ops.aten.max_pool2d_with_indices_backward(
            d, a, [3, 3], [2, 2], [1, 1], [1, 1], False, i)
        yield name, {"forward": (fwd, (x,), (xh,)), "backward": (bwd, (dy, x, idx), (dy.to("hpu"), xh, idxh))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--budget", type=float, default=2.0, help="seconds per case")
    ap.add_argument("--settle", type=float, default=0.03)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=None, help="8 for resnet50, 64 for cifar")
    ap.add_argument("--shapes", choices=["resnet50", "cifar"], default="resnet50")
    args = ap.parse_args()
    shapes = SHAPES if args.shapes == "resnet50" else CIFAR_SHAPES
    if args.batch is None:
        args.batch = 8 if args.shapes == "resnet50" else 64
    torch.set_num_threads(args.threads)
    htcore._set_lazy_mode(False)
    g = torch.Generator().manual_seed(0)
    info = cpu_info()
    print(f"# {info['model']}; fp32 peak {info['peak_fp32']:.0f} GFLOP/s at {info['threads']} threads")
    print(f"{'conv (batch %d, fp32)' % args.batch:34s} {'pass':8s} {'torch ms':>9s} {'hpu ms':>9s} "
          f"{'best':>6s} {'median':>7s} {'% peak':>7s}")
    for name, C, H, Co, k, s, p in shapes:
        x = torch.randn(args.batch, C, H, H, generator=g)
        w = torch.randn(Co, C, k, k, generator=g) * (2.0 / (C * k * k)) ** 0.5
        dy = torch.randn(F.conv2d(x[:1], w, stride=s, padding=p).shape[1:], generator=g).expand(
            args.batch, -1, -1, -1).contiguous()
        xh, wh, dyh = x.to("hpu"), w.to("hpu"), dy.to("hpu")
        cases = {
            "forward": (lambda a, b: F.conv2d(a, b, stride=s, padding=p), (x, w), (xh, wh)),
            "backward": (lambda d, a, b: torch.ops.aten.convolution_backward(
                d, a, b, None, [s, s], [p, p], [1, 1], False, [0, 0], 1, [True, True, False]),
                (dy, x, w), (dyh, xh, wh)),
        }
        oh = (H + 2 * p - k) // s + 1
        flops = 2.0 * args.batch * Co * C * k * k * oh * oh
        run_cases(name, cases, args, {"forward": flops, "backward": 2 * flops}, info["peak_fp32"])
    bn_shapes, pool_shapes = (BN_SHAPES, POOL_SHAPES) if args.shapes == "resnet50" else (CIFAR_BN_SHAPES, [])
    for name, cases in other_cases(args.batch, bn_shapes, pool_shapes, g):
        run_cases(name, cases, args)


def run_cases(name, cases, args, flops=None, peak=None):
    for kind, (fn, ca, ha) in cases.items():
        def hpu_fn():
            fn(*ha)
            torch.hpu.synchronize()

        tc, th = time_pair(lambda: fn(*ca), hpu_fn, args.reps, args.budget, args.settle)
        share = f"{100 * flops[kind] / min(th) / 1e9 / peak:6.0f}%" if flops and peak else ""
        print(f"{name:34s} {kind:8s} {min(tc) * 1e3:9.2f} {min(th) * 1e3:9.2f} {min(tc) / min(th):6.2f} "
              f"{statistics.median(tc) / statistics.median(th):7.2f} {share}", flush=True)


if __name__ == "__main__":
    main()
