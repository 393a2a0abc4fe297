"""Which ops of PyTorch's OpInfo database (op_db) run through the CPU
fallback on hpu.

Every op's first samples (float32, bfloat16, float16, float64, int64, int32,
uint8, bool, where the CPU takes them) run on hpu, and the fallback counter
(habana_torch.metrics.cpu_fallback_counts) says which aten ops went to the
CPU. Prints one line per op that fell back, naming those aten ops, then the
share of op_db. Ops hpu refuses with a clear error (complex, uint64, sparse,
CUDA-only jiterator ops) are counted apart: they neither run on the card nor
fall back.

    python scripts/fallback_census.py [--samples 3] [--match REGEX] [--json OUT]
"""
import argparse
import itertools
import json
import re
import sys
import warnings

import torch
import habana_torch  # noqa: F401  (registers the device)
from habana_torch.metrics import cpu_fallback_counts
from torch.testing._internal.common_methods_invocations import op_db

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32, torch.uint8,
          torch.bool]
REFUSED = ("hpu does not support dtype", "new_compressed_tensor", "SparseHPU", "Jiterator", "view_as_complex")


def name_of(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def to_hpu(x):
    if isinstance(x, torch.Tensor):
        return x.to("hpu")
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(to_hpu(y) for y in x)
    if isinstance(x, dict):
        return {k: to_hpu(v) for k, v in x.items()}
    return x


def run_op(op, n):
    """(aten ops that fell back, whether hpu refused every sample it got)"""
    before = cpu_fallback_counts()
    ran = refused = 0
    for dtype in DTYPES:
        if dtype not in op.supported_dtypes("cpu"):
            continue
        torch.manual_seed(0)
        try:
            samples = list(itertools.islice(op.sample_inputs_func(op, "cpu", dtype, False), n))
        except Exception:  # noqa: BLE001 - a generator that needs what this build lacks
            continue
        for s in samples:
            try:
                op(s.input, *s.args, **s.kwargs)
            except Exception:  # noqa: BLE001 - the CPU refuses it: nothing to place
                continue
            try:
                op(to_hpu(s.input), *to_hpu(s.args), **to_hpu(s.kwargs))
                torch.hpu.synchronize()
                ran += 1
            except Exception as e:  # noqa: BLE001
                if any(r in str(e) for r in REFUSED):
                    refused += 1
    after = cpu_fallback_counts()
    if refused > 0 and ran == 0:
        # refused outright, even where the fallback ran first and its
        # result (complex, sparse) could not come back to the card
        return [], True
    return sorted(k for k in after if after[k] != before.get(k, 0)), False


def census(samples=3, match=None, report=None):
    """({op name: [aten ops that fell back]}, [ops refused outright], number
    of ops placed on hpu: op_db less the refused ones)."""
    pat = re.compile(match) if match else None
    fell, refused, total = {}, [], 0
    for op in op_db:
        name = name_of(op)
        if pat and not pat.search(name):
            continue
        total += 1
        aten, all_refused = run_op(op, samples)
        if aten:
            fell[name] = aten
            if report:
                report(f"{name}: {', '.join(aten)}")
        elif all_refused:
            refused.append(name)
    return fell, refused, total - len(refused)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=3, help="samples per op and dtype (default 3)")
    p.add_argument("--match", default=None, help="only ops whose name matches this regular expression")
    p.add_argument("--json", default=None, help="also write {op: [aten ops]} of the ops that fell back here")
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    fell, refused, placed = census(args.samples, args.match, report=lambda line: print(line, flush=True))
    print(f"\n{len(fell)} of {placed} ops fall back ({100.0 * len(fell) / max(placed, 1):.1f}%); "
          f"{len(refused)} more are refused with a clear error (complex, uint64, sparse, CUDA-only)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(fell, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
