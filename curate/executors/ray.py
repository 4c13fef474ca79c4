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
``--address``, a local Ray instance is started with ``workers`` CPUs. Ctrl-C or SIGTERM while Ray starts is
held back until ``ray.init`` returns, then meets the command's own handler, Ray shut down (``connect_ray``).
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
    if address:
        kwargs = dict(address=address, log_to_driver=False)
    else:
        # "local": a new instance even where RAY_ADDRESS or /tmp/ray/ray_current_cluster names another one
        # (an earlier run's leftover); without it Ray attaches there, and refuses the num_cpus given here
        kwargs = dict(address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    pending: list[int] = []  # signals that came while Ray started
    try:
        with _signals_deferred(pending), _no_failure_handler():
            ray.init(**kwargs)
    finally:
        if pending:  # Ray whole now: the signal does what the command set it to do
            _raise_again(ray, pending[0])
    return ray, True


def _raise_again(ray, signum: int) -> None:
    """A signal held back while Ray started, raised again now that Ray is whole: where it ends the command (the
    default action, or a handler raising ``KeyboardInterrupt`` / ``dispatch.Terminated``), Ray is shut down
    first or on the way out (the command has no executor to shut down yet)."""
    if not callable(signal.getsignal(signum)):  # SIG_DFL: the process ends here
        if ray.is_initialized():
            ray.shutdown()
        signal.raise_signal(signum)
        return
    try:
        signal.raise_signal(signum)  # (Python runs the handler before this returns)
    except BaseException:
        if ray.is_initialized():
            ray.shutdown()
        raise


@contextlib.contextmanager
def _signals_deferred(pending: list):
    """SIGTERM and SIGINT held back while ``ray.init`` runs: one that comes is noted in ``pending``, and raised
    again once Ray is whole (``_raise_again``: the command's handler runs, ``curate run`` and ``pretrain
    tokenize`` end in one line, exit 143 / 130, and Ray is shut down); a second of the same kind goes through
    at once. Met halfway through ``ray.init``, the signal would leave the processes Ray had started running; and
    ``ray.init`` in the main thread sets a SIGTERM handler of its own, ending the process with ``sys.exit(15)``
    (Ray's ``set_sigterm_handler`` does nothing meanwhile: ``_ray_sets_no_sigterm_handler``). The handlers are
    put back afterwards, which also puts Python's signal handling back in front of a C++ failure handler of
    Ray's, should ``_no_failure_handler`` not have kept it out. Not a signal mask: the processes Ray starts
    (raylet, GCS, workers) would inherit it and never see SIGTERM."""
    if threading.current_thread() is not threading.main_thread():  # (no handler can be set: nor can Ray's)
        yield
        return
    saved = {}
    for signum in (signal.SIGTERM, signal.SIGINT):
        handler = signal.getsignal(signum)
        if handler is not None and handler is not signal.SIG_IGN:  # (None: set outside Python, cannot be put back)
            saved[signum] = handler

    def defer(signum, frame):
        if signum in pending:  # the second one: at once, as without Ray
            signal.signal(signum, saved[signum])
            signal.raise_signal(signum)
        else:
            pending.append(signum)

    for signum in saved:
        signal.signal(signum, defer)
    try:
        with _ray_sets_no_sigterm_handler():
            yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def _ray_sets_no_sigterm_handler():
    """``ray._private.utils.set_sigterm_handler`` (what ``ray.init`` calls to set its own SIGTERM handler) doing
    nothing meanwhile."""
    try:
        from ray._private import utils
    except ImportError:  # pragma: no cover - another Ray layout: Ray's handler stays possible while it starts
        yield
        return
    name = "set_sigterm_handler"
    before = getattr(utils, name, None)
    if before is None:  # pragma: no cover - as above
        yield
        return
    setattr(utils, name, lambda handler: None)
    try:
        yield
    finally:
        setattr(utils, name, before)


@contextlib.contextmanager
def _no_failure_handler():
    """This process's Ray core worker started without Ray's C++ failure signal handler (Ray's
    ``RAY_DISABLE_FAILURE_SIGNAL_HANDLER``, here for this process only, not for the workers Ray starts), which
    answers SIGTERM with a crash dump before passing it on. A crash of this process is still reported by
    Python's ``faulthandler`` (which ``curate`` and ``pretrain`` enable)."""
    try:
        from ray._private import ray_constants
    except ImportError:  # pragma: no cover - another Ray layout: the dump stays possible while Ray starts
        yield
        return
    name = "RAY_DISABLE_FAILURE_SIGNAL_HANDLER"
    before = getattr(ray_constants, name, None)
    setattr(ray_constants, name, True)
    try:
        yield
    finally:
        if before is None:
            delattr(ray_constants, name)
        else:
            setattr(ray_constants, name, before)


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
