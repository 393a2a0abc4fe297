"""DeepSpeed inference with tensor parallelism on several cards: under
torchrun, deepspeed.init_inference(tensor_parallel={"tp_size": N}) shards a
small Llama (from a config, nothing downloaded) with AutoTP over the hccl
backend (each rank holds 1/N of every projection; the row-parallel ones
all-reduce their outputs) and greedy generation gives the tokens of
transformers' generate() on the unsharded model on the CPU. Every rank
checks; rank 0 prints 'DEEPSPEED TP OK world=N lazy=L tokens=T'.

GPT-2 cannot be sharded this way by DeepSpeed itself (AutoTP lists gpt2 as
unsupported, kernel injection needs DeepSpeed's CUDA inference kernels),
whatever the device; see docs/GAUDI_CODE.md.

    torchrun --nproc_per_node=2 tests/dist/deepspeed_inference_worker.py
"""
import copy
import os
import sys

import torch
import torch.distributed as dist

NEW_TOKENS = 12


def small_llama():
    import transformers

    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, vocab_size=97,
                                   max_position_embeddings=64, initializer_range=0.2, bos_token_id=0,
                                   eos_token_id=0)
    torch.manual_seed(3)
    return transformers.LlamaForCausalLM(cfg).eval()


def main():
    import deepspeed
    from deepspeed.accelerator import get_accelerator
    from deepspeed.module_inject.layers import LinearAllreduce, LinearLayer

    accel = get_accelerator()
    assert accel.device_name() == "hpu", accel.device_name()
    deepspeed.init_distributed(dist_backend=accel.communication_backend_name())
    assert dist.get_backend() == "hccl", dist.get_backend()
    world, rank = dist.get_world_size(), dist.get_rank()
    assert world == int(os.environ["WORLD_SIZE"]) > 1, world
    accel.set_device(int(os.environ["LOCAL_RANK"]))
    device = accel.current_device_name()

    hf = small_llama()
    prompt = torch.randint(1, 97, (2, 7), generator=torch.Generator().manual_seed(1))
    kw = dict(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False, use_cache=True,
              pad_token_id=0)
    with torch.no_grad():
        want = hf.generate(prompt, attention_mask=torch.ones_like(prompt), **kw)

    engine = deepspeed.init_inference(copy.deepcopy(hf), dtype=torch.float32, tensor_parallel={"tp_size": world},
                                      replace_with_kernel_inject=False)
    attn = engine.module.model.layers[0].self_attn
    assert isinstance(attn.q_proj, LinearLayer) and isinstance(attn.o_proj, LinearAllreduce), attn
    assert attn.q_proj.weight.shape[0] == 64 // world and attn.q_proj.weight.device == torch.device(device)
    with torch.no_grad():
        got = engine.module.generate(prompt.to(device), attention_mask=torch.ones_like(prompt).to(device), **kw)
    assert torch.equal(got.cpu(), want), f"rank {rank}: {got.cpu().tolist()} != {want.tolist()}"
    dist.barrier()
    if rank == 0:
        import habana_frameworks.torch.utils.internal as internal
        print(f"DEEPSPEED TP OK world={world} lazy={int(internal.is_lazy())} tokens={NEW_TOKENS}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
