"""Turns hccl_bench.sh's raw outputs into markdown tables (the HCCL figures
in docs/PERFORMANCE.md come from it): per rank count, time per allreduce
for hccl, gloo and MPI,
the ratios, and at 64 MB the memory-bandwidth bound of the direct design.
Usage: python bench/hccl_bench_report.py RAW_DIR 2 4 8"""
import re
import os
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
        dpath = f"{raw}/hccl_dev_{n}.txt"
        d = table(dpath, 0, 5) if os.path.exists(dpath) else {}
        print(f"#### {n} ranks (float32 sum, time per allreduce in us; hccl on host memory and on device buffers)\n")
        print("| size | hccl host | hccl device | gloo | OpenMPI | host vs gloo | device vs gloo | host vs MPI | device vs MPI |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        fmt = lambda v, f: f.format(v) if v else "-"
        for s in sorted(h):
            hs, ds, gs, ms = h[s], d.get(s), g.get(s), m.get(s)
            ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "-"
            print(f"| {human(s)} | {hs:.2f} | {fmt(ds, '{:.2f}')} | {fmt(gs, '{:.1f}')} | {fmt(ms, '{:.2f}')} | "
                  f"{ratio(gs, hs)} | {ratio(gs, ds)} | {ratio(ms, hs)} | {ratio(ms, ds)} |")
        s64 = 64 << 20
        if s64 in h:
            tmin = (3 * n - 1) * s64 / (2 * bw * 1e9) * 1e6
            dev = f", device {d[s64]:.0f} us = **{100 * tmin / d[s64]:.0f}%**" if s64 in d else ""
            print(f"\n64 MB: bound t_min = (3*{n}-1) * 64 MB / (2 * {bw:.2f} GB/s) = {tmin:.0f} us; "
                  f"hccl host {h[s64]:.0f} us = **{100 * tmin / h[s64]:.0f}% of the bound**{dev}.\n")
        for name, x in (("host", h), ("device", d)):
            lat = [g[s] / x[s] for s in x if s <= 65536 and s in g]
            big = [(g[s] / x[s], m[s] / x[s]) for s in x if s >= (1 << 20) and s in g and s in m]
            if lat and big:
                print(f"hccl {name}: up to 64 KB vs gloo min {min(lat):.1f}x; from 1 MB vs gloo min "
                      f"{min(r for r, _ in big):.1f}x, vs MPI min {min(r for _, r in big):.2f}x.\n")

main()
