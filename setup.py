"""Builds habana_torch: the C core, HCCL and the PyTorch shim through CMake.

Install against the torch already in the environment (torch==2.13.0, CPU):
    pip install --no-build-isolation .
HPU_BUILD_JOBS sets the parallel build jobs (default: all cores).
"""
import os
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        out_dir = os.path.abspath(os.path.dirname(self.get_ext_fullpath(ext.name)))
        build_dir = os.path.abspath(os.path.join(self.build_temp, "cmake"))
        os.makedirs(build_dir, exist_ok=True)
        src = os.path.dirname(os.path.abspath(__file__))
        cfg = [
            "cmake", "-S", src, "-B", build_dir,
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={out_dir}",
            "-DCMAKE_BUILD_TYPE=Release",
            "-DHPU_BUILD_EXTENSION=ON",
        ]
        jobs = os.environ.get("HPU_BUILD_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(cfg)
        subprocess.check_call(["cmake", "--build", build_dir, "-j", jobs, "--target", "habana_torch_C"])
        # the default mixed-precision op lists (hmp/*.txt) ship inside the package
        lists_dir = os.path.join(out_dir, "hpex", "hmp", "lists")
        os.makedirs(lists_dir, exist_ok=True)
        for name in os.listdir(os.path.join(src, "hmp")):
            if name.endswith(".txt"):
                with open(os.path.join(src, "hmp", name), "rb") as f_in, \
                        open(os.path.join(lists_dir, name), "wb") as f_out:
                    f_out.write(f_in.read())


setup(
    name="habana_torch",
    version="0.1.0",
    description="The Gaudi (HPU) software stack for PyTorch, running on the CPU",
    package_dir={"": "python"},
    packages=find_packages("python"),
    ext_modules=[CMakeExtension("habana_torch._C")],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.10",
    # `import torch` loads habana_torch first (PyTorch's device-backend
    # autoload), before anything can ask PyTorch for its accelerator:
    # PyTorch reads the HPU hooks once and keeps what it found.
    # torch.compile(backend="hpu_backend"): dynamo's registry of backends
    # (habana_torch.dynamo.registry also adds it when the package is not
    # installed, e.g. run from a source tree).
    entry_points={
        "torch.backends": ["habana_torch = habana_torch._autoload:load"],
        "torch_dynamo_backends": ["hpu_backend = habana_torch.dynamo.backend:hpu_backend"],
        # hl-smi as on Gaudi, hpu-smi for those who look for it by device name
        "console_scripts": ["hl-smi = habana_smi.cli:main", "hpu-smi = habana_smi.cli:main"],
    },
    install_requires=["torch==2.13.0"],
    extras_require={"exporter": ["prometheus_client"]},  # python -m habana_torch.exporter
)
