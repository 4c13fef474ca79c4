"""What one task does, in a worker: read a split or a shard, run the step's stages, write shards.

A task (``curate.contracts``: paths and options, never data) returns its ``Marker``: the shards it wrote
(path, rows, sha256, hashed here while the file is hot, so the manifest never re-reads a shard) and
each stage's counts. Two kinds:

- ``read_task``: one split of an input file (``readers.plan_splits``) read in batches of ``shard_rows``
  documents; each batch goes straight through the map stages that follow the reader, so raw input
  (WARC HTML included) is never written as a shard.
- ``map_task``: one shard of the previous step through a global stage's plan, then the map stages.

The stages run in a ``curate.chain.StageChain``.

A read task checks that its input file still has the size and modification time recorded when the run
planned it (``split["expect"]``), before reading, every 1,024 items and after; before and after it also checks
the hash of blocks sampled across the file (``curate.fingerprint``: a rewrite that keeps the size and puts the
modification time back). A file that shrinks, grows or is rewritten during a run would otherwise lose the
records past the change, or mix two versions. On a mismatch it removes the shards it wrote and raises
:class:`InputChanged`; the run stops naming the file (a rerun with ``--allow-changed-inputs`` reads the new
version).
"""
from __future__ import annotations

import os
from pathlib import Path

from curate import readers
from curate.chain import StageChain
from curate.fingerprint import SAMPLE, content_sample
from curate.contracts import MapTask, Marker, ReadTask, StageCounts
from curate.schema import BASE_SCHEMA, REASON
from curate.readers.text import row
from curate.shards import read_shard, rows_to_table
from curate.stages.base import mark_dropped

READ_STAGE = "read"
BATCH_CHARS = 64 << 20  # a batch goes to the stages at shard_rows documents or this much text, whichever first


def call(args: tuple):
    """The one function executors run: ``(fn, task)`` -> ``fn(task)``."""
    fn, task = args
    return fn(task)


class InputChanged(RuntimeError):
    """An input file no longer matches what the run planned (size, modification time or sampled content)."""


def check_unchanged(split: dict, when: str, content: bool = True) -> None:
    """InputChanged when the split's file differs from ``split["expect"]`` (its path, size, mtime_ns and, when
    ``content`` and the plan has it, ``sample_sha256`` at planning; no ``expect``: nothing to check)."""
    expect = split.get("expect")
    if not expect:
        return
    path = expect["path"]
    try:
        st = os.stat(path)
        now = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
        if content and expect.get(SAMPLE) and now["size"] == expect.get("size"):
            now[SAMPLE] = content_sample(path)
    except OSError as e:
        now = {"size": None, "mtime_ns": None, "error": e.strerror or str(e)}
    if (now["size"] == expect.get("size") and now["mtime_ns"] == expect.get("mtime_ns")
            and now.get(SAMPLE, expect.get(SAMPLE)) == expect.get(SAMPLE)):
        return
    how = now.get("error") or (f"size {expect.get('size')} -> {now['size']}" if now["size"] != expect.get("size")
                               else "modified, same size" if now["mtime_ns"] != expect.get("mtime_ns")
                               else "content rewritten, same size and modification time")
    raise InputChanged(f"input {path} changed {when} ({how}): its records cannot be read as planned; "
                       f"rerun once it no longer changes, with --allow-changed-inputs to read the new version")


def read_task(task: ReadTask) -> Marker:
    check_unchanged(task.split, "after the run planned it")
    out = _ReadOutput(task)
    items = readers.read_split(task.split, text_field=task.source.get("text_field", "text"),
                               id_field=task.source.get("id_field", "id"), max_doc_bytes=task.max_doc_bytes)
    try:
        _consume(items, out)
        marker = out.finish()
        check_unchanged(task.split, "while it was read")
    except InputChanged:
        out.discard()
        raise
    return marker


def read_crashed(item: tuple, why: str) -> Marker:
    """The result of a read task whose worker crashed every time it ran (``LocalExecutor``'s ``on_crash``; item:
    ``(read_task, task)``): a library failed on the split's bytes, so the split is set aside whole, one
    ``read_crashed`` row naming it and why (the documents in it are not known), written by the driver
    instead of stopping the run."""
    task = item[1]
    out = _ReadOutput(task)
    path = task.split["path"]
    out.set_aside(row(f"{readers.id_name(task.split)}:read_crashed:{readers.split_where(task.split)}", why, path),
                  "read_crashed")
    return out.finish()


def _consume(items, out: "_ReadOutput") -> None:
    for n, item in enumerate(items, 1):
        kind = item[0]
        if kind == "doc":
            out.keep(item[1])
        elif kind == "drop":
            out.set_aside(item[1], item[2])
        elif kind == "skip":
            out.read.skipped[item[1]] = out.read.skipped.get(item[1], 0) + 1
        elif kind == "count":
            out.count(item[1], int(item[2]))
        if n % 1024 == 0:  # one stat per 1024 items: a change stops the task early, not only at its end
            check_unchanged(out.task.split, "while it was read", content=False)


class _ReadOutput:
    """What a read task does with the reader's items: documents go to the step's stages in batches of
    ``shard_rows`` (fewer where they hold over ``BATCH_CHARS`` of text: 5 MB documents make batches of a
    dozen, not of 4096 x 5 MB); what the reader sets aside is written in batches as large (memory stays bounded however
    much of a split is junk); the reader's own counts."""

    def __init__(self, task: ReadTask):
        self.task = task
        self.chain = StageChain(task.step, task.task_id)
        self.read = StageCounts(READ_STAGE, skipped={})
        self.counters: dict[str, int] = {}
        self.batch: list[dict] = []
        self.batch_chars = 0
        self.dropped: list[dict] = []
        self.batches = self.drop_flushes = self.n_dropped = 0

    def keep(self, doc: dict) -> None:
        self.batch.append(doc)
        self.batch_chars += len(doc.get("text") or "")
        self.read.kept += 1
        if len(self.batch) >= self.task.shard_rows or self.batch_chars >= BATCH_CHARS:
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

    def discard(self) -> None:
        """Remove the shards written so far (the task is not finished: no marker will list them)."""
        root = Path(self.task.step.root)
        for e in self.chain.outputs + self.chain.dropped:
            (root / e.path).unlink(missing_ok=True)

    def _table(self, rows: list[dict]):
        table, replaced = rows_to_table(rows, BASE_SCHEMA)
        if replaced:
            self.count("surrogates_replaced", replaced)
        return table

    def _flush(self) -> None:
        table = self._table(self.batch)
        self.batch.clear()
        self.batch_chars = 0
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
