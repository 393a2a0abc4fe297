"""Kernel library benchmark: hpu against torch on the CPU, same process.

Every case runs both sides interleaved (warm-up, then cpu/hpu/cpu/hpu ...),
takes the best of N repetitions of each side (least disturbed by other load on
a shared machine; the median is printed too), and checks the hpu result
against the CPU result once (torch.testing.assert_close) so that a fast wrong
kernel cannot pass. Both sides use the same thread count
(torch.set_num_threads also sizes the hpu kernel pool). hpu timings end with
torch.hpu.synchronize(), so they include the queued work.

"speed" below is t_cpu / t_hpu (> 1: the hpu is faster). Targets:
  matmul fp32/bf16, 256..2048 + a transposed operand: speed >= 1.0 (= GFLOP/s ratio)
  elementwise, softmax, layer_norm, gelu, reductions (sum/mean/amax/argmax/var/
  logsumexp over rows, sum over columns), topk, cumsum, softmax / log_softmax /
  gelu backward, 1M..64M elems: speed >= 1.0, or, where torch is already at
    the hardware limit, match it: torch's best time within 1.10x of a bare C
    loop streaming the same bytes on the same threads (stream_limit; the
    ratio is printed per row) and speed >= 0.95, shown as MATCH
  per-op host overhead (loop of tiny adds, one synchronize): hpu/cpu time <= 1.5
  BERT training step, GPT2 greedy generation: hpu/cpu time <= 1.0

    python bench/ops.py [--quick] [--groups matmul,pointwise,nn,overhead,bert,gpt2]
                        [--reps N] [--threads 2] [--json out.json] [--plot out.png]
"""
import argparse
import copy
import json
import os
import re
import statistics
import subprocess
import sys
import time

import torch

import habana_torch  # noqa: F401
import habana_torch.core as htcore

ALL_GROUPS = ("matmul", "pointwise", "nn", "overhead", "bert", "gpt2")
aten = torch.ops.aten


# ----------------------------------------------------------------------------
# machine

CLOCK_PROBE_C = r"""
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
/* 12 independent FMA chains: enough to cover 2 pipes x 4-cycle latency. */
__attribute__((target("avx512f"))) static double fp32(long n){
  __m512 a[12]; __m512 x=_mm512_set1_ps(1.0000001f), y=_mm512_set1_ps(0.999999f);
  for(int i=0;i<12;i++) a[i]=_mm512_set1_ps((float)i);
  double t=now();
  for(long k=0;k<n;k++) for(int i=0;i<12;i++) a[i]=_mm512_fmadd_ps(a[i],x,y);
  t=now()-t; float s=0; for(int i=0;i<12;i++) s+=_mm512_reduce_add_ps(a[i]);
  if(s==1.2345f) puts("");
  return n*12.0*16*2/t/1e9;
}
/* best of many short trials: on a shared machine some run unpreempted */
int main(void){ double f=0; for(int r=0;r<60;r++){double v=fp32(500000); if(v>f)f=v;}
  printf("%.3f\n",f); return 0;}
"""


def compile_c(source, out, *flags):
    """Compiles C `source` (text) with cc into the path `out` (its source is
    written beside it). Raises OSError or CalledProcessError."""
    src = out + ".c"
    with open(src, "w") as f:
        f.write(source)
    subprocess.run(["cc", "-O3", *flags, "-o", out, src], check=True, capture_output=True)
    return out


def measured_fp32_core_gflops():
    """One core's AVX-512 FMA rate from a 12-chain vfmadd231ps loop (compiled
    with cc on the spot; None if there is no compiler or no avx512f)."""
    import tempfile
    try:
        with tempfile.TemporaryDirectory() as d:
            exe = compile_c(CLOCK_PROBE_C, os.path.join(d, "p"), "-funroll-loops")
            return float(subprocess.run([exe], check=True, capture_output=True, text=True).stdout)
    except (OSError, subprocess.CalledProcessError, ValueError):
        return None


