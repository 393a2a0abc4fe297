"""Random op programs for the memory-pressure tests (test_memory_pressure.py)
and the soak (scripts/soak_memory_pressure.py).

A program is a list of Python statements over named tensors: allocations,
elementwise ops, reductions, matmul, views (slices at offsets, narrow,
transpose, view/reshape, expand, overlapping slices of one base), in-place
ops (also on views, and out=), frees, empty_cache, synchronize, mark_step
and reads to the host. It is a pure function of its seed and profile, so a
failure is named by (profile, seed) and can be shrunk by dropping
statements. run() executes it on "hpu" or on "cpu" (where the device calls
do nothing); compare() checks every read against the CPU's.

Out of memory is part of the game: a statement that raises
torch.OutOfMemoryError on the hpu is skipped on the CPU too, its result
(or, for an in-place op, every view of its target) is dropped, and the
program goes on; statements that use a dropped tensor are skipped on both.

Tolerances. The generator tracks, per storage, a bound on the magnitude of
its values, a bound on the rounding error any correct implementation may
have accumulated in it, and whether all its values are dyadic rationals
small enough to be exact in its dtype. Exact values are compared bit for bit
(most of the data: small integers and quarters through add, sub, mul,
matmul, sums, where, clamp...); the others within four times their error
bound, which stays far below the size of the values, so a wrong alias, a
stale read or a lost write shows. Comparisons (where's condition, casts to
integers) only ever look at exact values, so a rounding difference cannot
flip them.

A batch of programs runs in a worker process (`python3 pressure_programs.py
--worker SPEC`) that prints one JSON line as each program starts and one
with its result; run_batch() drives workers under a per-program timeout, so
a hang fails the program that hung (named by its seed) instead of hanging
the caller, and a fresh worker carries on with the rest.
"""
import json
import math
import os
import random
import select
import subprocess
import sys
import tempfile
import time

import torch

EPS = 2.0 ** -23  # float32: twice the unit roundoff
TRANSCENDENTAL_ULPS = 16  # what exp/tanh/sigmoid/div may be off by, in EPS of the result's bound
F32_BOUND = float(1 << 20)  # floats stay below this, so error bounds stay meaningful
I64_BOUND = float(1 << 40)  # and integers far from overflow
TOL_FACTOR = 4.0  # both devices are within err of the true value: 2*err, and a factor 2 to spare

# Which kinds each profile draws, and how often. "alias_pair" records one
# graph structure twice, first over separate storages, then over
# overlapping views of one storage (the second may replay the first's
# cached recipe); "overlap_pair" writes through one of two overlapping
# views of a base and reads the other.
_BASE_WEIGHTS = dict(
    alloc=8, full=2, unary=8, binary=12, scalar=5, where=3, clamp=3, reduce=5, matmul=3,
    cast=2, clone=2, view=12, overlap_pair=3, inplace=12, out=3, delete=8,
    empty_cache=2, synchronize=2, mark_step=4, read=5, item=3, blob=2, alias_pair=2,
    partial_overlap=1,
)

PROFILES = {
    "mixed": dict(ops=(40, 80), max_numel=1 << 18, budget=0.7, weights={}),
    "alias": dict(ops=(30, 60), max_numel=1 << 16, budget=0.6,
                  weights=dict(alias_pair=10, overlap_pair=8, view=16, inplace=16, out=5,
                               blob=0, matmul=1)),
    "oom": dict(ops=(30, 60), max_numel=1 << 20, budget=1.6,
                weights=dict(blob=8, alloc=14, delete=5, read=3, matmul=2, alias_pair=1)),
    "flush": dict(ops=(40, 70), max_numel=1 << 16, budget=0.8,
                  weights=dict(empty_cache=8, synchronize=6, mark_step=10, read=8, item=6,
                               delete=12)),
}

# Kinds whose statements allocate no device memory: an out-of-memory error
# from one of them is a failure of its own (it points at work deferred from
# an earlier statement, or at memory the runtime kept for itself).
NON_ALLOCATING = {"view", "inplace", "out", "delete", "mark_step", "synchronize", "read",
                  "empty_cache"}

_DIMS = [3, 8, 16, 24, 32, 48, 64, 100, 128, 256, 512, 1024]
_DTYPES = {"f32": torch.float32, "i64": torch.int64, "u8": torch.uint8}


class _Base:
    """One storage: its dtype and size, and what is known of its values.
    fixed_layout: its strides are the same on every backend. An op's output
    that the CPU lays out permuted like its input (TensorIterator keeps the
    input's order) may be contiguous elsewhere, and then whether reshape
    or contiguous() return a view or a copy, and whether view() works, is
    the backend's choice (PyTorch leaves it unspecified)."""
    __slots__ = ("dtype", "numel", "bound", "err", "gran", "names", "blob", "fixed_layout")

    def __init__(self, dtype, numel, bound, err, gran, blob=False, fixed_layout=True):
        self.dtype, self.numel, self.blob = dtype, numel, blob
        self.bound, self.err, self.gran = bound, err, gran
        self.names = set()
        self.fixed_layout = fixed_layout

    @property
    def nbytes(self):
        return self.numel * (4 if self.dtype == "f32" else 8 if self.dtype == "i64" else 1)


class _Var:
    __slots__ = ("name", "base", "meta")

    def __init__(self, name, base, meta):
        self.name, self.base, self.meta = name, base, meta

    @property
    def shape(self):
        return tuple(self.meta.shape)

    @property
    def numel(self):
        return self.meta.numel()

    @property
    def writable(self):  # no element reached twice (expand makes stride-0 dims)
        return all(st != 0 or sz <= 1 for sz, st in zip(self.meta.shape, self.meta.stride()))


def _dyadic_gran(c):
    """The number of fractional bits of the dyadic rational c (c * 2**g is an integer)."""
    g = 0
    while c * (1 << g) != int(c * (1 << g)):
        g += 1
    return g


class _Reject(Exception):
    """The candidate statement does not fit the program's state: try another."""


