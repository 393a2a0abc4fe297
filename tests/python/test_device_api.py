"""torch.hpu device API: cards, current device, properties, streams, events."""
import os
import time

import pytest
import torch

from conftest import run_python


def test_available_and_count():
    assert torch.hpu.is_available()
    assert torch.hpu.device_count() == 8  # default: a Gaudi server's 8 cards
    assert torch.hpu.get_device_name() == "GAUDI2"
    props = torch.hpu.get_device_properties(3)
    assert props.total_memory > 0 and props.physical_id == 3


def test_accelerator_reports_hpu():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator().type == "hpu"
    assert torch.accelerator.device_count() == 8


def test_current_device_and_context():
    assert torch.hpu.current_device() == 0
    with torch.hpu.device(3):
        assert torch.hpu.current_device() == 3
        t = torch.empty(4, device="hpu")
        assert t.device == torch.device("hpu", 3)
    assert torch.hpu.current_device() == 0
    torch.hpu.set_device("hpu:2")
    try:
        assert torch.hpu.current_device() == 2
    finally:
        torch.hpu.set_device(0)


def test_cards_have_their_own_memory():
    base = [torch.hpu.memory_allocated(i) for i in (1, 3)]
    x = torch.ones(1 << 20, device="hpu:3")
    torch.hpu.synchronize(3)
    assert torch.hpu.memory_allocated(3) >= base[1] + 4 * (1 << 20)
    assert torch.hpu.memory_allocated(1) == base[0]
    y = x.to("hpu:1")
    assert y.device == torch.device("hpu:1")
    assert torch.equal(y.cpu(), torch.ones(1 << 20))
    del x, y


