"""Checkpoints through torch.distributed.checkpoint: saved at tp=2 x pp=2, loaded at tp=1 x pp=1 (whole model in
one process) the weights are bit-identical and the logits equal the parallel model's; a run resumed at another
layout continues the loss curve; `latest` only names complete checkpoints."""
from __future__ import annotations

import json
import os

import pytest
import torch

from pretrain import checkpoint as ckpt
from pretrain.config import finalize
from pretrain.model import GPT
from tests.distributed_helpers import config_dict, run_distributed, tiny_config, train_losses

CURVE = {"train.lr": 5e-3, "train.min_lr": 5e-4, "train.decay_steps": 5}


def parallel_logits_and_weights(raw: dict, ckpt_dir: str, tokens: torch.Tensor):
    """Load the checkpoint into the parallel layout of ``raw``; -> (logits, full weights) on the rank holding the
    last stage at tp rank 0 (None elsewhere)."""
    import torch.distributed as dist
    from torch.distributed.pipelining import Schedule1F1B, ScheduleInterleaved1F1B
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import loss_parallel

    from pretrain.config import from_dict
    from pretrain.parallel import build_model_parts
    from pretrain.parallel.mesh import Layout, init_parallel

    world = int(os.environ["WORLD_SIZE"])
    cfg = from_dict(raw)
    finalize(cfg, world)
    p = cfg.parallel
    env = init_parallel(Layout(tp=p.tp, pp=p.pp, dp=p.dp), torch.device("cpu"))
    parts = build_model_parts(cfg, env)
    ckpt.load(ckpt.resolve(ckpt_dir), parts.parts)
    parts.train(False)
    inputs = tokens[:, :-1]
    with torch.no_grad(), loss_parallel():
        if p.pp > 1:
            sched = (ScheduleInterleaved1F1B(parts.stages, p.pp) if p.vpp > 1
                     else Schedule1F1B(parts.stages[0], p.pp))
            logits = sched.step(inputs) if parts.has_first_stage else sched.step()
        else:
            logits = parts.parts[0](inputs)
        if parts.has_last_stage and isinstance(logits, DTensor):
            logits = logits.full_tensor()
    weights = {}
    for part in parts.parts:
        for name, t in part.state_dict().items():
            weights[name] = (t.full_tensor() if isinstance(t, DTensor) else t).clone()
    dist.destroy_process_group()
    if parts.has_last_stage and env.tp_rank == 0:
        return logits, weights
    return None, weights


@pytest.mark.slow
def test_save_tp2_pp2_load_tp1_pp1(tmp_path):
    root = tmp_path / "ckpt"
    layout = {"parallel.tp": 2, "parallel.pp": 2, "parallel.sequence_parallel": True}
    saving = tiny_config({**CURVE, **layout, "train.steps": 3, "checkpoint.dir": str(root)})
    run_distributed(4, train_losses, config_dict(saving))
    assert (root / "latest").read_text().strip() == "step_00000003"
    d = ckpt.resolve(root)
    assert json.loads((d / "meta.json").read_text())["layout"] == {"tp": 2, "pp": 2, "vpp": 1, "dp": 1}

    torch.manual_seed(1)
    tokens = torch.randint(0, 256, (4, 17))
    results = run_distributed(4, parallel_logits_and_weights, config_dict(saving), str(root), tokens)
    par_logits = next(r[0] for r in results if r[0] is not None)
    par_weights = {}
    for _, w in results:
        par_weights.update(w)

    model, mcfg = ckpt.load_model_for_inference(root)
    assert mcfg.padded_vocab_size == 256 and mcfg.num_layers == 4
    sd = model.state_dict()
    assert set(par_weights) == set(sd)
    for name, w in par_weights.items():
        assert torch.equal(sd[name], w), name  # bit-identical weights at the new layout
    assert model.lm_head.weight is model.embed.weight
    with torch.no_grad():
        logits = model(tokens[:, :-1])
    assert logits.shape == par_logits.shape == (4, 16, 256)
    err = (logits - par_logits).abs().max().item()
    print(f"tp2 x pp2 vs tp1 x pp1 logits: max abs difference {err:.2e}")
    torch.testing.assert_close(logits, par_logits, rtol=1e-5, atol=1e-5)
    # not a trivial model: the trained weights differ from a fresh initialisation
    cfg = tiny_config()
    finalize(cfg, 1)
    assert not torch.equal(GPT(cfg.model).state_dict()["layers.0.attn.q_proj.weight"],
                           sd["layers.0.attn.q_proj.weight"])


@pytest.mark.slow
def test_resume_at_another_layout_continues_the_loss_curve(tmp_path):
    """5 steps in one process vs 3 steps at tp=2 x pp=2 (interleaved, 2 virtual stages) then resumed for steps 4-5
    in one process: model and optimizer state reshard."""
    root = str(tmp_path / "ckpt")
    ref = run_distributed(1, train_losses, config_dict(tiny_config({**CURVE, "train.steps": 5})))[0]["losses"]
    first = tiny_config({**CURVE, "train.steps": 3, "checkpoint.dir": root, "parallel.tp": 2, "parallel.pp": 2,
                         "parallel.vpp": 2, "parallel.sequence_parallel": True})
    part1 = run_distributed(4, train_losses, config_dict(first))[0]["losses"]
    second = tiny_config({**CURVE, "train.steps": 5, "checkpoint.dir": root})
    part2 = run_distributed(1, train_losses, config_dict(second))[0]
    assert sorted(part2["losses"]) == [4, 5] and part2["consumed_samples"] == 5 * 8
    for step in (1, 2, 3):
        assert part1[step] == pytest.approx(ref[step], rel=1e-5)
    for step in (4, 5):
        assert part2["losses"][step] == pytest.approx(ref[step], rel=1e-5), step


