"""The BERT training step that bench/lazy_bert.py and bench/compile_bert.py
time (h256 L4, fp32, AdamW), and the way both run it: every variant in
this process, round robin, after one step with dropout off has given the
same loss on every variant. Not a benchmark by itself."""
import argparse
import copy
import statistics
import time

import torch

import habana_torch  # noqa: F401
import habana_torch.core as htcore


def build(seed=0):
    import transformers
    cfg = transformers.BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                  intermediate_size=1024, vocab_size=1000, max_position_embeddings=512,
                                  num_labels=2, problem_type="single_label_classification")
    torch.manual_seed(seed)
    return transformers.BertForSequenceClassification(cfg)


def make_step(base, ids, labels, device, lazy=None, backend=None, compile_opt=False):
    """A copy of base on device and a function that runs one training step
    of it and returns the loss: forward and backward under
    torch.compile(backend=...) when backend is given, opt.step too with
    compile_opt; in lazy or eager mode as lazy says (None: as it is)."""
    model = copy.deepcopy(base).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    i, l = ids.to(device), labels.to(device)

    def fwd_bwd():
        loss = model(input_ids=i, labels=l).loss
        loss.backward()
        return loss

    run = torch.compile(fwd_bwd, backend=backend) if backend else fwd_bwd
    opt_step = torch.compile(opt.step, backend=backend) if compile_opt else opt.step

    def step():
        was = htcore.is_lazy()
        if lazy is not None:
            htcore._set_lazy_mode(lazy)
        try:
            opt.zero_grad(set_to_none=True)
            loss = run()
            htcore.mark_step()
            opt_step()
            htcore.mark_step()
            return loss.item()  # waits for the queued work
        finally:
            htcore._set_lazy_mode(was)

    return model, step


def parse_args(skip_flag, skip_help):
    """--steps, --warmup, --threads (set here) and the bench's flag that
    skips its slowest variant."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(skip_flag, action="store_true", help=skip_help)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    return args


def base_variants():
    """The model, its inputs and the variants every BERT bench times: torch
    CPU eager (the reference), hpu eager and hpu lazy. Returns (base, ids,
    labels, variants) for the bench to add its own."""
    base = build()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 1000, (16, 128), generator=g)
    labels = torch.randint(0, 2, (16,), generator=g)
    variants = {
        "torch cpu eager": make_step(base, ids, labels, "cpu"),
        "hpu eager": make_step(base, ids, labels, "hpu", lazy=False),
        "hpu lazy": make_step(base, ids, labels, "hpu", lazy=True),
    }
    return base, ids, labels, variants


def check_same_loss(variants):
    """One step of each variant with dropout off (compiled variants compile
    here for eval mode; training mode compiles again in the warm-up); a
    variant whose loss differs from the CPU's ends the run. An inductor
    variant that cannot compile here (no working C++ compiler) is dropped
    with a note. Returns the variants that ran."""
    losses = {}
    for name, (model, step) in variants.items():
        model.eval()
        t = time.perf_counter()
        try:
            losses[name] = step()
        except Exception as e:
            if "inductor" not in name:
                raise
            print(f"{name}: cannot run here ({type(e).__name__}: {str(e).splitlines()[0][:200]}); skipped")
            continue
        if "compile" in name:
            print(f"{name}: first (eval) step incl. compilation {time.perf_counter() - t:.1f} s", flush=True)
        model.train()
    ref = losses["torch cpu eager"]
    for name, loss in losses.items():
        if abs(loss - ref) > 1e-4 * max(1.0, abs(ref)):
            raise SystemExit(f"{name}: loss {loss} differs from the CPU's {ref}")
    return {name: v for name, v in variants.items() if name in losses}


def median_times(variants, warmup, steps, threads):
    """Runs the variants round robin, warmup + steps rounds, prints the
    table of median step times and returns {name: median seconds}."""
    times = {name: [] for name in variants}
    for i in range(warmup + steps):
        for name, (_, step) in variants.items():
            t = time.perf_counter()
            step()
            if i >= warmup:
                times[name].append(time.perf_counter() - t)
            elif i == 0 and "compile" in name:
                print(f"{name}: first training step incl. compilation {time.perf_counter() - t:.1f} s",
                      flush=True)
    med = {name: statistics.median(v) for name, v in times.items()}
    cpu = med["torch cpu eager"]
    print(f"BERT h256 L4 train step, batch 16 x 128, fp32, AdamW, {threads} threads, "
          f"median of {steps} (same loss on every variant)")
    print("| variant | step (ms) | time vs torch cpu eager |")
    print("|---|---:|---:|")
    for name, t in med.items():
        print(f"| {name} | {t * 1e3:.1f} | {t / cpu:.2f} |")
    return med
