"""Lightning runs for test_lightning.py, run with the lightning venv's python:
    python lightning_worker.py fit1           # devices=1 on the hpu, then the CPU
    python lightning_worker.py fit2 OUT.json  # devices=2, HPUParallelStrategy over hccl
fit1 prints `RESULT <json>`; fit2's ranks each write OUT.json.<rank>."""
import faulthandler
import json
import sys

import torch

import lightning_habana
import pytorch_lightning as pl
from lightning_habana import HPUParallelStrategy, HPUPrecisionPlugin


class Regressor(pl.LightningModule):
    """A small MLP fitted by plain SGD; records where each step ran and its loss."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
        self.devices_seen = set()
        self.losses = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        self.devices_seen.add(str(x.device))
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.losses.append(loss.detach())
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def data(batch_size):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 8, generator=g)
    y = torch.tanh(x[:, :4].sum(1, keepdim=True) / 2)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch_size)


def params(model):
    return [p.detach().cpu().tolist() for p in model.parameters()]


def fit(accelerator, devices=1, strategy="auto", precision="32-true", batch_size=16, epochs=3):
    pl.seed_everything(0)
    model = Regressor()
    init = params(model)
    trainer = pl.Trainer(accelerator=accelerator, devices=devices, strategy=strategy, precision=precision,
                         max_epochs=epochs, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(model, data(batch_size))
    return {"accelerator": type(trainer.accelerator).__name__, "strategy": type(trainer.strategy).__name__,
            "precision_plugin": type(trainer.precision_plugin).__name__,
            "devices_seen": sorted(model.devices_seen), "losses": [float(v) for v in model.losses],
            "init": init, "params": params(model), "rank": trainer.global_rank}


def fit1():
    out = {"hpu_available": lightning_habana.HPU_AVAILABLE,
           "synapse": lightning_habana.utils.resources.get_hpu_synapse_version()}
    out["hpu"] = fit("hpu")
    out["cpu"] = fit("cpu")
    out["hpu_bf16"] = fit("hpu", precision="bf16-mixed")
    out["cpu_bf16"] = fit("cpu", precision="bf16-mixed")
    # lightning-habana asks the transformer engine whether fp8 exists before any fp8 work.
    try:
        HPUPrecisionPlugin(precision="fp8")
        out["fp8_error"] = None
    except NotImplementedError as e:
        out["fp8_error"] = str(e)
    print("RESULT " + json.dumps(out))


def fit2(path):
    # A rank that hangs prints every thread's stack and exits, instead of
    # outliving the test (Lightning starts rank 1 as a child of rank 0).
    faulthandler.dump_traceback_later(240, exit=True)
    # Two ranks of 8 samples a step, each from its DistributedSampler shard (see the test).
    res = fit("hpu", devices=2, strategy=HPUParallelStrategy(), batch_size=8)
    res["backend"] = torch.distributed.get_backend() if torch.distributed.is_initialized() else None
    with open(f"{path}.{res['rank']}", "w") as f:  # not stdout: both ranks write to it at once
        json.dump(res, f)


if __name__ == "__main__":
    {"fit1": fit1, "fit2": fit2}[sys.argv[1]](*sys.argv[2:])
