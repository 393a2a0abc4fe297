"""hl-smi from another process: a child that holds memory on hpu:2 and keeps
it busy shows up there (memory, utilisation, its pid); once it exits, or is
killed, its page and its row are gone. The CLI runs as installed (python -m
habana_smi.cli is what the hl-smi console script calls) and never loads torch."""
import os
import subprocess
import sys
import textwrap

import pytest

import habana_torch.version
from conftest import card_child_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = textwrap.dedent("""
    import os, sys, torch, habana_torch
    hold = torch.empty(64 << 20, dtype=torch.uint8, device="hpu:2")  # 64 MiB
    x = torch.randn(384, 384, device="hpu:2")
    torch.hpu.synchronize("hpu:2")
    print("ready", flush=True)
    while not os.path.exists(sys.argv[1]):  # until the test stops us
        for _ in range(4):
            x = torch.tanh(x @ x) * 0.5
        torch.hpu.synchronize("hpu:2")
""")


def smi(*args, check=True):
    r = subprocess.run([sys.executable, "-m", "habana_smi.cli", *args], env=card_child_env(),
                       capture_output=True, text=True, timeout=60)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def page_path(pid):
    return f"/dev/shm/habana_torch-status.{os.getuid()}.{pid}"


def start_child(stop="/nonexistent"):
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(stop)], env=card_child_env(),
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if line.strip() != "ready":
        p.kill()
        pytest.fail(f"child did not start: {line!r}")
    return p


def card_row(out, index):
    for line in out.strip().splitlines():
        cols = [c.strip() for c in line.split(",")]
        if cols[0] == str(index):
            return cols
    raise AssertionError(f"no row for card {index} in {out!r}")


def test_child_on_card_2_then_gone():
    child = start_child()
    try:
        assert os.path.exists(page_path(child.pid))
        r = smi("-Q", "index,name,bus_id,memory.used,memory.total,utilization.aip", "-f", "csv")
        header, *_ = r.stdout.splitlines()
        assert header == "index, name, bus_id, memory.used [MiB], memory.total [MiB], utilization.aip [%]"
        index, name, bus, used, total, util = card_row(r.stdout, 2)
        assert name == "GAUDI2" and bus == "0000:12:00.0"
        assert used.endswith(" MiB") and int(used.split()[0]) >= 64
        assert total == "16384 MiB"
        r = smi("-Q", "index,memory.used,utilization.aip", "-f", "csv,noheader,nounits", "-i", "2")
        index, used, util = card_row(r.stdout, 2)
        assert len(r.stdout.strip().splitlines()) == 1  # -i: that card only
        assert int(used) >= 64 and int(util) > 0
        table = smi().stdout
        assert any(line.split()[1:3] == ["2", str(child.pid)] for line in table.splitlines()
                   if line.startswith("|") and len(line.split()) > 3), table
    finally:
        child.kill()
        child.wait(timeout=30)


def test_exit_removes_page(tmp_path):
    stop = tmp_path / "stop"
    child = start_child(stop)
    page = page_path(child.pid)
    assert os.path.exists(page)
    stop.touch()  # the loop ends, the interpreter exits normally
    assert child.wait(timeout=60) == 0
    assert not os.path.exists(page)
    assert str(child.pid) not in smi().stdout


def test_killed_child_page_is_cleaned():
    child = start_child()
    page = page_path(child.pid)
    child.kill()
    child.wait(timeout=30)
    assert os.path.exists(page)  # nobody unlinked it
    out = smi().stdout
    assert str(child.pid) not in out
    assert not os.path.exists(page)


@pytest.mark.parametrize("setting,exists", [("0", False), ("1", True)])
def test_status_page_setting(setting, exists):
    env = card_child_env()
    env["HPU_STATUS_PAGE"] = setting
    code = ("import os, torch, habana_torch; torch.ones(4, device='hpu').sum().item(); "
            f"print(os.path.exists('/dev/shm/habana_torch-status.{os.getuid()}.' + str(os.getpid())))")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(exists)


def test_version_and_driver_line():
    gaudi = habana_torch.version.GAUDI_API_VERSION
    ours = habana_torch.version.__version__
    assert smi("-v").stdout.strip().startswith(f"HL-SMI Version: hl-{gaudi}-habana_torch-{ours}")
    lines = smi().stdout.split("\n")
    assert lines[1].replace(" ", "").startswith(f"|HL-SMIVersion:hl-{gaudi}-habana_torch-{ours}")
    # How libraries read the Gaudi release off hl-smi's header.
    assert lines[2].replace(" ", "").split(":")[1][:-1].split("-")[0] == gaudi


def test_unknown_field_lists_valid_ones():
    r = smi("-Q", "index,memory.usd", "-f", "csv", check=False)
    assert r.returncode == 2
    assert "memory.usd" in r.stderr and "memory.used" in r.stderr and "utilization.aip" in r.stderr
    r = smi("-Q", "index", "-f", "json", check=False)
    assert r.returncode == 2 and "csv" in r.stderr


def test_unknowable_values_are_na():
    r = smi("-Q", "index,power.draw,temperature.aip", "-f", "csv,noheader", "-i", "0")
    assert r.stdout.strip() == "0, N/A, N/A"


def test_visible_devices_as_torch_hpu():
    env = card_child_env()
    env["HABANA_VISIBLE_DEVICES"] = "2,5"
    r = subprocess.run([sys.executable, "-m", "habana_smi.cli", "-L"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.stdout.splitlines() == ["AIP 0: GAUDI2 (Bus-Id: 0000:12:00.0, module ID: 2)",
                                     "AIP 1: GAUDI2 (Bus-Id: 0000:15:00.0, module ID: 5)"]
    env["HABANA_VISIBLE_DEVICES"] = "9"
    r = subprocess.run([sys.executable, "-m", "habana_smi.cli"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "HABANA_VISIBLE_DEVICES" in r.stderr


def test_cli_does_not_import_torch():
    code = ("import sys, habana_smi.cli as c; c.SAMPLE_S = 0; assert c.main(['-Q', 'index', '-f', 'csv']) == 0; "
            "bad = [m for m in sys.modules if m == 'torch' or m.startswith(('torch.', 'habana_torch'))]; "
            "assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], env=card_child_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_console_scripts_declared():
    with open(os.path.join(ROOT, "setup.py")) as f:
        text = f.read()
    assert '"hl-smi = habana_smi.cli:main"' in text and '"hpu-smi = habana_smi.cli:main"' in text


def test_collective_bytes_counted_by_hccl():
    """Bytes of a collective land on the card of its buffers, whether the
    process group runs it on the calling thread (blocking) or on the
    card's queue (async_op=True); CPU tensors are no card's traffic."""
    code = textwrap.dedent("""
        import os, socket, torch, torch.distributed as dist
        import habana_torch, habana_torch.distributed.hccl
        from habana_smi import pages
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        dist.init_process_group("hccl", rank=0, world_size=1, init_method=f"tcp://127.0.0.1:{port}")
        t = torch.ones(1000, device="hpu:1")
        dist.all_reduce(t)                          # 4000 bytes, blocking
        dist.all_reduce(t, async_op=True).wait()    # 4000 more, on the card's queue
        dist.broadcast(t[:10], 0)                   # 40
        torch.hpu.synchronize("hpu:1")
        c = pages.read_pages()[os.getpid()].cards[1]
        print(c.coll_bytes["all_reduce"], c.coll_bytes["broadcast"], t[0].item())
        dist.destroy_process_group()
    """)
    env = card_child_env()
    env["PT_HPU_SHARE_CARDS"] = "1"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["8000", "40", "1.0"]
