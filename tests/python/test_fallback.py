"""Ops without an hpu kernel run on the CPU: counted, logged, or refused."""
import pytest
import torch

import habana_torch
from conftest import run_python


def test_fallback_runs_and_is_counted(fallback_counts):
    x = torch.randn(5, 7)
    h = x.to("hpu")
    y = torch.igamma(h.abs(), h.abs())
    assert y.device.type == "hpu"
    torch.testing.assert_close(y.cpu(), torch.igamma(x.abs(), x.abs()))
    torch.igamma(h[1:].abs(), h[1:].abs())
    # The counter names the overload that reached the fallback (structured
    # ops arrive as their .out variant).
    counts = fallback_counts()
    assert counts == {"aten::igamma.out": 2}, counts
    stats = dict(habana_torch.metrics.metric_global("cpu_fallback").stats())
    assert stats["TotalNumber"] == 2 and stats["FallbackOps"] == counts


def test_fallback_inplace_writes_back(fallback_counts):
    x = torch.rand(4, 4) + 0.1
    h = x.to("hpu")
    h.igamma_(h.clone())  # no native kernel: runs on the CPU, result copied back into h
    torch.testing.assert_close(h.cpu(), x.igamma(x))
    assert list(fallback_counts()) == ["aten::igamma.out"]


def test_local_context_metric():
    h = torch.randn(3, 3, device="hpu")
    with habana_torch.metrics.metric_localcontext("cpu_fallback") as m:
        torch.igamma(h.abs(), h.abs() + 1)  # no hpu kernel
    stats = dict(m.stats())
    assert stats["TotalNumber"] == 1 and len(stats["FallbackOps"]) == 1
    assert list(stats["FallbackOps"])[0].startswith("aten::igamma")


def test_strict_mode_raises_and_process_goes_on(monkeypatch):
    h = torch.randn(3, device="hpu")
    monkeypatch.setenv("PT_HPU_CPU_FALLBACK", "0")
    with pytest.raises(NotImplementedError, match="aten::igamma.out.*PT_HPU_CPU_FALLBACK=0"):
        torch.igamma(h.abs(), h.abs())
    assert (h + 1).cpu().shape == (3,)  # native ops unaffected
    monkeypatch.delenv("PT_HPU_CPU_FALLBACK")
    assert torch.igamma(h.abs(), h.abs()).shape == (3,)


def test_fallback_logging():
    r = run_python("""
        import torch, habana_torch
        h = torch.randn(3, device="hpu")
        torch.igamma(h.abs(), h.abs()); torch.igamma(h.abs(), h.abs())
    """, env={"PT_HPU_LOG_CPU_FALLBACK": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("cpu fallback: aten::igamma.out") == 1
    r = run_python("""
        import torch, habana_torch
        h = torch.randn(3, device="hpu")
        torch.igamma(h.abs(), h.abs()); torch.igamma(h.abs(), h.abs())
    """, env={"PT_HPU_LOG_CPU_FALLBACK": "all"})
    assert r.stderr.count("cpu fallback: aten::igamma.out") == 2
