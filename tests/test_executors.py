"""The local pool: one pool for the whole run, results in order, a dead worker's task retried, then a clear error."""
import os
from pathlib import Path

import pytest

from curate.executors import WorkerLost
from curate.executors.local import LocalExecutor


def square(x):
    return x * x


def pid(_):
    return os.getpid()


def die_once(args):
    """Kills its worker process the first time it sees its flag file missing (as the OOM killer would)."""
    flag, x = args
    if x == 3 and not Path(flag).exists():
        Path(flag).write_text("died")
        os._exit(9)
    return x * 10


def always_die(x):
    os._exit(9)


def test_results_in_order_and_one_pool_for_every_map():
    ex = LocalExecutor(2, max_in_flight=3)
    try:
        seen = []
        assert ex.map(square, range(50), on_result=seen.append) == [x * x for x in range(50)]
        assert sorted(seen) == [x * x for x in range(50)]
        first = set(ex.map(pid, range(20)))
        second = set(ex.map(pid, range(20)))
        assert len(first | second) <= 2  # the same two worker processes serve both maps
        assert os.getpid() not in first
    finally:
        ex.close()


def test_a_dead_worker_is_replaced_and_its_task_retried(tmp_path):
    ex = LocalExecutor(2, max_retries=2)
    try:
        flag = str(tmp_path / "flag")
        assert ex.map(die_once, [(flag, x) for x in range(8)]) == [x * 10 for x in range(8)]
        assert Path(flag).exists()
    finally:
        ex.close()


def test_a_task_that_always_kills_its_worker_stops_with_a_message():
    ex = LocalExecutor(2, max_retries=1)
    try:
        with pytest.raises(WorkerLost, match="max_retries = 1"):
            ex.map(always_die, range(4))
    finally:
        ex.close()


def test_workers_share_the_cpus_between_their_blas_threads():
    """Each worker's BLAS pool gets its share of the CPUs, not one thread per CPU each."""
    from tests.cost_stages import blas_threads

    from curate.native_threads import cpus

    before = blas_threads(), os.environ.get("OPENBLAS_NUM_THREADS")
    ex = LocalExecutor(2)
    try:
        seen = set(ex.map(_worker_blas_threads, range(4)))
    finally:
        ex.close()
    assert seen == {max(1, cpus() // 2)}
    assert (blas_threads(), os.environ.get("OPENBLAS_NUM_THREADS")) == before  # the driver's own are left alone


def _worker_blas_threads(_):
    from tests.cost_stages import blas_threads

    return blas_threads()


def crash_on_7(x):
    """A library failing on one input: SIGSEGV for 7 (as a C reader on a crafted file), a result otherwise."""
    if x == 7:
        import ctypes

        ctypes.string_at(0)  # a read at address 0: SIGSEGV
    return x * 10


def killed_on_7(x):
    if x == 7:
        os.kill(os.getpid(), 9)  # as the out-of-memory killer would
    return x * 10


def test_a_task_that_crashes_its_worker_is_blamed_alone_and_given_its_crash_result():
    """The crash breaks the pool and every task in flight with it: the others are charged attempts too, but
    only the task that crashes a worker by itself gets ``on_crash``'s result; the others run to completion."""
    ex = LocalExecutor(2, max_in_flight=4, max_retries=1)
    blamed = []

    def on_crash(item, why):
        blamed.append((item, why))
        return -1

    try:
        assert ex.map(crash_on_7, range(12), on_crash=on_crash) == [-1 if x == 7 else x * 10 for x in range(12)]
        assert [b[0] for b in blamed] == [7] and "SIGSEGV" in blamed[0][1]
        # without on_crash the run stops, naming the task and the signal
        with pytest.raises(WorkerLost, match=r"running the same task, 7 \(SIGSEGV"):
            ex.map(crash_on_7, range(12))
        # a worker killed (SIGKILL: out of memory?) is not a crash of the input's making: the run stops
        with pytest.raises(WorkerLost, match=r"running the same task, 7 \(SIGKILL"):
            ex.map(killed_on_7, range(12), on_crash=on_crash)
        assert len(blamed) == 1
    finally:
        ex.close()
