"""The cards in torch.profiler: ProfilerActivity.HPU adds each card as a
process "HPU <n>" of the trace with one lane per engine (MME, TPC, DMA,
HCCL); every device event links to the host op that launched it (a flow
arrow from an "hpu_launch" on that op's thread) and carries its bytes (and
flops for matmuls); key_averages() puts device time under the host ops.

Profiles a small BERT training step (the suite runs in lazy and in eager
mode) and a 2-rank all_reduce over hccl. Values known by construction: a
matmul's flops are 2*m*n*k of the shapes the step uses, a copy's bytes are
its tensor's size twice (read and written)."""
import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, tensorboard_trace_handler

import habana_torch
import habana_torch.core as htcore

transformers = pytest.importorskip("transformers")
transformers.utils.logging.set_verbosity_error()

CARD_PID = 100  # card n is pid 100 + n (backend/hpu_profiler.cpp)
LANES = {1: "MME", 2: "TPC", 3: "DMA", 4: "HCCL"}


def bert_step(model, opt, ids, labels):
    loss = model(input_ids=ids.to("hpu"), labels=labels.to("hpu")).loss
    loss.backward()
    htcore.mark_step()
    opt.step()
    opt.zero_grad()
    htcore.mark_step()
    return loss.item()


def make_bert():
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=128, max_position_embeddings=64, num_labels=3,
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return transformers.BertForSequenceClassification(cfg)


def load_trace(path):
    with open(path) as f:
        return json.load(f)["traceEvents"]


def device_events(events, card):
    return [e for e in events if e.get("ph") == "X" and e.get("pid") == CARD_PID + card]


def check_links(events, dev):
    """Every device event names its host op (External id of a CPU op on a
    host thread) and ends a flow that starts on that op's thread."""
    host_ops = {e["args"]["External id"]: e for e in events
                if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")
                and "External id" in e.get("args", {})}
    starts = {e["id"]: e for e in events if e.get("ph") == "s" and e.get("cat") == "ac2g"}
    ends = {(e["pid"], e["tid"], e["ts"]): e for e in events if e.get("ph") == "f" and e.get("cat") == "ac2g"}
    for e in dev:
        op = host_ops.get(e["args"].get("External id"))
        assert op is not None, f"device event {e['name']} has no host op"
        flow = ends.get((e["pid"], e["tid"], e["ts"]))
        assert flow is not None, f"device event {e['name']} has no flow arrow"
        start = starts[flow["id"]]
        assert (start["pid"], start["tid"]) == (op["pid"], op["tid"])
        assert op["ts"] <= start["ts"] <= op["ts"] + op["dur"], (e["name"], op["name"])


