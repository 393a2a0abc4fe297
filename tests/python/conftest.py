import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import habana_torch  # noqa: F401


@pytest.fixture
def fallback_counts():
    """Clears the cpu-fallback counters and returns a function that reads them."""
    habana_torch.metrics.metric_global("cpu_fallback").reset()
    return habana_torch.metrics.cpu_fallback_counts


@pytest.fixture
def fresh_dynamo():
    """torch.compile tests: dynamo's caches and the fallback counters start
    empty, and the test's pending lazy work is flushed at its end."""
    torch._dynamo.reset()
    habana_torch.metrics.metric_global("cpu_fallback").reset()
    yield
    habana_torch.core.mark_step()
    torch._dynamo.reset()


def run_python(code, env=None, timeout=120):
    """Runs code in a fresh interpreter (for environment variables read once
    at start-up, out-of-memory, fork). Returns the CompletedProcess."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def card_child_env():
    """The environment for a child process whose cards hl-smi or the
    exporter reads: this run's card selection (HABANA_VISIBLE_*,
    HPU_NUM_CARDS) and HPU_STATUS_PAGE are dropped, so the child has the
    defaults. The child imports what this process imports (an installed
    package, or a source tree with its extension built in place)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    for name in ("HABANA_VISIBLE_DEVICES", "HABANA_VISIBLE_MODULES", "HPU_NUM_CARDS", "HPU_STATUS_PAGE"):
        env.pop(name, None)
    return env


def run_python_json(*parts, env=None):
    """Runs the parts (each dedented, then joined) as run_python does,
    requires a clean exit and returns the last line the child printed,
    parsed as JSON: how a child reports what it saw."""
    out = run_python("".join(textwrap.dedent(p) for p in parts), env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def assert_close_to_cpu(hpu_result, cpu_result, **kw):
    assert hpu_result.device.type == "hpu", hpu_result.device
    assert hpu_result.dtype == cpu_result.dtype
    torch.testing.assert_close(hpu_result.cpu(), cpu_result, **kw)


def steps_apart(a, b):
    """The largest difference of a and b (bf16 / fp16 tensors) in steps of
    their dtype at that magnitude: 0 equal, 1 neighbours. Equal infinities
    and NaN against NaN count as equal."""
    bits, tiny = {torch.bfloat16: (7, 2.0 ** -133), torch.float16: (10, 2.0 ** -24)}[a.dtype]
    if a.numel() == 0:
        return 0.0
    a, b = a.double(), b.double()
    same = (a == b) | (a.isnan() & b.isnan())
    mag = torch.maximum(a.abs(), b.abs()).clamp_min(tiny)
    step = torch.exp2(torch.floor(torch.log2(mag)) - bits).clamp_min(tiny)
    return torch.where(same, 0.0, (a - b).abs() / step).max().item()
