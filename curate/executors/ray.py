"""Ray tasks: the same pipeline file on a Ray cluster (``curate run P.toml --executor ray``).

Each shard task is one Ray task. Workers must see the same file system paths as the driver (a shared
or network file system on a real cluster), since tasks read and write shards and completion markers
there, exactly as with the local executor; resume therefore works the same. Without ``--address``,
a local Ray instance is started with ``workers`` CPUs.
"""
from __future__ import annotations

from typing import Callable, Sequence

from tqdm import tqdm


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
        items = list(items)
        refs = [self._remote.remote(fn, item) for item in items]
        index = {ref: i for i, ref in enumerate(refs)}
        results: list = [None] * len(items)
        bar = tqdm(total=len(items), desc=desc, unit="task", disable=desc is None, leave=False)
        pending = list(refs)
        while pending:
            done, pending = self.ray.wait(pending, num_returns=1)
            for ref in done:
                res = self.ray.get(ref)
                results[index[ref]] = res
                if on_result:
                    on_result(res)
                bar.update()
        bar.close()
        return results

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()


def _call(fn: Callable, item):
    return fn(item)
