"""The per-document time limit: CPU time, not wall time, so a page gets the same verdict on a busy machine as on
an idle one and a rerun sets aside the same pages.

A ``SIGPROF`` interval timer (``ITIMER_PROF``: the process's CPU seconds) is armed around each call. It works
on POSIX, in the main thread of the process (the local executor's workers and ``workers = 1`` both run
stages in their main thread); elsewhere the deadline does nothing. Python code is interrupted as soon as
the timer fires; a running C call (lexbor, resiliparse) is not, and the handler runs the moment it returns:
the document is still set aside, but the time was spent. What bounds the C part is the stage's size limit
and the depth guards of the engines.

The timer repeats every ``RETRY_S`` after it first fires: an exception raised while Python runs a finalizer
(a weakref callback, ``__del__``) is printed and dropped by the interpreter, so one signal alone may be lost.
And a call that returns after its time ran out (its first exception dropped) is still a timeout: the verdict
depends only on the CPU time spent, not on where the signal happened to land.
"""
from __future__ import annotations

import signal
import threading


class ExtractTimeout(BaseException):
    pass


RETRY_S = 0.02


class CpuDeadline:
    """Arms a CPU-time interval timer (``ITIMER_PROF``, signal ``SIGPROF``) per call when that is possible
    (POSIX, main thread)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.enabled = (seconds > 0 and hasattr(signal, "setitimer")
                        and threading.current_thread() is threading.main_thread())
        self._old = None
        self.expired = False

    def _on_alarm(self, signum, frame):
        self.expired = True
        raise ExtractTimeout()

    def __enter__(self):
        if self.enabled:
            self._old = signal.signal(signal.SIGPROF, self._on_alarm)
        return self

    def __exit__(self, *exc):
        if self.enabled:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, self._old)
        return False

    def call(self, fn, *args):
        if not self.enabled:
            return fn(*args)
        self.expired = False
        try:
            signal.setitimer(signal.ITIMER_PROF, self.seconds, RETRY_S)
            result = fn(*args)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
        if self.expired:
            raise ExtractTimeout()
        return result
