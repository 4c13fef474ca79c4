"""Standard output and error that a reader gone away cannot kill: what ``dispatch`` puts around every command of
``curate`` and ``pretrain``.

``curate run P.toml | head -1`` closes the pipe after one line; the next write to it fails with EPIPE
(``BrokenPipeError``: Python ignores SIGPIPE). Without this, that error escaped from whatever line printed: a run
died mid-way (a step's message), or after its work, printing the funnel table, with a traceback and exit status 1.
Here a write or flush that fails is dropped instead, and so is all later output to that stream: the stream's file
descriptor is pointed at ``os.devnull`` (as the Python docs recommend for SIGPIPE), so that what its buffer still
holds, the flush at exit and any child process started later (a process pool's workers, torchrun's) write there
without an error. The command goes on and its exit status is its own: 0 for a run that succeeded, whether or not
anybody read its output to the end (``curate stats OUT | head -1`` exits 0 too: the reader stopping early is not
an error of the command; Unix tools that die of SIGPIPE exit 141 instead). The same holds for standard error (a
progress line, a warning). A failed write other than a closed pipe or socket (a full disk behind ``> file``, an
I/O error) is dropped the same way, and said in one line on standard error when the command ends.

A standard stream that is closed when the command starts (``curate run P.toml >&-``) is opened on ``os.devnull``,
so that no file the command opens takes descriptor 0, 1 or 2 (a library writing to "stderr" would write into it).
"""
from __future__ import annotations

import errno
import os
import sys

# the reader is gone: nothing to say, nobody to say it to
READER_GONE = {errno.EPIPE, errno.ECONNRESET, getattr(errno, "ESHUTDOWN", errno.EPIPE)}


class GuardedStream:
    """A text stream that forwards to ``stream`` until a write or flush fails with an ``OSError``; from then on
    it drops what it is given (``failure`` holds the error)."""

    def __init__(self, stream, name: str):
        self._stream = stream
        self.name = name  # "stdout" or "stderr"
        self.failure: OSError | None = None

    def __getattr__(self, attr):  # fileno, isatty, encoding, buffer, ...: the stream's
        return getattr(self._stream, attr)

    @property
    def wrapped(self):
        return self._stream

    def write(self, text):
        if self.failure is None:
            try:
                return self._stream.write(text)
            except OSError as e:
                self._fail(e)
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.failure is None:
            try:
                self._stream.flush()
            except OSError as e:
                self._fail(e)

    def _fail(self, e: OSError) -> None:
        self.failure = e
        try:
            fd = self._stream.fileno()
        except (OSError, ValueError, AttributeError):  # not a file (a test's StringIO): dropping is enough
            return
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, fd)
            finally:
                os.close(null)
            self._stream.flush()  # what its buffer still holds goes to /dev/null now, not at exit with an error
        except (OSError, ValueError):
            pass

    def lost(self) -> str | None:
        """A line saying what was lost when a write failed for another reason than a reader gone, else None."""
        e = self.failure
        if e is None or e.errno in READER_GONE:
            return None
        return f"output to {self.name} could not be written ({e.strerror or e}) and was dropped"


def open_closed_std_fds() -> None:
    """Standard descriptors closed at start (``>&-``, ``2>&-``) opened on ``os.devnull``, and ``sys.stdin``,
    ``sys.stdout``, ``sys.stderr`` set on them where Python left them None."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        try:
            null = os.open(os.devnull, os.O_RDONLY if mode == "r" else os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            if getattr(sys, name) is None:
                setattr(sys, name, open(fd, mode, closefd=False, errors="backslashreplace" if fd == 2 else None))
        except OSError:
            pass


class guarded_std_streams:
    """``with guarded_std_streams() as guards:`` sys.stdout and sys.stderr guarded inside (not twice), flushed
    and restored at the end."""

    def __enter__(self) -> list[GuardedStream]:
        open_closed_std_fds()
        self.guards, self.installed = [], []
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if stream is None:
                continue
            if isinstance(stream, GuardedStream):  # a command run from a command (in one process)
                self.guards.append(stream)
                continue
            guard = GuardedStream(stream, name)
            setattr(sys, name, guard)
            self.guards.append(guard)
            self.installed.append((name, guard))
        return self.guards

    def __exit__(self, *exc) -> bool:
        for name, guard in self.installed:
            guard.flush()  # now, so that the flush at exit has nothing left to fail on
            if getattr(sys, name) is guard:
                setattr(sys, name, guard.wrapped)
        return False
