"""One run per output folder: ``OUT/run.lock``, held with ``flock`` for the whole run.

The lock file names the process holding it (pid, host, start time, its command line and the command's name,
e.g. ``curate run`` or ``pretrain tokenize``: ``pretrain tokenize --parts`` and ``pretrain ablate`` take the same
lock on their folders). A second run on the same folder stops at once naming the command that holds it (a lock
file written before ``program`` was recorded is named from its command line). The kernel drops a ``flock`` when its process dies, so
the lock of a killed run (SIGKILL, a crashed node's NFS client aside) is seen as stale and taken over.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path

LOCK_FILE = "run.lock"


class LockError(ValueError):
    """The output folder is in use by another run (``holder``: what its lock file says of that run)."""

    def __init__(self, message: str, holder: dict | None = None):
        super().__init__(message)
        self.holder = holder or {}


class OutputLock:
    """The lock of an output folder (``OUT/run.lock``), or, with ``name``, of one output file in it
    (``pretrain eval --output FILE`` takes ``FILE.lock``)."""

    def __init__(self, out: Path, name: str = LOCK_FILE):
        self.path = Path(out) / name
        self.fd: int | None = None
        self.stale: dict | None = None  # what a dead run's lock said, when one was taken over

    def acquire(self) -> "OutputLock":
        for _ in range(10):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read(fd)
                os.close(fd)
                raise LockError(in_use(self._target(), holder), holder) from None
            except OSError as e:
                if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                    raise
                # a file system without flock: the lock holds while the named process is alive on its host
                holder = _read(fd)
                if holder and _alive(holder):
                    os.close(fd)
                    raise LockError(in_use(self._target(), holder), holder) from None
            try:  # the file we locked may have been removed by a run finishing meanwhile: lock the current one
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            previous = _read(fd)
            self.stale = previous or None
            info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "command": " ".join(sys.argv)[:500], "program": command_name(sys.argv)}
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
            self.fd = fd
            return self
        raise LockError(f"could not lock {self.path}: it keeps being replaced by another process")

    def _target(self) -> Path:
        """What the lock guards: the folder, or the file named by a ``FILE.lock``."""
        return self.path.parent if self.path.name == LOCK_FILE else self.path.with_suffix("")

    def release(self) -> None:
        if self.fd is not None:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
            os.close(self.fd)  # closing drops the flock
            self.fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
        return False


def _read(fd: int) -> dict:
    try:
        raw = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
        return json.loads(raw) if raw else {}
    except (OSError, ValueError, RecursionError):
        return {}


def _alive(holder: dict) -> bool:
    if holder.get("host") != socket.gethostname():
        return True  # another machine's process: cannot tell, so the lock holds
    try:
        os.kill(int(holder.get("pid", 0)), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, OSError):
        return True
    return int(holder.get("pid", 0)) > 0


def in_use(folder: Path, holder: dict) -> str:
    kind = "output folder" if folder.is_dir() or not folder.suffix else "output"
    return (f"{folder} is in use by another run: {describe(holder)}; wait for it to finish, or choose another "
            f"{kind}")


def describe(holder: dict) -> str:
    if not holder:
        return "a process that has not written its name yet"
    program = holder.get("program") or command_name(str(holder.get("command") or "").split())
    return (f"`{program}`, pid {holder.get('pid')} on {holder.get('host')}, started {holder.get('started')} "
            f"({holder.get('command', '')})")


def command_name(argv: list[str]) -> str:
    """``curate run``, ``pretrain tokenize``, ...: the program (``python -m X`` and ``X/__main__.py`` are X) and
    its first word when that is a command rather than an option or a file."""
    if not argv:
        return "an unnamed process"
    head = os.path.basename(argv[0])
    if head == "__main__.py":
        head = os.path.basename(os.path.dirname(argv[0])) or head
    rest = argv[1:]
    if head.startswith("python") and rest[:1] == ["-m"] and len(rest) > 1:
        head, rest = rest[1], rest[2:]
    if rest and rest[0].replace("-", "").replace("_", "").isalnum() and not rest[0].startswith("-"):
        return f"{head} {rest[0]}"
    return head
