#!/usr/bin/env python
"""Curation throughput: docs/s per core for each stage, and Quarry's pipeline against DataTrove's.

    .venv/bin/python benchmarks/curate_throughput.py [--warc A.warc.gz B.warc.gz] [--rounds 3] [--pipeline-rounds 3]

Input: real WARCs (default: the repository's copies of trafilatura 1.1.0's 87 real-world test pages and
pywb's iana.org crawl, ``pipelines/sample/*.warc.gz``; see pipelines/sample/SOURCES.md).

Part 1, stages (one process, one thread; Rust/BLAS/numba pools pinned to 1 thread). Each contender runs
over all documents once per round; rounds rotate the order; a figure is the median over rounds of
CPU time (``time.process_time``; the machine is shared, so wall time would count other people's work),
a ratio is the median of per-round ratios. Every stage sees the same documents: the extracted text of all
HTML pages (filters are timed on all of them, not on what earlier filters would have left).

- extract: trafilatura (``extract`` with engine = "trafilatura"), plain resiliparse
  ``extract_plain_text(main_content=True)`` (no pre-pass, no cleanup), Quarry's default ``extract`` (the
  learned block classifier) and its rules engine (``engine = "resiliparse"``).
- normalize: plain ``ftfy.fix_text`` on every document beside Quarry's ``normalize`` stage (which calls
  ftfy only where mojibake is possible).

Part 2, whole pipelines, each run as its own process with one worker, alternating (Q D, D Q, ...):

- Quarry: ``python -m curate run`` on read -> extract -> normalize -> gopher_quality -> gopher_repetition
  -> c4_quality -> fineweb_quality.
- DataTrove (``LocalPipelineExecutor``, 1 task, 1 worker): ``WarcReader`` -> ``Trafilatura`` (its defaults:
  favour_precision, 1 s timeout in a sandbox process) -> ``GopherRepetitionFilter`` -> ``GopherQualityFilter``
  -> ``C4QualityFilter(filter_no_terminal_punct=False)`` -> ``FineWebQualityFilter`` (the FineWeb order).

No language ID on either side: DataTrove's ``LanguageFilter`` downloads its model on first use and this
machine is offline. Quarry's side also runs ``normalize`` (ftfy), which DataTrove's chain does not.
docs/s = documents the side's own reader produced / seconds (wall, and CPU of the process tree).
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")
os.environ.setdefault("TQDM_DISABLE", "1")

import argparse
import importlib
import json
import logging
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_WARCS = [ROOT / "pipelines/sample/web-pages-87.warc.gz", ROOT / "pipelines/sample/iana.warc.gz"]
FILTERS = ["gopher_quality", "gopher_repetition", "c4_quality", "fineweb_quality"]


# --------------------------------------------------------------------------------------------- helpers

def rounds_of(contenders: dict, rounds: int) -> dict[str, list[float]]:
    """CPU seconds per round for each contender (a no-argument callable), rotating the order."""
    names = list(contenders)
    times = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for n in order:
            t0 = time.process_time()
            contenders[n]()
            times[n].append(time.process_time() - t0)
    return times


def ratio(times: dict, slow: str, fast: str) -> float:
    return statistics.median(a / b for a, b in zip(times[slow], times[fast]) if b > 0)


def missing_module(name: str) -> str | None:
    try:
        importlib.import_module(name)
        return None
    except Exception as e:  # ImportError, or a half-written module of a colleague
        return f"{type(e).__name__}: {e}"


class Table:
    def __init__(self, header: list[str]):
        self.header, self.rows = header, []

    def add(self, *cells):
        self.rows.append([str(c) for c in cells])

    def print(self):
        widths = [max(len(r[i]) for r in [self.header] + self.rows) for i in range(len(self.header))]
        line = "  ".join(h.ljust(w) for h, w in zip(self.header, widths))
        print(line)
        print("-" * len(line))
        for r in self.rows:
            print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))


# ------------------------------------------------------------------------------------------ part 1

def _bench_read(warcs: list[Path], rounds: int, table) -> list[dict]:
    """The WARC reader over every file; returns the documents read."""
    from curate.readers import read_file

    def read_all():
        out = []
        for w in warcs:
            out.extend(item[1] for item in read_file(str(w), "warc") if item[0] == "doc")
        return out

    t = rounds_of({"read": read_all}, rounds)
    docs = read_all()
    warc_mb = sum(w.stat().st_size for w in warcs) / 1e6
    table.add("read", "quarry WARC reader (warcio)", len(docs), f"{len(docs) / statistics.median(t['read']):.0f}",
              f"{warc_mb / statistics.median(t['read']):.1f}", "")
    return docs


def _bench_extract(html_rows: list[dict], rounds: int, table):
    """extract: trafilatura, resiliparse and Quarry's two engines on the HTML documents; returns Quarry's kept
    table (the input of the stages after)."""
    from resiliparse.extract.html2text import extract_plain_text

    from curate.extract.stage import Extract, Params
    from curate.schema import documents_to_table

    html_table = documents_to_table(html_rows)
    html_mb = sum(len(d["text"].encode()) for d in html_rows) / 1e6
    n = len(html_rows)
    traf_stage = Extract("extract", Params(engine="trafilatura"))
    quarry_stage = Extract("extract", Params())
    rules_stage = Extract("extract", Params(engine="resiliparse"))
    logging.disable(logging.WARNING)  # trafilatura logs every page it finds little text in
    contenders = {
        "trafilatura": lambda: traf_stage.apply(html_table),
        "resiliparse": lambda: [extract_plain_text(d["text"], main_content=True) for d in html_rows],
        "quarry": lambda: quarry_stage.apply(html_table),
        "quarry_rules": lambda: rules_stage.apply(html_table),
    }
    t = rounds_of(contenders, rounds)
    label = {"trafilatura": "trafilatura 2.3.1 extract() (engine=trafilatura)",
             "resiliparse": "resiliparse main_content=True, no cleanup",
             "quarry": "quarry extract (default: learned blocks)",
             "quarry_rules": "quarry extract engine=resiliparse (rules)"}
    for k in contenders:
        med = statistics.median(t[k])
        r = "1.00" if k == "trafilatura" else f"{ratio(t, 'trafilatura', k):.1f}x faster"
        table.add("extract", label[k], n, f"{n / med:.0f}", f"{html_mb / med:.1f}", r)
    return quarry_stage.apply(html_table).kept


def _bench_normalize(extracted, rounds: int, table):
    """normalize: the same repair as fix_text (same config), with and without the skip of clean text; returns
    the normalized table."""
    import ftfy

    from curate.stages.normalize import Normalize
    from curate.stages.normalize import Params as NormParams
    from curate.stages.normalize import ftfy_config, needs_ftfy

    texts = extracted.column("text").to_pylist()
    m = len(texts)
    text_mb = sum(len(x.encode()) for x in texts) / 1e6
    norm = Normalize("normalize", NormParams())
    norm_all = Normalize("normalize", NormParams(skip_clean=False))
    config = ftfy_config()
    t = rounds_of({"ftfy": lambda: [ftfy.fix_text(x, config) for x in texts], "quarry": lambda: norm.apply(extracted),
                   "noskip": lambda: norm_all.apply(extracted)}, rounds)
    skipped_share = sum(not needs_ftfy(x) for x in texts) / max(m, 1)
    table.add("normalize", "ftfy.fix_text (the stage's config) on every document", m,
              f"{m / statistics.median(t['ftfy']):.0f}", f"{text_mb / statistics.median(t['ftfy']):.2f}", "1.00")
    table.add("normalize", "quarry normalize, skip_clean = false (fix_text + tidy)", m,
              f"{m / statistics.median(t['noskip']):.0f}", f"{text_mb / statistics.median(t['noskip']):.2f}",
              f"{ratio(t, 'ftfy', 'noskip'):.1f}x faster")
    table.add("normalize", f"quarry normalize (default: fix_text skipped on {100 * skipped_share:.0f}% of docs)", m,
              f"{m / statistics.median(t['quarry']):.0f}", f"{text_mb / statistics.median(t['quarry']):.2f}",
              f"{ratio(t, 'ftfy', 'quarry'):.1f}x faster")
    return norm.apply(extracted).kept


def _bench_filters(normalized, text_mb: float, rounds: int, table) -> list[str]:
    """langid and the filters, each on every normalized document; returns the ones that could not run."""
    from curate.stages import stage_class

    skipped = []
    for ft in ["langid"] + FILTERS:
        try:
            cls = stage_class(ft)
            stage = cls(ft, cls.Params())
            stage.apply(normalized.slice(0, 2))  # model loads and the like, outside the timing
        except Exception as e:
            skipped.append(f"{ft}: {type(e).__name__}: {e}")
            continue
        t = rounds_of({ft: lambda stage=stage: stage.apply(normalized)}, rounds)
        med = statistics.median(t[ft])
        table.add(ft, f"quarry {ft}", normalized.num_rows, f"{normalized.num_rows / med:.0f}",
                  f"{text_mb / med:.2f}", "")
    return skipped


def stage_benchmark(warcs: list[Path], rounds: int) -> None:
    from curate.schema import HTML

    table = Table(["stage", "contender", "docs", "docs/s/core", "MB/s", "ratio"])
    docs = _bench_read(warcs, rounds, table)
    html_rows = [d for d in docs if d["content_type"] == HTML]
    extracted = _bench_extract(html_rows, rounds, table)
    text_mb = sum(len(x.encode()) for x in extracted.column("text").to_pylist()) / 1e6
    normalized = _bench_normalize(extracted, rounds, table)
    skipped = _bench_filters(normalized, text_mb, rounds, table)

    warc_mb = sum(w.stat().st_size for w in warcs) / 1e6
    html_mb = sum(len(d["text"].encode()) for d in html_rows) / 1e6
    print(f"Part 1: stages, one process, one thread; median of {rounds} rounds of CPU time")
    print(f"input: {', '.join(w.name for w in warcs)} ({warc_mb:.1f} MB): {len(docs)} documents read, "
          f"{len(html_rows)} HTML ({html_mb:.1f} MB of HTML), {extracted.num_rows} with main text "
          f"({text_mb:.2f} MB of text)")
    table.print()
    for s in skipped:
        print(f"  skipped {s}")


# ------------------------------------------------------------------------------------------ part 2

DATATROVE_SCRIPT = textwrap.dedent("""
    import sys
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter, GopherQualityFilter,
                                            GopherRepetitionFilter)
    from datatrove.pipeline.readers import WarcReader

    folder, pattern, logs = sys.argv[1], sys.argv[2], sys.argv[3]
    pipeline = [
        WarcReader(folder, glob_pattern=pattern),
        Trafilatura(),
        GopherRepetitionFilter(),
        GopherQualityFilter(),
        C4QualityFilter(filter_no_terminal_punct=False),
        FineWebQualityFilter(),
    ]
    LocalPipelineExecutor(pipeline=pipeline, tasks=1, workers=1, logging_dir=logs, skip_completed=False).run()
