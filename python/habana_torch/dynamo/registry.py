"""Makes ``hpu_backend`` a name dynamo knows, without importing dynamo.

Importing torch._dynamo takes seconds, and habana_torch is imported with
every ``import torch`` (the device-backend autoload), so the name is added
to dynamo's registry of entry points at the moment that registry module is
imported (a finder on sys.meta_path), or at once if it already was. Dynamo
resolves the entry point, habana_torch.dynamo.backend, on first use. An
installed habana_torch also declares the same entry point in its metadata
(setup.py); both name the same function."""
import importlib.abc
import importlib.machinery
import sys

NAME = "hpu_backend"
TARGET = "habana_torch.dynamo.backend:hpu_backend"
_REGISTRY = "torch._dynamo.backends.registry"


def _add(registry):
    from importlib.metadata import EntryPoint

    if NAME not in registry._BACKENDS:
        registry._BACKENDS[NAME] = EntryPoint(name=NAME, value=TARGET, group="torch_dynamo_backends")


class _Loader(importlib.abc.Loader):
    """The registry's own loader, plus _add once the module has run."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _add(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != _REGISTRY:
            return None
        sys.meta_path.remove(self)  # one use; the lookup below must not find us again
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Loader(spec.loader)
        return spec


def install():
    registry = sys.modules.get(_REGISTRY)
    if registry is not None:
        _add(registry)
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
