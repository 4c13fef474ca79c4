"""Memory on CPU with gloo, measured with ``pretrain.memory.LiveBytes`` (every tensor storage the code allocates):
sharded initialisation (a rank allocates its shards plus a chunk, and the weights are the one-process model's),
FSDP gradient accumulation (a reduce-scatter per micro-batch keeps gradients sharded), and the activations that
none / selective / full recomputation keep for backward."""
from __future__ import annotations

import os

import pytest
import torch

from pretrain.config import finalize
from pretrain.memory import LiveBytes
from pretrain.loss import cross_entropy
from pretrain.model import GPT
from pretrain.parallel import apply_recompute
from tests.distributed_helpers import config_dict, run_distributed, tiny_config

MODEL = {"model.hidden_size": 64, "model.vocab_size": 1000, "model.num_layers": 4, "model.num_heads": 4}
CHUNK = 4096  # elements per init chunk in these tests (16 KiB)


def _build_and_measure(raw: dict) -> dict:
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    from pretrain import init
    from pretrain.config import from_dict
    from pretrain.parallel import build_model_parts
    from pretrain.parallel.mesh import Layout, init_parallel

    init.CHUNK_ELEMS = CHUNK
    cfg = from_dict(raw)
    finalize(cfg, int(os.environ["WORLD_SIZE"]))
    p = cfg.parallel
    env = init_parallel(Layout(tp=p.tp, pp=p.pp, dp=p.dp), torch.device("cpu"))
    with LiveBytes() as mem:
        parts = build_model_parts(cfg, env)
    shard = sum((q.to_local() if isinstance(q, DTensor) else q).untyped_storage().nbytes()
                for q in parts.parameters())
    full = {}
    for part in parts.parts:
        for name, q in part.named_parameters():
            full[name] = (q.full_tensor() if isinstance(q, DTensor) else q).detach().clone()
    dist.destroy_process_group()
    return {"peak": mem.peak, "shard": shard, "full": full}


SHARDED_LAYOUTS = {
    "tp2_dp2_fsdp": ({"parallel.tp": 2, "parallel.dp": 2, "parallel.sequence_parallel": True}, 4),
    "pp2_dp2_fsdp": ({"parallel.pp": 2, "parallel.dp": 2}, 4),
    "tp2_pp2_swiglu_untied": ({"parallel.tp": 2, "parallel.pp": 2, "model.mlp": "swiglu",
                               "model.tie_embeddings": False, "model.position": "rope"}, 4),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SHARDED_LAYOUTS))
def test_sharded_init_allocates_only_the_shard_and_gives_the_same_weights(name):
    overrides, world = SHARDED_LAYOUTS[name]
    cfg = tiny_config({**MODEL, **overrides})
    results = run_distributed(world, _build_and_measure, config_dict(cfg))
    one = tiny_config({**MODEL, **{k: v for k, v in overrides.items() if k.startswith("model.")}})
    finalize(one, 1)
    whole = GPT(one.model)
    ref = dict(whole.named_parameters())
    total_bytes = sum(q.numel() * 4 for q in ref.values())
    seen = set()
    for r in results:
        for k, v in r["full"].items():
            if k not in ref and k == "lm_head.weight":
                k = "embed.weight"  # a pipeline's last stage holds a copy of the tied embedding
            assert torch.equal(v, ref[k].detach()), (name, k)
            seen.add(k)
        # the shard, plus one init chunk (and its index vectors), plus the RoPE table
        margin = 2 * CHUNK * 4 + 64 * 1024
        print(f"{name}: peak {r['peak']} B, shard {r['shard']} B, whole model {total_bytes} B")
        assert r["peak"] <= r["shard"] + margin, (name, r["peak"], r["shard"])
        assert r["shard"] < 0.6 * total_bytes
    assert seen == set(ref)


