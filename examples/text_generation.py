"""Greedy text generation the way Gaudi runs it (optimum-habana's
run_generation.py: static shapes, a static KV cache, the decode step in an
HPU graph, bf16, tensor parallelism across cards), on a GPT-2 built from a
local config (random weights, nothing is downloaded), with a latency table
for the hpu and the CPU side by side.

    python examples/text_generation.py --use_kv_cache --use_hpu_graphs --batch_sizes 1,4
    python examples/text_generation.py --use_kv_cache --tp 2            # 2 cards over hccl
    torchrun --nproc_per_node=2 examples/text_generation.py --use_kv_cache   # the same, launched by hand

For every batch size the same prompt runs on the hpu and then on the CPU
(one warm-up, then the best of --n_iterations): first token (the prompt's
forward), per token (each further decode step), total, tokens/s, and
whether the hpu gave the CPU's tokens.

Static shapes: with --use_kv_cache the keys and values go in a cache of
prompt + max_new_tokens positions, so every decode step is the same graph
(one capture, then one replay per token); without it every step runs the
whole padded sequence again (still one shape). With --tp N each of N
processes holds 1/N of every attention head and of the MLP
(column-parallel c_attn and c_fc, row-parallel c_proj that all-reduce
over hccl), and all of them emit the same tokens as one card.
"""
import argparse
import copy
import math
import os
import subprocess
import sys
import time

import torch


class ColumnParallel(torch.nn.Module):
    """Rank `rank`'s share of the output columns of a GPT-2 Conv1D
    (y = x @ W + b, W [in, out]). `parts` splits out into that many equal
    blocks first (c_attn's q, k, v), and each block is sharded alike."""

    def __init__(self, conv, rank, world, parts=1):
        super().__init__()
        w, b = conv.weight.detach(), conv.bias.detach()
        size = w.shape[1] // parts
        if size % world:
            raise ValueError(f"{size} columns do not split across {world} ranks")
        shard = size // world
        cols = torch.cat([torch.arange(p * size + rank * shard, p * size + (rank + 1) * shard)
                          for p in range(parts)])
        self.weight = torch.nn.Parameter(w[:, cols].contiguous(), requires_grad=False)
        self.bias = torch.nn.Parameter(b[cols].contiguous(), requires_grad=False)

    def forward(self, x):
        return x @ self.weight + self.bias


class RowParallel(torch.nn.Module):
    """Rank `rank`'s share of the input rows of a GPT-2 Conv1D: a partial
    product, summed over the ranks by all_reduce, then the bias."""

    def __init__(self, conv, rank, world):
        super().__init__()
        w = conv.weight.detach()
        shard = w.shape[0] // world
        self.weight = torch.nn.Parameter(w[rank * shard:(rank + 1) * shard].contiguous(), requires_grad=False)
        self.bias = torch.nn.Parameter(conv.bias.detach().clone(), requires_grad=False)

    def forward(self, x):
        import torch.distributed as dist

        y = x @ self.weight
        dist.all_reduce(y)
        return y + self.bias


