"""How many threads the native libraries of a worker process may start: numpy's BLAS, OpenMP.

Each of them starts one thread per CPU by default. A curate worker is one of ``workers`` processes on the same
CPUs, and a map stage's watched child works one document at a time under a CPU-time limit, so both get their
share instead: pool threads that spin while waiting for work take CPU from the other workers and count in the
child's limit (``benchmarks/blas_threads.py``: the extract stage in 2 processes on 2 CPUs ran 2.2x slower with
numpy's default of 2 BLAS threads each than with 1).
"""
from __future__ import annotations

import os

_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_limits = None  # threadpoolctl's handle: the limits hold until it is restored


def cpus() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def limit_native_threads(n: int) -> None:
    """At most ``n`` threads per pool in this process: the libraries already loaded (numpy's BLAS is loaded
    first, so it is among them) through threadpoolctl, the ones loaded later through the variables they read
    when they load."""
    global _limits
    import numpy  # noqa: F401 - loads its BLAS, so the limit below reaches it
    from threadpoolctl import threadpool_limits

    n = max(1, int(n))
    for var in _VARS:
        os.environ[var] = str(n)
    _limits = threadpool_limits(n)
