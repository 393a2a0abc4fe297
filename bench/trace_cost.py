"""What the device trace (torch.profiler's HPU lanes) costs a loop of tiny ops.

Recording is off unless a profiler with ProfilerActivity.HPU runs; off, each
recording site reads one relaxed atomic word. Two comparisons, each side in
its own child, rounds alternating from this one run:

  --other PATH   this tree against another habana_torch (a PYTHONPATH, e.g.
                 a build of the commit before the trace existed), both with
                 no profiler: what the off path costs;
  (always)       this tree with no profiler against the same loops inside
                 torch.profiler.profile(activities=[CPU, HPU]): what
                 recording costs (torch's own host-op recording included).

A child times `--reps` calls of each loop (the 10th percentile, after 30 ms
of untimed calls): an eager add of 16 floats with a synchronize, the same
add x40 then one synchronize, and a lazy add x40 then mark_step. Printed:
microseconds per op on each side and the median over rounds of the ratio
(1.00: no cost).

    python bench/trace_cost.py [--rounds 7] [--reps 2000] [--other PATH]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import contextlib, json, sys, torch, habana_torch
import habana_torch.core as htcore
from torch.profiler import ProfilerActivity, profile
reps, profiled = int(sys.argv[1]), sys.argv[2] == "1"
sys.path.insert(0, sys.argv[3])
from timing import p10 as p10_reps
torch.set_num_threads(2)

def p10(fn):
    return p10_reps(fn, reps)

x = torch.randn(16, device="hpu"); y = torch.randn(16, device="hpu")
out = {}
ctx = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.HPU]) if profiled else contextlib.nullcontext()
with ctx:
    htcore._set_lazy_mode(False)
    def eager_sync():
        x.add(y); torch.hpu.synchronize()
    def eager_chain():
        for _ in range(40): x.add(y)
        torch.hpu.synchronize()
    out["eager add + sync"] = p10(eager_sync)
    out["eager add x40"] = p10(eager_chain) / 40
    htcore._set_lazy_mode(True)
    def lazy_chain():
        for _ in range(40): x.add(y)
        htcore.mark_step(); torch.hpu.synchronize()
    out["lazy add x40"] = p10(lazy_chain) / 40
print(json.dumps(out))
"""

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")


def run(pythonpath, profiled, reps):
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    bench = os.path.dirname(os.path.abspath(__file__))  # for timing.py
    r = subprocess.run([sys.executable, "-c", CHILD, str(reps), "1" if profiled else "0", bench], env=env,
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def report(title, a_name, a, b_name, b):
    print(f"\n{title}")
    print(f"{'loop':18s} {a_name + ' us/op':>14s} {b_name + ' us/op':>14s}  ratio (median [range] of {len(a)} rounds)")
    for key in a[0]:
        ratios = [p[key] / q[key] for p, q in zip(a, b)]
        print(f"{key:18s} {statistics.median(p[key] for p in a) * 1e6:14.2f} "
              f"{statistics.median(q[key] for q in b) * 1e6:14.2f}  "
              f"{statistics.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}]")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--other", help="PYTHONPATH of another habana_torch to compare the off path with")
    args = ap.parse_args()
    # Which habana_torch this tree's children import: the in-place build when there is one.
    here = HERE if any(f.startswith("_C.") for f in os.listdir(os.path.join(HERE, "habana_torch"))) else None
    off, on, other = [], [], []
    for _ in range(args.rounds):
        off.append(run(here, False, args.reps))
        on.append(run(here, True, args.reps))
        if args.other:
            other.append(run(args.other, False, args.reps))
    if args.other:
        report("off path: this tree / --other, no profiler", "this", off, "other", other)
    report("recording: profiler(CPU, HPU) / no profiler, this tree", "profiled", on, "off", off)


if __name__ == "__main__":
    main()
