"""Vision models on the card with no CPU fallback: a small U-Net (conv + BN +
ReLU encoder, max pool, bilinear-upsampling decoder with skip concatenation,
reflection padding in its convolutions) and a small MobileNetV3-style block
stack (depthwise convolution, hardswish, squeeze-excite through
adaptive_avg_pool2d, a nearest-upsampled side branch), written here as
test_resnet.py does (the base suite has no torchvision). One
training step each with SGD momentum and with AdamW, run in the mode the
suite runs in (PT_HPU_LAZY_MODE): loss and every gradient against the same
step on the CPU."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvBNReLU(nn.Sequential):
    def __init__(self, cin, cout, pad_mode="zeros"):
        super().__init__(nn.Conv2d(cin, cout, 3, padding=1, padding_mode=pad_mode, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    def __init__(self, cin=3, classes=4, w=8):
        super().__init__()
        self.enc1 = nn.Sequential(ConvBNReLU(cin, w, "reflect"), ConvBNReLU(w, w))
        self.enc2 = nn.Sequential(ConvBNReLU(w, 2 * w, "replicate"), ConvBNReLU(2 * w, 2 * w))
        self.mid = nn.Sequential(ConvBNReLU(2 * w, 4 * w, "reflect"), ConvBNReLU(4 * w, 4 * w))
        self.dec2 = nn.Sequential(ConvBNReLU(6 * w, 2 * w), ConvBNReLU(2 * w, 2 * w))
        self.dec1 = nn.Sequential(ConvBNReLU(3 * w, w, "reflect"), ConvBNReLU(w, w))
        self.head = nn.Conv2d(w, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([F.interpolate(m, scale_factor=2, mode="bilinear", align_corners=False), e2], 1))
        d1 = self.dec1(torch.cat([F.interpolate(d2, size=e1.shape[-2:], mode="bilinear", align_corners=True), e1], 1))
        return self.head(d1)


class SqueezeExcite(nn.Module):
    def __init__(self, c, r=4):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, c // r, 1), nn.Conv2d(c // r, c, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))


class InvertedResidual(nn.Module):
    def __init__(self, cin, exp, cout, stride, se):
        super().__init__()
        self.expand = nn.Sequential(nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(exp, exp, 3, stride, 1, groups=exp, bias=False), nn.BatchNorm2d(exp),
                                nn.Hardswish())
        self.se = SqueezeExcite(exp) if se else nn.Identity()
        self.project = nn.Sequential(nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.project(self.se(self.dw(self.expand(x))))
        return x + y if self.residual else y


class MobileNetV3Small(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish())
        self.blocks = nn.Sequential(InvertedResidual(16, 32, 16, 1, True), InvertedResidual(16, 48, 24, 2, False),
                                    InvertedResidual(24, 72, 24, 1, True), InvertedResidual(24, 96, 40, 2, True))
        self.side = nn.Conv2d(40, 24, 1)  # a feature-pyramid style side branch back to 1/4 scale
        self.head = nn.Linear(40 + 24, classes)

    def forward(self, x):
        f4 = self.blocks[:3](self.stem(x))
        f8 = self.blocks[3](f4)
        up = F.interpolate(self.side(f8), size=f4.shape[-2:], mode="nearest") + f4
        pooled = torch.cat([F.adaptive_avg_pool2d(f8, (1, 1)), F.adaptive_avg_pool2d(up, (2, 2)).mean((2, 3), True)], 1)
        return self.head(torch.flatten(pooled, 1))


def train_step(model, dev, x, target, make_opt, loss_fn):
    import habana_torch
    model = copy.deepcopy(model).to(dev)
    opt = make_opt(model.parameters())
    opt.zero_grad()
    loss = loss_fn(model(x.to(dev)), target.to(dev))
    loss.backward()
    grads = {k: p.grad.detach().cpu().clone() for k, p in model.named_parameters()}
    opt.step()
    if dev == "hpu":
        habana_torch.core.mark_step()
    params = {k: p.detach().cpu() for k, p in model.named_parameters()}
    return loss.item(), grads, params


OPTS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-4),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=1e-2),
}


def compare(model, x, target, opt, loss_fn, fallback_counts, tol=2e-3):
    cpu = train_step(model, "cpu", x, target, OPTS[opt], loss_fn)
    import habana_torch
    habana_torch.metrics.metric_global("cpu_fallback").reset()
    hpu = train_step(model, "hpu", x, target, OPTS[opt], loss_fn)
    assert fallback_counts() == {}
    assert abs(hpu[0] - cpu[0]) <= tol * max(1.0, abs(cpu[0]))
    for k in cpu[1]:
        # a BN bias feeding only into another training-mode BN has a zero
        # gradient up to rounding (1e-8 here): an absolute floor for those
        scale = cpu[1][k].abs().max().item()
        torch.testing.assert_close(hpu[1][k], cpu[1][k], rtol=tol, atol=max(tol * scale, 1e-6), msg=k)
    for k in cpu[2]:
        torch.testing.assert_close(hpu[2][k], cpu[2][k], rtol=tol, atol=tol, msg=k)


@pytest.mark.parametrize("opt", sorted(OPTS))
def test_unet_training_step_matches_cpu(opt, fallback_counts):
    torch.manual_seed(0)
    model = UNet()
    g = torch.Generator().manual_seed(1)
    x, target = torch.randn(2, 3, 24, 20, generator=g), torch.randint(0, 4, (2, 24, 20), generator=g)
    compare(model, x, target, opt, F.cross_entropy, fallback_counts)


@pytest.mark.parametrize("opt", sorted(OPTS))
def test_mobilenet_v3_block_training_step_matches_cpu(opt, fallback_counts):
    torch.manual_seed(0)
    model = MobileNetV3Small()
    g = torch.Generator().manual_seed(1)
    x, target = torch.randn(4, 3, 32, 32, generator=g), torch.randint(0, 10, (4,), generator=g)
    compare(model, x, target, opt, F.cross_entropy, fallback_counts)
