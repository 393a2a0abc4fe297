"""Softmax over rows at 1M elements: hpu against torch on the CPU, one process.

The rows of bench/ops.py's softmax case and its neighbours: [1024 x 1024],
[4096 x 256] and [256 x 4096], float32 and bfloat16, softmax, log_softmax
and both backwards over dim=-1, in eager mode and in lazy mode (the op, a
mark_step, a synchronize), each side timed as bench/ops.py does
(interleaved, with the same lead-in), and checked against the CPU first.
speed = torch time / hpu time, by best and by median; target >= 1.0.

    python bench/softmax_rows.py [--modes eager,lazy] [--dtypes fp32,bf16]
                                 [--ops softmax,log_softmax,softmax_bw,log_softmax_bw]
                                 [--reps 10] [--threads 2] [--cpu-time | --process-cpu]

--cpu-time times the CPU time of the calling thread instead of the wall
clock, on one thread and in eager mode only (both sides then run the
kernel on the caller; a lazy graph may run on the card's worker): the
kernels' own cost, which other jobs on a shared machine do not change the
way they change a 2-thread wall-clock time (torch's OpenMP threads wait
for each other in spin barriers, and on a loaded machine those take tens
of milliseconds).

--process-cpu prints, per row and side, the process's CPU time per call
(all its threads, getrusage) over runs of calls at --threads, next to the
wall time: what the 2-thread split costs in total CPU, which other load
changes far less than the wall time.
"""
import argparse
import os
import resource
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import habana_torch.core as htcore  # noqa: E402
from ops import time_pair, uptime  # noqa: E402

aten = torch.ops.aten
SHAPES = [(1024, 1024), (4096, 256), (256, 4096)]
OPS = {
    "softmax": (lambda x: torch.softmax(x, -1), None),
    "log_softmax": (lambda x: torch.log_softmax(x, -1), None),
    "softmax_bw": (lambda g, y: aten._softmax_backward_data(g, y, -1, y.dtype), torch.softmax),
    "log_softmax_bw": (lambda g, y: aten._log_softmax_backward_data(g, y, -1, y.dtype), torch.log_softmax),
}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.bfloat16: dict(rtol=1.6e-2, atol=1e-3)}


def cpu_times(cpu_fn, hpu_fn, reps):
    """Interleaved CPU times of the calling thread, after a warm-up."""
    tc, th = [], []
    for fn in (cpu_fn, hpu_fn, cpu_fn, hpu_fn):
        fn()
    for _ in range(max(reps, 15)):
        for fn, ts in ((cpu_fn, tc), (hpu_fn, th)):
            t = time.thread_time()
            fn()
            ts.append(time.thread_time() - t)
    return tc, th


def process_cpu(fn, reps):
    """Process CPU time and wall time per call, over 20 * reps calls after a warm-up."""
    def used():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime
    n = 20 * reps
    for _ in range(20):
        fn()
    c, t = used(), time.perf_counter()
    for _ in range(n):
        fn()
    return (used() - c) / n, (time.perf_counter() - t) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modes", default="eager,lazy")
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--settle", type=float, default=0.03)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cpu-time", action="store_true", help="CPU time of the calling thread, one thread")
    ap.add_argument("--process-cpu", action="store_true", help="process CPU time per call, all threads")
    args = ap.parse_args()
    if args.cpu_time:
        args.threads, args.modes = 1, "eager"
    torch.set_num_threads(args.threads)  # also sizes the hpu kernel pool
    print(f"torch {torch.__version__}, threads {args.threads}; uptime before: {uptime()}")
    if not args.process_cpu:
        print(f"{'mode':5s} {'case':32s} {'cpu best':>9s} {'hpu best':>9s} {'cpu med':>9s} {'hpu med':>9s} "
              f"{'speed':>6s} {'by med':>6s}")
    speeds = []
    for mode in args.modes.split(","):
        lazy = mode == "lazy"
        htcore._set_lazy_mode(lazy)

        def sync():
            if lazy:
                htcore.mark_step()
            torch.hpu.synchronize()

        for dname in args.dtypes.split(","):
            dt = DTYPES[dname]
            for rows, cols in SHAPES:
                g = torch.Generator().manual_seed(0)
                x = torch.randn(rows, cols, generator=g).to(dt)
                gr = torch.randn(rows, cols, generator=g).to(dt)
                for name in args.ops.split(","):
                    fn, fwd = OPS[name]
                    xs = [x] if fwd is None else [gr, fwd(x, -1)]
                    hs = [t.to("hpu") for t in xs]
                    got = fn(*hs)
                    sync()
                    torch.testing.assert_close(got.cpu(), fn(*xs), **TOL[dt])

                    def hpu_fn():
                        fn(*hs)
                        sync()

                    if args.process_cpu:
                        pc, wc = process_cpu(lambda: fn(*xs), args.reps)
                        ph, wh = process_cpu(hpu_fn, args.reps)
                        print(f"{mode:5s} {name} {dname} [{rows}x{cols}]: process CPU per call torch "
                              f"{pc * 1e6:.0f} us, hpu {ph * 1e6:.0f} us; wall torch {wc * 1e6:.0f} us, "
                              f"hpu {wh * 1e6:.0f} us", flush=True)
                        continue
                    if args.cpu_time:
                        tc, th = cpu_times(lambda: fn(*xs), hpu_fn, args.reps)
                    else:
                        tc, th = time_pair(lambda: fn(*xs), hpu_fn, args.reps, args.budget, args.settle)
                    sp, spm = min(tc) / min(th), statistics.median(tc) / statistics.median(th)
                    speeds.append(sp)
                    case = f"{name} {dname} [{rows}x{cols}]"
                    print(f"{mode:5s} {case:32s} {min(tc) * 1e6:7.0f}us {min(th) * 1e6:7.0f}us "
                          f"{statistics.median(tc) * 1e6:7.0f}us {statistics.median(th) * 1e6:7.0f}us "
                          f"{sp:6.2f} {spm:6.2f}", flush=True)
    summary = f"; {sum(s >= 1.0 for s in speeds)}/{len(speeds)} rows at speed >= 1.0 (by best)" if speeds else ""
    print(f"uptime after: {uptime()}{summary}")


if __name__ == "__main__":
    main()
