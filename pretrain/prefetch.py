"""The input pipeline off the training loop's critical path: a background thread builds each step's local batch with
the dataset's vectorised ``get_batch`` (one call per step, no per-sample Python), in pinned memory when the target
is a GPU, up to ``depth`` steps ahead while the current step computes; the loop takes it and copies it to the
device with ``non_blocking=True`` (ordered before the step's kernels on the stream, the host does not wait).

    batches = Prefetcher(make_batch, plan, device)   # plan: the arguments of each step's make_batch call, in order
    tokens = batches.next()                          # on device
"""
from __future__ import annotations

import queue
import threading

import torch

_END = object()


class Prefetcher:
    def __init__(self, make_batch, plan, device: torch.device, depth: int = 2):
        """``make_batch(*args)`` -> CPU int64 tensor, for each ``args`` of the iterable ``plan``."""
        self.device = device
        self.pin = device.type == "cuda"
        self._q: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, args=(make_batch, iter(plan)), daemon=True,
                                        name="quarry-prefetch")
        self._host = None
        self._thread.start()

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _work(self, make_batch, plan) -> None:
        try:
            for args in plan:
                batch = make_batch(*args)
                if self.pin:
                    batch = batch.pin_memory()
                if not self._put(batch):
                    return
        except BaseException as e:  # handed to the training loop, raised there
            self._put(e)
            return
        self._put(_END)

    def next(self) -> torch.Tensor:
        """This step's batch, built ahead by the thread, its copy to the device issued without waiting."""
        item = self._q.get()
        if isinstance(item, BaseException):
            raise item
        if item is _END:
            raise StopIteration
        self._host = item  # the pinned source must outlive the asynchronous copy (until the next call)
        return item.to(self.device, non_blocking=True)

    def close(self) -> None:
        self._stop.set()
        while True:  # unblock a producer waiting on a full queue
            try:
                self._q.get_nowait()
            except queue.Empty:
                break
        self._thread.join(timeout=5)
