"""A 6-op elementwise chain on 16M floats: hpu lazy (fused) vs torch CPU eager.

Both sides run in this process on the same thread count; prints times and
the ratio (hpu / cpu; < 1 means hpu is faster). Target:
ratio <= 0.4. --dtype bf16 runs the chain in bfloat16 on both sides (each
fused member rounds to bf16 as its eager kernel does).

    python bench/lazy_chain.py [--n 16777216] [--threads 2] [--reps 10] [--dtype fp32|bf16]
"""
import argparse

import torch

import habana_torch  # noqa: F401
import habana_torch.core as htcore
from habana_torch.hpu.metrics import metric_global
from timing import best_of


def chain(x, y):
    return (((x * 2 + y) / 3 - x).relu() * y + 0.5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dtype = torch.float32 if args.dtype == "fp32" else torch.bfloat16

    x, y = torch.randn(args.n).to(dtype), torch.randn(args.n).to(dtype)
    xh, yh = x.to("hpu"), y.to("hpu")

    # Each run keeps its result, as a user would: the chain's last output is
    # written to memory, its five temporaries need not be.
    keep = []

    def cpu_run():
        keep[:] = [chain(x, y)]

    def hpu_eager_run():
        keep[:] = [chain(xh, yh)]
        torch.hpu.synchronize()

    def hpu_lazy_run():
        keep[:] = [chain(xh, yh)]
        htcore.mark_step()
        torch.hpu.synchronize()

    # Lazy mode is the default (as on Gaudi): each hpu row sets its own mode.
    was_lazy = htcore.is_lazy()
    cpu_run()
    t_cpu = best_of(cpu_run, args.reps)
    htcore._set_lazy_mode(False)
    hpu_eager_run()
    t_eager = best_of(hpu_eager_run, args.reps)
    htcore._set_lazy_mode(True)
    hpu_lazy_run()
    t_lazy = best_of(hpu_lazy_run, args.reps)
    htcore._set_lazy_mode(was_lazy)
    # the fused chain rounds each step as eager does; torch's CPU kernels may
    # keep a bf16 intermediate in float, hence the bf16 tolerance
    torch.testing.assert_close(keep[0].cpu(), chain(x, y),
                               **({} if dtype == torch.float32 else dict(atol=2e-2, rtol=2e-2)))
    fusion = dict(metric_global("fusion").stats())
    print(f"6-op chain, {args.n} {args.dtype}, {args.threads} threads, best of {args.reps}")
    print(f"  torch cpu eager   {t_cpu * 1e3:8.2f} ms")
    print(f"  hpu eager         {t_eager * 1e3:8.2f} ms   ratio {t_eager / t_cpu:.2f}")
    print(f"  hpu lazy (fused)  {t_lazy * 1e3:8.2f} ms   ratio {t_lazy / t_cpu:.2f}  (target <= 0.4)")
    print(f"  fusion counters   {fusion}")


if __name__ == "__main__":
    main()
