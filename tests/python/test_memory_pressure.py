"""Memory pressure: random op programs on a small card, each against the
same program on the CPU, and the hangs and aliasing bugs they found.

The programs (pressure_programs.py) mix elementwise ops, reductions,
matmul, views at offsets and overlapping slices of one base, in-place ops
on views, frees, empty_cache, synchronize, mark_step and reads to the host,
on cards of 8 to 32 MiB with allocations past the card. Every program runs
in a worker process under a timeout: a hang fails the program (named by its
profile and seed) instead of hanging the suite. Out of memory must surface
as torch.OutOfMemoryError, after which the program goes on without that
tensor and its later results must still be right. The mode is
PT_HPU_LAZY_MODE's (scripts/test.sh runs the file in both).

To look at a failure: `python3 tests/python/pressure_programs.py --source
PROFILE:SEED CARD` prints the program as a script;
`python3 scripts/soak_memory_pressure.py --shrink PROFILE:SEED
--card-memory CARD` shrinks it to the fewest statements that still fail.
"""
import json
import os
import subprocess

import pytest
import torch

import pressure_programs as pp
from conftest import run_python

MODE = "lazy" if os.environ.get("PT_HPU_LAZY_MODE", "1") != "0" else "eager"
TIMEOUT = 20.0  # seconds per program; the slowest take about 2 s on a loaded 2-core machine

# (profile, card, first seed, programs): about 150 programs per mode.
BATCHES = [
    ("mixed", "8M", 0, 20),
    ("mixed", "16M", 1000, 20),
    ("mixed", "32M", 2000, 20),
    ("alias", "16M", 0, 20),
    ("alias", "32M", 1000, 15),
    ("oom", "8M", 0, 15),
    ("oom", "32M", 1000, 15),
    ("flush", "16M", 0, 20),
]


@pytest.mark.parametrize("profile,card,first,count", BATCHES,
                         ids=[f"{p}-{c}-{f}" for p, c, f, _ in BATCHES])
def test_random_programs_match_cpu(profile, card, first, count):
    programs = [dict(seed=s, profile=profile) for s in range(first, first + count)]
    results = pp.run_batch(programs, card, timeout=TIMEOUT, max_hangs=2)
    bad = [d for d in map(pp.describe, results) if d]
    assert not bad, (
        f"{len(bad)} of {count} programs failed in {MODE} mode on a {card} card (shrink one with "
        f"scripts/soak_memory_pressure.py --shrink PROFILE:SEED --card-memory {card}):\n"
        + "\n".join(bad))
    assert sum(r["reads"] for r in results) > 10 * count  # the programs did compare something
    if profile == "oom":  # they did run out of memory, and went on
        assert sum(r["ooms"] for r in results) >= count // 3, results


def test_generator_is_deterministic_and_draws_every_kind():
    kinds, groups = set(), set()
    for profile in pp.PROFILES:
        for seed in range(8):
            ops = pp.generate(seed, profile, 16 << 20)
            assert ops == pp.generate(seed, profile, 16 << 20)
            kinds |= {op["kind"] for op in ops}
            groups |= {op["group"] for op in ops}
    assert set(pp._BASE_WEIGHTS) <= groups, set(pp._BASE_WEIGHTS) - groups
    assert {"view", "inplace", "out", "empty_cache", "synchronize", "mark_step", "read", "item",
            "alloc", "partial_overlap", "delete", "matmul", "reduce"} <= kinds


def test_comparison_catches_a_wrong_value_and_a_missing_exception():
    """The harness itself: the CPU against a corrupted CPU run must fail."""
    ops = pp.generate(5, "mixed", 16 << 20)
    reads, events = pp.run(ops, "cpu")
    assert pp.compare(ops, (reads, events), (reads, events)) == []
    key = max(k for k, v in reads.items() if isinstance(v, torch.Tensor) and v.numel() > 1)
    bad = dict(reads)
    bad[key] = reads[key].clone()
    bad[key][(0,) * bad[key].dim()] += 1
    fails = pp.compare(ops, (bad, events), (reads, events))
    assert len(fails) == 1 and fails[0].startswith(f"read {key}"), fails
    ops = next(ops for ops in (pp.generate(s, "mixed", 16 << 20) for s in range(100))
               if any(op["kind"] == "partial_overlap" for op in ops))
    reads, events = pp.run(ops, "cpu")
    assert any(ops[i]["kind"] == "partial_overlap" for i in events), events  # PyTorch refuses it
    fails = pp.compare(ops, (reads, {}), (reads, events))
    assert fails and "raised RuntimeError on the CPU but not on hpu" in fails[0], fails


