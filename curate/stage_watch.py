"""A per-document CPU limit for map stages that holds inside C code: the stages run in a watched child process.

A signal cannot stop a parser or tokenizer busy in C (lexbor, spaCy's tokenizer, fastText): the handler runs
only when the call returns, which may be never. So a step's map stages run in a child process forked from the
task process (``Sandbox``). The task process keeps its child from task to task (``kept_sandbox``), so what the
stages learn there, spaCy's chunk memo above all, serves the next task as it serves the next batch: a child per
task started cold every time, and ran the heuristic filters at under half their speed
(``benchmarks/stage_watch_overhead.py``). The task process sends it a batch (Arrow IPC over a pipe), the child runs
``stage.apply`` and sends back what it kept and set aside. Meanwhile the task process watches the child's CPU
time (``/proc/<pid>/stat``; wall time where there is no ``/proc``):

- a stage says which document it is on with ``at_doc(i)`` (the heuristic filters and ``extract`` do, per
  document) or that it works on ``n`` at once with ``at_batch(n)`` (the default when a batch starts);
- when the CPU time since that mark passes ``limit_s`` (``limit_s x n`` for a batch step), the child is
  killed (SIGKILL: nothing in it can resist) and ``StageTimeout`` names the document (or none, for a batch
  step); ``curate.chain`` then sets that document aside as ``stage_timeout`` and runs the others again in a
  fresh child (by halving the batch where no document was named, as for ``stage_error``).

The child runs numpy's BLAS and OpenMP pools on one thread (``curate.native_threads``): threads spinning beside
the document's work would count in its CPU time.

A document that crashes the child (SIGSEGV in a C library) is found the same way and set aside as
``stage_error`` naming the signal. The child dies with the task process (``PR_SET_PDEATHSIG``) and ends when its
pipe closes or its ``Sandbox`` is collected (a kept one: ``close_kept``, at the end of a run, or when the
worker process ends); one interrupted between a request and its reply is ended and started afresh. Exceptions in the
child come back as their type name and message: ``OSError``, ``MemoryError``, ``RecursionError`` and
``StageFailure`` are raised again as such (they stop the run), any other as ``StageRaised``.
"""
from __future__ import annotations

import ctypes
import faulthandler
import json
import mmap
import os
import select
import signal
import struct
import threading
import time
import weakref

import pyarrow as pa

from curate.native_threads import limit_native_threads
from curate.stages.base import BatchContext, StageResult

POLL_S = 0.05
_SLOT = struct.Struct("<qqq")  # sequence number, document index (-1: a batch step), documents in the step
_shared: mmap.mmap | None = None  # set in a watched child only
_KEPT: dict[tuple[int, int, object], "Sandbox"] = {}  # (process id, thread id, build) -> a kept child


class StageTimeout(Exception):
    """The child spent more than its limit on one document (``doc``: its row in the batch) or on a batch
    step (``doc`` None)."""

    def __init__(self, doc: int | None, seconds: float):
        self.doc, self.seconds = doc, seconds
        what = "this document" if doc is not None else "a batch step"
        super().__init__(f"more than {seconds:g} CPU seconds on {what} (stage_timeout_s)")


class StageRaised(RuntimeError):
    """An exception raised by a stage in the child: its type name and message."""

    def __init__(self, type_name: str, message: str):
        self.type_name = type_name
        super().__init__(message)


def at_doc(i: int) -> None:
    """The stage starts on row ``i`` of its batch: from now on, the time counts against that document."""
    if _shared is not None:
        _mark(i, 1)


def at_batch(n: int) -> None:
    """The stage works on ``n`` documents at once (a batched call): the limit is ``n`` times the per-document
    one until the next mark."""
    if _shared is not None:
        _mark(-1, max(1, n))


def _mark(doc: int, n: int) -> None:
    seq = _SLOT.unpack_from(_shared, 0)[0]
    _SLOT.pack_into(_shared, 0, seq + 1, doc, n)


def available() -> bool:
    return hasattr(os, "fork") and hasattr(os, "pipe")


# --- messages: a JSON header and Arrow IPC tables, each length-prefixed ---------------------------------

def _write_all(fd: int, data) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int) -> bytes:
    parts, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _send(fd: int, header: dict, tables: list[pa.Table]) -> None:
    blobs = []
    for t in tables:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, t.schema) as w:
            w.write_table(t)
        blobs.append(sink.getvalue())
    head = json.dumps({**header, "tables": [b.size for b in blobs]}).encode()
    _write_all(fd, struct.pack("<q", len(head)) + head)
    for b in blobs:
        _write_all(fd, b)


def _receive(fd: int) -> tuple[dict, list[pa.Table]]:
    (n,) = struct.unpack("<q", _read_exact(fd, 8))
    header = json.loads(_read_exact(fd, n))
    tables = [pa.ipc.open_stream(pa.py_buffer(_read_exact(fd, size))).read_all() for size in header["tables"]]
    return header, tables


# --- the child ------------------------------------------------------------------------------------------

def _child(requests: int, replies: int, shared: mmap.mmap, build) -> None:
    global _shared
    _shared = shared
    try:  # die with the task process
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the task process's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the task process's handlers
    faulthandler.disable()  # a crash here is reported by the task process (the document's `error`)
    limit_native_threads(1)  # one document at a time, under a limit on this process's CPU time
    batch, context = None, None
    while True:
        try:
            header, (table,) = _receive(requests)
        except EOFError:
            return
        if header["batch"] != batch:
            batch, context = header["batch"], BatchContext()
        at_batch(table.num_rows)
        try:
            stage = build(*header["stage"])
            result = stage.apply(table, context)
            _send(replies, {"added": result.added, "counters": result.counters}, [result.kept, result.dropped])
        except Exception as e:  # noqa: BLE001 - sent back to the task process, which decides
            _send(replies, {"error": type(e).__name__, "kind": _kind(e), "message": str(e)[:2000],
                            "errno": getattr(e, "errno", None)}, [])


