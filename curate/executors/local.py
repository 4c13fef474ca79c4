"""A process pool on this machine. ``workers=1`` runs everything in-process (easy to debug and profile)."""
from __future__ import annotations

import multiprocessing as mp
from typing import Callable, Sequence

from curate.executors import collect


class LocalExecutor:
    def __init__(self, workers: int = 1):
        self.workers = max(1, int(workers))

    def map(self, fn: Callable, items: Sequence, desc: str | None = None, on_result: Callable | None = None) -> list:
        """Run ``fn(item)`` for every item; results in item order. ``on_result(result)`` is called as each finishes."""
        items = list(items)
        if self.workers == 1 or len(items) <= 1:
            return collect(((i, fn(item)) for i, item in enumerate(items)), len(items), desc, on_result)
        ctx = mp.get_context("forkserver")
        with ctx.Pool(min(self.workers, len(items))) as pool:
            pairs = pool.imap_unordered(_indexed, [(fn, i, it) for i, it in enumerate(items)])
            return collect(pairs, len(items), desc, on_result)

    def close(self) -> None:
        pass


def _indexed(args: tuple) -> tuple:
    fn, i, item = args
    return i, fn(item)
