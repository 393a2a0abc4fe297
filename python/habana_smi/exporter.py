"""Prometheus metrics of the emulated cards, from the same status pages as
hl-smi: `python -m habana_torch.exporter --port 9100` serves them over HTTP,
`--textfile PATH` writes them for node-exporter's textfile collector.

Gaudi's metric names where Gaudi has them (habanalabs_utilization,
habanalabs_memory_used_bytes, habanalabs_memory_total_bytes, ...), labelled
with the card's index and bus id; habana_torch_* for the rest. Counters are
sums over the processes alive at the scrape, so one drops when a process
exits (Prometheus' rate() takes that as a counter reset).

The exposition format comes from prometheus_client (`pip install
prometheus_client`, or habana_torch[exporter]).
"""
import argparse
import os
import sys
import threading
import time

from . import cards as _cards
from . import pages as _pages


def _client():
    try:
        import prometheus_client  # noqa: F401
        from prometheus_client import core
    except ImportError:
        sys.exit("habana_torch.exporter needs prometheus_client: pip install prometheus_client "
                 "(or pip install 'habana_torch[exporter]')")
    return prometheus_client, core


class CardCollector:
    """Builds the metrics at each scrape; utilisation is over the time since
    the previous scrape (the first one samples for SAMPLE_S)."""

    SAMPLE_S = 0.2

    def __init__(self):
        self._lock = threading.Lock()
        self._last = None

    def _snapshot(self):
        with self._lock:
            before = self._last
            if before is None:
                before = _cards.snapshot()
                time.sleep(self.SAMPLE_S)
            snap = _cards.utilization(before, _cards.snapshot())
            self._last = snap
            return snap

    def collect(self):
        _, core = _client()
        snap = self._snapshot()
        card_labels = ["index", "bus_id"]

        def gauge(name, doc, labels=card_labels):
            return core.GaugeMetricFamily(name, doc, labels=labels)

        def counter(name, doc, labels=card_labels):
            return core.CounterMetricFamily(name, doc, labels=labels)

        util = gauge("habanalabs_utilization", "AIP utilisation in percent: queue busy time over wall time since the previous scrape")
        used = gauge("habanalabs_memory_used_bytes", "Card memory reserved by the processes' caching allocators")
        total = gauge("habanalabs_memory_total_bytes", "Card memory (HPU_CARD_MEMORY)")
        free = gauge("habanalabs_memory_free_bytes", "Card memory not reserved")
        alloc = gauge("habana_torch_memory_allocated_bytes", "Bytes of live tensors on the card")
        peak = gauge("habana_torch_memory_peak_allocated_bytes", "Sum of the processes' peak allocated bytes")
        depth = gauge("habana_torch_queue_depth", "Tasks waiting in the card's queues")
        busy = counter("habana_torch_engine_busy_seconds", "Time the card's engine spent running work",
                       card_labels + ["engine"])
        kernels = counter("habana_torch_kernels", "Ops submitted to the card (alone or in a lazy graph)")
        launches = counter("habana_torch_launches", "Tasks the card's queue ran (an eager op, a lazy graph, a collective)")
        copies = counter("habana_torch_copy_bytes", "Bytes copied, by direction", card_labels + ["direction"])
        colls = counter("habana_torch_collective_bytes", "Bytes of collectives (count x dtype size), by op",
                        card_labels + ["op"])
        procs = gauge("habana_torch_card_processes", "Processes using the card")
        for view in snap.cards:
            lab = [str(view.index), view.bus_id]
            util.add_metric(lab, view.utilization or 0.0)
            used.add_metric(lab, view.memory_used)
            total.add_metric(lab, view.memory_total)
            free.add_metric(lab, max(view.memory_total - view.memory_used, 0))
            sums = {"alloc": 0, "peak": 0, "depth": 0, "busy": 0, "kernels": 0, "launches": 0}
            copy_sum = dict.fromkeys(_pages.COPY_KINDS, 0)
            coll_sum = dict.fromkeys(_pages.COLL_KINDS, 0)
            nproc = 0
            for page in snap.pages.values():
                c = page.card(view.physical_id)
                if c is None or not c.touched:
                    continue
                nproc += 1
                sums["alloc"] += c.memory_used
                sums["peak"] += c.memory_peak
                sums["depth"] += c.queue_depth
                sums["busy"] += c.busy_ns
                sums["kernels"] += c.kernels
                sums["launches"] += c.launches
                for k, v in c.copy_bytes.items():
                    copy_sum[k] += v
                for k, v in c.coll_bytes.items():
                    coll_sum[k] += v
            alloc.add_metric(lab, sums["alloc"])
            peak.add_metric(lab, sums["peak"])
            depth.add_metric(lab, sums["depth"])
            busy.add_metric(lab + ["queue"], sums["busy"] / 1e9)
            kernels.add_metric(lab, sums["kernels"])
            launches.add_metric(lab, sums["launches"])
            for k, v in copy_sum.items():
                copies.add_metric(lab + [k], v)
            for k, v in coll_sum.items():
                colls.add_metric(lab + [k], v)
            procs.add_metric(lab, nproc)
        fallbacks = counter("habana_torch_cpu_fallbacks", "Ops run on the CPU for want of an hpu kernel "
                            "(by op for each process's first 32 ops; op=\"\" holds the rest)", ["op"])
        compiles = counter("habana_torch_graph_compilations", "Lazy-mode graph compilations", [])
        by_op, total_fb, total_cc = {}, 0, 0
        for page in snap.pages.values():
            total_fb += page.cpu_fallbacks
            total_cc += page.graph_compilations
            for op, n in page.fallbacks.items():
                by_op[op] = by_op.get(op, 0) + n
        for op, n in sorted(by_op.items()):
            fallbacks.add_metric([op], n)
        fallbacks.add_metric([""], total_fb - sum(by_op.values()))
        compiles.add_metric([], total_cc)
        yield from (util, used, total, free, alloc, peak, depth, busy, kernels, launches, copies, colls,
                    procs, fallbacks, compiles)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m habana_torch.exporter", description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", type=int, help="serve /metrics over HTTP on this port")
    where.add_argument("--textfile", metavar="PATH", help="write the metrics to PATH (atomically) every --interval s")
    p.add_argument("--address", default="0.0.0.0", help="address to listen on with --port (default 0.0.0.0)")
    p.add_argument("--interval", type=float, default=15.0, help="seconds between --textfile writes (default 15)")
    p.add_argument("--once", action="store_true", help="with --textfile: write once and exit")
    args = p.parse_args(argv)
    if args.port is not None and not 0 < args.port < 65536:
        p.error(f"--port {args.port}: expected 1 to 65535")
    if not args.interval > 0:
        p.error(f"--interval {args.interval}: expected a positive number of seconds")
    try:
        _cards.snapshot()  # a bad HPU_* setting fails here, named, not at the first scrape
    except _cards.ConfigError as e:
        p.error(str(e))
    client, _ = _client()
    registry = client.CollectorRegistry()
    registry.register(CardCollector())
    try:
        if args.port is not None:
            client.start_http_server(args.port, addr=args.address, registry=registry)
            print(f"habana_torch exporter: http://{args.address}:{args.port}/metrics", file=sys.stderr, flush=True)
            while True:
                time.sleep(3600)
        while True:
            client.write_to_textfile(os.fspath(args.textfile), registry)
            if args.once:
                return 0
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
