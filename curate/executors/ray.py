"""Ray tasks: the same pipeline file on a Ray cluster (``curate run P.toml --executor ray``).

Each shard task is one Ray task. Workers must see the same file system paths as the driver (a shared
or network file system on a real cluster), since tasks read and write shards and completion markers
there, exactly as with the local executor; resume therefore works the same. Without ``--address``,
a local Ray instance is started with ``workers`` CPUs.
"""
from __future__ import annotations

from typing import Callable, Sequence

from curate.executors import collect


class RayExecutor:
    def __init__(self, address: str | None = None, workers: int = 1):
        try:
            import ray
        except ImportError as e:  # pragma: no cover - ray is an optional dependency
            raise ValueError("the ray executor needs Ray: pip install 'ray[default]'") from e
        self.ray = ray
        self._started = False
        if not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)
            self._started = True
        self._remote = ray.remote(_call)
        self.workers = workers

    def map(self, fn: Callable, items: Sequence, desc: str | None = None, on_result: Callable | None = None) -> list:
        refs = [self._remote.remote(fn, item) for item in items]
        index = {ref: i for i, ref in enumerate(refs)}
        return collect(self._as_completed(refs, index), len(refs), desc, on_result)

    def _as_completed(self, refs, index):
        pending = list(refs)
        while pending:
            done, pending = self.ray.wait(pending, num_returns=1)
            for ref in done:
                yield index[ref], self.ray.get(ref)

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()


def _call(fn: Callable, item):
    return fn(item)
