"""Atomic writes of the plan's numpy parts (memory-mapped on read); partitioned Arrow files are
``curate.shuffle``'s. A part either exists whole or not at all, so a plan that was killed resumes by
skipping the parts that exist."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from curate.shards import atomic_path


def save_npy(array: np.ndarray, path: str | Path) -> Path:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.save(f, np.ascontiguousarray(array))
    return Path(path)


def load_npy(path: str | Path, mmap: bool = True) -> np.ndarray:
    return np.load(path, mmap_mode="r" if mmap else None)
