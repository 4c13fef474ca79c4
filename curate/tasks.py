"""What one task does, in a worker: read a split or a shard, run the step's stages, write shards.

A task is a small dict (paths and options, never data) and returns its marker: the shards it wrote
(path, rows, sha256, hashed here while the file is hot, so the manifest never re-reads a shard) and
each stage's counts. Two kinds:

- ``read_task``: one split of an input file (``readers.plan_splits``) read in batches of ``shard_rows``
  documents; each batch goes straight through the map stages that follow the reader, so raw input
  (WARC HTML included) is never written as a shard.
- ``map_task``: one shard of the previous step through a global stage's plan, then the map stages.

Per-record isolation: a map stage that raises on a batch is retried on halves of it until the documents
that raise are found; those are set aside with reason ``stage_error`` (an ``error`` column holds the
exception type and message) and the rest go on. Errors that are not about one document (``OSError``
such as a full disk, ``MemoryError``, or a stage that fails on every document) stop the run.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

import pyarrow as pa

from curate import readers
from curate.pipeline import StageSpec
from curate.schema import BASE_SCHEMA, DUPLICATE_OF, ID, REASON, STAGE, URL
from curate.shards import read_shard, rows_to_table, shard_suffix, write_shard_entry
from curate.stages.base import BatchContext, mark_dropped

READ_STAGE = "read"
STAGE_ERROR = "stage_error"
ERROR = "error"  # column of ``stage_error`` rows: "ExceptionType: message"
FATAL = (OSError, MemoryError, RecursionError)
IDS_COLUMNS = (ID, URL, STAGE, REASON, DUPLICATE_OF, ERROR)
MAX_ERROR_KINDS = 20


class StageFailure(RuntimeError):
    """A stage failed in a way that is not about one document; the run stops."""


def call(args: tuple):
    """The one function executors run: ``(fn, task)`` -> ``fn(task)``."""
    fn, task = args
    return fn(task)


# --- the two tasks ------------------------------------------------------------------------------

def read_task(task: dict) -> dict:
    split, opts = task["split"], task["source"]
    batch, dropped, skipped, counters = [], [], {}, {}
    writer = _Writer(task)
    read_stats = {"name": READ_STAGE, "in": 0, "kept": 0, "dropped": {}}

    def flush():
        table, replaced = rows_to_table(batch, BASE_SCHEMA)
        if replaced:
            counters["surrogates_replaced"] = counters.get("surrogates_replaced", 0) + replaced
        batch.clear()
        writer.run_chain(table)

    n_dropped, n_flushes = 0, 0

    def flush_dropped():
        nonlocal n_dropped, n_flushes
        table, replaced = rows_to_table([{k: d[k] for k in BASE_SCHEMA.names} for d in dropped], BASE_SCHEMA)
        if replaced:
            counters["surrogates_replaced"] = counters.get("surrogates_replaced", 0) + replaced
        stem = task["task_id"] if n_flushes == 0 else f"{task['task_id']}-{n_flushes:05d}"
        n_flushes += 1
        writer.write_dropped(mark_dropped(table, READ_STAGE, [d[REASON] for d in dropped]), READ_STAGE, stem)
        n_dropped += len(dropped)
        dropped.clear()

    items = readers.read_split(split, text_field=opts.get("text_field", "text"), id_field=opts.get("id_field", "id"),
                               max_doc_bytes=task["max_doc_bytes"])
    for item in items:
        kind = item[0]
        if kind == "doc":
            batch.append(item[1])
            read_stats["kept"] += 1
            if len(batch) >= task["shard_rows"]:
                flush()
        elif kind == "drop":
            dropped.append({**{k: item[1].get(k, "") for k in BASE_SCHEMA.names}, REASON: item[2]})
            read_stats["dropped"][item[2]] = read_stats["dropped"].get(item[2], 0) + 1
            if len(dropped) >= task["shard_rows"]:  # memory stays bounded however much of a split is junk
                flush_dropped()
        elif kind == "skip":
            skipped[item[1]] = skipped.get(item[1], 0) + 1
        elif kind == "count":
            counters[item[1]] = counters.get(item[1], 0) + int(item[2])
    if batch:
        flush()
    if dropped:
        flush_dropped()
    read_stats["in"] = read_stats["kept"] + n_dropped
    read_stats["skipped"] = skipped
    if counters:
        read_stats["counters"] = dict(sorted(counters.items()))
    return writer.marker([read_stats], docs=read_stats["in"])


def map_task(task: dict) -> dict:
    table = read_shard(task["input"])
    writer = _Writer(task)
    writer.run_chain(table, plan=(task["shard_index"], Path(task["plan_dir"])) if task["plan_dir"] else None)
    return writer.marker([], docs=table.num_rows)


# --- running the stages of a step over one batch ------------------------------------------------

class _Writer:
    """Runs a step's stages over batches and writes what they keep and set aside."""

    def __init__(self, task: dict):
        self.task = task
        self.suffix = shard_suffix(task["format"])
        self.stages = [(name, _build_stage(type_, name, json.dumps(params, sort_keys=True)))
                       for type_, name, params in task["specs"]]
        self.stats = {name: {"name": name, "in": 0, "kept": 0, "dropped": {}} for name, _ in self.stages}
        self.outputs: list[dict] = []
        self.dropped: list[dict] = []
        self.batches = 0

    def run_chain(self, table: pa.Table, plan=None) -> None:
        stem = self.task["stem"] if "stem" in self.task else f"{self.task['task_id']}-{self.batches:05d}"
        self.batches += 1
        context = BatchContext()  # what one stage learns of this batch's documents, for the stages after it
        for i, (name, stage) in enumerate(self.stages):
            st = self.stats[name]
            st["in"] += table.num_rows
            if table.num_rows == 0:
                continue
            if i == 0 and plan is not None:
                result = stage.apply_with_plan(table, plan[0], plan[1], context)
                kept, dropped = _checked(name, table, result)
                errors, counters = {}, result.counters
                if result.added:
                    st["added"] = st.get("added", 0) + result.added
            else:
                kept, dropped, errors, counters = apply_isolated(name, stage, table, context)
            if counters:
                _add_counts(st.setdefault("counters", {}), counters)
            if errors:
                merged = st.setdefault("errors", {})
                for k, n in errors.items():
                    if k in merged or len(merged) < MAX_ERROR_KINDS:
                        merged[k] = merged.get(k, 0) + n
            if dropped is not None and dropped.num_rows:
                for r in dropped.column(REASON).to_pylist():
                    st["dropped"][r] = st["dropped"].get(r, 0) + 1
                self.write_dropped(dropped, name, stem)
            st["kept"] += kept.num_rows
            table = kept
        if table.num_rows:
            path = Path(self.task["out_dir"]) / f"{stem}{self.suffix}"
            self.outputs.append(write_shard_entry(table, path, self.task["root"], self.task["format"]))

    def write_dropped(self, table: pa.Table, stage: str, stem: str | None = None) -> None:
        mode = self.task["keep_dropped"]
        if mode == "none" or table.num_rows == 0:
            return
        if mode == "ids":
            table = table.select([c for c in IDS_COLUMNS if c in table.column_names])
        name = f"{stage}-{stem or self.task['task_id']}{self.suffix}"
        path = Path(self.task["drop_dir"]) / name
        self.dropped.append(write_shard_entry(table, path, self.task["root"], self.task["format"]))

    def marker(self, first: list[dict], docs: int) -> dict:
        stats = first + [self.stats[name] for name, _ in self.stages]
        for s in stats:
            s["dropped"] = dict(sorted(s["dropped"].items()))
        return {"task_id": self.task["task_id"], "key": self.task["key"], "outputs": self.outputs,
                "dropped": self.dropped, "stats": stats, "docs": docs}