class StaticGPT2(torch.nn.Module):
    """GPT-2 inference at static shapes over `max_len` positions.

    prefill(ids) runs the prompt and returns the first new token;
    forward(ids, pos) is one decode step: ids [batch, 1], pos a 1-element
    long tensor (the position being written), returns the next ids
    [batch, 1]. Shapes never change from one step to the next.

    use_kv_cache=True keeps each layer's keys and values in preallocated
    buffers; False keeps the tokens in a [batch, max_len] buffer and runs
    all max_len positions at every step (the causal mask keeps the unwritten
    ones from mattering). tp=(rank, world) shards the heads and the MLP."""

    def __init__(self, hf_model, batch, max_len, use_kv_cache=True, tp=None):
        super().__init__()
        cfg = hf_model.config
        if max_len > cfg.n_positions:
            raise ValueError(f"max_len {max_len} exceeds the model's n_positions {cfg.n_positions}")
        rank, world = tp or (0, 1)
        if cfg.n_head % world:
            raise ValueError(f"{cfg.n_head} heads do not split across {world} ranks")
        # Copies: moving this model to a device must not move hf_model.
        self.tr = copy.deepcopy(hf_model.transformer)
        self.lm_head = copy.deepcopy(hf_model.lm_head)
        if world > 1:
            for block in self.tr.h:
                block.attn.c_attn = ColumnParallel(block.attn.c_attn, rank, world, parts=3)
                block.attn.c_proj = RowParallel(block.attn.c_proj, rank, world)
                block.mlp.c_fc = ColumnParallel(block.mlp.c_fc, rank, world)
                block.mlp.c_proj = RowParallel(block.mlp.c_proj, rank, world)
        self.heads = cfg.n_head // world
        self.head_dim = cfg.n_embd // cfg.n_head
        self.max_len = max_len
        self.use_kv_cache = use_kv_cache
        dtype = hf_model.lm_head.weight.dtype
        if use_kv_cache:
            shape = (batch, self.heads, max_len, self.head_dim)
            for i in range(cfg.n_layer):
                self.register_buffer(f"k{i}", torch.zeros(shape, dtype=dtype), persistent=False)
                self.register_buffer(f"v{i}", torch.zeros(shape, dtype=dtype), persistent=False)
        else:
            self.register_buffer("tokens", torch.zeros(batch, max_len, dtype=torch.long), persistent=False)
        self.register_buffer("positions", torch.arange(max_len), persistent=False)

    def _split(self, x):  # [B, T, H*D] -> [B, H, T, D]
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).transpose(1, 2)

    def _block(self, i, block, h, write, visible):
        """write(i, k, v) gives the keys and values the queries attend to
        (the cache's, or these); visible [T, S] says which of the S
        positions each query may see."""
        q, k, v = block.attn.c_attn(block.ln_1(h)).split(self.heads * self.head_dim, dim=2)
        k, v = write(i, self._split(k), self._split(v))
        scores = self._split(q) @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~visible, torch.finfo(scores.dtype).min)
        a = torch.softmax(scores, dim=-1) @ v                  # [B, H, T, D]
        a = a.transpose(1, 2).reshape(h.shape[0], h.shape[1], -1)
        h = h + block.attn.c_proj(a)
        return h + block.mlp(block.ln_2(h))

    def _run(self, ids, pos, write, visible):
        h = self.tr.wte(ids) + self.tr.wpe(pos)
        for i, block in enumerate(self.tr.h):
            h = self._block(i, block, h, write, visible)
        return h

    def _next(self, h):
        return self.lm_head(self.tr.ln_f(h)).argmax(-1)            # [B, 1]

    def _recompute(self, pos):
        """No cache: every position again; the hidden state at pos."""
        causal = self.positions.view(1, -1) <= self.positions.view(-1, 1)
        h = self._run(self.tokens, self.positions, lambda i, k, v: (k, v), causal)
        return self._next(h.index_select(1, pos))

    def prefill(self, ids):
        t = ids.shape[1]
        if not self.use_kv_cache:
            self.tokens[:, :t].copy_(ids)
            return self._recompute(self.positions[t - 1:t])
        pos = self.positions[:t]

        def write(i, k, v):
            kc, vc = getattr(self, f"k{i}"), getattr(self, f"v{i}")
            kc[:, :, :t].copy_(k)
            vc[:, :, :t].copy_(v)
            return kc, vc

        visible = self.positions.view(1, -1) <= pos.view(-1, 1)   # causal, [T, max_len]
        return self._next(self._run(ids, pos, write, visible)[:, -1:])

    def forward(self, ids, pos):
        if not self.use_kv_cache:
            self.tokens.index_copy_(1, pos, ids)
            return self._recompute(pos)

        def write(i, k, v):
            kc, vc = getattr(self, f"k{i}"), getattr(self, f"v{i}")
            kc.index_copy_(2, pos, k)
            vc.index_copy_(2, pos, v)
            return kc, vc

        visible = (self.positions <= pos).view(1, -1)             # [1, max_len]
        return self._next(self._run(ids, pos, write, visible))



def generate(model, prompt, new_tokens, sync):
    """Greedy decoding: returns (ids [B, prompt + new], first-token seconds,
    total seconds). `sync` waits for the device (a no-op on the CPU)."""
    device = prompt.device
    t0 = time.perf_counter()
    with torch.no_grad():
        nxt = model.prefill(prompt)
        pos = torch.tensor([prompt.shape[1]], device=device)
        out = [nxt]
        sync()
        t_first = time.perf_counter() - t0
        for _ in range(new_tokens - 1):
            nxt = model(nxt, pos)
            out.append(nxt.clone())  # an HPU graph rewrites its output at the next replay
            pos = pos + 1
        ids = torch.cat([prompt] + out, dim=1).cpu()
    return ids, t_first, time.perf_counter() - t0


CONFIGS = {  # --model: GPT-2 shapes (random weights)
    "small": dict(n_embd=256, n_layer=4, n_head=4, vocab=1000, n_positions=256),
    "gpt2": dict(n_embd=768, n_layer=12, n_head=12, vocab=50257, n_positions=1024),  # GPT-2's 124M
}