# The streaming limit of a memory-bound row: a bare C loop over the same
# bytes (no dispatch, no allocation, the data as hot as in the timed calls)
# on the same number of threads, each on its share, passes started together
# (a barrier) and the best pass kept, like the STREAM benchmark. The pass
# rule lets a kernel match torch instead of beating it where torch is
# already at the hardware limit; this measures where that is.
STREAM_PROBE_C = r"""
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
typedef struct { int kind, reps, id, threads; const float *a, *b; float *c; long n;
                 pthread_barrier_t *bar; double *times; int *go; } job_t;
/* kind 0: c = a + b (two reads, one write); 1: c = 2a (one read, one
 * write); 2: a sum of a (one read; 64 partial sums so that the adds keep
 * up with the loads). */
static void pass(int kind, const float *restrict a, const float *restrict b, float *restrict c, long n) {
  if (kind == 0) {
    for (long i = 0; i < n; i++) c[i] = a[i] + b[i];
  } else if (kind == 1) {
    for (long i = 0; i < n; i++) c[i] = a[i] * 2.0f;
  } else {
    float s[64] = {0};
    long i = 0;
    for (; i + 64 <= n; i += 64)
      for (int k = 0; k < 64; k++) s[k] += a[i + k];
    for (; i < n; i++) s[0] += a[i];
    float tot = 0;
    for (int k = 0; k < 64; k++) tot += s[k];
    c[0] = tot;
  }
}
static void *run(void *p) {
  job_t *j = p;
  long lo = j->n * j->id / j->threads, hi = j->n * (j->id + 1) / j->threads;
  int go;
  while (!(go = __atomic_load_n(j->go, __ATOMIC_ACQUIRE))) ; /* every thread started, or -1 */
  if (go < 0) return NULL;
  for (int r = 0; r < j->reps; r++) {
    pthread_barrier_wait(j->bar);
    double t = now();
    pass(j->kind, j->a + lo, j->b + lo, j->c + lo, hi - lo);
    j->times[(long)r * j->threads + j->id] = now() - t;
  }
  return NULL;
}
/* The best over `reps` passes of the slowest thread's time for the pass
 * (seconds), or -1 if the threads cannot be started. */
double stream(int kind, const float *a, const float *b, float *c, long n, int threads, int reps) {
  pthread_t tid[64];
  job_t jobs[64];
  pthread_barrier_t bar;
  if (threads < 1 || threads > 64) return -1;
  double *times = calloc((size_t)reps * threads, sizeof *times);
  if (!times) return -1;
  pthread_barrier_init(&bar, NULL, threads);
  int go = 0, started = 1;
  for (int i = 0; i < threads; i++) {
    jobs[i] = (job_t){kind, reps, i, threads, a, b, c, n, &bar, times, &go};
    if (i > 0 && pthread_create(&tid[i], NULL, run, &jobs[i]) != 0) break;
    if (i > 0) started++;
  }
  __atomic_store_n(&go, started == threads ? 1 : -1, __ATOMIC_RELEASE);
  double best = -1;
  if (started == threads) run(&jobs[0]);
  for (int i = 1; i < started; i++) pthread_join(tid[i], NULL);
  if (started == threads) {
    for (int r = 0; r < reps; r++) {
      double worst = 0;
      for (int i = 0; i < threads; i++)
        if (times[(long)r * threads + i] > worst) worst = times[(long)r * threads + i];
      if (best < 0 || worst < best) best = worst;
    }
  }
  pthread_barrier_destroy(&bar);
  free(times);
  return best;
}
"""
PROBE_KINDS = {"binary": 0, "unary": 1, "read": 2}
_probe_lib = []
_probe_bufs = {}


def stream_probe_lib():
    """The compiled probe (ctypes), or None without a C compiler."""
    if not _probe_lib:
        import atexit
        import ctypes
        import shutil
        import tempfile
        lib = None
        try:
            d = tempfile.mkdtemp(prefix="hpu-stream-probe-")
            atexit.register(shutil.rmtree, d, True)
            so = compile_c(STREAM_PROBE_C, os.path.join(d, "probe.so"), "-march=native", "-shared", "-fPIC",
                           "-pthread")
            lib = ctypes.CDLL(so)
            lib.stream.restype = ctypes.c_double
            lib.stream.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.c_long, ctypes.c_int, ctypes.c_int]
        except (OSError, subprocess.CalledProcessError):
            lib = None
        _probe_lib.append(lib)
    return _probe_lib[0]


def stream_limit(kind, n, threads, budget=0.1):
    """Best seconds for one pass of the probe `kind` over n floats (per
    operand) on `threads` threads (about `budget` seconds of passes), or None
    without a C compiler."""
    lib = stream_probe_lib()
    if lib is None:
        return None
    # The rows of one size come one after another: their probes share the
    # buffers (the 64M rows would otherwise fill 768 MB each time).
    if _probe_bufs.get("n") != n:
        _probe_bufs.clear()
        _probe_bufs.update(n=n, abc=(torch.rand(n), torch.rand(n), torch.empty(n)))
    a, b, c = _probe_bufs["abc"]
    one = lib.stream(PROBE_KINDS[kind], a.data_ptr(), b.data_ptr(), c.data_ptr(), n, threads, 1)
    # torch's OpenMP workers spin for milliseconds after a parallel region
    # (torch.rand above, the timed calls before): let them go to sleep
    # first, or the probe's threads share the cores with them.
    time.sleep(0.05)
    t = lib.stream(PROBE_KINDS[kind], a.data_ptr(), b.data_ptr(), c.data_ptr(), n, threads,
                   max(3, min(2000, int(budget / max(one, 1e-6)))))
    return t if t > 0 else None


