"""habana_frameworks.torch: Gaudi's import path over habana_torch, and the
pieces of torch.hpu that Gaudi scripts and libraries use (memory_stats'
Gaudi keys, the device generation, HABANA_VISIBLE_MODULES, op lists set
before habana_frameworks.torch.core is imported, FusedAdamW, FusedClipNorm)."""
import copy
import os
import textwrap

import pytest
import torch
import torch.nn as nn

import habana_torch
import habana_frameworks.torch as ht
import habana_frameworks.torch.core as htcore
import habana_frameworks.torch.hpu as hthpu
from habana_torch import _C
from conftest import run_python


def test_every_gaudi_name_imports_and_is_ours():
    import habana_frameworks.torch.distributed.hccl as hccl
    import habana_frameworks.torch.hpu.random as htrandom
    import habana_frameworks.torch.utils.experimental as htexp
    from habana_frameworks.torch.core.step_closure import _mark_step_if_lazy
    from habana_frameworks.torch.hpex import hmp
    from habana_frameworks.torch.hpex.normalization import FusedClipNorm
    from habana_frameworks.torch.hpex.optimizers import FusedAdamW
    from habana_frameworks.torch.utils.internal import is_lazy
    from habana_frameworks.torch.utils.library_loader import is_habana_available, load_habana_module

    assert hthpu is torch.hpu and ht.hpu is torch.hpu and htcore.hpu is torch.hpu
    assert hthpu.hpu is hthpu
    assert htrandom is torch.hpu.random and hthpu.random is htrandom
    import importlib
    assert importlib.import_module("torch.hpu.random") is htrandom  # one module, whichever name imports it
    assert hmp is habana_torch.hpex.hmp
    import habana_frameworks.torch.hpex.hmp as hmp2
    assert hmp2 is hmp
    for name in ("mark_step", "is_lazy", "add_step_closure", "iter_mark_step"):
        assert getattr(htcore, name) is getattr(habana_torch.core, name)
    assert is_lazy is habana_torch.core.is_lazy
    assert _mark_step_if_lazy is habana_torch.core._mark_step_if_lazy
    assert hccl.initialize_distributed_hpu is habana_torch.distributed.hccl.initialize_distributed_hpu
    assert torch.distributed.Backend.HCCL == "hccl" and "hccl" in torch.distributed.Backend.backend_list
    assert FusedAdamW is habana_torch.hpex.optimizers.FusedAdamW
    assert FusedClipNorm is habana_torch.hpex.normalization.FusedClipNorm
    assert load_habana_module() is None and is_habana_available() is True
    assert isinstance(htexp.synDeviceType.synDeviceGaudi2, htexp.synDeviceType)
    for name in ("reset_max_memory_allocated", "memory_cached", "max_memory_cached", "enable_dynamic_shape",
                 "disable_dynamic_shape", "get_dynamic_shape_status", "ModuleCacher", "wrap_in_hpu_graph"):
        assert callable(getattr(hthpu, name)), name


def test_hpex_kernels_are_ours_and_the_others_absent():
    from habana_frameworks.torch.hpex.kernels import FusedSDPA, RotaryPosEmbeddingHelperV2
    from habana_frameworks.torch.hpex.normalization import FusedRMSNorm
    assert FusedSDPA is habana_torch.hpex.kernels.FusedSDPA
    assert RotaryPosEmbeddingHelperV2 is habana_torch.hpex.kernels.RotaryPosEmbeddingHelperV2
    assert FusedRMSNorm is habana_torch.hpex.normalization.FusedRMSNorm
    # Libraries try these and fall back to plain PyTorch on ImportError.
    with pytest.raises(ImportError):
        from habana_frameworks.torch.hpex.kernels import RotaryPosEmbeddingHelperV3  # noqa: F401


