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
    rdzv_endpoint: str | None = None  # HOST:PORT; None with one node (and no node_rank): torchrun --standalone
    rdzv_id: str = "quarry"
    node_rank: int | None = None  # the static form: this node's rank (0 hosts the store at master_addr:master_port)
    master_addr: str | None = None
    master_port: int = 29500
    max_restarts: int = 3
    timeout_s: float = 300.0
    notice_s: float = 30.0
    restart_delay_s: float = 3.0
    train_args: list[str] = field(default_factory=list)  # pretrain train's arguments (--config, --set ...)
    command_line: str = ""  # this node's `pretrain launch ...` line, for the message that says how to resume
    checkpoint_dir: str | None = None  # checkpoint.dir, for the message that says where a rerun resumes from

    @property
    def max_nodes(self) -> int:
        return int(self.nnodes)

    @property
    def static(self) -> bool:
        return self.node_rank is not None

    @property
    def standalone(self) -> bool:
        return self.rdzv_endpoint is None and not self.static

    def where(self) -> str:
        if self.standalone:
            return "this node alone (--standalone)"
        if self.static:
            return f"node {self.node_rank} of {self.nnodes}, store at {self.master_addr}:{self.master_port}"
        return f"{self.nnodes} launchers at {self.rdzv_endpoint}, rendezvous id {self.rdzv_id!r}"


def torchrun_command(plan: LaunchPlan) -> list[str]:
    """The torchrun line of one attempt. The static form gets no worker restarts from torchrun: its store lives
    as long as node 0's torchrun, so restarted workers would meet their predecessors' keys; every failure ends
    torchrun on every node instead, and each node's supervisor starts it again (a fresh store)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", plan.nnodes,
           "--nproc-per-node", str(plan.nproc_per_node)]
    timeout = max(1, int(plan.timeout_s))
    if plan.standalone:
        cmd.append("--standalone")
    elif plan.static:
        cmd += ["--node-rank", str(plan.node_rank), "--master-addr", plan.master_addr, "--master-port",
                str(plan.master_port), "--rdzv-conf", f"timeout={timeout}"]
    else:
        cmd += ["--rdzv-backend", "c10d", "--rdzv-endpoint", plan.rdzv_endpoint, "--rdzv-id", plan.rdzv_id]
    if not plan.static:
        cmd += ["--rdzv-conf", f"join_timeout={timeout},read_timeout={timeout},close_timeout={min(timeout, 60)}"]
    cmd += ["--max-restarts", "0" if plan.static else str(plan.max_restarts), "--monitor-interval", "1",
            "-m", "pretrain", "train", *plan.train_args]
    return cmd


def _prctl(option: int, arg: int) -> None:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(option, arg)
    except (OSError, AttributeError):
        pass


def _end_with_parent() -> None:
    """In the torchrun child before it runs (Linux): SIGTERM when this supervisor dies, even by SIGKILL, so that
    no launcher and its workers outlive it unsupervised."""
    _prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def attempt_env() -> dict:
    return {**os.environ, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", "PYTHONUNBUFFERED": "1"}


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name: [state, ppid, ...] (None: no such process)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _children(pid: int) -> list[int] | None:
    """Child process ids of ``pid`` (from /proc; None where there is none)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    return [int(name) for name in names if name.isdigit() and (_stat(int(name)) or ["", "-1"])[1] == str(pid)]


def _identity(pid: int) -> tuple[int, str] | None:
    """(pid, start time): a process, not a pid that may be reused."""
    fields = _stat(pid)
    return (pid, fields[19]) if fields and len(fields) > 19 else None


def _alive(identity: tuple[int, str]) -> bool:
    fields = _stat(identity[0])
    return bool(fields) and fields[0] != "Z" and len(fields) > 19 and fields[19] == identity[1]


def end_orphans(known: set[tuple[int, str]], adopted: bool = False, wait_s: float = 10.0) -> list[int]:
    """End the workers a torchrun left behind when it was killed, and wait until they are gone; -> their pids.

    torchrun starts each worker in a session of its own, so ending torchrun's session leaves them running: they
    would go on training with the other nodes (whose launchers then wait on torchrun's exit barrier for minutes)
    and keep this node's restarted torchrun from meeting the others. ``known``: the workers seen while torchrun
    ran; ``adopted``: this process is a child subreaper whose only child was torchrun, so its children now are
    workers torchrun left (any it missed was handed to it when torchrun died)."""
    mine = {i for i in map(_identity, _children(os.getpid()) or []) if i} if adopted else set()
    left = {i for i in known | mine if _alive(i)}
    for pid, _ in left:
        for kill in (os.killpg, os.kill):  # the worker's session (it and what it started), then the worker
            try:
                kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        for pid, _ in mine:
            try:
                os.waitpid(pid, os.WNOHANG)  # reap the ones handed to this process
            except ChildProcessError:
                pass
        if not any(map(_alive, left)):
            break
        time.sleep(0.1)
    return sorted(pid for pid, _ in left)


