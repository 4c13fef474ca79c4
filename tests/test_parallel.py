"""Tensor (+ sequence), pipeline (1F1B, interleaved) and data parallelism (FSDP2, replicate) on CPU with gloo:
from the same initial weights and data, 5 optimizer steps give the single-process run's loss and gradient norm at
every step within 1e-5 relative; TP gradients match the single-process model's per parameter."""
from __future__ import annotations

import pytest
import torch

from pretrain.config import finalize
from pretrain.loss import cross_entropy
from pretrain.model import GPT, num_params
from pretrain.parallel.mesh import Layout
from pretrain.parallel.pipeline import stage_layers, stages_of_rank
from tests.distributed_helpers import config_dict, run_distributed, tiny_config, train_losses

RTOL = 1e-5
# the gradient norm is compared too (Adam would hide a wrong gradient scale from the loss); it is more sensitive
# to reduction-order noise, which Adam amplifies on parameters whose true gradient is ~0 (the k_proj bias)
NORM_RTOL = 1e-4
TRAIN = {"train.lr": 5e-3, "train.min_lr": 5e-4, "train.eval_interval": 5, "train.eval_iters": 1}


def test_rank_layout_is_megatrons():
    """tensor innermost, then data, then pipeline (megatron-lm.md section 4, world 8, t = d = p = 2)."""
    lay = Layout(tp=2, pp=2, dp=2)
    assert lay.groups("tp") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert lay.groups("dp") == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert lay.groups("pp") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert [lay.coords(r) for r in (0, 3, 5)] == [(0, 0, 0), (0, 1, 1), (1, 0, 1)]
    assert all(lay.rank(*lay.coords(r)) == r for r in range(8))


def test_stage_assignment_interleaved():
    assert stages_of_rank(0, 2, 2) == [0, 2] and stages_of_rank(1, 2, 2) == [1, 3]
    assert stages_of_rank(1, 4, 1) == [1]
    assert [list(stage_layers(8, 4, s)) for s in range(4)] == [[0, 1], [2, 3], [4, 5], [6, 7]]


_REFERENCES: dict = {}


def reference_run(model: dict) -> dict:
    """The single-process run for these [model] overrides (computed once per module)."""
    key = tuple(sorted(model.items()))
    if key not in _REFERENCES:
        _REFERENCES[key] = run_distributed(1, train_losses, config_dict(tiny_config({**TRAIN, **model})))[0]
    return _REFERENCES[key]


OPTIONS = {"model.position": "rope", "model.norm": "rmsnorm", "model.mlp": "swiglu", "model.bias": False,
           "model.tie_embeddings": False}


