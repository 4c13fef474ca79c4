"""What a stage is.

Two kinds of stage, siblings under ``Stage``; the runner tells them apart by ``kind``:

- A **map stage** sees one shard (an Arrow table) at a time and returns the rows it keeps and the rows
  it sets aside, each with a reason. Consecutive map stages fuse into one pass over each shard.
- A **global stage** needs a plan built from the whole corpus first (exact dedup, fuzzy dedup,
  decontamination): ``plan()`` scans every input shard and writes its plan under ``plan_dir``;
  then ``apply_with_plan()`` runs on each shard like a map stage, reading the plan.

Stages of one chain see each batch in turn and may hand what they learned about its documents to the
stages after them through the batch's ``BatchContext`` (``apply(table, context)``): ``langid`` splits
every text into words, and the heuristic filters after it reuse those words. The chain runner makes
one context per batch; a stage called alone (``apply(table)``) works the same, only without the help.

A stage is built from its pipeline table: ``Stage(name, params)`` where ``params`` is an instance
of the stage's ``Params`` dataclass, already validated by ``curate.pipeline``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np
import pyarrow as pa

from curate.schema import DUPLICATE_OF, REASON, STAGE


@dataclass
class StageResult:
    kept: pa.Table
    dropped: pa.Table  # the input's columns plus ``stage``, ``reason``, ``duplicate_of``
    added: int = 0  # documents a stage made by splitting one (kept + dropped = rows in + added)
    # sums the stage reports under its ``counters`` in stats.json (added up over batches and shards), e.g.
    # ``extract``'s bytes of the pages a size or time limit set aside
    counters: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclass
class BatchContext:
    """What the stages of one chain learn about one batch's documents, handed from stage to stage.

    One per batch, made by the chain runner and passed to every stage's ``apply``; it never outlives
    the batch. What is in it only saves work: a stage gives the same result with an empty context
    or none, whichever stages ran before it and in whichever process.
    ``words``: text -> what a stage learned of that text's words (``curate.text.spacy_words.Recent``):
    ``langid`` notes each text's words and their fastText ids, the heuristic filters reuse them and
    add the spaCy chunk ids and tokens they make.
    """

    words: dict = dataclasses.field(default_factory=dict)


@dataclass
class NoParams:
    pass


class Stage:
    """What every stage has: a ``name`` (unique in its pipeline), ``params`` (an instance of its ``Params``
    dataclass) and a ``kind``, "map" or "global", by which the runner cuts a pipeline into steps."""

    kind: ClassVar[str]
    Params: ClassVar[type] = NoParams

    def __init__(self, name: str, params: Any = None):
        self.name = name
        self.params = params if params is not None else self.Params()


class MapStage(Stage):
    """Sees one batch at a time: ``apply`` returns the rows it keeps and those it sets aside."""

    kind: ClassVar[str] = "map"

    def apply(self, table: pa.Table, context: BatchContext | None = None) -> StageResult:
        raise NotImplementedError


class GlobalStage(Stage):
    """Builds a plan over every shard first (``plan``), then sees each shard with it (``apply_with_plan``).
    ``plan`` must be deterministic (same plan for any number of workers) and write atomically."""

    kind: ClassVar[str] = "global"
    # Parts of ``plan_dir`` that are a report for users (e.g. minhash's ``clusters/``): they stay after the run;
    # the rest of the plan is removed at the end unless the pipeline sets ``keep_plans = true``.
    report_parts: ClassVar[tuple[str, ...]] = ()

    def plan(self, inputs: Sequence[str], plan_dir: Path, executor) -> dict:
        """Build the plan from every input shard; return stats worth reporting (may be empty)."""
        raise NotImplementedError

    def apply_with_plan(self, table: pa.Table, shard_index: int, plan_dir: Path,
                        context: BatchContext | None = None) -> StageResult:
        raise NotImplementedError

    def apply(self, table: pa.Table, context: BatchContext | None = None) -> StageResult:
        """Not a map stage: said in words to whoever calls it as one (the runner never does)."""
        raise RuntimeError(f"{self.name} is a global stage: it runs as plan() over every shard, then "
                           "apply_with_plan() on each (the pipeline runner does both)")


def split(table: pa.Table, stage: str, reasons: Sequence[str | None], duplicate_of: Sequence[str | None] | None = None) -> StageResult:
    """Split ``table`` by per-row reasons: ``None`` keeps the row, a string sets it aside with that reason."""
    reasons = list(reasons)
    if len(reasons) != table.num_rows:
        raise ValueError(f"{stage}: {len(reasons)} reasons for {table.num_rows} rows")
    keep = np.fromiter((r is None for r in reasons), dtype=bool, count=len(reasons))
    kept = table.filter(pa.array(keep))
    drop_idx = np.flatnonzero(~keep)
    dropped = table.take(pa.array(drop_idx, pa.int64()))
    dup = None if duplicate_of is None else [duplicate_of[i] for i in drop_idx]
    return StageResult(kept, mark_dropped(dropped, stage, [reasons[i] for i in drop_idx], dup))


def mark_dropped(table: pa.Table, stage: str, reasons: Sequence[str] | str, duplicate_of: Sequence[str | None] | None = None) -> pa.Table:
    """Add ``stage``, ``reason`` and ``duplicate_of`` columns to rows being set aside."""
    n = table.num_rows
    if isinstance(reasons, str):
        reasons = [reasons] * n
    if duplicate_of is None:
        duplicate_of = [None] * n
    for col in (STAGE, REASON, DUPLICATE_OF):
        if col in table.column_names:
            table = table.drop_columns([col])
    table = table.append_column(STAGE, pa.array([stage] * n, pa.string()))
    table = table.append_column(REASON, pa.array(list(reasons), pa.string()))
    return table.append_column(DUPLICATE_OF, pa.array(list(duplicate_of), pa.string()))


def set_column(table: pa.Table, name: str, values) -> pa.Table:
    """Add or replace a column (stages that annotate documents use this)."""
    if name in table.column_names:  # keep the column's type (text stays large_string)
        typ = table.schema.field(name).type
        arr = values.cast(typ) if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values, typ)
        return table.set_column(table.column_names.index(name), name, arr)
    arr = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values)
    return table.append_column(name, arr)


def params_as_dict(params: Any) -> dict:
    return dataclasses.asdict(params) if dataclasses.is_dataclass(params) else {}
