"""Asking how many cards there are does not start the cards (as with CUDA):
a process that only counted them, or ran autograd on the CPU (autograd asks
every registered device type for its count), can still fork children that
use the hpu, and a bad environment makes the count 0, not an exception."""
from conftest import run_python, run_python_json


def test_counting_and_cpu_autograd_do_not_initialise():
    res = run_python_json("""
        import json, torch, habana_torch
        x = torch.ones(3, requires_grad=True)
        (x * 2).sum().backward()
        n = torch.hpu.device_count()
        avail = torch.hpu.is_available()
        acc = torch.accelerator.device_count()
        print(json.dumps([n, avail, acc, x.grad.tolist(), habana_torch._C._is_initialized()]))
    """, env={"HPU_NUM_CARDS": "3"})
    assert res == [3, True, 3, [2.0, 2.0, 2.0], False]


def test_child_forked_after_cpu_backward_can_use_the_hpu():
    out = run_python("""
        import os, torch, habana_torch
        x = torch.ones(3, requires_grad=True)
        (x * 2).sum().backward()
        assert torch.hpu.device_count() > 0
        pid = os.fork()
        if pid == 0:
            try:
                y = (torch.arange(4, device="hpu") * 2).cpu()
                os._exit(0 if torch.equal(y, torch.arange(4) * 2) else 3)
            except BaseException as e:
                print("child:", type(e).__name__, e, flush=True)
                os._exit(4)
        _, status = os.waitpid(pid, 0)
        print("child exit", os.waitstatus_to_exitcode(status))
        print("parent", (torch.ones(2, device="hpu") + 1).cpu().tolist())
    """)
    assert out.returncode == 0, out.stderr
    assert "child exit 0" in out.stdout, out.stdout + out.stderr
    assert "parent [2.0, 2.0]" in out.stdout


def test_count_follows_the_environment_until_the_cards_start():
    res = run_python_json("""
        import json, os, torch, habana_torch
        before = torch.hpu.device_count()
        os.environ["HABANA_VISIBLE_DEVICES"] = "1,2"
        after = torch.hpu.device_count()
        torch.ones(1, device="hpu")
        os.environ["HABANA_VISIBLE_DEVICES"] = "0"
        started = torch.hpu.device_count()
        print(json.dumps([before, after, started]))
    """, env={"HPU_NUM_CARDS": "4"})
    assert res == [4, 2, 2]


def test_bad_environment_counts_zero_cards():
    res = run_python_json("""
        import json, torch, habana_torch
        print(json.dumps([torch.hpu.device_count(), torch.hpu.is_available()]))
    """, env={"HABANA_VISIBLE_DEVICES": "7", "HPU_NUM_CARDS": "2"})
    assert res == [0, False]
