"""Makes ``hpu_backend`` a name dynamo knows, without importing dynamo.

Importing torch._dynamo takes seconds, and habana_torch is imported with
every ``import torch`` (the device-backend autoload), so the name is added
to dynamo's registry of entry points at the moment that registry module is
imported (a finder on sys.meta_path), or at once if it already was. Dynamo
resolves the entry point, habana_torch.dynamo.backend, on first use. An
installed habana_torch also declares the same entry point in its metadata
(setup.py); both name the same function.

The same finder tells dynamo, when its trace rules load, to leave the card
RNG functions (torch.hpu.manual_seed, get_rng_state, set_rng_state, ...)
out of its graphs, as it does for torch.cuda's: they are not aten ops, so
a graph that traced through them would drop the seeding. A call to one of
them inside a compiled function is a graph break and runs as written."""
import importlib.abc
import importlib.machinery
import sys

NAME = "hpu_backend"
TARGET = "habana_torch.dynamo.backend:hpu_backend"
_REGISTRY = "torch._dynamo.backends.registry"
_TRACE_RULES = "torch._dynamo.trace_rules"
NOT_TRACED = "habana_torch.hpu.random"


def _add(registry):
    from importlib.metadata import EntryPoint

    if NAME not in registry._BACKENDS:
        registry._BACKENDS[NAME] = EntryPoint(name=NAME, value=TARGET, group="torch_dynamo_backends")


def _skip_rng(trace_rules):
    trace_rules.add(NOT_TRACED)


_HOOKS = {_REGISTRY: _add, _TRACE_RULES: _skip_rng}


class _Loader(importlib.abc.Loader):
    """A hooked module's own loader, plus its hook once the module has run."""

    def __init__(self, loader, hook):
        self._loader = loader
        self._hook = hook

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._hook(module)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self):
        self._pending = {name for name in _HOOKS if name not in sys.modules}

    def find_spec(self, fullname, path, target=None):
        if fullname not in self._pending:
            return None
        self._pending.discard(fullname)  # one use each; the lookup below must not find us again
        if not self._pending:
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Loader(spec.loader, _HOOKS[fullname])
        return spec


def install():
    loaded = [name for name in _HOOKS if name in sys.modules]
    for name in loaded:
        _HOOKS[name](sys.modules[name])
    if len(loaded) < len(_HOOKS) and not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
