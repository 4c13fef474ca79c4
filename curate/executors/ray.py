"""Ray tasks: the same pipeline file on a Ray cluster (``curate run P.toml --executor ray``).

Each task is one Ray task. Workers must see the same file system paths as the driver (a shared or
network file system on a real cluster): tasks read and write shards and the driver writes completion
markers there, exactly as with the local executor, so resume works the same. Task arguments and
results are small (paths and counts); no data goes through the object store.

At most ``max_in_flight`` tasks are submitted at once (default 4 per cluster CPU) and each completion
is handled in time independent of the number of tasks (``ray.wait`` over the bounded in-flight set),
so the driver's cost is linear in tasks. A task whose worker or node dies is retried by Ray up to
``max_retries`` times; then the run stops naming the task, or, for a task whose worker process died
every time (``WorkerCrashedError``: a library crashing on its input, or the worker killed) where the caller
gave ``on_crash``, runs once more alone in a child process inside a Ray worker (``child_call``), whose exit
signal says which: a crash (SIGSEGV, SIGBUS, SIGABRT ...) makes ``on_crash`` the task's result (a read task
sets its split aside as ``read_crashed``), a kill (SIGKILL: out of memory?) stops the run naming the task, as
the local executor does. A lost node (``NodeDiedError``) always stops the run after the retries. Without
``--address``, a local Ray instance is started with ``workers`` CPUs.
"""
from __future__ import annotations

import contextlib
import signal
import socket
import threading
from typing import Callable, Sequence

from curate.executors import WorkerLost, collect, describe
from curate.executors.child_call import run_in_child, signal_name
from curate.executors.local import CRASH_SIGNALS


def check_address(address: str, timeout: float = 5.0) -> None:
    """Fail at once, saying what to do, when ``address`` is not ``auto`` / ``local`` and nothing answers at its
    host and port (``ray.init`` would retry for minutes, then fail with a Ray log line)."""
    from curate.config import ConfigError

    if address in ("auto", "local"):  # ray.init's own words: find a running cluster, start one here
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--address {address!r}: give the head node as HOST:PORT (e.g. 10.0.0.1:6379, what "
                          "`ray start --head` prints), ray://HOST:PORT for Ray Client, or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        raise ConfigError(f"--address {address}: no Ray cluster answers there ({e.strerror or e}); start one with "
                          "`ray start --head --port=6379` on the head node, or fix --address") from None


