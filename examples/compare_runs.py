"""Print two or more runs of examples/text_classification.py side by side.

    python examples/compare_runs.py OUT_HPU OUT_CPU [--require-no-fallbacks]

Reads each OUTPUT_DIR/all_results.json; the first run is the one the others'
speeds are compared with. Exits non-zero when --require-no-fallbacks is given
and an hpu run sent ops to the CPU.
"""
import argparse
import json
import os

ROWS = [  # (label, key, format)
    ("device", "device", "{}"),
    ("bf16", "bf16", "{}"),
    ("train samples", "train_samples", "{}"),
    ("train steps", "train_steps", "{}"),
    ("train loss", "train_loss", "{:.4f}"),
    ("eval samples", "eval_samples", "{}"),
    ("eval accuracy", "eval_accuracy", "{:.4f}"),
    ("  majority class", "eval_majority_class_accuracy", "{:.4f}"),
    ("eval F1", "eval_f1", "{:.4f}"),
    ("eval macro F1", "eval_f1_macro", "{:.4f}"),
    ("train samples/s", "train_samples_per_second", "{:.1f}"),
    ("  after 2 steps", "train_samples_per_second_after_2_steps", "{:.1f}"),
    ("eval samples/s", "eval_samples_per_second", "{:.1f}"),
    ("train time (s)", "train_runtime", "{:.1f}"),
    ("total time (s)", "total_runtime", "{:.1f}"),
    ("cpu fallbacks", "cpu_fallbacks", "{}"),
]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("output_dirs", nargs="+", help="--output_dir of each run")
    p.add_argument("--require-no-fallbacks", action="store_true", help="fail if an hpu run fell back to the CPU")
    args = p.parse_args()
    runs = []
    for d in args.output_dirs:
        path = os.path.join(d, "all_results.json")
        try:
            with open(path) as f:
                runs.append(json.load(f))
        except (OSError, json.JSONDecodeError) as e:
            raise SystemExit(f"{path}: {e}")
    names = [f"{r.get('device', '?')} x {r.get('world_size', 1)}" for r in runs]
    width = max(12, *(len(n) for n in names))
    print(f"{'':<18}" + "".join(f"{n:>{width + 2}}" for n in names))
    for label, key, fmt in ROWS:
        if any(key in r for r in runs):
            cells = [fmt.format(r[key]) if key in r else "-" for r in runs]
            print(f"{label:<18}" + "".join(f"{c:>{width + 2}}" for c in cells))
    base = runs[0]
    for name, r in zip(names[1:], runs[1:]):
        key = "train_samples_per_second_after_2_steps"
        if key not in base or key not in r:
            key = "train_samples_per_second"
        print(f"training speed: {names[0]} is {base[key] / r[key]:.1f}x {name}"
              f" ({'after the first 2 steps' if key.endswith('steps') else 'whole run'})")
    bad = [(n, r["cpu_fallback_ops"]) for n, r in zip(names, runs)
           if r.get("device") == "hpu" and r.get("cpu_fallbacks", 0)]
    for n, ops in bad:
        print(f"{n}: ops fell back to the CPU: {ops}")
    if args.require_no_fallbacks and bad:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
