"""Turns hccl_bench.sh's raw outputs into the markdown of bench/RESULTS.md's
HCCL section: per rank count, time per allreduce for hccl, gloo and MPI,
the ratios, and at 64 MB the memory-bandwidth bound of the direct design.
Usage: python bench/hccl_bench_report.py RAW_DIR 2 4 8"""
import re
import sys


def table(path, size_col, time_col):
    out = {}
    for line in open(path):
        if line.startswith("#") or not re.match(r"^\s+\d", line):
            continue
        f = line.split()
        out[int(f[size_col])] = float(f[time_col])
    return out


def human(b):
    for unit, s in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if b >= s:
            return f"{b / s:g} {unit}"
    return f"{b} B"


def main():
    raw, ranks = sys.argv[1], [int(x) for x in sys.argv[2:]]
    copy = {}
    for line in open(f"{raw}/copy.txt"):
        k, v = line.split()
        copy[k] = float(v)
    bw = max(copy.values())  # GB/s of bytes copied; memory traffic is 2x that
    print(f"Copy bandwidth (memcpy of 256 MB, best of 1 thread / all cores): {bw:.2f} GB/s copied "
          f"= {2 * bw:.2f} GB/s of memory traffic.\n")
    print("Bound for an N-rank allreduce of S bytes, direct shared-memory design: "
          "(3N-1)*S bytes of memory traffic, so t_min = (3N-1)*S / (2 * copy_bw).\n")
    for n in ranks:
        h = table(f"{raw}/hccl_{n}.txt", 0, 5)
        m = table(f"{raw}/mpi_{n}.txt", 0, 1)
        g = table(f"{raw}/gloo_{n}.txt", 0, 1)
        print(f"#### {n} ranks (float32 sum, host memory, time per allreduce in us)\n")
        print("| size | hccl | gloo | OpenMPI | hccl vs gloo | hccl vs MPI | hccl busbw GB/s |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for s in sorted(h):
            hs, gs, ms = h[s], g.get(s), m.get(s)
            busbw = s / hs / 1e3 * 2 * (n - 1) / n
            print(f"| {human(s)} | {hs:.2f} | {gs:.1f} | {ms:.2f} | {gs / hs:.1f}x | {ms / hs:.2f}x | {busbw:.2f} |"
                  if gs and ms else f"| {human(s)} | {hs:.2f} | - | - | - | - | {busbw:.2f} |")
        s64 = 64 << 20
        if s64 in h:
            tmin = (3 * n - 1) * s64 / (2 * bw * 1e9) * 1e6
            print(f"\n64 MB: bound t_min = (3*{n}-1) * 64 MB / (2 * {bw:.2f} GB/s) = {tmin:.0f} us; "
                  f"hccl {h[s64]:.0f} us = **{100 * tmin / h[s64]:.0f}% of the bound**.\n")
        lat = [(s, g[s] / h[s]) for s in h if s <= 65536 and s in g]
        big = [(s, g[s] / h[s], m[s] / h[s]) for s in h if s >= (1 << 20) and s in g and s in m]
        if lat:
            print(f"Up to 64 KB: hccl/gloo speedup min {min(r for _, r in lat):.1f}x. "
                  f"From 1 MB: vs gloo min {min(r for _, r, _ in big):.1f}x, vs MPI min {min(r for _, _, r in big):.2f}x.\n")


main()
