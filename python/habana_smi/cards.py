"""The cards as torch.hpu sees them in this environment, and what the
processes' status pages say about each: the one view hl-smi and the metrics
exporter print. Standard library only (no torch)."""
import os
import re
import time
from dataclasses import dataclass, field

from . import pages as _pages

_DEVICE_TYPES = {"GAUDI": "GAUDI", "GAUDI1": "GAUDI", "GAUDI2": "GAUDI2", "GAUDI3": "GAUDI3"}
MAX_CARDS = 64
DEFAULT_CARD_MEMORY = 16 << 30


class ConfigError(ValueError):
    """A setting of the environment hl-smi cannot use (named in the message)."""


def _versions():
    """(GAUDI_API_VERSION, habana_torch's version) from habana_torch/version.py,
    read by path: importing habana_torch would load torch."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(os.path.dirname(here), "habana_torch", "version.py")
    if not os.path.exists(path):  # installed apart: ask for the file without importing the package
        import importlib.util
        spec = importlib.util.find_spec("habana_torch")
        path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    scope = {}
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), scope)  # the module imports nothing
    return scope["GAUDI_API_VERSION"], scope["__version__"]


GAUDI_API_VERSION, VERSION = _versions()


def device_name():
    raw = os.environ.get("HPU_DEVICE_TYPE", "").strip()
    name = _DEVICE_TYPES.get(raw.upper()) if raw else "GAUDI2"
    if name is None:
        raise ConfigError(f"invalid HPU_DEVICE_TYPE={raw!r}: expected GAUDI (or GAUDI1), GAUDI2 or GAUDI3")
    return name


def _num_cards():
    raw = os.environ.get("HPU_NUM_CARDS", "").strip()
    if not raw:
        return 8
    if not re.fullmatch(r"\+?\d+", raw) or int(raw) > MAX_CARDS:
        raise ConfigError(f"invalid HPU_NUM_CARDS={raw!r}: expected an integer from 0 to {MAX_CARDS}")
    return int(raw)


def visible_cards():
    """Physical ids of the visible cards, in torch.hpu's order (the rules of
    csrc/runtime/device.c: HABANA_VISIBLE_MODULES wins over
    HABANA_VISIBLE_DEVICES; empty or "all" means every card)."""
    cards = _num_cards()
    for name in ("HABANA_VISIBLE_MODULES", "HABANA_VISIBLE_DEVICES"):
        raw = os.environ.get(name, "").strip()
        if raw:
            break
    if not raw or raw.lower() == "all":
        return list(range(cards))
    ids = []
    for item in raw.split(","):
        item = item.strip()
        if not item.isdigit():
            raise ConfigError(f"invalid {name}={raw!r}: {item!r} is not a card id")
        if int(item) >= cards:
            raise ConfigError(f"invalid {name}={raw!r}: card {item} does not exist (HPU_NUM_CARDS={cards})")
        if int(item) in ids:
            raise ConfigError(f"invalid {name}={raw!r}: card {item} listed twice")
        ids.append(int(item))
    return ids


def card_memory():
    raw = os.environ.get("HPU_CARD_MEMORY", "").strip()
    if not raw:
        return DEFAULT_CARD_MEMORY
    m = re.fullmatch(r"\+?(\d+)\s*([KMGT]?)(i?)(B?)", raw, re.IGNORECASE)
    if not m or int(m.group(1)) == 0:
        raise ConfigError(f"invalid HPU_CARD_MEMORY={raw!r}: expected a size such as 16G or 512M")
    shift = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[m.group(2).upper()]
    return (int(m.group(1)) << shift) + (2 << 20) - 1 & ~((2 << 20) - 1)


def bus_id(physical_id):
    """A fixed, made-up PCI address per physical card (the cards have none),
    in the form tools expect."""
    return f"0000:{0x10 + physical_id:02x}:00.0"


@dataclass
class CardView:
    index: int
    physical_id: int
    name: str
    bus_id: str
    memory_total: int
    memory_used: int = 0  # reserved by the processes' caching allocators (what the card has given out)
    busy_ns: int = 0
    utilization: float = None  # percent, None before a second snapshot
    processes: list = field(default_factory=list)  # (pid, name, bytes)
    counters: dict = field(default_factory=dict)


@dataclass
class Snapshot:
    time_ns: int
    cards: list
    pages: dict


def snapshot():
    """The visible cards and the live pages now (stale pages are cleaned)."""
    name, total, ids = device_name(), card_memory(), visible_cards()
    pages = _pages.read_pages()
    t = time.monotonic_ns()
    cards = []
    for index, pid_ in enumerate(ids):
        view = CardView(index=index, physical_id=pid_, name=name, bus_id=bus_id(pid_), memory_total=total)
        seen_total = False
        for page in sorted(pages.values(), key=lambda p: p.pid):
            c = page.card(pid_)
            if c is None or not c.touched:
                continue
            if not seen_total:  # the card as that process configured it
                view.memory_total, seen_total = c.memory_total, True
            view.memory_used += c.memory_reserved
            view.busy_ns += c.busy_ns
            view.processes.append((page.pid, page.name, c.memory_reserved))
        cards.append(view)
    return Snapshot(t, cards, pages)


def utilization(before, after):
    """Sets after's cards' utilisation: the busy time their queues added
    between the two snapshots over the wall time between them, counting
    only processes alive at both."""
    wall = max(after.time_ns - before.time_ns, 1)
    for card in after.cards:
        busy = 0
        for pid, page in after.pages.items():
            old = before.pages.get(pid)
            if old is None or old.start_time != page.start_time:
                continue
            a, b = page.card(card.physical_id), old.card(card.physical_id)
            if a is not None and b is not None:
                busy += max(a.busy_ns - b.busy_ns, 0)
        card.utilization = min(100.0, 100.0 * busy / wall)
    return after
