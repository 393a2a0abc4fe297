"""Which op_db ops still run through the CPU fallback, and why.

scripts/fallback_census.py runs the first samples of every op of PyTorch's
OpInfo database on hpu and reads the fallback counter. This test holds the
list below true in both directions: an op that newly falls back fails it
(a forwarder lost, or a kernel that routes a dtype to the CPU), and so does
a listed op that no longer falls back (the list, and the table in
docs/OPS.md, must shrink with it).
"""
import importlib.util
import pathlib
import warnings

import pytest

_SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "fallback_census.py"
_spec = importlib.util.spec_from_file_location("fallback_census", _SCRIPT)
census = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(census)

UINT8 = ("uint8 runs on the CPU: the kernel covers the floating types, and the CPU's uint8 bilinear kernel rounds "
         "in its own (fixed-point) way ours does not reproduce yet")
NO_KERNEL = "no hpu kernel yet"
ROUNDING = ("bfloat16 / float16 run on the CPU, whose kernel rounds intermediate steps to the dtype in a way "
            "ours does not reproduce yet")

# op_db name: why it still runs on the CPU.
FALLBACK = {
    **dict.fromkeys(["nn.functional.interpolate.bilinear", "nn.functional.upsample_bilinear"], UINT8),
    **dict.fromkeys([
        # vision
        "nn.functional.conv3d", "nn.functional.conv_transpose3d", "nn.functional.avg_pool3d", "nn.functional.max_pool3d",
        "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
        "nn.functional.grid_sample", "grid_sampler_2d", "grid_sampler_3d",
        "nn.functional.interpolate.bicubic", "_upsample_bilinear2d_aa",
        # losses and distances
        "nn.functional.ctc_loss", "nn.functional.multi_margin_loss", "nn.functional.multilabel_margin_loss",
        "nn.functional.pdist", "cdist",
        # segment reductions
        "_segment_reduce.lengths", "_segment_reduce.offsets",
        # math
        "igamma", "igammac", "matrix_exp",
    ], NO_KERNEL),
    **dict.fromkeys(["logit", "special.entr", "special.i0e"], ROUNDING),
}


@pytest.fixture(scope="module")
def fell_back():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fell, _refused, placed = census.census(samples=3)
    print(f"{len(fell)} of {placed} op_db ops fall back ({100.0 * len(fell) / placed:.1f}%)")
    return fell, placed


def test_only_the_listed_ops_fall_back(fell_back):
    fell, _ = fell_back
    new = {name: aten for name, aten in fell.items() if name not in FALLBACK}
    assert not new, ("these ops now run through the CPU fallback (op_db name: aten ops); give them an hpu kernel "
                     f"or list them in FALLBACK with the reason: {new}")


def test_every_listed_op_still_falls_back(fell_back):
    fell, _ = fell_back
    gone = sorted(set(FALLBACK) - set(fell))
    assert not gone, f"these ops no longer fall back: remove them from FALLBACK and from docs/OPS.md: {gone}"


def test_every_reason_is_written(fell_back):
    assert all(reason.strip() for reason in FALLBACK.values())
