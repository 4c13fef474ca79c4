"""Map stages that fail on purpose, for the runner's isolation tests (registered by the tests only)."""
from __future__ import annotations

import errno

import pyarrow as pa

from curate.stages.base import MapStage, split


class Boom(MapStage):
    """Raises on any batch holding a document with "BOOM" in its text; keeps everything else."""

    def apply(self, table: pa.Table, context=None):
        texts = table.column("text").to_pylist()
        if any("BOOM" in t for t in texts):
            raise ValueError("cannot handle BOOM")
        return split(table, self.name, [None] * len(texts))


class AlwaysBoom(MapStage):
    def apply(self, table: pa.Table, context=None):
        raise KeyError("a bug hit on every document")


class DiskFull(MapStage):
    def apply(self, table: pa.Table, context=None):
        raise OSError(errno.ENOSPC, "No space left on device", "/tmp/out/data/part.arrow")


from curate.stages.base import GlobalStage  # noqa: E402


class BuggyPlan(GlobalStage):
    def plan(self, inputs, plan_dir, executor):
        raise ValueError("a bug in a plan")
