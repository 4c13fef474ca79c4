"""The partitioned shuffle that the global plans share (exact dedup, MinHash, decontamination).

A plan has to bring together records that come from anywhere in the corpus (documents with equal
hashes, equal band hashes, the same n-gram) without any task reading every shard. It does so in
two kinds of task, through files in the plan folder:

- a **writer task** per *group* of consecutive shards (about ``TASK_BYTES`` of input, so thousands
  of small shards cost a few tasks, not thousands) computes its records and writes ONE Arrow IPC
  file, in one go, holding one record batch per key *range*: ``write_parts``;
- a **range task** per range reads its own batch from each writer file, and nothing else:
  ``read_part``. A range is a slice of the 64-bit key space (``key_range``), so equal keys always
  meet in the same task.

Results go back to the shards the same way: a range task writes one file with a batch per group,
and one task per group reads its batch from each range file. The number of file pieces is
groups x ranges, and both grow with the documents (bytes), not with the shard count.

Documents are named by a *document key* ``shard << 32 | row`` (``doc_key``): it sorts in input
order and needs no row counts up front. Every file is written atomically (``curate.shards.atomic_path``)
and a task whose output exists is skipped, so a killed plan resumes; nothing depends on the
number of workers or the order in which tasks finish.
"""
from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from curate.shards import atomic_path, checked, read_json, write_json

TASK_BYTES = 32 << 20  # input bytes per writer task at most (a group of consecutive shards; a larger shard alone)
RANGE_BYTES = 128 << 20  # input bytes per key range at most
MIN_GROUPS = 8  # a small corpus still gets this many groups (when it has that many shards) ...
MIN_RANGES = 4  # ... and this many ranges, so that a plan uses a few workers
LAYOUT_FILE = "layout.json"
ROW_BITS = 32
ROW_MASK = np.uint64((1 << ROW_BITS) - 1)


@dataclass(frozen=True)
class Layout:
    """How a plan cuts its inputs: ``bounds[g]:bounds[g+1]`` are group ``g``'s shards; ``ranges`` key ranges."""

    bounds: tuple[int, ...]
    ranges: int

    @property
    def groups(self) -> int:
        return len(self.bounds) - 1

    def shards_of(self, group: int) -> range:
        return range(self.bounds[group], self.bounds[group + 1])

    def group_of(self, shard: int) -> int:
        return int(np.searchsorted(np.asarray(self.bounds), shard, side="right")) - 1

    def groups_of(self, shards: np.ndarray) -> np.ndarray:
        return np.searchsorted(np.asarray(self.bounds, np.int64), shards.astype(np.int64), side="right") - 1


def make_layout(inputs, task_bytes: int | None = None, range_bytes: int | None = None) -> Layout:
    """Groups of consecutive shards of at most ``task_bytes`` (or ``total / MIN_GROUPS``, whichever is
    smaller) and ``max(MIN_RANGES, ceil(total / range_bytes))`` ranges, from file sizes alone (a ``stat``
    per input: the same layout for any worker count). Both counts follow the bytes, not the shards."""
    task_bytes = task_bytes or TASK_BYTES
    range_bytes = range_bytes or RANGE_BYTES
    sizes = [os.path.getsize(p) for p in inputs]
    task_bytes = max(1, min(task_bytes, math.ceil(sum(sizes) / MIN_GROUPS)))
    bounds, acc = [0], 0
    for i, s in enumerate(sizes):
        if acc and acc + s > task_bytes:
            bounds.append(i)
            acc = 0
        acc += s
    if sizes:
        bounds.append(len(sizes))
    ranges = max(MIN_RANGES, math.ceil(sum(sizes) / range_bytes))
    return Layout(tuple(bounds), ranges)


def save_layout(layout: Layout, plan_dir: Path) -> None:
    write_json(asdict(layout), Path(plan_dir) / LAYOUT_FILE)


@functools.lru_cache(maxsize=16)
def _load_layout(path: str, mtime_ns: int) -> Layout:
    d = read_json(path)
    return Layout(tuple(d["bounds"]), int(d["ranges"]))


def load_layout(plan_dir: Path) -> Layout:
    path = Path(plan_dir) / LAYOUT_FILE
    return _load_layout(str(path), path.stat().st_mtime_ns)


@dataclass(frozen=True)
class PlanJob:
    """One task of a global stage's plan, as it crosses to a worker: the plan folder, the stage's settings for
    its plan (a frozen dataclass of the stage), and what the task works on: a group of consecutive shards
    (``group``, their paths in ``inputs``), a key range (``range``), or the whole plan (neither)."""

    plan_dir: str
    settings: Any
    group: int = -1
    range: int = -1
    inputs: tuple[str, ...] = ()


def group_jobs(plan_dir, settings, layout: Layout, inputs: list[str]) -> list[PlanJob]:
    """A job per shard group of ``layout``, with the paths of its shards."""
    return [PlanJob(str(plan_dir), settings, group=g, inputs=tuple(inputs[layout.bounds[g]:layout.bounds[g + 1]]))
            for g in range(layout.groups)]


