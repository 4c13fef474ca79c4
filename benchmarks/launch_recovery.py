"""How long `pretrain launch` takes to recover from a lost launcher, phase by phase, on one machine.

Two `pretrain launch` lines on 127.0.0.1 (2 processes each, tp2 x dp2, the tiny CPU model of the tests) stand for
two nodes. Mid-run, after the checkpoint at step 8, node b loses (--lose):

    launcher  its torchrun (SIGKILL; its workers live on: `pretrain launch` must end them and start torchrun again)
    node      its torchrun and workers (SIGKILL on torchrun's session and on each worker's)
    worker    one of its workers (torchrun's own restart)
    gone      its `pretrain launch`, torchrun and workers, for good (node a must give up within the timeout)

--static runs the static form (--node-rank/--master-addr) instead of the c10d rendezvous. --load N runs N CPU
hogs alongside (the CI machine runs the whole suite on 2 cores). Every output line of both launchers is stamped
with the seconds since the kill; the script prints the phases: the failure seen on node a, node b's torchrun
started again, the rendezvous met again (workers running on both nodes), the resume, the last step, each
launcher's end.

    python benchmarks/launch_recovery.py                          # --lose launcher, c10d, no load
    python benchmarks/launch_recovery.py --lose node --load 2 --repeat 3
    python benchmarks/launch_recovery.py --static --lose launcher --load 2
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pretrain.launch import _children  # noqa: E402

CONFIG = """[model]
vocab_size = 256
hidden_size = 32
num_layers = 4
num_heads = 4
[parallel]
tp = 2
timeout_s = {timeout}
[train]
steps = {steps}
micro_batch = 2
global_batch = 8
seed = 7
lr = 3e-3
min_lr = 3e-4
warmup_steps = 2
grad_clip = 1.0
device = "cpu"
precision = "fp32"
[data]
kind = "synthetic"
seq_len = 16
[checkpoint]
dir = "{dir}/ckpt"
interval = 4
[log]
dir = "{dir}/log"
tensorboard = false
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_line(node: int, port: int, config: Path, static: bool, timeout: float) -> list[str]:
    where = (["--node-rank", str(node), "--master-addr", "127.0.0.1", "--master-port", str(port)] if static else
             ["--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "bench"])
    return [sys.executable, "-m", "pretrain", "launch", "--nnodes", "2", "--nproc-per-node", "2", *where,
            "--max-restarts", "2", "--notice", "5", "--timeout", str(timeout), "--config", str(config)]


class Node:
    """One `pretrain launch`, its output stamped line by line."""

    def __init__(self, name: str, cmd: list[str], cwd: Path, clock: list[float]):
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        self.name, self.lines, self.clock = name, [], clock
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append((time.monotonic() - self.clock[0], line.rstrip("\n")))

    def first(self, text: str, after: float = float("-inf")) -> float | None:
        return next((t for t, line in list(self.lines) if t > after and text in line), None)


def last_step(log_dir: Path) -> int:
    path = log_dir / "metrics.jsonl"
    if not path.exists():
        return 0
    steps = [json.loads(line)["step"] for line in path.read_text().splitlines() if line.endswith("}")]
    return max(steps, default=0)


def hogs(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(n)]


def lose(what: str, supervisor: subprocess.Popen) -> None:
    torchrun = _children(supervisor.pid)[0]
    workers = _children(torchrun) or []
    if what == "worker":
        os.kill(workers[0], signal.SIGKILL)
        return
    if what == "gone":
        os.kill(supervisor.pid, signal.SIGKILL)
    os.killpg(torchrun, signal.SIGKILL)
    if what in ("node", "gone"):
        for w in workers:
            os.killpg(w, signal.SIGKILL)


def run_once(args, work: Path) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    config = work / "run.toml"
    config.write_text(CONFIG.format(timeout=args.timeout, steps=args.steps, dir=work))
    port = free_port()
    clock = [time.monotonic()]
    nodes = [Node(n, launch_line(i, port, config, args.static, args.timeout), work, clock)
             for i, n in enumerate("ab")]
    t_start = time.monotonic()
    while last_step(work / "log") < args.kill_after and all(n.proc.poll() is None for n in nodes):
        time.sleep(0.05)
        if time.monotonic() - t_start > 600:
            break
    before = last_step(work / "log")
    clock[0] = time.monotonic()
    lose(args.lose, nodes[1].proc)
    codes = []
    for n in nodes:
        try:
            codes.append(n.proc.wait(args.deadline))
        except subprocess.TimeoutExpired:
            codes.append("hung")
    for n in nodes:
        if n.proc.poll() is None:
            os.killpg(n.proc.pid, signal.SIGKILL)
        n.reader.join(5)
    a, b = nodes
    phases = {
        "killed at step": before,
        "start -> kill (s)": round(clock[0] - t_start, 1),
        "a: failure seen": a.first("rror", 0) or a.first("FAILED", 0),
        "b: torchrun again": b.first("attempt 2", 0),
        "a: torchrun again": a.first("attempt 2", 0),
        "resumed": min(filter(None, [a.first("resumed from", 0), b.first("resumed from", 0)]), default=None),
        "last step": a.first(f"step {args.steps} |", 0) or b.first(f"step {args.steps} |", 0),
        "a: exit": a.first("pretrain launch: the run finished", 0) or a.first("not restarting", 0)
        or a.first("giving up", 0),
        "b: exit": b.first("pretrain launch: the run finished", 0) or b.first("not restarting", 0),
        "exit codes": codes,
    }
    if args.verbose:
        for n in nodes:
            print(f"--- node {n.name}")
            for t, line in n.lines:
                if t > -1:
                    print(f"{t:7.1f} {line[:200]}")
    return phases


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lose", choices=["launcher", "node", "worker", "gone"], default="launcher")
    p.add_argument("--static", action="store_true", help="the static form (--node-rank/--master-addr)")
    p.add_argument("--load", type=int, default=0, help="CPU hogs run alongside (default 0)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--kill-after", type=int, default=9, help="kill once metrics.jsonl has this step (default 9)")
    p.add_argument("--timeout", type=float, default=30, help="parallel.timeout_s and --timeout (default 30)")
    p.add_argument("--deadline", type=float, default=400, help="seconds after the kill before a run counts as hung")
    p.add_argument("--verbose", action="store_true", help="print both launchers' stamped output")
    args = p.parse_args()
    load = hogs(args.load)
    try:
        for r in range(args.repeat):
            with tempfile.TemporaryDirectory() as d:
                phases = run_once(args, Path(d))
            form = "static" if args.static else "c10d"
            print(f"run {r + 1}: lose {args.lose}, {form}, load {args.load}, timeout {args.timeout:g} s; seconds "
                  f"after the kill:")
            for k, v in phases.items():
                print(f"  {k:22} {v if not isinstance(v, float) else round(v, 1)}")
    finally:
        for h in load:
            h.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
