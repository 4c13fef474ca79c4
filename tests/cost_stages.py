"""Map stages that spin inside C code on purpose, for the per-document time limit's tests (registered by the
tests only)."""
from __future__ import annotations

import re

import pyarrow as pa

from curate.stage_watch import at_doc
from curate.stages.base import MapStage, split

_CATASTROPHIC = re.compile(r"(a+)+$")  # exponential backtracking, all inside the C regex engine


def spin_in_c() -> None:
    _CATASTROPHIC.match("a" * 64 + "b")  # never returns in practice, and no signal handler runs meanwhile


class Spin(MapStage):
    """Says which document it is on (``at_doc``); spins in C on a document whose text holds "SPIN"."""

    def apply(self, table: pa.Table, context=None):
        texts = table.column("text").to_pylist()
        for i, t in enumerate(texts):
            at_doc(i)
            if "SPIN" in t:
                spin_in_c()
        return split(table, self.name, [None] * len(texts))


class SpinUnmarked(MapStage):
    """The same without saying which document it is on: the batch is halved to find it."""

    def apply(self, table: pa.Table, context=None):
        texts = table.column("text").to_pylist()
        if any("SPIN" in t for t in texts):
            spin_in_c()
        return split(table, self.name, [None] * len(texts))


class Crash(MapStage):
    """Crashes its process (SIGSEGV, as a C library reading a crafted file would) on a document holding "CRASH"."""

    def apply(self, table: pa.Table, context=None):
        import ctypes

        texts = table.column("text").to_pylist()
        for i, t in enumerate(texts):
            at_doc(i)
            if "CRASH" in t:
                ctypes.string_at(0)
        return split(table, self.name, [None] * len(texts))


def blas_threads() -> int:
    """The most threads any BLAS / OpenMP pool of this process would start (threadpoolctl's view)."""
    from threadpoolctl import threadpool_info

    import numpy  # noqa: F401 - its BLAS is what the extract classifier's matrix products use

    return max(pool["num_threads"] for pool in threadpool_info())


class BlasThreads(MapStage):
    """Keeps every document and reports, as a counter, how many BLAS threads the process it runs in has."""

    def apply(self, table: pa.Table, context=None):
        result = split(table, self.name, [None] * table.num_rows)
        result.counters["blas_threads"] = blas_threads()
        return result
