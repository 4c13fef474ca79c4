"""Damaged checkpoints: every checkpoint records its files' sizes and SHA-256 (manifest.json) before `latest` moves;
a truncated or bit-flipped latest checkpoint is named in a message and the run resumes from the newest intact one
(and then trains exactly as a run that was never damaged), or stops with checkpoint.on_damage = "stop"; inference
and export name the damage; non-finite weights are never saved and never loaded."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from pretrain import checkpoint as ckpt
from pretrain.checkpoint import manifest
from pretrain.cli import main
from tests.test_poisoned_checkpoint import TRAIN

STEP2, STEP4 = "step_00000002", "step_00000004"


def _train(root: Path, steps: int, *extra: str) -> int:
    return main([*TRAIN, "--set", f"checkpoint.dir='{root}'", "--set", f"train.steps={steps}",
                 "--set", "checkpoint.interval=2", "--set", f"log.dir='{root.parent / 'log'}'", *extra])


def _losses(root: Path) -> dict[int, float]:
    out = {}
    for line in (root.parent / "log" / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        out[rec["step"]] = rec["loss"]  # a resumed run appends; the last line for a step wins
    return out


@pytest.fixture(scope="module")
def four_steps(tmp_path_factory) -> Path:
    """A run of 4 steps with checkpoints at steps 2 and 4 (and its log)."""
    root = tmp_path_factory.mktemp("run") / "ckpt"
    assert _train(root, 4) == 0
    return root


def _copy(four_steps: Path, tmp_path: Path) -> Path:
    shutil.copytree(four_steps.parent, tmp_path / "run")
    return tmp_path / "run" / "ckpt"


def truncate(d: Path) -> str:
    f = d / "dcp" / "__0_0.distcp"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    return "dcp/__0_0.distcp"


def flip_bit(d: Path) -> str:
    f = d / "dcp" / "__0_0.distcp"
    data = bytearray(f.read_bytes())
    data[len(data) // 3] ^= 0x10  # inside a weight: loads fine, silently wrong without a checksum
    f.write_bytes(bytes(data))
    return "dcp/__0_0.distcp"


def delete_rng(d: Path) -> str:
    (d / "rng" / "rank_00000.json").unlink()
    return "rng/rank_00000.json"


def test_manifest_lists_every_file(four_steps):
    d = four_steps / STEP4
    files = json.loads((d / manifest.MANIFEST).read_text())["files"]
    assert set(files) == {"dcp/.metadata", "dcp/__0_0.distcp", "meta.json", "model_config.json",
                          "rng/rank_00000.json"}
    for name, entry in files.items():
        assert entry["size"] == (d / name).stat().st_size
        assert len(entry["sha256"]) == 64
    assert ckpt.damage(d) == [] and ckpt.damage(four_steps / STEP2) == []


@pytest.mark.parametrize("damage", [truncate, flip_bit, delete_rng])
def test_damaged_latest_resumes_from_newest_intact_and_matches(damage, four_steps, tmp_path, capsys):
    root = _copy(four_steps, tmp_path)
    reference = _losses(root)
    name = damage(root / STEP4)
    problems = ckpt.damage(root / STEP4)
    assert problems and name in problems[0]
    capsys.readouterr()
    assert _train(root, 4) == 0
    err = capsys.readouterr().err
    assert f"checkpoint {root / STEP4} is damaged: {name}" in err, err
    assert f"resuming from {root / STEP2}" in err
    assert {"truncate": "truncated", "flip_bit": "checksum", "delete_rng": "missing"}[damage.__name__] in err
    resumed = _losses(root)
    assert resumed[3] == reference[3] and resumed[4] == reference[4]  # steps 3-4 redone exactly
    assert (root / "latest").read_text().strip() == STEP4 and ckpt.damage(root / STEP4) == []  # rewritten


@pytest.mark.parametrize("damage", [truncate, flip_bit])
def test_on_damage_stop_stops_with_a_message(damage, four_steps, tmp_path, capsys):
    root = _copy(four_steps, tmp_path)
    damage(root / STEP4)
    capsys.readouterr()
    assert _train(root, 6, "--set", "checkpoint.on_damage='stop'") == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{root / STEP4} is damaged" in err and f"intact one is {root / STEP2}" in err
    assert (root / "latest").read_text().strip() == STEP4  # nothing was touched


def test_nothing_intact_stops_rather_than_starting_over(four_steps, tmp_path, capsys):
    root = _copy(four_steps, tmp_path)
    truncate(root / STEP4)
    flip_bit(root / STEP2)
    capsys.readouterr()
    assert _train(root, 6) == 2
    err = capsys.readouterr().err
    assert "no older checkpoint is intact" in err and STEP2 in err and "Traceback" not in err


def test_latest_pointing_at_nothing_falls_back(four_steps, tmp_path, capsys):
    root = _copy(four_steps, tmp_path)
    shutil.rmtree(root / STEP4)
    capsys.readouterr()
    assert _train(root, 4) == 0
    assert f"resuming from {root / STEP2}" in capsys.readouterr().err


def test_lost_latest_pointer_resumes_rather_than_starting_over(four_steps, tmp_path, capsys):
    root = _copy(four_steps, tmp_path)
    reference = _losses(root)
    (root / "latest").unlink()
    (root / "step_00000006" / "dcp").mkdir(parents=True)  # and a partial write of a killed run: not complete
    capsys.readouterr()
    assert _train(root, 6, "--set", "checkpoint.on_damage='stop'") == 2
    assert f"{root / 'latest'} is missing, yet {root / STEP4} is a complete checkpoint" in capsys.readouterr().err
    assert _train(root, 5) == 0
    out = capsys.readouterr()
    assert "resuming from it" in out.err and f"resumed from {root / STEP4} at step 4" in out.out
    lines = (root.parent / "log" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == len(reference) + 1  # only step 5 was trained
    assert (root / "latest").read_text().strip() == "step_00000005"


@pytest.mark.parametrize("command", ["export-hf", "generate"])
def test_inference_names_the_damage_and_the_intact_one(command, four_steps, tmp_path, tmp_path_factory, capsys):
    root = _copy(four_steps, tmp_path)
    flip_bit(root / STEP4)
    argv = ["export-hf", str(root), str(tmp_path / "hf")] if command == "export-hf" else \
        ["generate", "--checkpoint", str(root), "--prompt", "x", "--tokenizer", "unused.model"]
    if command == "generate":  # the model is loaded after the tokenizer: give it a real one
        from tests.test_export_hf import quarry_tokenizer

        argv[-1] = str(quarry_tokenizer(tmp_path_factory))
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{root / STEP4} is damaged" in err and "checksum" in err and str(root / STEP2) in err
    assert not (tmp_path / "hf").exists()
    model, _ = ckpt.load_model_for_inference(root / STEP2)  # the intact one, named in the message, loads


def test_older_checkpoint_without_manifest_still_loads_and_a_truncated_one_fails_clearly(four_steps, tmp_path,
                                                                                          capsys):
    root = _copy(four_steps, tmp_path)
    (root / STEP4 / manifest.MANIFEST).unlink()  # as written before manifests existed
    model, _ = ckpt.load_model_for_inference(root)
    assert "not verified" in capsys.readouterr().err
    truncate(root / STEP4)
    with pytest.raises(ckpt.CheckpointError, match=f"could not load the checkpoint in {root / STEP4}"):
        ckpt.load_model_for_inference(root)


def test_non_finite_weights_are_never_saved(four_steps, tmp_path):
    from pretrain.config import finalize
    from pretrain.model import GPT
    from tests.distributed_helpers import tiny_config

    root = _copy(four_steps, tmp_path)
    cfg = tiny_config()
    finalize(cfg, 1)
    model = GPT(cfg.model)
    opt = torch.optim.AdamW(model.parameters())
    with torch.no_grad():
        next(p for n, p in model.named_parameters() if n.startswith("layers.1."))[0].fill_(float("nan"))
    with pytest.raises(ckpt.CheckpointError, match="non-finite weights: layers.1"):
        ckpt.save(root, 6, [model], [opt], {"step": 6, "consumed_samples": 48}, cfg.model)
    assert (root / "latest").read_text().strip() == STEP4 and not (root / "step_00000006").exists()


def test_non_finite_weights_are_never_loaded(four_steps, tmp_path, monkeypatch, capsys):
    root = _copy(four_steps, tmp_path)
    model, mcfg = ckpt.load_model_for_inference(root)
    with torch.no_grad():
        model.embed.weight[3, 3] = float("inf")
    monkeypatch.setattr(ckpt.save_load, "nonfinite_names", lambda state, limit=5: [])  # an outside tool wrote it
    ckpt.save(root, 6, [model], [torch.optim.AdamW(model.parameters())], {"step": 6, "consumed_samples": 48,
              "scheduler": {"step": 6}, "world_size": 1}, mcfg)
    monkeypatch.undo()
    with pytest.raises(ckpt.CheckpointError, match="non-finite weights: embed.weight"):
        ckpt.load_model_for_inference(root)
    capsys.readouterr()
    assert _train(root, 8) == 2
    assert "non-finite weights" in capsys.readouterr().err


def test_a_run_that_diverges_never_moves_latest_onto_a_nan_model(tmp_path, capsys):
    """lr = 1e30: finite (huge) weights after step 1, overflowing from step 2 on. Whatever stops the run (the trainer's
    non-finite check or the checkpoint's), `latest` stays on the last finite model."""
    root = tmp_path / "ckpt"
    capsys.readouterr()
    rc = main([*TRAIN, "--set", f"checkpoint.dir='{root}'", "--set", "train.steps=4", "--set", "checkpoint.interval=1",
               "--set", "train.lr=1e30", "--set", "train.min_lr=1e30", "--set", "train.warmup_steps=0",
               "--set", "train.grad_clip=0"])
    err = capsys.readouterr().err
    assert rc in (2, 3) and ("non-finite" in err or "not finite" in err) and "Traceback" not in err, err
    latest = root / (root / "latest").read_text().strip()
    model, _ = ckpt.load_model_for_inference(latest)  # loads: finite
    assert all(torch.isfinite(p).all() for p in model.parameters())


@pytest.mark.slow
def test_two_ranks_agree_on_the_fallback(tmp_path):
    """dp = 2 (gloo): the manifest covers both ranks' shards and RNG files (each rank hashed its share); a
    truncated shard of rank 1 sends both ranks back to step 2, and steps 3-4 are redone exactly."""
    from tests.distributed_helpers import config_dict, run_distributed, tiny_config, train_losses

    root = tmp_path / "ckpt"
    cfg = config_dict(tiny_config({"train.steps": 4, "checkpoint.dir": str(root), "checkpoint.interval": 2}))
    reference = run_distributed(2, train_losses, cfg)[0]["losses"]
    files = json.loads((root / STEP4 / manifest.MANIFEST).read_text())["files"]
    assert {"rng/rank_00000.json", "rng/rank_00001.json"} <= set(files)
    shards = sorted(name for name in files if name.endswith(".distcp"))
    assert len(shards) == 2
    f = root / STEP4 / shards[-1]
    f.write_bytes(f.read_bytes()[:100])
    results = run_distributed(2, train_losses, cfg)
    for r in results:
        assert sorted(r["losses"]) == [3, 4] and r["losses"] == {s: reference[s] for s in (3, 4)}
    assert ckpt.damage(root / STEP4) == []


def test_ranks_share_the_verification(four_steps, tmp_path):
    """Each of N ranks hashes every N-th file (ckpt.damage gathers the union), so together they check each file
    exactly once: damage in any one file is found by exactly one share."""
    d = _copy(four_steps, tmp_path) / STEP4
    names = sorted(json.loads((d / manifest.MANIFEST).read_text())["files"])
    assert manifest.problems(d, 0, 3) == manifest.problems(d, 1, 3) == manifest.problems(d, 2, 3) == []
    broken = flip_bit(d)
    found = [manifest.problems(d, part, 3) for part in range(3)]
    assert [bool(f) for f in found] == [names.index(broken) % 3 == part for part in range(3)]
    assert sum(found, []) == manifest.problems(d) == ckpt.damage(d)
