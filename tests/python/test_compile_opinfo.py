"""torch.compile(backend="hpu_backend") over PyTorch's own OpInfo samples:
every op of op_db, compiled as a one-op function, on hpu against the CPU
result of the same (uncompiled) call: the first float32 samples forward,
and float32 gradients through the compiled function for the ops the models
in this suite use.

A sample is skipped, with the reason, when dynamo itself cannot compile the
function on the CPU with its AOTAutograd reference backend ("aot_eager"),
as ours is built on AOTAutograd: then there is
nothing of ours to test. The skip reasons are dynamo's, so they show in the
report (pytest -rs).

Gaudi recommends torch.compile in eager mode (PT_HPU_LAZY_MODE=0), where
every op runs; in lazy mode, where a compiled graph joins the step's lazy
graph like any other op, every fifth op runs, to keep the suite's time.
"""
import itertools
import warnings

import pytest
import torch

import habana_torch
from torch.testing._internal.common_methods_invocations import op_db

from test_opinfo import (CLEAR_ERRORS, NOT_COMPARABLE, RANDOM, UNINITIALISED, compare, name_of, random_sample,
                         tensors, to_hpu)

SAMPLES = 2
# Outputs whose values are unspecified beyond what compare() checks, or
# that are random: nothing to compare after compiling either.
SKIP = RANDOM | UNINITIALISED | set(NOT_COMPARABLE) | {"bernoulli", "nn.functional.dropout", "nn.functional.alpha_dropout",
                                                      "nn.functional.feature_alpha_dropout.with_train",
                                                      "nn.functional.dropout2d", "nn.functional.dropout3d",
                                                      "nn.functional.feature_alpha_dropout.without_train"}
OPS = [op for op in op_db
       if name_of(op) not in SKIP and op.name not in SKIP and not op.name.startswith(("rand", "jiterator", "sparse"))
       and torch.float32 in op.supported_dtypes("cpu")]
# Ops the models of this suite (MLP, BERT, GPT-2, ResNet) are made of: their
# gradients go through the compiled backward graph as well.
GRAD_NAMES = {"add", "mul", "sub", "div.no_rounding_mode", "matmul", "mm", "bmm", "addmm", "nn.functional.linear",
              "nn.functional.gelu", "nn.functional.relu", "nn.functional.silu", "tanh", "sigmoid", "exp", "log",
              "softmax", "log_softmax", "nn.functional.layer_norm", "nn.functional.cross_entropy", "mean", "sum",
              "nn.functional.embedding", "transpose", "permute", "reshape", "view", "cat", "where", "masked_fill",
              "nn.functional.conv2d", "nn.functional.batch_norm", "nn.functional.max_pool2d",
              "nn.functional.scaled_dot_product_attention", "rsqrt", "pow", "var", "nn.functional.mse_loss"}
GRAD_OPS = [op for op in OPS if name_of(op) in GRAD_NAMES and op.supports_autograd]
if habana_torch.core.is_lazy():
    OPS = OPS[::5]


def float32_samples(op, requires_grad=False):
    torch.manual_seed(0)
    try:
        return list(itertools.islice(op.sample_inputs_func(op, "cpu", torch.float32, requires_grad), SAMPLES))
    except Exception:  # noqa: BLE001 - a sample generator that needs what this build lacks
        return []


def one_op(op):
    """A fresh function per call, so each compile is a new dynamo frame."""
    def f(x, *args, **kwargs):
        return op(x, *args, **kwargs)
    return f


def dynamo_reason(op, s):
    """Why dynamo cannot compile this call even on the CPU, or None."""
    torch._dynamo.reset()
    try:
        torch.compile(one_op(op), backend="aot_eager")(s.input, *s.args, **s.kwargs)
        return None
    except Exception as e:  # noqa: BLE001 - its message is the reason
        return f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("op", OPS, ids=name_of)
def test_compiled_op_matches_cpu(op):
    name = name_of(op)
    compared, reasons = 0, []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, s in enumerate(float32_samples(op)):
            if random_sample(name, s):
                continue
            try:
                expected = op(s.input, *s.args, **s.kwargs)
            except Exception:  # noqa: BLE001 - the CPU refuses it: nothing to match
                continue
            torch._dynamo.reset()
            try:
                got = torch.compile(one_op(op), backend="hpu_backend")(
                    to_hpu(s.input), *to_hpu(s.args), **to_hpu(s.kwargs))
                tensors(got, [])
            except Exception as e:  # noqa: BLE001
                if any(c in str(e) for c in CLEAR_ERRORS):
                    reasons.append(f"hpu refuses it with a clear error: {str(e).splitlines()[0][:120]}")
                    continue
                reason = dynamo_reason(op, s)
                if reason is None:
                    raise AssertionError(f"{name} sample {i}: compiled on hpu raised, dynamo on the CPU does not: "
                                         f"{type(e).__name__}: {e}") from e
                reasons.append(reason)
                continue
            compare(name, s, expected, got, f"{name} compiled, sample {i}")
            compared += 1
    if compared == 0:
        pytest.skip(reasons[0] if reasons else "no float32 sample the CPU accepts")


@pytest.mark.parametrize("op", GRAD_OPS, ids=name_of)
def test_compiled_op_gradients_match_cpu(op):
    name = name_of(op)
    compared = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, s in enumerate(float32_samples(op, requires_grad=True)):
            if random_sample(name, s):
                continue
            leaves = [t for t in tensors([s.input, list(s.args), list(s.kwargs.values())], []) if t.requires_grad]
            outs = [o for o in tensors(op(s.input, *s.args, **s.kwargs), []) if o.requires_grad]
            if not leaves or not outs:
                continue
            g = torch.Generator().manual_seed(i)
            cot = [torch.randn(o.shape, generator=g) for o in outs]
            expected = torch.autograd.grad(outs, leaves, cot, allow_unused=True)
            moved = {id(t): t.detach().to("hpu").requires_grad_() for t in leaves}

            def move(t):
                if isinstance(t, torch.Tensor):
                    return moved.get(id(t)) if id(t) in moved else t.to("hpu")
                if isinstance(t, (list, tuple)) and not hasattr(t, "_fields"):
                    return type(t)(move(y) for y in t)
                if isinstance(t, dict):
                    return {k: move(v) for k, v in t.items()}
                return t
            torch._dynamo.reset()
            houts = [o for o in tensors(torch.compile(one_op(op), backend="hpu_backend")(
                move(s.input), *move(s.args), **move(s.kwargs)), []) if o.requires_grad]
            got = torch.autograd.grad(houts, [moved[id(t)] for t in leaves], [c.to("hpu") for c in cot],
                                      allow_unused=True)
            for k, (c, h) in enumerate(zip(expected, got)):
                if c is None or h is None:
                    assert c is None or not c.any(), f"{name} sample {i}: no hpu gradient for input {k}"
                    continue
                torch.testing.assert_close(h.cpu(), c, rtol=1e-3, atol=1e-4, equal_nan=True, check_stride=False,
                                           msg=lambda m, k=k: f"{name} compiled gradient, sample {i}, input {k}: {m}")
            compared += 1
    if compared == 0:
        pytest.skip("no differentiable float32 sample")
