"""torchvision models on the card, for test_torchvision.py, run with the
vision venv's python (PyPI's torchvision 0.28 over the base torch):
    python vision_worker.py train MODEL OPT     # fp32, hpu against the CPU
    python vision_worker.py bf16 MODEL          # autocast("hpu", bf16)
Prints `RESULT <json>`: the losses, the gradient and parameter errors of
the hpu and of the CPU against a float64 CPU step (see main), and the ops
that fell back to the CPU. No weights are downloaded (weights=None); the
data is random but seeded."""
import copy
import json
import sys

import torch
import torch.nn.functional as F
import torchvision

import habana_torch

MODELS = {
    "resnet18": lambda: torchvision.models.resnet18(weights=None, num_classes=10),
    "resnet50": lambda: torchvision.models.resnet50(weights=None, num_classes=10),
    "mobilenet_v3_small": lambda: torchvision.models.mobilenet_v3_small(weights=None, num_classes=10),
}
OPTS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-4),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=1e-2),
}


def data(dtype=torch.float32):
    g = torch.Generator().manual_seed(1)
    return torch.randn(4, 3, 64, 64, generator=g).to(dtype), torch.randint(0, 10, (4,), generator=g)


def step(model, dev, opt_name, dtype=torch.float32, autocast=False):
    model = copy.deepcopy(model).to(dev, dtype).train()
    opt = OPTS[opt_name](model.parameters())
    x, y = data(dtype)
    opt.zero_grad()
    with torch.autocast(dev, dtype=torch.bfloat16, enabled=autocast):
        loss = F.cross_entropy(model(x.to(dev)), y.to(dev))
    loss.backward()
    grads = {k: p.grad.detach().double().cpu().clone() for k, p in model.named_parameters()}
    opt.step()
    if dev == "hpu":
        habana_torch.core.mark_step()
    params = {k: p.detach().double().cpu() for k, p in model.named_parameters()}
    return loss.item(), grads, params


def error(got, ref):
    """The largest relative error over the tensors, ||got - ref|| / ||ref||,
    with a floor of 1e-6 of the whole set's norm for tensors that are zero
    up to rounding. Returns (error, tensor name)."""
    total = sum(r.norm().item() ** 2 for r in ref.values()) ** 0.5
    worst, name = 0.0, None
    for k, r in ref.items():
        e = (got[k] - r).norm().item() / max(r.norm().item(), 1e-6 * total)
        if e > worst:
            worst, name = e, k
    return worst, name


def cosine(a, b):
    x = torch.cat([v.flatten() for v in a.values()])
    y = torch.cat([b[k].flatten() for k in a])
    return (x @ y / (x.norm() * y.norm())).item()


def main(kind, model_name, opt_name="sgd"):
    """fp32 (`train`): the hpu step and the CPU's float32 step, each against
    the CPU's float64 step: these models at 64x64 with batch 4 are
    ill-conditioned (a float32 CPU step already differs from the float64
    one by tens of percent in some gradients), so the card is held to the
    CPU's own float32 error rather than to a fixed tolerance. bf16: the
    autocast step against the CPU's float32 step, next to the CPU's own
    autocast step (torch.autocast("cpu")) against the same."""
    torch.manual_seed(0)
    model = MODELS[model_name]()
    for m in model.modules():  # MobileNetV3's classifier: random masks differ between devices
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    cpu = step(model, "cpu", opt_name)
    habana_torch.metrics.metric_global("cpu_fallback").reset()
    hpu = step(model, "hpu", opt_name, autocast=(kind == "bf16"))
    fallbacks = habana_torch.metrics.cpu_fallback_counts()
    out = {"loss_hpu": hpu[0], "loss_cpu": cpu[0], "fallbacks": fallbacks, "torchvision": torchvision.__version__}
    if kind == "bf16":
        cpu_bf16 = step(model, "cpu", opt_name, autocast=True)
        out["loss_cpu_bf16"] = cpu_bf16[0]
        out["grad_cosine"] = cosine(hpu[1], cpu[1])
        out["grad_cosine_cpu_bf16"] = cosine(cpu_bf16[1], cpu[1])
        out["finite"] = all(bool(torch.isfinite(g).all()) for g in hpu[1].values())
    else:
        ref = step(model, "cpu", opt_name, dtype=torch.float64)
        out["loss_ref"] = ref[0]
        out["grad_hpu"], out["grad_hpu_at"] = error(hpu[1], ref[1])
        out["grad_cpu"], out["grad_cpu_at"] = error(cpu[1], ref[1])
        out["param_hpu"], out["param_hpu_at"] = error(hpu[2], ref[2])
        out["param_cpu"], out["param_cpu_at"] = error(cpu[2], ref[2])
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:])