class Generator:
    def __init__(self, seed, profile="mixed", card_bytes=32 << 20, exclude=()):
        self.seed = seed
        self.r = random.Random(f"{profile}:{seed}")
        prof = PROFILES[profile]
        self.max_numel = prof["max_numel"]
        self.budget = prof["budget"] * card_bytes
        self.card_bytes = card_bytes
        self.target = self.r.randint(*prof["ops"])
        weights = dict(_BASE_WEIGHTS, **prof["weights"])
        self.kinds = [k for k in weights if weights[k] > 0 and k not in exclude]
        self.weights = [weights[k] for k in self.kinds]
        self.exclude = set(exclude)
        self.group = "start"  # the kind drawn that emitted the statements being emitted
        self.ops = []
        self.vars = {}
        self.counter = 0
        dims = sorted(self.r.sample(_DIMS, 5))
        self.dims = dims
        self.slack = self.r.choice([1, 2, 3, 8])

    # ---- bookkeeping ----

    def _name(self):
        self.counter += 1
        return f"v{self.counter}"

    def _emit(self, kind, code, ins=(), out=None, drop=(), tol=None):
        """Appends a statement. A read's key (what R() files it under) is its index."""
        self.ops.append(dict(kind=kind, code=code, ins=list(ins), out=out, drop=list(drop),
                             tol=tol, key=len(self.ops) if tol is not None else None,
                             group=self.group))

    def _new_base(self, meta, dtype, bound, err, gran, blob=False):
        nbytes = meta.untyped_storage().nbytes()
        numel = nbytes // meta.element_size() if meta.element_size() else 0
        return _Base(dtype, numel, bound, err, gran, blob, fixed_layout=meta.is_contiguous())

    def _add_var(self, name, base, meta):
        v = _Var(name, base, meta)
        base.names.add(name)
        self.vars[name] = v
        return v

    def _live_bytes(self):
        seen, total = set(), 0
        for v in self.vars.values():
            if id(v.base) not in seen:
                seen.add(id(v.base))
                total += v.base.nbytes
        return total

    def _meta_eval(self, expr, names):
        ns = {"torch": torch, "dev": "meta"}
        for n in names:
            ns[n] = self.vars[n].meta
        try:
            return eval(expr, ns)
        except (RuntimeError, IndexError, ValueError, TypeError):
            raise _Reject(expr) from None

    @staticmethod
    def _exact_ok(dtype, bound, gran):
        if dtype == "i64":
            return True
        return bound * (2.0 ** gran) < 2.0 ** 24

    def _limit(self, dtype):
        return F32_BOUND if dtype == "f32" else I64_BOUND

    def _values(self, dtype=None, writable=False, min_ndim=0, exact=False):
        vs = [v for v in self.vars.values() if not v.base.blob and v.meta.ndim >= min_ndim
              and (dtype is None or v.base.dtype == dtype) and (not writable or v.writable)
              and (not exact or v.base.err == 0)]
        if not vs:
            raise _Reject("no such tensor")
        return self.r.choice(vs)

    def _result(self, expr, ins, dtype, bound, err, gran, kind):
        """Emits `out = expr`, a new storage holding values within bound."""
        if bound > self._limit(dtype):
            raise _Reject("values too big")
        meta = self._meta_eval(expr, ins)
        if meta.numel() > self.max_numel:
            raise _Reject("too big")
        if err == 0 and not self._exact_ok(dtype, bound, gran):
            err = EPS * bound
        name = self._name()
        self._emit(kind, f"{name} = {expr}", ins, out=name)
        return self._add_var(name, self._new_base(meta, dtype, bound, err, gran), meta)

    def _view(self, expr, src):
        meta = self._meta_eval(expr, [src.name])
        name = self._name()
        if meta._is_view() or meta is src.meta:
            self._emit("view", f"{name} = {expr}", [src.name], out=name)
            return self._add_var(name, src.base, meta)
        b = src.base  # reshape or contiguous made a copy
        self._emit("clone", f"{name} = {expr}", [src.name], out=name)
        return self._add_var(name, self._new_base(meta, b.dtype, b.bound, b.err, b.gran), meta)

    def _elements(self, v):
        idx = torch.arange(v.base.numel)
        return torch.as_strided(idx, v.meta.shape, v.meta.stride(), v.meta.storage_offset())

    def _may_write_over(self, target, src):
        """target.op_(src) is well defined only if src is the same view as
        target or shares no element with it (PyTorch refuses a partial
        overlap of dense tensors and computes in an unspecified order for
        the others)."""
        if src.base is not target.base:
            return True
        t, s = target.meta, src.meta
        if (t.shape == s.shape and t.stride() == s.stride()
                and t.storage_offset() == s.storage_offset()):
            return True
        mask = torch.zeros(target.base.numel, dtype=torch.bool)
        mask[self._elements(target).flatten()] = True
        return not bool(mask[self._elements(src).flatten()].any())

    def _write(self, target, bound, err, gran):
        """Records that a statement wrote values within bound into target."""
        b = target.base
        if bound > self._limit(b.dtype):
            raise _Reject("values too big")
        if err == 0 and not self._exact_ok(b.dtype, bound, gran):
            err = EPS * bound
        b.bound, b.err, b.gran = max(b.bound, bound), max(b.err, err), max(b.gran, gran)

    def _scalar(self, dtype, lo=-3, hi=3):
        if dtype == "i64":
            return self.r.choice([i for i in range(lo, hi + 1) if i != 0] or [1])
        return self.r.choice([0.25, 0.5, 0.75, 1.5, 2.0, 3.0, -0.5, -1.0, -2.0, 1.25])

    def _shape(self):
        r, d = self.r, self.dims
        for _ in range(20):
            a, b = r.choice(d), r.choice(d)
            roll = r.random()
            if roll < 0.25:
                shape = (a * b + (self.slack if r.random() < 0.5 else 0),)
            elif roll < 0.9:
                shape = (a + (self.slack if r.random() < 0.3 else 0),
                         b + (self.slack if r.random() < 0.2 else 0))
            else:
                shape = (r.choice([2, 3, 4]), a, b)
            if math.prod(shape) <= self.max_numel:
                return shape
        return (r.choice(d),)

    # ---- statements ----

    def alloc(self, shape=None, dtype=None):
        r = self.r
        shape = shape or self._shape()
        dtype = dtype or ("f32" if r.random() < 0.75 else "i64")
        hi = r.choice([2, 4, 8])
        den = r.choice([1, 4]) if dtype == "f32" else 1
        name = self._name()
        seed = r.randrange(1 << 30)
        expr = (f"torch.randint({-hi}, {hi + 1}, {tuple(shape)}, "
                f"generator=torch.Generator().manual_seed({seed}))")
        if dtype == "f32":
            expr += ".float()" + (f".div({den})" if den != 1 else "")
        self._emit("alloc", f"{name} = {expr}.to(dev)", out=name)
        meta = torch.empty(shape, dtype=_DTYPES[dtype], device="meta")
        return self._add_var(name, self._new_base(meta, dtype, hi / den, 0.0, _dyadic_gran(1 / den)),
                             meta)

    def full(self):
        shape = self._shape()
        dtype = "f32" if self.r.random() < 0.7 else "i64"
        c = self._scalar(dtype)
        if self.r.random() < 0.5:
            expr, bound, gran = f"torch.full({shape}, {c}, dtype=torch.{_DTYPES[dtype]}, device=dev)", abs(c), _dyadic_gran(c)
        else:
            n = math.prod(shape)
            expr, bound, gran = f"torch.arange({n}, dtype=torch.{_DTYPES[dtype]}, device=dev).view({shape})", n, 0
        return self._result(expr, [], dtype, bound, 0.0, gran, "alloc")

    def _partner(self, a, same_shape=0.75):
        """A tensor of a's dtype whose shape broadcasts with a's (allocates one if needed)."""
        cands = [v for v in self.vars.values() if v is not a and not v.base.blob
                 and v.base.dtype == a.base.dtype]
        same = [v for v in cands if v.shape == a.shape]
        if same and self.r.random() < same_shape:
            return self.r.choice(same)
        bc = []
        for v in cands:
            try:
                if torch.broadcast_shapes(v.shape, a.shape) == a.shape:
                    bc.append(v)
            except RuntimeError:
                pass
        if bc and self.r.random() < 0.8:
            return self.r.choice(bc)
        if self.r.random() < 0.5 and a.meta.ndim >= 1:
            shape = a.shape[1:] if a.meta.ndim >= 2 and self.r.random() < 0.3 else a.shape
            return self.alloc(shape, a.base.dtype)
        return self.alloc(a.shape, a.base.dtype)

    def unary(self, a=None, fn=None):
        a = a or self._values()
        b = a.base
        fns = ["relu", "neg", "abs"] + (["tanh", "sigmoid", "exp"] if b.dtype == "f32" else [])
        fn = fn or self.r.choice(fns)
        t = TRANSCENDENTAL_ULPS * EPS
        if fn in ("relu", "neg", "abs"):
            return self._result(f"torch.{fn}({a.name})", [a.name], b.dtype, b.bound, b.err, b.gran, "unary")
        if fn == "tanh":
            return self._result(f"torch.tanh({a.name})", [a.name], "f32", 1.0, b.err + t, 0, "unary")
        if fn == "sigmoid":
            return self._result(f"torch.sigmoid({a.name})", [a.name], "f32", 1.0, b.err / 4 + t, 0, "unary")
        if b.bound > 10:
            raise _Reject("exp would overflow the bounds")
        e = math.exp(b.bound)
        return self._result(f"torch.exp({a.name})", [a.name], "f32", e, e * (b.err + t), 0, "unary")

    def _binary_bounds(self, fn, x, y):
        """(bound, err, gran) of fn(x, y) for values within x's and y's."""
        bx, ex, gx, by, ey, gy = x.bound, x.err, x.gran, y.bound, y.err, y.gran
        if fn in ("add", "sub"):
            return bx + by, ex + ey, max(gx, gy)
        if fn == "mul":
            return bx * by, bx * ey + by * ex + ex * ey, gx + gy
        if fn in ("maximum", "minimum"):
            return max(bx, by), max(ex, ey), max(gx, gy)
        raise AssertionError(fn)

    def binary(self, a=None, b=None, fn=None):
        a = a or self._values()
        b = b or self._partner(a)
        fns = ["add", "sub", "mul", "maximum", "minimum"] + (["div"] if a.base.dtype == "f32" else [])
        fn = fn or self.r.choice(fns)
        x, y = a.base, b.base
        if self.r.random() < 0.5:
            a, b = b, a
            x, y = y, x
        if fn == "div":  # a denominator >= 1: the error bound stays small
            bound = x.bound
            err = x.err + x.bound * y.err + TRANSCENDENTAL_ULPS * EPS * bound
            return self._result(f"{a.name} / ({b.name}.abs() + 1)", [a.name, b.name], "f32", bound, err, 0, "binary")
        bound, err, gran = self._binary_bounds(fn, x, y)
        if fn in ("add", "sub") and self.r.random() < 0.2:
            c = self._scalar(x.dtype)
            bound, err, gran = x.bound + abs(c) * y.bound, x.err + abs(c) * y.err, max(x.gran, y.gran + _dyadic_gran(c))
            return self._result(f"torch.{fn}({a.name}, {b.name}, alpha={c})", [a.name, b.name], x.dtype, bound, err, gran, "binary")
        return self._result(f"torch.{fn}({a.name}, {b.name})", [a.name, b.name], x.dtype, bound, err, gran, "binary")

    def scale(self, a, c):
        b = a.base
        return self._result(f"{a.name} * {c}", [a.name], b.dtype, b.bound * abs(c), b.err * abs(c),
                            b.gran + _dyadic_gran(c), "scalar")

    def scalar(self, a=None):
        a = a or self._values()
        b = a.base
        c = self._scalar(b.dtype)
        op = self.r.choice(["*", "+", "-"])
        if op == "*":
            return self.scale(a, c)
        return self._result(f"{a.name} {op} {c}", [a.name], b.dtype, b.bound + abs(c), b.err, max(b.gran, _dyadic_gran(c)), "scalar")

    def where(self):
        a = self._values()
        cond = self._values(exact=True)
        try:
            torch.broadcast_shapes(cond.shape, a.shape)
        except RuntimeError:
            cond = a if a.base.err == 0 else None
        if cond is None:
            raise _Reject("no exact condition of that shape")
        thr = self.r.choice([0, 1, -1, 0.5]) if cond.base.dtype == "f32" else self.r.choice([0, 1, -1])
        if self.r.random() < 0.3:
            c = self._scalar(a.base.dtype)
            x = a.base
            return self._result(f"torch.where({cond.name} > {thr}, {a.name}, {c})", [cond.name, a.name], x.dtype,
                                max(x.bound, abs(c)), x.err, max(x.gran, _dyadic_gran(c)), "where")
        b = self._partner(a)
        bound, err, gran = self._binary_bounds("maximum", a.base, b.base)
        return self._result(f"torch.where({cond.name} > {thr}, {a.name}, {b.name})", [cond.name, a.name, b.name],
                            a.base.dtype, bound, err, gran, "where")

    def clamp(self):
        a = self._values()
        b = a.base
        lo = self._scalar(b.dtype)
        hi = lo + abs(self._scalar(b.dtype))
        bound = min(b.bound, max(abs(lo), abs(hi)))
        return self._result(f"{a.name}.clamp({lo}, {hi})", [a.name], b.dtype, bound, b.err,
                            max(b.gran, _dyadic_gran(lo), _dyadic_gran(hi)), "clamp")

    def reduce(self):
        a = self._values(min_ndim=1)
        b = a.base
        fns = ["sum", "amax"] + (["mean"] if b.dtype == "f32" else [])
        fn = self.r.choice(fns)
        if self.r.random() < 0.25:
            dim, n, args = None, a.numel, ""
        else:
            dim = self.r.randrange(a.meta.ndim)
            n = a.shape[dim]
            args = f"dim={dim}" + (", keepdim=True" if self.r.random() < 0.4 else "")
        if n == 0:
            raise _Reject("empty")
        expr = f"{a.name}.{fn}({args})"
        if fn == "amax":
            return self._result(expr, [a.name], b.dtype, b.bound, b.err, b.gran, "reduce")
        s_bound = n * b.bound
        s_err = n * b.err
        if not (b.err == 0 and self._exact_ok(b.dtype, s_bound, b.gran)):
            if n > 4096:
                raise _Reject("an inexact sum that long has no useful error bound")
            s_err += (n - 1) * EPS * s_bound
        if fn == "sum":
            return self._result(expr, [a.name], b.dtype, s_bound, s_err, b.gran, "reduce")
        exact = s_err == 0 and n & (n - 1) == 0  # dividing by a power of two is exact
        err = 0.0 if exact else s_err / n + 2 * EPS * b.bound
        return self._result(expr, [a.name], "f32", b.bound, err, b.gran + int(math.log2(n)) if exact else 0, "reduce")

    def matmul(self):
        a = self._values(dtype="f32", min_ndim=2)
        if a.meta.ndim != 2:
            raise _Reject("2-d only")
        k = a.shape[1]
        cands = [v for v in self.vars.values() if not v.base.blob and v.base.dtype == "f32"
                 and v.meta.ndim == 2 and v.shape[0] == k]
        b = self.r.choice(cands) if cands and self.r.random() < 0.7 else self.alloc((k, self.r.choice(self.dims)), "f32")
        x, y = a.base, b.base
        bound = k * x.bound * y.bound
        err = k * (x.bound * y.err + y.bound * x.err + x.err * y.err)
        if not (err == 0 and self._exact_ok("f32", bound, x.gran + y.gran)):
            if k > 256:
                raise _Reject("an inexact product that deep has no useful error bound")
            err += k * EPS * bound
        if a.shape[0] * b.shape[1] > self.max_numel or k > 1024:
            raise _Reject("too big")
        return self._result(f"{a.name} @ {b.name}", [a.name, b.name], "f32", bound, err, x.gran + y.gran, "matmul")

    def cast(self):
        a = self._values()
        b = a.base
        if b.dtype == "f32":
            if b.err != 0:
                raise _Reject("casting rounded floats to integers flips at .0")
            return self._result(f"{a.name}.to(torch.int64)", [a.name], "i64", b.bound, 0.0, 0, "cast")
        return self._result(f"{a.name}.to(torch.float32)", [a.name], "f32", b.bound, 0.0, 0, "cast")

    def clone(self):
        a = self._values()
        b = a.base
        expr = self.r.choice([f"{a.name}.clone()", f"{a.name}.contiguous()"])
        if expr.endswith("contiguous()"):
            if not b.fixed_layout:
                raise _Reject("a view or a copy, as the backend laid the base out")
            return self._view(expr, a)
        return self._result(expr, [a.name], b.dtype, b.bound, b.err, b.gran, "clone")

    def view(self, a=None):
        r = self.r
        a = a or self._values(min_ndim=1)
        shape, nd = a.shape, a.meta.ndim
        choice = r.choice(["slice", "slice", "narrow", "transpose", "view", "reshape", "expand",
                           "select", "unsqueeze"])
        d = r.randrange(nd)
        size = shape[d]
        if choice in ("slice", "narrow"):
            if size < 2:
                raise _Reject("too small to slice")
            start = r.randrange(0, size - 1)
            stop = r.randrange(start + 1, size + 1)
            if choice == "narrow":
                return self._view(f"{a.name}.narrow({d}, {start}, {stop - start})", a)
            step = 2 if r.random() < 0.15 else 1
            idx = ", ".join([":"] * d + [f"{start}:{stop}" + (f":{step}" if step > 1 else "")])
            return self._view(f"{a.name}[{idx}]", a)
        if choice == "transpose":
            if nd < 2:
                raise _Reject("1-d")
            if nd == 2 and r.random() < 0.5:
                return self._view(f"{a.name}.t()", a)
            d0, d1 = r.sample(range(nd), 2)
            return self._view(f"{a.name}.transpose({d0}, {d1})", a)
        if choice in ("view", "reshape"):
            if not a.base.fixed_layout:
                raise _Reject("a view or a copy, as the backend laid the base out")
            n = a.numel
            opts = [(n,)] + [(k, n // k) for k in self.dims if n % k == 0 and k < n]
            if nd >= 2:
                opts.append(shape[:-2] + (shape[-2] * shape[-1],))
            new = r.choice(opts)
            return self._view(f"{a.name}.{choice}({', '.join(map(str, new))})", a)
        if choice == "expand":
            ones = [i for i, s in enumerate(shape) if s == 1]
            if ones:
                new = list(shape)
                new[r.choice(ones)] = r.choice(self.dims)
                return self._view(f"{a.name}.expand({', '.join(map(str, new))})", a)
            if nd > 2:
                raise _Reject("keep expands small")
            m = r.choice([2, 3, 4, 8])
            return self._view(f"{a.name}.unsqueeze(0).expand({m}, {', '.join(map(str, shape))})", a)
        if choice == "select":
            if nd < 2:
                raise _Reject("1-d")
            return self._view(f"{a.name}[{r.randrange(size)}]", a)
        return self._view(f"{a.name}.unsqueeze({r.randrange(nd + 1)})", a)

    def _inplace_src_bounds(self, fn, t, s):
        if fn == "copy_":
            return s.bound, s.err, s.gran
        return self._binary_bounds(fn[:-1], t, s)

    def inplace(self, t=None, s=None, fn=None):
        r = self.r
        t = t or self._values(writable=True)
        b = t.base
        if s is None and (fn is None and r.random() < 0.35):
            fns = ["mul_", "add_", "clamp_", "relu_", "neg_", "zero_", "fill_"] + (["tanh_"] if b.dtype == "f32" else [])
            fn = r.choice(fns)
            c = self._scalar(b.dtype)
            if fn == "mul_":
                bound, err, gran, code = b.bound * abs(c), b.err * abs(c), b.gran + _dyadic_gran(c), f"{t.name}.mul_({c})"
            elif fn == "add_":
                bound, err, gran, code = b.bound + abs(c), b.err, max(b.gran, _dyadic_gran(c)), f"{t.name}.add_({c})"
            elif fn == "clamp_":
                hi = c + abs(self._scalar(b.dtype))
                bound, err, gran, code = max(abs(c), abs(hi)), b.err, max(b.gran, _dyadic_gran(c), _dyadic_gran(hi)), f"{t.name}.clamp_({c}, {hi})"
            elif fn == "tanh_":
                bound, err, gran, code = 1.0, b.err + TRANSCENDENTAL_ULPS * EPS, 0, f"{t.name}.tanh_()"
            elif fn == "fill_":
                bound, err, gran, code = abs(c), 0.0, _dyadic_gran(c), f"{t.name}.fill_({c})"
            elif fn == "zero_":
                bound, err, gran, code = 0.0, 0.0, 0, f"{t.name}.zero_()"
            else:
                bound, err, gran, code = b.bound, b.err, b.gran, f"{t.name}.{fn}()"
            self._write(t, bound, err, gran)
            self._emit("inplace", code, [t.name], drop=sorted(b.names))
            return t
        s = s or self._partner(t)
        if s.base.dtype != b.dtype:
            raise _Reject("dtype")
        try:
            if torch.broadcast_shapes(t.shape, s.shape) != t.shape:
                raise _Reject("does not broadcast to the target")
        except RuntimeError:
            raise _Reject("does not broadcast") from None
        if not self._may_write_over(t, s):
            raise _Reject("partial overlap")
        fn = fn or r.choice(["add_", "sub_", "mul_", "copy_"])
        bound, err, gran = self._inplace_src_bounds(fn, b, s.base)
        self._write(t, bound, err, gran)
        self._emit("inplace", f"{t.name}.{fn}({s.name})", [t.name, s.name], drop=sorted(b.names))
        return t

    def out(self):
        t = self._values(writable=True)
        b = t.base
        a = self._partner(t, same_shape=1.0)
        c = self._partner(t)
        if a.base.dtype != b.dtype or a.shape != t.shape:
            raise _Reject("out= needs the result's shape")
        for s in (a, c):
            if not self._may_write_over(t, s):
                raise _Reject("partial overlap")
        fn = self.r.choice(["add", "mul", "sub"])
        bound, err, gran = self._binary_bounds(fn, a.base, c.base)
        self._write(t, bound, err, gran)
        self._emit("out", f"torch.{fn}({a.name}, {c.name}, out={t.name})", [t.name, a.name, c.name],
                   drop=sorted(b.names))
        return t

    def delete(self, name=None):
        if name is None:
            if not self.vars:
                raise _Reject("nothing to free")
            blobs = [v for v in self.vars.values() if v.base.blob]
            if blobs and self.r.random() < 0.7:
                name = self.r.choice(blobs).name
            elif self._live_bytes() > self.budget and self.r.random() < 0.8:
                name = max(self.vars.values(), key=lambda v: v.base.nbytes).name
            else:
                name = self.r.choice(list(self.vars))
        v = self.vars.pop(name)
        v.base.names.discard(name)
        self._emit("delete", f"del {name}", [name])

    def empty_cache(self):
        self._emit("empty_cache", "empty_cache()")

    def synchronize(self):
        self._emit("synchronize", "synchronize()")

    def mark_step(self):
        self._emit("mark_step", "mark_step()")

    def _tol(self, err):
        return TOL_FACTOR * err

    def read(self, v=None):
        v = v or self._values()
        self._emit("read", f"R({len(self.ops)}, {v.name})", [v.name], tol=self._tol(v.base.err))

    def item(self):
        v = self._values()
        b = v.base
        n = v.numel
        s_err = n * b.err
        if not (b.err == 0 and self._exact_ok(b.dtype, n * b.bound, b.gran)):
            s_err += (n - 1) * EPS * n * b.bound
        exact_sum = b.err == 0 and self._exact_ok(b.dtype, n * b.bound, b.gran)
        if not exact_sum and n > 4096 or n * b.bound > self._limit(b.dtype):
            self._emit("item", f"R({len(self.ops)}, {v.name}.amax().item())", [v.name], tol=self._tol(b.err))
        else:
            self._emit("item", f"R({len(self.ops)}, {v.name}.sum().item())", [v.name], tol=self._tol(s_err))

    def blob(self):
        """A byte buffer sized against the card: past its capacity (must
        raise OutOfMemoryError) or a large part of it (may)."""
        r = self.r
        if r.random() < 0.4:
            n = self.card_bytes + r.randrange(1, self.card_bytes)
        else:
            n = int(self.card_bytes * r.uniform(0.2, 0.9))
        name = self._name()
        self._emit("alloc", f"{name} = torch.zeros({n}, dtype=torch.uint8, device=dev)", out=name)
        meta = torch.empty(n, dtype=torch.uint8, device="meta")
        self._add_var(name, _Base("u8", n, 0.0, 0.0, 0, blob=True), meta)
        if r.random() < 0.5:
            self._emit("item", f"R({len(self.ops)}, int({name}[::4099].sum()))", [name], tol=0.0)

    def overlap_pair(self):
        """Two overlapping slices of one base, a write through one and a
        read through the other."""
        r = self.r
        a = self._values(writable=True, min_ndim=1)
        d = r.randrange(a.meta.ndim)
        size = a.shape[d]
        if size < 3:
            raise _Reject("too small")
        n = r.randrange(2, size)
        k = r.randrange(1, size - n + 1)
        pre = ", ".join([":"] * d)
        pre = pre + ", " if pre else ""
        v1 = self._view(f"{a.name}[{pre}0:{n}]", a)
        v2 = self._view(f"{a.name}[{pre}{k}:{k + n}]", a)
        if r.random() < 0.5:
            v1, v2 = v2, v1
        t = self.unary(v1, r.choice(["relu", "neg", "abs"])) if r.random() < 0.5 else self.scalar(v1)
        self.inplace(v2, t, r.choice(["add_", "copy_", "mul_", "sub_"]))
        if r.random() < 0.5:
            self.delete(t.name)
        if r.random() < 0.5:
            self.read(v1)

    def alias_pair(self):
        """One graph structure recorded twice: first over separate
        storages, then over two overlapping views of one storage at the
        same offsets, sizes and strides. A recipe cached for the first must
        not be replayed for the second if it depends on the operands not
        overlapping."""
        r = self.r
        n = r.choice([1024, 4096, 16384, 65536])
        n = min(n, self.max_numel // 2)
        k = r.randrange(1, max(2, n // 4))
        j = r.randrange(0, k) if r.random() < 0.5 else 0  # a starts at j, the written view at k
        if r.random() < 0.5:
            shape = (n + k + 1,)
            sl = lambda v, s: f"{v}[{s}:{s + n}]"  # noqa: E731
        else:
            cols = r.choice([c for c in self.dims if c <= n] or [8])
            rows = max(2, n // cols)
            k = max(1, min(k, rows - 1))
            j = min(j, k - 1)
            shape = (rows + k + 1, cols)
            sl = lambda v, s: f"{v}[{s}:{s + rows}]"  # noqa: E731
        if math.prod(shape) > self.max_numel:
            raise _Reject("too big")
        if r.random() < 0.5:  # the written view before the one read
            j, k = k, j
        form = r.choice(["write_result", "write_then_read"])
        chain = [r.choice([("scalar", None), ("unary", "relu"), ("unary", "neg"), ("binary", "add"),
                           ("binary", "mul")]) for _ in range(r.randint(1, 3))]
        fn = r.choice(["add_", "copy_", "sub_", "mul_"])
        scalar_c = self._scalar("f32")
        for instance in (0, 1):
            if instance == 0:
                src, dst = self.alloc(shape, "f32"), self.alloc(shape, "f32")
            else:
                src = dst = self.alloc(shape, "f32")
            a = self._view(sl(src.name, j), src)
            t_ = self._view(sl(dst.name, k), dst)
            extra = self.alloc(a.shape, "f32")
            self.mark_step()
            if form == "write_result":
                cur = a
                temps = []
                for kind, arg in chain:
                    if kind == "scalar":
                        cur = self.scale(cur, scalar_c)
                    elif kind == "unary":
                        cur = self.unary(cur, arg)
                    else:
                        cur = self._result(f"torch.{arg}({cur.name}, {extra.name})", [cur.name, extra.name], "f32",
                                           *self._binary_bounds(arg, cur.base, extra.base), "binary")
                    temps.append(cur)
                self.inplace(t_, cur, fn)
                for tmp in temps:
                    self.delete(tmp.name)
            else:
                self.inplace(t_, extra, fn)
                u = self.scale(a, scalar_c)
                self.inplace(extra, u, "copy_")
                self.delete(u.name)
            self.mark_step()
            self.read(dst)
            self.read(extra)
            for v in (a, t_, extra):
                self.delete(v.name)
            if instance == 0:
                self.delete(src.name)

    def partial_overlap(self):
        """x[k:].add_(x[:-k]) on a dense 1-d tensor: PyTorch refuses it;
        so must the hpu (silently computing something is the failure).
        The tensor is freed right after, whatever happened."""
        a = self.alloc((self.r.choice(self.dims) + 8,), self.r.choice(["f32", "i64"]))
        k = self.r.randint(1, 4)
        self._emit("partial_overlap", f"{a.name}[{k}:].add_({a.name}[:-{k}])", [a.name], drop=[a.name])
        self.delete(a.name)

    # ---- the program ----

    def generate(self):
        r = self.r
        for _ in range(self.r.randint(1, 3)):
            self.alloc()
        while len(self.ops) < self.target:
            kind = r.choices(self.kinds, self.weights)[0]
            if kind in ("alloc", "full", "blob") and self._live_bytes() > self.budget:
                kind = "delete"
            if kind == "delete" and kind in self.exclude:
                continue
            mark = len(self.ops), dict(self.vars), self.counter, {id(v.base): (v.base.bound, v.base.err, v.base.gran, set(v.base.names)) for v in self.vars.values()}
            self.group = kind
            try:
                getattr(self, kind)()
            except _Reject:
                self._rollback(mark)
        self.group = "final reads"
        for name in sorted(self.vars, key=lambda s: int(s[1:])):
            if not self.vars[name].base.blob:
                self.read(self.vars[name])
        return self.ops

    def _rollback(self, mark):
        """Undoes a half-emitted statement group (a macro that was rejected midway)."""
        n, vars_, counter, bases = mark
        del self.ops[n:]
        self.vars = vars_
        self.counter = counter
        for v in vars_.values():
            b = v.base
            if id(b) in bases:
                b.bound, b.err, b.gran, names = bases[id(b)]
                b.names = set(names)


def generate(seed, profile="mixed", card_bytes=32 << 20, exclude=()):
    return Generator(seed, profile, card_bytes, exclude).generate()


# ---- running and comparing ----

def _namespace(device):
    ns = {"torch": torch, "dev": device}
    if device == "hpu":
        import habana_torch  # noqa: F401
        import habana_torch.core as htcore
        ns.update(empty_cache=torch.hpu.empty_cache, synchronize=torch.hpu.synchronize,
                  mark_step=htcore.mark_step)
    else:
        nothing = lambda: None  # noqa: E731
        ns.update(empty_cache=nothing, synchronize=nothing, mark_step=nothing)
    return ns


def run(ops, device, skip=(), drop_after=(), compiled=None):
    """Runs the statements on device. Returns (reads, events): reads maps a
    read's key to a CPU tensor or number, events maps the index of each
    statement that raised to (exception type, message). Statements in skip,
    and statements whose operands are gone, are not run; their results are
    dropped, as are those of a statement that raises, or that is in
    drop_after (which raised on the other device: the two runs go on with
    the same tensors)."""
    ns = _namespace(device)
    reads, events = {}, {}

    def R(key, v):
        reads[key] = v.to("cpu", copy=True) if isinstance(v, torch.Tensor) else v
    ns["R"] = R
    for i, op in enumerate(ops):
        if i in skip or any(n not in ns for n in op["ins"]):
            _drop(ns, op)
            continue
        code = compiled[i] if compiled else op["code"]
        try:
            exec(code, ns)
        except Exception as e:  # noqa: BLE001 - every exception is an event to compare
            events[i] = (type(e).__name__, str(e).split("\n")[0][:300])
            _drop(ns, op)
            del e
            continue
        if i in drop_after:
            _drop(ns, op)
    return reads, events


def _drop(ns, op):
    for n in ([op["out"]] if op["out"] else []) + op["drop"]:
        ns.pop(n, None)


def compare(ops, hpu, cpu):
    """Failures (strings) of the hpu run against the CPU run."""
    (h_reads, h_events), (c_reads, c_events) = hpu, cpu
    fails = []
    by_key = {op["key"]: op for op in ops if op["key"] is not None}
    for i, (typ, msg) in sorted(h_events.items()):
        kind = ops[i]["kind"]
        if typ == "OutOfMemoryError":
            if kind in NON_ALLOCATING:
                fails.append(f"op {i} ({kind}: {ops[i]['code']}) raised OutOfMemoryError though it allocates nothing: {msg}")
        elif i not in c_events:
            fails.append(f"op {i} ({ops[i]['code']}) raised {typ} on hpu only: {msg}")
        elif "out of memory" in msg.lower():
            fails.append(f"op {i} ({ops[i]['code']}) ran out of memory as {typ}, not OutOfMemoryError: {msg}")
    for i, (typ, msg) in sorted(c_events.items()):
        if i not in h_events:
            fails.append(f"op {i} ({ops[i]['code']}) raised {typ} on the CPU but not on hpu: {msg}")
    for key in sorted(set(h_reads) | set(c_reads)):
        code = by_key[key]["code"]
        if key not in h_reads or key not in c_reads:
            fails.append(f"read {key} ({code}) happened on {'hpu' if key in h_reads else 'cpu'} only")
            continue
        h, c, tol = h_reads[key], c_reads[key], by_key[key]["tol"]
        if isinstance(c, torch.Tensor):
            if h.dtype != c.dtype or h.shape != c.shape:
                fails.append(f"read {key} ({code}): hpu {h.dtype}{list(h.shape)} vs cpu {c.dtype}{list(c.shape)}")
                continue
            if h.numel() == 0:
                continue
            if tol == 0:
                bad = h != c
            else:
                bad = ~((h.double() - c.double()).abs() <= tol)
            if bool(bad.any()):
                idx = bad.flatten().nonzero()[0].item()
                fails.append(f"read {key} ({code}): {int(bad.sum())} of {c.numel()} elements differ "
                             f"(tol {tol:.3g}), first at flat index {idx}: hpu {h.flatten()[idx].item()} "
                             f"cpu {c.flatten()[idx].item()}")
        else:
            if not abs(h - c) <= tol:
                fails.append(f"read {key} ({code}): hpu {h} cpu {c} (tol {tol:.3g})")
    return fails


def _single_threaded(fn, *args, **kwargs):
    """Calls fn with torch's CPU ops on one thread (the hpu kernel pool is
    not touched). The CPU reference must not depend on timing: torch's CPU
    tanh/exp/log/... go through MKL's VML, which splits a vector of a few
    thousand elements over its OpenMP threads, and on a loaded machine, in a
    process that has run hpu work, the second thread's half sometimes came
    out at VML's low-accuracy (EP, AVX2) level: tanh(1) = 0.7616326 instead
    of 0.7615942, 5e-5 off, where the hpu kernel was exact."""
    threads = torch.get_num_threads()
    torch._C.set_num_threads(1)
    try:
        return fn(*args, **kwargs)
    finally:
        torch._C.set_num_threads(threads)


def run_and_compare(ops, keep=None):
    """Runs ops (only the indices in keep, if given) on hpu then on the CPU,
    skipping on the CPU what raised on the hpu. Returns a result dict."""
    if keep is not None:
        keep = set(keep)
        ops = [op for i, op in enumerate(ops) if i in keep]
    compiled = [compile(op["code"], f"<op {i}>", "exec") for i, op in enumerate(ops)]
    t0 = time.perf_counter()
    hpu = run(ops, "hpu", compiled=compiled)
    ooms = sorted(i for i, (t, _) in hpu[1].items() if t == "OutOfMemoryError")
    cpu = _single_threaded(run, ops, "cpu", skip=set(ooms), drop_after=set(hpu[1]), compiled=compiled)
    fails = compare(ops, hpu, cpu)
    return dict(ops=len(ops), ooms=len(ooms), oom_ops=ooms, reads=len(cpu[0]),
                secs=round(time.perf_counter() - t0, 3), fails=fails[:8], nfails=len(fails))


def to_source(ops, oom_ops=()):
    """A stand-alone script: the statements on hpu and on the CPU, and a
    comparison of every read (for bug reports)."""
    lines = ["import torch, habana_torch, habana_torch.core as htcore", "", "def prog(dev):",
             "    hpu = dev == 'hpu'",
             "    empty_cache = torch.hpu.empty_cache if hpu else (lambda: None)",
             "    synchronize = torch.hpu.synchronize if hpu else (lambda: None)",
             "    mark_step = htcore.mark_step if hpu else (lambda: None)",
             "    out = {}",
             "    def R(k, v): out[k] = v.to('cpu', copy=True) if isinstance(v, torch.Tensor) else v"]
    for i, op in enumerate(ops):
        if i in oom_ops:
            lines += ["    try:", f"        {op['code']}  # out of memory on hpu",
                      "    except torch.OutOfMemoryError:", "        pass"]
        else:
            lines.append(f"    {op['code']}")
    lines += ["    return out", "", "h, c = prog('hpu'), prog('cpu')", "for k in c:",
              "    same = torch.equal(h[k], c[k]) if isinstance(c[k], torch.Tensor) else h[k] == c[k]",
              "    d = (h[k].double() - c[k].double()).abs().max().item() if isinstance(c[k], torch.Tensor) else abs(h[k] - c[k])",
              "    print(k, 'same' if same else f'DIFFERENT (max abs diff {d})')"]
    return "\n".join(lines) + "\n"


def parse_bytes(text):
    text = str(text).strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(float(text.rstrip("KMG")) * mult)


# ---- the worker process and its driver ----

def _worker(spec):
    card = spec["card_bytes"]
    import faulthandler
    import habana_torch  # fail early, outside any program
    for p in spec["programs"]:
        # Each program starts on an empty card with no recorded work and an
        # empty recipe cache, so that it fails or passes the same way on
        # its own (as a reproducer).
        torch.hpu.synchronize()
        torch.hpu.empty_cache()
        habana_torch._C._recipe_cache_clear()
        print(json.dumps({"start": p["seed"], "profile": p["profile"]}), flush=True)
        # If the program hangs, where: every thread's stack on stderr (the
        # statements' frames are named "<op N>").
        faulthandler.dump_traceback_later(spec["timeout"] * 0.75)
        time.sleep(p.get("stall", 0))  # the harness's own test: a program that hangs
        ops = generate(p["seed"], p["profile"], card, p.get("exclude", ()))
        res = run_and_compare(ops, p.get("keep"))
        faulthandler.cancel_dump_traceback_later()
        res.update(seed=p["seed"], profile=p["profile"])
        print(json.dumps(res), flush=True)


def _hung_at(stderr):
    """The statement a hung worker was in, from its stack dump (the frame
    of a "<op N>", else the innermost frame of the last thread dumped)."""
    lines = stderr.splitlines()
    ops = [line.strip() for line in lines if '"<op ' in line]
    if ops:
        return ops[-1]
    heads = [i for i, line in enumerate(lines) if line.startswith(("Current thread", "Thread"))]
    return lines[heads[-1] + 1].strip() if heads and heads[-1] + 1 < len(lines) else ""


class _Lines:
    """Lines from a pipe, with a timeout (select on the descriptor itself:
    a buffered reader could hold a line select does not see)."""

    def __init__(self, fd):
        self.fd, self.buf = fd, b""

    def get(self, timeout):
        """The next line, "" at end of file, None on timeout."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return ""
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()


def run_batch(programs, card_memory, timeout=60.0, max_hangs=3, env=None, on_result=None):
    """Runs programs ([{"seed", "profile", "exclude"?, "keep"?}]) in worker
    processes on a card of card_memory (e.g. "16M"), one at a time, each
    under timeout seconds. Returns one result per program: run_and_compare's
    dict, or {"hang": True} / {"crash": exit status, "stderr": tail}; after
    max_hangs hangs the rest get {"not_run": True}."""
    full_env = dict(os.environ, HPU_CARD_MEMORY=str(card_memory))
    full_env.update(env or {})
    spec_base = {"card_bytes": parse_bytes(card_memory), "timeout": timeout}
    results, todo, hangs = [], list(programs), 0

    def record(res):
        results.append(res)
        if on_result:
            on_result(res)
    while todo:
        if hangs >= max_hangs:
            for p in todo:
                record(dict(p, not_run=True))
            break
        spec = dict(spec_base, programs=todo)
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", json.dumps(spec)],
                                    env=full_env, stdout=subprocess.PIPE, stderr=err)
            lines = _Lines(proc.stdout.fileno())
            done, started, outcome = 0, False, None
            wait = timeout + 30  # the worker's start-up (imports) too
            while outcome is None:
                line = lines.get(wait)
                if line is None:
                    outcome = "hang" if started else "hang at start-up"
                elif line == "":
                    outcome = "done" if proc.wait() == 0 and done == len(todo) else "crash"
                else:
                    msg = json.loads(line)
                    if "start" in msg:
                        started, wait = True, timeout
                        continue
                    record(dict(todo[done], **msg))
                    done, started = done + 1, False
            if outcome.startswith("hang"):
                proc.kill()
            proc.wait()
            proc.stdout.close()
            err.seek(0)
            stderr = err.read().decode(errors="replace")[-3000:]
        if outcome == "done":
            break
        if done < len(todo):
            if outcome.startswith("hang"):
                hangs += 1
                record(dict(todo[done], hang=True, secs=timeout, at=_hung_at(stderr)))
            else:
                record(dict(todo[done], crash=proc.returncode, stderr=stderr))
            done += 1
        todo = todo[done:]
    return results


def describe(res):
    """One line for a failed result, or None if it passed."""
    name = f"{res['profile']}:{res['seed']}"
    if res.get("hang"):
        return f"{name}: HANG (no result within {res['secs']} s; {res.get('at') or 'stack unknown'})"
    if res.get("not_run"):
        return f"{name}: not run (too many hangs before it)"
    if "crash" in res:
        return f"{name}: CRASH (exit {res['crash']}): {res['stderr'][-600:]}"
    if res["nfails"]:
        return f"{name}: {res['nfails']} failure(s): " + " | ".join(res["fails"][:3])
    return None


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        _worker(json.loads(sys.argv[2]))
    elif len(sys.argv) >= 3 and sys.argv[1] == "--source":
        # pressure_programs.py --source PROFILE:SEED [CARD]: print a program as a script
        prof, seed = sys.argv[2].split(":")
        card = parse_bytes(sys.argv[3]) if len(sys.argv) > 3 else 32 << 20
        print(to_source(generate(int(seed), prof, card)))
    else:
        sys.exit("usage: pressure_programs.py --worker SPEC | --source PROFILE:SEED [CARD]")
