"""torch.save / torch.load of hpu tensors and state dicts."""
import io

import torch
import torch.nn as nn


def roundtrip(obj, **load_kw):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kw)


def test_tensor_roundtrip_exact():
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.bool):
        x = (torch.randn(5, 6) * 10).to(dtype).to("hpu:2")
        y = roundtrip(x)
        assert y.device == torch.device("hpu:2") and y.dtype == dtype
        assert torch.equal(y.cpu(), x.cpu())


def test_views_keep_sharing():
    base = torch.arange(12.0, device="hpu")
    a, b = base[2:6], base.view(3, 4)
    a2, b2 = roundtrip([a, b])
    assert a2.untyped_storage().data_ptr() == b2.untyped_storage().data_ptr()
    assert torch.equal(a2.cpu(), a.cpu()) and torch.equal(b2.cpu(), b.cpu())


def test_state_dict_and_map_location():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to("hpu")
    sd = roundtrip(model.state_dict())
    for k, v in model.state_dict().items():
        assert sd[k].device.type == "hpu" and torch.equal(sd[k].cpu(), v.cpu())
    on_cpu = roundtrip(model.state_dict(), map_location="cpu")
    assert all(v.device.type == "cpu" for v in on_cpu.values())
    moved = roundtrip(model.state_dict(), map_location="hpu:1")
    assert all(v.device == torch.device("hpu:1") for v in moved.values())
    cpu_saved = roundtrip(model.cpu().state_dict(), map_location="hpu")
    assert all(v.device.type == "hpu" for v in cpu_saved.values())
