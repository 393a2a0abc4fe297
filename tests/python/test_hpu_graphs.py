"""HPU graphs: capture once, replay with new data; wrap_in_hpu_graph."""
import warnings

import pytest
import torch
import torch.nn as nn

import habana_torch
from habana_torch import _C


def counter(name):
    return dict(_C._metric_items(name)).get(name, 0)


def test_replay_equals_eager_and_sees_new_inputs():
    x = torch.randn(4096, device="hpu")
    w = torch.randn(4096, device="hpu")
    g = torch.hpu.HPUGraph()
    with torch.hpu.graph(g):
        y = (x * w + 1).relu() * 2 - x / 3
    assert g.num_nodes >= 5
    for _ in range(3):
        new = torch.randn(4096)
        x.copy_(new)
        g.replay()
        expected = (new * w.cpu() + 1).relu() * 2 - new / 3
        torch.testing.assert_close(y.cpu(), expected)


def test_matmul_chain_replay():
    a = torch.randn(32, 64, device="hpu")
    lin = nn.Linear(64, 16).to("hpu")
    with torch.no_grad():
        g = torch.hpu.HPUGraph()
        with torch.hpu.graph(g):
            out = torch.relu(lin(a)) * 0.5
        a.copy_(torch.ones(32, 64))
        g.replay()
        ref = torch.relu(lin(torch.ones(32, 64, device="hpu"))) * 0.5
    assert torch.equal(out.cpu(), ref.cpu())


def test_host_read_during_capture_is_an_error_and_capture_is_dropped():
    x = torch.randn(8, device="hpu")
    g = torch.hpu.HPUGraph()
    with pytest.raises(RuntimeError, match="capturing an HPU graph"):
        with torch.hpu.graph(g):
            (x * 2).sum().item()
    assert not _C._capture_active(0)
    assert (x * 2).cpu().shape == (8,)  # the card works normally afterwards
    with pytest.raises(RuntimeError, match="capture it first"):
        g.replay()


def test_capture_memory_is_kept_until_reset():
    torch.hpu.synchronize()
    base = torch.hpu.memory_allocated()
    x = torch.randn(1 << 16, device="hpu")
    g = torch.hpu.HPUGraph()
    with torch.hpu.graph(g):
        t = x * 2          # a temporary the graph writes at every replay
        y = t + 1
        del t
    # t's block belongs to the graph: not reusable while the graph lives
    assert torch.hpu.memory_allocated() >= base + 3 * (1 << 18)
    g.replay()
    torch.testing.assert_close(y.cpu(), x.cpu() * 2 + 1)
    del y
    g.reset()
    del x
    assert torch.hpu.memory_allocated() == base


def test_random_ops_draw_new_numbers_each_replay():
    x = torch.ones(10000, device="hpu")
    g = torch.hpu.HPUGraph()
    with torch.hpu.graph(g):
        y = nn.functional.dropout(x, p=0.5, training=True)
    g.replay()
    first = y.cpu().clone()
    g.replay()
    second = y.cpu()
    assert not torch.equal(first, second)
    assert abs((second != 0).float().mean().item() - 0.5) < 0.03


class TinyMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(32, 4)

    def forward(self, x, scale=1.0):
        return self.b(torch.relu(self.a(x))) * scale


def test_wrap_in_hpu_graph_matches_eager_per_shape():
    torch.manual_seed(0)
    eager = TinyMLP().to("hpu").eval()
    graphed = habana_torch.hpu.wrap_in_hpu_graph(TinyMLP().to("hpu").eval())
    graphed.load_state_dict(eager.state_dict())
    replays = counter("hpu_graph_replay")
    captures = counter("hpu_graph_capture")
    with torch.no_grad():
        for batch in (4, 4, 8, 4, 8):
            x = torch.randn(batch, 16, device="hpu")
            assert torch.equal(graphed(x, scale=2.0).cpu(), eager(x, scale=2.0).cpu())
    assert counter("hpu_graph_capture") - captures == 2  # one per shape
    assert counter("hpu_graph_replay") - replays == 5
    graphed.clear_cache()


def test_wrap_in_hpu_graph_with_grad_runs_plain_forward():
    model = habana_torch.hpu.wrap_in_hpu_graph(TinyMLP().to("hpu"))
    x = torch.randn(2, 16, device="hpu")
    before = counter("hpu_graph_capture")
    model(x).sum().backward()
    assert counter("hpu_graph_capture") == before
    assert model.a.weight.grad is not None


class StaticKVDecode(nn.Module):
    """One decode step of single-head attention over a static KV cache:
    the new key/value is written at `pos` (a one-hot row mask) in place."""

    def __init__(self, d=32, max_len=16):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.register_buffer("kc", torch.zeros(max_len, d))
        self.register_buffer("vc", torch.zeros(max_len, d))

    def forward(self, h, onehot, valid):
        keep = 1 - onehot
        self.kc.mul_(keep).add_(onehot * self.k(h))
        self.vc.mul_(keep).add_(onehot * self.v(h))
        scores = self.q(h) @ self.kc.t() / 32 ** 0.5 + (valid - 1) * 1e4
        w = torch.softmax(scores, dim=-1)
        return w @ self.vc