def test_a_hanging_program_fails_fast_and_the_rest_still_run():
    programs = [dict(seed=1, profile="mixed", stall=600), dict(seed=2, profile="mixed")]
    results = pp.run_batch(programs, "16M", timeout=5, max_hangs=2)
    assert results[0]["hang"] and "mixed:1: HANG" in pp.describe(results[0])
    assert "in _worker" in results[0]["at"], results[0]  # where it hung, from the stack dump
    assert results[1]["seed"] == 2 and "nfails" in results[1]


def _run(code, env=None, timeout=30):
    try:
        return run_python(code, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung for {timeout} s in {MODE} mode:\n{code}")


def test_empty_cache_with_recorded_ops_returns():
    """empty_cache() flushes the recorded graph; that flush must not wait
    for the allocator lock empty_cache holds."""
    r = _run("""
        import torch, habana_torch
        x = torch.ones(1024, device="hpu")
        y = x * x + x            # recorded, not flushed (lazy mode)
        torch.hpu.empty_cache()
        print(y.cpu()[:2].tolist())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["[2.0,", "2.0]"], r.stdout


def test_allocation_past_the_card_with_recorded_ops_raises():
    """The issue's second reproducer: the allocation cannot fit (16 + 16 +
    40 MiB on a 64 MiB card); before saying so the allocator releases its
    cache, which flushes the recorded graph (it may use the freed blocks).
    That flush must not deadlock on the allocator's lock, the error must be
    torch.OutOfMemoryError, and c must still hold its values."""
    r = _run("""
        import torch, habana_torch
        a = torch.ones(4 << 20, device="hpu"); b = a + 1; del b; c = a * 2
        try:
            d = torch.empty(40 << 20, dtype=torch.uint8, device="hpu")
        except torch.OutOfMemoryError:
            print("OutOfMemoryError")
        print(c.sum().item())
    """, env={"HPU_CARD_MEMORY": "64M"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["OutOfMemoryError", str(2.0 * (4 << 20))], r.stdout


def test_allocation_that_fits_once_the_cache_is_released_returns():
    """As above, but the allocation fits once b's cached segment goes back
    to the card (16 + 16 + 24 of 64 MiB, b's 16 at the end)."""
    r = _run("""
        import torch, habana_torch
        a = torch.ones(4 << 20, device="hpu"); c = a * 2; b = c + 1; del b
        d = torch.empty(24 << 20, dtype=torch.uint8, device="hpu")
        print(c.sum().item(), a.sum().item(), d.numel())
    """, env={"HPU_CARD_MEMORY": "64M"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(2.0 * (4 << 20)), str(1.0 * (4 << 20)), str(24 << 20)], r.stdout


ALIASING = """
    import json, torch, habana_torch, habana_torch.core as htcore
    n = 4096

    def step(a, t, extra):
        htcore.mark_step()
        u = a * 2 + extra        # fusable with the write below...
        t.add_(u)                # ...unless t overlaps a
        del u
        htcore.mark_step()

    def case(dev, layout):
        g = torch.Generator().manual_seed(0)
        z = torch.randint(-8, 9, (3 * n,), generator=g).float().to(dev)
        w = torch.randint(-8, 9, (3 * n,), generator=g).float().to(dev)
        extra = torch.randint(-8, 9, (n,), generator=g).float().to(dev)
        if layout == "separate":     # a and t in different storages
            step(w[0:n], z[7:7 + n], extra)
        elif layout == "apart":      # one storage, no element shared
            step(z[0:n], z[n + 7:2 * n + 7], extra)
        elif layout == "overlap":    # the same sizes and strides, t 7 elements past a
            step(z[0:n], z[7:7 + n], extra)
        else:                        # overlapping the other way
            step(z[7:7 + n], z[0:n], extra)
        return z.cpu()

    out = {}
    for first, second in [("separate", "overlap"), ("apart", "overlap"), ("separate", "behind")]:
        habana_torch._C._recipe_cache_clear()
        case("hpu", first)           # compiles (and caches) a plan for the first layout
        got, want = case("hpu", second), case("cpu", second)
        out[f"{first}->{second}"] = int((got != want).sum())
    print(json.dumps(out))
"""


def test_recipe_cache_tells_overlapping_views_apart():
    """Two graphs with the same shapes, strides and dtypes, whose write
    overlaps what they read in one and not in the other: the plan compiled
    for one must not be replayed for the other. Counts the wrong elements
    of the second against the CPU."""
    r = _run(ALIASING)
    assert r.returncode == 0, r.stderr
    wrong = json.loads(r.stdout.strip().splitlines()[-1])
    assert wrong == {k: 0 for k in wrong} and len(wrong) == 3, f"{MODE} mode: wrong elements {wrong}"
