"""Why each curate worker runs numpy's BLAS on its share of the CPUs (``curate/executors/local.py``) and the
watched child on one thread (``curate/stage_watch.py``): the extract stage on WCXB pages in as many processes
as the machine has CPUs (what ``curate run`` with ``workers`` = CPUs does), with every process's BLAS pool at
one thread per CPU (numpy's default) beside one thread each, in one run, alternating.

The classifier's matrix products are small (a page's blocks x 64 units); a pool of several threads per process
spins while it waits, so on a machine whose CPUs all run workers the threads take CPU from each other.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/blas_threads.py                 # WCXB dev from ../shared
    PYTHONPATH=$PWD .venv/bin/python benchmarks/blas_threads.py --pages 300 --rounds 3

Printed per setting: wall seconds (median over rounds) for all processes to finish their pages, CPU seconds
of the processes, and the ratio. The machine may be shared: run it twice, compare the ratios.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]
WCXB = ROOT.parent / "shared" / "corpora" / "extraction"

from curate.native_threads import cpus  # noqa: E402


def run_share(pages, threads: int) -> None:
    """In a forked process: the extract stage over ``pages`` with BLAS pools of ``threads`` threads."""
    from threadpoolctl import threadpool_limits

    from curate.extract.stage import Extract, Params
    from curate.schema import HTML, documents_to_table

    with threadpool_limits(threads):
        table = documents_to_table([{"id": str(i), "text": p.html, "source": "wcxb", "url": "",
                                     "content_type": HTML} for i, p in enumerate(pages)])
        Extract("extract", Params()).apply(table)


def one_round(shares, threads: int) -> tuple[float, float]:
    """Wall and CPU seconds of ``len(shares)`` processes, each running its share at once."""
    t0, c0 = time.perf_counter(), os.times()
    pids = []
    for share in shares:
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                run_share(share, threads)
            except BaseException:  # noqa: BLE001 - reported by the exit code
                code = 1
            os._exit(code)
        pids.append(pid)
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        if status:
            raise SystemExit(f"a process failed (status {status})")
    c1 = os.times()
    return time.perf_counter() - t0, (c1.children_user + c1.children_system) - (c0.children_user + c0.children_system)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warc", default=str(WCXB / "wcxb_dev.warc.gz"))
    ap.add_argument("--gold", default=str(WCXB / "wcxb_dev_gold.jsonl"))
    ap.add_argument("--pages", type=int, default=600, help="pages in all, shared between the processes")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--processes", type=int, default=cpus(),
                    help="processes at once (default: this machine's CPUs)")
    a = ap.parse_args(argv)
    if not Path(a.warc).exists():
        raise SystemExit(f"{a.warc}: not found; give --warc and --gold (WCXB's development split, ../shared)")
    from curate.extract.training import train as T

    pages = T.load_pages(a.warc, a.gold, None)
    pages = pages[:: max(1, len(pages) // a.pages)][: a.pages]
    shares = [pages[k:: a.processes] for k in range(a.processes)]
    run_share(pages[:20], 1)  # warm-up: compiled kernels and the model loaded here, inherited by the forks
    n_cpus = cpus()
    settings = {f"{n_cpus} BLAS threads per process (numpy's default)": n_cpus, "1 BLAS thread per process": 1}
    walls: dict[str, list[float]] = {k: [] for k in settings}
    cpu: dict[str, list[float]] = {k: [] for k in settings}
    for r in range(a.rounds):
        for k in (list(settings) if r % 2 == 0 else list(settings)[::-1]):
            w, c = one_round(shares, settings[k])
            walls[k].append(w)
            cpu[k].append(c)
    print(f"extract stage, {len(pages)} WCXB pages in {a.processes} processes at once, {a.rounds} rounds "
          f"({n_cpus} CPUs)")
    for k in settings:
        print(f"  {k:<44} wall {statistics.median(walls[k]):6.1f} s   CPU {statistics.median(cpu[k]):6.1f} s")
    many, one = (statistics.median(walls[k]) for k in settings)
    print(f"  one thread per process: {many / one:.2f}x faster (wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
