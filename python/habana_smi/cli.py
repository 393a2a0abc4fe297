"""hl-smi (and hpu-smi): the state of habana_torch's emulated cards, read
from the status pages of the processes that use them, in the layout of
Gaudi's hl-smi. Never imports torch."""
import argparse
import os
import sys
import time

from . import cards as _cards

SAMPLE_S = 0.2  # utilisation window of a single report

FIELDS = {
    # name: (header unit, function of (card) -> value or None, unit suffix)
    "index": ("", lambda c: c.index, ""),
    "module_id": ("", lambda c: c.physical_id, ""),
    "name": ("", lambda c: c.name, ""),
    "bus_id": ("", lambda c: c.bus_id, ""),
    "driver_version": ("", lambda c: driver_version(), ""),
    "memory.total": ("MiB", lambda c: c.memory_total >> 20, " MiB"),
    "memory.used": ("MiB", lambda c: c.memory_used >> 20, " MiB"),
    "memory.free": ("MiB", lambda c: max(c.memory_total - c.memory_used, 0) >> 20, " MiB"),
    "utilization.aip": ("%", lambda c: round(c.utilization or 0.0), " %"),
    "power.draw": ("W", lambda c: None, " W"),
    "power.max": ("W", lambda c: None, " W"),
    "temperature.aip": ("C", lambda c: None, " C"),
}


def driver_version():
    return f"{_cards.GAUDI_API_VERSION}-habana_torch"


def version_line():
    # fw-: the cards' firmware is habana_torch itself (tools read the pair hl-/fw-).
    return f"hl-{_cards.GAUDI_API_VERSION}-habana_torch-{_cards.VERSION} fw-{_cards.VERSION}"


def _box(text, width=77):
    return "| " + text.ljust(width - 1) + "|"


def _row(left, mid, right):
    return f"|{left:<31}|{mid:<22}|{right:<22}|"


def table(snap, show):
    sep = "|-------------------------------+----------------------+----------------------+"
    out = [
        "+-----------------------------------------------------------------------------+",
        _box(f"HL-SMI Version:{'':>16}{version_line()}"),
        _box(f"Driver Version:{'':>29}{driver_version()}"),
        _box(f"Nic Driver Version:{'':>25}N/A"),
        sep,
        _row(" AIP  Name       Persistence-M", " Bus-Id        Disp.A ", " Volatile Uncor-Events"),
        _row(" Fan  Temp  Perf  Pwr:Usage/Cap", "         Memory-Usage ", " AIP-Util  Compute M. "),
        "|===============================+======================+======================|",
    ]
    for c in snap.cards:
        if c.index not in show:
            continue
        mem = f"{c.memory_used >> 20}MiB / {c.memory_total >> 20}MiB"
        util = f"{round(c.utilization or 0.0)}%"
        out.append(_row(f" {c.index:>3}  {c.name:<18}N/A  ", f" {c.bus_id}     N/A ", f"{'N/A':>20}  "))
        out.append(_row(" N/A   N/A   N/A    N/A / N/A  ", f"{mem:>21} ", f" {util:>5}{'N/A':>15} "))
        out.append(sep)
    out.append(_box(f"Compute Processes:{'':>46}AIP Memory"))
    out.append(_box(f" AIP       PID   Type   Process name{'':>29}Usage"))
    out.append("|=============================================================================|")
    rows = [(c.index, p) for c in snap.cards if c.index in show for p in c.processes]
    if not rows:
        out.append(_box(f"  N/A       N/A   N/A    N/A{'':>38}N/A"))
    for index, (pid, name, used) in rows:
        words = name.split()  # one row, whatever the command line holds
        if words:
            words[0] = os.path.basename(words[0])  # python3 train.py, not the interpreter's path
        name = " ".join(words)[:40]
        out.append(_box(f"{index:>4} {pid:>9}     C    {name:<40} {used >> 20}MiB"))
    out.append("+=============================================================================+")
    return "\n".join(out)


