"""wrap_in_hpu_graph's cache: bounded (least recently used evicted, its card
memory released), keyed so that no two different calls share a graph."""
import gc
import warnings

import pytest
import torch
import torch.nn as nn

import habana_torch
from habana_torch import _C
from habana_torch.hpu import graphs


def counter(name):
    return dict(_C._metric_items(name)).get(name, 0)


class Wide(nn.Module):
    """A forward whose captured graph holds batch x 1024 floats of
    temporaries and outputs."""

    def forward(self, x, scale=1.0):
        return (x.unsqueeze(-1) * torch.ones(1024, device=x.device)).relu() * scale


def _wrap(module, **kw):
    return habana_torch.hpu.wrap_in_hpu_graph(module.to("hpu").eval(), **kw)


def _held_after(model, sizes, max_cache=None):
    """Card memory the wrapped model holds after calls with these row counts."""
    gc.collect()  # hpu tensors in cycles left by earlier tests would be freed mid-measurement
    torch.hpu.synchronize()
    base = torch.hpu.memory_allocated()
    with torch.no_grad():
        for n in sizes:
            model(torch.randn(n, device="hpu"))
            if max_cache is not None:
                assert len(model.forward.cache) <= max_cache
    torch.hpu.synchronize()
    held = torch.hpu.memory_allocated() - base
    model.clear_cache()
    torch.hpu.synchronize()
    assert torch.hpu.memory_allocated() == base
    return held


def test_many_shapes_keep_the_cache_and_memory_bounded(monkeypatch):
    monkeypatch.setenv("PT_HPU_WRAP_GRAPH_CACHE_SIZE", "3")  # the bound without max_graphs=
    one = _held_after(_wrap(Wide()), [30])  # the graph of the largest shape
    held = _held_after(_wrap(Wide()), range(1, 31), max_cache=3)
    assert 0 < held <= 3 * one, (held, one)
    # What the bound saves: thirty graphs hold about ten times as much.
    unbounded = _held_after(_wrap(Wide(), max_graphs=1000), range(1, 31))
    assert unbounded > 4 * held, (unbounded, held)


def test_evicting_a_graph_releases_its_card_memory():
    model = _wrap(Wide(), max_graphs=2)
    torch.hpu.synchronize()
    base = torch.hpu.memory_allocated()
    with torch.no_grad():
        model(torch.randn(2048, device="hpu"))  # 8 MiB per tensor
        model(torch.randn(2049, device="hpu"))
        torch.hpu.synchronize()
        full = torch.hpu.memory_allocated()
        model(torch.randn(1, device="hpu"))  # evicts the 2048-row graph
        model(torch.randn(2, device="hpu"))  # and the 2049-row one
    torch.hpu.synchronize()
    after = torch.hpu.memory_allocated()
    assert full - base > 4 * 2048 * 4096
    assert after - base < (full - base) / 50, (base, full, after)
    model.clear_cache()


def test_an_evicted_shape_recaptures_and_matches_the_cpu():
    model = _wrap(Wide(), max_graphs=2)
    captures = counter("hpu_graph_capture")
    with torch.no_grad():
        for n in (3, 4, 5, 3, 3):  # 3 is evicted by 5, then captured again and replayed
            x = torch.randn(n)
            torch.testing.assert_close(model(x.to("hpu"), scale=0.5).cpu(), Wide()(x, scale=0.5))
    assert counter("hpu_graph_capture") - captures == 4
    model.clear_cache()


def test_recently_used_graphs_are_kept():
    model = _wrap(Wide(), max_graphs=2)
    captures = counter("hpu_graph_capture")
    with torch.no_grad():
        for n in (3, 4, 3, 5, 3, 4):  # 3 is used again before 5 arrives: 4 is evicted, 3 kept
            model(torch.randn(n, device="hpu"))
    assert counter("hpu_graph_capture") - captures == 4  # 3, 4, 5, then 4 again
    model.clear_cache()


def test_the_bound_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("PT_HPU_WRAP_GRAPH_CACHE_SIZE", "2")
    assert _wrap(Wide()).forward.max_graphs == 2
    monkeypatch.setenv("PT_HPU_WRAP_GRAPH_CACHE_SIZE", "0")
    assert _wrap(Wide()).forward.max_graphs is None  # no limit
    monkeypatch.delenv("PT_HPU_WRAP_GRAPH_CACHE_SIZE")
    assert _wrap(Wide()).forward.max_graphs == graphs.DEFAULT_GRAPH_CACHE_SIZE == 64
    monkeypatch.setenv("PT_HPU_WRAP_GRAPH_CACHE_SIZE", "many")
    with pytest.raises(ValueError, match="PT_HPU_WRAP_GRAPH_CACHE_SIZE"):
        _wrap(Wide())
    with pytest.raises(ValueError, match="max_graphs"):
        _wrap(Wide(), max_graphs=0)