LAYOUTS = {
    "tp2_sp": ({"parallel.tp": 2, "parallel.sequence_parallel": True}, 2),
    "tp2_full_recompute": ({"parallel.tp": 2, "train.recompute": "full"}, 2),
    "tp2_sp_selective_recompute": ({"parallel.tp": 2, "parallel.sequence_parallel": True,
                                    "train.recompute": "selective"}, 2),
    "pp2_1f1b": ({"parallel.pp": 2}, 2),
    "pp2_vpp2": ({"parallel.pp": 2, "parallel.vpp": 2}, 2),
    "dp2_fsdp_selective_recompute": ({"parallel.dp": 2, "train.recompute": "selective"}, 2),
    "dp2_replicate": ({"parallel.dp": 2, "parallel.dp_mode": "replicate"}, 2),
    "tp2_pp2": ({"parallel.tp": 2, "parallel.pp": 2, "parallel.sequence_parallel": True}, 4),
    "tp2_pp2_dp2": ({"parallel.tp": 2, "parallel.pp": 2, "parallel.dp": 2, "parallel.sequence_parallel": True}, 8),
    # RoPE, RMSNorm, SwiGLU, no biases, untied output head
    "tp2_pp2_options": ({"parallel.tp": 2, "parallel.pp": 2, "parallel.sequence_parallel": True, **OPTIONS}, 4),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_layout_matches_single_process(name):
    overrides, world = LAYOUTS[name]
    reference = reference_run({k: v for k, v in overrides.items() if k.startswith("model.")})
    cfg = tiny_config({**TRAIN, **overrides})
    results = run_distributed(world, train_losses, config_dict(cfg))
    ref_loss, ref_norm = reference["losses"], reference["grad_norms"]
    assert sorted(ref_loss) == [1, 2, 3, 4, 5]
    worst = max(abs(r["losses"][s] / ref_loss[s] - 1) for r in results for s in ref_loss)
    print(f"{name}: max relative loss error {worst:.2e}")
    for res in results:  # every rank reports the same global loss
        assert res["losses"] == results[0]["losses"]
        for step in ref_loss:
            assert res["losses"][step] == pytest.approx(ref_loss[step], rel=RTOL), (name, step)
            assert res["grad_norms"][step] == pytest.approx(ref_norm[step], rel=NORM_RTOL), (name, step)
        assert res["val_losses"][5] == pytest.approx(reference["val_losses"][5], rel=RTOL)  # forward-only path
    # the layout was really applied: each rank holds a part of the parameters (all of them only under replicate)
    cfg1 = tiny_config({**TRAIN, **{k: v for k, v in overrides.items() if k.startswith("model.")}})
    finalize(cfg1, 1)
    with torch.device("meta"):
        total = num_params(GPT(cfg1.model))
    local = [r["local_param_numel"] for r in results]
    if "replicate" in name:
        assert local == [total] * world
    else:
        assert all(n < total for n in local)
    if "vpp2" in name:
        assert [r["stage_ids"] for r in results] == [[0, 2], [1, 3]]


def tp_gradients(raw: dict, tokens: torch.Tensor) -> dict:
    """One forward/backward of the tensor-parallel model; full gradients and loss."""
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import loss_parallel

    from pretrain.config import from_dict
    from pretrain.parallel import build_model_parts
    from pretrain.parallel.mesh import init_parallel

    cfg = from_dict(raw)
    finalize(cfg, int(__import__("os").environ["WORLD_SIZE"]))
    env = init_parallel(Layout(tp=cfg.parallel.tp), torch.device("cpu"))
    model = build_model_parts(cfg, env).parts[0]
    with loss_parallel():
        loss = cross_entropy(model(tokens[:, :-1]), tokens[:, 1:])
        loss.backward()
    grads = {n: (p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad).detach().clone()
             for n, p in model.named_parameters()}
    out = {"loss": float(loss.full_tensor()), "grads": grads}
    dist.destroy_process_group()
    return out


@pytest.mark.slow
@pytest.mark.parametrize("variant", [
    {"parallel.sequence_parallel": True},
    {"parallel.sequence_parallel": False, "model.position": "rope", "model.norm": "rmsnorm", "model.mlp": "swiglu",
     "model.bias": False},
])
def test_tp_gradients_match_single_process(variant):
    torch.manual_seed(0)
    tokens = torch.randint(0, 256, (2, 17))
    model_keys = {k: v for k, v in variant.items() if k.startswith("model.")}
    ref_cfg = tiny_config(model_keys)
    finalize(ref_cfg, 1)
    ref = GPT(ref_cfg.model)
    loss = cross_entropy(ref(tokens[:, :-1]), tokens[:, 1:])
    loss.backward()
    res = run_distributed(2, tp_gradients, config_dict(tiny_config({**variant, "parallel.tp": 2})), tokens)[0]
    assert res["loss"] == pytest.approx(loss.item(), rel=1e-6)
    ref_grads = dict(ref.named_parameters())
    assert set(res["grads"]) == set(ref_grads)
    scale = max(p.grad.abs().max().item() for p in ref.parameters())
    for name, g in res["grads"].items():
        err = (g - ref_grads[name].grad).abs().max().item()
        assert err <= 1e-6 * scale, (name, err, scale)


def test_balanced_stages_count_embedding_and_head():
    from pretrain.config import Config
    from pretrain.parallel.pipeline import balanced_stage_layers, layer_ranges, stage_costs

    cfg = Config()
    for k, v in dict(vocab_size=50257, hidden_size=2048, num_layers=24, num_heads=16).items():
        setattr(cfg.model, k, v)
    cfg.data.kind, cfg.data.seq_len = "synthetic", 2048
    finalize(cfg, 1)
    emb, head = stage_costs(cfg.model, 2048)
    assert emb == 1.0 and head == pytest.approx(2 * 2048 * 50304 / (24 * 2048 ** 2 + 2 * 2048 * 2049), rel=1e-9)
    assert 1.85 < head < 1.9  # the "about 1.75 layers" counted full-square attention; causal: 1.89
    ranges = layer_ranges(cfg.model, 4, "flops", 2048)
    sizes = [len(r) for r in ranges]
    assert sizes == [5, 7, 7, 5] and ranges[0].start == 0 and ranges[-1].stop == 24
    costs = [sizes[0] + emb, sizes[1], sizes[2], sizes[3] + head]
    assert max(costs) == 7  # the even split [6, 6, 6, 6] would load the last stage with 7.75
    assert [len(r) for r in layer_ranges(cfg.model, 4, "even", 2048)] == [6, 6, 6, 6]
    assert [len(r) for r in balanced_stage_layers(4, 4, 1.0, 0.6)] == [1, 1, 1, 1]  # at least one layer each
    assert [len(r) for r in balanced_stage_layers(8, 2, 0.0, 2.0)] == [5, 3]
