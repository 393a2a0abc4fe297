"""examples/text_generation.py: greedy decoding with a static KV cache, the
decode step replayed as an HPU graph, gives transformers' own greedy tokens
(model.generate on the CPU), with one capture and no CPU fallback."""
import importlib.util
import pathlib

import pytest
import torch

import habana_torch  # noqa: F401
from habana_torch import _C
from habana_torch.hpu import wrap_in_hpu_graph

transformers = pytest.importorskip("transformers")

_path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "text_generation.py"
_spec = importlib.util.spec_from_file_location("text_generation", _path)
text_generation = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(text_generation)


def counter(name):
    return dict(_C._metric_items(name)).get(name, 0)


def reference_tokens(hf, prompt, new):
    with torch.no_grad():
        return hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new,
                           min_new_tokens=new, do_sample=False, use_cache=True, pad_token_id=0)


@pytest.mark.parametrize("batch", [1, 2])
def test_static_cache_generation_with_hpu_graphs_matches_generate(batch, fallback_counts):
    hf = text_generation.small_gpt2(seed=3, n_embd=64, n_layer=2, n_head=4, vocab=97, n_positions=64,
                                  initializer_range=0.2)
    prompt = torch.randint(1, 97, (batch, 7), generator=torch.Generator().manual_seed(batch))
    new = 12
    want = reference_tokens(hf, prompt, new)

    on_cpu = text_generation.StaticKVGPT2(hf, batch, 7 + new)
    got_cpu, _, _ = text_generation.generate(on_cpu, prompt, new, lambda: None)
    assert torch.equal(got_cpu, want), "the static-cache model itself differs from generate()"

    captures, replays = counter("hpu_graph_capture"), counter("hpu_graph_replay")
    model = wrap_in_hpu_graph(text_generation.StaticKVGPT2(hf, batch, 7 + new).to("hpu"))
    for _ in range(2):  # the second run replays the graph captured in the first
        got, _, _ = text_generation.generate(model, prompt.to("hpu"), new, torch.hpu.synchronize)
        assert torch.equal(got, want)
    assert counter("hpu_graph_capture") - captures == 1
    assert counter("hpu_graph_replay") - replays == 2 * (new - 1)
    assert fallback_counts() == {}


def test_static_cache_rejects_a_length_beyond_the_model():
    hf = text_generation.small_gpt2(n_embd=32, n_layer=1, n_head=2, vocab=50, n_positions=16)
    with pytest.raises(ValueError, match="exceeds the model's n_positions 16"):
        text_generation.StaticKVGPT2(hf, 1, 17)
