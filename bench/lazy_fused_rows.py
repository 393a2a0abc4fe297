"""Row ops fused with their elementwise producers: hpu eager, hpu lazy and
torch CPU eager on the same thread count, in this process; ratios are hpu /
cpu (< 1 means hpu is faster).

  attn:  softmax(scores * 0.125 + mask), scores [B,H,S,S], mask [B,1,1,S]
         (BERT's extended attention mask, broadcast inside the group)
  sum:   (a + b).sum(-1) over [rows, 1024]
  mean:  ((a - b) * c).mean(-1, keepdim=True)
  var:   (a * 0.5 + b).var(-1)

    python bench/lazy_fused_rows.py [--threads 2] [--reps 15]
"""
import argparse

import torch

import habana_torch  # noqa: F401
import habana_torch.core as htcore
from habana_torch.hpu.metrics import metric_global
from timing import best_of


def cases():
    g = torch.Generator().manual_seed(0)
    B, H, S = 8, 12, 128
    scores = torch.randn(B, H, S, S, generator=g)
    mask = (torch.rand(B, 1, 1, S, generator=g) > 0.9) * -10000.0
    a, b, c = (torch.randn(4096, 1024, generator=g) for _ in range(3))
    return [
        ("attn softmax(s*k+mask[B,1,1,S])", lambda s, m: torch.softmax(s * 0.125 + m, dim=-1), (scores, mask)),
        ("(a+b).sum(-1)", lambda x, y: (x + y).sum(-1), (a, b)),
        ("((a-b)*c).mean(-1,keepdim)", lambda x, y, z: ((x - y) * z).mean(-1, keepdim=True), (a, b, c)),
        ("(a*0.5+b).var(-1)", lambda x, y: (x * 0.5 + y).var(-1), (a, b)),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{args.threads} threads, best of {args.reps}; ratio = hpu / torch cpu eager")
    for name, fn, ins in cases():
        hins = [t.to("hpu") for t in ins]
        keep = []

        def cpu_run():
            keep[:] = [fn(*ins)]

        def hpu_eager():
            keep[:] = [fn(*hins)]
            torch.hpu.synchronize()

        def hpu_lazy():
            keep[:] = [fn(*hins)]
            htcore.mark_step()
            torch.hpu.synchronize()

        cpu_run()
        hpu_eager()
        htcore._set_lazy_mode(True)
        hpu_lazy()
        htcore._set_lazy_mode(False)
        t_cpu, t_eager, t_lazy = float("inf"), float("inf"), float("inf")
        for _ in range(3):  # interleaved rounds: the machine is shared
            t_cpu = min(t_cpu, best_of(cpu_run, args.reps))
            t_eager = min(t_eager, best_of(hpu_eager, args.reps))
            htcore._set_lazy_mode(True)
            before = dict(metric_global("fusion").stats())["FusedNodes"]
            t_lazy = min(t_lazy, best_of(hpu_lazy, args.reps))
            fused = (dict(metric_global("fusion").stats())["FusedNodes"] - before) // args.reps
            htcore._set_lazy_mode(False)
        torch.testing.assert_close(keep[0].cpu(), fn(*ins), atol=1e-4, rtol=1e-4)
        print(f"  {name:34s} cpu {t_cpu * 1e3:7.2f} ms  eager {t_eager * 1e3:7.2f} ms "
              f"({t_eager / t_cpu:.2f})  lazy {t_lazy * 1e3:7.2f} ms ({t_lazy / t_cpu:.2f})  "
              f"fused nodes/step {fused}")


if __name__ == "__main__":
    main()
