"""The `habana-torch-plugin` compatibility marker of habana_torch.

Libraries built for Gaudi (optimum-habana, ...) read the installed version of
the `habana-torch-plugin` distribution to learn which Intel Gaudi release the
hpu answers for; optimum-habana cannot even be imported without one. This
distribution holds no code: its version is habana_torch's GAUDI_API_VERSION
(python/habana_torch/version.py), read here so the two never disagree. It is
not Intel's plugin, and its metadata says so.

Built without isolation from a checkout (the version is read from the tree
beside it): pip install --no-build-isolation --no-deps python/compat/habana_torch_plugin
"""
import ast
import os

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
VERSION_PY = os.path.join(HERE, "..", "..", "habana_torch", "version.py")


def _constant(path, name):
    """The string assigned to `name` in `path`, read without importing
    habana_torch (that would need its C extension and torch)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise RuntimeError(f"{path} does not assign {name}")


GAUDI_API_VERSION = _constant(VERSION_PY, "GAUDI_API_VERSION")
HABANA_TORCH_VERSION = _constant(VERSION_PY, "__version__")

setup(
    name="habana-torch-plugin",
    version=GAUDI_API_VERSION,
    description=(f"habana_torch {HABANA_TORCH_VERSION}'s compatibility marker: declares that habana_torch answers "
                 f"for the public API of Intel Gaudi's PyTorch release {GAUDI_API_VERSION}. Not Intel's "
                 "habana-torch-plugin; contains no code."),
    long_description=__doc__,
    long_description_content_type="text/plain",
    py_modules=[],
    packages=[],
    python_requires=">=3.10",
)