""")

QUARRY_TOML = """
[pipeline]
name = "throughput"
output = "{out}"
workers = 1
shard_rows = 5000

[[sources]]
path = "{glob}"
""" + "".join(f'\n[[stages]]\ntype = "{t}"\n' for t in ["extract", "normalize"] + FILTERS)


def run_timed(cmd: list[str], cwd: Path) -> tuple[float, float, subprocess.CompletedProcess]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc


def quarry_run(glob: str, tmp: Path, i: int) -> dict:
    out = tmp / f"quarry_{i}"
    toml = tmp / f"quarry_{i}.toml"
    toml.write_text(QUARRY_TOML.format(out=out, glob=glob))
    wall, cpu, proc = run_timed([sys.executable, "-m", "curate", "run", str(toml), "--quiet"], ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"curate run failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    stats = json.loads((out / "stats.json").read_text())
    stages = stats["stages"]
    return {"wall": wall, "cpu": cpu, "read": stages[0]["kept"], "kept": stages[-1]["kept"]}


def datatrove_run(folder: Path, pattern: str, tmp: Path, i: int) -> dict:
    script = tmp / "datatrove_chain.py"
    script.write_text(DATATROVE_SCRIPT)
    logs = tmp / f"datatrove_{i}"
    wall, cpu, proc = run_timed([sys.executable, str(script), str(folder), pattern, str(logs)], tmp)
    if proc.returncode != 0:
        raise RuntimeError(f"DataTrove run failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    steps = json.loads((logs / "stats.json").read_text())
    read = steps[0]["stats"]["documents"]["total"]
    return {"wall": wall, "cpu": cpu, "read": read, "kept": steps[-1]["stats"].get("forwarded", 0)}


def pipeline_benchmark(warcs: list[Path], rounds: int) -> None:
    print(f"\nPart 2: whole pipelines, one process and one worker each, {rounds} alternating runs")
    folders = {w.parent for w in warcs}
    if len(folders) != 1:
        print("  skipped: the WARCs must sit in one folder (both sides read that folder with one glob)")
        return
    folder = folders.pop()
    names = sorted(w.name for w in warcs)
    others = sorted(p.name for p in folder.glob("*.warc.gz"))
    if names != others:
        print(f"  skipped: {folder} holds other WARCs too ({others}); both sides read *.warc.gz there")
        return
    problems = {}
    for mod in ["curate.runner", "curate.pipeline", "curate.commands.run", "curate.extract.stage"] + [
            f"curate.stages.{m}" for m in ("normalize", "gopher_quality")]:
        err = missing_module(mod)
        if err:
            problems["quarry"] = f"{mod}: {err}"
            break
    err = missing_module("datatrove.pipeline.readers") or missing_module("datatrove.pipeline.filters")
    if err:
        problems["datatrove"] = err + " (pip install datatrove spacy faust-cchardet python-magic)"
    for side, why in problems.items():
        print(f"  {side} row skipped: {why}")
    glob = str(folder / "*.warc.gz")
    results = {"quarry": [], "datatrove": []}
    with tempfile.TemporaryDirectory(prefix="curate_throughput_") as tmp_s:
        tmp = Path(tmp_s)
        for i in range(rounds):
            order = ["quarry", "datatrove"] if i % 2 == 0 else ["datatrove", "quarry"]
            for side in order:
                if side in problems:
                    continue
                try:
                    if side == "quarry":
                        results[side].append(quarry_run(glob, tmp, i))
                    else:
                        results[side].append(datatrove_run(folder, "*.warc.gz", tmp, i))
                except Exception as e:
                    problems[side] = str(e)
                    print(f"  {side} row skipped: {e}")
    table = Table(["pipeline", "chain", "docs read", "docs kept", "wall s", "docs/s (wall)", "CPU s", "docs/s (CPU)"])
    chains = {"quarry": "read > extract > normalize > gopher_quality > gopher_repetition > c4 > fineweb",
              "datatrove": "WarcReader > Trafilatura > GopherRepetition > GopherQuality > C4 > FineWeb"}
    for side, runs in results.items():
        if not runs or side in problems:
            continue
        wall = statistics.median(r["wall"] for r in runs)
        cpu = statistics.median(r["cpu"] for r in runs)
        read, kept = runs[0]["read"], runs[0]["kept"]
        table.add(side, chains[side], read, kept, f"{wall:.2f}", f"{read / wall:.1f}", f"{cpu:.2f}", f"{read / cpu:.1f}")
    table.print()
    q, d = results["quarry"], results["datatrove"]
    if q and d and "quarry" not in problems and "datatrove" not in problems:
        def rate_ratio(key):
            return statistics.median((a["read"] / a[key]) / (b["read"] / b[key]) for a, b in zip(q, d))
        print(f"  Quarry / DataTrove, whole-pipeline docs/s: {rate_ratio('wall'):.1f}x (wall), "
              f"{rate_ratio('cpu'):.1f}x (CPU); median of per-round ratios; process start-up included")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--warc", nargs="+", type=Path, default=DEFAULT_WARCS)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the stage benchmark")
    ap.add_argument("--pipeline-rounds", type=int, default=3, help="alternating whole-pipeline runs per side")
    ap.add_argument("--skip-pipeline", action="store_true")
    args = ap.parse_args(argv)
    warcs = [w.resolve() for w in args.warc]
    t0 = time.time()
    stage_benchmark(warcs, args.rounds)
    if not args.skip_pipeline:
        pipeline_benchmark(warcs, args.pipeline_rounds)
    print(f"\n(benchmark took {time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
