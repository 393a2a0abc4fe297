"""The metrics exporter over HTTP while a training loop runs on hpu:1: the
Gaudi-named gauges describe the card and our counters grow between two
scrapes with a plain HTTP client."""
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest
from conftest import card_child_env

pytest.importorskip("prometheus_client")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TRAIN = textwrap.dedent("""
    import torch, habana_torch
    import habana_torch.core as htcore
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4)).to("hpu:1")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(256, 64), torch.randint(0, 4, (256,))
    first = True
    while True:  # until the test kills us
        loss = torch.nn.functional.cross_entropy(model(x.to("hpu:1")), y.to("hpu:1"))
        loss.backward()
        htcore.mark_step()
        opt.step()
        opt.zero_grad()
        htcore.mark_step()
        loss.item()
        if first:
            print("ready", flush=True)
            first = False
""")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(port, deadline):
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                return r.read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _value(text, name, **labels):
    for line in text.splitlines():
        m = re.match(r"^(\w+)\{(.*)\} (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        if all(got.get(k) == v for k, v in labels.items()):
            return float(m.group(3))
    raise AssertionError(f"no {name}{labels} in the scrape")


def test_scrape_while_training():
    child = subprocess.Popen([sys.executable, "-c", TRAIN], env=card_child_env(), stdout=subprocess.PIPE, text=True)
    port = _free_port()
    exporter = subprocess.Popen([sys.executable, "-m", "habana_torch.exporter", "--port", str(port),
                                 "--address", "127.0.0.1"], env=card_child_env(), stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        first = _scrape(port, time.monotonic() + 120)
        time.sleep(1.0)
        second = _scrape(port, time.monotonic() + 30)
        card = {"index": "1", "bus_id": "0000:11:00.0"}
        assert _value(second, "habanalabs_memory_total_bytes", **card) == 16 << 30
        assert _value(second, "habanalabs_memory_used_bytes", **card) > 0
        assert _value(second, "habanalabs_utilization", **card) > 0
        assert _value(second, "habana_torch_card_processes", **card) >= 1
        for name, extra in [("habana_torch_kernels_total", {}), ("habana_torch_launches_total", {}),
                            ("habana_torch_engine_busy_seconds_total", {"engine": "queue"}),
                            ("habana_torch_copy_bytes_total", {"direction": "host_to_device"}),
                            ("habana_torch_copy_bytes_total", {"direction": "device_to_host"})]:
            before, after = _value(first, name, **card, **extra), _value(second, name, **card, **extra)
            assert after > before > 0, (name, extra, before, after)
        assert _value(second, "habana_torch_copy_bytes_total", **card, direction="device_to_device") >= 0
        assert _value(second, "habana_torch_collective_bytes_total", **card, op="all_reduce") == 0
        assert "habana_torch_graph_compilations_total" in second
    finally:
        for p in (exporter, child):
            p.kill()
            p.wait(timeout=30)


def test_textfile_once(tmp_path):
    path = tmp_path / "hpu.prom"
    r = subprocess.run([sys.executable, "-m", "habana_smi.exporter", "--textfile", str(path), "--once"],
                       env=card_child_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    text = path.read_text()
    assert "# TYPE habanalabs_memory_total_bytes gauge" in text
    assert _value(text, "habanalabs_memory_total_bytes", index="7") == 16 << 30


def test_bad_setting_is_named():
    env = card_child_env()
    env["HPU_NUM_CARDS"] = "lots"
    r = subprocess.run([sys.executable, "-m", "habana_smi.exporter", "--textfile", "/dev/null", "--once"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "HPU_NUM_CARDS" in r.stderr
