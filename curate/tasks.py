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
    out = _ReadOutput(task)
    items = readers.read_split(task.split, text_field=task.source.get("text_field", "text"),
                               id_field=task.source.get("id_field", "id"), max_doc_bytes=task.max_doc_bytes)
    for item in items:
        kind = item[0]
        if kind == "doc":
            out.keep(item[1])
        elif kind == "drop":
            out.set_aside(item[1], item[2])
        elif kind == "skip":
            out.read.skipped[item[1]] = out.read.skipped.get(item[1], 0) + 1
        elif kind == "count":
            out.count(item[1], int(item[2]))
    return out.finish()


class _ReadOutput:
    """What a read task does with the reader's items: documents go to the step's stages in batches of
    ``shard_rows``; what the reader sets aside is written in batches as large (memory stays bounded however
    much of a split is junk); the reader's own counts."""

    def __init__(self, task: ReadTask):
        self.task = task
        self.chain = StageChain(task.step, task.task_id)
        self.read = StageCounts(READ_STAGE, skipped={})
        self.counters: dict[str, int] = {}
        self.batch: list[dict] = []
        self.dropped: list[dict] = []
        self.batches = self.drop_flushes = self.n_dropped = 0

    def keep(self, doc: dict) -> None:
        self.batch.append(doc)
        self.read.kept += 1
        if len(self.batch) >= self.task.shard_rows:
            self._flush()

    def set_aside(self, row: dict, reason: str) -> None:
        self.dropped.append({**{k: row.get(k, "") for k in BASE_SCHEMA.names}, REASON: reason})
        self.read.drop(reason)
        if len(self.dropped) >= self.task.shard_rows:
            self._flush_dropped()

    def count(self, name: str, n: int) -> None:
        self.counters[name] = self.counters.get(name, 0) + n

    def finish(self) -> Marker:
        if self.batch:
            self._flush()
        if self.dropped:
            self._flush_dropped()
        self.read.docs_in = self.read.kept + self.n_dropped
        if self.counters:
            self.read.counters = dict(sorted(self.counters.items()))
        return self.chain.marker(self.task.key, [self.read], docs=self.read.docs_in)

    def _table(self, rows: list[dict]):
        table, replaced = rows_to_table(rows, BASE_SCHEMA)
        if replaced:
            self.count("surrogates_replaced", replaced)
        return table

    def _flush(self) -> None:
        table = self._table(self.batch)
        self.batch.clear()
        self.chain.run(table, f"{self.task.task_id}-{self.batches:05d}")
        self.batches += 1

    def _flush_dropped(self) -> None:
        task_id = self.task.task_id
        table = self._table([{k: d[k] for k in BASE_SCHEMA.names} for d in self.dropped])
        stem = task_id if self.drop_flushes == 0 else f"{task_id}-{self.drop_flushes:05d}"
        self.drop_flushes += 1
        self.chain.write_dropped(mark_dropped(table, READ_STAGE, [d[REASON] for d in self.dropped]), READ_STAGE, stem)
        self.n_dropped += len(self.dropped)
        self.dropped.clear()


def map_task(task: MapTask) -> Marker:
    table = read_shard(task.input)
    chain = StageChain(task.step, task.task_id)
    chain.run(table, task.task_id, plan=(task.shard_index, Path(task.plan_dir)) if task.plan_dir else None)
    return chain.marker(task.key, [], docs=table.num_rows)