def small_gpt2(seed=0, n_embd=256, n_layer=4, n_head=4, vocab=1000, n_positions=256,
               initializer_range=0.02):
    """A randomly initialised GPT-2 (no download). Such a model soon repeats
    one token; tests raise initializer_range so the tokens keep changing and
    a wrong cache position shows."""
    import transformers
    cfg = transformers.GPT2Config(n_embd=n_embd, n_layer=n_layer, n_head=n_head, vocab_size=vocab,
                                  n_positions=n_positions, bos_token_id=0, eos_token_id=0,
                                  initializer_range=initializer_range)
    torch.manual_seed(seed)
    return transformers.GPT2LMHeadModel(cfg).eval()


def measure(model, prompt, new_tokens, sync, iterations):
    """One warm-up (compiles, captures), then the best of `iterations` runs:
    (ids, first-token s, per-token s, total s)."""
    generate(model, prompt, new_tokens, sync)
    runs = [generate(model, prompt, new_tokens, sync) for _ in range(iterations)]
    first = min(r[1] for r in runs)
    total = min(r[2] for r in runs)
    return runs[-1][0], first, (total - first) / max(new_tokens - 1, 1), total


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--device", default="hpu,cpu",
                    help="devices to run and compare, in order (default hpu,cpu; 'hpu' alone skips the CPU)")
    ap.add_argument("--batch_sizes", default="1,4", help="comma-separated batch sizes (default 1,4)")
    ap.add_argument("--max_new_tokens", type=int, default=100)
    ap.add_argument("--prompt_length", type=int, default=32)
    ap.add_argument("--use_kv_cache", action="store_true", help="keep keys and values in a static cache")
    ap.add_argument("--use_hpu_graphs", action="store_true", help="replay the decode step as an HPU graph")
    ap.add_argument("--torch_compile", action="store_true",
                    help="compile the decode step with torch.compile(backend='hpu_backend'), which "
                         "replays it as an HPU graph (with --use_hpu_graphs: mode='reduce-overhead', "
                         "the same here)")
    ap.add_argument("--bf16", action="store_true", help="run the model in bfloat16 (both devices)")
    ap.add_argument("--model", default="small", choices=sorted(CONFIGS),
                    help="GPT-2 shape: small (4 layers, 256 wide) or gpt2 (GPT-2's 124M); random weights")
    ap.add_argument("--tp", type=int, default=0,
                    help="tensor parallelism over this many cards (spawns torchrun; under torchrun: WORLD_SIZE)")
    ap.add_argument("--n_iterations", type=int, default=3, help="timed runs after one warm-up")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    args = ap.parse_args(argv)
    try:
        args.batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    except ValueError:
        ap.error(f"--batch_sizes must be comma-separated integers, got {args.batch_sizes!r}")
    args.device = args.device.split(",")
    for name, ok in [("--batch_sizes", all(b > 0 for b in args.batch_sizes)),
                     ("--max_new_tokens", args.max_new_tokens > 0), ("--prompt_length", args.prompt_length > 0),
                     ("--n_iterations", args.n_iterations > 0), ("--tp", args.tp >= 0)]:
        if not ok:
            ap.error(f"{name} must be positive")
    if not set(args.device) <= {"hpu", "cpu"} or len(set(args.device)) != len(args.device):
        ap.error(f"--device must be hpu, cpu or both (comma-separated), got {','.join(args.device)!r}")
    if args.use_hpu_graphs and "hpu" not in args.device:
        ap.error("--use_hpu_graphs needs the hpu in --device")
    if args.torch_compile and "hpu" not in args.device:
        ap.error("--torch_compile needs the hpu in --device (the CPU runs the reference uncompiled)")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if args.tp and "WORLD_SIZE" in os.environ and args.tp != world:
        ap.error(f"--tp {args.tp} under a launcher of WORLD_SIZE {world}")
    if world > 1 or args.tp > 1:
        if "hpu" not in args.device:
            ap.error("tensor parallelism runs on hpu cards: --device must include hpu")
        if args.use_hpu_graphs:
            ap.error("--use_hpu_graphs with tensor parallelism: an HPU graph cannot capture the "
                     "all-reduce of the row-parallel layers here; run without it (lazy mode)")
        if args.torch_compile:
            ap.error("--torch_compile with tensor parallelism is not supported here; run without it")
    max_len = args.prompt_length + args.max_new_tokens
    if max_len > CONFIGS[args.model]["n_positions"]:
        ap.error(f"--prompt_length + --max_new_tokens = {max_len} exceeds the model's "
                 f"{CONFIGS[args.model]['n_positions']} positions")
    return args