def test_single_process_save_load_bit_identical(tmp_path):
    """One process: checkpoint -> load_model_for_inference gives the same logits bit for bit; model_config.json
    is enough to rebuild the model."""
    root = tmp_path / "ckpt"
    cfg = tiny_config({"train.steps": 2, "checkpoint.dir": str(root), "model.position": "rope",
                       "model.norm": "rmsnorm", "model.mlp": "swiglu"})
    train_losses(config_dict(cfg))
    model, mcfg = ckpt.load_model_for_inference(root)
    assert (mcfg.position, mcfg.norm, mcfg.mlp) == ("rope", "rmsnorm", "swiglu")
    saved = json.loads((ckpt.resolve(root) / "model_config.json").read_text())
    assert saved["padded_vocab_size"] == 256 and saved["vocab_size"] == 256
    again, _ = ckpt.load_model_for_inference(ckpt.resolve(root))
    tokens = torch.randint(0, 256, (2, 16))
    with torch.no_grad():
        assert torch.equal(model(tokens), again(tokens))


def test_latest_names_only_complete_checkpoints(tmp_path):
    root = tmp_path / "ckpt"
    cfg = tiny_config({"train.steps": 4, "checkpoint.dir": str(root), "checkpoint.interval": 2})
    train_losses(config_dict(cfg))
    assert (root / "latest").read_text().strip() == "step_00000004"
    assert ckpt.resolve(root) == root / "step_00000004"
    # a checkpoint that a killed run left half-written is not picked up, and a new save replaces it
    (root / "step_00000006" / "dcp").mkdir(parents=True)
    (root / "step_00000006" / "dcp" / "__0_0.distcp").write_bytes(b"partial")
    assert ckpt.resolve(root) == root / "step_00000004"
    train_losses(config_dict(tiny_config({"train.steps": 6, "checkpoint.dir": str(root),
                                          "checkpoint.interval": 2})))
    assert ckpt.resolve(root) == root / "step_00000006"
    meta = ckpt.read_meta(root / "step_00000006")
    assert meta["step"] == 6 and meta["consumed_samples"] == 48
    assert (root / "step_00000006" / "rng" / "rank_00000.json").exists()
    assert ckpt.resolve(tmp_path / "nothing") is None
    (root / "latest").write_text("step_00000099\n")  # a pointer to nothing is an error, not a fresh start
    with pytest.raises(FileNotFoundError, match="not a complete checkpoint"):
        ckpt.resolve(root)
    with pytest.raises(FileNotFoundError):
        ckpt.load_model_for_inference(tmp_path / "nothing")


# ------------------------------------------------------------------------------------------- kill and resume

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
KILL_ARGS = ["--set", "data.kind=synthetic", "--set", "model.vocab_size=256", "--set", "train.steps=30", "--set", "checkpoint.interval=4", "--set", "log.tensorboard=false",
             "--set", "model.hidden_size=32", "--set", "data.seq_len=32", "--set", "train.eval_interval=10"]


def _cli(run_dir, extra=()):
    import subprocess
    import sys

    args = [sys.executable, "-m", "pretrain", "train", "--config", str(ROOT / "pretrain/configs/tiny.toml"),
            "--set", f"checkpoint.dir='{run_dir}/ckpt'", "--set", f"log.dir='{run_dir}/log'", *KILL_ARGS, *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _metrics(run_dir) -> list[dict]:
    path = run_dir / "log" / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


@pytest.mark.slow
def test_sigkill_then_resume_matches_uninterrupted_bit_for_bit(tmp_path):
    import signal
    import time

    whole, killed = tmp_path / "whole", tmp_path / "killed"
    proc = _cli(whole)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    reference = {r["step"]: r for r in _metrics(whole)}
    assert sorted(reference) == list(range(1, 31))

    proc = _cli(killed)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        steps = [r["step"] for r in _metrics(killed)]
        if steps and steps[-1] >= 10:  # checkpoints at 4 and 8 exist; the kill lands anywhere after step 10
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    first = _metrics(killed)
    assert first and first[-1]["step"] < 30, "the run finished before it could be killed"
    resumed_from = int((killed / "ckpt" / "latest").read_text().strip().split("_")[1])
    assert resumed_from >= 8 and resumed_from % 4 == 0

    proc = _cli(killed)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    assert "resumed from" in out and f"at step {resumed_from}" in out
    lines = _metrics(killed)
    after = lines[len(first):]
    assert [r["step"] for r in after] == list(range(resumed_from + 1, 31))
    for r in after:  # the resumed run's losses, grad norms, lr and eval losses are the uninterrupted run's, exactly
        ref = reference[r["step"]]
        assert (r["loss"], r["grad_norm"], r["lr"], r["consumed_samples"]) == \
               (ref["loss"], ref["grad_norm"], ref["lr"], ref["consumed_samples"]), r["step"]
        assert r.get("val_loss") == ref.get("val_loss")
    for r in first:  # and so were the killed run's
        assert r["loss"] == reference[r["step"]]["loss"]