def test_text_generation_decode_step_with_static_kv_cache():
    """Every op of the step has an hpu kernel, so it must really be captured
    (a capture failure would only warn and run eagerly: turned into an error)."""
    torch.manual_seed(0)
    captures, replays = counter("hpu_graph_capture"), counter("hpu_graph_replay")
    ref = StaticKVDecode().to("hpu").eval()
    graphed = StaticKVDecode().to("hpu").eval()
    graphed.load_state_dict(ref.state_dict())
    habana_torch.hpu.wrap_in_hpu_graph(graphed)
    h = torch.randn(1, 32)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")
        for pos in range(6):
            onehot = torch.zeros(16, 1)
            onehot[pos] = 1
            valid = torch.zeros(1, 16)
            valid[0, : pos + 1] = 1
            args = (h.to("hpu"), onehot.to("hpu"), valid.to("hpu"))
            out_ref = ref(*args)
            out = graphed(*args)
            torch.testing.assert_close(out.cpu(), out_ref.cpu())
            h = out.cpu() + torch.randn(1, 32) * 0.1
    torch.testing.assert_close(graphed.kc.cpu(), ref.kc.cpu())
    assert counter("hpu_graph_capture") - captures == 1
    assert counter("hpu_graph_replay") - replays == 6


def test_wrapped_forward_keeps_its_signature():
    """transformers' generate passes attention_mask (and position ids,
    cache positions, ...) only when inspect.signature(model.forward) names
    them: with a signature of (*args, **kwargs) it left the mask out, and
    optimum-habana's static-shape GPT-2 decoded other tokens than the CPU."""
    import inspect

    class WithMask(nn.Module):
        def forward(self, input_ids, attention_mask=None, *, token_idx=None):
            """Its own docstring."""
            return input_ids * 2

    plain = inspect.signature(WithMask().forward)
    model = habana_torch.hpu.wrap_in_hpu_graph(WithMask())
    assert inspect.signature(model.forward) == plain
    assert "attention_mask" in inspect.signature(model.forward).parameters
    assert model.forward.__doc__ == "Its own docstring."


class LazyCacheThenHostRead(nn.Module):
    """Fills a cache on its first call (a rotary table, say), then reads a
    value on the host, which an HPU graph cannot capture, and counts its
    calls in a buffer."""

    def __init__(self):
        super().__init__()
        self.table = None
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        if self.table is None:
            self.table = torch.arange(x.shape[-1], device=x.device, dtype=x.dtype) * 0.5 + 1
        y = x * self.table
        self.calls.add_(1)
        if y.sum().item() > 1e30:  # the host read
            y = y * 0
        return y - 1


def test_uncapturable_forward_runs_once_with_right_values():
    """wrap_in_hpu_graph on a forward that reads a host value: the capture
    turns into ordinary execution at the read (counted by hpu_graph_demoted)
    and the forward runs once. Aborting the capture and running the forward
    again, as before, left the cache made in the aborted half holding values
    never computed, and the second run then used it."""
    x = torch.randn(3, 8)
    ref = LazyCacheThenHostRead()
    expected = ref(x)
    model = habana_torch.hpu.wrap_in_hpu_graph(LazyCacheThenHostRead().to("hpu").eval())
    demoted, captures = counter("hpu_graph_demoted"), counter("hpu_graph_capture")
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = model(x.to("hpu")).cpu()
        second = model(x.to("hpu")).cpu()  # known uncapturable: the plain forward
    assert counter("hpu_graph_demoted") - demoted == 1
    assert counter("hpu_graph_capture") == captures
    assert sum("cannot be captured" in str(w.message) for w in caught) == 1
    torch.testing.assert_close(first, expected)
    torch.testing.assert_close(second, expected)
    torch.testing.assert_close(model.table.cpu(), ref.table)
    assert model.calls.item() == 2  # each call counted once


def test_strict_capture_still_refuses_a_host_read_after_a_demoted_one():
    model = habana_torch.hpu.wrap_in_hpu_graph(LazyCacheThenHostRead().to("hpu").eval())
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model(torch.randn(2, 4, device="hpu"))
    x = torch.randn(16, device="hpu")
    g = torch.hpu.HPUGraph()
    with pytest.raises(RuntimeError, match="capturing an HPU graph"):
        with torch.hpu.graph(g):
            (x * 2).sum().item()
    assert not _C._capture_active(torch.hpu.current_device())
    assert torch.equal((x * 2).cpu(), x.cpu() * 2)  # the card is usable after
