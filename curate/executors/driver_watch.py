"""A pool worker ends when the process that started its pool is gone.

A worker of a forkserver pool is the fork server's child, not the driver's, and it waits on a queue whose
write end it holds itself: when the driver dies without ending its pool (SIGKILL, an out-of-memory kill,
SIGTERM to a command that does not unwind on it) nothing tells the worker, and it waits for ever with its
models loaded (hundreds of MB), keeping the fork server and the resource tracker alive with it. A daemon
thread in each worker checks every second that the driver is still there and ends the worker when not; the
fork server and resource tracker then see their last client go and exit too."""
from __future__ import annotations

import os
import threading
import time

CHECK_EVERY_S = 1.0


def end_with_driver(driver_pid: int, every_s: float = CHECK_EVERY_S) -> None:
    """In a worker: end this process (exit status 1) once ``driver_pid`` no longer exists (or belongs to
    another user: the driver's pid was reused)."""

    def watch() -> None:
        while True:
            time.sleep(every_s)
            if not _alive(driver_pid):
                os._exit(1)

    threading.Thread(target=watch, name="end-with-driver", daemon=True).start()


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs: a process killed but not yet reaped by its parent (a zombie: ``os.kill(pid, 0)``
    still succeeds) is gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # the pid now belongs to another user's process: ours is gone
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]  # the name in parentheses may hold anything
    except (OSError, IndexError):
        return True  # no /proc (not Linux): the signal test above is all there is
    return state not in (b"Z", b"X")
