"""nn.EmbeddingBag / F.embedding_bag on hpu against the CPU: every mode,
padding_idx, per-sample weights, include_last_offset, 2-d input, empty
bags, scale_grad_by_freq, bf16, forward and gradients, no CPU fallback; bad
input raises; a small EmbeddingBag text classifier trains as on the CPU."""
import pytest
import torch
import torch.nn.functional as F

from conftest import assert_close_to_cpu

# index sums in another order than the CPU's loops: float32 within a few ulps
TOL = dict(rtol=1e-5, atol=1e-6)


def run(weight, indices, offsets, psw=None, **kw):
    """Output and gradients (weight, per-sample weights) on the CPU and hpu."""
    res = []
    for dev in ("cpu", "hpu"):
        w = weight.detach().to(dev).requires_grad_()
        p = psw.detach().to(dev).requires_grad_() if psw is not None else None
        off = offsets.to(dev) if offsets is not None else None
        y = F.embedding_bag(indices.to(dev), w, off, per_sample_weights=p, **kw)
        torch.manual_seed(1)
        y.backward(torch.randn(y.shape, dtype=y.dtype).to(dev))
        res.append([y.detach()] + [t.grad for t in (w, p) if t is not None])
    return res


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 3])
@pytest.mark.parametrize("include_last_offset", [False, True])
def test_embedding_bag_matches_cpu(mode, padding_idx, include_last_offset, fallback_counts):
    g = torch.Generator().manual_seed(0)
    weight = torch.randn(12, 5, generator=g)
    indices = torch.randint(0, 12, (20,), generator=g)
    indices[[2, 7, 8]] = 3  # the padding row, several times
    # an empty bag in the middle, one of only padding (indices 7, 8), one at the end
    offsets = torch.tensor([0, 4, 4, 7, 9, 15, 20 if include_last_offset else 15])
    offsets = offsets if include_last_offset else offsets[:-1]
    psws = [None] + ([torch.rand(20, generator=g)] if mode == "sum" else [])
    for psw in psws:
        kw = dict(mode=mode, padding_idx=padding_idx, include_last_offset=include_last_offset)
        cpu, hpu = run(weight, indices, offsets, psw, **kw)
        for c, h in zip(cpu, hpu):
            assert_close_to_cpu(h, c, **TOL)
    assert fallback_counts() == {}


def test_embedding_bag_2d_input_freq_scaling_and_bf16(fallback_counts):
    g = torch.Generator().manual_seed(1)
    weight = torch.randn(9, 4, generator=g)
    idx2d = torch.randint(0, 9, (5, 6), generator=g)
    for mode in ("sum", "mean", "max"):
        cpu, hpu = run(weight, idx2d, None, mode=mode)
        for c, h in zip(cpu, hpu):
            assert_close_to_cpu(h, c, **TOL)
    offsets = torch.tensor([0, 10, 21])
    flat = idx2d.reshape(-1)
    # scale_grad_by_freq divides each row's gradient by its index's count in
    # the batch. The CPU's dense embedding_bag backward in torch 2.13 divides
    # by another index's count (pytorch/pytorch#190063, fixed upstream after
    # 2.13; CUDA was right): the reference is the CPU's unscaled gradient
    # divided by the counts
    counts = torch.bincount(flat, minlength=9).clamp(min=1).unsqueeze(1)
    for mode in ("sum", "mean"):
        cpu, _ = run(weight, flat, offsets, mode=mode)
        _, hpu = run(weight, flat, offsets, mode=mode, scale_grad_by_freq=True)
        assert_close_to_cpu(hpu[0], cpu[0], **TOL)
        assert_close_to_cpu(hpu[1], cpu[1] / counts, **TOL)
    # bf16: summed in float and rounded once (the CPU's bf16 sums round as well): a step apart at most
    cpu, hpu = run(weight.bfloat16(), flat, offsets, mode="sum")
    for c, h in zip(cpu, hpu):
        assert_close_to_cpu(h, c, rtol=2 ** -7, atol=2 ** -7 * c.float().abs().max().item())
    assert fallback_counts() == {}


def test_embedding_bag_module_trains_as_on_the_cpu(fallback_counts):
    """The PyTorch text-classification tutorial's model: EmbeddingBag (mean)
    then a linear layer, a few SGD steps on the same token bags."""
    torch.manual_seed(0)

    class TextClassifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = torch.nn.EmbeddingBag(50, 16, mode="mean")
            self.fc = torch.nn.Linear(16, 4)

        def forward(self, text, offsets):
            return self.fc(self.embedding(text, offsets))

    cpu = TextClassifier()
    hpu = TextClassifier().to("hpu")
    hpu.load_state_dict(cpu.state_dict())
    opts = [torch.optim.SGD(m.parameters(), lr=0.5) for m in (cpu, hpu)]
    g = torch.Generator().manual_seed(2)
    for _ in range(4):
        text = torch.randint(0, 50, (40,), generator=g)
        offsets = torch.tensor([0, 7, 15, 22, 30, 33])
        label = torch.randint(0, 4, (6,), generator=g)
        for model, opt, dev in ((cpu, opts[0], "cpu"), (hpu, opts[1], "hpu")):
            opt.zero_grad()
            F.cross_entropy(model(text.to(dev), offsets.to(dev)), label.to(dev)).backward()
            opt.step()
    for (name, p_c), p_h in zip(cpu.named_parameters(), hpu.parameters()):
        torch.testing.assert_close(p_h.detach().cpu(), p_c.detach(), rtol=1e-5, atol=1e-6, msg=name)
    assert fallback_counts() == {}


@pytest.mark.parametrize("bad, match", [
    (lambda w, i, o: F.embedding_bag(i, w, o, mode="mean", per_sample_weights=torch.ones(6, device="hpu")),
     "per_sample_weights is only supported for mode='sum'"),
    (lambda w, i, o: F.embedding_bag(i, w, torch.tensor([1, 3], device="hpu")), "offsets\\[0\\] has to be 0"),
    (lambda w, i, o: F.embedding_bag(i, w, torch.tensor([0, 9], device="hpu")), "can not be greater than"),
    (lambda w, i, o: F.embedding_bag(i, w, o.int()), "same dtype|offsets"),
    (lambda w, i, o: F.embedding_bag(i, w.cpu(), o), "device"),
])
def test_embedding_bag_bad_input(bad, match):
    w = torch.randn(8, 3, device="hpu")
    i = torch.tensor([0, 1, 2, 3, 4, 5], device="hpu")
    o = torch.tensor([0, 2], device="hpu")
    with pytest.raises((RuntimeError, ValueError), match=match):
        bad(w, i, o)
    assert F.embedding_bag(i, w, o).shape == (2, 3)  # still usable
