"""A malformed numeric setting is a Python exception naming the variable and
its value: never a hang, a crash or a quiet default. Each case runs in a
fresh interpreter (settings are read once) with a timeout, so a hang fails."""
import socket

import pytest

from conftest import run_python


@pytest.mark.parametrize("name,value", [
    ("PT_HPU_MAX_GRAPH_NODES", "abc"),
    ("PT_HPU_MAX_GRAPH_NODES", "-3"),
    ("PT_HPU_RECIPE_CACHE_SIZE", "12k"),
    ("PT_HPU_RECIPE_CACHE_BYTES", "-1"),
    ("OMP_NUM_THREADS", "lots"),
    ("HPU_STATUS_PAGE", "2"),
    ("HPU_TRACE_MAX_EVENTS", "0"),
])
def test_bad_core_setting_is_a_runtime_error(name, value):
    r = run_python("""
        import torch, habana_torch
        try:
            torch.ones(2, device="hpu").sum().item()
        except RuntimeError as e:
            print("ERR", e)
    """, env={name: value}, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("ERR"), r.stdout
    assert f"{name}='{value}'" in r.stdout and "expected" in r.stdout, r.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("name,value", [
    ("HCCL_SHM_SLOT_BYTES", "-1"),   # was an endless loop in the first collective
    ("HCCL_SHM_MBOX_BYTES", "abc"),
    ("HCCL_TIMEOUT", "never"),
])
def test_bad_hccl_setting_is_an_error_at_communicator_init(name, value):
    r = run_python("""
        import torch, torch.distributed as dist
        import habana_torch, habana_torch.distributed.hccl
        try:
            dist.init_process_group("hccl", rank=0, world_size=1)
            t = torch.ones(1 << 16, device="hpu")
            dist.all_reduce(t)
            print("OK", t.sum().item())
        except Exception as e:
            print("ERR", type(e).__name__, e)
    """, env={name: value, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
              "PT_HPU_SHARE_CARDS": "1"}, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("ERR"), r.stdout + r.stderr[-2000:]
    assert f"{name}='{value}'" in r.stdout, r.stdout
