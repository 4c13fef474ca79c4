"""Executors run a top-level function over a list of items and return the results in order.

- ``local``: a process pool on this machine (the default; ``workers=1`` runs in-process).
- ``ray``: Ray tasks on a Ray cluster (``curate run --executor ray [--address ADDR]``).

Both keep at most ``max_in_flight`` tasks submitted and handle each completion in constant time, so a
step of 100,000 tasks costs the driver linear time; task arguments and results stay small (paths and
counts), the data moves through the output folder.
"""
from __future__ import annotations

import os


class WorkerLost(RuntimeError):
    """A task's worker died (process killed, node lost) more often than ``max_retries`` allows."""


def describe(item) -> str:
    """A task in words, for a message: the input it reads, else its repr cut short. Executors run
    ``tasks.call((fn, task))``; a read task names its split's file, a map task its shard."""
    task = item[1] if isinstance(item, tuple) and len(item) == 2 and callable(item[0]) else item
    split = getattr(task, "split", None)
    if isinstance(split, dict) and "path" in split:
        from curate.readers import split_where

        where = split_where(split)
        return f"reading {split['path']}" + (f" {where}" if where else "")
    if isinstance(getattr(task, "input", None), str):
        return f"running the stages on {task.input}"
    text = repr(task)
    return text if len(text) <= 300 else text[:300] + "..."


def make_executor(name: str = "local", workers: int = 1, address: str | None = None,
                  max_in_flight: int = 0, max_retries: int = 3):
    if name == "local":
        from curate.executors.local import LocalExecutor

        cpus = os.cpu_count() or 1
        if workers > 16 * cpus:  # each worker is a process holding its stages' models: hundreds of MB
            from curate.config import ConfigError

            raise ConfigError(f"workers = {workers} is more than 16 per CPU of this machine ({cpus} CPUs): each "
                              f"worker is a process of its own; use at most {16 * cpus} here ({cpus}, one per CPU, is usually "
                              "fastest), or --executor ray for more")

        return LocalExecutor(workers, max_in_flight=max_in_flight, max_retries=max_retries)
    if name == "ray":
        from curate.executors.ray import RayExecutor

        return RayExecutor(address=address, workers=workers, max_in_flight=max_in_flight, max_retries=max_retries)
    raise ValueError(f"unknown executor {name!r}; choose 'local' or 'ray'")


def collect(pairs, n: int, desc: str | None = None, on_result=None) -> list:
    """Results in item order from ``(index, result)`` pairs arriving in completion order, with a
    progress bar (when ``desc`` is set) and ``on_result(result)`` called as each arrives."""
    from tqdm import tqdm

    from curate.progress import bars_wanted

    results: list = [None] * n
    quiet = desc is None or not bars_wanted()  # a bar written to a file is one long line of carriage returns
    with tqdm(total=n, desc=desc, unit="task", disable=quiet, leave=False) as bar:
        for i, res in pairs:
            results[i] = res
            if on_result:
                on_result(res)
            bar.update()
    return results
