"""DeepSpeed on the hpu: its accelerator auto-detection picks HPU_Accelerator
(habana_frameworks.torch.hpu imports), every public method of that class
answers what torch.hpu answers, its fused Adam (torch.ops.hpu.optimizer_adamw)
matches the formula and torch.optim.AdamW, and init_inference of a small
GPT-2 on one card gives the CPU's tokens.

ZeRO stage 1/2 over hccl and tensor-parallel inference on 2 ranks are
multi-process tests: tests/dist/deepspeed_worker.py and
tests/dist/deepspeed_inference_worker.py (run by scripts/test_dist.sh)."""
import copy
import importlib.util
import math
import os

import pytest
import torch

import habana_torch  # noqa: F401

# Not imported here: importing DeepSpeed's ops creates its accelerator, which
# switches on deterministic algorithms for the process (HPU_Accelerator.
# __init__), and a module-level import would do that at collection, for every
# test of the session (e.g. interpolate then takes PyTorch's decomposition on
# any non-CPU device and rounds uint8 differently from the CPU kernel).
if importlib.util.find_spec("deepspeed") is None:
    pytest.skip("deepspeed is not installed", allow_module_level=True)


@pytest.fixture(scope="module", autouse=True)
def _restore_process_state():
    """What DeepSpeed's accelerator changes for the whole process
    (deterministic algorithms, two environment variables) is put back for the
    tests of other modules."""
    env = dict(os.environ)
    det = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(det, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill
        os.environ.clear()
        os.environ.update(env)


@pytest.fixture(scope="module")
def accel():
    """DeepSpeed's accelerator, as DeepSpeed detects it."""
    from deepspeed.accelerator import get_accelerator

    os.environ.pop("DS_ACCELERATOR", None)
    return get_accelerator()


def test_deepspeed_detects_the_hpu(accel):
    from deepspeed.accelerator.hpu_accelerator import HPU_Accelerator

    assert isinstance(accel, HPU_Accelerator)
    assert accel.device_name() == "hpu" and accel.communication_backend_name() == "hccl"


def _checks(a, h):
    """One check per public name of HPU_Accelerator, against torch.hpu (h)."""
    x = torch.arange(6, dtype=torch.float32)

    def device_and_properties():
        assert a.device() == torch.device("hpu")
        assert a.device_count() == h.device_count() > 0
        assert a.is_available() is True and h.is_available()
        a.set_device(1)
        assert a.current_device() == h.current_device() == 1
        assert a.current_device_name() == "hpu:1"
        a.set_device(0)
        assert a.current_device() == h.current_device() == 0
        a.synchronize()

    def rng():
        a.manual_seed(123)
        assert a.initial_seed() == h.initial_seed() == 123
        first = torch.rand(4, device="hpu").cpu()
        a.manual_seed_all(123)
        assert torch.equal(torch.rand(4, device="hpu").cpu(), first)
        state = a.get_rng_state()
        assert torch.equal(state, h.get_rng_state())
        again = torch.rand(4, device="hpu").cpu()
        a.set_rng_state(state)
        assert torch.equal(torch.rand(4, device="hpu").cpu(), again)
        gen = a.default_generator(0)
        assert gen is h.random.default_generators[0] and gen.device == torch.device("hpu", 0)
        assert a.random() is torch.random

    def streams_and_events():
        assert a.Stream is h.Stream and a.Event is h.Event
        assert a.current_stream() == h.current_stream() == a.default_stream() == h.default_stream()
        s = a.Stream()
        with a.stream(s):
            assert h.current_stream() == s
            y = torch.ones(3, device="hpu") * 2
        assert h.current_stream() == h.default_stream()
        ev = a.Event()
        ev.record(s)
        ev.synchronize()
        assert torch.equal(y.cpu(), torch.full((3,), 2.0))

    def memory():
        a.empty_cache()
        a.reset_peak_memory_stats()
        a.reset_max_memory_allocated()
        assert a.reset_max_memory_cached() is None
        base = a.memory_allocated()
        assert base == h.memory_allocated()
        t = torch.empty(1 << 20, dtype=torch.uint8, device="hpu")
        assert a.memory_allocated() == h.memory_allocated() >= base + (1 << 20)
        assert a.max_memory_allocated() == h.max_memory_allocated() >= a.memory_allocated()
        assert a.memory_cached() == h.memory_cached() == a.memory_reserved() == h.memory_reserved()
        assert a.max_memory_cached() == h.max_memory_cached() == a.max_memory_reserved() == h.max_memory_reserved()
        stats = a.memory_stats()
        assert stats == h.memory_stats() and stats["InUse"] == a.memory_allocated()
        assert a.total_memory() == stats["Limit"] == h.get_device_properties(0).total_memory
        assert a.available_memory() == a.total_memory() - a.memory_allocated()
        del t

    def dtypes():
        import habana_frameworks.torch.utils.experimental as htexp

        assert a.is_bf16_supported() is True and a.is_fp64_supported() is True
        assert a.is_fp16_supported() == htexp._is_fp16_supported()
        expected = [torch.float, torch.bfloat16] + ([torch.half] if a.is_fp16_supported() else [])
        assert a.supported_dtypes() == expected

    def tensors():
        for name, dtype in [("BFloat16Tensor", torch.bfloat16), ("ByteTensor", torch.uint8),
                            ("DoubleTensor", torch.float64), ("FloatTensor", torch.float32),
                            ("HalfTensor", torch.float16), ("IntTensor", torch.int32),
                            ("LongTensor", torch.int64)]:
            t = getattr(a, name)([1, 2, 3])
            assert t.device.type == "hpu" and t.dtype == dtype
            assert torch.equal(t.cpu(), torch.tensor([1, 2, 3], dtype=dtype))
        assert a.on_accelerator(x.to("hpu")) and not a.on_accelerator(x)

    def host_memory():
        # The cards' memory is host memory here: there is nothing to
        # page-lock, and "pinned" tensors are ordinary CPU tensors (as
        # tensor.pin_memory() on the hpu answers).
        p = a.pin_memory(x)
        assert torch.equal(p, x) and p.device.type == "cpu"
        assert a.is_pinned(p) == p.is_pinned()
        e = a.pin_empty(2, 3, dtype=torch.bfloat16)
        assert e.shape == (2, 3) and e.dtype == torch.bfloat16 and e.device.type == "cpu"
        assert a.pin_empty_like(x).shape == x.shape
        assert a.unpin_memory(p) is None
        assert a.pin_memory_alignment() == 1
        assert a.register_host_memory(x.data_ptr(), x.nbytes) is False
        assert a.unregister_host_memory(x.data_ptr()) is None

    def graphs():
        assert a.is_current_stream_capturing() is False
        static_in = torch.ones(4, device="hpu")
        g = a.create_graph()
        assert isinstance(g, h.HPUGraph)
        with a.capture_to_graph(g):
            static_out = static_in * 3 + 1
        static_in.copy_(torch.arange(4.0).to("hpu"))
        a.replay_graph(g)
        assert torch.equal(static_out.cpu(), torch.arange(4.0) * 3 + 1)

    def misc():
        assert a.is_synchronized_device() is False and a.use_host_timers() is False
        assert a.resolves_data_dependency() is True and a.handles_memory_backpressure() is True
        assert a.device_name(3) == "hpu"
        assert a.range_push("x") is None and a.range_pop() is None
        called = []
        a.lazy_call(lambda: called.append(1))
        assert called == [1]
        assert a.is_triton_supported() is False and a.prefer_triton_grouped_mm() is False
        assert a.export_envs() == []
        env = {}
        a.set_visible_devices_envs(env, [0, 1])
        assert env == {v: "0,1" for v in a.visible_devices_envs()}

    def op_builders():
        from deepspeed.ops.op_builder.hpu.fused_adam import FusedAdamBuilder

        assert a.op_builder_dir() == "deepspeed.ops.op_builder.hpu"
        assert a.get_op_builder("FusedAdamBuilder") is FusedAdamBuilder
        assert isinstance(a.create_op_builder("FusedAdamBuilder"), FusedAdamBuilder)
        assert a.create_op_builder("NoSuchBuilder") is None
        assert a.class_dict and "FusedAdamBuilder" in a.class_dict
        from torch.utils.cpp_extension import BuildExtension
        assert a.build_extension() is BuildExtension

    def compile_backend():
        name = a.get_compile_backend()
        assert name == "hpu_backend"
        a.set_compile_backend("eager")
        assert a.get_compile_backend() == "eager"
        with pytest.raises(ValueError, match="not supported"):
            a.set_compile_backend("no_such_backend")
        if name in torch._dynamo.list_backends(exclude_tags=()):
            a.set_compile_backend(name)
        a._compile_backend = name

    covered = {
        device_and_properties: ["device", "device_count", "is_available", "set_device", "current_device",
                                "current_device_name", "synchronize"],
        rng: ["manual_seed", "initial_seed", "manual_seed_all", "get_rng_state", "set_rng_state",
              "default_generator", "random"],
        streams_and_events: ["Stream", "Event", "current_stream", "default_stream", "stream"],
        memory: ["empty_cache", "reset_peak_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
                 "memory_allocated", "max_memory_allocated", "memory_cached", "memory_reserved",
                 "max_memory_cached", "max_memory_reserved", "memory_stats", "total_memory", "available_memory"],
        dtypes: ["is_bf16_supported", "is_fp64_supported", "is_fp16_supported", "supported_dtypes"],
        tensors: ["BFloat16Tensor", "ByteTensor", "DoubleTensor", "FloatTensor", "HalfTensor", "IntTensor",
                  "LongTensor", "on_accelerator"],
        host_memory: ["pin_memory", "is_pinned", "pin_empty", "pin_empty_like", "unpin_memory",
                      "pin_memory_alignment", "register_host_memory", "unregister_host_memory"],
        graphs: ["is_current_stream_capturing", "create_graph", "capture_to_graph", "replay_graph"],
        misc: ["is_synchronized_device", "use_host_timers", "resolves_data_dependency",
               "handles_memory_backpressure", "device_name", "range_push", "range_pop", "lazy_call",
               "is_triton_supported", "prefer_triton_grouped_mm", "export_envs", "set_visible_devices_envs",
               "visible_devices_envs", "communication_backend_name", "apply_hpu_workarounds"],
        op_builders: ["op_builder_dir", "get_op_builder", "create_op_builder", "class_dict", "build_extension"],
        compile_backend: ["get_compile_backend", "set_compile_backend"],
    }
    return covered


def test_every_public_method_of_the_hpu_accelerator_works(accel):
    h = torch.hpu
    covered = _checks(accel, h)
    names = {n for names in covered.values() for n in names}
    public = {n for n in dir(type(accel)) if not n.startswith("_")} - {"supports_nvtx_domain"}
    # A DeepSpeed release that adds a method makes this fail until it is checked.
    assert public == names, f"unchecked: {sorted(public - names)}; gone: {sorted(names - public)}"
    accel.apply_hpu_workarounds()
    assert os.environ["PT_HPU_LAZY_ACC_PAR_MODE"] == "0"
    assert accel.communication_backend_name() == "hccl"
    for check in covered:
        check()


# torch.ops.hpu.optimizer_adamw -------------------------------------------------------


def _adamw_reference(p, g, m, v, neg_step, beta1, beta2, eps, modified_wd):
    """The op's formula in float64 (bias corrections folded into neg_step)."""
    p, g, m, v = (t.double() for t in (p, g, m, v))
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    p = p * modified_wd + neg_step * m / (v.sqrt() + eps)
    return p, m, v


@pytest.mark.parametrize("form", ["float_wd", "tensor_wd", "tensor_wd_off"])
def test_optimizer_adamw_matches_its_formula(form):
    gen = torch.Generator().manual_seed(7)
    shapes = [(5, 3), (17,), (2, 2, 2)]
    ps = [torch.randn(s, generator=gen) for s in shapes]
    gs = [torch.randn(s, generator=gen) for s in shapes]
    ms = [torch.randn(s, generator=gen) * 0.1 for s in shapes]
    vs = [torch.rand(s, generator=gen) * 0.01 for s in shapes]
    # Tiny gradients and moments in one tensor: there eps weighs as much as
    # sqrt(exp_avg_sq), so where the formula adds it shows.
    gs[1], vs[1] = gs[1] * 1e-4, vs[1] * 1e-8
    beta1, beta2, eps, lr, wd, t = 0.9, 0.99, 1e-6, 1e-2, 0.1, 3
    neg_step = -lr * math.sqrt(1 - beta2**t) / (1 - beta1**t)
    mwd = 1 - lr * wd
    on = [[x.to("hpu") for x in lst] for lst in (gs, ps, ms, vs)]
    neg = torch.tensor([neg_step]).to("hpu")
    if form == "float_wd":
        torch.ops.hpu.optimizer_adamw(*on, neg, beta1, beta2, eps, mwd)
    else:
        flag = form == "tensor_wd"
        torch.ops.hpu.optimizer_adamw(*on, neg, beta1, beta2, eps, torch.tensor([mwd]).to("hpu"), flag)
        if not flag:
            mwd = 1.0
    for i in range(len(shapes)):
        want = _adamw_reference(ps[i], gs[i], ms[i], vs[i], neg_step, beta1, beta2, eps, mwd)
        for got, exp in zip((on[1][i], on[2][i], on[3][i]), want):
            torch.testing.assert_close(got.cpu().double(), exp, rtol=1e-5, atol=1e-6)
        assert torch.equal(on[0][i].cpu(), gs[i])  # the gradients are read only


def test_optimizer_adamw_rejects_bad_input():
    p = [torch.zeros(3, device="hpu")]
    neg = torch.tensor([-1e-3]).to("hpu")
    with pytest.raises(ValueError, match="gradient_vec has 2 tensors, weight_vec has 1"):
        torch.ops.hpu.optimizer_adamw(p * 2, p, p, p, neg, 0.9, 0.999, 1e-8, 1.0)
    with pytest.raises(ValueError, match=r"beta2 must be in \[0, 1\)"):
        torch.ops.hpu.optimizer_adamw(p, p, p, p, neg, 0.9, 1.0, 1e-8, 1.0)
    with pytest.raises(ValueError, match="neg_step_t must be a one-element tensor"):
        torch.ops.hpu.optimizer_adamw(p, p, p, p, torch.zeros(2, device="hpu"), 0.9, 0.999, 1e-8, 1.0)
    with pytest.raises(NotImplementedError, match="CPU"):
        c = [torch.zeros(3)]
        torch.ops.hpu.optimizer_adamw(c, c, c, c, torch.tensor([-1e-3]), 0.9, 0.999, 1e-8, 1.0)


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_deepspeed_fused_adam_matches_torch_adamw(weight_decay):
    """DeepSpeed's FusedAdam on the hpu (HPUFusedAdam: optimizer_adamw, in
    the lazy form or the eager one as the mode is) against torch.optim.AdamW
    on the CPU. Its eps acts as eps * sqrt(1 - beta2**t) in torch's
    formula; with a tiny eps the two agree to rounding."""
    from deepspeed.ops.adam import FusedAdam

    import habana_frameworks.torch.core as htcore

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    ref = copy.deepcopy(model)
    on_hpu = copy.deepcopy(model).to("hpu")
    kw = dict(lr=1e-2, betas=(0.9, 0.99), eps=1e-12, weight_decay=weight_decay)
    opt = FusedAdam(on_hpu.parameters(), adam_w_mode=True, **kw)
    ref_opt = torch.optim.AdamW(ref.parameters(), **kw)
    gen = torch.Generator().manual_seed(1)
    for _ in range(6):
        x = torch.randn(32, 8, generator=gen)
        for m, o, xb in ((ref, ref_opt, x), (on_hpu, opt, x.to("hpu"))):
            o.zero_grad()
            m(xb).pow(2).mean().backward()
            o.step()
            htcore.mark_step()
    for p, q in zip(on_hpu.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=2e-6)


# init_inference ----------------------------------------------------------------------


def test_init_inference_gpt2_on_one_card_gives_the_cpu_tokens(accel):
    transformers = pytest.importorskip("transformers")
    import torch.distributed as dist

    cfg = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=97, n_positions=64,
                                  bos_token_id=0, eos_token_id=0, initializer_range=0.2)
    torch.manual_seed(3)
    hf = transformers.GPT2LMHeadModel(cfg).eval()
    prompt = torch.randint(1, 97, (2, 7), generator=torch.Generator().manual_seed(1))
    kw = dict(max_new_tokens=12, min_new_tokens=12, do_sample=False, use_cache=True, pad_token_id=0)
    with torch.no_grad():
        want = hf.generate(prompt, attention_mask=torch.ones_like(prompt), **kw)
    was_initialized = dist.is_initialized()
    import deepspeed

    engine = deepspeed.init_inference(copy.deepcopy(hf), dtype=torch.float32, replace_with_kernel_inject=False)
    try:
        assert next(engine.module.parameters()).device == torch.device("hpu", 0)
        with torch.no_grad():
            got = engine.module.generate(prompt.to("hpu"), attention_mask=torch.ones_like(prompt).to("hpu"), **kw)
        assert torch.equal(got.cpu(), want)
    finally:
        if dist.is_initialized() and not was_initialized:
            dist.destroy_process_group()
