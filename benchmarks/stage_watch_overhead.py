"""What the watched child (``[pipeline] stage_timeout_s``, ``curate/stage_watch.py``) costs a map chain: docs/s
of gopher_quality + gopher_repetition through the whole engine (``run_pipeline``, one worker, several read
tasks), with ``stage_timeout_s = 60`` (the stages run in a forked child) beside ``0`` (they run in the worker
itself), in one run, alternating.

What it measures above all is spaCy's chunk memo (``curate.text.spacy_words``: each distinct whitespace
chunk is tokenized once per process). Without the watch, a worker keeps its memo from task to task; with it,
each task's stages run in a child, and what that child learns is lost unless the child outlives the task.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/stage_watch_overhead.py            # ../shared/corpora/prose
    PYTHONPATH=$PWD .venv/bin/python benchmarks/stage_watch_overhead.py --docs 800 --tasks 8 --rounds 3

The corpus: ``../shared/corpora/prose/english_prose.jsonl`` (``--corpus``), else ``tests/data/filters/prose.jsonl``
(small). Each round writes the first ``--docs`` documents to one JSONL file, cut into ``--tasks`` read tasks
(``split_bytes``); every run starts with an empty memo, so the first task is cold in both.
Each run is a fresh process (``workers = 1`` runs the tasks in it), as a worker starts. Printed: docs/s and CPU
seconds of that process and its watched children per setting (medians over the rounds), and the ratio. The machine may be shared: run it twice, compare the ratios.
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from curate.executors.local import LocalExecutor  # noqa: E402
from curate.pipeline import load_pipeline  # noqa: E402
from curate.runner import run_pipeline  # noqa: E402

CORPORA = [ROOT.parent / "shared" / "corpora" / "prose" / "english_prose.jsonl", ROOT / "tests" / "data" / "filters" / "prose.jsonl"]


def documents(corpus: Path, n: int) -> list[str]:
    lines = []
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                lines.append(line if line.endswith("\n") else line + "\n")
            if len(lines) >= n:
                break
    return lines


def pipeline_file(work: Path, src: Path, out: Path, timeout: float, split_bytes: int) -> Path:
    toml = work / f"p{timeout:g}.toml"
    toml.write_text(f'[pipeline]\nname = "watch"\noutput = "{out}"\nworkers = 1\nsplit_bytes = {split_bytes}\n'
                    f'stage_timeout_s = {timeout}\n\n[[sources]]\npath = "{src}"\n\n'
                    f'[[stages]]\ntype = "gopher_quality"\n\n[[stages]]\ntype = "gopher_repetition"\n')
    return toml


def cpu_now() -> float:
    """CPU seconds of this process and of its children reaped so far (the watched children of its tasks)."""
    return sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))


def one_run(toml: Path) -> tuple[float, float, dict]:
    """One run in a fresh process (``workers = 1``: the tasks run in it, one after the other), as a worker
    starts: nothing remembered from an earlier run."""
    done = subprocess.run([sys.executable, __file__, "--one", str(toml)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the run of {toml} failed:\n{done.stderr[-3000:]}")
    got = json.loads(done.stdout.strip().splitlines()[-1])
    return got["wall"], got["cpu"], got["stats"]


def _one(toml: str) -> None:
    cpu0, t0 = cpu_now(), time.perf_counter()
    stats = run_pipeline(load_pipeline(Path(toml)), LocalExecutor(1), progress=False)
    print(json.dumps({"wall": time.perf_counter() - t0, "cpu": cpu_now() - cpu0, "stats": stats}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=None, help="JSONL with a text field (default: the shared prose corpus)")
    ap.add_argument("--docs", type=int, default=1200)
    ap.add_argument("--tasks", type=int, default=8, help="read tasks the file is cut into")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: one run, in this process
    args = ap.parse_args()
    if args.one:
        return _one(args.one)
    corpus = Path(args.corpus) if args.corpus else next(p for p in CORPORA if p.exists())
    lines = documents(corpus, args.docs)
    print(f"corpus {corpus}: {len(lines)} documents, {sum(map(len, lines)) / 1e6:.1f} MB, {args.tasks} read tasks, "
          f"one worker, {args.rounds} rounds")
    results: dict[float, list[tuple[float, float]]] = {60.0: [], 0.0: []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        src = work / "docs.jsonl"
        src.write_text("".join(lines))
        split_bytes = max(1, src.stat().st_size // args.tasks + 1)
        kept = {}
        for r in range(args.rounds):
            for timeout in ((60.0, 0.0) if r % 2 == 0 else (0.0, 60.0)):
                out = work / f"out-{timeout:g}-{r}"
                wall, cpu, stats = one_run(pipeline_file(work, src, out, timeout, split_bytes))
                results[timeout].append((wall, cpu))
                kept[timeout] = [s["kept"] for s in stats["stages"]]
        if kept[60.0] != kept[0.0]:
            raise SystemExit(f"the two settings kept different documents: {kept}")
    print(f"{'stage_timeout_s':>16} {'docs/s':>9} {'docs/CPU s':>11} {'wall s':>8} {'CPU s':>8}")
    rates, per_cpu = {}, {}
    for timeout, runs in results.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        rates[timeout], per_cpu[timeout] = len(lines) / wall, len(lines) / cpu
        print(f"{timeout:>16g} {rates[timeout]:>9.1f} {per_cpu[timeout]:>11.1f} {wall:>8.2f} {cpu:>8.2f}")
    print(f"watched / unwatched: docs/s {rates[60.0] / rates[0.0]:.2f}, docs per CPU second "
          f"{per_cpu[60.0] / per_cpu[0.0]:.2f}")
    print(json.dumps({"docs": len(lines), "tasks": args.tasks, "docs_per_s": {f"{k:g}": round(v, 1) for k, v in rates.items()},
                      "docs_per_cpu_s": {f"{k:g}": round(v, 1) for k, v in per_cpu.items()}}))


if __name__ == "__main__":
    main()
