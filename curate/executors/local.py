"""A process pool on this machine, one for the whole run. ``workers=1`` runs everything in-process
(easy to debug and profile), and so does a step of one task.

At most ``max_in_flight`` tasks are submitted at once (default 4 per worker); a task whose worker process
died (killed, out of memory, crashed) is retried on a fresh pool up to ``max_retries`` times, then once by
itself (a dead worker takes the whole pool's tasks with it: only the one that dies alone is blamed); then the
run stops with a message naming the task and the signal, or, for a crash (SIGSEGV and the like: a library
failing on the task's input) where the caller gave ``on_crash``, that is the task's result (a read task sets
its split aside as ``read_crashed``). In-process, a crash ends the run; with a ``journal`` file, the task
running is noted there, and the rerun runs the task that the last run died in in a child process (the pool
above, one worker), so that its crash is survived as well.

Each worker's BLAS and OpenMP thread pools get its share of the CPUs (one thread each when there are as
many workers as CPUs). Workers ignore SIGINT: Ctrl-C reaches the whole process group, and only the driver
acts on it (one line, not a traceback per worker). :meth:`LocalExecutor.abort` (the driver interrupted or
sent SIGTERM) ends the workers at once instead of waiting for their tasks; the forkserver and the resource
tracker then exit with the driver. A driver that dies without ending them (SIGKILL) leaves no worker behind
either: each ends itself within a second (``driver_watch``).
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Callable, Sequence

from curate.executors import WorkerLost, collect, describe
from curate.executors.driver_watch import end_with_driver
from curate.native_threads import cpus, limit_native_threads


CRASH_SIGNALS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGILL, signal.SIGFPE)


class LocalExecutor:
    handles_crashes = True  # map() takes on_crash

    def __init__(self, workers: int = 1, max_in_flight: int = 0, max_retries: int = 3):
        self.workers = max(1, int(workers))
        self.max_in_flight = max_in_flight or 4 * self.workers
        self.max_retries = max_retries
        self._pool: ProcessPoolExecutor | None = None

    def map(self, fn: Callable, items: Sequence, desc: str | None = None, on_result: Callable | None = None,
            on_crash: Callable | None = None, journal: Path | None = None) -> list:
        """Run ``fn(item)`` for every item; results in item order. ``on_result(result)`` is called as each finishes.
        ``on_crash(item, why)``, when given, is the result of a task whose worker crashed (SIGSEGV, SIGBUS,
        SIGABRT: a library failed on its input) every time it ran, instead of stopping the run; a worker
        killed (SIGKILL: out of memory?) still stops it. One task alone (or ``workers = 1``) runs in this
        process: a crash there ends the run (the crash's traceback on stderr); see ``_in_process`` for what
        ``journal`` does about that."""
        items = list(items)
        if self.workers == 1 or len(items) <= 1:
            return collect(self._in_process(fn, items, on_crash, journal), len(items), desc, on_result)
        return collect(self._completed(fn, items, on_crash), len(items), desc, on_result)

    def _in_process(self, fn: Callable, items: list, on_crash: Callable | None, journal: Path | None):
        """(index, result) pairs, each task run in this process, except the one that the last run died in: with
        ``on_crash`` and a ``journal`` file, each task is noted there while it runs (its ``describe`` text;
        the note is removed when it returns or raises), so a note found at the start names the task running
        when the process ended without unwinding (a crash, or a kill). That task runs in a child process
        this time (a pool of one worker, retried as above), and a crash there is ``on_crash``'s."""
        if on_crash is None or journal is None:
            yield from ((i, fn(item)) for i, item in enumerate(items))
            return
        from curate.shards import read_record, write_json  # (not at import: workers import this module)

        last = read_record(journal)
        journal.unlink(missing_ok=True)
        died_in = last.get("running") if last else None
        for i, item in enumerate(items):
            what = describe(item)
            if what == died_in:
                print(f"curate: the last run ended while {what} (a crash?); it runs in a child process this "
                      f"time", file=sys.stderr, flush=True)
                yield from ((i, result) for _, result in self._completed(fn, [item], on_crash))
                continue
            write_json({"running": what}, journal)
            try:
                result = fn(item)
            finally:
                journal.unlink(missing_ok=True)
            yield i, result

    def _completed(self, fn: Callable, items: list, on_crash: Callable | None = None):
        """(index, result) pairs as tasks finish, never more than ``max_in_flight`` submitted. A dead worker
        breaks the whole pool, so every task in flight is charged an attempt; one charged more than
        ``max_retries`` times among others runs again by itself, so that only the task that kills its worker
        is blamed (``on_crash``, or ``WorkerLost`` naming it)."""
        todo = list(range(len(items)))[::-1]  # popped from the end: submitted in item order
        attempts = [0] * len(items)
        alone: list[int] = []  # tasks to run by themselves next
        solo = None  # the one running by itself
        running: dict = {}
        while todo or alone or running:
            pool = self._get_pool()
            broken = False
            try:
                if solo is None and alone and not running:
                    solo = alone.pop()
                    running[pool.submit(fn, items[solo])] = solo
                while solo is None and not alone and todo and len(running) < self.max_in_flight:
                    i = todo.pop()
                    running[pool.submit(fn, items[i])] = i
                done, _ = wait(running, return_when=FIRST_COMPLETED)
            except BrokenProcessPool:
                broken = True
                done = [f for f in running if f.done()]
            lost = []
            for fut in done:
                i = running.pop(fut)
                try:
                    result = fut.result()
                except BrokenProcessPool:
                    lost.append(i)
                    continue
                yield i, result
            if solo is not None and solo not in running.values():
                solo = None
            if lost or broken:
                lost += list(running.values())  # the whole pool is gone: everything in it runs again
                running.clear()
                solo = None
                how, crashed = self._how_workers_died()
                self._discard_pool()
                again = []
                for i in lost:
                    attempts[i] += 1
                    if attempts[i] <= self.max_retries:
                        again.append(i)
                    elif len(lost) > 1:  # which of them killed the pool is not known yet
                        attempts[i] = self.max_retries
                        alone.append(i)
                    elif crashed and on_crash is not None:
                        yield i, on_crash(items[i], f"its worker crashed {attempts[i]} times ({how})")
                    else:
                        raise WorkerLost(f"a worker process died {attempts[i]} times running the same task, "
                                         f"{describe(items[i])} ({how}); max_retries = {self.max_retries}")
                todo.extend(sorted(again, reverse=True))  # run again first

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.workers, mp_context=mp.get_context("forkserver"),
                                             initializer=_init_worker, initargs=(self.workers, os.getpid()))
        return self._pool

    def _how_workers_died(self) -> tuple[str, bool]:
        """Why the pool's dead workers ended, in words (their exit signals), and whether one crashed (a
        signal of a failing library, not of a kill)."""
        processes = list((getattr(self._pool, "_processes", None) or {}).values())  # (CPython's pool keeps them there)
        # the pool's manager thread ends the other workers and reaps them all; read the statuses only after
        # it is done: a forkserver child's status is read once from a pipe, and two threads reading it at once
        # leave one of them "exit 255" (which had made a SIGSEGV read as an unknown death now and then)
        manager = getattr(self._pool, "_executor_manager_thread", None)
        if manager is not None:
            manager.join(timeout=10)
        telling = {-s for s in CRASH_SIGNALS} | {-signal.SIGKILL}
        deadline = time.monotonic() + 10  # (2 s was once too short on a loaded 2-core machine)
        while True:  # a status may still be a moment away: wait for a signal that says what happened, or for
            codes = {p.exitcode for p in processes if p.exitcode not in (None, 0)}  # every worker's status
            if codes & telling or all(p.exitcode is not None for p in processes) or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        for sig in CRASH_SIGNALS:
            if -sig in codes:
                return f"{sig.name}: a library crashed on its input, damaged or crafted?", True
        if -signal.SIGKILL in codes:
            return "SIGKILL: killed, or out of memory?", False
        return (f"exit {', '.join(map(str, sorted(codes)))}" if codes else "killed, or out of memory?"), False

    def _discard_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def abort(self) -> None:
        """End the workers now (their tasks are lost: no marker was written, a rerun redoes them)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        processes = list((getattr(pool, "_processes", None) or {}).values())  # (CPython's pool keeps them there)
        if hasattr(pool, "terminate_workers"):  # Python 3.14+
            pool.terminate_workers()
        for p in processes:
            if p.is_alive():
                p.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        for p in processes:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)


def _init_worker(workers: int, driver_pid: int) -> None:
    """Ctrl-C is the driver's to handle; numpy's BLAS and OpenMP pools get this worker's share of the CPUs
    (``curate.native_threads``); the worker ends when the driver is gone (``driver_watch``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    end_with_driver(driver_pid)
    limit_native_threads(cpus() // workers)
