"""One `pretrain train` per checkpoint.dir: a second run on the same folder stops at once naming the first
(two runs would write each other's checkpoints and move ``latest`` in turn); a restart after a lost node
goes on."""
import json
import os
import subprocess
import sys
from pathlib import Path

from curate.lock import LOCK_FILE, OutputLock

ROOT = Path(__file__).resolve().parents[1]


def _train(ckpt: Path, tmp_path: Path, env=None):
    return subprocess.run([sys.executable, "-m", "pretrain", "train", "--config", "pretrain/configs/tiny.toml",
                           "--set", "data.kind=synthetic", "--set", "model.vocab_size=256", "--set", "train.steps=2",
                           "--set", f"checkpoint.dir={ckpt}", "--set", f"log.dir={tmp_path / 'logs'}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})


def test_a_second_run_on_the_same_checkpoint_dir_stops_naming_the_first(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    with OutputLock(ckpt):  # a run holding the folder (this process)
        r = _train(ckpt, tmp_path)
        assert r.returncode == 2, r.stderr[-2000:]
        assert "checkpoint.dir" in r.stderr and "in use by another run" in r.stderr and f"pid {os.getpid()}" in r.stderr
        assert "Traceback" not in r.stderr and not (ckpt / "latest").exists()
    r = _train(ckpt, tmp_path)  # the folder free again: the run trains and lets it go
    assert r.returncode == 0, r.stderr[-2000:]
    assert (ckpt / "latest").exists() and not (ckpt / LOCK_FILE).exists()


def test_a_restart_after_a_lost_node_goes_on_without_the_lock(tmp_path):
    """torchrun restarted the group (TORCHELASTIC_RESTART_COUNT) and the lock is still held from another host:
    the lost node's (a network file system keeps its lock until the lease ends), so the run goes on."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    lock = OutputLock(ckpt).acquire()
    try:
        os.ftruncate(lock.fd, 0)
        os.pwrite(lock.fd, (json.dumps({"pid": 1, "host": "a-lost-node", "program": "pretrain train"}) + "\n").encode(), 0)
        assert _train(ckpt, tmp_path).returncode == 2  # a first start: refused
        r = _train(ckpt, tmp_path, env={"TORCHELASTIC_RESTART_COUNT": "1"})
        assert r.returncode == 0, r.stderr[-2000:]
        assert "going on without the lock" in r.stderr and (ckpt / "latest").exists()
    finally:
        lock.release()
