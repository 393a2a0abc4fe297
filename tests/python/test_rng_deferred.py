"""Seeding before the cards start: queued as in torch.cuda, applied at the
first use, with the same numbers as seeding afterwards; seeding alone does
not start the runtime, so a forked child can still use the hpu."""
import pytest
import torch

import habana_torch  # noqa: F401
from conftest import run_python, run_python_json


def test_seeding_does_not_initialise_the_cards():
    res = run_python_json("""
        import json, torch, habana_torch
        state = torch.ByteTensor(16)
        torch.manual_seed(1)
        torch.random.manual_seed(2)
        torch.hpu.manual_seed(3)
        torch.hpu.manual_seed_all(4)
        torch.hpu.seed()
        torch.hpu.seed_all()
        torch.hpu.set_rng_state(state)
        torch.hpu.set_rng_state(state, 1)
        torch.hpu.set_rng_state_all([state, state])
        print(json.dumps([torch.hpu.is_initialized(), habana_torch._C._is_initialized()]))
    """)
    assert res == [False, False]


def test_child_forked_after_seeding_can_use_the_hpu():
    out = run_python("""
        import os, torch, habana_torch
        torch.manual_seed(1)
        pid = os.fork()
        if pid == 0:
            try:
                torch.manual_seed(5)
                x = torch.rand(8, device="hpu")
                torch.manual_seed(5)
                ok = torch.equal(torch.rand(8, device="hpu").cpu(), x.cpu())
                ok = ok and torch.equal((torch.arange(4, device="hpu") * 2).cpu(), torch.arange(4) * 2)
                os._exit(0 if ok else 3)
            except BaseException as e:
                print("child:", type(e).__name__, e, flush=True)
                os._exit(4)
        _, status = os.waitpid(pid, 0)
        print("child exit", os.waitstatus_to_exitcode(status))
    """)
    assert out.returncode == 0, out.stderr
    assert "child exit 0" in out.stdout, out.stdout + out.stderr


def _draws():
    """What the lazy-order script prints: the draws on two cards."""
    return [torch.rand(8, device="hpu:0").cpu().tolist(), torch.rand(8, device="hpu:1").cpu().tolist()]


_DRAWS = """
    out = [torch.rand(8, device="hpu:0").cpu().tolist(), torch.rand(8, device="hpu:1").cpu().tolist()]
    print(json.dumps([torch.hpu.is_initialized(), out]))
"""


def test_torch_manual_seed_before_init_equals_after():
    ready, lazy = run_python_json("""
        import json, torch, habana_torch
        torch.manual_seed(1)
        assert not torch.hpu.is_initialized()
    """, _DRAWS)
    torch.manual_seed(1)  # this process's cards are up already
    assert ready is True
    assert lazy == _draws()
    torch.manual_seed(1)
    assert lazy[0] == torch.rand(8, device="hpu").cpu().tolist()  # the case the issue names


@pytest.mark.parametrize("calls", [
    "torch.hpu.manual_seed_all(4); torch.hpu.manual_seed(9)",   # card 0: 9, card 1: 4
    "torch.hpu.manual_seed(9); torch.hpu.manual_seed_all(4)",   # all cards 4
    "torch.hpu.manual_seed_all(4); torch.hpu.manual_seed(9); torch.hpu.manual_seed(10)",
    "torch.hpu.manual_seed_all(4); torch.hpu.set_rng_state(STATE, 1)",
    "torch.hpu.set_rng_state(STATE, 1); torch.hpu.manual_seed_all(4)",
])
def test_queued_calls_keep_their_order(calls):
    # STATE: seed 77, offset 3 (two uint64 words, little-endian).
    state = "torch.tensor([77, 3], dtype=torch.int64).view(torch.uint8)"
    ready, lazy = run_python_json(f"""
        import json, torch, habana_torch
        STATE = {state}
        {calls}
        assert not torch.hpu.is_initialized()
    """, _DRAWS)
    STATE = eval(state)  # noqa: F841  (used by the calls)
    exec(calls)
    assert ready is True
    assert lazy == _draws()


def test_bad_state_is_rejected_at_the_call_not_at_init():
    out = run_python("""
        import torch, habana_torch
        for bad, exc in [(torch.zeros(15, dtype=torch.uint8), ValueError),
                         (torch.zeros(16, dtype=torch.int32), TypeError),
                         ([0] * 16, TypeError)]:
            try:
                torch.hpu.set_rng_state(bad)
            except exc as e:
                assert "hpu RNG state" in str(e), e
            else:
                raise AssertionError(f"{bad!r} accepted")
        try:
            torch.hpu.set_rng_state(torch.zeros(16, dtype=torch.uint8), "cpu")
        except ValueError as e:
            assert "hpu device" in str(e), e
        else:
            raise AssertionError("a cpu device accepted")
        assert not torch.hpu.is_initialized()
        torch.rand(2, device="hpu")  # no queued failure surfaces later
    """)
    assert out.returncode == 0, out.stderr


def test_a_queued_call_that_fails_says_where_it_came_from():
    out = run_python("""
        import torch, habana_torch
        torch.hpu.set_rng_state(torch.zeros(16, dtype=torch.uint8), 99)  # no card 99
        try:
            torch.rand(2, device="hpu")
        except RuntimeError as e:
            assert "queued before the cards were initialised" in str(e), e
            assert "set_rng_state" in str(e), e
        else:
            raise AssertionError("no error")
        # Reported once: the cards work afterwards.
        assert torch.equal((torch.ones(2, device="hpu") + 1).cpu(), torch.full((2,), 2.0))
    """)
    assert out.returncode == 0, out.stderr