def cpu_info():
    """Model, flags, clock and the fp32/bf16 peak the matmul rows are measured against.

    peak_fp32 = FMA units x fp32 lanes x 2 flops/FMA x GHz x threads used.
    Assumed: 2 FMA pipes per core (Zen 4/5, Skylake-SP and later server parts);
    lanes 16 with avx512f, else 8 with fma/avx2, else 4. GHz: /proc/cpuinfo
    "cpu MHz" is only the base clock a VM reports, so the effective clock is
    measured as (one core's vfmadd rate) / (2 x 16 x 2) and that clock is
    assumed for every thread (all-core boost = one-core boost). bf16 peak =
    2x fp32 when avx512_bf16 is present (VDPBF16PS: two bf16 products per
    fp32 lane per instruction); with amx_bf16, 1024 flop per cycle per core
    (one TDPBF16PS, 16x16x32 products, every 16 cycles on Sapphire Rapids)."""
    text = open("/proc/cpuinfo").read()
    model = re.search(r"model name\s*:\s*(.*)", text)
    mhz = re.search(r"cpu MHz\s*:\s*([\d.]+)", text)
    flags = set(re.search(r"flags\s*:\s*(.*)", text).group(1).split())
    ghz_nominal = float(mhz.group(1)) / 1000 if mhz else float("nan")
    lanes = 16 if "avx512f" in flags else 8 if "fma" in flags else 4
    core = measured_fp32_core_gflops() if "avx512f" in flags else None
    ghz = core / (2 * lanes * 2) if core else ghz_nominal
    threads = torch.get_num_threads()
    peak = 2 * lanes * 2 * ghz * threads
    return {
        "model": model.group(1).strip() if model else "?",
        "ghz_nominal": ghz_nominal, "ghz": ghz, "ghz_source": "measured FMA rate" if core else "cpu MHz",
        "lanes": lanes, "threads": threads, "fma_units": 2,
        "cpus_online": os.cpu_count(),
        "flags": sorted(f for f in flags if f.startswith("avx512") or f in ("avx2", "fma", "amx_bf16")),
        "peak_fp32": peak,
        "peak_bf16": (1024 * ghz * threads if "amx_bf16" in flags
                      else peak * (2 if "avx512_bf16" in flags else 1)),
    }


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


# ----------------------------------------------------------------------------
# timing

def sync():
    torch.hpu.synchronize()


def time_pair(cpu_fn, hpu_fn, reps, budget, settle=0.0, warmed=False):
    """Interleaved cpu/hpu runs after one warm-up each (none when `warmed`:
    the caller has just run both). Repetitions grow (up to 20x reps) while
    the case is cheap, bounded by `budget` seconds. When one pair takes
    longer than the budget, the sides are timed apart and a side that takes
    over half the budget is timed once: torch's bf16 matmul on a CPU
    without AVX512_BF16 runs at ~1 GFLOP/s (about a minute for one 2048^3
    product on a Zen 3 class EPYC), and `reps` more of it would make the
    matmul group take a quarter of an hour; one run of a side that slow is
    not noise-limited.

    settle > 0: before each timed call, run the same side untimed for at
    least `settle` seconds (at least once), so the timed call does not start
    while the other side's threads still hold the cores. torch's OpenMP
    workers spin-wait after a parallel region (libgomp's default wait
    policy), and a GEMM of 50-500 us started right after a torch one shares
    the 2 cores with that spinner and runs at about half speed. The spinner
    can outlast 10 ms: on a Zen 4 class EPYC a torch worker kept running
    8 ms after a region on an idle machine and 11-16 ms while hpu work ran
    beside it (docs/PERFORMANCE.md). Hence 30 ms by default. The
    repetitions the budget allows count the lead-ins, so a run takes about
    as long as with a short lead-in."""
    def lead_in(fn):
        t0 = time.perf_counter()
        fn()
        while time.perf_counter() - t0 < settle:
            fn()

    if not warmed:
        cpu_fn()
        hpu_fn()
    t0 = time.perf_counter()
    cpu_fn()
    t1 = time.perf_counter()
    hpu_fn()
    t2 = time.perf_counter()
    once = t2 - t0
    if once > budget:  # each side: once if it alone is that slow, else its reps
        def alone(fn, first):
            if first > budget / 2:
                return [first]
            ts = []
            for _ in range(max(reps, min(20 * reps, int(budget / 2 / max(first + settle, 1e-9))))):
                lead_in(fn)
                t = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t)
            return ts
        return alone(cpu_fn, t1 - t0), alone(hpu_fn, t2 - t1)
    n = max(reps, min(20 * reps, int(budget / max(once + 2 * settle, 1e-9))))
    tc, th = [], []
    for _ in range(n):
        if settle:
            lead_in(cpu_fn)
        t = time.perf_counter()
        cpu_fn()
        tc.append(time.perf_counter() - t)
        if settle:
            lead_in(hpu_fn)
        t = time.perf_counter()
        hpu_fn()
        th.append(time.perf_counter() - t)
    return tc, th


