"""Train a CIFAR ResNet on 32x32 images, written as a Gaudi script.

    python examples/train_resnet.py                    (hpu, lazy mode)
    python examples/train_resnet.py --bf16             (bf16 autocast)
    python examples/train_resnet.py --device cpu       (the same run on the CPU)

The model is a CIFAR ResNet-18 (3x3 stem, no max pool; torchvision's blocks)
or a ResNet-50 with --model resnet50, defined here: nothing to install or
download. --width scales every stage (64: the real ResNet-18).

The data is made here, from a fixed seed, in about a second: 32x32 RGB images of 10 classes, each class one of 5 patterns
(horizontal stripes, vertical stripes, checkerboard, a disk, a ring) in one
of 2 colour palettes, with random frequency, phase, position, colour jitter
and Gaussian noise. Every class survives a horizontal flip, so the training
pipeline (a torch.utils.data.DataLoader doing CIFAR's random crop with
4-pixel padding and random horizontal flip) keeps labels true.

The loop is the one Gaudi's docs show: model and batches .to("hpu"),
htcore.mark_step() after loss.backward() and after optimizer.step() (lazy
mode: each ends one graph), torch.autocast("hpu", dtype=torch.bfloat16) with
--bf16. The last partial batch is dropped, so every step has the same shapes
and lazy mode compiles its graphs once.
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import habana_frameworks.torch.core as htcore
import habana_torch

NUM_CLASSES = 10
DATA_SEED = 1234  # the data set is fixed; --seed moves the weights and the batch order


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="resnet18", choices=["resnet18", "resnet50"], help="default resnet18")
    p.add_argument("--width", type=int, default=16,
                   help="channels of the first stage, doubled at each of the next three (64: the real "
                        "ResNet-18; default 16, which trains in about a minute on 2 cores)")
    p.add_argument("--train_size", type=int, default=4096, help="training images (default 4096)")
    p.add_argument("--test_size", type=int, default=1024, help="test images (default 1024)")
    p.add_argument("--epochs", type=int, default=2, help="default 2")
    p.add_argument("--max_steps", type=int, default=None, help="stop after N training steps")
    p.add_argument("--batch_size", type=int, default=64, help="default 64")
    p.add_argument("--lr", type=float, default=0.05,
                   help="SGD's peak rate (momentum 0.9, weight decay 5e-4), cosine decay to 0 (default 0.05)")
    p.add_argument("--seed", type=int, default=42, help="seeds the weights, the batch order and the augmentation")
    p.add_argument("--num_workers", type=int, default=0, help="DataLoader worker processes (default 0)")
    p.add_argument("--device", default="hpu", choices=["hpu", "cpu"], help="default hpu")
    p.add_argument("--bf16", action="store_true", help="bf16 mixed precision (torch.autocast)")
    p.add_argument("--disable_tqdm", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    for name in ("width", "train_size", "test_size", "epochs", "batch_size"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1, not {getattr(args, name)}")
    for name in ("max_steps",):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1, not {getattr(args, name)}")
    if args.num_workers < 0:
        p.error(f"--num_workers must be 0 or more, not {args.num_workers}")
    if not (args.lr > 0 and math.isfinite(args.lr)):
        p.error(f"--lr must be a positive number, not {args.lr}")
    if args.batch_size > args.train_size:
        p.error(f"--batch_size {args.batch_size} is larger than --train_size {args.train_size}: "
                "no full batch to train on")
    if args.device == "hpu" and not torch.hpu.is_available():
        p.error("--device hpu: no hpu card is visible (HABANA_VISIBLE_DEVICES?); --device cpu trains on the CPU")
    return args


# ------------------------------------------------------------------- data

PALETTES = torch.tensor([[[1.0, 0.3, 0.2], [0.1, 0.4, 1.0]],  # palette 0: red on blue
                         [[0.2, 1.0, 0.3], [1.0, 0.9, 0.1]]])  # palette 1: green on yellow


def make_images(n, seed):
    """n images (float32, [n, 3, 32, 32], about zero mean, unit variance) and
    their labels; class = pattern (0-4) + 5 * palette (0-1)."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    pattern, palette = labels % 5, labels // 5
    r = lambda *shape: torch.rand(*shape, generator=g)  # noqa: E731
    yy, xx = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")
    freq = (0.12 + 0.12 * r(n))[:, None, None]  # cycles per pixel
    phase = (2 * math.pi * r(n))[:, None, None]
    cy, cx = (10 + 12 * r(n))[:, None, None], (10 + 12 * r(n))[:, None, None]
    radius = (5 + 5 * r(n))[:, None, None]
    dist = ((yy - cy) ** 2 + (xx - cx) ** 2).sqrt()
    masks = torch.stack([
        torch.sin(2 * math.pi * freq * yy + phase) > 0,  # horizontal stripes
        torch.sin(2 * math.pi * freq * xx + phase) > 0,  # vertical stripes
        (torch.sin(2 * math.pi * freq * yy + phase) * torch.sin(2 * math.pi * freq * xx + phase)) > 0,  # checks
        dist < radius,  # a disk
        (dist - radius).abs() < 2,  # a ring
    ], 1)  # [n, 5, 32, 32]
    mask = masks[torch.arange(n), pattern].float()[:, None]  # [n, 1, 32, 32]
    fg, bg = PALETTES[palette, 0], PALETTES[palette, 1]  # [n, 3]
    fg = (fg + 0.25 * (r(n, 3) - 0.5))[:, :, None, None]
    bg = (bg + 0.25 * (r(n, 3) - 0.5))[:, :, None, None]
    img = mask * fg + (1 - mask) * bg + 0.35 * torch.randn(n, 3, 32, 32, generator=g)
    return ((img - 0.55) / 0.5).float(), labels


