"""The host cannot run unboundedly ahead of a card: a push past
HPU_QUEUE_DEPTH waits for the card, and the results are those of the CPU."""
import os
import subprocess
import sys
import textwrap


def run_python(code, env):
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full,
                          capture_output=True, text=True, timeout=120)


def test_pushes_wait_at_the_queue_depth_and_results_stay_right():
    code = """
        import torch, habana_torch
        from habana_torch import metrics
        # Ops of 256K elements: each is queued (below the size an idle card
        # runs on the calling thread) and takes the card longer than Python
        # takes to issue the next, so the queue fills whatever the machine.
        x = torch.arange(1 << 18, dtype=torch.float32)
        h = x.to("hpu")
        # The host does nothing but issue: the CPU reference runs after the
        # loop, so the host cannot fall behind the card by doing as much work.
        for i in range(200):              # eager: one queued task per op, no waits
            h = h * 1.0001 + 1
        waits = dict(metrics.metric_global("queue_full").stats())["Waits"]
        for i in range(200):
            x = x * 1.0001 + 1
        torch.testing.assert_close(h.cpu(), x, rtol=0, atol=0)
        print("waits", waits)
    """
    r = run_python(code, {"PT_HPU_LAZY_MODE": "0", "HPU_QUEUE_DEPTH": "4"})
    assert r.returncode == 0, r.stderr
    waits = int(r.stdout.split()[-1])
    assert waits > 0, r.stdout


def test_bad_queue_depth_names_the_variable():
    code = """
        import torch, habana_torch
        torch.empty(1, device="hpu")
    """
    for bad in ("0", "-5", "lots"):
        r = run_python(code, {"HPU_QUEUE_DEPTH": bad})
        assert r.returncode != 0
        assert "HPU_QUEUE_DEPTH" in r.stderr and bad in r.stderr, r.stderr
