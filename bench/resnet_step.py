"""ResNet training steps, torch CPU eager against hpu (lazy and eager mode),
interleaved in one process: forward, cross-entropy, backward, SGD with
momentum 0.9 and weight decay, on one fixed synthetic batch. Prints the
median step time of each side and torch-time / hpu-time (above 1: hpu
faster). Every side starts from the same weights; the first (untimed)
step's loss is checked against the CPU's.

Models (`--models`, comma-separated):
  cifar18   examples/train_resnet.py's default: CIFAR ResNet-18, width 16,
            batch 64, 32x32 (3x3 stem, no max pool)
  cifar50   the same script's --model resnet50 (Bottleneck), width 16
  resnet18  ResNet-18 at 224x224, batch 16 (7x7/2 stem + 3x3/2 max pool,
            widths 64..512), as torchvision builds it
  resnet50  ResNet-50 at 224x224, batch 16

    python bench/resnet_step.py [--models cifar18,resnet18] [--modes lazy,eager]
                                [--steps 10] [--batch N] [--threads 2] [--settle 0.05]
"""
import argparse
import importlib.util
import pathlib
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import habana_torch  # noqa: F401
import habana_torch.core as htcore

ROOT = pathlib.Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("train_resnet", ROOT / "examples" / "train_resnet.py")
tr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tr)

# name: (block, layers, width, image size, default batch, ImageNet stem)
MODELS = {
    "cifar18": (tr.BasicBlock, [2, 2, 2, 2], 16, 32, 64, False),
    "cifar50": (tr.Bottleneck, [3, 4, 6, 3], 16, 32, 64, False),
    "resnet18": (tr.BasicBlock, [2, 2, 2, 2], 64, 224, 16, True),
    "resnet50": (tr.Bottleneck, [3, 4, 6, 3], 64, 224, 16, True),
}


def build(name):
    block, layers, width, _, _, imagenet = MODELS[name]
    torch.manual_seed(0)
    model = tr.ResNet(block, layers, width)
    if imagenet:  # torchvision's stem: 7x7/2 convolution, then a 3x3/2 max pool
        model.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                                   nn.MaxPool2d(3, 2, 1))
    return model


def make_side(model, device, mode, x, y):
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    x, y = x.to(device), y.to(device)

    def step():
        if mode is not None:
            htcore._set_lazy_mode(mode == "lazy")
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        if device == "hpu":
            htcore.mark_step()
        opt.step()
        if device == "hpu":
            htcore.mark_step()
            torch.hpu.synchronize()
        return loss.item()

    return model, step


def check_first_loss(name, losses):
    """The first step's loss, from the same weights and batch, agrees with the
    CPU's. (Gradients are compared against the CPU by
    tests/python/test_train_resnet.py; the weights cannot be compared after a
    few steps here: these models on one random batch are ill-conditioned
    enough that the CPU's own float32 gradients differ from float64 by a few
    percent.)"""
    ref = losses["torch"]
    for m, v in losses.items():
        if abs(v - ref) > 1e-4 * abs(ref):
            raise SystemExit(f"{name} ({m}): first loss {v} differs from the CPU's {ref}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="cifar18,resnet18")
    ap.add_argument("--modes", default="lazy,eager")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per side (after 2 untimed)")
    ap.add_argument("--batch", type=int, default=None, help="default: the model's (64 cifar, 16 at 224)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--settle", type=float, default=0.05, help="idle seconds before each timed step")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in ("lazy", "eager"):
            raise SystemExit(f"--modes: unknown mode {m!r} (lazy, eager)")
    print(f"{'model':10s} {'batch':>5s} {'torch ms':>9s} " + " ".join(f"{m + ' ms':>9s} {'speed':>6s}" for m in modes))
    for name in args.models.split(","):
        if name not in MODELS:
            raise SystemExit(f"--models: unknown model {name!r} ({', '.join(MODELS)})")
        _, _, _, size, batch, _ = MODELS[name]
        batch = args.batch or batch
        g = torch.Generator().manual_seed(1)
        x = torch.randn(batch, 3, size, size, generator=g)
        y = torch.randint(0, tr.NUM_CLASSES, (batch,), generator=g)
        sides = {"torch": make_side(build(name), "cpu", None, x, y)}
        for m in modes:
            sides[m] = make_side(build(name), "hpu", m, x, y)
        times = {k: [] for k in sides}
        # untimed: lazy mode compiles its graphs here
        check_first_loss(name, {k: step() for k, (_, step) in sides.items()})
        for k, (_, step) in sides.items():
            step()
        for _ in range(args.steps):  # round robin, so drift hits every side alike
            for k, (_, step) in sides.items():
                # torch's OpenMP workers spin for several ms after a parallel
                # region, and so do ours: let the other side's threads sleep
                time.sleep(args.settle)
                t0 = time.perf_counter()
                step()
                times[k].append(time.perf_counter() - t0)
        med = {k: statistics.median(v) for k, v in times.items()}
        row = f"{name:10s} {batch:5d} {med['torch'] * 1e3:9.1f} "
        row += " ".join(f"{med[m] * 1e3:9.1f} {med['torch'] / med[m]:6.2f}" for m in modes)
        print(row, flush=True)


if __name__ == "__main__":
    main()
