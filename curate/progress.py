"""Progress of a step's tasks on stderr: a tqdm bar on a terminal; written to a file or a pipe, where a bar
becomes one long line of carriage returns, a plain line every ``EVERY`` seconds and one at the end."""
from __future__ import annotations

import os
import sys
import time

EVERY = 30.0  # seconds between plain lines


def quiet() -> bool:
    """``TQDM_DISABLE`` is set (``curate run --quiet`` sets it, for worker processes too)."""
    return os.environ.get("TQDM_DISABLE", "").lower() in ("1", "true")


def bars_wanted() -> bool:
    """Whether to draw tqdm bars: stderr is a terminal and progress is not silenced."""
    return not quiet() and sys.stderr.isatty()


class TaskProgress:
    def __init__(self, label: str, total: int, done: int, enabled: bool = True):
        self.label, self.total, self.done, self.docs = label, total, done, 0
        self.t0 = self.last = time.time()
        self.bar = None
        self.lines = enabled and not quiet() and not sys.stderr.isatty()
        if enabled and bars_wanted():
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, desc=f"  {label}", unit="task", dynamic_ncols=True)

    def update(self, docs: int) -> None:
        """One more task done, which read ``docs`` documents."""
        self.done += 1
        self.docs += docs
        if self.bar is not None:
            self.bar.update()
            self.bar.set_postfix_str(f"{self.rate():,.0f} docs/s")
        elif self.lines and time.time() - self.last >= EVERY:
            self._line()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.lines and self.docs:
            self._line()

    def rate(self) -> float:
        return self.docs / max(time.time() - self.t0, 1e-9)

    def _line(self) -> None:
        self.last = time.time()
        print(f"  {self.label}: {self.done}/{self.total} tasks, {self.rate():,.0f} docs/s", file=sys.stderr, flush=True)
