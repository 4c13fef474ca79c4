"""Checkpoints written in the background (checkpoint.async_save), the shared-storage check at start, and an intact
checkpoint that does not fit the config (named as a config change, not as damage)."""
from __future__ import annotations

import os
import threading

import pytest
import torch

from pretrain import checkpoint as ckpt
from pretrain.checkpoint import async_save, manifest
from pretrain.config import CheckpointConfig, ConfigError, finalize
from pretrain.model import GPT
from tests.distributed_helpers import config_dict, run_distributed, tiny_config, train_losses


def weights(d) -> dict:
    model, _ = ckpt.load_model_for_inference(d)
    return model.state_dict()


def same_checkpoints(a, b) -> None:
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for name in wa:
        assert torch.equal(wa[name], wb[name]), name


@pytest.mark.slow
def test_async_save_gives_the_same_losses_and_checkpoints(tmp_path):
    runs = {}
    for mode in ("sync", "async"):
        cfg = tiny_config({"train.steps": 4, "checkpoint.interval": 2, "checkpoint.dir": str(tmp_path / mode),
                           "checkpoint.async_save": mode == "async", "train.decay_steps": 6})
        runs[mode] = train_losses(config_dict(cfg))["losses"]
        assert async_save.pending() is None  # the run waited for its last background save
        assert (tmp_path / mode / "latest").read_text().strip() == "step_00000004"
    assert runs["async"] == runs["sync"]
    for step in (2, 4):  # what the background wrote is the state at its step, not a later one
        d = ckpt.step_dir(tmp_path / "async", step)
        assert manifest.has_manifest(d) and manifest.problems(d) == []
        same_checkpoints(d, ckpt.step_dir(tmp_path / "sync", step))
    # resuming from a background-written checkpoint continues the curve
    more = tiny_config({"train.steps": 6, "checkpoint.interval": 2, "checkpoint.dir": str(tmp_path / "async"),
                        "checkpoint.async_save": True, "train.decay_steps": 6})
    whole = tiny_config({"train.steps": 6, "train.decay_steps": 6})
    assert train_losses(config_dict(more))["losses"] == {s: v for s, v in train_losses(config_dict(whole))[
        "losses"].items() if s > 4}


@pytest.mark.slow
def test_async_save_two_processes(tmp_path):
    """dp=2 (FSDP shards): the background save's collectives run on their own gloo group beside training's."""
    out = {}
    for mode in ("sync", "async"):
        cfg = tiny_config({"train.steps": 4, "checkpoint.interval": 1, "checkpoint.dir": str(tmp_path / mode),
                           "checkpoint.async_save": mode == "async"})
        out[mode] = run_distributed(2, train_losses, config_dict(cfg))[0]["losses"]
    assert out["async"] == out["sync"]
    for step in (1, 4):
        d = ckpt.step_dir(tmp_path / "async", step)
        assert manifest.problems(d) == []
        same_checkpoints(d, ckpt.step_dir(tmp_path / "sync", step))


def _model():
    cfg = tiny_config()
    finalize(cfg, 1)
    model = GPT(cfg.model)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randint(0, 256, (1, 8))).sum().backward()
    opt.step()
    return cfg, model, opt


META = {"step": 0, "consumed_samples": 0, "scheduler": {}, "world_size": 1}


def test_latest_moves_only_when_the_background_save_is_complete(tmp_path, monkeypatch):
    cfg, model, opt = _model()
    root = tmp_path / "ckpt"
    ckpt.save(root, 1, [model], [opt], META, cfg.model)
    release, hashing = threading.Event(), threading.Event()
    real = manifest.digests

    def slow_digests(d, names):  # the background work stops before the manifest until released
        hashing.set()
        assert release.wait(60)
        return real(d, names)

    monkeypatch.setattr(manifest, "digests", slow_digests)
    d = ckpt.save(root, 2, [model], [opt], META, cfg.model, async_save=True)
    assert hashing.wait(60) and async_save.pending() == d
    assert (root / "latest").read_text().strip() == "step_00000001"  # files written, manifest not yet
    assert ckpt.find_resume(CheckpointConfig(dir=str(root))) == root / "step_00000001"
    release.set()
    assert ckpt.wait_async() == d
    assert (root / "latest").read_text().strip() == "step_00000002" and manifest.problems(d) == []

    def broken(d, names):  # e.g. the disk filled up while the background save ran
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(manifest, "digests", broken)
    ckpt.save(root, 3, [model], [opt], META, cfg.model, async_save=True)
    with pytest.raises(OSError, match="No space left on device.*still names the previous checkpoint") as e:
        ckpt.wait_async()  # an error of the machine: `pretrain train` says it in one line (tests/test_machine_errors.py)
    assert e.value.errno == 28 and e.value.filename == str(root / "step_00000003")
    assert (root / "latest").read_text().strip() == "step_00000002"
    assert ckpt.find_resume(CheckpointConfig(dir=str(root))) == root / "step_00000002"
    monkeypatch.setattr(manifest, "digests", real)
    ckpt.save(root, 3, [model], [opt], META, cfg.model, async_save=True)  # the half-written one is replaced
    ckpt.wait_async()
    assert (root / "latest").read_text().strip() == "step_00000003" and manifest.problems(root / "step_00000003") == []


