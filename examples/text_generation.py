"""Greedy text generation with a static KV cache, the way Gaudi runs it
(optimum-habana's run_generation.py: static shapes, the decode step in an
HPU graph), on a GPT-2 built from a small local config (no download).

    python examples/text_generation.py --device hpu --use_hpu_graphs
    python examples/text_generation.py --device cpu            # the same code on the CPU

Prints the generated ids and a latency table (first token, per token,
total). The static cache makes every decode step the same graph: one
capture, then one replay per token. `StaticKVGPT2` reads its weights from a
`transformers.GPT2LMHeadModel`, so its tokens can be checked against
`model.generate()` (tests/python/test_text_generation.py does).
"""
import argparse
import copy
import math
import time

import torch
import torch.nn.functional as F


class StaticKVGPT2(torch.nn.Module):
    """GPT-2 inference with a preallocated KV cache of `max_len` positions.

    prefill(ids) runs the prompt and returns the first new token;
    forward(ids, pos) is one decode step: ids [batch, 1], pos a 1-element
    long tensor (the position being written), returns the next ids
    [batch, 1]. Shapes never change from one step to the next."""

    def __init__(self, hf_model, batch, max_len):
        super().__init__()
        cfg = hf_model.config
        if max_len > cfg.n_positions:
            raise ValueError(f"max_len {max_len} exceeds the model's n_positions {cfg.n_positions}")
        # Copies: moving this model to a device must not move hf_model.
        self.tr = copy.deepcopy(hf_model.transformer)
        self.lm_head = copy.deepcopy(hf_model.lm_head)
        self.heads = cfg.n_head
        self.head_dim = cfg.n_embd // cfg.n_head
        self.max_len = max_len
        shape = (batch, self.heads, max_len, self.head_dim)
        dtype = hf_model.lm_head.weight.dtype
        for i in range(cfg.n_layer):
            self.register_buffer(f"k{i}", torch.zeros(shape, dtype=dtype), persistent=False)
            self.register_buffer(f"v{i}", torch.zeros(shape, dtype=dtype), persistent=False)
        self.register_buffer("positions", torch.arange(max_len), persistent=False)

    def _split(self, x):  # [B, T, E] -> [B, H, T, D]
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).transpose(1, 2)

    def _block(self, i, block, h, write, visible):
        """write(cache, new) stores this step's keys/values; visible
        [T, max_len] says which cached positions each query may see."""
        q, k, v = block.attn.c_attn(block.ln_1(h)).split(h.shape[-1], dim=2)
        kc, vc = getattr(self, f"k{i}"), getattr(self, f"v{i}")
        write(kc, self._split(k))
        write(vc, self._split(v))
        scores = self._split(q) @ kc.transpose(-1, -2) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~visible, torch.finfo(scores.dtype).min)
        a = torch.softmax(scores, dim=-1) @ vc                 # [B, H, T, D]
        a = a.transpose(1, 2).reshape(h.shape)
        h = h + block.attn.c_proj(a)
        return h + block.mlp(block.ln_2(h))

    def _logits_next(self, h):
        logits = self.lm_head(self.tr.ln_f(h[:, -1:]))
        return logits.argmax(-1)                               # [B, 1]

    def prefill(self, ids):
        t = ids.shape[1]
        pos = self.positions[:t]
        h = self.tr.wte(ids) + self.tr.wpe(pos)
        visible = self.positions.view(1, -1) <= pos.view(-1, 1)   # causal, [T, max_len]

        def write(cache, new):
            cache[:, :, :t].copy_(new)

        for i, block in enumerate(self.tr.h):
            h = self._block(i, block, h, write, visible)
        return self._logits_next(h)

    def forward(self, ids, pos):
        h = self.tr.wte(ids) + self.tr.wpe(pos)
        visible = (self.positions <= pos).view(1, -1)            # [1, max_len]

        def write(cache, new):
            cache.index_copy_(2, pos, new)

        for i, block in enumerate(self.tr.h):
            h = self._block(i, block, h, write, visible)
        return self._logits_next(h)


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="hpu", choices=["hpu", "cpu"])
    ap.add_argument("--use_hpu_graphs", action="store_true", help="replay the decode step as an HPU graph")
    ap.add_argument("--max_new_tokens", type=int, default=100)
    ap.add_argument("--prompt_length", type=int, default=32)
    ap.add_argument("--batch_size", type=int, default=1)
    ap.add_argument("--bf16", action="store_true", help="run the model in bfloat16")
    ap.add_argument("--n_iterations", type=int, default=3, help="timed runs after one warm-up")
    args = ap.parse_args()
    if args.use_hpu_graphs and args.device != "hpu":
        ap.error("--use_hpu_graphs needs --device hpu")

    dtype = torch.bfloat16 if args.bf16 else torch.float32
    hf = small_gpt2().to(dtype)
    max_len = args.prompt_length + args.max_new_tokens
    model = StaticKVGPT2(hf, args.batch_size, max_len).to(args.device)
    sync = lambda: None  # noqa: E731
    if args.device == "hpu":
        import habana_torch  # noqa: F401
        sync = torch.hpu.synchronize
        if args.use_hpu_graphs:
            from habana_torch.hpu import wrap_in_hpu_graph
            model = wrap_in_hpu_graph(model)
    prompt = torch.randint(1, hf.config.vocab_size, (args.batch_size, args.prompt_length),
                           generator=torch.Generator().manual_seed(1)).to(args.device)

    generate(model, prompt, args.max_new_tokens, sync)  # warm-up (captures the graph)
    runs = [generate(model, prompt, args.max_new_tokens, sync) for _ in range(args.n_iterations)]
    ids = runs[-1][0]
    first = min(r[1] for r in runs)
    total = min(r[2] for r in runs)
    per_token = (total - first) / max(args.max_new_tokens - 1, 1)
    print(f"device {args.device}{' + HPU graphs' if args.use_hpu_graphs else ''}, {dtype}, "
          f"batch {args.batch_size}, prompt {args.prompt_length}, {args.max_new_tokens} new tokens")
    print(f"generated ids (first sequence, last 16): {ids[0, -16:].tolist()}")
    print("| first token (ms) | per token (ms) | total (ms) | tokens/s |")
    print("|---:|---:|---:|---:|")
    print(f"| {first * 1e3:.2f} | {per_token * 1e3:.3f} | {total * 1e3:.1f} | "
          f"{args.batch_size * args.max_new_tokens / total:.0f} |")


if __name__ == "__main__":
    main()
