"""Mixed precision on the hpu: the op lists behind torch.autocast("hpu") and HMP.

Both run on one mechanism, the C++ kernel at the AutocastHPU dispatch key
(backend/hpu_autocast.cpp). It casts the floating hpu arguments of each
listed op once, by the op's list:

- lower precision list: cast to the autocast dtype (bf16 by default);
- fp32 list: cast to float32;
- promote list: cast to the widest floating dtype among the arguments.

Ops in no list run in their input dtypes. The default lists are the text
files in ``hmp/`` (``lower_precision_ops.txt``, ``fp32_ops.txt``,
``promote_ops.txt``); ``PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST``,
``PT_HPU_AUTOCAST_FP32_OPS_LIST`` (and ``PT_HPU_AUTOCAST_PROMOTE_OPS_LIST``)
name files that replace them for ``torch.autocast("hpu")``. They are read
when habana_torch is imported (with ``import torch``), and read again when
``habana_frameworks.torch.core`` is first imported if they changed in
between: scripts (optimum-habana's GaudiConfig) set them after ``import
torch`` and before that import, which is when Gaudi reads them.

HMP (the legacy Gaudi API)::

    from habana_torch.hpex import hmp
    hmp.convert(opt_level="O1", bf16_file_path="", fp32_file_path="", isVerbose=False)
    with hmp.disable_casts():
        ...                      # runs in the tensors' own dtypes

``convert`` switches bf16 casting on for the calling thread (autocast state
is per thread, as in PyTorch: call it in each thread that runs the model);
``disable_casts`` switches it off for the calling thread only.
"""
import contextlib
import os
import threading

import torch

from ... import _C

__all__ = ["convert", "disable_casts", "is_converted", "default_list_paths", "lists"]

ENV_LOWER = "PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST"
ENV_FP32 = "PT_HPU_AUTOCAST_FP32_OPS_LIST"
ENV_PROMOTE = "PT_HPU_AUTOCAST_PROMOTE_OPS_LIST"

# Policy and table numbers shared with backend/hpu_autocast.cpp.
_LOWER, _FP32, _PROMOTE, _LOWER_FP32_OUT = 1, 2, 3, 4
_AUTOCAST, _HMP = 0, 1

_LIST_FILES = {
    "lower": "lower_precision_ops.txt",
    "fp32": "fp32_ops.txt",
    "promote": "promote_ops.txt",
}

_lock = threading.Lock()


def _default_dir():
    """The directory holding the default lists: shipped inside the package
    (pip install copies hmp/*.txt there), else the source tree's hmp/."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lists")
    if os.path.isfile(os.path.join(here, _LIST_FILES["lower"])):
        return here
    src = _C._amp_source_hmp_dir()
    if os.path.isfile(os.path.join(src, _LIST_FILES["lower"])):
        return src
    raise FileNotFoundError(
        f"habana_torch: the default autocast op lists are missing (looked in {here} and {src}); "
        f"reinstall the package, or name your own lists with {ENV_LOWER} and {ENV_FP32}")


def default_list_paths():
    """{"lower": path, "fp32": path, "promote": path} of the default lists."""
    d = _default_dir()
    return {k: os.path.join(d, f) for k, f in _LIST_FILES.items()}


def _env_path(name):
    value = os.environ.get(name, "").strip()
    return value or None


_loaded_env = None  # the three variables' values the loaded lists came from


def _current_env():
    return (_env_path(ENV_LOWER), _env_path(ENV_FP32), _env_path(ENV_PROMOTE))


def _load_autocast_lists():
    """Loads the lists torch.autocast("hpu") uses: the defaults, each replaced
    by the file its environment variable names."""
    global _loaded_env
    env = _current_env()
    defaults = default_list_paths()
    chosen = [(env[0], defaults["lower"], _LOWER),
              (env[1], defaults["fp32"], _FP32),
              (env[2], defaults["promote"], _PROMOTE)]
    with _lock:
        _C._amp_load(_AUTOCAST, [user or default for user, default, _ in chosen],
                     [policy for _, _, policy in chosen], [user is not None for user, _, _ in chosen])
        _loaded_env = env


def _reload_autocast_lists_if_env_changed():
    """Loads the lists again when PT_HPU_AUTOCAST_*_OPS_LIST changed since
    they were loaded. Returns True when it reloaded."""
    if _current_env() == _loaded_env:
        return False
    _load_autocast_lists()
    return True


def lists(hmp=False):
    """The loaded policies: {"op" or "op.overload": "lower_precision" | "fp32" |
    "promote" | "lower_precision_fp32_out"} for torch.autocast("hpu") (default)
    or for HMP (hmp=True)."""
    return _C._amp_policies(_HMP if hmp else _AUTOCAST)


def convert(opt_level="O2", bf16_file_path="", fp32_file_path="", isVerbose=False):
    """Turns on bf16 mixed precision for the hpu in this thread (Gaudi's HMP).

    opt_level "O1": ops in the bf16 list run in bf16, ops in the fp32 list in
    fp32, mixed-input ops (promote list) in the widest dtype, the rest in
    their input dtypes. "O2": only the bf16 list (the matmul family by
    default) runs in bf16, and its results are returned in fp32, so every
    other op runs in fp32. bf16_file_path / fp32_file_path replace the
    default lists; isVerbose prints each cast as it happens.
    """
    if opt_level not in ("O1", "O2"):
        raise ValueError(f"hmp.convert: opt_level must be 'O1' or 'O2', not {opt_level!r}")
    for arg, value in (("bf16_file_path", bf16_file_path), ("fp32_file_path", fp32_file_path)):
        if not isinstance(value, (str, os.PathLike)):
            raise TypeError(f"hmp.convert: {arg} must be a path (str), not {type(value).__name__}")
    bf16_file_path, fp32_file_path = os.fspath(bf16_file_path), os.fspath(fp32_file_path)
    defaults = default_list_paths()
    if opt_level == "O1":
        chosen = [(bf16_file_path, defaults["lower"], _LOWER),
                  (fp32_file_path, defaults["fp32"], _FP32),
                  ("", defaults["promote"], _PROMOTE)]
    else:
        chosen = [(bf16_file_path, defaults["lower"], _LOWER_FP32_OUT)]
        if fp32_file_path:
            chosen.append((fp32_file_path, "", _FP32))
    with _lock:
        _C._amp_load(_HMP, [user or default for user, default, _ in chosen],
                     [policy for _, _, policy in chosen], [bool(user) for user, _, _ in chosen])
    _C._hmp_set_verbose(bool(isVerbose))
    _C._hmp_set_thread(True)
    torch.set_autocast_enabled("hpu", True)


def is_converted():
    """True when hmp.convert() switched HMP on in this thread (and casts are
    not disabled here)."""
    return _C._hmp_thread_enabled() and torch.is_autocast_enabled("hpu")


@contextlib.contextmanager
def disable_casts():
    """Runs the block without mixed-precision casts (HMP or torch.autocast)
    in this thread: ops see the dtypes of their tensors."""
    prev = torch.is_autocast_enabled("hpu")
    torch.set_autocast_enabled("hpu", False)
    try:
        yield
    finally:
        torch.set_autocast_enabled("hpu", prev)


def _reset_thread():
    """Switches HMP off in this thread (for tests and for scripts that end
    mixed precision)."""
    _C._hmp_set_thread(False)
    torch.set_autocast_enabled("hpu", False)


_load_autocast_lists()
