"""Atomic writes of the plan's parts: numpy arrays (memory-mapped on read) and Arrow IPC files
whose record batches are read one at a time. A part either exists whole or not at all, so a plan
that was killed resumes by skipping the parts that exist."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from curate.shards import atomic_path


def save_npy(array: np.ndarray, path: str | Path) -> Path:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.save(f, np.ascontiguousarray(array))
    return Path(path)


def load_npy(path: str | Path, mmap: bool = True) -> np.ndarray:
    return np.load(path, mmap_mode="r" if mmap else None)


def write_batches(batches: list[pa.Table], schema: pa.Schema, path: str | Path) -> Path:
    """One record batch per table (empty ones included), so batch ``g`` is group ``g``; zstd per buffer."""
    options = ipc.IpcWriteOptions(compression="zstd")
    with atomic_path(path) as tmp:
        with ipc.new_file(tmp, schema, options=options) as writer:
            for t in batches:
                t = t.select(schema.names).cast(schema).combine_chunks()
                writer.write_batch(t.to_batches()[0] if t.num_rows else pa.RecordBatch.from_pylist([], schema=schema))
    return Path(path)


def read_batch(path: str | Path, index: int) -> pa.Table:
    with pa.memory_map(str(path)) as source:
        reader = ipc.open_file(source)
        return pa.Table.from_batches([reader.get_batch(index)])