def _kind(e: BaseException) -> str:
    from curate.chain import StageFailure

    for kind in (StageFailure, MemoryError, RecursionError, OSError):
        if isinstance(e, kind):
            return kind.__name__
    return ""


def _raise(header: dict):
    from curate.chain import StageFailure

    kind, message = header["kind"], header["message"]
    if kind == "OSError":
        raise OSError(header["errno"] or 0, message) if header["errno"] else OSError(message)
    raise {"StageFailure": StageFailure, "MemoryError": MemoryError,
           "RecursionError": RecursionError}.get(kind, lambda m: StageRaised(header["error"], m))(message)


# --- the task process's side ----------------------------------------------------------------------------

def _kill(pid: int, *fds: int) -> int:
    """Close the pipes, kill the child and reap it: its wait status."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return 0


def kept_sandbox(build) -> "Sandbox":
    """This process's ``Sandbox`` for ``build``, kept from task to task (its child starts on first use)."""
    # a process forked from one holding a kept child never uses that child; tasks run in threads get one each
    key = (os.getpid(), threading.get_ident(), build)
    box = _KEPT.get(key)
    if box is None:
        box = _KEPT[key] = Sandbox(build)
    return box


def close_kept() -> None:
    """End this process's kept children (the driver does at the end of a run: with ``workers = 1`` the tasks
    ran in it, and it may go on to do other things)."""
    for key in [k for k in _KEPT if k[0] == os.getpid()]:
        _KEPT.pop(key).close()


class Sandbox:
    """A child process that runs map stages on batches, watched for CPU time per document."""

    def __init__(self, build):
        self.build = build  # (type, name, params_json) -> stage, in the child
        self.pid = None
        self.batch = 0
        self.busy = False  # a request sent whose reply was not read: the child's answer would be out of step

    def _start(self) -> None:
        self.shared = mmap.mmap(-1, mmap.PAGESIZE)
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 0
            try:
                os.close(req_w)
                os.close(rep_r)
                _child(req_r, rep_w, self.shared, self.build)
            except BaseException:  # noqa: BLE001 - the task process sees the pipe close
                code = 1
            finally:
                os._exit(code)
        os.close(req_r)
        os.close(rep_w)
        self.pid, self.requests, self.replies = pid, req_w, rep_r
        # a task that stops on an error never calls close(): the child ends when this object goes
        self._finalizer = weakref.finalize(self, _kill, pid, req_w, rep_r)
        self.proc_stat = f"/proc/{pid}/stat" if os.path.exists(f"/proc/{pid}/stat") else None

    def new_batch(self) -> None:
        self.batch += 1

    def apply(self, stage_key: tuple, table: pa.Table, limit_s: float) -> StageResult:
        if self.busy:  # the last call was interrupted (Ctrl-C, an error in the task process): start afresh
            self._end()
        if self.pid is None:
            self._start()
        try:
            self.busy = True
            _send(self.requests, {"stage": list(stage_key), "batch": self.batch}, [table])
            header, tables = self._wait(limit_s, table.num_rows)
            self.busy = False
        except (EOFError, BrokenPipeError) as e:
            status = self._end()
            raise RuntimeError(f"the stage's process ended ({status}) while it ran on this batch") from e
        if "error" in header:
            _raise(header)
        return StageResult(tables[0], tables[1], header["added"], header["counters"])

    def _wait(self, limit_s: float, n: int):
        seq, doc, count = _SLOT.unpack_from(self.shared, 0)
        mark, allowance = self._cpu(), limit_s * max(1, n)
        wall_start = time.monotonic()
        while True:
            ready, _, _ = select.select([self.replies], [], [], POLL_S)
            if ready:
                return _receive(self.replies)
            now_seq, now_doc, now_count = _SLOT.unpack_from(self.shared, 0)
            cpu = self._cpu()
            if now_seq != seq:
                seq, doc, count = now_seq, now_doc, now_count
                mark, allowance = cpu, limit_s * max(1, count)
            stuck = time.monotonic() - wall_start > 10 * limit_s * max(1, n) + 60  # no CPU used, no answer
            if cpu - mark > allowance or stuck:
                self._end()
                raise StageTimeout(doc if doc >= 0 else None, limit_s)

    def _cpu(self) -> float:
        if self.proc_stat is None:
            return time.monotonic()
        try:
            with open(self.proc_stat, "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return time.monotonic()

    def _end(self) -> str:
        """Kill the child (if it still runs) and reap it; the next ``apply`` starts a fresh one."""
        self.busy = False
        if self.pid is None:
            return "not started"
        self._finalizer.detach()
        status = _kill(self.pid, self.requests, self.replies)
        self.pid = None
        self.shared.close()
        return f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"

    def close(self) -> None:
        """End the child: its pipe closes, it exits (killed if it does not at once)."""
        if self.pid is None:
            return
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, lambda: None)
        os.close(self.requests)
        self.requests = -1
        for _ in range(100):
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.replies)
                self.pid = None
                self.shared.close()
                return
            time.sleep(0.01)
        self._end()