def range_jobs(plan_dir, settings, layout: Layout) -> list[PlanJob]:
    """A job per key range of ``layout``."""
    return [PlanJob(str(plan_dir), settings, range=k) for k in range(layout.ranges)]


# --- document keys and key ranges ----------------------------------------------------------------

def doc_keys(shard: int, rows: np.ndarray) -> np.ndarray:
    """``shard << 32 | row`` as uint64 (sorts in input order: shard, then row)."""
    return (np.uint64(shard) << np.uint64(ROW_BITS)) | np.asarray(rows).astype(np.uint64)


def key_shard(keys: np.ndarray) -> np.ndarray:
    return (np.asarray(keys, np.uint64) >> np.uint64(ROW_BITS)).astype(np.int64)


def key_row(keys: np.ndarray) -> np.ndarray:
    return (np.asarray(keys, np.uint64) & ROW_MASK).astype(np.int64)


def key_range(keys: np.ndarray, ranges: int) -> np.ndarray:
    """Range of each uint64 key: ``floor(key * ranges / 2^64)`` (via the top 32 bits), monotone in the key."""
    if ranges == 1:
        return np.zeros(len(keys), np.int64)
    return (((np.asarray(keys, np.uint64) >> np.uint64(32)) * np.uint64(ranges)) >> np.uint64(32)).astype(np.int64)


def unique_pairs(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Sorted (by ``first``, then ``second``) unique rows of the uint64 pairs, as a [m, 2] array: what
    ``np.unique(pairs, axis=0)`` gives, at a third of its cost (one ``lexsort``, no structured view)."""
    first, second = np.asarray(first, np.uint64), np.asarray(second, np.uint64)
    order = np.lexsort((second, first))
    a, b = first[order], second[order]
    keep = np.ones(len(a), bool)
    keep[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    return np.stack([a[keep], b[keep]], axis=1).reshape(-1, 2)


# --- partitioned files ---------------------------------------------------------------------------

def write_parts(table: pa.Table, part: np.ndarray, parts: int, path, compression: str | None = None) -> Path:
    """Write ``table`` as one Arrow IPC file of ``parts`` record batches: batch ``k`` holds the rows whose
    ``part`` is ``k``, in their order in ``table`` (empty batches included). Atomic: all or nothing."""
    part = np.asarray(part, np.int64)
    if len(part) != table.num_rows:
        raise ValueError(f"{len(part)} part numbers for {table.num_rows} rows")
    if len(part) and (part.min() < 0 or part.max() >= parts):
        raise ValueError(f"part numbers must be in [0, {parts})")
    # stable, so each part keeps the table's order; on 16-bit numbers numpy's stable sort is a radix sort (faster)
    order = np.argsort(part.astype(np.uint16) if parts <= 1 << 16 else part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(parts + 1))
    table = table.take(pa.array(order, pa.int64())).combine_chunks() if table.num_rows else table
    options = ipc.IpcWriteOptions(compression=compression)
    with atomic_path(path) as tmp:
        with ipc.new_file(tmp, table.schema, options=options) as writer:
            for k in range(parts):
                piece = table.slice(int(bounds[k]), int(bounds[k + 1] - bounds[k]))
                batches = piece.to_batches()
                writer.write_batch(batches[0] if batches else _empty_batch(table.schema))
    return Path(path)


def _empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)


def read_part(paths, part: int, schema: pa.Schema) -> pa.Table:
    """Batch ``part`` of each file in ``paths``, concatenated in the order of ``paths``."""
    tables = []
    for p in paths:
        with pa.memory_map(str(p)) as source:
            tables.append(pa.Table.from_batches([checked(ipc.open_file(source).get_batch(part), p)]))
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables).combine_chunks()


def done(path: Path, marker: Path | None = None):
    """The marker's content when a task's output (and marker) exist, else None: the task runs."""
    if marker is None:
        return {} if Path(path).exists() else None
    if Path(path).exists() and Path(marker).exists():
        return read_json(marker)
    return None


def task_output(plan_dir: Path, part: str, index: int, also: tuple[str, ...] = ()) -> tuple[Path, Path, dict | None]:
    """A plan task's output ``plan_dir/part/NNNNN.arrow``, its marker beside it, and the marker's content
    when the task already ran (resume), else None. A task that also writes ``plan_dir/<also>/NNNNN.arrow``
    (before its marker) counts as done only when those exist too."""
    out = Path(plan_dir) / part / f"{index:05d}.arrow"
    marker = out.with_suffix(".json")
    if not all((Path(plan_dir) / other / out.name).exists() for other in also):
        return out, marker, None
    return out, marker, done(out, marker)


def numbered(plan_dir: Path, part: str, n: int, suffix: str = ".arrow") -> list[Path]:
    return [Path(plan_dir) / part / f"{i:05d}{suffix}" for i in range(n)]


def config_of(layout: Layout) -> dict:
    return json.loads(json.dumps(asdict(layout)))