def spawn(args, argv):
    """--tp N outside a launcher: run this script under torchrun with N processes."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={args.tp}",
           f"--master_port={port}", os.path.abspath(__file__), *argv]
    return subprocess.call(cmd)


def run(args):
    """Runs every batch size on every device; returns the rows of the table
    (dicts) on rank 0, None on the other ranks."""
    import habana_torch  # noqa: F401  (registers torch.hpu)

    tp = None
    if "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1:
        import torch.distributed as dist
        import habana_torch.distributed.hccl as hccl

        world, rank, local_rank = hccl.initialize_distributed_hpu()
        dist.init_process_group("hccl")
        torch.hpu.set_device(local_rank)
        tp = (rank, world)
    rank0 = tp is None or tp[0] == 0
    dtype = torch.bfloat16 if args.bf16 else torch.float32
    hf = small_gpt2(seed=args.seed, **CONFIGS[args.model]).to(dtype)
    max_len = args.prompt_length + args.max_new_tokens
    rows = []
    for device in args.device:
        if device == "cpu" and tp is not None:
            # The CPU reference runs once, unsharded, on rank 0, with the
            # threads torchrun took away (it sets OMP_NUM_THREADS=1).
            import torch.distributed as dist
            dist.destroy_process_group()
            if not rank0:
                break
            torch.set_num_threads(os.cpu_count())
        for batch in args.batch_sizes:
            prompt = torch.randint(1, hf.config.vocab_size, (batch, args.prompt_length),
                                   generator=torch.Generator().manual_seed(1))
            model = StaticGPT2(hf, batch, max_len, args.use_kv_cache,
                               tp if device == "hpu" else None).to(device)
            sync = lambda: None  # noqa: E731
            if device == "hpu":
                sync = torch.hpu.synchronize
                if args.torch_compile:
                    # the decode step; the prefill runs once and as written
                    mode = "reduce-overhead" if args.use_hpu_graphs else None
                    model.forward = torch.compile(model.forward, backend="hpu_backend", mode=mode)
                elif args.use_hpu_graphs:
                    from habana_torch.hpu import wrap_in_hpu_graph
                    model = wrap_in_hpu_graph(model)
            ids, first, per_token, total = measure(model, prompt.to(device), args.max_new_tokens, sync,
                                                   args.n_iterations)
            rows.append(dict(batch=batch, device=device, ids=ids, first=first, per_token=per_token,
                             total=total, tokens_per_s=batch * args.max_new_tokens / total))
            del model
    if tp is not None and "cpu" not in args.device:
        import torch.distributed as dist
        dist.destroy_process_group()
    rows.sort(key=lambda r: r["batch"])  # stable: each batch's rows in --device order
    return rows if rank0 else None


def print_table(args, rows):
    world = int(os.environ.get("WORLD_SIZE", "1"))
    hpu = f"hpu x{world} (tensor parallel)" if world > 1 else "hpu"
    print(f"GPT-2, {args.model} shape (random weights), {'bf16' if args.bf16 else 'fp32'}, prompt "
          f"{args.prompt_length}, {args.max_new_tokens} new tokens, "
          f"{'static KV cache' if args.use_kv_cache else 'no KV cache'}"
          f"{', torch.compile' if args.torch_compile else ''}"
          f"{', HPU graphs' if args.use_hpu_graphs else ''}, best of {args.n_iterations}")
    print("| batch | device | first token (ms) | per token (ms) | total (ms) | tokens/s | same tokens as CPU |")
    print("|---:|---|---:|---:|---:|---:|---|")
    cpu = {r["batch"]: r for r in rows if r["device"] == "cpu"}
    for r in rows:
        same = "-" if r["device"] == "cpu" or r["batch"] not in cpu else \
            ("yes" if torch.equal(r["ids"], cpu[r["batch"]]["ids"]) else "NO")
        print(f"| {r['batch']} | {hpu if r['device'] == 'hpu' else 'cpu'} | {r['first'] * 1e3:.1f} | "
              f"{r['per_token'] * 1e3:.2f} | {r['total'] * 1e3:.0f} | {r['tokens_per_s']:.0f} | {same} |")
    for b in args.batch_sizes:
        pair = {r["device"]: r for r in rows if r["batch"] == b}
        if len(pair) == 2:
            print(f"batch {b}: hpu tokens/s {pair['hpu']['tokens_per_s'] / pair['cpu']['tokens_per_s']:.2f}x the CPU's")
    print(f"generated ids (batch {rows[-1]['batch']}, first sequence, last 16): {rows[-1]['ids'][0, -16:].tolist()}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.tp > 1 and "WORLD_SIZE" not in os.environ:
        return spawn(args, argv)
    rows = run(args)
    if rows is not None:
        print_table(args, rows)
        if any(r["device"] == "hpu" and not torch.equal(r["ids"], c["ids"])
               for r in rows for c in rows if c["device"] == "cpu" and c["batch"] == r["batch"]):
            print("the hpu's tokens differ from the CPU's", file=sys.stderr)
            return 0 if args.bf16 else 1  # bf16 rounds differently on each side; fp32 must agree
    return 0


if __name__ == "__main__":
    sys.exit(main())