ROWS = []


# The hardware-limit clause of the pass rule (match torch where it is
# already at the hardware limit): torch's best time within AT_LIMIT of the
# streaming probe's (stream_limit) makes it a row where torch is at the
# limit, and there the hpu passes by matching torch: speed >= MATCH_SPEED
# (the same-process noise of a shared 2-vCPU machine is about 5%). Such
# rows print MATCH, not PASS, and the summary counts them apart.
AT_LIMIT = 1.10
MATCH_SPEED = 0.95


def record(group, case, tc, th, target_speed, target_text, extra="", per=1, limit_s=None):
    """Stores one row; speed = best cpu time / best hpu time. limit_s: the
    streaming probe's best time for the row's bytes (memory-bound rows)."""
    bc, bh = min(tc) / per, min(th) / per
    speed = bc / bh
    at_limit = limit_s is not None and bc <= AT_LIMIT * limit_s
    match = speed < target_speed and at_limit and speed >= MATCH_SPEED
    if limit_s is not None:
        extra += f"; torch/stream probe time {bc / limit_s:.2f}"
    row = {
        "group": group, "case": case,
        "cpu_s": bc, "hpu_s": bh,
        "cpu_med_s": statistics.median(tc) / per, "hpu_med_s": statistics.median(th) / per,
        "n": len(tc), "speed": speed, "target_speed": target_speed, "target": target_text,
        "pass": speed >= target_speed or match, "match": match, "limit_s": limit_s, "extra": extra,
    }
    ROWS.append(row)
    print_row(row)
    return row


def fmt_t(s):
    if s >= 1:
        return f"{s:8.3f} s "
    if s >= 1e-3:
        return f"{s * 1e3:8.2f} ms"
    return f"{s * 1e6:8.2f} us"


HEADER = (f"{'group':9s} {'case':34s} {'cpu best':>11s} {'hpu best':>11s} {'cpu med':>11s} "
          f"{'hpu med':>11s} {'speed':>6s} {'target':>22s} result  notes")


def print_row(r):
    print(f"{r['group']:9s} {r['case']:34s} {fmt_t(r['cpu_s'])} {fmt_t(r['hpu_s'])} "
          f"{fmt_t(r['cpu_med_s'])} {fmt_t(r['hpu_med_s'])} {r['speed']:6.2f} {r['target']:>22s} "
          f"{'MATCH' if r.get('match') else 'PASS' if r['pass'] else 'FAIL':6s}  {r['extra']}", flush=True)


def check(name, got, want, ref=None, **tol):
    """got (hpu) against want (cpu). On a mismatch, ref() -- the op in float64
    on the same inputs, where the caller can give it -- tells which side is
    off, and the mismatches per quarter of the rows show whether one thread's
    share of the work is (a race or a per-thread state looks like that)."""
    got = got.cpu() if isinstance(got, torch.Tensor) else got
    try:
        torch.testing.assert_close(got, want, **tol)
    except AssertionError as e:
        msg = f"{name}: hpu result differs from the CPU result\n{e}"
        if ref is not None and isinstance(got, torch.Tensor) and got.is_floating_point():
            r = ref()
            err = lambda t: ((t.double() - r).abs() / r.abs().clamp_min(1e-30)).max().item()
            bad = ~torch.isclose(got, want, **{k: v for k, v in tol.items() if k in ("rtol", "atol")})
            quarters = [int(q.sum()) for q in bad.reshape(bad.shape[0], -1).chunk(4)] if bad.dim() else []
            msg += (f"\nagainst float64: hpu max rel err {err(got):.3g}, cpu {err(want):.3g}; "
                    f"mismatches per quarter of the rows {quarters}")
        raise AssertionError(msg) from None


# ----------------------------------------------------------------------------
# groups

