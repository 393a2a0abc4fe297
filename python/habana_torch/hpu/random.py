"""RNG of the cards: one Philox generator (seed + offset) per card
(``default_generators``), seeded as torch.cuda's.

Setting a seed or a state does not start the hpu runtime, as in torch.cuda:
the call is queued and applied when the cards are first initialised
(hpu._lazy_init). A CPU-only script that seeds everything (torch.manual_seed)
and then forks workers thus leaves children that can still use the hpu;
starting the runtime first would make every such child a "bad fork".
Reading a seed or a state initialises the cards.
"""
import traceback

import torch

from . import _utils

# Calls waiting for the runtime, in call order: (target, callable, where
# called). target is
# "all" (every card), "current" or a card index. A later call on the same
# target supersedes an earlier one (each sets the whole generator state) and
# one on "all" supersedes everything, so the queue stays a few entries long
# however often a CPU-only loop reseeds.
_queued_calls = []


def _lazy_call(target, fn):
    """Runs fn now if the cards are initialised, else when they are."""
    from .. import hpu  # _initialized changes: read it under the lock

    with hpu._init_lock:
        if hpu._initialized:
            fn()
            return
        if target == "all":
            _queued_calls.clear()
        else:
            _queued_calls[:] = [c for c in _queued_calls if c[0] != target]
        # Where it was called from: an error surfaces only at initialisation.
        _queued_calls.append((target, fn, "".join(traceback.format_stack(limit=8)[:-1])))


def _run_queued_calls():
    """Called by hpu._lazy_init under its lock once the runtime is up, before
    anything can draw from a generator."""
    calls = list(_queued_calls)
    _queued_calls.clear()
    for _, fn, where in calls:
        try:
            fn()
        except Exception as e:
            raise RuntimeError(f"an hpu RNG call queued before the cards were initialised failed "
                               f"at initialisation: {e}\nIt was called at:\n{where}") from e


# The queued callables run inside _lazy_init (its lock held), so they reach
# the generators through _C directly rather than through _lazy_init again.
def _generator(idx):
    from .. import _C

    return _C._default_generator(_C._current_device() if idx is None else idx)


def _all_generators():
    from .. import _C

    return [_C._default_generator(i) for i in range(_C._device_count())]


def _target(device):
    """Queue target of a device argument, without initialising the cards."""
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "hpu":
            raise ValueError(f"Expected an hpu device, but got: {device}")
        device = device.index
    if device is None or device == -1:
        return "current"
    if not isinstance(device, int):
        raise TypeError(f"hpu device must be an int, str or torch.device, got {type(device).__name__}")
    if device < 0:
        raise IndexError(f"invalid hpu device index {device}")
    return device


def manual_seed(seed):
    """Seeds the current card's generator (applied at initialisation if the
    cards are not initialised yet)."""
    seed = int(seed)
    _lazy_call("current", lambda: _generator(None).manual_seed(seed))


def manual_seed_all(seed):
    """Seeds every card's generator (applied at initialisation if the cards
    are not initialised yet)."""
    seed = int(seed)

    def cb():
        for g in _all_generators():
            g.manual_seed(seed)

    _lazy_call("all", cb)


def seed():
    """Seeds the current card's generator with a non-deterministic number."""
    _lazy_call("current", lambda: _generator(None).seed())


def seed_all():
    """Seeds every card with the same non-deterministic number."""

    def cb():
        gens = _all_generators()
        if gens:
            s = gens[0].seed()
            for g in gens[1:]:
                g.manual_seed(s)

    _lazy_call("all", cb)


def initial_seed():
    """The current card's seed (initialises the cards)."""
    return _card_generator(None).initial_seed()


def get_rng_state(device="hpu"):
    """The card generator's state: 16 bytes (seed, offset) as a ByteTensor
    (initialises the cards)."""
    return _card_generator(device).get_state()


def set_rng_state(new_state, device="hpu"):
    """Sets a card generator's state (applied at initialisation if the cards
    are not initialised yet)."""
    target = _target(device)
    # Checked now, not when the queued call runs (same checks as the generator).
    if not isinstance(new_state, torch.Tensor):
        raise TypeError(f"hpu RNG state must be a CPU torch.ByteTensor, got {type(new_state).__name__}")
    if new_state.dtype != torch.uint8 or new_state.device.type != "cpu":
        raise TypeError("hpu RNG state must be a CPU torch.ByteTensor")
    if new_state.numel() != 16:
        raise ValueError(f"hpu RNG state must have 16 bytes (seed and offset), got {new_state.numel()}")
    # Copied now: the caller may change its tensor before the cards start.
    state = new_state.clone(memory_format=torch.contiguous_format)
    _lazy_call(target, lambda: _generator(None if target == "current" else target).set_state(state))


def get_rng_state_all():
    from . import device_count

    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states):
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def _card_generator(device):
    from . import _lazy_init

    _lazy_init()
    idx = _utils._get_device_index(device, optional=True)
    from .. import _C

    return _C._default_generator(idx)


def __getattr__(name):
    # default_generators: the cards' generators, one per visible card (as
    # torch.cuda.default_generators); computed on use, since reading it
    # initialises the cards.
    if name == "default_generators":
        from . import device_count

        return tuple(_card_generator(i) for i in range(device_count()))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
