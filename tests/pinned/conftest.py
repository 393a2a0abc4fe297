"""Runs code in the pinned environments that scripts/pinned_envs.sh makes
($HPU_PINNED_ENVS/<name>, by default ~/.cache/habana_torch/pinned-envs/<name>).

Each library runs in a subprocess with the venv's python, its bin first on
PATH (optimum-habana runs `pip list` / `pip show` to read the installed
habana-torch-plugin) and, when no `hl-smi` is installed, a temporary one that
prints what habana_torch's `hl-smi` prints (lightning-habana reads the
release from `hl-smi -v`). The venv uses the habana_torch this test process
imported: the installed one through its system site-packages, or the
checkout's python/ directory through PYTHONPATH.
"""
import json
import os
import shutil
import stat
import subprocess

import pytest

import habana_torch
from habana_torch.version import GAUDI_API_VERSION, __version__

HERE = os.path.dirname(os.path.abspath(__file__))
ENVS_DIR = os.environ.get("HPU_PINNED_ENVS") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "habana_torch", "pinned-envs")

# The lines of habana_torch's `hl-smi` that libraries parse: `-v`, and line
# index 2 of the default table (the driver line).
_HL_SMI = f"""#!/bin/sh
if [ "$1" = "-v" ]; then echo "| HL-SMI Version: hl-{GAUDI_API_VERSION}-habana_torch-{__version__} |"; exit 0; fi
echo "+------------------------------------------------+"
echo "| HL-SMI Version: hl-{GAUDI_API_VERSION}-habana_torch-{__version__} |"
echo "| Driver Version: {GAUDI_API_VERSION}-habana_torch |"
"""


def venv_python(name):
    py = os.path.join(ENVS_DIR, name, "bin", "python")
    if not os.path.exists(os.path.join(ENVS_DIR, name, ".pinned")):
        pytest.skip(f"pinned environment {name!r} not built: run scripts/pinned_envs.sh {name}")
    return py


@pytest.fixture(scope="session")
def hl_smi_dir(tmp_path_factory):
    """A directory to put first on PATH: empty when an hl-smi is installed,
    else holding a temporary one."""
    d = tmp_path_factory.mktemp("hl-smi")
    if shutil.which("hl-smi") is None:
        path = d / "hl-smi"
        path.write_text(_HL_SMI)
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(d)


def run_in_venv(name, hl_smi_dir, args, env=None, timeout=600):
    """Runs `python <args>` in pinned env `name` from tests/pinned; returns the
    CompletedProcess (stdout and stderr captured)."""
    py = venv_python(name)
    full = dict(os.environ)
    full["PATH"] = os.pathsep.join([hl_smi_dir, os.path.dirname(py), full.get("PATH", "")])
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(habana_torch.__file__)))
    if os.path.basename(pkg_parent) != "site-packages":
        full["PYTHONPATH"] = os.pathsep.join([pkg_parent, HERE])
    else:
        full["PYTHONPATH"] = HERE
    full.update(env or {})
    return subprocess.run([py, *args], cwd=HERE, env=full, capture_output=True, text=True, timeout=timeout)


def result_of(proc, what):
    """The JSON a worker printed on its last `RESULT ` line; fails with the
    worker's output otherwise."""
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        pytest.fail(f"{what} failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}")
    return json.loads(lines[-1][len("RESULT "):])
