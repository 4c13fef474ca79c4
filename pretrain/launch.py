"""`pretrain launch`: run a training job under torchrun on this node, and start it again when it fails.

One `pretrain launch` per node (the same line on every node). Each attempt is one torchrun launcher
(``python -m torch.distributed.run``, c10d rendezvous) running ``pretrain train`` with the given config; a
trainer resumes from the newest intact checkpoint in checkpoint.dir by itself, so a restarted job continues the
run with the losses of an uninterrupted one. Two levels of recovery:

- torchrun's own elastic restart (``--max-restarts``): a worker that dies makes every launcher restart its
  workers in a new rendezvous round. torch 2.13 reuses the rendezvous' TCP store for the workers' process group
  across rounds (``TORCH_DISABLE_SHARE_RDZV_TCP_STORE`` unset), so restarted gloo workers read their dead
  predecessors' addresses (``Gloo connectFullMesh failed ... Connection refused``) or wait for a key that is
  never written again; every attempt here sets ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``: each round's workers
  get a fresh store on a fresh port.
- this supervisor: when the torchrun launcher itself ends in failure (it was killed, the node hosting the
  rendezvous store went away, its restarts ran out), its leftover workers are ended and the launcher is started
  again, up to ``--max-restarts`` times; a restarted launcher joins the others' rendezvous (or they all meet in
  a new one).

Nothing waits without bound or in silence: the rendezvous gives up after ``--timeout`` seconds (default:
the config's parallel.timeout_s, which also bounds every collective); while no worker runs, the supervisor says
every ``--notice`` seconds what it waits for. A job that stops on purpose (a config error, a non-finite loss,
storage that is not shared: ``pretrain train`` prints ``pretrain train: ...``) and an attempt whose launchers
never met are not restarted.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

DELIBERATE_STOP = re.compile(r"^(\[[^\]]*\]:?\s*)*pretrain train: ")  # a message of pretrain train's own


@dataclass
class LaunchPlan:
    nnodes: str = "1"  # launchers (nodes) in the job
    nproc_per_node: int = 1
    rdzv_endpoint: str | None = None  # HOST:PORT; None with one node: torchrun --standalone
    rdzv_id: str = "quarry"
    max_restarts: int = 3
    timeout_s: float = 300.0
    notice_s: float = 30.0
    restart_delay_s: float = 3.0
    train_args: list[str] = field(default_factory=list)  # pretrain train's arguments (--config, --set ...)

    @property
    def max_nodes(self) -> int:
        return int(self.nnodes)

    @property
    def standalone(self) -> bool:
        return self.rdzv_endpoint is None


def torchrun_command(plan: LaunchPlan) -> list[str]:
    """The torchrun line of one attempt."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", plan.nnodes,
           "--nproc-per-node", str(plan.nproc_per_node)]
    if plan.standalone:
        cmd.append("--standalone")
    else:
        cmd += ["--rdzv-backend", "c10d", "--rdzv-endpoint", plan.rdzv_endpoint, "--rdzv-id", plan.rdzv_id]
    timeout = max(1, int(plan.timeout_s))
    cmd += ["--rdzv-conf", f"join_timeout={timeout},read_timeout={timeout},close_timeout={min(timeout, 60)}",
            "--max-restarts", str(plan.max_restarts), "--monitor-interval", "1",
            "-m", "pretrain", "train", *plan.train_args]
    return cmd


def _end_with_parent() -> None:
    """In the torchrun child before it runs (Linux): SIGTERM when this supervisor dies, even by SIGKILL, so that
    no launcher and its workers outlive it unsupervised."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def attempt_env() -> dict:
    return {**os.environ, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", "PYTHONUNBUFFERED": "1"}


def _children(pid: int) -> list[int] | None:
    """Child process ids of ``pid`` (from /proc; None where there is none)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    out = []
    for name in names:
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(name))
    return out


@dataclass
class Attempt:
    returncode: int
    deliberate: str  # pretrain train's message when it stopped on purpose (restarting would not help), else ""
    workers_started: bool


