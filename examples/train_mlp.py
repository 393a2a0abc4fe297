"""Train the same small network on hpu and on the CPU and print both losses.

The data set is made here (two interleaved spirals, 3 classes), so nothing
is downloaded. Both runs start from the same weights and see the same
batches; the losses should agree to float32 rounding.

    python examples/train_mlp.py [--steps 50] [--device hpu:0]
"""
import argparse
import math
import time

import torch
import torch.nn as nn

import habana_torch  # noqa: F401  (registers torch.hpu)
import habana_torch.core as htcore


def spirals(n_per_class=512, classes=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    xs, ys = [], []
    for c in range(classes):
        r = torch.linspace(0.05, 1.0, n_per_class)
        t = torch.linspace(c * 4.0, (c + 1) * 4.0, n_per_class) + 0.2 * torch.randn(n_per_class, generator=g)
        xs.append(torch.stack([r * torch.sin(t), r * torch.cos(t)], dim=1))
        ys.append(torch.full((n_per_class,), c, dtype=torch.long))
    return torch.cat(xs), torch.cat(ys)


class MLP(nn.Module):
    def __init__(self, hidden=128, classes=3):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, classes))

    def forward(self, x):
        return self.net(x)


def train(device, steps, batch, x_all, y_all, init_state):
    model = MLP().to(device)
    model.load_state_dict(init_state)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, x_all.shape[0], (batch,), generator=g)
        x, y = x_all[idx].to(device), y_all[idx].to(device)
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        htcore.mark_step()
        opt.step()
        htcore.mark_step()
        losses.append(loss.item())
    return losses


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--device", default="hpu:0")
    args = ap.parse_args()

    x_all, y_all = spirals()
    torch.manual_seed(0)
    init_state = {k: v.clone() for k, v in MLP().state_dict().items()}

    # Untimed warm-up on both sides: the first optimizer step imports parts
    # of torch (about 0.9 s, on the CPU too) and the hpu's first steps
    # compile their graphs; the timed runs below compare steady state.
    for device in (args.device, "cpu"):
        train(device, 2, args.batch, x_all, y_all, init_state)
    t0 = time.perf_counter()
    hpu_losses = train(args.device, args.steps, args.batch, x_all, y_all, init_state)
    t_hpu = time.perf_counter() - t0
    t0 = time.perf_counter()
    cpu_losses = train("cpu", args.steps, args.batch, x_all, y_all, init_state)
    t_cpu = time.perf_counter() - t0

    print(f"{'step':>5} {args.device + ' loss':>14} {'cpu loss':>14} {'|diff|':>10}")
    worst = 0.0
    for i, (a, b) in enumerate(zip(hpu_losses, cpu_losses)):
        worst = max(worst, abs(a - b))
        if i % max(1, args.steps // 10) == 0 or i == args.steps - 1:
            print(f"{i:5d} {a:14.6f} {b:14.6f} {abs(a - b):10.2e}")
    fallbacks = habana_torch.metrics.metric_global("cpu_fallback").stats()
    print(f"max |loss difference| {worst:.2e}; time hpu {t_hpu:.2f}s, cpu {t_cpu:.2f}s")
    print(f"cpu fallbacks on hpu: {fallbacks[0][1]} calls over {len(fallbacks[1][1])} ops "
          f"({', '.join(sorted(fallbacks[1][1])) or 'none'})")
    if not math.isfinite(worst) or worst > 1e-3:
        raise SystemExit(f"hpu and cpu losses differ by {worst}")


if __name__ == "__main__":
    main()