def bench_matmul(args, info):
    sizes = [256, 1024] if args.quick else [256, 512, 1024, 2048]
    cases = [(n, n, n, False) for n in sizes] + [(1024, 1024, 1024, True)]
    for dtype in (torch.float32, torch.bfloat16):
        peak = info["peak_fp32"] if dtype == torch.float32 else info["peak_bf16"]
        dn = "fp32" if dtype == torch.float32 else "bf16"
        for m, k, n, trans in cases:
            g = torch.Generator().manual_seed(m + trans)
            a = torch.randn(m, k, generator=g).to(dtype)
            b = torch.randn(n, k, generator=g).to(dtype) if trans else torch.randn(k, n, generator=g).to(dtype)
            ah, bh = a.to("hpu"), b.to("hpu")
            if trans:  # the nn.Linear layout: x @ W^T, W stored (out, in)
                cpu_fn = lambda: a @ b.t()
                hpu_op = lambda: ah @ bh.t()
            else:
                cpu_fn = lambda: a @ b
                hpu_op = lambda: ah @ bh
            tol = dict(rtol=1e-4, atol=1e-3) if dtype == torch.float32 else dict(rtol=1.6e-2, atol=1e-2)
            check(f"matmul {dn} {m}", hpu_op(), cpu_fn(), **tol)

            def hpu_fn():
                hpu_op()
                sync()

            # check() above ran both sides: that is the warm-up
            tc, th = time_pair(cpu_fn, hpu_fn, args.reps, args.budget, args.settle, warmed=True)
            flops = 2 * m * n * k
            gc, gh = flops / min(tc) / 1e9, flops / min(th) / 1e9
            case = f"matmul {dn} {m}x{k}x{n}" + (" A@B^T" if trans else "")
            record("matmul", case, tc, th, 1.0, "GFLOP/s ratio >= 1.0",
                   f"hpu {gh:6.1f} GFLOP/s ({100 * gh / peak:4.1f}% of peak), cpu {gc:6.1f} ({100 * gc / peak:4.1f}%)")


def sizes_elems(args):
    return [1 << 20, 1 << 24] if args.quick else [1 << 20, 1 << 24, 1 << 26]


def size_name(n):
    return f"{n >> 20}M"


def run_unary_cases(group, args, cases):
    """cases: (name, fn(*tensors), make(n) -> cpu tensors, tol)."""
    for n in sizes_elems(args):
        for name, fn, make, tol in cases:
            xs = make(n)
            hs = [x.to("hpu") for x in xs]
            want = fn(*xs)
            check(f"{name} {size_name(n)}", fn(*hs), want,
                  ref=lambda: fn(*[x.double() if x.is_floating_point() else x for x in xs]), **tol)
            # the probe with the row's memory traffic: a reduction reads,
            # an op of one input reads and writes, of more inputs reads two
            probe = ("read" if want.numel() < xs[0].numel() else "unary" if len(xs) == 1 else "binary")
            cpu_fn = lambda: fn(*xs)

            def hpu_fn():
                fn(*hs)
                sync()

            tc, th = time_pair(cpu_fn, hpu_fn, args.reps, args.budget, args.settle)
            gbs = sum(x.numel() * x.element_size() for x in xs) / min(th) / 1e9
            limit = stream_limit(probe, n, args.threads) if args.limit_probe else None
            record(group, f"{name} {size_name(n)}", tc, th, 1.0, "speed >= 1.0", f"hpu reads {gbs:5.1f} GB/s",
                   limit_s=limit)
            del xs, hs, want


