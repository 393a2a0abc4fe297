"""Greedy generation of 100 tokens: hpu with HPU graphs vs torch CPU eager,
with a latency table like Gaudi's BLOOMZ benchmark (first token, per token,
total). Target: hpu + HPU graphs <= 0.8x the CPU time.

The decode step is also run under torch.compile: with hpu_backend in eager
mode (the default mode and mode="reduce-overhead", both replaying it as an
HPU graph), and with inductor on the CPU (--no-inductor skips it: its
compilation takes tens of seconds). The prefill runs uncompiled.

Every row runs in this process, interleaved round by round, best of
--rounds. The model is GPT-2 h256 L4 (a small local config, random
weights) with the static KV cache of examples/text_generation.py; the CPU
runs the same code, and transformers' own generate() (dynamic cache) is
shown too. All rows must produce the same tokens.

    python bench/generation.py [--new 100] [--prompt 32] [--batch 1] [--threads 2] [--rounds 5] [--no-inductor]
"""
import argparse
import importlib.util
import pathlib
import time

import torch

import habana_torch  # noqa: F401
import habana_torch.core as htcore
from habana_torch.hpu import wrap_in_hpu_graph

_path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "text_generation.py"
_spec = importlib.util.spec_from_file_location("text_generation", _path)
tg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tg)


def hf_generate(hf, prompt, new):
    t0 = time.perf_counter()
    with torch.no_grad():
        ids = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new,
                          min_new_tokens=new, do_sample=False, use_cache=True, pad_token_id=0)
    return ids, None, time.perf_counter() - t0  # no first-token time from generate()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--new", type=int, default=100)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-inductor", action="store_true", help="skip torch.compile with inductor on the CPU")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    hf = tg.small_gpt2()
    max_len = args.prompt + args.new
    prompt = torch.randint(1, hf.config.vocab_size, (args.batch, args.prompt),
                           generator=torch.Generator().manual_seed(1))
    cpu_model = tg.StaticGPT2(hf, args.batch, max_len)
    hpu_eager = tg.StaticGPT2(hf, args.batch, max_len).to("hpu")
    hpu_graphs = wrap_in_hpu_graph(tg.StaticGPT2(hf, args.batch, max_len).to("hpu"))

    def compiled(model, **kw):
        model.forward = torch.compile(model.forward, **kw)
        return model

    hpu_compiled = compiled(tg.StaticGPT2(hf, args.batch, max_len).to("hpu"), backend="hpu_backend")
    hpu_replayed = compiled(tg.StaticGPT2(hf, args.batch, max_len).to("hpu"), backend="hpu_backend",
                            mode="reduce-overhead")
    sync = torch.hpu.synchronize
    no_sync = lambda: None  # noqa: E731

    # Lazy mode is the default (as on Gaudi): each hpu row sets its own mode.
    def in_mode(lazy_on):
        def run(*a):
            was = htcore.is_lazy()
            htcore._set_lazy_mode(lazy_on)
            try:
                return tg.generate(*a)
            finally:
                htcore._set_lazy_mode(was)
        return run

    rows = {
        "torch cpu eager (static cache)": lambda: tg.generate(cpu_model, prompt, args.new, no_sync),
        "torch cpu eager (transformers generate)": lambda: hf_generate(hf, prompt, args.new),
        "hpu eager": lambda: in_mode(False)(hpu_eager, prompt.to("hpu"), args.new, sync),
        "hpu lazy": lambda: in_mode(True)(hpu_eager, prompt.to("hpu"), args.new, sync),
        "hpu + HPU graphs": lambda: tg.generate(hpu_graphs, prompt.to("hpu"), args.new, sync),
        "hpu compiled (eager mode)": lambda: in_mode(False)(hpu_compiled, prompt.to("hpu"), args.new, sync),
        "hpu compiled, reduce-overhead (eager mode)":
            lambda: in_mode(False)(hpu_replayed, prompt.to("hpu"), args.new, sync),
    }
    if not args.no_inductor:
        cpu_inductor = compiled(tg.StaticGPT2(hf, args.batch, max_len), backend="inductor")
        rows["torch cpu compile (inductor)"] = lambda: tg.generate(cpu_inductor, prompt, args.new, no_sync)
    best = {name: (float("inf"), float("inf")) for name in rows}
    tokens = {}
    for name, run in rows.items():  # warm-up: captures the graph, compiles lazy recipes
        tokens[name] = run()[0]
    for _ in range(args.rounds):
        for name, run in rows.items():
            ids, first, total = run()
            b = best[name]
            best[name] = (min(b[0], first) if first is not None else None, min(b[1], total))
    ref = tokens["torch cpu eager (static cache)"]
    for name, ids in tokens.items():
        if not torch.equal(ids, ref):
            raise SystemExit(f"{name} generated other tokens than the CPU: {ids[0, -8:].tolist()} vs "
                             f"{ref[0, -8:].tolist()}")

    cpu_total = best["torch cpu eager (static cache)"][1]
    print(f"GPT-2 h256 L4, batch {args.batch}, prompt {args.prompt}, {args.new} new tokens, "
          f"{args.threads} threads, best of {args.rounds} (all rows: identical tokens)")
    print("| run | first token (ms) | per token (ms) | total (ms) | time vs torch cpu eager |")
    print("|---|---:|---:|---:|---:|")
    for name, (first, total) in best.items():
        per = (total - first) / (args.new - 1) if first is not None else total / args.new
        first_s = f"{first * 1e3:.2f}" if first is not None else "-"
        print(f"| {name} | {first_s} | {per * 1e3:.3f} | {total * 1e3:.1f} | {total / cpu_total:.2f} |")
    ratio = best["hpu + HPU graphs"][1] / cpu_total
    print(f"hpu + HPU graphs / torch cpu eager: {ratio:.2f} (target <= 0.8)")
    for name in ("hpu compiled (eager mode)", "hpu compiled, reduce-overhead (eager mode)"):
        line = f"{name}: / hpu lazy {best[name][1] / best['hpu lazy'][1]:.2f}, / torch cpu eager {best[name][1] / cpu_total:.2f}"
        if "torch cpu compile (inductor)" in best:
            line += f", / inductor cpu {best[name][1] / best['torch cpu compile (inductor)'][1]:.2f}"
        print(line)


if __name__ == "__main__":
    main()
