"""The hpu RNG: native, reproducible under manual_seed, state save/restore."""
import torch

import habana_torch


def test_rand_randn_native_and_reproducible(fallback_counts):
    torch.hpu.manual_seed(1234)
    a = torch.rand(1000, device="hpu")
    b = torch.randn(1000, device="hpu")
    torch.hpu.manual_seed(1234)
    assert torch.equal(torch.rand(1000, device="hpu").cpu(), a.cpu())
    assert torch.equal(torch.randn(1000, device="hpu").cpu(), b.cpu())
    assert not torch.equal(torch.rand(1000, device="hpu").cpu(), a.cpu())  # the stream moved on
    assert 0.0 <= a.min().item() and a.max().item() < 1.0
    assert abs(a.mean().item() - 0.5) < 0.05
    assert abs(b.mean().item()) < 0.15 and abs(b.std().item() - 1) < 0.1
    assert not any(k.startswith("aten::rand") or k.startswith("aten::normal") or k.startswith("aten::uniform")
                   for k in fallback_counts())


def test_torch_manual_seed_reaches_hpu():
    torch.manual_seed(7)
    a = torch.randn(64, device="hpu").cpu()
    torch.manual_seed(7)
    assert torch.equal(torch.randn(64, device="hpu").cpu(), a)


def test_rng_state_roundtrip():
    torch.hpu.manual_seed(5)
    torch.rand(10, device="hpu")
    state = torch.hpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    a = torch.rand(100, device="hpu").cpu()
    torch.hpu.set_rng_state(state)
    assert torch.equal(torch.rand(100, device="hpu").cpu(), a)


def test_dropout_reproducible_and_rate():
    x = torch.ones(10000, device="hpu")
    torch.manual_seed(3)
    a = torch.nn.functional.dropout(x, p=0.25).cpu()
    torch.manual_seed(3)
    b = torch.nn.functional.dropout(x, p=0.25).cpu()
    assert torch.equal(a, b)
    kept = (a != 0).float().mean().item()
    assert abs(kept - 0.75) < 0.03
    assert torch.allclose(a[a != 0], torch.tensor(1 / 0.75))


def test_cards_have_separate_generators():
    torch.hpu.manual_seed_all(11)
    a0 = torch.rand(8, device="hpu:0").cpu()
    a1 = torch.rand(8, device="hpu:1").cpu()
    assert torch.equal(a0, a1)  # same seed, same stream
    torch.rand(8, device="hpu:0")
    assert not torch.equal(torch.rand(8, device="hpu:0").cpu(), torch.rand(8, device="hpu:1").cpu())


def test_bernoulli_and_random():
    torch.manual_seed(0)
    p = torch.full((5000,), 0.3, device="hpu")
    s = torch.bernoulli(p).cpu()
    assert abs(s.mean().item() - 0.3) < 0.03
    r = torch.empty(5000, dtype=torch.int64, device="hpu").random_(3, 9).cpu()
    assert r.min().item() == 3 and r.max().item() == 8
    ri = torch.randint(0, 10, (1000,), device="hpu").cpu()
    assert ri.min().item() >= 0 and ri.max().item() <= 9