def randn2(n, k=2, rows=1024, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n // rows, rows, generator=g) for _ in range(k)]


def saved_output(n, fn):
    """[grad, fn(x) over rows]: a backward's inputs as autograd gives them."""
    g, x = randn2(n, 2)
    return [g, fn(x, -1)]


def bench_pointwise(args, info):
    def where_inputs(n):
        a, b = randn2(n)
        return [a > 0, a, b]

    exact = dict(rtol=0, atol=0)
    cases = [
        ("add", lambda a, b: a + b, lambda n: randn2(n), exact),
        ("mul", lambda a, b: a * b, lambda n: randn2(n), exact),
        ("exp", torch.exp, lambda n: randn2(n, 1), dict(rtol=2e-6, atol=1e-6)),
        ("where", torch.where, where_inputs, exact),
        ("gelu", torch.nn.functional.gelu, lambda n: randn2(n, 1), dict(rtol=1e-5, atol=3e-6)),
        # Controls: the output preallocated (out=), so neither side pays for a
        # fresh allocation (torch's CPU allocator maps and faults in large
        # outputs on every call; the hpu's caching allocator reuses blocks).
        ("add out=", lambda a, b, c: torch.add(a, b, out=c), lambda n: randn2(n, 3), exact),
        ("exp out=", lambda a, c: torch.exp(a, out=c), lambda n: randn2(n, 2), dict(rtol=2e-6, atol=1e-6)),
    ]
    run_unary_cases("pointwise", args, cases)


def bench_nn(args, info):
    ln_params = {}

    def ln(x):
        key = (x.device.type, x.shape[-1])
        if key not in ln_params:
            g = torch.Generator().manual_seed(3)
            w, b = torch.randn(x.shape[-1], generator=g), torch.randn(x.shape[-1], generator=g)
            ln_params[key] = (w.to(x.device), b.to(x.device))
        w, b = ln_params[key]
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)

    red = dict(rtol=1e-4, atol=1e-4)
    cases = [
        ("softmax(-1) rows of 1024", lambda x: torch.softmax(x, -1), lambda n: randn2(n, 1), dict(rtol=1e-5, atol=1e-7)),
        ("layer_norm rows of 1024", ln, lambda n: randn2(n, 1), dict(rtol=1e-4, atol=1e-4)),
        ("sum(-1) rows of 1024", lambda x: x.sum(-1), lambda n: randn2(n, 1), red),
        ("mean(-1) rows of 1024", lambda x: x.mean(-1), lambda n: randn2(n, 1), red),
        # columns: a bias gradient's reduction ([rows, 1024].sum(0))
        ("sum(0) columns of 1024", lambda x: x.sum(0), lambda n: randn2(n, 1), dict(rtol=1e-4, atol=1e-3)),
        # the other reductions the models use (max, argmax, var, logsumexp),
        # and top-k as generation uses it
        ("amax(-1) rows of 1024", lambda x: x.amax(-1), lambda n: randn2(n, 1), dict(rtol=0, atol=0)),
        ("argmax(-1) rows of 1024", lambda x: x.argmax(-1), lambda n: randn2(n, 1), dict(rtol=0, atol=0)),
        ("var(-1) rows of 1024", lambda x: x.var(-1), lambda n: randn2(n, 1), red),
        ("logsumexp(-1) rows of 1024", lambda x: x.logsumexp(-1), lambda n: randn2(n, 1), dict(rtol=1e-5, atol=1e-5)),
        ("topk(5, -1) rows of 1024", lambda x: x.topk(5, -1).values, lambda n: randn2(n, 1), dict(rtol=0, atol=0)),
        ("cumsum(-1) rows of 1024", lambda x: x.cumsum(-1), lambda n: randn2(n, 1), dict(rtol=0, atol=0)),
        # backward kernels of a training step (softmax / log_softmax and gelu
        # backward); (grad, saved tensor) pairs
        ("softmax backward rows of 1024", lambda g, y: aten._softmax_backward_data(g, y, -1, y.dtype),
         lambda n: saved_output(n, torch.softmax), dict(rtol=1e-4, atol=1e-6)),
        ("log_softmax backward rows of 1024", lambda g, y: aten._log_softmax_backward_data(g, y, -1, y.dtype),
         lambda n: saved_output(n, torch.log_softmax), dict(rtol=1e-4, atol=1e-5)),
        ("gelu backward", lambda g, x: aten.gelu_backward(g, x), lambda n: randn2(n, 2), dict(rtol=1e-5, atol=1e-5)),
    ]
    run_unary_cases("nn", args, cases)


def bench_overhead(args, info):
    """Host cost of launching one tiny op: a loop of adds on 16-element
    tensors, one synchronize at the end (the hpu work is queued)."""
    loop = 2000
    x, y = torch.randn(16), torch.randn(16)
    xh, yh = x.to("hpu"), y.to("hpu")
    check("tiny add", xh + yh, x + y, rtol=0, atol=0)

    def cpu_fn():
        for _ in range(loop):
            x + y

    def hpu_fn():
        for _ in range(loop):
            xh + yh
        sync()

    tc, th = time_pair(cpu_fn, hpu_fn, args.reps, args.budget)
    record("overhead", f"tiny add x{loop} (16 elems), per op", tc, th, 1 / 1.5, "hpu/cpu time <= 1.5",
           f"hpu/cpu time {min(th) / min(tc):.2f}", per=loop)

    # The same with an in-place add (no allocation): the launch path alone.
    def cpu_fn2():
        for _ in range(loop):
            x.add_(y)

    def hpu_fn2():
        for _ in range(loop):
            xh.add_(yh)
        sync()

    tc, th = time_pair(cpu_fn2, hpu_fn2, args.reps, args.budget)
    record("overhead", f"tiny add_ x{loop} (in place), per op", tc, th, 1 / 1.5, "hpu/cpu time <= 1.5",
           f"hpu/cpu time {min(th) / min(tc):.2f}", per=loop)


def model_pair(rows_fn, args, steps):
    """Round robin over the variants, each a callable; returns times per variant."""
    times = {k: [] for k in rows_fn}
    for i in range(args.model_warmup + steps):
        for k, fn in rows_fn.items():
            t = time.perf_counter()
            fn()
            if i >= args.model_warmup:
                times[k].append(time.perf_counter() - t)
    return times


