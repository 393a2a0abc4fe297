"""optimum-habana runs for test_optimum_habana.py, run with the
optimum-habana venv's python, one run per process (adapt_transformers_to_gaudi
patches transformers for the whole process):
    python optimum_worker.py probe            # what optimum-habana reads at import
    python optimum_worker.py train hpu|cpu fp32|bf16 OUTDIR
    python optimum_worker.py generate hpu|cpu
Prints `RESULT <json>`. A tiny BERT / GPT2 is built from a config (nothing is
downloaded); the data is random but seeded."""
import json
import os
import sys

import torch

# The data set test_transformers_trainer.py trains on too (only torch).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from seeded_data import parity_dataset  # noqa: E402

LAZY = os.environ.get("PT_HPU_LAZY_MODE", "1") != "0"


def probe():
    import optimum.habana  # noqa: F401  (reads habana-torch-plugin and hl-smi at import)
    from optimum.habana.utils import get_driver_version, get_habana_frameworks_version

    out = {"plugin": str(get_habana_frameworks_version()), "driver": str(get_driver_version())}
    try:
        import habana_frameworks.torch.hpex.kernels  # noqa: F401
        out["kernels"] = True
    except ImportError as e:
        out["kernels"] = False
        out["kernels_error"] = str(e)
    try:
        from optimum.habana.transformers.modeling_utils import adapt_transformers_to_gaudi  # noqa: F401
        out["adapt_import_error"] = None
    except Exception as e:  # noqa: BLE001  (the report names whatever stopped it)
        out["adapt_import_error"] = f"{type(e).__name__}: {e}"
    print("RESULT " + json.dumps(out))


# Mixed-precision op lists handed to GaudiConfig (it writes them to files and
# points PT_HPU_AUTOCAST_*_OPS_LIST at them before habana_frameworks loads).
BF16_OPS = ["linear", "matmul", "bmm", "addmm"]
FP32_OPS = ["softmax", "log_softmax", "layer_norm", "nll_loss", "embedding"]


def train(device, precision, out_dir):
    """hpu: GaudiTrainer with a GaudiConfig (fused AdamW and clip norm, for
    bf16 the autocast op lists). cpu: the reference, transformers' own
    Trainer (GaudiTrainer logs hpu memory statistics whatever its device)."""
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    bf16 = precision == "bf16"
    common = dict(output_dir=out_dir, per_device_train_batch_size=8, per_device_eval_batch_size=16,
                  num_train_epochs=2, learning_rate=2e-3, max_grad_norm=1.0, logging_steps=1, report_to=[],
                  save_strategy="no", seed=0, bf16=bf16, disable_tqdm=True, dataloader_num_workers=0)
    if device == "hpu":
        from optimum.habana import GaudiConfig, GaudiTrainer, GaudiTrainingArguments

        gaudi_config = GaudiConfig(use_fused_adam=True, use_fused_clip_norm=True, use_torch_autocast=bf16,
                                   autocast_bf16_ops=BF16_OPS if bf16 else None,
                                   autocast_fp32_ops=FP32_OPS if bf16 else None)
        # As optimum-habana's examples do (--gaudi_config_name): the arguments
        # declare the op lists when they pick the device, before the hpu's
        # autocast reads them.
        gaudi_config.save_pretrained(out_dir)
        args = GaudiTrainingArguments(use_habana=True, use_lazy_mode=LAZY, gaudi_config_name=out_dir, **common)
        make = lambda **kw: GaudiTrainer(gaudi_config=gaudi_config, **kw)  # noqa: E731
    else:
        args = TrainingArguments(use_cpu=True, **common)
        make = Trainer
    torch.manual_seed(0)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, num_labels=2,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertForSequenceClassification(config)
    trainer = make(model=model, args=args, train_dataset=parity_dataset(64, 1), eval_dataset=parity_dataset(32, 2))
    out = trainer.train()
    metrics = trainer.evaluate()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    opt = trainer.optimizer.optimizer if hasattr(trainer.optimizer, "optimizer") else trainer.optimizer
    print("RESULT " + json.dumps({
        "args_device": str(args.device), "param_device": str(next(trainer.model.parameters()).device),
        "optimizer": type(opt).__name__, "clip": type(getattr(trainer, "FusedNorm", None)).__name__,
        "lower_list": os.environ.get("PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST"),
        "losses": [h["loss"] for h in logs], "train_loss": out.training_loss,
        "eval_loss": metrics["eval_loss"]}))


def generate(device):
    hpu = device == "hpu"
    if hpu:  # before the model classes are imported: it replaces some of them
        from optimum.habana.transformers.modeling_utils import adapt_transformers_to_gaudi

        adapt_transformers_to_gaudi()
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=100, n_positions=64, n_embd=32, n_layer=2, n_head=2,
                        bos_token_id=0, eos_token_id=1, pad_token_id=1)
    model = GPT2LMHeadModel(config).eval()
    ids = torch.randint(2, 100, (2, 6), generator=torch.Generator().manual_seed(3))
    kwargs = {"max_new_tokens": 10, "do_sample": False, "num_beams": 1}
    with torch.no_grad():
        if hpu:
            import copy

            import habana_frameworks.torch.hpu.graphs as htgraphs

            model = model.to("hpu")
            if LAZY:
                model = htgraphs.wrap_in_hpu_graph(model)
            gen_config = copy.deepcopy(model.generation_config)
            gen_config.update(static_shapes=True, ignore_eos=True, use_cache=True, **kwargs)
            tokens = model.generate(ids.to("hpu"), generation_config=gen_config, lazy_mode=LAZY,
                                    hpu_graphs=LAZY).cpu()
        else:
            tokens = model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
    out = {"tokens": tokens.tolist(), "generation_config": type(model.generation_config).__name__}
    if hpu:
        from habana_torch import _C

        for name in ("hpu_graph_capture", "hpu_graph_replay", "hpu_graph_demoted"):
            out[name] = dict(_C._metric_items(name)).get(name, 0)
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    {"probe": probe, "train": train, "generate": generate}[sys.argv[1]](*sys.argv[2:])