def query(snap, fields, show, fmt):
    noheader, nounits = "noheader" in fmt, "nounits" in fmt
    lines = []
    if not noheader:
        lines.append(", ".join(f"{f} [{FIELDS[f][0]}]" if FIELDS[f][0] else f for f in fields))
    for c in snap.cards:
        if c.index not in show:
            continue
        vals = []
        for f in fields:
            v = FIELDS[f][1](c)
            vals.append("N/A" if v is None else f"{v}{'' if nounits else FIELDS[f][2]}")
        lines.append(", ".join(vals))
    return "\n".join(lines)


def listing(snap, show):
    return "\n".join(f"AIP {c.index}: {c.name} (Bus-Id: {c.bus_id}, module ID: {c.physical_id})"
                     for c in snap.cards if c.index in show)


def _parser():
    p = argparse.ArgumentParser(
        prog="hl-smi",
        description="State of habana_torch's emulated Gaudi cards (memory, utilisation, processes), "
                    "read from the status pages of the processes that use them.",
        epilog=f"AIP utilisation is the time the cards' queues spent running work over the wall time "
               f"between two readings: {SAMPLE_S:g} s apart for a single report, the -l interval "
               f"when looping. Memory used is what the processes' caching allocators reserved. "
               f"Power and temperature are not known to an emulator: N/A. Query fields: "
               f"{', '.join(FIELDS)}.")
    p.add_argument("-v", "--version", action="store_true", help="print the version and exit")
    p.add_argument("-Q", "--query-aip", metavar="FIELDS", help="comma-separated fields (see below)")
    p.add_argument("-f", "--format", metavar="FMT", default="csv",
                   help="output of -Q: csv[,noheader][,nounits]")
    p.add_argument("-L", "--list-aips", action="store_true", help="list the cards")
    p.add_argument("-l", "--loop", metavar="SECONDS", type=float, nargs="?", const=5.0,
                   help="repeat every SECONDS (default 5) until interrupted")
    p.add_argument("-i", "--id", metavar="INDEX", help="only these cards (comma-separated indices)")
    return p


def _fail(msg):
    print(f"hl-smi: error: {msg}", file=sys.stderr)
    return 2


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.version:
        print(f"HL-SMI Version: {version_line()}")
        return 0
    fields = None
    if args.query_aip is not None:
        fields = [f.strip() for f in args.query_aip.split(",") if f.strip()]
        bad = [f for f in fields if f not in FIELDS]
        if bad or not fields:
            return _fail(f"unknown query field{'s' if len(bad) > 1 else ''} {', '.join(map(repr, bad))}; "
                         f"valid fields: {', '.join(FIELDS)}")
    fmt = [x.strip() for x in args.format.split(",")]
    if fmt[0] != "csv" or any(x not in ("noheader", "nounits") for x in fmt[1:]):
        return _fail(f"unknown format {args.format!r}; expected csv[,noheader][,nounits]")
    if args.loop is not None and not args.loop > 0:
        return _fail(f"-l needs a positive number of seconds, got {args.loop}")
    try:
        before = _cards.snapshot()
        show = set(range(len(before.cards)))
        if args.id is not None:
            try:
                show = {int(x) for x in args.id.split(",")}
            except ValueError:
                return _fail(f"-i {args.id!r}: expected card indices such as 0 or 0,2")
            missing = sorted(show - set(range(len(before.cards))))
            if missing:
                return _fail(f"-i {args.id}: no card {missing[0]} ({len(before.cards)} cards visible)")
        if args.list_aips:
            print(listing(before, show))
            return 0
        interval = args.loop if args.loop is not None else SAMPLE_S
        while True:
            time.sleep(interval)
            snap = _cards.utilization(before, _cards.snapshot())
            print(query(snap, fields, show, fmt) if fields else table(snap, show), flush=True)
            if args.loop is None:
                return 0
            before = snap
    except _cards.ConfigError as e:
        return _fail(str(e))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
