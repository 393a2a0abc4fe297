"""PyTorch Lightning on the hpu: Trainer(accelerator="hpu") through
lightning-habana trains a digit classifier, then the same Trainer on the
CPU, and prints accuracy and time side by side.

lightning-habana 1.6.0 needs pytorch-lightning 2.3.3, older than the base
Python's libraries, so it runs in the pinned venv scripts/pinned_envs.sh makes:

    bash scripts/pinned_envs.sh lightning
    ~/.cache/habana_torch/pinned-envs/lightning/bin/python examples/lightning_hpu.py
    ~/.cache/habana_torch/pinned-envs/lightning/bin/python examples/lightning_hpu.py --precision bf16-mixed

Data: scikit-learn's bundled handwritten digits (1,797 8x8 images, 10
classes, split 80/20 as examples/placement_and_trials.py does; nothing is
downloaded). Model: a small MLP, AdamW. Both runs start from the same
weights and see the batches in the same order. The last line is
`RESULT <json>` for scripts.
"""
import argparse
import json
import os
import sys
import time
import warnings

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from placement_and_trials import digits  # noqa: E402  (the same data and split)

warnings.filterwarnings("ignore", ".*does not have many workers.*")
warnings.filterwarnings("ignore", ".*pkg_resources is deprecated.*")
import pytorch_lightning as pl  # noqa: E402


class DigitsClassifier(pl.LightningModule):
    def __init__(self, hidden=128, lr=1e-3):
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(nn.Linear(64, hidden), nn.GELU(), nn.LayerNorm(hidden),
                                 nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, 10))
        self.losses, self.correct, self.seen, self.devices_seen = [], 0, 0, set()

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        self.devices_seen.add(str(x.device))
        loss = nn.functional.cross_entropy(self(x), y)
        self.losses.append(loss.detach())
        return loss

    def on_validation_epoch_start(self):
        self.correct, self.seen = 0, 0

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.correct += (self(x).argmax(-1) == y).sum()
        self.seen += len(y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr, weight_decay=0.01)


def fit(accelerator, args, data):
    xtr, ytr, xva, yva = data
    pl.seed_everything(args.seed)
    model = DigitsClassifier(args.hidden, args.lr)
    train = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xtr, ytr), batch_size=args.batch_size,
                                        shuffle=True, generator=torch.Generator().manual_seed(args.seed))
    val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xva, yva), batch_size=256)
    trainer = pl.Trainer(accelerator=accelerator, devices=1, precision=args.precision, max_epochs=args.epochs,
                         logger=False, enable_checkpointing=False, enable_progress_bar=args.progress,
                         enable_model_summary=False, num_sanity_val_steps=0, check_val_every_n_epoch=args.epochs)
    t0 = time.perf_counter()
    trainer.fit(model, train, val)
    seconds = time.perf_counter() - t0
    return {"accelerator": type(trainer.accelerator).__name__, "strategy": type(trainer.strategy).__name__,
            "devices_seen": sorted(model.devices_seen), "steps": len(model.losses),
            "losses": [float(v) for v in model.losses], "val_accuracy": int(model.correct) / model.seen,
            "seconds": seconds, "samples_per_s": len(ytr) * args.epochs / seconds}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--accelerators", default="hpu,cpu", help="Trainer accelerators to run, in order (default hpu,cpu)")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch_size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--precision", default="32-true", choices=["32-true", "bf16-mixed"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--progress", action="store_true", help="show Lightning's progress bar")
    args = ap.parse_args(argv)
    accelerators = args.accelerators.split(",")
    if not accelerators or not set(accelerators) <= {"hpu", "cpu"}:
        ap.error(f"--accelerators must be hpu, cpu or both (comma-separated), got {args.accelerators!r}")
    for name in ("epochs", "batch_size", "hidden"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if "hpu" in accelerators:
        import lightning_habana  # noqa: F401  (registers accelerator="hpu")

    data = digits(args.seed)
    runs = {acc: fit(acc, args, data) for acc in accelerators}
    print(f"digits: {len(data[1])} train, {len(data[3])} validation images; {args.epochs} epochs, "
          f"batch {args.batch_size}, {args.precision}")
    print(f"{'accelerator':<12s} {'strategy':<18s} {'steps':>5s} {'last loss':>9s} {'val acc':>7s} "
          f"{'fit (s)':>7s} {'samples/s':>9s}")
    for acc, r in runs.items():
        print(f"{acc:<12s} {r['strategy']:<18s} {r['steps']:5d} {r['losses'][-1]:9.4f} {r['val_accuracy']:7.3f} "
              f"{r['seconds']:7.2f} {r['samples_per_s']:9.0f}")
    if len(runs) == 2:
        print(f"hpu speed: {runs['cpu']['seconds'] / runs['hpu']['seconds']:.2f}x the CPU's (fit time, "
              f"first-step compilation included)")
    print("RESULT " + json.dumps({"precision": args.precision, **runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
