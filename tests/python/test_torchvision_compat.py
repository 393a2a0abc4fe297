"""`import torchvision` when its compiled operators cannot load (PyPI's wheel
is built for the CUDA torch): habana_torch declares the two operator schemas
torchvision registers fake kernels for unconditionally, so the import works.
Checked with a stand-in package that does what torchvision 0.28 does at
import (the real wheel is exercised in tests/pinned/test_torchvision.py)."""
import textwrap

import pytest

from conftest import run_python

# torchvision/__init__.py's start, reduced: its extension loader swallows the
# failed load; its meta registrations do not check for it.
INIT = textwrap.dedent('''
    import torch
    try:
        torch.ops.load_library(__path__[0] + "/_C.so")
        _HAS_OPS = True
    except (ImportError, OSError):
        _HAS_OPS = False

    @torch.library.register_fake("torchvision::nms")
    def meta_nms(dets, scores, iou_threshold):
        return dets.new_empty(0, dtype=torch.long)

    @torch.library.register_fake("torchvision::qnms")
    def meta_qnms(dets, scores, iou_threshold):
        return dets.new_empty(0, dtype=torch.long)

    def nms(boxes, scores, iou_threshold):
        if not _HAS_OPS:
            raise RuntimeError("Couldn't load custom C++ ops")
        return torch.ops.torchvision.nms(boxes, scores, iou_threshold)
''')


@pytest.fixture
def fake_torchvision(tmp_path):
    pkg = tmp_path / "torchvision"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(INIT)
    (pkg / "_C.so").write_bytes(b"not a shared library: like a CUDA build's, it does not load here")
    return str(tmp_path)


@pytest.mark.parametrize("imports", ["import torch, torchvision", "import torchvision",
                                     "import habana_torch, torchvision", "import torchvision, habana_torch"])
def test_import_works_in_any_order_and_the_compiled_ops_raise_torchvisions_error(fake_torchvision, imports):
    run = run_python(f"""
        import sys, warnings
        sys.path.insert(0, {fake_torchvision!r})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            {imports}
        import torch, torchvision
        assert not torchvision._HAS_OPS
        assert any("torchvision's compiled operators do not load" in str(w.message) for w in caught)
        try:
            torchvision.nms(torch.rand(3, 4), torch.rand(3), 0.5)
        except RuntimeError as e:
            assert "Couldn't load custom C++ ops" in str(e), e
        else:
            raise AssertionError("nms ran")
        x = torch.randn(4, device="hpu")  # habana_torch itself unaffected
        assert torch.equal((x * 2).cpu(), x.cpu() * 2)
        print("OK")
    """)
    assert run.returncode == 0 and "OK" in run.stdout, run.stderr[-3000:]


def test_without_the_declarations_the_stand_in_fails_to_import(fake_torchvision):
    """The stand-in reproduces the failure the compatibility step exists for."""
    run = run_python(f"""
        import sys
        sys.path.insert(0, {fake_torchvision!r})
        import torch
        import habana_torch._torchvision_compat as compat
        compat._SCHEMAS = ()  # declare nothing
        import torchvision
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"})
    assert run.returncode != 0
    assert "torchvision::nms" in run.stderr, run.stderr[-2000:]