def _checked(name: str, table: pa.Table, result) -> tuple[pa.Table, pa.Table]:
    if result.kept.num_rows + result.dropped.num_rows != table.num_rows + result.added:
        raise StageFailure(f"stage {name} lost documents: {table.num_rows} in, {result.kept.num_rows} kept, "
                           f"{result.dropped.num_rows} dropped")
    return result.kept, result.dropped


def apply_isolated(name: str, stage, table: pa.Table, context: BatchContext | None = None
                   ) -> tuple[pa.Table, pa.Table, dict, dict]:
    """``stage.apply(table, context)``; when it raises, the documents that make it raise are found by halving the
    batch and set aside as ``stage_error``. Returns (kept, dropped, {"Type: message": count}, the stage's
    counters)."""
    counters: dict[str, int] = {}
    try:
        result = stage.apply(table, context)
        kept, dropped = _checked(name, table, result)
        return kept, dropped, {}, result.counters
    except FATAL:
        raise
    except StageFailure:
        raise
    except Exception as first:  # noqa: BLE001 - isolate the document(s) behind it
        kept_parts, dropped_parts, bad = [], [], []
        _bisect(name, stage, table, 0, kept_parts, dropped_parts, bad, first, counters, context)
    if len(bad) == table.num_rows and table.num_rows >= 2:
        e = bad[0][1]
        raise StageFailure(f"stage {name!r} raised on every document of a batch of {table.num_rows} "
                           f"({type(e).__name__}: {e}); this is a bug or a bad setting, not bad input") from e
    errors: dict[str, int] = {}
    messages = []
    for _, e in bad:
        msg = _error_text(e)
        messages.append(msg)
        errors[msg] = errors.get(msg, 0) + 1
    rows = table.take(pa.array([i for i, _ in bad], pa.int64()))
    failed = mark_dropped(rows, name, STAGE_ERROR).append_column(ERROR, pa.array(messages, pa.string()))
    kept = _concat(kept_parts, table.schema)
    dropped = _concat(dropped_parts + [failed], failed.schema)
    return kept, dropped, errors, counters


def _add_counts(into: dict, counts: dict) -> None:
    for k, n in counts.items():
        into[k] = into.get(k, 0) + n


def _bisect(name, stage, table, offset, kept_parts, dropped_parts, bad, error=None, counters=None, context=None) -> None:
    if error is None:
        try:
            result = stage.apply(table, context)
            kept, dropped = _checked(name, table, result)
            kept_parts.append(kept)
            dropped_parts.append(dropped)
            _add_counts(counters, result.counters)
            return
        except FATAL:
            raise
        except StageFailure:
            raise
        except Exception as e:  # noqa: BLE001
            error = e
    if table.num_rows == 1:
        bad.append((offset, error))
        return
    half = table.num_rows // 2
    _bisect(name, stage, table.slice(0, half), offset, kept_parts, dropped_parts, bad, counters=counters, context=context)
    _bisect(name, stage, table.slice(half), offset + half, kept_parts, dropped_parts, bad, counters=counters,
            context=context)


def _concat(parts: list[pa.Table], schema: pa.Schema) -> pa.Table:
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return schema.empty_table()
    return pa.concat_tables(parts, promote_options="permissive").combine_chunks()


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e)[:300]}"


@functools.lru_cache(maxsize=64)
def _build_stage(type_: str, name: str, params_json: str):
    """Stages are built once per worker process (fastText models load once per run: the pool lives as long)."""
    return StageSpec(type_, name, json.loads(params_json)).build()
