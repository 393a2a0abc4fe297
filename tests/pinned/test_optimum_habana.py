"""optimum-habana 1.21.2 in its pinned env (transformers 4.55, accelerate
1.10, optimum 2.0). The runs are in optimum_worker.py, one per process.

optimum-habana imports at once: it reads the installed habana-torch-plugin
(our compatibility marker) and `hl-smi`. Its Gaudi paths, GaudiTrainer on
the hpu and the text-generation path, go through
adapt_transformers_to_gaudi(), which imports
habana_frameworks.torch.hpex.kernels.FusedSDPA (ours) and torchvision
(through its GLM-4V tokenizer) unconditionally; the env holds PyPI's
torchvision 0.28, whose import habana_torch makes work (its compiled
operators need the CUDA torch). Should that import fail, the Gaudi-path
tests skip with the error it raised.
"""
import os
import subprocess

import pytest
import torch

from conftest import result_of, run_in_venv, venv_python
from habana_torch.version import GAUDI_API_VERSION

ENV = "optimum-habana"
LAZY = os.environ.get("PT_HPU_LAZY_MODE", "1") != "0"


@pytest.fixture(scope="module")
def probe(hl_smi_dir):
    return result_of(run_in_venv(ENV, hl_smi_dir, ["optimum_worker.py", "probe"]), "optimum-habana probe")


@pytest.fixture(scope="module")
def gaudi_paths(probe):
    if probe["adapt_import_error"] is not None:
        pytest.skip("optimum-habana's adapt_transformers_to_gaudi cannot be imported: "
                    f"{probe['adapt_import_error']}")


def test_import_reads_the_compatibility_marker(probe):
    assert probe["plugin"] == GAUDI_API_VERSION
    show = subprocess.run([venv_python(ENV), "-m", "pip", "show", "habana-torch-plugin"],
                          capture_output=True, text=True, check=True).stdout
    assert f"Version: {GAUDI_API_VERSION}" in show
    assert "habana_torch" in show and "Not Intel's habana-torch-plugin" in show


def _losses_close(a, b, atol):
    torch.testing.assert_close(torch.tensor(a), torch.tensor(b), atol=atol, rtol=0)


def test_gaudi_trainer_matches_cpu(gaudi_paths, hl_smi_dir, tmp_path):
    def train(device, precision):
        proc = run_in_venv(ENV, hl_smi_dir, ["optimum_worker.py", "train", device, precision,
                                             str(tmp_path / f"{device}-{precision}")])
        return result_of(proc, f"GaudiTrainer {device} {precision}")

    hpu, cpu = train("hpu", "fp32"), train("cpu", "fp32")
    assert (hpu["args_device"], hpu["param_device"]) == ("hpu", "hpu:0")
    assert (hpu["optimizer"], hpu["clip"]) == ("FusedAdamW", "FusedClipNorm")
    assert len(hpu["losses"]) == len(cpu["losses"]) == 16
    _losses_close(hpu["losses"], cpu["losses"], atol=2e-3)  # logged to 4 decimals
    assert abs(hpu["eval_loss"] - cpu["eval_loss"]) < 1e-3
    bf16 = train("hpu", "bf16")
    assert bf16["lower_list"] and os.path.exists(bf16["lower_list"])
    _losses_close(bf16["losses"], cpu["losses"], atol=2e-2)


def test_text_generation_matches_cpu_greedy(gaudi_paths, hl_smi_dir):
    hpu = result_of(run_in_venv(ENV, hl_smi_dir, ["optimum_worker.py", "generate", "hpu"]), "generate on hpu")
    cpu = result_of(run_in_venv(ENV, hl_smi_dir, ["optimum_worker.py", "generate", "cpu"]), "generate on cpu")
    assert hpu["generation_config"] == "GaudiGenerationConfig"
    assert hpu["tokens"] == cpu["tokens"]
    if LAZY:  # the decode steps ran as HPU graphs, none fell back to plain execution
        assert hpu["hpu_graph_capture"] >= 1 and hpu["hpu_graph_replay"] >= 9, hpu
        assert hpu["hpu_graph_demoted"] == 0, hpu