def test_resume_with_another_seq_len_names_the_config_change(tmp_path):
    root = str(tmp_path / "ckpt")
    train_losses(config_dict(tiny_config({"train.steps": 2, "checkpoint.dir": root})))  # seq_len 16
    with pytest.raises(ConfigError) as e:
        train_losses(config_dict(tiny_config({"train.steps": 4, "checkpoint.dir": root, "data.seq_len": 32})))
    text = str(e.value)
    assert "damaged" not in text and "tampered" not in text
    assert "intact" in text and "model.max_seq_len is 16 in the checkpoint and 32 now" in text
    assert "data.seq_len" in text and "pos_embed.weight is [16, 32] there, [32, 32] here" in text
    # what it suggests works: keep the position table, train on shorter sequences
    out = train_losses(config_dict(tiny_config({"train.steps": 3, "checkpoint.dir": root, "data.seq_len": 8,
                                                "model.max_seq_len": 16})))
    assert sorted(out["losses"]) == [3]


def _check_with_rank_dirs(base: str):
    """Rank r's checkpoint.dir is base/r<r> (per-node disks); log.dir is shared."""
    import torch.distributed as dist

    from pretrain.parallel.mesh import start_process_group

    rank = int(os.environ["RANK"])
    cfg = tiny_config({"checkpoint.dir": f"{base}/r{rank}", "log.dir": f"{base}/log"})
    start_process_group(torch.device("cpu"), 30)
    try:
        ckpt.check_shared_storage(cfg)
        return None
    except ConfigError as e:
        return str(e)
    finally:
        dist.destroy_process_group()


def test_shared_storage_check_stops_every_rank(tmp_path):
    messages = run_distributed(2, _check_with_rank_dirs, str(tmp_path))
    assert messages[0] == messages[1] and messages[0] is not None  # all stop, with the same message
    assert "rank 1 on" in messages[0] and f"checkpoint.dir = {tmp_path}/r1" in messages[0]
    assert "log.dir" not in messages[0].split("\n")[1]  # the shared one is fine
    assert "same path" in messages[0]
    assert not list(tmp_path.glob("*/.quarry-shared-check-*"))


def test_shared_storage_names_data_files_that_differ(tmp_path):
    from pretrain.checkpoint.shared_storage import TOKEN_PREFIX, _look

    shared = tmp_path / "ckpt"
    shared.mkdir()
    (shared / f"{TOKEN_PREFIX}abc").write_text("abc")
    data = tmp_path / "web.bin"
    data.write_bytes(b"x" * 10)
    assert _look("abc", [("checkpoint.dir", str(shared))], {str(data): 10}, {}) == []
    problems = _look("abc", [("checkpoint.dir", str(shared))],
                     {str(data): 12, str(tmp_path / "gone.idx"): 5}, {})
    assert problems == [f"data file {data}: 12 bytes on rank 0, 10 bytes here",
                        f"data file {tmp_path / 'gone.idx'}: 5 bytes on rank 0, missing here"]
    (shared / f"{TOKEN_PREFIX}abc").write_text("another run's token")
    assert "is not visible" in _look("abc", [("checkpoint.dir", str(shared))], {}, {str(shared): "/rank0/ckpt"})[0]


def _check_unwritable(base: str):
    import torch.distributed as dist

    from pretrain.parallel.mesh import start_process_group

    cfg = tiny_config({"checkpoint.dir": f"{base}/file/ckpt"})  # under a regular file: cannot be created
    start_process_group(torch.device("cpu"), 30)
    try:
        ckpt.check_shared_storage(cfg)
    except ConfigError as e:
        return str(e)
    finally:
        dist.destroy_process_group()


def test_shared_storage_check_stops_every_rank_when_rank0_cannot_write(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    messages = run_distributed(2, _check_unwritable, str(tmp_path))
    assert messages[0] == messages[1] and f"cannot write in checkpoint.dir = {tmp_path}/file/ckpt" in messages[0]