def test_visible_devices_and_count_env():
    r = run_python("""
        import torch, habana_torch
        print(torch.hpu.device_count(), torch.hpu.get_device_properties(1).physical_id)
        x = torch.arange(4.0, device="hpu:1")
        print(x.cpu().tolist())
    """, env={"HABANA_VISIBLE_DEVICES": "2,5", "HPU_NUM_CARDS": "8"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert lines[0] == "2 5"
    assert lines[1] == "[0.0, 1.0, 2.0, 3.0]"

    r = run_python("import torch, habana_torch; print(torch.hpu.device_count())", env={"HPU_NUM_CARDS": "3"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "3"


def test_bad_environment_is_a_clear_error():
    r = run_python("""
        import torch, habana_torch
        print(torch.hpu.is_available())
        try:
            torch.empty(1, device="hpu")
        except RuntimeError as e:
            print("ERR", e)
    """, env={"HPU_CARD_MEMORY": "lots"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("False")
    assert "HPU_CARD_MEMORY" in r.stdout


def test_invalid_device_index():
    with pytest.raises((IndexError, RuntimeError), match="invalid hpu device index 9"):
        torch.empty(2, device="hpu:9")
    with pytest.raises((IndexError, RuntimeError), match="invalid hpu device index"):
        torch.hpu.set_device(42)
    assert torch.ones(2, device="hpu").sum().item() == 2  # still usable


def test_synchronize_and_stream_event_timing():
    s = torch.hpu.Stream()
    start = torch.hpu.Event(enable_timing=True)
    end = torch.hpu.Event(enable_timing=True)
    with torch.hpu.stream(s):
        assert torch.hpu.current_stream() == s
        start.record()
        a = torch.randn(256, 256, device="hpu")
        for _ in range(5):
            a = a @ a / 16
        end.record()
    assert torch.hpu.current_stream() == torch.hpu.default_stream()
    end.synchronize()
    assert end.query()
    assert start.elapsed_time(end) >= 0.0
    s.synchronize()
    torch.hpu.synchronize()
    assert s.query()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the kernel pool spins only with 2+ CPUs")
def test_op_then_synchronize_defers_the_queue_wake():
    """An op followed by synchronize: the push leaves the sleeping queue
    worker asleep while a pool worker is awake, and that pool worker runs
    the op (counted in queue_wake). An op nobody waits for still completes."""
    import habana_torch.core as htcore
    from habana_torch.hpu.metrics import metric_global

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        wake = metric_global("queue_wake")
        wake.reset()
        assert dict(wake.stats()) == {"Deferred": 0, "RunByPool": 0, "ByPool": 0}
        # 512K elements: queued (eager ops of 1M+ elements run on the
        # calling thread when the queue is idle, see the test below)
        x = torch.randn(512, 1024, generator=torch.Generator().manual_seed(0))
        xh = x.to("hpu")
        # retried for up to 10 s: on a loaded machine the pool worker is often
        # asleep or preempted, and the synchronize takes the op first (two
        # busy loops beside this test needed ~300 tries)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            xh.sum(-1)  # a parallel kernel: a pool worker stays awake 500 us after it
            torch.hpu.synchronize()
            time.sleep(0.0001)  # the queue worker sleeps 20 us after its last task
            y = xh.sum(-1)
            # lazy mode: mark_step pushes the graph (a synchronize alone would
            # run it on this thread without a push, see the test below)
            htcore.mark_step()
            torch.hpu.synchronize()
            if dict(wake.stats())["RunByPool"]:
                break
        # ours adds in double, torch in float: rows of 1024 differ by ~1e-5
        torch.testing.assert_close(y.cpu(), x.sum(-1), rtol=1e-5, atol=1e-4)
        stats = dict(wake.stats())
        assert stats["Deferred"] >= stats["RunByPool"] > 0
        z = xh.amax(-1)  # nobody synchronizes: the queue must still run it
        htcore.mark_step()  # lazy mode: launch it (asynchronously, as on Gaudi)
        stream = torch.hpu.current_stream()
        deadline = time.monotonic() + 10
        while not stream.query() and time.monotonic() < deadline:
            time.sleep(0.001)
        assert stream.query()
        torch.testing.assert_close(z.cpu(), x.amax(-1), rtol=0, atol=0)
    finally:
        torch.set_num_threads(threads)


def test_synchronize_runs_recorded_work_on_its_own_thread_when_idle():
    """Lazy mode: a synchronize (or a read to the host) with nothing queued
    runs the recorded graph on the calling thread instead of pushing it to
    the queue's worker, counted in graph_launch's RunAtWait; behind queued
    work the graph is pushed, and runs after it."""
    import habana_torch.core as htcore
    from habana_torch.hpu.metrics import metric_global

    if not htcore.is_lazy():
        pytest.skip("eager mode launches every op at once")
    launch = metric_global("graph_launch")
    x = torch.randn(64, 256, generator=torch.Generator().manual_seed(1))
    xh = x.to("hpu")
    torch.hpu.synchronize()
    launch.reset()
    for _ in range(5):
        y = (xh * 2).sum(-1)
        torch.hpu.synchronize()
    z = (xh + 1).amax(-1).cpu()  # the read to the host flushes and waits the same way
    stats = dict(launch.stats())
    assert stats["TotalNumber"] == 6 and stats["RunAtWait"] == 6, stats
    torch.testing.assert_close(y.cpu(), (x * 2).sum(-1))
    torch.testing.assert_close(z, (x + 1).amax(-1), rtol=0, atol=0)
    # queued work first: a long product pushed by mark_step, then an op on
    # its result; the second graph must not run before the first
    a = torch.randn(768, 768, generator=torch.Generator().manual_seed(2))
    ah = a.to("hpu")
    torch.hpu.synchronize()
    launch.reset()
    p = ah @ ah @ ah
    htcore.mark_step()
    q = (p * 0.5).sum()
    torch.hpu.synchronize()
    stats = dict(launch.stats())
    assert stats["TotalNumber"] == 2, stats
    want = ((a @ a @ a) * 0.5).sum()
    torch.testing.assert_close(q.cpu(), want, rtol=1e-4, atol=1e-2)


def test_large_eager_op_runs_on_the_calling_thread_when_the_queue_is_idle():
    """Eager mode: an op of 1M+ elements over its operands runs on the
    calling thread when nothing is queued (counted in eager_inline's Large);
    a smaller one is queued; a large one behind queued work is queued after
    it and sees its result."""
    import habana_torch.core as htcore
    from habana_torch.hpu.metrics import metric_global

    if htcore.is_lazy():
        pytest.skip("lazy mode records ops into graphs")
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(1024, 1024, generator=g), torch.randn(1024, 1024, generator=g)
    xh, yh = x.to("hpu"), y.to("hpu")
    inline = metric_global("eager_inline")
    torch.hpu.synchronize()
    inline.reset()
    z = xh + yh  # 3M elements
    assert dict(inline.stats())["Large"] == 1
    torch.hpu.synchronize()
    s = xh[:300].sum(-1)  # 300K elements: queued
    assert dict(inline.stats())["Large"] == 1
    torch.testing.assert_close(z.cpu(), x + y, rtol=0, atol=0)
    torch.testing.assert_close(s.cpu(), x[:300].sum(-1), rtol=1e-5, atol=1e-4)
    # behind queued work: a product of a few milliseconds, then a large op
    # that reads its result
    a = torch.randn(512, 512, generator=g)
    ah = a.to("hpu")
    torch.hpu.synchronize()
    t = (ah @ ah).sum()  # queued
    w = xh * t  # 2M elements, must wait for t
    torch.testing.assert_close(w.cpu(), x * (a @ a).sum(), rtol=1e-4, atol=1e-2)
    inline.reset()
    assert dict(inline.stats())["Large"] == 0


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the kernel pool spins only with 2+ CPUs")
def test_queue_defer_wake_can_be_switched_off():
    r = run_python(
        """
        import time, torch, habana_torch
        from habana_torch.hpu.metrics import metric_global
        torch.set_num_threads(2)
        x = torch.randn(512, 1024, generator=torch.Generator().manual_seed(0))
        xh = x.to("hpu")
        for _ in range(100):  # the setup that defers in the test above
            xh.sum(-1)
            torch.hpu.synchronize()
            time.sleep(0.0001)
            y = xh.sum(-1)
            torch.hpu.synchronize()
        torch.testing.assert_close(y.cpu(), x.sum(-1), rtol=1e-5, atol=1e-4)
        print("deferred", dict(metric_global("queue_wake").stats())["Deferred"])
        """,
        env={"HPU_QUEUE_DEFER_WAKE": "0", "PT_HPU_LAZY_MODE": "0"})
    assert r.returncode == 0, r.stderr
    assert "deferred 0" in r.stdout, r.stdout


def test_generic_torch_stream_and_event():
    s = torch.Stream(device="hpu")
    e = torch.Event(device="hpu", enable_timing=True)
    e.record(s)
    e.synchronize()
    assert e.query()


def test_generator_device():
    g = torch.Generator(device="hpu")
    g.manual_seed(123)
    a = torch.empty(100, device="hpu").uniform_(generator=g)
    g.manual_seed(123)
    b = torch.empty(100, device="hpu").uniform_(generator=g)
    assert torch.equal(a.cpu(), b.cpu())
    assert g.device.type == "hpu"


def test_import_torch_autoloads_habana_torch_before_other_libraries():
    """PyTorch reads the HPU hooks once; a library that asks torch.accelerator
    before habana_torch is imported would hide the hpu for the whole process.
    The installed package registers a torch.backends entry point so that
    `import torch` loads it first."""
    from importlib.metadata import entry_points
    if not any(ep.name == "habana_torch" for ep in entry_points(group="torch.backends")):
        pytest.skip("habana_torch is not pip-installed here (no torch.backends entry point)")
    r = run_python("""
        import sys, torch
        print("habana_torch" in sys.modules, torch.accelerator.current_accelerator())
        a = torch.ones(2, device="hpu", requires_grad=True)
        (a * 3).sum().backward()
        print(a.grad.cpu().tolist())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["True hpu", "[3.0, 3.0]"]


def test_set_device_without_index_keeps_the_current_card():
    """torch.device("hpu") names the current card (DeepSpeed's ZeRO-3 passes it)."""
    torch.hpu.set_device(1)
    try:
        for d in ("hpu", torch.device("hpu")):
            torch.hpu.set_device(d)
            assert torch.hpu.current_device() == 1
    finally:
        torch.hpu.set_device(0)
    with pytest.raises(ValueError, match="Expected an hpu device"):
        torch.hpu.set_device("cpu")


def test_record_stream():
    """Nothing to record (one in-order queue per card), but the call works,
    as ZeRO-3 makes it when it frees a parameter, and the block is reused
    safely: work queued on another stream still reads the old values."""
    s = torch.hpu.Stream()
    x = torch.arange(1000.0, device="hpu")
    with torch.hpu.stream(s):
        y = x * 2
    x.record_stream(s)
    del x
    z = torch.zeros(1000, device="hpu")  # may take x's block
    torch.hpu.synchronize()
    assert torch.equal(y.cpu(), torch.arange(1000.0) * 2) and not z.cpu().any()
    with pytest.raises(ValueError, match="must be one of the tensor's card"):
        torch.ones(2, device="hpu:1").record_stream(s)
