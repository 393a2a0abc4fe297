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


def run_python(code, env=None, timeout=120):
    """Runs code in a fresh interpreter (for environment variables read once
    at start-up, out-of-memory, fork). Returns the CompletedProcess."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def assert_close_to_cpu(hpu_result, cpu_result, **kw):
    assert hpu_result.device.type == "hpu", hpu_result.device
    assert hpu_result.dtype == cpu_result.dtype
    torch.testing.assert_close(hpu_result.cpu(), cpu_result, **kw)