class Weighted(nn.Module):
    """Takes a non-tensor argument whose contents change the result."""

    def forward(self, x, weights):
        out = x * 0
        for i, w in enumerate(weights):
            out[i] = x[i] * w
        return out


class Coeffs:
    """An unhashable argument (it defines == but no hash), mutated between
    calls; a new one may even get the address of a freed one."""

    def __init__(self, values):
        self.values = list(values)

    def __eq__(self, other):
        return isinstance(other, Coeffs) and self.values == other.values

    def __iter__(self):
        return iter(self.values)


def test_an_unhashable_argument_with_new_contents_gives_the_right_result():
    model = _wrap(Weighted())
    x = torch.arange(1.0, 4.0)
    coeffs = Coeffs([1.0, 2.0, 3.0])
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for values in ([1.0, 2.0, 3.0], [10.0, 20.0, 30.0], [-1.0, 0.0, 1.0]):
            coeffs.values = values  # same object, new contents
            torch.testing.assert_close(model(x.to("hpu"), coeffs).cpu(), x * torch.tensor(values))
        for values in ([2.0, 2.0, 2.0], [3.0, 3.0, 3.0]):
            fresh = Coeffs(values)  # a new object, possibly at a reused address
            torch.testing.assert_close(model(x.to("hpu"), fresh).cpu(), x * torch.tensor(values))
            del fresh
    assert len(model.forward.cache) == 0
    warned = [w for w in caught if "run without HPU graphs" in str(w.message)]
    assert len(warned) == 1, [str(w.message) for w in caught]


def test_hashable_arguments_are_keyed_by_value_and_type():
    class Fill(nn.Module):
        def forward(self, x, value):
            return x + torch.full(x.shape, value, device=x.device)

    model = _wrap(Fill())
    x = torch.zeros(4, dtype=torch.float64, device="hpu")
    eager = Fill()
    with torch.no_grad():
        for value in (1, 2, 1.5, True, 1, 1.0, 2):
            out = model(x, value)
            ref = eager(torch.zeros(4, dtype=torch.float64), value)
            assert out.dtype == ref.dtype
            torch.testing.assert_close(out.cpu(), ref)
    # 1, 2, 1.5, True, 1.0: five signatures; the second 1 and 2 replay
    assert len(model.forward.cache) == 5
    model.clear_cache()


def test_structure_is_part_of_the_key():
    class Sum(nn.Module):
        def forward(self, inputs):
            if isinstance(inputs, dict):
                return inputs["a"] * 2 + inputs["b"]
            return inputs[0] * 2 + inputs[1]

    model = _wrap(Sum())
    a, b = torch.randn(5), torch.randn(5)
    with torch.no_grad():
        got_list = model([a.to("hpu"), b.to("hpu")]).cpu().clone()
        got_dict = model({"b": a.to("hpu"), "a": b.to("hpu")}).cpu()
    torch.testing.assert_close(got_list, a * 2 + b)
    torch.testing.assert_close(got_dict, b * 2 + a)
    assert len(model.forward.cache) == 2
    model.clear_cache()


class StaticCache(nn.Module):
    """A static KV cache step as optimum-habana's models take one: the cache
    is an argument, written in place at token_idx."""

    def forward(self, cache, x, token_idx):
        cache.index_copy_(1, token_idx, x)
        return cache.sum(1, keepdim=True) * 2


def test_arguments_written_in_place_are_written_back_to_the_caller():
    def steps(model, device):
        cache = torch.zeros(2, 8, device=device)
        token_idx = torch.tensor([0], device=device)
        outs = []
        with torch.no_grad():
            for step in range(5):  # capture, then replays
                x = torch.arange(2.0, device=device).unsqueeze(1) + step + 1
                outs.append(model(cache, x, token_idx).cpu())
                token_idx.add_(1)
        return torch.stack(outs), cache.cpu()

    out_cpu, cache_cpu = steps(StaticCache(), "cpu")
    model = _wrap(StaticCache())
    out_hpu, cache_hpu = steps(model, "hpu")
    assert len(model.forward.cache) == 1  # one graph, replayed
    torch.testing.assert_close(cache_hpu, cache_cpu)
    torch.testing.assert_close(out_hpu, out_cpu)
