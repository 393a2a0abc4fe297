"""Check op placement, train in bf16, profile, and run hyper-parameter trials
in parallel, each on its own card: the Gaudi workflow of checking where ops
run before scaling out.

The data is scikit-learn's bundled handwritten digits (1,797 8x8 images, 10
classes; shipped inside the scikit-learn package, nothing is downloaded).
The model is a small MLP.

    python examples/placement_and_trials.py                 # report, profile, 4 trials on 2 cards
    python examples/placement_and_trials.py --trials 8 --cards 4 --epochs 20
    python examples/placement_and_trials.py --device cpu    # the same on the CPU, for comparison

1. Placement: every aten op of one training step, the device it produced its
   result on, and whether it ran on the card or through the CPU fallback
   (habana_torch.metrics.cpu_fallback_counts); a fallback is also counted.
2. Profile: torch.profiler over a few steps, the ten most expensive ops.
3. Trials: a grid of learning rates and batch sizes; each trial is a worker
   process that sees only its own card (HABANA_VISIBLE_DEVICES, as Ray Tune's
   workers set it on Gaudi), so trials run side by side. Then the table of
   trials and the best one.
"""
import argparse
import collections
import concurrent.futures
import itertools
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode

import habana_torch  # noqa: F401  (registers torch.hpu)
import habana_torch.core as htcore
from habana_torch import metrics


def digits(seed=0):
    """scikit-learn's digits, standardised, split 80/20 with a fixed seed."""
    from sklearn.datasets import load_digits

    data = load_digits()
    x = torch.tensor(data.data, dtype=torch.float32)
    y = torch.tensor(data.target, dtype=torch.long)
    x = (x - x.mean(0)) / (x.std(0) + 1e-6)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    n_train = int(0.8 * len(y))
    tr, va = perm[:n_train], perm[n_train:]
    return x[tr], y[tr], x[va], y[va]


def make_model(hidden, seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, hidden), nn.GELU(), nn.LayerNorm(hidden),
                         nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, 10))


def train_step(model, opt, x, y, device, bf16):
    with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16, enabled=bf16):
        loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    htcore.mark_step()
    opt.step()
    htcore.mark_step()
    return loss


def train(config, device, bf16, data, epochs, seed=0):
    """Trains one configuration; returns its final train loss, validation
    accuracy and time."""
    xt, yt, xv, yv = data
    model = make_model(config["hidden"], seed).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=config["lr"], weight_decay=0.01)
    g = torch.Generator().manual_seed(seed)
    bs = config["batch"]
    start = time.perf_counter()
    loss_sum, steps = torch.zeros((), device=device), 0
    for _ in range(epochs):
        perm = torch.randperm(len(yt), generator=g)
        loss_sum.zero_()
        steps = 0
        for i in range(0, len(yt) - bs + 1, bs):
            idx = perm[i:i + bs]
            loss = train_step(model, opt, xt[idx].to(device), yt[idx].to(device), device, bf16)
            loss_sum += loss.detach().float()
            steps += 1
    model.eval()
    with torch.no_grad(), torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16,
                                         enabled=bf16):
        pred = model(xv.to(device)).argmax(-1).cpu()
    return {"train_loss": (loss_sum / max(steps, 1)).item(),
            "val_accuracy": (pred == yv).float().mean().item(),
            "seconds": time.perf_counter() - start}


class _Placement(TorchDispatchMode):
    """Records each aten op and the device of its first tensor result."""

    def __init__(self):
        super().__init__()
        self.ops = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        first = out[0] if isinstance(out, (tuple, list)) and out else out
        dev = first.device.type if isinstance(first, torch.Tensor) else "-"
        self.ops[(str(func.overloadpacket.__name__), dev)] += 1
        return out


def placement_report(device, bf16, data):
    """Prints where each op of one training step ran; returns the number of
    ops that went through the CPU fallback."""
    xt, yt, _, _ = data
    model = make_model(128, 0).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    train_step(model, opt, xt[:64].to(device), yt[:64].to(device), device, bf16)  # optimizer state
    before = metrics.cpu_fallback_counts()
    with _Placement() as placement:
        train_step(model, opt, xt[:64].to(device), yt[:64].to(device), device, bf16)
    after = metrics.cpu_fallback_counts()
    fell_back = {op: n - before.get(op, 0) for op, n in after.items() if n > before.get(op, 0)}
    print(f"== placement of one training step on {device} ({'bf16 autocast' if bf16 else 'fp32'})")
    print(f"   {'op':32s} {'calls':>6s}  where")
    for (op, dev), n in sorted(placement.ops.items()):
        if dev == "hpu":
            where = "CPU fallback" if any(op in name for name in fell_back) else "card"
        else:
            where = dev
        print(f"   {op:32s} {n:6d}  {where}")
    total = sum(fell_back.values())
    print(f"   CPU fallbacks in this step: {total}" + (f" ({fell_back})" if fell_back else ""))
    return total