def make_dataset(train_size, test_size):
    """(train_x, train_y, test_x, test_y), the same for every run."""
    x, y = make_images(train_size + test_size, DATA_SEED)
    return x[:train_size], y[:train_size], x[train_size:], y[train_size:]


class Augmented(torch.utils.data.Dataset):
    """CIFAR's training augmentation: random crop of the 4-pixel zero-padded
    image, random horizontal flip."""

    def __init__(self, x, y):
        self.x, self.y = F.pad(x, (4, 4, 4, 4)), y

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        top, left = torch.randint(0, 9, (2,)).tolist()
        img = self.x[i, :, top:top + 32, left:left + 32]
        if torch.rand(()) < 0.5:
            img = img.flip(-1)
        return img, self.y[i]


def train_loader(x, y, batch_size, seed, num_workers=0):
    g = torch.Generator().manual_seed(seed)  # the order; the crops and flips draw from torch's global seed
    return torch.utils.data.DataLoader(Augmented(x, y), batch_size=batch_size, shuffle=True, drop_last=True,
                                       generator=g, num_workers=num_workers)


# ------------------------------------------------------------- the model

class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, width, stride):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width)
        self.shortcut = _shortcut(cin, width, stride)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, width, stride):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, width * 4, 1, bias=False), nn.BatchNorm2d(width * 4)
        self.shortcut = _shortcut(cin, width * 4, stride)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        return F.relu(self.bn3(self.conv3(out)) + self.shortcut(x))


def _shortcut(cin, cout, stride):
    if stride == 1 and cin == cout:
        return nn.Identity()
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))


class ResNet(nn.Module):
    """The CIFAR variant: a 3x3 stride-1 stem and no max pool (a 32x32 image
    has no pixels to spare), four stages at 32, 16, 8, 4 pixels, global
    average pool, fc."""

    def __init__(self, block, layers, width=64, num_classes=NUM_CLASSES):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        stages, cin = [], width
        for i, n in enumerate(layers):
            w = width * 2 ** i
            for j in range(n):
                stages.append(block(cin, w, 2 if i > 0 and j == 0 else 1))
                cin = w * block.expansion
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def build_model(name, width):
    if name == "resnet18":
        return ResNet(BasicBlock, [2, 2, 2, 2], width)
    if name == "resnet50":
        return ResNet(Bottleneck, [3, 4, 6, 3], width)
    raise ValueError(f"unknown model {name!r}: resnet18 or resnet50")


# ---------------------------------------------------------------- the run