def bench_bert(args, info):
    import transformers
    cfg = transformers.BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                  intermediate_size=1024, vocab_size=1000, max_position_embeddings=512,
                                  num_labels=2)
    torch.manual_seed(0)
    base = transformers.BertForSequenceClassification(cfg)
    batch, seq = 16, 128
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), generator=g)
    labels = torch.randint(0, 2, (batch,), generator=g)

    def make(device, lazy=False):
        model = copy.deepcopy(base).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        i, l = ids.to(device), labels.to(device)

        def step():
            if lazy:
                htcore._set_lazy_mode(True)
            loss = model(input_ids=i, labels=l).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if device == "hpu":
                htcore.mark_step()
            opt.step()
            if device == "hpu":
                htcore.mark_step()
            out = loss.item()  # waits for the queued work
            if lazy:
                htcore._set_lazy_mode(False)
            return out

        return model, step

    variants = {"cpu": make("cpu"), "hpu": make("hpu")}
    if args.lazy:
        variants["hpu lazy"] = make("hpu", lazy=True)

    # Verification: one step with dropout off (eval mode) on every variant,
    # then the losses, a few gradients and the updated weights must agree.
    ref_model, ref_step = variants["cpu"]
    for m, _ in variants.values():
        m.eval()
    ref_loss = ref_step()
    ref_params = dict(ref_model.named_parameters())
    for name, (m, step) in variants.items():
        if name == "cpu":
            continue
        check(f"bert {name} loss", torch.tensor(step()), torch.tensor(ref_loss), rtol=1e-4, atol=1e-5)
        for pn, p in m.named_parameters():
            check(f"bert {name} weight {pn} after AdamW", p.detach(), ref_params[pn].detach(), rtol=1e-4, atol=2e-5)
        for pn in ("classifier.weight", "bert.encoder.layer.0.attention.self.query.weight",
                   "bert.embeddings.word_embeddings.weight"):
            gp = dict(m.named_parameters())[pn].grad
            if gp is not None:
                check(f"bert {name} grad {pn}", gp, ref_params[pn].grad, rtol=1e-3, atol=1e-5)
    for m, _ in variants.values():
        m.train()

    times = model_pair({k: s for k, (_, s) in variants.items()}, args, args.model_steps)
    desc = f"BERT train step h256 L4 b{batch}x{seq}"
    for name in [k for k in variants if k != "cpu"]:
        record("bert", f"{desc} ({name})", times["cpu"], times[name], 1.0, "hpu/cpu time <= 1.0",
               f"hpu/cpu time {min(times[name]) / min(times['cpu']):.2f}")


