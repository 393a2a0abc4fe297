#!/usr/bin/env python3
"""Soak test: many random op programs on a small card, each against the CPU.

The programs come from tests/python/pressure_programs.py (the generator the
memory-pressure tests use): elementwise ops, reductions, matmul, views at
offsets and overlapping, in-place ops on views, frees, empty_cache,
synchronize, mark_step, reads, allocations past the card. Each program runs
under a timeout in a worker process; a hang or a crash is counted against
the program and a fresh worker carries on. The mode is PT_HPU_LAZY_MODE's.

    python3 scripts/soak_memory_pressure.py --programs 5000 --seed 0 --card-memory 8M,16M,32M
    python3 scripts/soak_memory_pressure.py --shrink mixed:123 --card-memory 16M

--shrink drops statements of one failing program while it still fails the
same way (each try in a fresh process) and prints the smallest as a script.
Exits 1 if any program failed.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import pressure_programs as pp  # noqa: E402


def symptom(res):
    """What kind of failure a result is (None: it passed)."""
    if res.get("hang"):
        return "hang"
    if "crash" in res:
        return "crash"
    if res.get("not_run") or not res.get("nfails"):
        return None
    first = res["fails"][0]
    return "wrong values" if first.startswith("read") else "exception"


def soak(args):
    cards = args.card_memory.split(",")
    profiles = args.profiles.split(",")
    exclude = [e for e in args.exclude.split(",") if e]
    totals = dict(programs=0, ops=0, ooms=0, failed=0, hangs=0, crashes=0)
    failures = []
    t0 = time.monotonic()

    def on_result(res):
        totals["programs"] += 1
        totals["ops"] += res.get("ops", 0)
        totals["ooms"] += res.get("ooms", 0)
        s = symptom(res)
        if s:
            totals["failed"] += 1
            totals["hangs"] += s == "hang"
            totals["crashes"] += s == "crash"
            failures.append((res, s))
            print(f"FAIL [{res['card']}] {pp.describe(res)}", flush=True)

    seed, left, n_batch = args.seed, args.programs, 0
    while left > 0:
        card = cards[n_batch % len(cards)]
        count = min(args.batch, left)
        progs = [dict(seed=seed + i, profile=profiles[(seed + i) % len(profiles)], exclude=exclude,
                      card=card) for i in range(count)]
        pp.run_batch(progs, card, timeout=args.timeout, max_hangs=10 ** 9, on_result=on_result)
        seed, left, n_batch = seed + count, left - count, n_batch + 1
        el = time.monotonic() - t0
        print(f"[{totals['programs']}/{args.programs}] {el:.0f} s: {totals['ops']} ops, "
              f"{totals['ooms']} OOMs survived, {totals['failed']} failed "
              f"({totals['hangs']} hangs, {totals['crashes']} crashes)", flush=True)
    el = time.monotonic() - t0
    mode = "lazy" if os.environ.get("PT_HPU_LAZY_MODE", "1") != "0" else "eager"
    wrong = sum(1 for _, s in failures if s == "wrong values")
    exc = sum(1 for _, s in failures if s == "exception")
    print(f"\nsummary ({mode} mode, cards {args.card_memory}, profiles {args.profiles}"
          f"{', without ' + args.exclude if args.exclude else ''}):")
    print(f"  programs {totals['programs']}, ops {totals['ops']}, OOMs survived {totals['ooms']}, "
          f"mismatches {wrong}, wrong exceptions {exc}, hangs {totals['hangs']}, "
          f"crashes {totals['crashes']}, time {el:.0f} s")
    if failures:
        print("  failed (shrink one with the arguments shown):")
    for res, s in failures:
        print(f"  {s}: --shrink {res['profile']}:{res['seed']} --card-memory {res['card']}"
              + (f" --exclude {args.exclude}" if args.exclude else ""))
    return 1 if failures else 0


def shrink(args):
    prof, seed = args.shrink.split(":")
    seed = int(seed)
    card = args.card_memory.split(",")[0]
    exclude = [e for e in args.exclude.split(",") if e]
    ops = pp.generate(seed, prof, pp.parse_bytes(card), exclude)
    base = dict(seed=seed, profile=prof, exclude=exclude)

    def attempt(keep):
        res = pp.run_batch([dict(base, keep=keep)], card, timeout=args.timeout, max_hangs=1)[0]
        return res, symptom(res)

    res, want = attempt(list(range(len(ops))))
    if not want:
        print(f"{args.shrink} passes on a {card} card: nothing to shrink")
        return 0
    print(f"{args.shrink}: {want}: {pp.describe(res)}", flush=True)
    keep = list(range(len(ops)))
    if want != "hang" and res.get("fails", [""])[0].startswith("read"):
        # nothing after the first wrong read matters
        last = int(res["fails"][0].split()[1])
        keep = [i for i in keep if i <= last]
    chunk = max(1, len(keep) // 2)
    tries = 0
    while True:
        i = 0
        while i < len(keep):
            cand = keep[:i] + keep[i + chunk:]
            tries += 1
            r, s = attempt(cand)
            if s == want:
                keep, res = cand, r
                print(f"  {len(keep)} statements still fail ({tries} tries)", flush=True)
            else:
                i += chunk
        if chunk == 1:
            break
        chunk = max(1, chunk // 2)
    kept = [ops[i] for i in keep]
    print(f"\nsmallest ({len(kept)} statements, {tries} tries, card {card}): {pp.describe(res)}\n")
    print(pp.to_source(kept, set(res.get("oom_ops", ()))))
    return 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0, help="the first program's seed (then +1 each)")
    ap.add_argument("--card-memory", default="8M,16M,32M",
                    help="HPU_CARD_MEMORY, one per batch in turn (comma-separated)")
    ap.add_argument("--profiles", default=",".join(pp.PROFILES), help="profiles, one per program in turn")
    ap.add_argument("--exclude", default="", help="statement kinds to leave out, e.g. empty_cache")
    ap.add_argument("--batch", type=int, default=50, help="programs per worker process")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds one program may take")
    ap.add_argument("--shrink", metavar="PROFILE:SEED", help="shrink this failing program")
    args = ap.parse_args()
    return shrink(args) if args.shrink else soak(args)


if __name__ == "__main__":
    sys.exit(main())
