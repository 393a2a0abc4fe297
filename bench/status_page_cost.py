"""What the status page (hl-smi's view of a process) costs a loop of tiny ops.

The page is chosen once per process (HPU_STATUS_PAGE), so each side runs in
its own child; rounds alternate HPU_STATUS_PAGE=1 and =0 children from this
one run. A child times `--reps` calls of each loop (the 10th percentile,
after 30 ms of untimed calls): an eager add of 16 floats (run inline: every
hook of the page is on this path, the submit count and the task's two clock
reads and adds) with a synchronize, the same add x40 then one synchronize,
and a lazy add x40 then mark_step. Printed: microseconds per op on each side
and the median over rounds of page-on time / page-off time (1.00: no cost).

    python bench/status_page_cost.py [--rounds 7] [--reps 2000]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, torch, habana_torch
import habana_torch.core as htcore
reps = int(sys.argv[1])
sys.path.insert(0, sys.argv[2])
from timing import p10 as p10_reps
torch.set_num_threads(2)

def p10(fn):
    return p10_reps(fn, reps)

x = torch.randn(16, device="hpu"); y = torch.randn(16, device="hpu")
out = {}
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


def run(page, reps):
    env = dict(os.environ, HPU_STATUS_PAGE=page)
    bench = os.path.dirname(os.path.abspath(__file__))  # for timing.py
    r = subprocess.run([sys.executable, "-c", CHILD, str(reps), bench], env=env, capture_output=True, text=True,
                       check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=2000)
    args = ap.parse_args()
    on, off = [], []
    for _ in range(args.rounds):
        on.append(run("1", args.reps))
        off.append(run("0", args.reps))
    print(f"{'loop':18s} {'on us/op':>9s} {'off us/op':>9s}  on/off (median [range] of {args.rounds} rounds)")
    for key in on[0]:
        ratios = [a[key] / b[key] for a, b in zip(on, off)]
        print(f"{key:18s} {statistics.median(a[key] for a in on) * 1e6:9.2f} "
              f"{statistics.median(b[key] for b in off) * 1e6:9.2f}  "
              f"{statistics.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}]")


if __name__ == "__main__":
    main()
