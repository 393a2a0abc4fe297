"""Reads the status pages that processes using the hpu publish
(csrc/include/hpu/status_page.h has the layout and its rules).

Imports nothing but the standard library: hl-smi must start fast and must
not load torch. A page is read with one copy of its bytes; the header's
offsets and record sizes locate the tables, so records grown by a later
version still read.
"""
import mmap
import os
import struct
from dataclasses import dataclass, field

MAGIC = 0x3145474154535048
VERSION = 1
PREFIX = "habana_torch-status."
SHM_DIR = "/dev/shm"

COPY_KINDS = ("host_to_device", "device_to_host", "device_to_device")
COLL_KINDS = ("all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "all_to_all",
              "send", "recv")

_HEADER = struct.Struct("<QIIIIIIIIiIQQ64sQQ")
_FALLBACK = struct.Struct("<Q56s")
_CARD = struct.Struct("<" + "Q" * 20)


@dataclass
class Card:
    index: int  # the process's device index
    physical_id: int
    memory_total: int
    memory_reserved: int
    memory_used: int
    memory_peak: int
    busy_ns: int
    kernels: int
    launches: int
    queue_depth: int
    copy_bytes: dict
    coll_bytes: dict

    @property
    def touched(self):
        """The process has used this card (memory or work)."""
        return bool(self.memory_reserved or self.memory_peak or self.kernels or self.launches)


@dataclass
class Page:
    pid: int
    start_time: int
    name: str
    graph_compilations: int
    cpu_fallbacks: int
    fallbacks: dict = field(default_factory=dict)  # op -> count
    cards: list = field(default_factory=list)

    def card(self, physical_id):
        for c in self.cards:
            if c.physical_id == physical_id:
                return c
        return None


def _start_time(pid):
    """Field 22 of /proc/<pid>/stat, or 0 when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read()
    except OSError:
        return 0
    rest = text[text.rfind(b")") + 2:].split()
    return int(rest[19]) if len(rest) > 19 else 0


def _own_pid(name):
    prefix = f"{PREFIX}{os.getuid()}."
    if not name.startswith(prefix):
        return None
    tail = name[len(prefix):]
    return int(tail) if tail.isdigit() and int(tail) > 0 else None


def _cstr(raw):
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def parse(buf):
    """A Page from a page's bytes, or None when the page is not complete or
    of a version this reader does not know."""
    if len(buf) < _HEADER.size:
        return None
    (magic, version, _hdr, card_bytes, num_cards, cards_off, fb_bytes, num_fb, fb_off, pid, _r,
     start, _created, name, compilations, fallbacks) = _HEADER.unpack_from(buf, 0)
    if magic != MAGIC or version != VERSION:
        return None
    page = Page(pid=pid, start_time=start, name=_cstr(name), graph_compilations=compilations,
                cpu_fallbacks=fallbacks)
    for i in range(num_fb):
        off = fb_off + i * fb_bytes
        if off + _FALLBACK.size > len(buf):
            break
        count, op = _FALLBACK.unpack_from(buf, off)
        if count:
            page.fallbacks[_cstr(op)] = count
    for i in range(num_cards):
        off = cards_off + i * card_bytes
        if off + _CARD.size > len(buf):
            break
        v = _CARD.unpack_from(buf, off)
        page.cards.append(Card(index=i, physical_id=v[0], memory_total=v[1], memory_reserved=v[2],
                               memory_used=v[3], memory_peak=v[4], busy_ns=v[5], kernels=v[6],
                               launches=v[7], queue_depth=v[8],
                               copy_bytes=dict(zip(COPY_KINDS, v[9:12])),
                               coll_bytes=dict(zip(COLL_KINDS, v[12:20]))))
    return page


def _read(path):
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return b""
        with mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ) as m:
            return bytes(m)


def read_pages(clean=True):
    """The live pages of this user's processes, by pid. With clean, pages of
    processes that are gone (or whose pid now runs another process) are
    unlinked, as the C reader does (hpu_status_page_clean_stale)."""
    pages = {}
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return pages
    for name in names:
        pid = _own_pid(name)
        if pid is None:
            continue
        path = os.path.join(SHM_DIR, name)
        started = _start_time(pid)
        try:
            page = parse(_read(path))
        except OSError:
            continue  # exited and unlinked meanwhile
        stale = not started or (page is not None and (page.pid != pid or page.start_time != started))
        if stale:
            if clean:
                try:
                    os.unlink(path)
                except OSError:
                    pass
            continue
        if page is not None:  # None: still being created, or another version
            pages[pid] = page
    return pages
