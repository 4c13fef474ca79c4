"""`pretrain launch`, the supervisor of a torchrun job, without training: what it starts, what it refuses at
start, a launcher left alone (it says what it waits for and gives up after --timeout), and which endings it
restarts (tests/test_multinode.py runs it for real with two launchers and a kill)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pretrain.launch import DELIBERATE_STOP, LaunchPlan, Supervisor, torchrun_command
from tests.distributed_helpers import free_port

ROOT = Path(__file__).resolve().parents[1]
SYNTHETIC = ["--config", "pretrain/configs/tiny.toml", "--set", "data.kind=synthetic", "--set",
             "model.vocab_size=256"]


def launch(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "pretrain", "launch", *args], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=timeout)


def test_torchrun_line_of_an_attempt():
    plan = LaunchPlan(nnodes="2", nproc_per_node=4, rdzv_endpoint="head:29500", rdzv_id="r1", max_restarts=2,
                      timeout_s=90, train_args=["--config=c.toml"])
    cmd = torchrun_command(plan)
    assert cmd[1:3] == ["-m", "torch.distributed.run"]
    joined = " ".join(cmd)
    assert "--nnodes 2 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint head:29500 --rdzv-id r1" in joined
    assert "join_timeout=90" in joined and "--max-restarts 2" in joined
    assert joined.endswith("-m pretrain train --config=c.toml")
    assert "--standalone" in " ".join(torchrun_command(LaunchPlan(nproc_per_node=2)))


def test_dry_run_prints_the_line_with_a_fresh_store_per_round():
    out = launch("--nnodes", "2", "--nproc-per-node", "2", "--rdzv-endpoint", "127.0.0.1:29500", "--dry-run",
                 *SYNTHETIC, "--set", "parallel.timeout_s=42")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 ")
    assert "join_timeout=42" in out.stdout and "--set=parallel.timeout_s=42" in out.stdout


@pytest.mark.parametrize("args, message", [
    (["--nnodes", "2", "--nproc-per-node", "2"], "needs --rdzv-endpoint HOST:PORT"),
    (["--nnodes", "two"], "--nnodes 'two'"),
    (["--nnodes", "2", "--rdzv-endpoint", "head"], "expected HOST:PORT"),
    (["--nproc-per-node", "3", "--set", "parallel.tp=2"], "world size 3 is not divisible"),
    (["--set", "parallel.timeout_s=0"], "parallel.timeout_s = 0.0: must be > 0"),
])
def test_bad_arguments_or_config_stop_before_anything_starts(args, message):
    out = launch(*args, *SYNTHETIC, "--dry-run")
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert "attempt" not in out.stderr and out.stdout == ""


@pytest.mark.slow
def test_a_launcher_alone_says_so_and_gives_up_after_the_timeout():
    t0 = time.monotonic()
    out = launch("--nnodes", "2", "--nproc-per-node", "1", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
                 "--timeout", "8", "--notice", "2", *SYNTHETIC, timeout=180)
    assert out.returncode != 0
    err = out.stderr
    assert "waiting for the other launchers to join the rendezvous" in err and "gives up after 8 s" in err
    assert "the other launchers did not join" in err and "not restarting" in err and "attempt 2" not in err
    assert time.monotonic() - t0 < 120


class _Scripted(Supervisor):
    """A supervisor whose attempts are a script's exit codes and messages (no torchrun)."""

    def __init__(self, endings, **plan):
        super().__init__(LaunchPlan(restart_delay_s=0, **plan))
        self.endings, self.attempts = list(endings), 0

    def run_attempt(self):
        from pretrain.launch import Attempt

        self.attempts += 1
        code, message, started = self.endings.pop(0)
        return Attempt(code, message, started)


def test_which_endings_are_restarted():
    s = _Scripted([(1, "", True), (-9, "", True), (0, "", True)], max_restarts=3)
    assert s.run() == 0 and s.attempts == 3  # failures restarted, the run then finishes
    s = _Scripted([(1, "", True)] * 3, max_restarts=2)
    assert s.run() == 1 and s.attempts == 3  # gives up after --max-restarts
    s = _Scripted([(1, "pretrain train: invalid config:\n", True)], max_restarts=3)
    assert s.run() == 2 and s.attempts == 1  # a deliberate stop is not restarted
    s = _Scripted([(1, "pretrain train: step 3: loss = nan is not finite; ...\n", True)], max_restarts=3)
    assert s.run() == 3 and s.attempts == 1
    s = _Scripted([(1, "", False)], max_restarts=3)
    assert s.run() == 1 and s.attempts == 1  # the launchers never met: not restarted


def test_deliberate_stop_lines():
    assert DELIBERATE_STOP.match("pretrain train: not every rank sees the storage rank 0 uses:\n")
    assert DELIBERATE_STOP.match("[rank1]: pretrain train: invalid config\n")
    assert not DELIBERATE_STOP.match("RuntimeError: pretrain train: \n")
    assert not DELIBERATE_STOP.match("step 4 | loss 5.1\n")