@dataclass
class Attempt:
    returncode: int
    deliberate: str  # pretrain train's message when it stopped on purpose (restarting would not help), else ""
    workers_started: bool
    rendezvous_timed_out: bool = False  # torchrun gave up waiting for the other launchers


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
        _prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: a killed torchrun's workers are handed to this process
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            for attempt in range(plan.max_restarts + 1):
                self.say(f"attempt {attempt + 1} of {plan.max_restarts + 1}: torchrun with {plan.nproc_per_node} "
                         f"processes, {plan.where()}")
                result = self.run_attempt()
                code = self.verdict(result, first=attempt == 0)
                if code is not None:
                    return code
                if attempt < plan.max_restarts:
                    self.say(f"torchrun ended with exit code {result.returncode}; starting it again in "
                             f"{plan.restart_delay_s:g} s ({plan.max_restarts - attempt} restarts left): the "
                             f"trainers resume from the newest intact checkpoint in checkpoint.dir")
                    time.sleep(plan.restart_delay_s)
            self.say(f"torchrun failed {plan.max_restarts + 1} times; giving up (raise --max-restarts to try "
                     f"more). {self.resume_hint()}")
            return result.returncode or 1
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)

    def verdict(self, result: Attempt, first: bool) -> int | None:
        """The exit code when this attempt's ending ends the supervisor, None to start torchrun again."""
        plan = self.plan
        if result.returncode == 0:
            self.say("the run finished")
            return 0
        if self.stopping:
            self.say("stopped by a signal; not restarting")
            return result.returncode
        if result.deliberate:
            self.say("pretrain train stopped on purpose (its message is above); not restarting: fix what it says, "
                     "then run the same command again")
            return 3 if "not finite" in result.deliberate else 2  # pretrain train's own exit codes
        if first and not result.workers_started:
            self.say(f"no worker started within --timeout {plan.timeout_s:g} s: the other launchers did not join "
                     f"(start the same `pretrain launch` line on every node, with the same {self.meeting_point()}); "
                     f"not restarting")
            return result.returncode or 1
        if not result.workers_started or result.rendezvous_timed_out:
            self.say(f"the other launchers did not rejoin within --timeout {plan.timeout_s:g} s after the failure: "
                     f"a node was lost, or its `pretrain launch` ended; not restarting. {self.resume_hint()}")
            return result.returncode or 1
        return None

    def meeting_point(self) -> str:
        if self.plan.static:
            return "--nnodes, --master-addr and --master-port, and --node-rank 0 .. nnodes-1"
        return "--rdzv-endpoint and --rdzv-id"

    def resume_hint(self) -> str:
        latest = ""
        if self.plan.checkpoint_dir:
            from pretrain.checkpoint.find import CheckpointError, read_latest

            try:  # (read safely: a FIFO or a link to /dev/zero there would hang or fill memory)
                latest = f" ({os.path.join(self.plan.checkpoint_dir, read_latest(self.plan.checkpoint_dir))})"
            except (OSError, CheckpointError):
                pass
        line = f" (this node's: {self.plan.command_line})" if self.plan.command_line else ""
        return (f"The run resumes from its newest intact checkpoint{latest} when the `pretrain launch` lines run "
                f"again on every node{line}")

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
        seen: dict[str, bool] = {"deliberate": "", "rendezvous_timeout": False}
        reader = threading.Thread(target=self._relay, args=(proc, seen), daemon=True)
        reader.start()
        started, workers = False, set()
        idle_since = last_notice = time.monotonic()
        stop_at = None
        while proc.poll() is None:
            time.sleep(0.5)
            if seen["deliberate"]:  # torchrun would restart workers that will stop the same way: end it
                stop_at = stop_at or time.monotonic() + 3  # (after the other ranks' messages)
                if time.monotonic() >= stop_at and not self.quiet:
                    self.quiet = True  # torchrun's traceback about the signal says nothing new
                    self._end_group(proc, signal.SIGTERM)
            kids = _children(proc.pid)
            now = time.monotonic()
            if kids:
                workers.update(i for i in map(_identity, kids) if i)
                started, idle_since, last_notice = True, now, now
            elif kids is not None and now - last_notice >= plan.notice_s:
                last_notice = now
                self.say(f"no worker running for {now - idle_since:.0f} s: {self.waiting_for()}; torchrun gives up "
                         f"after {plan.timeout_s:g} s")
        self._end_group(proc)
        left = end_orphans(workers, adopted=True)
        if left and not self.stopping:
            self.say(f"torchrun ended with exit code {proc.returncode} and left {len(left)} workers running "
                     f"(pids {', '.join(map(str, left))}): ended them")
        reader.join(timeout=10)
        return Attempt(proc.returncode, seen["deliberate"], started, seen["rendezvous_timeout"])

    def waiting_for(self) -> str:
        plan = self.plan
        if plan.standalone:
            return "waiting for torchrun to start its workers"
        if plan.static:
            return (f"waiting for the other launchers to reach the store at {plan.master_addr}:{plan.master_port} "
                    f"(node {plan.node_rank} of {plan.nnodes})")
        return (f"waiting for the other launchers to join the rendezvous ({plan.nnodes} launchers at "
                f"{plan.rdzv_endpoint}, id {plan.rdzv_id!r})")

    def _relay(self, proc, seen: dict) -> None:
        for line in proc.stdout:
            if DELIBERATE_STOP.match(line) and not seen["deliberate"]:
                seen["deliberate"] = line
            if "RendezvousTimeoutError" in line:
                seen["rendezvous_timeout"] = True
            if self.quiet:
                continue
            self.out.write(line)
            self.out.flush()

    def _end_group(self, proc, sig=signal.SIGKILL) -> None:
        """End torchrun's session (its workers run in sessions of their own: ``end_orphans``)."""
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
