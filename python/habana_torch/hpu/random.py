"""RNG of the cards: one Philox generator (seed + offset) per card
(``default_generators``), seeded as torch.cuda's."""
import torch

from . import _utils


def manual_seed(seed):
    """Seeds the current card's generator."""
    gen = _card_generator(None)
    gen.manual_seed(int(seed))


def manual_seed_all(seed):
    from . import device_count

    for i in range(device_count()):
        _card_generator(i).manual_seed(int(seed))


def seed():
    _card_generator(None).seed()


def seed_all():
    from . import device_count

    s = _card_generator(0).seed()
    for i in range(1, device_count()):
        _card_generator(i).manual_seed(s)


def initial_seed():
    return _card_generator(None).initial_seed()


def get_rng_state(device="hpu"):
    """The card generator's state: 16 bytes (seed, offset) as a ByteTensor."""
    return _card_generator(device).get_state()


def set_rng_state(new_state, device="hpu"):
    _card_generator(device).set_state(new_state)


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
