"""examples/text_generation.py: greedy decoding with a static KV cache, or
without a cache at static shapes, the decode step replayed as an HPU graph,
gives transformers' own greedy tokens (model.generate on the CPU), with one
capture and no CPU fallback; the script's table compares the hpu with the
CPU. Tensor parallelism runs in scripts/test_dist.sh
(tests/dist/text_generation_tp_worker.py)."""
import contextlib
import importlib.util
import io
import pathlib

import pytest
import torch

import habana_torch
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

    on_cpu = text_generation.StaticGPT2(hf, batch, 7 + new)
    got_cpu, _, _ = text_generation.generate(on_cpu, prompt, new, lambda: None)
    assert torch.equal(got_cpu, want), "the static-cache model itself differs from generate()"

    captures, replays = counter("hpu_graph_capture"), counter("hpu_graph_replay")
    model = wrap_in_hpu_graph(text_generation.StaticGPT2(hf, batch, 7 + new).to("hpu"))
    for _ in range(2):  # the second run replays the graph captured in the first
        got, _, _ = text_generation.generate(model, prompt.to("hpu"), new, torch.hpu.synchronize)
        assert torch.equal(got, want)
    assert counter("hpu_graph_capture") - captures == 1
    assert counter("hpu_graph_replay") - replays == 2 * (new - 1)
    assert fallback_counts() == {}


def tiny(batch):
    hf = text_generation.small_gpt2(seed=3, n_embd=64, n_layer=2, n_head=4, vocab=97, n_positions=64,
                                    initializer_range=0.2)
    prompt = torch.randint(1, 97, (batch, 7), generator=torch.Generator().manual_seed(batch))
    return hf, prompt


@pytest.mark.parametrize("graphs", [False, True])
def test_generation_without_kv_cache_matches_generate(graphs, fallback_counts):
    batch, new = 2, 10
    hf, prompt = tiny(batch)
    want = reference_tokens(hf, prompt, new)
    got_cpu, _, _ = text_generation.generate(text_generation.StaticGPT2(hf, batch, 7 + new, use_kv_cache=False),
                                             prompt, new, lambda: None)
    assert torch.equal(got_cpu, want)
    model = text_generation.StaticGPT2(hf, batch, 7 + new, use_kv_cache=False).to("hpu")
    if graphs:
        model = wrap_in_hpu_graph(model)
    for _ in range(2):  # the token buffer is rewritten from the prompt on each run
        got, _, _ = text_generation.generate(model, prompt.to("hpu"), new, torch.hpu.synchronize)
        assert torch.equal(got, want)
    assert fallback_counts() == {}


def run_main(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = text_generation.main(list(argv))
    return rc, out.getvalue()


def test_script_table_compares_hpu_and_cpu_per_batch_size():
    rc, out = run_main("--use_kv_cache", "--use_hpu_graphs", "--batch_sizes", "1,3", "--max_new_tokens", "6",
                       "--prompt_length", "5", "--n_iterations", "1")
    assert rc == 0, out
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| ") and "batch" not in line]
    assert [(r[0].strip(), r[1].strip(), r[-1].strip()) for r in rows] == \
        [("1", "hpu", "yes"), ("1", "cpu", "-"), ("3", "hpu", "yes"), ("3", "cpu", "-")]
    for r in rows:
        first, per_token, total, tokens_per_s = (float(v) for v in r[2:6])
        assert 0 < first <= total and per_token > 0 and tokens_per_s > 0
    assert "batch 3: hpu tokens/s" in out and "static KV cache, HPU graphs" in out


@pytest.mark.parametrize("graphs", [False, True])
def test_script_with_torch_compile_gives_the_cpus_tokens(graphs):
    """--torch_compile compiles the decode step with hpu_backend, whose
    graphs are replayed as HPU graphs (with --use_hpu_graphs too, as
    mode="reduce-overhead")."""
    torch._dynamo.reset()
    before = habana_torch.dynamo.replay_counts()["replays"]
    argv = ["--use_kv_cache", "--torch_compile", "--batch_sizes", "2", "--max_new_tokens", "6",
            "--prompt_length", "5", "--n_iterations", "1"] + (["--use_hpu_graphs"] if graphs else [])
    rc, out = run_main(*argv)
    torch._dynamo.reset()
    assert rc == 0, out
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| ") and "batch" not in line]
    assert [(r[1].strip(), r[-1].strip()) for r in rows] == [("hpu", "yes"), ("cpu", "-")]
    assert "torch.compile" in out
    replays = habana_torch.dynamo.replay_counts()["replays"] - before
    assert replays > 0


@pytest.mark.parametrize("argv, message", [
    (["--device", "cpu", "--torch_compile"], "--torch_compile needs the hpu"),
    (["--tp", "2", "--torch_compile"], "--torch_compile with tensor parallelism"),
    (["--batch_sizes", "1,x"], "--batch_sizes must be comma-separated integers"),
    (["--batch_sizes", "0"], "--batch_sizes must be positive"),
    (["--device", "cuda"], "--device must be hpu, cpu or both"),
    (["--device", "cpu", "--use_hpu_graphs"], "--use_hpu_graphs needs the hpu"),
    (["--tp", "2", "--use_hpu_graphs"], "cannot capture the all-reduce"),
    (["--max_new_tokens", "250"], "exceeds the model's 256 positions"),
])
def test_script_rejects_bad_options(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        text_generation.parse_args(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_static_cache_rejects_a_length_beyond_the_model():
    hf = text_generation.small_gpt2(n_embd=32, n_layer=1, n_head=2, vocab=50, n_positions=16)
    with pytest.raises(ValueError, match="exceeds the model's n_positions 16"):
        text_generation.StaticGPT2(hf, 1, 17)