class Supervisor:
    """Runs the attempts of one node; ``run()`` -> the exit code."""

    def __init__(self, plan: LaunchPlan, out=None):
        self.plan, self.out = plan, out or sys.stdout
        self.proc: subprocess.Popen | None = None
        self.stopping = False
        self.quiet = False  # torchrun's output is left out (it is being ended after a deliberate stop)

    def say(self, text: str) -> None:
        print(f"pretrain launch: {text}", file=sys.stderr, flush=True)

    def run(self) -> int:
        plan = self.plan
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            for attempt in range(plan.max_restarts + 1):
                where = ("this node alone (--standalone)" if plan.standalone else
                         f"{plan.nnodes} launchers at {plan.rdzv_endpoint}, rendezvous id {plan.rdzv_id!r}")
                self.say(f"attempt {attempt + 1} of {plan.max_restarts + 1}: torchrun with {plan.nproc_per_node} "
                         f"processes, {where}")
                result = self.run_attempt()
                if result.returncode == 0:
                    self.say("the run finished")
                    return 0
                if self.stopping:
                    self.say("stopped by a signal; not restarting")
                    return result.returncode
                if result.deliberate:
                    self.say("pretrain train stopped on purpose (its message is above); not restarting: fix what "
                             "it says, then run the same command again")
                    return 3 if "not finite" in result.deliberate else 2  # pretrain train's own exit codes
                if not result.workers_started:
                    self.say(f"no worker started within --timeout {plan.timeout_s:g} s: the other launchers did not "
                             f"join (start the same `pretrain launch` line on every node, with the same "
                             f"--rdzv-endpoint and --rdzv-id); not restarting")
                    return result.returncode or 1
                if attempt < plan.max_restarts:
                    self.say(f"torchrun ended with exit code {result.returncode}; starting it again in "
                             f"{plan.restart_delay_s:g} s ({plan.max_restarts - attempt} restarts left): the "
                             f"trainers resume from the newest intact checkpoint in checkpoint.dir")
                    time.sleep(plan.restart_delay_s)
            self.say(f"torchrun failed {plan.max_restarts + 1} times; giving up (raise --max-restarts to try more)")
            return result.returncode or 1
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)

    def _on_signal(self, signum, frame) -> None:
        self.stopping = True
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def run_attempt(self) -> Attempt:
        plan = self.plan
        self.quiet = False
        self.proc = proc = subprocess.Popen(torchrun_command(plan), env=attempt_env(), stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, text=True, bufsize=1,
                                            start_new_session=True, preexec_fn=_end_with_parent)
        deliberate: list[str] = []
        reader = threading.Thread(target=self._relay, args=(proc, deliberate), daemon=True)
        reader.start()
        started = False
        idle_since = last_notice = time.monotonic()
        stop_at = None
        while proc.poll() is None:
            time.sleep(0.5)
            if deliberate:  # torchrun would restart workers that will stop the same way: end it
                stop_at = stop_at or time.monotonic() + 3  # (after the other ranks' messages)
                if time.monotonic() >= stop_at and not self.quiet:
                    self.quiet = True  # torchrun's traceback about the signal says nothing new
                    self._end_group(proc, signal.SIGTERM)
            kids = _children(proc.pid)
            now = time.monotonic()
            if kids:
                started, idle_since, last_notice = True, now, now
            elif kids is not None and now - last_notice >= plan.notice_s:
                last_notice = now
                what = ("the other launchers to join the rendezvous" if not plan.standalone
                        else "torchrun to start its workers")
                self.say(f"no worker running for {now - idle_since:.0f} s: waiting for {what} ({plan.nnodes} "
                         f"launchers at {plan.rdzv_endpoint or 'localhost'}, id {plan.rdzv_id!r}); torchrun gives "
                         f"up after {plan.timeout_s:g} s")
        self._end_group(proc)
        reader.join(timeout=10)
        return Attempt(proc.returncode, deliberate[0] if deliberate else "", started)

    def _relay(self, proc, deliberate: list[str]) -> None:
        for line in proc.stdout:
            if DELIBERATE_STOP.match(line):
                deliberate.append(line)
            if self.quiet:
                continue
            self.out.write(line)
            self.out.flush()

    def _end_group(self, proc, sig=signal.SIGKILL) -> None:
        """End torchrun's session: after torchrun exited, whatever is left of it (workers whose launcher was
        killed)."""
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
