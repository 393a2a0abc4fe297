"""The timing the benches share (run as `python bench/x.py`, so bench/ is on the path)."""
import time


def p10(fn, reps, settle=0.03):
    """The 10th percentile of `reps` timed calls of fn, in seconds, after
    `settle` seconds of untimed calls: torch's OpenMP workers spin for
    milliseconds after a parallel region and would share the cores with the
    timed side's threads (see time_pair in bench/ops.py)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < settle:
        fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[len(ts) // 10]


def best_of(fn, reps):
    """The fastest of `reps` timed calls of fn, in seconds: for large ops,
    where the best call is the one least disturbed by the machine."""
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best
