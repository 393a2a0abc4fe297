"""examples/placement_and_trials.py: the placement report, a trial on hpu
against the same trial on the CPU, and trials pinned to their own cards."""
import importlib.util
import os
import subprocess
import sys

import pytest
import torch

pytest.importorskip("sklearn")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "examples", "placement_and_trials.py")


def _example():
    spec = importlib.util.spec_from_file_location("placement_and_trials", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_trial_on_hpu_matches_the_cpu():
    ex = _example()
    data = ex.digits()
    config = {"lr": 1e-3, "batch": 64, "hidden": 64}
    hpu = ex.train(config, "hpu", False, data, epochs=2)
    cpu = ex.train(config, "cpu", False, data, epochs=2)
    assert hpu["train_loss"] == pytest.approx(cpu["train_loss"], rel=1e-4)
    assert abs(hpu["val_accuracy"] - cpu["val_accuracy"]) <= 1 / 360 + 1e-9  # at most one digit flips
    assert hpu["val_accuracy"] > 0.8  # it learns: 10 classes, ~10% by chance


def test_placement_report_counts_no_fallback(capsys):
    ex = _example()
    assert ex.placement_report("hpu", True, ex.digits()) == 0
    out = capsys.readouterr().out
    assert "addmm" in out and "card" in out
    assert "CPU fallbacks in this step: 0" in out


def test_trials_run_each_on_its_own_card():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, SCRIPT, "--trials", "2", "--cards", "2", "--epochs", "1",
                        "--skip-report"], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert [row[3] for row in rows] == ["0", "1"], r.stdout  # card column
    assert all(row[-1] == "0" for row in rows), r.stdout  # no CPU fallback in any trial
    assert "== best: trial" in r.stdout


def test_bad_card_count_is_a_clear_error():
    r = subprocess.run([sys.executable, SCRIPT, "--cards", "99"], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)))
    assert r.returncode == 2
    assert "--cards must be between 1 and the" in r.stderr
