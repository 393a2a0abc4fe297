"""The README's main job (scripts/main.sh runs examples/train_mlp.py): it
trains on hpu and on the CPU and must report the same losses and no CPU
fallback."""
import os
import pathlib
import re
import subprocess
import sys

_script = pathlib.Path(__file__).resolve().parents[2] / "examples" / "train_mlp.py"


def test_main_job_matches_cpu_without_fallbacks():
    run = subprocess.run([sys.executable, str(_script), "--steps", "12"], capture_output=True, text=True,
                         timeout=300, env=dict(os.environ))
    assert run.returncode == 0, run.stderr[-2000:]
    out = run.stdout
    diff = re.search(r"max \|loss difference\| ([0-9.e+-]+)", out)
    assert diff, out
    assert float(diff.group(1)) <= 1e-5, out
    steps = re.findall(r"^\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s", out, re.M)
    assert [int(s[0]) for s in steps][-1] == 11, out  # every 5th step and the last are printed
    assert float(steps[-1][1]) < float(steps[0][1]), out  # it trains
    assert "cpu fallbacks on hpu: 0 calls" in out, out
