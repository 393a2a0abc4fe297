"""transformers and accelerate pick the hpu, and train on it as on the CPU.

Each run goes in a fresh interpreter: transformers' is_torch_hpu_available()
patches torch functions for the whole process, and accelerate keeps its
state in singletons. The subprocesses inherit PT_HPU_LAZY_MODE, so the
suite's lazy and eager runs (scripts/test.sh) cover both modes. A tiny
BERT is built from a config (nothing is downloaded); the data is random
but seeded, and every hpu result is compared with the same run on the CPU.
"""
import json
import math
import os
import sys

import pytest
import torch

import habana_torch.core as htcore
from conftest import run_python
from seeded_data import parity_dataset

transformers = pytest.importorskip("transformers")
accelerate = pytest.importorskip("accelerate")

HERE = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------- workers
# Run in the subprocesses (`python -c "import test_transformers_trainer as t; t.<worker>()"`).

def _train_bert(out_dir, use_cpu, bf16):
    import numpy as np
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    torch.manual_seed(0)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, num_labels=2,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertForSequenceClassification(config)
    args = TrainingArguments(output_dir=out_dir, per_device_train_batch_size=8, per_device_eval_batch_size=16,
                             num_train_epochs=2, learning_rate=2e-3, max_grad_norm=1.0, logging_steps=1,
                             report_to=[], save_strategy="no", seed=0, use_cpu=use_cpu, bf16=bf16,
                             disable_tqdm=True, dataloader_num_workers=0)

    def accuracy(pred):
        return {"accuracy": float((np.argmax(pred.predictions, -1) == pred.label_ids).mean())}

    trainer = Trainer(model=model, args=args, train_dataset=parity_dataset(64, 1), eval_dataset=parity_dataset(32, 2),
                      compute_metrics=accuracy)
    out = trainer.train()
    metrics = trainer.evaluate()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    return {"args_device": str(args.device), "param_device": str(next(trainer.model.parameters()).device),
            "losses": [h["loss"] for h in logs], "grad_norms": [float(h["grad_norm"]) for h in logs],
            "train_loss": out.training_loss, "eval_loss": metrics["eval_loss"],
            "eval_accuracy": metrics["eval_accuracy"]}


def trainer_worker(out_dir):
    import habana_torch
    import transformers.utils

    runs = {}
    for name, use_cpu, bf16 in (("hpu", False, False), ("cpu", True, False),
                                ("hpu_bf16", False, True), ("cpu_bf16", True, True)):
        runs[name] = _train_bert(os.path.join(out_dir, name), use_cpu, bf16)
    runs["hpu_available"] = transformers.utils.is_torch_hpu_available()
    runs["lazy"] = habana_torch.core.is_lazy()
    runs["fallbacks"] = habana_torch.metrics.cpu_fallback_counts()
    print("RESULT " + json.dumps(runs))


def _accelerate_loop(cpu, mixed_precision):
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    acc = Accelerator(cpu=cpu, mixed_precision=mixed_precision)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                                torch.nn.Linear(32, 3))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(96, 10, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16, shuffle=True,
                                       generator=torch.Generator().manual_seed(2))
    model, opt, data = acc.prepare(model, opt, data)
    losses = []
    for _ in range(2):
        for xb, yb in data:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            acc.backward(loss)
            acc.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        xe = torch.randn(32, 10, generator=g).to(acc.device)
        eval_logits = acc.gather_for_metrics(model(xe)).float().cpu().tolist()
    return {"device": str(acc.device), "distributed_type": str(acc.distributed_type),
            "param_device": str(next(model.parameters()).device), "batch_device": str(xb.device),
            "losses": losses, "eval_logits": eval_logits}


def accelerate_worker():
    import habana_torch

    runs = {name: _accelerate_loop(cpu, mp) for name, cpu, mp in
            (("hpu", False, "no"), ("cpu", True, "no"), ("hpu_bf16", False, "bf16"), ("cpu_bf16", True, "bf16"))}
    runs["fallbacks"] = habana_torch.metrics.cpu_fallback_counts()
    print("RESULT " + json.dumps(runs))


def _run_worker(call, timeout=300):
    r = run_python(f"import sys; sys.path.insert(0, {HERE!r}); import test_transformers_trainer as t; t.{call}",
                   timeout=timeout)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "imported after PyTorch had already looked" not in r.stderr, r.stderr
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, r.stdout[-2000:]
    return json.loads(lines[0][len("RESULT "):])


