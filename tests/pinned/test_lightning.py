"""PyTorch Lightning on the hpu through lightning-habana 1.6.0 (the pinned
`lightning` env: pytorch-lightning 2.3.3): Trainer(accelerator="hpu") fits
the same small regressor as the CPU, on one card and on two ranks over hccl.
The runs are in lightning_worker.py; examples/lightning_hpu.py is run as well."""
import json
import os

import pytest
import torch

from conftest import HERE, result_of, run_in_venv

ENV = "lightning"


def _close(a, b, atol, rtol=0):
    torch.testing.assert_close(torch.tensor(a), torch.tensor(b), atol=atol, rtol=rtol)


def _params_close(a, b, atol, rtol=0):
    """a, b: lists of parameters (nested lists)."""
    assert len(a) == len(b)
    for pa, pb in zip(a, b):
        _close(pa, pb, atol, rtol)


def test_trainer_hpu_one_card_matches_cpu(hl_smi_dir):
    r = result_of(run_in_venv(ENV, hl_smi_dir, ["lightning_worker.py", "fit1"]), "lightning fit1")
    assert r["hpu_available"] is True
    assert r["synapse"] != "0.0.0", "lightning-habana did not read a release from hl-smi -v"
    hpu, cpu = r["hpu"], r["cpu"]
    assert (hpu["accelerator"], hpu["strategy"], hpu["precision_plugin"]) == \
        ("HPUAccelerator", "SingleHPUStrategy", "HPUPrecisionPlugin")
    assert hpu["devices_seen"] == ["hpu:0"] and cpu["devices_seen"] == ["cpu"]
    assert len(hpu["losses"]) == len(cpu["losses"]) == 12
    first_epoch, last_epoch = sum(hpu["losses"][:4]), sum(hpu["losses"][-4:])
    assert last_epoch < 0.5 * first_epoch, "the fit did not learn"
    _params_close(hpu["init"], cpu["init"], atol=0)
    _close(hpu["losses"], cpu["losses"], atol=1e-5, rtol=1e-5)
    _params_close(hpu["params"], cpu["params"], atol=1e-5, rtol=1e-5)
    # bf16-mixed: hpu and CPU autocast run different op lists, so compare the fit, not the bits.
    hb, cb = r["hpu_bf16"], r["cpu_bf16"]
    assert hb["devices_seen"] == ["hpu:0"]
    _close(hb["losses"], cb["losses"], atol=3e-2, rtol=3e-2)
    _close(hb["losses"], cpu["losses"], atol=3e-2, rtol=3e-2)
    assert r["fp8_error"] is not None and "habana_torch has no fp8" in r["fp8_error"]


def _two_rank_fit_on_cpu(init, epochs=3, lr=0.1, per_rank=8):
    """What two DDP ranks compute, in one CPU process: Lightning gives each
    rank a DistributedSampler (shuffle=True, seed 0, set_epoch(e)), and DDP
    averages the two ranks' gradients, so each step is one SGD step on the
    mean loss over both ranks' batches."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 8, generator=g)
    y = torch.tanh(x[:, :4].sum(1, keepdim=True) / 2)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    with torch.no_grad():
        for p, v in zip(net.parameters(), init):
            p.copy_(torch.tensor(v))
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    for epoch in range(epochs):
        perm = torch.randperm(64, generator=torch.Generator().manual_seed(epoch)).tolist()
        shards = [perm[0::2], perm[1::2]]
        for k in range(0, 32, per_rank):
            opt.zero_grad()
            loss = sum(torch.nn.functional.mse_loss(net(x[s[k:k + per_rank]]), y[s[k:k + per_rank]])
                       for s in shards) / 2
            loss.backward()
            opt.step()
    return [p.detach().tolist() for p in net.parameters()]


def test_trainer_hpu_two_ranks_hccl(hl_smi_dir, tmp_path):
    out = tmp_path / "fit2.json"
    proc = run_in_venv(ENV, hl_smi_dir, ["lightning_worker.py", "fit2", str(out)])
    if proc.returncode != 0:
        pytest.fail(f"lightning fit2 failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}")
    ranks = [json.loads((tmp_path / f"fit2.json.{r}").read_text()) for r in (0, 1)]
    for rank, res in enumerate(ranks):
        assert res["rank"] == rank
        assert res["strategy"] == "HPUParallelStrategy" and res["backend"] == "hccl"
        assert res["devices_seen"] == [f"hpu:{rank}"]
    _params_close(ranks[0]["params"], ranks[1]["params"], atol=0)
    _params_close(ranks[0]["params"], _two_rank_fit_on_cpu(ranks[0]["init"]), atol=1e-5, rtol=1e-5)


def test_example_lightning_hpu_matches_cpu(hl_smi_dir):
    """examples/lightning_hpu.py: Trainer(accelerator="hpu") learns the digits
    as the CPU Trainer does, from the same weights and batches."""
    example = os.path.join(os.path.dirname(HERE), os.pardir, "examples", "lightning_hpu.py")
    proc = run_in_venv(ENV, hl_smi_dir, [os.path.abspath(example), "--epochs", "2", "--batch_size", "64"])
    r = result_of(proc, "examples/lightning_hpu.py")
    hpu, cpu = r["hpu"], r["cpu"]
    assert (hpu["accelerator"], hpu["strategy"]) == ("HPUAccelerator", "SingleHPUStrategy")
    assert hpu["devices_seen"] == ["hpu:0"] and cpu["devices_seen"] == ["cpu"]
    assert hpu["steps"] == cpu["steps"] == 2 * 23
    _close(hpu["losses"], cpu["losses"], atol=1e-4, rtol=1e-4)
    assert abs(hpu["val_accuracy"] - cpu["val_accuracy"]) <= 2 / 360
    assert hpu["val_accuracy"] > 0.85, "the classifier did not learn (10 classes: 0.1 by chance)"
    assert "hpu speed:" in proc.stdout
