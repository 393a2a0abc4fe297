"""Tensor-parallel greedy generation of examples/text_generation.py on
several cards: under torchrun each rank holds 1/N of every head and of the
MLP (column-parallel c_attn/c_fc, row-parallel c_proj all-reducing over
hccl), with and without the static KV cache, and emits the tokens of
transformers' generate() on the unsharded model on the CPU, and of the
unsharded model on one card. Every rank checks; rank 0 prints
'TEXTGEN TP OK world=N lazy=L'.

    torchrun --nproc_per_node=2 tests/dist/text_generation_tp_worker.py
"""
import importlib.util
import pathlib
import sys

import torch
import torch.distributed as dist

import habana_torch.distributed.hccl as hccl

_path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "text_generation.py"
_spec = importlib.util.spec_from_file_location("text_generation", _path)
tg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tg)

BATCH, PROMPT, NEW = 2, 7, 12


def main():
    world, rank, local_rank = hccl.initialize_distributed_hpu()
    dist.init_process_group("hccl")
    torch.hpu.set_device(local_rank)
    hf = tg.small_gpt2(seed=3, n_embd=64, n_layer=2, n_head=4, vocab=97, n_positions=64, initializer_range=0.2)
    prompt = torch.randint(1, 97, (BATCH, PROMPT), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=NEW,
                           min_new_tokens=NEW, do_sample=False, use_cache=True, pad_token_id=0)
    assert len(set(want[:, PROMPT:].flatten().tolist())) > 4, "the reference tokens barely change"
    for cache in (True, False):
        one = tg.StaticGPT2(hf, BATCH, PROMPT + NEW, cache).to("hpu")
        got_one, _, _ = tg.generate(one, prompt.to("hpu"), NEW, torch.hpu.synchronize)
        model = tg.StaticGPT2(hf, BATCH, PROMPT + NEW, cache, tp=(rank, world)).to("hpu")
        attn = model.tr.h[0].attn
        assert isinstance(attn.c_attn, tg.ColumnParallel) and isinstance(attn.c_proj, tg.RowParallel)
        assert attn.c_attn.weight.shape == (64, 3 * 64 // world), attn.c_attn.weight.shape
        assert model.tr.h[0].mlp.c_proj.weight.shape == (4 * 64 // world, 64)
        for _ in range(2):
            got, _, _ = tg.generate(model, prompt.to("hpu"), NEW, torch.hpu.synchronize)
            assert torch.equal(got, want), f"rank {rank} cache={cache}: {got.tolist()} != {want.tolist()}"
        assert torch.equal(got_one, want), f"rank {rank}: one card differs from generate()"
    dist.barrier()
    if rank == 0:
        import habana_torch.core as htcore
        print(f"TEXTGEN TP OK world={world} lazy={int(htcore.is_lazy())} tokens={NEW}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
