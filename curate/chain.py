"""A step's stages run over one batch after another: ``StageChain``.

For each batch the chain makes a ``BatchContext`` and hands the batch from stage to stage
(``apply(table, context)``; the step's global stage first, ``apply_with_plan``), counts what each stage
keeps and sets aside (``StageCounts``), and hands the kept table and each stage's set-aside table to the
shard writers (``OUT/<out_dir>/<stem>`` and ``OUT/dropped/NN_<step>/<stage>-<stem>``).

Per-record isolation: a map stage that raises on a batch is retried on halves of it until the documents
that raise are found; those are set aside with reason ``stage_error`` (an ``error`` column holds the
exception type and message) and the rest go on. Errors that are not about one document (``OSError``
such as a full disk, ``MemoryError``, or a stage that fails on every document) stop the run.

Per-document time limit: with ``stage_timeout_s`` > 0 (the pipeline's, on each ``StageSpec``) the map stages
run in a watched child process (``curate.stage_watch``); a document that takes more CPU time than that in a
stage (in Python or in C) is set aside with reason ``stage_timeout`` and the others go on, found the same
way (the stage names the document it was on, or the batch is halved).
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

import pyarrow as pa

from curate.contracts import Marker, ShardEntry, StageCounts, StepOutput
from curate.pipeline import StageSpec
from curate.schema import DUPLICATE_OF, ID, REASON, STAGE, URL
from curate.shards import shard_suffix, write_shard_entry
from curate.stage_watch import Sandbox, StageRaised, StageTimeout, available, kept_sandbox
from curate.stages.base import BatchContext, mark_dropped

STAGE_ERROR = "stage_error"
STAGE_TIMEOUT = "stage_timeout"
ERROR = "error"  # column of ``stage_error`` rows: "ExceptionType: message"
FATAL = (OSError, MemoryError, RecursionError)
IDS_COLUMNS = (ID, URL, STAGE, REASON, DUPLICATE_OF, ERROR)
MAX_ERROR_KINDS = 20


class StageFailure(RuntimeError):
    """A stage failed in a way that is not about one document; the run stops."""


class StageChain:
    """Runs a step's stages over batches, counts, and writes what they keep and set aside."""

    def __init__(self, step: StepOutput, task_id: str):
        self.step = step
        self.task_id = task_id
        self.suffix = shard_suffix(step.format)
        keys = [(s.type, s.name, json.dumps(s.params, sort_keys=True)) for s in step.stages]
        self.stages = [(s.name, _build_stage(*k)) for s, k in zip(step.stages, keys)]
        self.keys = {s.name: k for s, k in zip(step.stages, keys)}
        self.limits = {s.name: float(getattr(s, "stage_timeout_s", 0) or 0) for s in step.stages}
        self.sandbox: Sandbox | None = None
        self.counts = {name: StageCounts(name) for name, _ in self.stages}
        self.outputs: list[ShardEntry] = []
        self.dropped: list[ShardEntry] = []

    def run(self, table: pa.Table, stem: str, plan: tuple[int, Path] | None = None) -> None:
        """One batch through every stage; ``plan`` (shard index, plan folder) when the first stage is global."""
        context = BatchContext()  # what one stage learns of this batch's documents, for the stages after it
        if self.sandbox is not None:
            self.sandbox.new_batch()
        for name, stage in self.stages:
            counts = self.counts[name]
            counts.docs_in += table.num_rows
            if table.num_rows == 0:
                continue
            if stage.kind == "global":  # first in its step, with the plan built over every shard
                result = stage.apply_with_plan(table, plan[0], plan[1], context)
                kept, dropped = _checked(name, table, result)
                errors, counters = {}, result.counters
                counts.added += result.added
            else:
                kept, dropped, errors, counters = apply_isolated(name, stage, table, context, self._runner(name))
            if counters:
                counts.counters = _added(counts.counters or {}, counters)
            if errors:
                merged = counts.errors = counts.errors or {}
                for k, n in errors.items():
                    if k in merged or len(merged) < MAX_ERROR_KINDS:
                        merged[k] = merged.get(k, 0) + n
            if dropped is not None and dropped.num_rows:
                for r in dropped.column(REASON).to_pylist():
                    counts.drop(r)
                self.write_dropped(dropped, name, stem)
            counts.kept += kept.num_rows
            table = kept
        if table.num_rows:
            path = Path(self.step.out_dir) / f"{stem}{self.suffix}"
            self.outputs.append(write_shard_entry(table, path, self.step.root, self.step.format))

    def _runner(self, name: str):
        """How the stage ``name`` is applied: in the watched child when it has a time limit, else here."""
        limit = self.limits[name]
        if limit <= 0 or not available():
            return None
        if self.sandbox is None:
            for _, stage in self.stages:  # models loaded once here, not in every task's child
                if hasattr(stage, "warm"):
                    stage.warm()
            self.sandbox = kept_sandbox(_build_stage)  # the process's child, kept from task to task
        key, sandbox = self.keys[name], self.sandbox
        return lambda table, context: sandbox.apply(key, table, limit)

    def close(self) -> None:
        """Let go of the watched child (``marker`` does this at the end of a task): it stays for the process's
        next task, with what its stages learned (``stage_watch.kept_sandbox``)."""
        self.sandbox = None

    def write_dropped(self, table: pa.Table, stage: str, stem: str) -> None:
        mode = self.step.keep_dropped
        if mode == "none" or table.num_rows == 0:
            return
        if mode == "ids":
            table = table.select([c for c in IDS_COLUMNS if c in table.column_names])
        path = Path(self.step.drop_dir) / f"{stage}-{stem}{self.suffix}"
        self.dropped.append(write_shard_entry(table, path, self.step.root, self.step.format))

    def marker(self, key: str, first: list[StageCounts], docs: int) -> Marker:
        self.close()  # the task is done with its stages
        return Marker(self.task_id, key, self.outputs, self.dropped, first + [self.counts[n] for n, _ in self.stages], docs)