def test_bert_step_trace(tmp_path):
    model = make_bert().to("hpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    ids, labels = torch.randint(0, 100, (4, 16), generator=g), torch.randint(0, 3, (4,), generator=g)
    bert_step(model, opt, ids, labels)  # warm up: compiled recipes, allocator
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.HPU]) as prof:
        bert_step(model, opt, ids, labels)
    path = str(tmp_path / "bert.json")
    prof.export_chrome_trace(path)
    events = load_trace(path)

    meta = {(e["pid"], e["name"]): e["args"] for e in events if e.get("ph") == "M"}
    assert meta[(CARD_PID, "process_name")]["name"] == "HPU 0"
    lanes = {e["tid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "thread_name" and e["pid"] == CARD_PID}
    assert lanes == LANES

    dev = device_events(events, 0)
    by_lane = {name: [e for e in dev if e["tid"] == tid] for tid, name in LANES.items()}
    assert by_lane["MME"] and by_lane["TPC"] and by_lane["DMA"], {k: len(v) for k, v in by_lane.items()}
    assert all(e["args"]["engine"] == LANES[e["tid"]] and e["args"]["device"] == 0 for e in dev)
    assert all(e["name"] == "matmul" and e["args"]["flops"] > 0 for e in by_lane["MME"])
    assert all("flops" not in e["args"] for e in by_lane["TPC"] + by_lane["DMA"])
    # The step's first classifier matmul: [4, 64] @ [64, 3] among the MME events.
    assert any(e["args"]["flops"] == 2 * 4 * 3 * 64 for e in by_lane["MME"])
    # Inputs go host -> card: int64 ids [4, 16] read and written once.
    h2d = [e for e in by_lane["DMA"] if e["name"] == "memcpy HtoD"]
    assert any(e["args"]["bytes"] == 2 * 4 * 16 * 8 for e in h2d)
    # The loss comes back card -> host.
    assert any(e["name"] == "memcpy DtoH" for e in by_lane["DMA"])
    if os.environ.get("PT_HPU_LAZY_MODE", "1") != "0":
        assert any(e["name"].startswith("fused ") for e in by_lane["TPC"])
    # One in-order queue: the card's events do not overlap.
    dev.sort(key=lambda e: e["ts"])
    assert all(a["ts"] + a["dur"] <= b["ts"] + 1e-3 for a, b in zip(dev, dev[1:]))
    check_links(events, dev)

    # Device time per host op: the matmuls' time lands on aten::mm / addmm.
    avg = {e.key: e for e in prof.key_averages()}
    assert avg["aten::mm"].self_device_time_total > 0
    assert avg["aten::addmm"].device_time_total > 0
    # All of it: each device event's time is under exactly one host op.
    total_device = sum(e["dur"] for e in dev)
    host_ops = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU]
    attributed = sum(e.self_device_time_total for e in host_ops)
    assert attributed == pytest.approx(total_device, rel=1e-3)


def test_cpu_only_profile_records_no_device_events(tmp_path):
    x = torch.randn(8, 8).to("hpu")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        (x @ x).cpu()
    path = str(tmp_path / "cpu.json")
    prof.export_chrome_trace(path)
    events = load_trace(path)
    assert not [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy")]
    # Recording is off again after a profile with the cards.
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.HPU]):
        (x @ x).cpu()
    assert not habana_torch._C._trace_active()


def test_tensorboard_trace_handler(tmp_path):
    x = torch.randn(32, 32).to("hpu")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.HPU],
                 schedule=torch.profiler.schedule(wait=0, warmup=1, active=1, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(str(tmp_path))) as prof:
        for _ in range(2):
            (x @ x).cpu()
            prof.step()
    files = [f for f in os.listdir(tmp_path) if f.endswith(".pt.trace.json")]
    assert len(files) == 1, files
    dev = device_events(load_trace(str(tmp_path / files[0])), 0)
    assert [e["name"] for e in dev if e["tid"] == 1] == ["matmul"]


ALL_REDUCE = textwrap.dedent("""
    import sys, torch, torch.distributed as dist, habana_torch
    import habana_torch.distributed.hccl as hccl
    from torch.profiler import ProfilerActivity, profile
    world, rank, local_rank = hccl.initialize_distributed_hpu()
    dist.init_process_group("hccl")
    t = torch.full((1024,), float(rank + 1)).to("hpu")
    dist.all_reduce(t)  # warm up the communicator
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.HPU]) as prof:
        dist.all_reduce(t)
        torch.hpu.synchronize()
    assert t.cpu().eq(3.0 * 2).all()  # (1 + 2) * 2: two all_reduces of 1 and 2
    prof.export_chrome_trace(sys.argv[1] + f"/rank{rank}.json")
    dist.destroy_process_group()
""")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_rank_all_reduce_trace(tmp_path):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE="2",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p), OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, "-c", ALL_REDUCE, str(tmp_path)],
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(2)]
    for p in procs:
        out, _ = p.communicate(timeout=180)
        assert p.returncode == 0, out
    for rank in range(2):
        events = load_trace(str(tmp_path / f"rank{rank}.json"))
        dev = device_events(events, rank)
        hccl = [e for e in dev if e["tid"] == 4]
        assert [e["name"] for e in hccl] == ["hcclAllReduce"], [e["name"] for e in dev]
        assert hccl[0]["args"]["bytes"] == 1024 * 4 and hccl[0]["args"]["device"] == rank
        check_links(events, hccl)
        assert not device_events(events, 1 - rank)
