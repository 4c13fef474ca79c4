"""Executors run a top-level function over a list of items and return the results in order.

- ``local``: a process pool on this machine (the default; ``workers=1`` runs in-process).
- ``ray``: Ray tasks on a Ray cluster (``curate run --executor ray [--address ADDR]``).
"""
from __future__ import annotations


def make_executor(name: str = "local", workers: int = 1, address: str | None = None):
    if name == "local":
        from curate.executors.local import LocalExecutor

        return LocalExecutor(workers)
    if name == "ray":
        from curate.executors.ray import RayExecutor

        return RayExecutor(address=address, workers=workers)
    raise ValueError(f"unknown executor {name!r}; choose 'local' or 'ray'")


def collect(pairs, n: int, desc: str | None = None, on_result=None) -> list:
    """Results in item order from ``(index, result)`` pairs arriving in completion order, with a
    progress bar (when ``desc`` is set) and ``on_result(result)`` called as each arrives."""
    from tqdm import tqdm

    results: list = [None] * n
    with tqdm(total=n, desc=desc, unit="task", disable=desc is None, leave=False) as bar:
        for i, res in pairs:
            results[i] = res
            if on_result:
                on_result(res)
            bar.update()
    return results