# ------------------------------------------------------------------ tests

def test_libraries_see_the_hpu():
    code = """
        import torch, transformers.utils, accelerate.utils
        from transformers import TrainingArguments
        from accelerate import Accelerator
        args = TrainingArguments(output_dir="unused", report_to=[])
        acc = Accelerator()
        print(transformers.utils.is_torch_hpu_available(), args.device, accelerate.utils.is_hpu_available(),
              acc.device.type, acc.distributed_type, torch.hpu.current_device(),
              transformers.utils.import_utils.is_habana_gaudi1(), accelerate.utils.is_habana_gaudi1())
    """
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "hpu:0", "True", "hpu", "DistributedType.NO", "0", "False", "False"]
    # Gaudi 1 takes the libraries' Gaudi 1 path (no fp16 there, no fp8).
    r = run_python(code, env={"HPU_DEVICE_TYPE": "GAUDI"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-2:] == ["True", "True"]


@pytest.fixture(scope="module")
def trainer_runs(tmp_path_factory):
    return _run_worker(f"trainer_worker({str(tmp_path_factory.mktemp('trainer'))!r})")


def test_trainer_trains_and_evaluates_on_the_hpu_as_on_the_cpu(trainer_runs):
    hpu, cpu = trainer_runs["hpu"], trainer_runs["cpu"]
    assert trainer_runs["hpu_available"] is True
    assert trainer_runs["lazy"] == htcore.is_lazy()  # the mode this suite runs in
    assert hpu["args_device"] == "hpu:0" and hpu["param_device"] == "hpu:0"
    assert cpu["args_device"] == "cpu" and cpu["param_device"] == "cpu"
    assert len(hpu["losses"]) == len(cpu["losses"]) == 16  # 64 samples / 8, 2 epochs, one log per step
    torch.testing.assert_close(hpu["losses"], cpu["losses"], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(hpu["grad_norms"], cpu["grad_norms"], rtol=1e-3, atol=1e-5)
    assert hpu["train_loss"] == pytest.approx(cpu["train_loss"], rel=1e-4)
    assert hpu["eval_loss"] == pytest.approx(cpu["eval_loss"], rel=1e-4)
    assert hpu["eval_accuracy"] == cpu["eval_accuracy"]
    assert trainer_runs["fallbacks"] == {}  # everything ran on the card


def test_trainer_bf16_runs_under_autocast_on_the_hpu(trainer_runs):
    hpu, hpu16, cpu16 = trainer_runs["hpu"], trainer_runs["hpu_bf16"], trainer_runs["cpu_bf16"]
    assert hpu16["args_device"] == "hpu:0" and hpu16["param_device"] == "hpu:0"
    assert all(math.isfinite(v) for v in hpu16["losses"]) and len(hpu16["losses"]) == 16
    assert hpu16["losses"] != hpu["losses"]  # autocast changed the arithmetic
    # The hpu's autocast lists are not the CPU's, so only bf16's precision is shared.
    torch.testing.assert_close(hpu16["losses"], cpu16["losses"], rtol=0, atol=2e-2)
    torch.testing.assert_close(hpu16["losses"], hpu["losses"], rtol=0, atol=2e-2)
    assert hpu16["eval_loss"] == pytest.approx(cpu16["eval_loss"], abs=2e-2)


def test_accelerator_picks_the_hpu_and_trains_as_on_the_cpu():
    runs = _run_worker("accelerate_worker()")
    hpu, cpu = runs["hpu"], runs["cpu"]
    assert hpu["device"] == "hpu" and hpu["distributed_type"] == "DistributedType.NO"
    assert hpu["param_device"] == "hpu:0" and hpu["batch_device"] == "hpu:0"
    assert cpu["param_device"] == "cpu" and cpu["batch_device"] == "cpu"
    assert len(hpu["losses"]) == 12
    torch.testing.assert_close(hpu["losses"], cpu["losses"], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(hpu["eval_logits"], cpu["eval_logits"], rtol=1e-4, atol=1e-5)
    hpu16, cpu16 = runs["hpu_bf16"], runs["cpu_bf16"]
    assert hpu16["param_device"] == "hpu:0" and hpu16["losses"] != hpu["losses"]
    torch.testing.assert_close(hpu16["losses"], cpu16["losses"], rtol=0, atol=2e-2)
    assert runs["fallbacks"] == {}
