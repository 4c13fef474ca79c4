"""The fit check counts the activations of a micro-batch and the logits (pretrain.fits): ``train.micro_batch =
1000000`` with a tiny model used to pass it (only one hidden state was counted) and ran out of memory in the first
forward. The estimate is a lower bound of what the model really holds, measured with ``pretrain.memory.LiveBytes``,
and not far below it; a config it refuses names train.micro_batch and a value that fits."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from pretrain import fits
from pretrain.cli import main as cli_main
from pretrain.config import ConfigError, check, finalize, load_config
from pretrain.loss import cross_entropy
from pretrain.memory import LiveBytes
from pretrain.model import GPT
from pretrain.parallel import apply_recompute
from tests.distributed_helpers import tiny_config

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "pretrain" / "configs" / "tiny.toml"
GiB = 2**30
CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def _cfg(overrides: dict, world: int = 1):
    cfg = tiny_config(overrides)
    check(cfg, world)
    finalize(cfg, world)
    return cfg


def _have(monkeypatch, n: int) -> None:
    monkeypatch.setattr(fits, "device_bytes", lambda device: n)


def test_a_micro_batch_whose_activations_cannot_fit_is_refused_naming_one_that_does(monkeypatch):
    # a tiny model: weights, gradients and tokens take well under a GiB; a million sequences of activations do not
    cfg = _cfg({"train.micro_batch": 1_000_000, "train.global_batch": 1_000_000, "data.seq_len": 64,
                "model.hidden_size": 64})
    have = 16 * GiB
    _have(monkeypatch, have)
    with pytest.raises(ConfigError) as e:
        fits.check_fits(cfg, 1, CPU)
    msg = str(e.value)
    assert "cannot fit" in msg and "activations and logits of train.micro_batch = 1000000" in msg
    fit = int(re.search(r"set train\.micro_batch = (\d+)", msg).group(1))
    assert 1 <= fit < 1_000_000 and 1_000_000 % fit == 0  # global_batch stays a multiple of it
    assert fits.rank_lower_bound(cfg, 1, CPU, fit) <= have
    larger = [b for b in range(fit + 1, 1_000_001) if 1_000_000 % b == 0][0]
    assert fits.rank_lower_bound(cfg, 1, CPU, larger) > have  # the largest that fits
    cfg.train.micro_batch = fit
    fits.check_fits(cfg, 1, CPU)  # the suggestion passes


def test_the_cli_stops_a_huge_micro_batch_at_start(monkeypatch, tmp_path, capsys):
    _have(monkeypatch, 4 * GiB)
    rc = cli_main(["train", "--config", str(TINY), "--set", "data.kind=synthetic", "--set", "model.vocab_size=64",
                   "--set", "train.steps=1", "--set", "train.micro_batch=1000000",
                   "--set", "train.global_batch=1000000",
                   "--set", f"checkpoint.dir='{tmp_path / 'ck'}'", "--set", "log.dir=''"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and re.search(r"set train\.micro_batch = \d+", err)
    assert not (tmp_path / "ck").exists()


def test_recompute_is_suggested_when_no_micro_batch_fits(monkeypatch):
    # one sequence of a long context over many layers: only full recomputation (one hidden state a layer) fits
    cfg = _cfg({"train.micro_batch": 1, "train.global_batch": 1, "data.seq_len": 8192, "model.hidden_size": 256,
                "model.num_layers": 64, "model.vocab_size": 256})
    full = fits.rank_lower_bound(_cfg({**_overrides(cfg), "train.recompute": "full"}), 1, CPU)
    none = fits.rank_lower_bound(cfg, 1, CPU)
    assert full < none
    _have(monkeypatch, (full + none) // 2)
    with pytest.raises(ConfigError, match=r"train.recompute = 'full'"):
        fits.check_fits(cfg, 1, CPU)
    _have(monkeypatch, full - 1)  # the weights fit, no activations do
    with pytest.raises(ConfigError, match=r"even train.micro_batch = 1 does not fit"):
        fits.check_fits(cfg, 1, CPU)


def _overrides(cfg) -> dict:
    return {"train.micro_batch": cfg.train.micro_batch, "train.global_batch": cfg.train.global_batch,
            "data.seq_len": cfg.data.seq_len, "model.hidden_size": cfg.model.hidden_size,
            "model.num_layers": cfg.model.num_layers, "model.vocab_size": cfg.model.vocab_size}


def test_shipped_and_test_configs_still_fit_a_small_gpu(monkeypatch):
    _have(monkeypatch, 8 * GiB)
    for path in sorted((ROOT / "pretrain" / "configs").glob("*.toml")):
        for vocab in (256, 32000):
            cfg = load_config(path, ["data.kind='synthetic'", f"model.vocab_size={vocab}"])
            check(cfg, 1)
            finalize(cfg, 1)
            for device in (CPU, CUDA):
                fits.check_fits(cfg, 1, device)
                assert fits.rank_lower_bound(cfg, 1, device) < GiB, path
    for over in ({}, {"parallel.tp": 2, "parallel.sequence_parallel": True}, {"parallel.pp": 2},
                 {"parallel.pp": 2, "parallel.vpp": 2}, {"train.recompute": "full"}):
        world = over.get("parallel.tp", 1) * over.get("parallel.pp", 1)
        fits.check_fits(_cfg(over, world), world, CPU)


def _measured(overrides: dict, dtype: torch.dtype) -> tuple[int, int]:
    """(what the estimate is, the most activation bytes one forward and backward held) for one rank, pp = tp = 1:
    LiveBytes' peak less the parameters' gradients (which backward allocates while activations are freed, so this
    is at most the activations' real peak)."""
    cfg = _cfg({"train.precision": "bf16" if dtype == torch.bfloat16 else "fp32", **overrides})
    model = GPT(cfg.model)
    apply_recompute(model, cfg.train.recompute)
    b, s = cfg.train.micro_batch, cfg.data.seq_len
    x = torch.randint(0, cfg.model.vocab_size, (b, s + 1), generator=torch.Generator().manual_seed(0))
    grads = sum(p.numel() * 4 for p in model.parameters())
    with LiveBytes() as mem:
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
            loss = cross_entropy(model(x[:, :-1]), x[:, 1:])
        loss.backward()
    return fits.activation_bytes(cfg, 1, CPU), mem.peak - grads


SHAPES = {
    "gelu, large vocabulary": {"model.hidden_size": 128, "model.vocab_size": 1000, "data.seq_len": 128},
    "swiglu rope": {"model.hidden_size": 128, "model.vocab_size": 1000, "data.seq_len": 128,
                    "model.mlp": "swiglu", "model.position": "rope"},
    # a small vocabulary: the layers, and under full recomputation the layer rebuilt in backward, dominate
    "small vocabulary": {"model.hidden_size": 128, "model.vocab_size": 64, "data.seq_len": 256},
}


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_estimate_is_below_what_the_model_holds_and_not_far_below(shape, recompute, dtype):
    est, real = _measured({**SHAPES[shape], "model.num_layers": 4, "train.micro_batch": 4,
                           "train.global_batch": 4, "train.recompute": recompute}, dtype)
    print(f"{shape} {recompute} {dtype}: estimate {est / 1e6:.2f} MB, measured {real / 1e6:.2f} MB")
    assert est <= real  # the check must never refuse what fits
    assert est >= 0.4 * real  # and counts most of it


def test_the_estimate_follows_the_layout():
    base = {"model.hidden_size": 256, "model.num_layers": 8, "model.num_heads": 8, "data.seq_len": 512,
            "train.micro_batch": 2, "train.global_batch": 16, "model.vocab_size": 256}
    one = fits.activation_bytes(_cfg(base), 1, CPU)
    # linear in the micro-batch, bf16 half of fp32
    assert fits.activation_bytes(_cfg({**base, "train.micro_batch": 4}), 1, CPU) == 2 * one
    bf16 = fits.activation_bytes(_cfg({**base, "train.precision": "bf16"}), 1, CPU)
    assert one // 2 < bf16 < 0.52 * one  # (attention's log-sum-exp stays fp32)
    auto = _cfg({**base, "train.precision": "auto"})
    assert fits.activation_bytes(auto, 1, CUDA) == bf16 and fits.activation_bytes(auto, 1, CPU) == one  # as train
    # recomputation keeps less
    sel = fits.activation_bytes(_cfg({**base, "train.recompute": "selective"}), 1, CPU)
    full = fits.activation_bytes(_cfg({**base, "train.recompute": "full"}), 1, CPU)
    assert full < sel < one
    # tensor parallelism splits attention and MLP, sequence parallelism the norms' inputs too
    tp = fits.activation_bytes(_cfg({**base, "parallel.tp": 2}, 2), 2, CPU)
    sp = fits.activation_bytes(_cfg({**base, "parallel.tp": 2, "parallel.sequence_parallel": True}, 2), 2, CPU)
    assert sp == one // 2 and one // 2 < tp < one
    # 1F1B: the first stage holds pp micro-batches of L / pp layers (L layers' worth), the last one micro-batch and
    # the logits; interleaving holds more on the first stage
    cfg = _cfg(base)
    layer = fits.layer_activation_bytes(cfg, 2, 4)
    logits = fits.logits_bytes(cfg, 2, 4)
    assert one == 8 * layer + logits
    pp = fits.activation_bytes(_cfg({**base, "parallel.pp": 2}, 2), 2, CPU)
    assert pp == max(8 * layer, 4 * layer + logits)
    pp4 = fits.activation_bytes(_cfg({**base, "parallel.pp": 4}, 4), 4, CPU)
    assert pp4 == 8 * layer
    vpp = fits.activation_bytes(_cfg({**base, "parallel.pp": 2, "parallel.vpp": 2}, 2), 2, CPU)
    assert vpp == (1 * 2 + 2 * 1 + 1) * 2 * layer  # (vpp - 1) pp + 2 (pp - 1) + 1 chunks of L / (pp vpp) layers


def test_an_eval_batch_whose_logits_cannot_fit_is_refused_at_start(monkeypatch, tmp_path):
    # [[eval.tasks]] with eval.batch_size = 10^6 passed the check and ran out of memory at the first evaluation
    cfg = _cfg({"data.seq_len": 64, "model.vocab_size": 4096, "eval.batch_size": 1_000_000})
    cfg.eval.tasks = [{"kind": "bpb", "path": str(tmp_path / "t.jsonl")}]  # (the file is read after this check)
    have = 4 * GiB
    _have(monkeypatch, have)
    with pytest.raises(ConfigError) as e:
        fits.check_fits(cfg, 1, CPU)
    msg = str(e.value)
    assert "eval.batch_size = 1000000 cannot fit" in msg
    fit = int(re.search(r"set eval\.batch_size = (\d+)", msg).group(1))
    assert 1 <= fit < 1_000_000
    cfg.eval.batch_size = fit
    fits.check_fits(cfg, 1, CPU)  # the suggestion passes
    cfg.eval.batch_size = fit + 1
    with pytest.raises(ConfigError):
        fits.check_fits(cfg, 1, CPU)  # and is the largest that does
    cfg.eval.tasks = []
    cfg.eval.batch_size = 1_000_000
    fits.check_fits(cfg, 1, CPU)  # no tasks: no evaluation forward