def _mark_step(device):
    if device.type == "hpu":
        htcore.mark_step()


def train(args, model, loader, device):
    """Trains in place; returns (per-step losses, images/s after the first 2
    steps, which compile the step's graphs in lazy mode)."""
    steps = args.epochs * len(loader)
    if args.max_steps is not None:
        steps = min(steps, args.max_steps)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps)))
    from tqdm.auto import tqdm

    bar = tqdm(total=steps, desc=f"train ({device.type})", disable=args.disable_tqdm, dynamic_ncols=True,
               file=sys.stdout)
    model.train()
    losses, step, t_after_2 = [], 0, None
    loss_hist = []  # device tensors: read once at the end, no host sync per step
    while step < steps:
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.bf16):
                logits = model(images)
            loss = F.cross_entropy(logits.float(), labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            _mark_step(device)
            opt.step()
            sched.step()
            _mark_step(device)
            loss_hist.append(loss.detach())
            step += 1
            bar.update(1)
            if step == 2:
                if device.type == "hpu":
                    torch.hpu.synchronize()
                t_after_2 = time.perf_counter()
            if step == steps:
                break
    if device.type == "hpu":
        torch.hpu.synchronize()
    elapsed = time.perf_counter() - t_after_2 if t_after_2 is not None else float("nan")
    bar.close()
    losses = torch.stack(loss_hist).cpu().tolist()
    ips = (steps - 2) * args.batch_size / elapsed if steps > 2 else float("nan")
    return losses, ips


@torch.no_grad()
def evaluate(args, model, x, y, device):
    """Test accuracy, batch by batch (the last batch may be smaller)."""
    model.eval()
    correct = 0
    for i in range(0, len(y), args.batch_size * 2):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.bf16):
            logits = model(x[i:i + args.batch_size * 2].to(device))
        correct += (logits.float().argmax(1).cpu() == y[i:i + args.batch_size * 2]).sum().item()
    return correct / len(y)


def main(args):
    device = torch.device(args.device)
    t0 = time.perf_counter()
    train_x, train_y, test_x, test_y = make_dataset(args.train_size, args.test_size)
    t_data = time.perf_counter() - t0
    torch.manual_seed(args.seed)  # the weights, then the crops and flips
    model = build_model(args.model, args.width).to(device)
    loader = train_loader(train_x, train_y, args.batch_size, args.seed, args.num_workers)
    mode = ("lazy" if htcore.is_lazy() else "eager") if device.type == "hpu" else "-"
    print(f"model {args.model}, width {args.width} ({sum(p.numel() for p in model.parameters()) / 1e6:.2f}M "
          f"parameters); data {args.train_size} train, {args.test_size} test, made in {t_data:.1f}s\n"
          f"run   device {device.type}, mode {mode}, bf16 {args.bf16}, batch {args.batch_size}, "
          f"epochs {args.epochs}, max_steps {args.max_steps}, lr {args.lr:g}", flush=True)
    before = habana_torch.metrics.cpu_fallback_counts()
    t1 = time.perf_counter()
    losses, ips = train(args, model, loader, device)
    accuracy = evaluate(args, model, test_x, test_y, device)
    total = time.perf_counter() - t1
    fallbacks = {op: n - before.get(op, 0) for op, n in habana_torch.metrics.cpu_fallback_counts().items()
                 if n != before.get(op, 0)}
    tail = losses[-min(len(losses), 10):]
    results = {"train_loss": sum(tail) / len(tail), "losses": losses, "test_accuracy": accuracy,
               "images_per_second": ips, "total_seconds": total, "cpu_fallbacks": sum(fallbacks.values()),
               "cpu_fallback_ops": fallbacks}
    print(f"train loss {results['train_loss']:.4f} (mean of the last {len(tail)} steps), test accuracy "
          f"{accuracy:.4f} (chance {1 / NUM_CLASSES:.2f}), {ips:.1f} images/s, {len(losses)} steps in "
          f"{total:.1f}s; cpu fallbacks: {results['cpu_fallbacks']} ({', '.join(sorted(fallbacks)) or 'none'})",
          flush=True)
    return results, model


if __name__ == "__main__":
    main(parse_args())
