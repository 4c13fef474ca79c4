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


def test_torchrun_line_of_the_static_form_leaves_restarts_to_the_supervisor():
    plan = LaunchPlan(nnodes="2", nproc_per_node=4, node_rank=1, master_addr="head", master_port=29600,
                      max_restarts=3, timeout_s=90)
    joined = " ".join(torchrun_command(plan))
    assert "--node-rank 1 --master-addr head --master-port 29600 --rdzv-conf timeout=90" in joined
    assert "--max-restarts 0" in joined  # torchrun's restarts would reuse node 0's store
    assert "--rdzv-endpoint" not in joined and "--standalone" not in joined and "join_timeout" not in joined


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
    (["--nnodes", "2", "--node-rank", "1"], "needs both --node-rank (0 .. nnodes-1) and --master-addr"),
    (["--nnodes", "2", "--node-rank", "2", "--master-addr", "head"], "--node-rank 2: must be 0 .. 1"),
    (["--nnodes", "2", "--node-rank", "0", "--master-addr", "h", "--rdzv-endpoint", "h:1"], "not both"),
    (["--timeout", "nan"], "--timeout nan"),  # was a traceback (nan to an integer)
    (["--notice", "-1"], "--notice -1"),  # would write its message at every poll
    (["--nnodes", "2", "--rdzv-endpoint", "head:99999"], "expected HOST:PORT"),  # no such port
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
        return Attempt(*self.endings.pop(0))


def test_dry_run_of_the_static_form():
    out = launch("--nnodes", "2", "--nproc-per-node", "2", "--node-rank", "0", "--master-addr", "127.0.0.1",
                 "--dry-run", *SYNTHETIC)
    assert out.returncode == 0, out.stderr
    assert "--node-rank 0 --master-addr 127.0.0.1 --master-port 29500" in out.stdout


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
    s = _Scripted([(1, "", True, True)], max_restarts=3)
    assert s.run() == 1 and s.attempts == 1  # a failure, then the others did not rejoin in time: a node is gone
    s = _Scripted([(-9, "", True), (1, "", False)], max_restarts=3)
    assert s.run() == 1 and s.attempts == 2  # started again, the others never came back


def test_a_node_that_does_not_rejoin_is_named_with_how_to_resume(tmp_path, capsys):
    (tmp_path / "latest").write_text("step_00000008\n")
    s = _Scripted([(-9, "", True), (1, "", False)], max_restarts=3, checkpoint_dir=str(tmp_path),
                  command_line="pretrain launch --nnodes 2 --config c.toml", timeout_s=45)
    assert s.run() == 1
    err = capsys.readouterr().err
    assert "the other launchers did not rejoin within --timeout 45 s after the failure" in err
    assert f"newest intact checkpoint ({tmp_path / 'step_00000008'})" in err
    assert "(this node's: pretrain launch --nnodes 2 --config c.toml)" in err and "not restarting" in err
    s = _Scripted([(1, "", True)] * 2, max_restarts=1, command_line="pretrain launch --nnodes 2")
    assert s.run() == 1
    err = capsys.readouterr().err
    assert "giving up" in err and "(this node's: pretrain launch --nnodes 2)" in err


def test_the_workers_a_killed_torchrun_leaves_are_ended():
    """torchrun starts its workers in sessions of their own: a torchrun killed by SIGKILL leaves them running.
    Here a stand-in launcher starts two such workers (each with a child of its own) and is killed; the workers
    seen while it ran are ended, with their children."""
    from pretrain.launch import _alive, _children, _identity, end_orphans

    code = ("import subprocess, sys, time\n"
            "child = 'import subprocess, time; subprocess.Popen([\"sleep\", \"300\"]); time.sleep(300)'\n"
            "ws = [subprocess.Popen([sys.executable, '-c', child], start_new_session=True) for _ in range(2)]\n"
            "print(' '.join(str(w.pid) for w in ws), flush=True); time.sleep(300)\n")
    launcher = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    workers = [int(p) for p in launcher.stdout.readline().split()]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(_children(w) for w in workers):
        time.sleep(0.05)
    grandchildren = [c for w in workers for c in _children(w)]
    everyone = {_identity(p) for p in workers + grandchildren}
    known = {_identity(w) for w in workers}
    launcher.kill()
    launcher.wait()
    assert all(map(_alive, everyone))  # killing the launcher left its workers and theirs running
    try:
        assert sorted(end_orphans(known)) == sorted(workers)
        assert not any(map(_alive, known))  # the workers are gone when it returns
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(map(_alive, everyone)):
            time.sleep(0.05)
        assert not any(map(_alive, everyone))  # and what they started (their sessions were ended)
        assert end_orphans(known) == []  # nothing left; a pid reused since is not touched (start time differs)
    finally:
        for p in workers + grandchildren:
            try:
                os.kill(p, 9)
            except ProcessLookupError:
                pass


def test_deliberate_stop_lines():
    assert DELIBERATE_STOP.match("pretrain train: not every rank sees the storage rank 0 uses:\n")
    assert DELIBERATE_STOP.match("[rank1]: pretrain train: invalid config\n")
    assert not DELIBERATE_STOP.match("RuntimeError: pretrain train: \n")
    assert not DELIBERATE_STOP.match("step 4 | loss 5.1\n")