def _checked(name: str, table: pa.Table, result) -> tuple[pa.Table, pa.Table]:
    if result.kept.num_rows + result.dropped.num_rows != table.num_rows + result.added:
        raise StageFailure(f"stage {name} lost documents: {table.num_rows} in, {result.kept.num_rows} kept, "
                           f"{result.dropped.num_rows} dropped")
    return result.kept, result.dropped


def apply_isolated(name: str, stage, table: pa.Table, context: BatchContext | None = None, run=None
                   ) -> tuple[pa.Table, pa.Table, dict, dict]:
    """``stage.apply(table, context)`` (or ``run(table, context)``: the watched child's); when it raises, the
    documents that make it raise are found by halving the batch and set aside as ``stage_error``, those over
    the time limit as ``stage_timeout``. Returns (kept, dropped, {"Type: message": count}, the stage's
    counters)."""
    counters: dict[str, int] = {}
    run = run or stage.apply
    try:
        result = run(table, context)
        kept, dropped = _checked(name, table, result)
        return kept, dropped, {}, result.counters
    except FATAL:
        raise
    except StageFailure:
        raise
    except Exception as first:  # noqa: BLE001 - isolate the document(s) behind it
        kept_parts, dropped_parts, bad = [], [], []
        _bisect(name, run, table, 0, kept_parts, dropped_parts, bad, first, counters, context)
    raised = [e for _, e in bad if not isinstance(e, StageTimeout)]
    if len(raised) == table.num_rows and table.num_rows >= 2:
        e = raised[0]
        raise StageFailure(f"stage {name!r} raised on every document of a batch of {table.num_rows} "
                           f"({_error_text(e)}); this is a bug or a bad setting, not bad input") from e
    errors: dict[str, int] = {}
    bad.sort(key=lambda item: item[0])
    messages = [_error_text(e) for _, e in bad]
    for (_, e), msg in zip(bad, messages):
        if not isinstance(e, StageTimeout):
            errors[msg] = errors.get(msg, 0) + 1
    reasons = [STAGE_TIMEOUT if isinstance(e, StageTimeout) else STAGE_ERROR for _, e in bad]
    rows = table.take(pa.array([i for i, _ in bad], pa.int64()))
    failed = mark_dropped(rows, name, reasons).append_column(ERROR, pa.array(messages, pa.string()))
    kept = _concat(kept_parts, table.schema)
    dropped = _concat(dropped_parts + [failed], failed.schema)
    return kept, dropped, errors, counters


def _added(into: dict, counts: dict) -> dict:
    for k, n in counts.items():
        into[k] = into.get(k, 0) + n
    return into


def _bisect(name, run, table, offset, kept_parts, dropped_parts, bad, error=None, counters=None, context=None) -> None:
    if error is None:
        try:
            result = run(table, context)
            kept, dropped = _checked(name, table, result)
            kept_parts.append(kept)
            dropped_parts.append(dropped)
            _added(counters, result.counters)
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
    doc = error.doc if isinstance(error, StageTimeout) else None
    if doc is not None and 0 <= doc < table.num_rows:  # the stage named the document: the others run again
        bad.append((offset + doc, error))
        for lo, hi in ((0, doc), (doc + 1, table.num_rows)):
            if hi > lo:
                _bisect(name, run, table.slice(lo, hi - lo), offset + lo, kept_parts, dropped_parts, bad,
                        counters=counters, context=context)
        return
    half = table.num_rows // 2
    _bisect(name, run, table.slice(0, half), offset, kept_parts, dropped_parts, bad, counters=counters, context=context)
    _bisect(name, run, table.slice(half), offset + half, kept_parts, dropped_parts, bad, counters=counters,
            context=context)


def _concat(parts: list[pa.Table], schema: pa.Schema) -> pa.Table:
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return schema.empty_table()
    return pa.concat_tables(parts, promote_options="permissive").combine_chunks()


def _error_text(e: BaseException) -> str:
    kind = e.type_name if isinstance(e, StageRaised) else type(e).__name__
    return f"{kind}: {str(e)[:300]}"


@functools.lru_cache(maxsize=64)
def _build_stage(type_: str, name: str, params_json: str):
    """Stages are built once per worker process (fastText models load once per run: the pool lives as long)."""
    return StageSpec(type_, name, json.loads(params_json)).build()
