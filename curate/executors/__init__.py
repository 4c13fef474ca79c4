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