def profile_summary(device, bf16, data, steps=5):
    xt, yt, _, _ = data
    model = make_model(128, 0).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    acts = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=acts) as prof:
        for i in range(steps):
            idx = slice(64 * i, 64 * (i + 1))
            train_step(model, opt, xt[idx].to(device), yt[idx].to(device), device, bf16)
        if device.startswith("hpu"):
            torch.hpu.synchronize()
    print(f"== profile of {steps} training steps on {device} (host time per op, top 10)")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))


def grid(n):
    configs = [{"lr": lr, "batch": bs, "hidden": 128}
               for lr, bs in itertools.product([3e-3, 1e-3, 3e-4, 1e-4], [32, 64])]
    return configs[:n]


def run_trials(configs, cards, device, bf16, epochs):
    """Each trial in its own worker process, pinned to card (i mod cards)."""

    def launch(i, config):
        env = dict(os.environ)
        if device == "hpu":
            env["HABANA_VISIBLE_DEVICES"] = str(i % cards)
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(config),
               "--device", device, "--epochs", str(epochs)] + ([] if bf16 else ["--no-bf16"])
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"trial {i} ({config}) failed:\n{r.stderr}")
        return json.loads(r.stdout.strip().splitlines()[-1])

    results = [None] * len(configs)
    with concurrent.futures.ThreadPoolExecutor(max_workers=cards) as pool:
        futures = {pool.submit(launch, i, c): i for i, c in enumerate(configs)}
        for done, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            i = futures[fut]
            results[i] = fut.result()
            print(f"\r   trials finished: {done}/{len(configs)}", end="", flush=True)
    print()
    return results


def worker(config, device, bf16, epochs):
    if device == "hpu":
        # The launcher made exactly one card visible to this process.
        visible = os.environ.get("HABANA_VISIBLE_DEVICES", "")
        assert torch.hpu.device_count() == 1, f"expected one visible card, got {torch.hpu.device_count()}"
    else:
        visible = "-"
    before = sum(metrics.cpu_fallback_counts().values())
    res = train(config, device, bf16, digits(), epochs)
    res["card"] = visible
    res["cpu_fallbacks"] = sum(metrics.cpu_fallback_counts().values()) - before
    print(json.dumps(res))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["hpu", "cpu"], default="hpu", help="where to train (default hpu)")
    p.add_argument("--trials", type=int, default=4, help="number of configurations to try (1-8, default 4)")
    p.add_argument("--cards", type=int, default=2,
                   help="cards to spread the trials over, one worker process per card (default 2)")
    p.add_argument("--epochs", type=int, default=8, help="epochs per trial (default 8)")
    p.add_argument("--no-bf16", dest="bf16", action="store_false", help="train in fp32 instead of bf16 autocast")
    p.add_argument("--skip-report", action="store_true", help="skip the placement report and the profile")
    p.add_argument("--worker", metavar="JSON", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(json.loads(args.worker), args.device, args.bf16, args.epochs)
    if not 1 <= args.trials <= 8:
        p.error(f"--trials must be between 1 and 8, got {args.trials}")
    if args.epochs < 1:
        p.error(f"--epochs must be at least 1, got {args.epochs}")
    if args.device == "hpu" and not 1 <= args.cards <= torch.hpu.device_count():
        p.error(f"--cards must be between 1 and the {torch.hpu.device_count()} visible cards, got {args.cards}")

    data = digits()
    if not args.skip_report:
        placement_report(args.device, args.bf16, data)
        profile_summary(args.device, args.bf16, data)

    configs = grid(args.trials)
    where = f"{args.cards} cards" if args.device == "hpu" else "the CPU"
    print(f"== {len(configs)} trials, {args.epochs} epochs each, on {where}")
    start = time.perf_counter()
    results = run_trials(configs, args.cards if args.device == "hpu" else 1, args.device, args.bf16, args.epochs)
    wall = time.perf_counter() - start
    print(f"   {'trial':>5s} {'lr':>8s} {'batch':>5s} {'card':>4s} {'loss':>7s} {'val acc':>7s} "
          f"{'time s':>6s} {'fallbacks':>9s}")
    for i, (c, r) in enumerate(zip(configs, results)):
        print(f"   {i:5d} {c['lr']:8.0e} {c['batch']:5d} {r['card']:>4s} {r['train_loss']:7.4f} "
              f"{r['val_accuracy']:7.3f} {r['seconds']:6.1f} {r['cpu_fallbacks']:9d}")
    best = max(range(len(configs)), key=lambda i: results[i]["val_accuracy"])
    print(f"== best: trial {best} (lr {configs[best]['lr']:.0e}, batch {configs[best]['batch']}), "
          f"validation accuracy {results[best]['val_accuracy']:.3f}; all trials took {wall:.1f} s")


if __name__ == "__main__":
    main()
