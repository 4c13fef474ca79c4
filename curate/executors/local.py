"""A process pool on this machine. ``workers=1`` runs everything in-process (easy to debug and profile)."""
from __future__ import annotations

import multiprocessing as mp
from typing import Callable, Iterable, Sequence

from tqdm import tqdm


class LocalExecutor:
    def __init__(self, workers: int = 1):
        self.workers = max(1, int(workers))

    def map(self, fn: Callable, items: Sequence, desc: str | None = None, on_result: Callable | None = None) -> list:
        """Run ``fn(item)`` for every item; results in item order. ``on_result(result)`` is called as each finishes."""
        items = list(items)
        results: list = [None] * len(items)
        bar = tqdm(total=len(items), desc=desc, unit="task", disable=desc is None, leave=False)
        if self.workers == 1 or len(items) <= 1:
            for i, item in enumerate(items):
                results[i] = fn(item)
                if on_result:
                    on_result(results[i])
                bar.update()
        else:
            ctx = mp.get_context("forkserver")
            with ctx.Pool(min(self.workers, len(items))) as pool:
                for i, res in pool.imap_unordered(_indexed, [(fn, i, it) for i, it in enumerate(items)]):
                    results[i] = res
                    if on_result:
                        on_result(res)
                    bar.update()
        bar.close()
        return results

    def close(self) -> None:
        pass


def _indexed(args: tuple) -> tuple:
    fn, i, item = args
    return i, fn(item)


def run_all(fn: Callable, items: Iterable, workers: int = 1) -> list:
    return LocalExecutor(workers).map(fn, list(items))
