"""A process pool on this machine, one for the whole run. ``workers=1`` runs everything in-process
(easy to debug and profile).

At most ``max_in_flight`` tasks are submitted at once (default 4 per worker); a task whose worker process
died (killed, out of memory) is retried on a fresh pool up to ``max_retries`` times, then the run stops
with a message saying so.

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
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Sequence

from curate.executors import WorkerLost, collect
from curate.executors.driver_watch import end_with_driver
from curate.native_threads import cpus, limit_native_threads


class LocalExecutor:
    def __init__(self, workers: int = 1, max_in_flight: int = 0, max_retries: int = 3):
        self.workers = max(1, int(workers))
        self.max_in_flight = max_in_flight or 4 * self.workers
        self.max_retries = max_retries
        self._pool: ProcessPoolExecutor | None = None

    def map(self, fn: Callable, items: Sequence, desc: str | None = None, on_result: Callable | None = None) -> list:
        """Run ``fn(item)`` for every item; results in item order. ``on_result(result)`` is called as each finishes."""
        items = list(items)
        if self.workers == 1 or len(items) <= 1:
            return collect(((i, fn(item)) for i, item in enumerate(items)), len(items), desc, on_result)
        return collect(self._completed(fn, items), len(items), desc, on_result)

    def _completed(self, fn: Callable, items: list):
        """(index, result) pairs as tasks finish, never more than ``max_in_flight`` submitted."""
        todo = list(range(len(items)))[::-1]  # popped from the end: submitted in item order
        attempts = [0] * len(items)
        running: dict = {}
        while todo or running:
            pool = self._get_pool()
            broken = False
            try:
                while todo and len(running) < self.max_in_flight:
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
            if lost or broken:
                lost += list(running.values())  # the whole pool is gone: everything in it runs again
                running.clear()
                self._discard_pool()
                for i in lost:
                    attempts[i] += 1
                    if attempts[i] > self.max_retries:
                        raise WorkerLost(f"a worker process died {attempts[i]} times running the same task "
                                         f"(killed, or out of memory?); max_retries = {self.max_retries}")
                todo.extend(sorted(lost, reverse=True))

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.workers, mp_context=mp.get_context("forkserver"),
                                             initializer=_init_worker, initargs=(self.workers, os.getpid()))
        return self._pool

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
