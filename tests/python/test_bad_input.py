"""Bad input gives a clear Python error, and the process goes on."""
import pytest
import torch

from conftest import run_python


def test_hpu_plus_cpu_tensor():
    h = torch.ones(3, device="hpu")
    c = torch.ones(3)
    with pytest.raises(RuntimeError, match="same device.*hpu:0 and cpu"):
        h + c
    with pytest.raises(RuntimeError, match="same device"):
        torch.mm(torch.ones(2, 2, device="hpu"), torch.ones(2, 2))
    with pytest.raises(RuntimeError, match="same device"):
        torch.cumsum(h, 0) + torch.ones(3, device="hpu:1")
    with pytest.raises(RuntimeError, match="same device"):
        torch.maximum(h, c)  # a fallback op checks devices too
    assert (h + torch.tensor(2.0)).cpu().tolist() == [3.0, 3.0, 3.0]  # cpu scalars are fine


def test_invalid_card():
    with pytest.raises((IndexError, RuntimeError), match="invalid hpu device index 8"):
        torch.ones(1).to("hpu:8")
    assert torch.ones(1).to("hpu:7").device.index == 7


def test_dtype_the_core_lacks():
    with pytest.raises(TypeError, match="hpu does not support dtype ComplexFloat"):
        torch.zeros(2, dtype=torch.complex64, device="hpu")
    with pytest.raises(TypeError, match="does not support dtype"):
        torch.zeros(2, dtype=torch.complex64).to("hpu")
    assert torch.zeros(2, device="hpu").sum().item() == 0


def test_shape_errors():
    with pytest.raises(RuntimeError, match="size of tensor a"):
        torch.ones(2, 3, device="hpu") + torch.ones(4, device="hpu")
    with pytest.raises(RuntimeError):
        torch.ones(2, 3, device="hpu").view(5)


def test_forked_child_gets_a_clear_error():
    r = run_python("""
        import os, torch, habana_torch
        x = torch.ones(2, device="hpu")
        pid = os.fork()
        if pid == 0:
            try:
                torch.ones(2, device="hpu")
                os._exit(3)
            except RuntimeError as e:
                os._exit(0 if "fork" in str(e) else 4)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
        print("parent", (x + 1).cpu().tolist())
    """)
    assert r.returncode == 0, r.stderr
    assert "child 0" in r.stdout, r.stdout + r.stderr
    assert "parent [2.0, 2.0]" in r.stdout
