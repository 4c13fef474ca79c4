"""What crosses from the driver to a worker, and what a task leaves on disk: one definition of each.

- ``ReadTask`` / ``MapTask``: one task of a step (paths and options, never data; picklable for the local
  and Ray executors), both carrying the ``StepOutput`` every task of their step shares.
- ``Marker``: what a finished task wrote (``ShardEntry`` per shard) and each stage's ``StageCounts``;
  saved as ``OUT/steps/NN_<step>/_tasks/<task_id>.json``. ``Manifest`` is ``OUT/manifest.json``.

``to_json`` / ``from_json`` are the disk boundary: they keep the JSON of earlier runs (key names such as
``"in"``, key order, keys left out when empty) so a folder written before resumes unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # curate.pipeline imports the readers and stages; a worker needs only the class
    from curate.pipeline import StageSpec


@dataclass(frozen=True)
class ShardEntry:
    """One shard in a marker or the manifest: its path relative to the output folder, rows and checksum."""

    path: str
    rows: int
    sha256: str

    def to_json(self) -> dict:
        return {"path": self.path, "rows": self.rows, "sha256": self.sha256}

    @classmethod
    def from_json(cls, obj: dict) -> ShardEntry:
        return cls(str(obj["path"]), int(obj["rows"]), str(obj["sha256"]))


@dataclass
class StageCounts:
    """One stage's documents in, kept and set aside by reason: for one task in its marker, summed over
    the run in ``stats.json``. The optional parts are written only when a stage has them."""

    name: str
    docs_in: int = 0  # "in" on disk
    kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> documents
    added: int = 0  # documents a stage made by splitting one
    skipped: dict[str, int] | None = None  # the reader's records that are not documents (WARC requests, ...)
    counters: dict[str, int] | None = None  # the stage's own sums (StageResult.counters)
    errors: dict[str, int] | None = None  # "Type: message" -> documents set aside as stage_error

    def drop(self, reason: str, n: int = 1) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + n

    def to_json(self) -> dict:
        out = {"name": self.name, "in": self.docs_in, "kept": self.kept, "dropped": dict(sorted(self.dropped.items()))}
        if self.added:
            out["added"] = self.added
        for key in ("skipped", "counters", "errors"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    @classmethod
    def from_json(cls, obj: dict) -> StageCounts:
        return cls(obj["name"], int(obj["in"]), int(obj["kept"]), dict(obj["dropped"]), int(obj.get("added", 0)),
                   obj.get("skipped"), obj.get("counters"), obj.get("errors"))


@dataclass
class Marker:
    """A finished task: written last, after its shards, so it exists only when they do. It counts on a rerun
    only while ``key`` matches what the task would read now."""

    task_id: str
    key: str
    outputs: list[ShardEntry]
    dropped: list[ShardEntry]
    stats: list[StageCounts]
    docs: int  # documents the task read

    def to_json(self) -> dict:
        return {"task_id": self.task_id, "key": self.key, "outputs": [e.to_json() for e in self.outputs],
                "dropped": [e.to_json() for e in self.dropped], "stats": [s.to_json() for s in self.stats],
                "docs": self.docs}

    @classmethod
    def from_json(cls, obj: dict) -> Marker:
        """Raises ``KeyError``, ``TypeError`` or ``ValueError`` on a record that is not a whole marker."""
        return cls(str(obj["task_id"]), str(obj["key"]), [ShardEntry.from_json(e) for e in obj["outputs"]],
                   [ShardEntry.from_json(e) for e in obj["dropped"]], [StageCounts.from_json(s) for s in obj["stats"]],
                   int(obj["docs"]))


@dataclass
class Manifest:
    """``OUT/manifest.json``: the kept shards of the last step and every set-aside shard, in task order."""

    shards: list[ShardEntry]
    dropped: list[ShardEntry]

    def to_json(self) -> dict:
        return {"shards": [e.to_json() for e in self.shards], "dropped": [e.to_json() for e in self.dropped]}


@dataclass(frozen=True)
class StepOutput:
    """What every task of a step shares: the stages it runs, and where and how it writes."""

    stages: tuple[StageSpec, ...]
    root: str  # the output folder: shard paths in markers are relative to it
    out_dir: str  # kept documents: OUT/data for the last step, else OUT/steps/NN_<step>
    drop_dir: str  # set-aside documents: OUT/dropped/NN_<step>
    format: str  # "arrow" or "parquet"
    keep_dropped: str  # "full", "ids" or "none"


@dataclass(frozen=True)
class ReadTask:
    """One split of an input file, read in batches of ``shard_rows`` documents through the step's stages."""

    task_id: str  # srcFFFFF-SSSS: file and split
    key: str  # the marker counts while it holds this (the file's fingerprint, the split, the source options)
    step: StepOutput
    split: dict  # what readers.plan_splits made of the file (the readers' own description)
    source: dict  # text_field / id_field of the file's [[sources]] table, when given
    max_doc_bytes: int
    shard_rows: int


@dataclass(frozen=True)
class MapTask:
    """One shard of the step before, through the step's global stage (with its plan) and map stages."""

    task_id: str  # the input shard's stem, also the stem of what the task writes
    key: str  # the marker counts while it holds this (the input shard's sha256, the plan's inputs)
    step: StepOutput
    input: str  # absolute path of the input shard
    shard_index: int  # its place among the step's inputs (how the plan names it)
    plan_dir: str | None  # the global stage's plan, None for a step without one