def test_importing_the_package_loads_core_hpu_and_hccl():
    r = run_python("""
        import sys
        import habana_frameworks.torch
        import torch
        print(all(m in sys.modules for m in ("habana_frameworks.torch.core", "habana_frameworks.torch.hpu",
                                             "habana_frameworks.torch.distributed.hccl")),
              torch.hpu.is_available(), "hccl" in torch.distributed.Backend.backend_list)
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True", "True"]


def test_mark_step_if_lazy_flushes_in_lazy_mode_only():
    from habana_frameworks.torch.core.step_closure import _mark_step_if_lazy

    was = htcore.is_lazy()
    try:
        for lazy in (True, False):
            htcore._set_lazy_mode(lazy)
            a = torch.ones(8, device="hpu")
            b = (a + 1) * 2
            if lazy:
                assert _C._lazy_pending(0) > 0
            _mark_step_if_lazy()
            torch.hpu.synchronize()
            assert _C._lazy_pending(0) == 0
            assert b.cpu().tolist() == [4.0] * 8
    finally:
        htcore._set_lazy_mode(was)


def test_default_generators_are_the_cards_generators():
    from habana_frameworks.torch.hpu.random import default_generators

    assert len(default_generators) == torch.hpu.device_count()
    torch.hpu.manual_seed_all(1234)
    assert all(g.initial_seed() == 1234 for g in default_generators)
    assert [g.device for g in default_generators] == [torch.device("hpu", i) for i in range(len(default_generators))]
    default_generators[2].manual_seed(77)
    assert torch.hpu.random.get_rng_state(2).equal(default_generators[2].get_state())
    a = torch.randn(16, device="hpu:2", generator=default_generators[2]).cpu()
    default_generators[2].manual_seed(77)
    assert torch.equal(torch.randn(16, device="hpu:2", generator=default_generators[2]).cpu(), a)
    with pytest.raises(AttributeError, match="no_such_name"):
        torch.hpu.random.no_such_name


def test_memory_stats_gaudi_keys_follow_the_allocator():
    torch.hpu.synchronize()
    torch.hpu.reset_peak_memory_stats()
    before = torch.hpu.memory_stats()
    keys = {"Limit", "InUse", "MaxInUse", "NumAllocs", "NumFrees", "ActiveAllocs", "MaxAllocSize",
            "TotalSystemAllocs", "TotalSystemFrees", "TotalActiveAllocs"}
    assert keys <= set(before)
    assert "allocated_bytes.all.current" in before  # the CUDA-style keys stay
    assert before["Limit"] == torch.hpu.get_device_properties(0).total_memory
    assert before["InUse"] == torch.hpu.memory_allocated()
    x = torch.empty(3 << 20, device="hpu")
    y = torch.empty(5 << 20, device="hpu")
    s = torch.hpu.memory_stats()
    assert s["InUse"] == torch.hpu.memory_allocated() >= before["InUse"] + (8 << 20) * 4
    assert s["MaxInUse"] == torch.hpu.max_memory_allocated() >= s["InUse"]
    assert s["NumAllocs"] - before["NumAllocs"] >= 2 and s["ActiveAllocs"] - before["ActiveAllocs"] >= 2
    assert s["TotalActiveAllocs"] == s["ActiveAllocs"]
    assert s["MaxAllocSize"] >= (5 << 20) * 4
    del x, y
    torch.hpu.synchronize()
    after = torch.hpu.memory_stats()
    assert after["NumFrees"] - s["NumFrees"] >= 2 and after["InUse"] == before["InUse"]
    assert after["MaxInUse"] == s["MaxInUse"]
    hthpu.reset_max_memory_allocated()
    assert torch.hpu.memory_stats()["MaxInUse"] == torch.hpu.memory_allocated() < s["MaxInUse"]
    assert hthpu.memory_cached() == torch.hpu.memory_reserved()
    assert hthpu.max_memory_cached() == torch.hpu.max_memory_reserved()
    assert torch.hpu.memory_stats(3)["Limit"] == before["Limit"]


def test_dynamic_shape_switch():
    assert hthpu.get_dynamic_shape_status() is False
    hthpu.enable_dynamic_shape()
    try:
        assert hthpu.get_dynamic_shape_status() is True
        model = nn.Linear(4, 3).to("hpu")
        for n in (2, 5, 7):  # new shapes still run
            x = torch.randn(n, 4)
            torch.testing.assert_close(model(x.to("hpu")).cpu(), model.cpu()(x))
            model.to("hpu")
    finally:
        hthpu.disable_dynamic_shape()
    assert hthpu.get_dynamic_shape_status() is False


def test_module_cacher_replays_graphs_and_matches_the_plain_module():
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).eval()
    model = copy.deepcopy(ref).to("hpu")
    cached = hthpu.ModuleCacher(max_graphs=2)(model=model, inplace=False)
    assert cached is not model and model.forward.__class__.__name__ != "_GraphedForward"
    with torch.no_grad():
        for n in (3, 5, 3, 9, 3):
            x = torch.randn(n, 8)
            torch.testing.assert_close(cached(x.to("hpu")).cpu(), ref(x), rtol=1e-5, atol=1e-5)
    assert len(cached.forward.cache) == 2  # max_graphs: the oldest shapes were dropped
    cached.clear_cache()
    assert len(cached.forward.cache) == 0
    inplace = hthpu.ModuleCacher()(model, inplace=True)
    assert inplace is model
    with pytest.raises(ValueError, match="max_graphs"):
        hthpu.ModuleCacher(max_graphs=0)
    with pytest.raises(TypeError, match="torch.nn.Module"):
        hthpu.ModuleCacher()(model="not a module")


def test_device_type_default_and_consistent():
    import habana_frameworks.torch.utils.experimental as htexp

    assert torch.hpu.get_device_name() == "GAUDI2" == torch.hpu.get_device_properties(5).name
    assert htexp._get_device_type() == htexp.synDeviceType.synDeviceGaudi2
    assert htexp._is_fp16_supported() is True


@pytest.mark.parametrize("value,name,member,fp16", [
    ("GAUDI", "GAUDI", "synDeviceGaudi", False),
    ("gaudi1", "GAUDI", "synDeviceGaudi", False),
    ("GAUDI3", "GAUDI3", "synDeviceGaudi3", True),
])
def test_device_type_env(value, name, member, fp16):
    r = run_python(f"""
        import torch
        import habana_frameworks.torch.utils.experimental as htexp
        print(torch.hpu.get_device_name(), torch.hpu.get_device_properties(1).name,
              htexp._get_device_type() == htexp.synDeviceType.{member}, htexp._is_fp16_supported())
    """, env={"HPU_DEVICE_TYPE": value})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [name, name, "True", str(fp16)]


def test_bad_device_type_env_names_the_variable():
    r = run_python("import torch, habana_torch; torch.hpu.get_device_name()", env={"HPU_DEVICE_TYPE": "gaudi9"})
    assert r.returncode != 0
    assert "ValueError: invalid HPU_DEVICE_TYPE='gaudi9'" in r.stderr, r.stderr


def test_visible_modules_env():
    # What accelerate's launcher sets for --gpu_ids; it wins over HABANA_VISIBLE_DEVICES.
    code = """
        import torch, habana_torch
        print(torch.hpu.device_count(), [torch.hpu.get_device_properties(i).physical_id
                                          for i in range(torch.hpu.device_count())])
    """
    r = run_python(code, env={"HABANA_VISIBLE_MODULES": "3,1", "HPU_NUM_CARDS": "8"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "2 [3, 1]"
    r = run_python(code, env={"HABANA_VISIBLE_MODULES": "6", "HABANA_VISIBLE_DEVICES": "2,3", "HPU_NUM_CARDS": "8"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1 [6]"
    # A bad list: no card is available (as torch.cuda with a bad environment),
    # and using one says which variable is wrong.
    bad = """
        import torch, habana_torch
        print(torch.hpu.device_count())
        torch.empty(1, device="hpu")
    """
    r = run_python(bad, env={"HABANA_VISIBLE_MODULES": "0,9", "HPU_NUM_CARDS": "8"})
    assert r.stdout.strip() == "0", r.stdout
    assert r.returncode != 0 and "HABANA_VISIBLE_MODULES='0,9'" in r.stderr, r.stderr


def _lists_script(body):
    return textwrap.dedent("""
        import os
        import torch, habana_torch   # what `import torch` autoloads
        def dtypes():
            a = torch.randn(4, 4).to("hpu")
            with torch.autocast("hpu", dtype=torch.bfloat16):
                return [str(torch.relu(a).dtype), str((a @ a).dtype), str(torch.softmax(a, -1).dtype)]
    """) + textwrap.dedent(body)


def test_op_lists_set_before_core_import_take_effect(tmp_path):
    lower, fp32 = tmp_path / "lower.txt", tmp_path / "fp32.txt"
    lower.write_text("relu\nsoftmax\n")
    fp32.write_text("mm\n")
    r = run_python(_lists_script(f"""
        print(*dtypes())                     # the default lists: mm bf16, softmax fp32, relu in none
        os.environ["PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST"] = {str(lower)!r}
        os.environ["PT_HPU_AUTOCAST_FP32_OPS_LIST"] = {str(fp32)!r}
        import habana_frameworks.torch.core as htcore
        print(*dtypes())
    """), env={"PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST": "", "PT_HPU_AUTOCAST_FP32_OPS_LIST": ""})
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.strip().split("\n")
    assert first.split() == ["torch.float32", "torch.bfloat16", "torch.float32"]
    assert second.split() == ["torch.bfloat16", "torch.float32", "torch.bfloat16"]


def test_op_lists_unchanged_are_not_reread_and_bad_ones_fail_at_core_import(tmp_path):
    lower = tmp_path / "lower.txt"
    lower.write_text("relu\n")
    r = run_python(_lists_script("""
        from habana_torch.hpex import hmp
        calls = []
        load = hmp._load_autocast_lists
        hmp._load_autocast_lists = lambda: calls.append(1) or load()
        import habana_frameworks.torch.core
        print(len(calls), *dtypes())
    """), env={"PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST": str(lower)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "torch.bfloat16", "torch.float32", "torch.float32"]
    bad = tmp_path / "bad.txt"
    bad.write_text("mm\nnot_an_op\n")
    r = run_python(_lists_script(f"""
        os.environ["PT_HPU_AUTOCAST_FP32_OPS_LIST"] = {str(bad)!r}
        import habana_frameworks.torch.core
    """))
    assert r.returncode != 0
    assert f"ValueError: {bad}:2: 'not_an_op' is not a PyTorch op" in r.stderr, r.stderr


def test_initialize_distributed_hpu_arguments():
    r = run_python("""
        import os
        for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
            os.environ.pop(k, None)
        import torch
        import habana_frameworks.torch.distributed.hccl as hccl
        print(hccl.initialize_distributed_hpu(), torch.hpu.current_device())
        print(hccl.initialize_distributed_hpu(world_size=None, rank=None, local_rank=3), torch.hpu.current_device())
        try:
            hccl.initialize_distributed_hpu(local_rank="1")
        except TypeError as e:
            print("TypeError", e)
    """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().split("\n")
    assert lines[0] == "(1, 0, 0) 0"
    assert lines[1] == "(1, 0, 3) 3"
    assert lines[2] == "TypeError initialize_distributed_hpu: local_rank must be an int or None, not str"


def _small_model():
    return nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 5))


@pytest.mark.parametrize("amsgrad", [False, True])
def test_fused_adamw_matches_torch_adamw_on_the_cpu(amsgrad, fallback_counts):
    from habana_frameworks.torch.hpex.optimizers import FusedAdamW

    torch.manual_seed(0)
    cpu_model = _small_model()
    hpu_model = copy.deepcopy(cpu_model).to("hpu")
    kw = dict(lr=3e-3, betas=(0.8, 0.99), eps=1e-7, weight_decay=0.05, amsgrad=amsgrad)
    cpu_opt = torch.optim.AdamW(cpu_model.parameters(), **kw)
    hpu_opt = FusedAdamW(hpu_model.parameters(), **kw)
    assert hpu_opt.defaults["fused"] is True
    for step in range(6):
        x, y = torch.randn(16, 12), torch.randint(0, 5, (16,))
        for model, opt, dev in ((cpu_model, cpu_opt, "cpu"), (hpu_model, hpu_opt, "hpu")):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x.to(dev)), y.to(dev)).backward()
            opt.step()
            if dev == "hpu":
                htcore.mark_step()
    for p_cpu, p_hpu in zip(cpu_model.parameters(), hpu_model.parameters()):
        torch.testing.assert_close(p_hpu.cpu(), p_cpu, rtol=1e-5, atol=1e-5)
    st = hpu_opt.state[next(hpu_model.parameters())]
    assert st["exp_avg"].device.type == "hpu"
    assert ("max_exp_avg_sq" in st) == amsgrad
    assert fallback_counts() == {}


def test_fused_adamw_rejects_bad_arguments():
    from habana_frameworks.torch.hpex.optimizers import FusedAdamW

    p = [nn.Parameter(torch.zeros(3, device="hpu"))]
    with pytest.raises(ValueError, match="learning rate"):
        FusedAdamW(p, lr=-1.0)
    with pytest.raises(ValueError, match="beta"):
        FusedAdamW(p, betas=(1.5, 0.9))


@pytest.mark.parametrize("max_norm,norm_type", [(0.5, 2.0), (1e6, 2.0), (0.3, float("inf")), (0.7, 1.0)])
def test_fused_clip_norm_matches_clip_grad_norm(max_norm, norm_type, fallback_counts):
    from habana_frameworks.torch.hpex.normalization import FusedClipNorm

    torch.manual_seed(1)
    cpu_model = _small_model()
    hpu_model = copy.deepcopy(cpu_model).to("hpu")
    x, y = torch.randn(8, 12), torch.randint(0, 5, (8,))
    for model, dev in ((cpu_model, "cpu"), (hpu_model, "hpu")):
        nn.functional.cross_entropy(model(x.to(dev)), y.to(dev)).backward()
    expected = torch.nn.utils.clip_grad_norm_(cpu_model.parameters(), max_norm, norm_type)
    clipper = FusedClipNorm(hpu_model.parameters(), max_norm, norm_type)
    total = clipper.clip_norm(hpu_model.parameters())
    assert total.device.type == "hpu"
    torch.testing.assert_close(total.cpu(), expected, rtol=1e-5, atol=1e-6)
    for p_cpu, p_hpu in zip(cpu_model.parameters(), hpu_model.parameters()):
        torch.testing.assert_close(p_hpu.grad.cpu(), p_cpu.grad, rtol=1e-5, atol=1e-6)
    assert fallback_counts() == {}


def test_fused_clip_norm_rejects_bad_arguments():
    from habana_frameworks.torch.hpex.normalization import FusedClipNorm

    for bad in (0, -1.0, float("nan"), "1.0", None):
        with pytest.raises(ValueError, match="max_norm must be a positive finite number"):
            FusedClipNorm([], bad)
    with pytest.raises(ValueError, match="norm_type"):
        FusedClipNorm([], 1.0, norm_type=-2)