def connect_ray(address: str | None, cpus: int | None, missing: type[Exception] = ValueError):
    """Ray, connected: to the cluster at ``address`` (checked first, see ``check_address``), or to a local
    instance of ``cpus`` CPUs (all when None) started here. Returns ``(ray, started)``; ``started`` says this
    call started Ray, so the caller shuts it down when done. Used by every command that runs on Ray."""
    try:
        import ray
    except ImportError as e:  # pragma: no cover - ray is an optional dependency
        raise missing("this needs Ray: pip install 'ray[default]'") from e
    if ray.is_initialized():
        return ray, False
    if address:
        check_address(address)
    with _signal_handlers_kept():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            # "local": a new instance even where RAY_ADDRESS or /tmp/ray/ray_current_cluster names another one
            # (an earlier run's leftover); without it Ray attaches there, and refuses the num_cpus given here
            ray.init(address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    return ray, True


@contextlib.contextmanager
def _signal_handlers_kept():
    """SIGTERM's and SIGINT's handlers as they were before ``ray.init``, which installs its own (Ray's C++ core
    a failure handler that answers SIGTERM with a crash dump and exit 134/15, where ``curate run`` and ``pretrain
    tokenize`` end in one line and exit 143, their pools shut down). Setting a handler again from Python puts
    Python's own signal handling back in front."""
    saved = {}
    for signum in (signal.SIGTERM, signal.SIGINT):
        handler = signal.getsignal(signum)
        if handler is not None:  # (None: set outside Python, cannot be put back)
            saved[signum] = handler
    try:
        yield
    finally:
        if threading.current_thread() is threading.main_thread():
            for signum, handler in saved.items():
                signal.signal(signum, handler)


class RayExecutor:
    handles_crashes = True  # map() takes on_crash

    def __init__(self, address: str | None = None, workers: int = 1, max_in_flight: int = 0, max_retries: int = 3):
        self.ray, self._started = connect_ray(address, max(1, workers))
        self._remote = self.ray.remote(max_retries=max_retries, retry_exceptions=False)(_call)
        self._in_child = self.ray.remote(max_retries=0, retry_exceptions=False)(run_in_child)
        self.workers = workers
        self.max_in_flight = max_in_flight
        self.max_retries = max_retries

    def _limit(self) -> int:
        if self.max_in_flight:
            return self.max_in_flight
        cpus = int(self.ray.cluster_resources().get("CPU", self.workers) or 1)
        return 4 * max(1, cpus)

    def map(self, fn: Callable, items: Sequence, desc: str | None = None, on_result: Callable | None = None,
            on_crash: Callable | None = None, journal=None) -> list:
        """As ``LocalExecutor.map``; ``journal`` is not needed (no task runs in the driver's process)."""
        items = list(items)
        return collect(self._as_completed(fn, items, on_crash), len(items), desc, on_result)

    def _as_completed(self, fn, items, on_crash=None):
        ray = self.ray
        limit = self._limit()
        fn_ref = ray.put(fn) if len(items) > 1 else fn
        index: dict = {}  # ref -> (item index, run in a child process)
        nxt = 0
        while nxt < len(items) or index:
            while nxt < len(items) and len(index) < limit:
                index[self._remote.remote(fn_ref, items[nxt])] = nxt, False
                nxt += 1
            done, _ = ray.wait(list(index), num_returns=1)
            for ref in done:
                i, in_child = index.pop(ref)
                try:
                    result = ray.get(ref)
                except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                        ray.exceptions.ObjectLostError) as e:
                    if on_crash is None or in_child or not isinstance(e, ray.exceptions.WorkerCrashedError):
                        again = " (and once more, running it in a child process)" if in_child else ""
                        raise WorkerLost(f"a Ray task failed {self.max_retries + 1} times{again} because its worker "
                                         f"or node died ({type(e).__name__}), {describe(items[i])}; max_retries = "
                                         f"{self.max_retries}") from None
                    # Ray does not say how the worker died: once more in a child process, whose signal says it
                    index[self._in_child.remote(fn_ref, items[i])] = i, True
                    continue
                except ray.exceptions.RayTaskError as e:
                    raise e.as_instanceof_cause() from None
                if in_child:
                    result = self._child_result(result, items[i], on_crash)
                yield i, result

    def _child_result(self, outcome: tuple, item, on_crash: Callable):
        """The result of a task whose Ray worker died every time, from its run in a child process
        (``child_call``): its result, its exception raised, ``on_crash``'s result for a crash (SIGSEGV and the
        like: a library failing on the input), or ``WorkerLost`` for a kill (SIGKILL: out of memory?)."""
        kind, value = outcome
        if kind == "ok":  # the worker's deaths were not the task's own (it runs alone in a child)
            return value
        if kind == "raised":
            raise value
        tried = f"its Ray worker died {self.max_retries + 1} times"
        if kind == "signal" and value in CRASH_SIGNALS:
            return on_crash(item, f"{tried}, and run alone in a child process it ended with {signal_name(value)}: "
                                  "a library crashed on its input, damaged or crafted?")
        how = f"ended with {signal_name(value)}" if kind == "signal" else f"exited with code {value}"
        raise WorkerLost(f"{tried} running {describe(item)}, and run alone in a child process it {how} (killed, or "
                         f"out of memory?); max_retries = {self.max_retries}")

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()

    def abort(self) -> None:
        """The driver was interrupted: a local Ray is shut down with its tasks (on a cluster, the tasks in
        flight finish there unread; a rerun redoes them)."""
        self.close()


def _call(fn: Callable, item):
    return fn(item)
