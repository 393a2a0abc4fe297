"""GEMM kernels against each other and torch, one process.

For each shape, torch.matmul on the CPU and on hpu with each named kernel
forced in turn (HPU_GEMM_KERNEL's names, switched between rounds through the
C core's hpu_gemm_force via ctypes), in interleaved rounds; each side runs in
a loop for --seconds and the 10th percentile of its calls (synchronized) is
kept, the best round printed. Ratios > 1: the second named side is faster.
This is how gemm_avx2.c's rule (hpu_gemm_avx2_suits) was measured.

    python bench/gemm_kernels.py [--kernels blas,f32avx2] [--rounds 5] [--seconds 0.25]
                                 [--threads 2] [--only SUBSTRING]
"""
import argparse
import ctypes
import subprocess
import time

import torch

import habana_torch

KERNELS = {"auto": -1, "blas": 0, "f32fma": 1, "bf16dot": 2, "amx": 3, "f32avx2": 4}  # gemm.h's enum


def shapes(g):
    def r(*s):
        return torch.randn(*s, generator=g)

    return {
        "64^3": (r(64, 64), r(64, 64)), "128^3": (r(128, 128), r(128, 128)),
        "256^3": (r(256, 256), r(256, 256)), "384^3": (r(384, 384), r(384, 384)),
        "512^3": (r(512, 512), r(512, 512)), "1024^3": (r(1024, 1024), r(1024, 1024)),
        "256^3 A^T": (r(256, 256).t(), r(256, 256)), "384^3 A^T": (r(384, 384).t(), r(384, 384)),
        "512^3 A^T": (r(512, 512).t(), r(512, 512)),
        "[2048x256]@[256x256]^T": (r(2048, 256), r(256, 256).t()),
        "[2048x256]@[1024x256]^T": (r(2048, 256), r(1024, 256).t()),
        "[2048x512]@[512x256]^T": (r(2048, 512), r(256, 512).t()),
        "[2048x512]@[512x1024]^T": (r(2048, 512), r(1024, 512).t()),
        "[2048x1024]@[1024x256]": (r(2048, 1024), r(1024, 256)),
        "[2048x256]@[256x256]": (r(2048, 256), r(256, 256)),
        "bmm 64x[128x64]@[64x128]": (r(64, 128, 64), r(64, 64, 128)),
        "bmm 64x[128x128]@[128x64]": (r(64, 128, 128), r(64, 128, 64)),
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kernels", default="blas,f32avx2", help="comma-separated: " + ",".join(KERNELS))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=0.25)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", default="")
    args = p.parse_args()
    kernels = args.kernels.split(",")
    bad = [k for k in kernels if k not in KERNELS]
    if bad:
        p.error(f"--kernels: unknown {bad}; choose from {','.join(KERNELS)}")
    lib = ctypes.CDLL(habana_torch._C.__file__)
    lib.hpu_gemm_force.argtypes = [ctypes.c_int]
    torch.set_num_threads(args.threads)
    up = lambda: subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"threads={torch.get_num_threads()} torch={torch.__version__}  {up()}")
    cases = {k: v for k, v in shapes(torch.Generator().manual_seed(0)).items() if args.only in k}
    sides = ["cpu"] + kernels
    best = {(c, s): float("inf") for c in cases for s in sides}
    pc = time.perf_counter
    try:
        for _ in range(args.rounds):
            for c, (a, b) in cases.items():
                ah, bh = a.to("hpu"), b.to("hpu")
                for s in sides:
                    if s == "cpu":
                        fn = lambda: torch.matmul(a, b)
                    else:
                        lib.hpu_gemm_force(KERNELS[s])
                        torch.testing.assert_close(torch.matmul(ah, bh).cpu(), torch.matmul(a, b),
                                                   rtol=1e-4, atol=1e-3)
                        fn = lambda: (torch.matmul(ah, bh), torch.hpu.synchronize())
                    ts, t_start = [], pc()
                    while pc() - t_start < args.seconds:
                        t0 = pc()
                        fn()
                        ts.append(pc() - t0)
                    ts.sort()
                    best[(c, s)] = min(best[(c, s)], ts[len(ts) // 10])
    finally:
        lib.hpu_gemm_force(KERNELS["auto"])
    head = "".join(f" {s + ' us':>12s}" for s in sides)
    ratios = [(sides[i], sides[j]) for i in range(len(sides)) for j in range(i + 1, len(sides))]
    print(f"{'shape':40s}{head}" + "".join(f" {x + '/' + y:>14s}" for x, y in ratios))
    for c in cases:
        t = {s: best[(c, s)] * 1e6 for s in sides}
        print(f"{c:40s}" + "".join(f" {t[s]:12.1f}" for s in sides) +
              "".join(f" {t[x] / t[y]:14.3f}" for x, y in ratios))
    print(up())


if __name__ == "__main__":
    main()
