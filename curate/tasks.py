"""What one task does, in a worker: read a split or a shard, run the step's stages, write shards.

A task (``curate.contracts``: paths and options, never data) returns its ``Marker``: the shards it wrote
(path, rows, sha256, hashed here while the file is hot, so the manifest never re-reads a shard) and
each stage's counts. Two kinds:

- ``read_task``: one split of an input file (``readers.plan_splits``) read in batches of ``shard_rows``
  documents; each batch goes straight through the map stages that follow the reader, so raw input
  (WARC HTML included) is never written as a shard.
- ``map_task``: one shard of the previous step through a global stage's plan, then the map stages.

The stages run in a ``curate.chain.StageChain``.
"""
from __future__ import annotations

from pathlib import Path

from curate import readers
from curate.chain import StageChain
from curate.contracts import MapTask, Marker, ReadTask, StageCounts
from curate.schema import BASE_SCHEMA, REASON
from curate.shards import read_shard, rows_to_table
from curate.stages.base import mark_dropped

READ_STAGE = "read"


def call(args: tuple):
    """The one function executors run: ``(fn, task)`` -> ``fn(task)``."""
    fn, task = args
    return fn(task)


def read_task(task: ReadTask) -> Marker:
    chain = StageChain(task.step, task.task_id)
    read = StageCounts(READ_STAGE, skipped={})
    counters: dict[str, int] = {}
    batch, dropped = [], []
    batches, drop_flushes, n_dropped = 0, 0, 0

    def to_table(rows):
        table, replaced = rows_to_table(rows, BASE_SCHEMA)
        if replaced:
            counters["surrogates_replaced"] = counters.get("surrogates_replaced", 0) + replaced
        return table

    def flush():
        nonlocal batches
        table = to_table(batch)
        batch.clear()
        chain.run(table, f"{task.task_id}-{batches:05d}")
        batches += 1

    def flush_dropped():
        nonlocal drop_flushes, n_dropped
        table = to_table([{k: d[k] for k in BASE_SCHEMA.names} for d in dropped])
        stem = task.task_id if drop_flushes == 0 else f"{task.task_id}-{drop_flushes:05d}"
        drop_flushes += 1
        chain.write_dropped(mark_dropped(table, READ_STAGE, [d[REASON] for d in dropped]), READ_STAGE, stem)
        n_dropped += len(dropped)
        dropped.clear()

    items = readers.read_split(task.split, text_field=task.source.get("text_field", "text"),
                               id_field=task.source.get("id_field", "id"), max_doc_bytes=task.max_doc_bytes)
    for item in items:
        kind = item[0]
        if kind == "doc":
            batch.append(item[1])
            read.kept += 1
            if len(batch) >= task.shard_rows:
                flush()
        elif kind == "drop":
            dropped.append({**{k: item[1].get(k, "") for k in BASE_SCHEMA.names}, REASON: item[2]})
            read.drop(item[2])
            if len(dropped) >= task.shard_rows:  # memory stays bounded however much of a split is junk
                flush_dropped()
        elif kind == "skip":
            read.skipped[item[1]] = read.skipped.get(item[1], 0) + 1
        elif kind == "count":
            counters[item[1]] = counters.get(item[1], 0) + int(item[2])
    if batch:
        flush()
    if dropped:
        flush_dropped()
    read.docs_in = read.kept + n_dropped
    if counters:
        read.counters = dict(sorted(counters.items()))
    return chain.marker(task.key, [read], docs=read.docs_in)


def map_task(task: MapTask) -> Marker:
    table = read_shard(task.input)
    chain = StageChain(task.step, task.task_id)
    chain.run(table, task.task_id, plan=(task.shard_index, Path(task.plan_dir)) if task.plan_dir else None)
    return chain.marker(task.key, [], docs=table.num_rows)