def bench_gpt2(args, info):
    import transformers
    cfg = transformers.GPT2Config(n_embd=256, n_layer=4, n_head=4, vocab_size=1000, n_positions=256,
                                  bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    base = transformers.GPT2LMHeadModel(cfg).eval()
    prompt = torch.randint(0, cfg.vocab_size, (1, 32), generator=torch.Generator().manual_seed(2))
    new = 32
    models = {"cpu": base, "hpu": copy.deepcopy(base).to("hpu")}

    def gen(device):
        m = models[device]
        p = prompt.to(device)

        def run():
            with torch.no_grad():
                out = m.generate(p, attention_mask=torch.ones_like(p), max_new_tokens=new,
                                 min_new_tokens=new, do_sample=False, use_cache=True, pad_token_id=0)
            return out.cpu()  # waits for the queued work

        return run

    runs = {d: gen(d) for d in models}
    check("gpt2 greedy tokens", runs["hpu"](), runs["cpu"](), rtol=0, atol=0)
    times = model_pair(runs, args, args.model_steps)
    record("gpt2", f"GPT2 greedy gen h256 L4, {new} tokens", times["cpu"], times["hpu"], 1.0,
           "hpu/cpu time <= 1.0", f"hpu/cpu time {min(times['hpu']) / min(times['cpu']):.2f}")


# ----------------------------------------------------------------------------

def load(up):
    m = re.search(r"load average: ([\d.]+)", up or "")
    return m.group(1) if m else "?"


def plot(rows, path, info):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [r for r in rows]
    fig, ax = plt.subplots(figsize=(11, max(4, 0.27 * len(rows) + 1.5)))
    ys = list(range(len(rows)))[::-1]
    colors = {"matmul": "tab:blue", "pointwise": "tab:orange", "nn": "tab:green",
              "overhead": "tab:purple", "bert": "tab:red", "gpt2": "tab:brown"}
    for y, r in zip(ys, rows):
        ax.barh(y, r["speed"], color=colors.get(r["group"], "gray"), alpha=0.85 if r["pass"] else 0.45,
                edgecolor="black" if not r["pass"] else None)
        ax.plot([r["target_speed"]] * 2, [y - 0.4, y + 0.4], color="black", lw=1.5)
        ax.text(r["speed"] * 1.03, y, f"{r['speed']:.2f}", va="center", fontsize=7)
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", lw=1, ls="--")
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{r['case']}" + ("  [MATCH]" if r.get("match") else "" if r["pass"] else "  [FAIL]")
                        for r in rows], fontsize=7)
    ax.set_xlabel("speed = torch CPU time / hpu time (log; > 1: hpu faster). "
                  "Black tick: target (overhead: hpu/cpu <= 1.5, i.e. 0.67)")
    ax.set_title(f"habana_torch kernel library vs torch {torch.__version__.split('+')[0]} CPU, "
                 f"{info['threads']} threads, {info['model']}\nbest of N; shared machine, noisy: "
                 f"load before {load(info.get('uptime_before'))}, after {load(info.get('uptime_after'))}", fontsize=9)
    lo = min(min(r["speed"] for r in rows), 0.5) / 1.5
    hi = max(max(r["speed"] for r in rows), 2) * 1.6
    ax.set_xlim(lo, hi)
    from matplotlib.ticker import FuncFormatter
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.grid(axis="x", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot written to {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", default=",".join(ALL_GROUPS), help="comma list of " + ",".join(ALL_GROUPS))
    ap.add_argument("--quick", action="store_true", help="smaller sizes, fewer reps (~1 minute)")
    ap.add_argument("--reps", type=int, default=0, help="min repetitions per side (default 5, quick 3)")
    ap.add_argument("--budget", type=float, default=0, help="seconds per op case used to add reps")
    ap.add_argument("--settle", type=float, default=0.03,
                    help="matmul and op rows: run each side untimed this many seconds before each timed call, "
                         "so torch's spinning OpenMP workers do not share the cores with the hpu call "
                         "(0: plain cpu/hpu alternation)")
    ap.add_argument("--model-steps", type=int, default=0, help="timed BERT steps / GPT2 generations")
    ap.add_argument("--model-warmup", type=int, default=1)
    ap.add_argument("--no-lazy", dest="lazy", action="store_false", help="skip the lazy-mode BERT row")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-limit-probe", dest="limit_probe", action="store_false",
                    help="op rows: skip the streaming-limit probe (then every row needs speed >= 1.0)")
    ap.add_argument("--lazy-ops", action="store_true",
                    help="time the op rows in lazy mode (default: eager, the kernels as launched one by one)")
    ap.add_argument("--json", help="write the rows and machine info here")
    ap.add_argument("--plot", help="write a PNG of the speed ratios here (needs matplotlib)")
    ap.add_argument("--replot", metavar="JSON", help="only redraw --plot from a saved --json file")
    args = ap.parse_args()
    # Lazy mode is the default; the kernel-library rows measure eager
    # launches (the BERT rows name their mode).
    htcore._set_lazy_mode(args.lazy_ops)
    if args.replot:
        saved = json.load(open(args.replot))
        plot(saved["rows"], args.plot, saved["info"])
        return
    args.reps = args.reps or (3 if args.quick else 5)
    args.budget = args.budget or (0.3 if args.quick else 1.0)
    args.model_steps = args.model_steps or (3 if args.quick else 7)
    groups = [g for g in args.groups.split(",") if g]
    for g in groups:
        if g not in ALL_GROUPS:
            sys.exit(f"unknown group {g}; choose from {','.join(ALL_GROUPS)}")

    torch.set_num_threads(args.threads)  # also sizes the hpu kernel pool
    info = cpu_info()
    info["hpu_threads"] = habana_torch._C._get_num_threads()
    info["uptime_before"] = uptime()
    print(f"torch {torch.__version__}, {info['model']}, {info['cpus_online']} cpus online, "
          f"threads cpu={torch.get_num_threads()} hpu={info['hpu_threads']}")
    print(f"flags: {' '.join(info['flags'])}")
    print(f"peak fp32 = 2 FMA units x {info['lanes']} lanes x 2 flop x {info['ghz']:.3f} GHz x "
          f"{info['threads']} threads = {info['peak_fp32']:.0f} GFLOP/s; bf16 peak {info['peak_bf16']:.0f} "
          f"(GHz from {info['ghz_source']}; nominal cpu MHz {info['ghz_nominal'] * 1e3:.0f})")
    print(f"uptime before: {info['uptime_before']}")
    print(HEADER)
    t0 = time.perf_counter()
    for g in groups:
        globals()[f"bench_{g}"](args, info)
    info["uptime_after"] = uptime()
    info["wall_s"] = time.perf_counter() - t0
    print(f"uptime after: {info['uptime_after']}  (wall {info['wall_s']:.0f} s)")
    fails = [r for r in ROWS if not r["pass"]]
    matches = [r for r in ROWS if r.get("match")]
    print(f"{len(ROWS) - len(fails)}/{len(ROWS)} PASS"
          + (f" ({len(matches)} by matching torch at the stream limit: "
             + "; ".join(f"{r['case']} {r['speed']:.2f}" for r in matches) + ")" if matches else "")
          + (": FAIL " + "; ".join(r["case"] for r in fails) if fails else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"info": info, "args": vars(args), "rows": ROWS}, f, indent=1)
    if args.plot:
        plot(ROWS, args.plot, info)


if __name__ == "__main__":
    main()