def _fsdp_peak(raw: dict) -> dict:
    import torch.distributed as dist

    from pretrain.config import from_dict
    from pretrain.parallel import build_model_parts
    from pretrain.parallel.mesh import Layout, init_parallel
    from pretrain.data.batches import SyntheticDataset, local_batch
    from pretrain.trainer import Trainer

    cfg = from_dict(raw)
    finalize(cfg, int(os.environ["WORLD_SIZE"]))
    p, t = cfg.parallel, cfg.train
    env = init_parallel(Layout(dp=p.dp), torch.device("cpu"))
    parts = build_model_parts(cfg, env)
    trainer = Trainer(cfg, parts, torch.device("cpu"), torch.float32)
    ds = SyntheticDataset(64, cfg.data.seq_len, cfg.model.vocab_size, 0)
    n_micro = t.global_batch // (t.micro_batch * p.dp)
    tokens = local_batch(ds, 0, n_micro, t.micro_batch, p.dp, env.dp_rank)
    trainer.forward_backward(tokens, n_micro)  # warm-up (FSDP's lazy init)
    for q in parts.parameters():
        q.grad = None
    held = []  # bytes alive as each micro-batch's forward starts: what the previous ones left (gradients)
    model = parts.parts[0]
    with LiveBytes() as mem:
        hook = model.register_forward_pre_hook(lambda *_: held.append(mem.current))
        trainer.forward_backward(tokens, n_micro)
        hook.remove()
    params = sum(q.numel() * 4 for q in GPT(cfg.model).parameters())
    dist.destroy_process_group()
    return {"held": held, "peak": mem.peak, "param_bytes": params}


@pytest.mark.slow
def test_fsdp_reduce_scatter_every_micro_batch_keeps_gradients_sharded():
    """dp = 2, 4 micro-batches: syncing only the last one holds unsharded fp32 gradients of every parameter between
    micro-batches; with a reduce-scatter per micro-batch a rank holds only its 1/dp shard of them."""
    base = {"model.hidden_size": 128, "model.num_layers": 4, "model.num_heads": 4, "data.seq_len": 8,
            "train.micro_batch": 1, "parallel.dp": 2}
    peaks = {}
    for every in (True, False):
        raw = config_dict(tiny_config({**base, "parallel.fsdp_reduce_every_microbatch": every}))
        peaks[every] = run_distributed(2, _fsdp_peak, raw)[0]
    params = peaks[True]["param_bytes"]
    every, last = max(peaks[True]["held"][1:]), max(peaks[False]["held"][1:])
    print(f"held between micro-batches: reduce every micro-batch {every} B, last only {last} B; peaks "
          f"{peaks[True]['peak']} B / {peaks[False]['peak']} B; parameters {params} B")
    assert len(peaks[True]["held"]) == 4
    assert every <= 0.6 * params  # the fp32 gradient shard (half of them) and the gathered root
    assert last >= 0.95 * params  # unsharded fp32 gradients of every parameter
    assert peaks[True]["peak"] < peaks[False]["peak"]


def saved_activation_bytes(mode: str, dtype: torch.dtype = torch.float32, seq: int = 64) -> int:
    """Bytes autograd holds after one forward (loss included) of a 4-layer GPT with recompute ``mode``."""
    cfg = tiny_config({**MODEL, "data.seq_len": seq})
    finalize(cfg, 1)
    model = GPT(cfg.model)
    apply_recompute(model, mode)
    x = torch.randint(0, 1000, (4, seq + 1), generator=torch.Generator().manual_seed(0))
    with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32), LiveBytes() as mem:
        loss = cross_entropy(model(x[:, :-1]), x[:, 1:])
        held = mem.current
    loss.backward()
    return held


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_selective_recompute_keeps_fewer_activations(dtype):
    got = {mode: saved_activation_bytes(mode, dtype) for mode in ("none", "selective", "full")}
    print({k: f"{v / 1e6:.3f} MB" for k, v in got.items()})
    assert got["full"] < got["selective"] < 0.8 * got["none"]
