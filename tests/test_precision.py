"""One precision recipe for every layout, and torch.compile, on CPU with gloo: bf16 compute (autocast, fp32 master
weights, fp32 gradient reduction) at tp2 + sp, pp2 and dp2 (FSDP and replicate) follows the one-process bf16 curve,
which stays within a stated tolerance of fp32; compiled runs (aot_eager backend: dynamo + AOTAutograd, no C++
code generation, so that the test is fast) match the eager ones."""
from __future__ import annotations

import pytest

from tests.distributed_helpers import config_dict, run_distributed, tiny_config, train_losses

TRAIN = {"train.lr": 5e-3, "train.min_lr": 5e-4, "train.steps": 5}
BF16 = {"train.precision": "bf16"}
BF16_VS_FP32 = 2e-2  # relative loss difference of bf16 compute to fp32 over 5 steps of the tiny model
LAYOUT_BF16 = 1e-2  # relative loss difference of a bf16 layout to the one-process bf16 run
LAYOUTS = {
    "tp2_sp": ({"parallel.tp": 2, "parallel.sequence_parallel": True}, 2),
    "pp2": ({"parallel.pp": 2}, 2),
    "dp2_fsdp": ({"parallel.dp": 2}, 2),
    "dp2_replicate": ({"parallel.dp": 2, "parallel.dp_mode": "replicate"}, 2),
}
_RUNS: dict = {}


def run(overrides: dict, world: int = 1) -> dict:
    key = (tuple(sorted(overrides.items())), world)
    if key not in _RUNS:
        _RUNS[key] = run_distributed(world, train_losses, config_dict(tiny_config({**TRAIN, **overrides})))[0]
    return _RUNS[key]


def rel(a: dict, b: dict) -> float:
    return max(abs(a[s] / b[s] - 1) for s in b)


@pytest.mark.slow
def test_bf16_one_process_is_close_to_fp32():
    fp32, bf16 = run({}), run(BF16)
    err = rel(bf16["losses"], fp32["losses"])
    print(f"bf16 vs fp32: max relative loss difference {err:.2e}")
    assert 0 < err < BF16_VS_FP32  # not identical: bf16 really computed
    assert bf16["losses"][5] < bf16["losses"][1]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_bf16_layouts_follow_the_same_curve(name):
    overrides, world = LAYOUTS[name]
    ref, fp32 = run(BF16)["losses"], run({})["losses"]
    got = run({**BF16, **overrides}, world)["losses"]
    err = rel(got, ref)
    print(f"{name} bf16 vs one-process bf16: {err:.2e} (vs fp32 {rel(got, fp32):.2e})")
    assert err < LAYOUT_BF16
    assert rel(got, fp32) < BF16_VS_FP32


COMPILE = {"train.compile": True, "train.compile_backend": "aot_eager"}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tp2_sp", "pp2", "dp2_fsdp"])
def test_compile_matches_eager(name):
    overrides, world = LAYOUTS[name]
    eager = run({}, 1)["losses"]
    got = run({**COMPILE, **overrides}, world)["losses"]
    err = rel(got, eager)
    print(f"{name} compiled (aot_eager) vs eager one process: {err:.2e}")
    assert err < 1e-5
