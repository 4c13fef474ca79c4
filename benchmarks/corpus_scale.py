#!/usr/bin/env python
"""The curation engine at corpus scale: the whole pipeline over a real-prose corpus, as ONE file and as 16.

    .venv/bin/python benchmarks/corpus_scale.py                    # 20,000 documents (a few minutes here)
    .venv/bin/python benchmarks/corpus_scale.py --docs 200000 1000000 --workers 2

The corpus: paragraphs of real English prose (``../shared/corpora/prose/english_prose.jsonl``, else the
repository's ``pipelines/sample/prose.jsonl.gz``) composed at random into documents of about 4 KB, with
planted copies: 3% exact copies of an earlier document, 3% near copies (one word in 50 changed). It is
written once as a single ``.jsonl.gz`` and once as 16 ``.jsonl.gz`` files holding the same documents.

Each layout runs ``curate run`` (normalize, langid, gopher_quality, gopher_repetition, c4_quality,
fineweb_quality, exact_dedup, minhash_dedup) with ``--workers`` processes, watched from /proc:

- docs/s (input documents / wall seconds) and docs/s per core; docs per CPU-second (less sensitive to
  other jobs on the machine than wall time);
- cores busy: CPU seconds of the whole process tree / wall seconds (goal from one file: >= 1.7 of 2);
- peak RSS: the largest sum of resident memory over the tree (goal: < 4 GiB at 1M documents);
- bytes under OUT at the peak and at the end, against the compressed input (goals: <= 2x, <= 1.3x);
- the seconds a rerun of the finished run takes (it only reads task markers; process start included);
- cores wanted: the mean number of the run's processes that wanted a core (state R), which, unlike cores
  busy, does not fall when other jobs share the machine; and a timeline per step (its plan, its tasks,
  from the task markers' times) with the cores wanted in each phase, to find idle time;
- what was under OUT at its peak, per folder.

The machine is shared with other jobs: wall-clock figures (docs/s, cores busy) are noisy; run it twice
before trusting a difference. Nothing is asserted; the figures are printed with their goals.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procmon import run_watched  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROSE = [ROOT.parent / "shared" / "corpora" / "prose" / "english_prose.jsonl", ROOT / "pipelines" / "sample" / "prose.jsonl.gz"]

PIPELINE = """
[pipeline]
name = "corpus-scale"
output = "{out}"
workers = {workers}
shard_rows = {shard_rows}

[[sources]]
path = "{inputs}"

[[stages]]
type = "normalize"
[[stages]]
type = "langid"
languages = ["en"]
threshold = 0.5
[[stages]]
type = "gopher_quality"
[[stages]]
type = "gopher_repetition"
[[stages]]
type = "c4_quality"
[[stages]]
type = "fineweb_quality"
[[stages]]
type = "exact_dedup"
[[stages]]
type = "minhash_dedup"
"""


def paragraphs(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    out = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            for p in re.split(r"\n\s*\n", text):
                p = " ".join(p.split())
                if len(p) >= 200:
                    out.append(p)
    return out


POOL = 100_000  # copies are drawn from the last POOL documents, so building 1M documents needs little memory


def compose(paras: list[str], n: int, seed: int = 0, target: int = 4000):
    """Yield ``n`` documents of about ``target`` characters, 3% exact and 3% near copies of earlier ones."""
    rng = random.Random(seed)
    pool: list[str] = []
    for i in range(n):
        r = rng.random()
        if pool and r < 0.03:  # an exact copy of an earlier document
            text = pool[rng.randrange(len(pool))]
        elif pool and r < 0.06:  # a near copy: one word in 50 changed
            words = pool[rng.randrange(len(pool))].split(" ")
            for j in range(0, len(words), 50):
                words[j] = "changed"
            text = " ".join(words)
        else:
            parts, size = [], 0
            while size < target:
                p = paras[rng.randrange(len(paras))]
                parts.append(p)
                size += len(p)
            text = "\n\n".join(parts)
        if len(pool) < POOL:
            pool.append(text)
        else:
            pool[i % POOL] = text
        yield {"id": f"d{i:08d}", "text": text}


def build(n: int, work: Path, prose: Path) -> tuple[Path, Path, int]:
    """The corpus as one .jsonl.gz and as 16, written as it is composed (memory stays small at any size)."""
    one, many = work / f"one-{n}", work / f"many-{n}"
    if not (one / "corpus.jsonl.gz").exists() or not (many / "part-15.jsonl.gz").exists():
        paras = paragraphs(prose)
        one.mkdir(parents=True, exist_ok=True)
        many.mkdir(parents=True, exist_ok=True)
        per, text_bytes, part = -(-n // 16), 0, None
        with gzip.open(one / "corpus.jsonl.gz", "wt", encoding="utf-8", compresslevel=6) as whole:
            for i, d in enumerate(compose(paras, n)):
                if i % per == 0:
                    if part is not None:
                        part.close()
                    part = gzip.open(many / f"part-{i // per:02d}.jsonl.gz", "wt", encoding="utf-8", compresslevel=6)
                line = json.dumps(d) + "\n"
                whole.write(line)
                part.write(line)
                text_bytes += len(d["text"].encode())
        part.close()
        for k in range(16):  # fewer documents than 16 files' worth: the rest are empty
            (many / f"part-{k:02d}.jsonl.gz").exists() or gzip.open(many / f"part-{k:02d}.jsonl.gz", "wt").close()
        (work / f"text-bytes-{n}").write_text(str(text_bytes))
    return one, many, int((work / f"text-bytes-{n}").read_text())


def run_one(inputs: str, input_bytes: int, out: Path, workers: int, shard_rows: int) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    toml = out.parent / f"{out.name}.toml"
    toml.write_text(PIPELINE.format(out=out, workers=workers, inputs=inputs, shard_rows=shard_rows))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TQDM_DISABLE": "1"}
    out.mkdir(parents=True)
    u = run_watched([sys.executable, "-m", "curate", "run", str(toml), "--quiet"], str(out), env=env, cwd=ROOT)
    if u.returncode != 0:
        raise SystemExit(f"curate run failed ({u.returncode}) on {inputs}")
    stats = json.loads((out / "stats.json").read_text())
    n = stats["stages"][0]["in"]
    t0 = time.time()  # a rerun with nothing left to do reads only the task markers
    again = run_watched([sys.executable, "-m", "curate", "run", str(toml), "--quiet"], str(out), env=env, cwd=ROOT)
    resume = time.time() - t0 if again.returncode == 0 else float("nan")
    return {"docs": n, "kept": stats["stages"][-1]["kept"], "wall": u.wall, "cpu": u.cpu, "rss": u.peak_rss,
            "peak": u.peak_folder, "end": u.end_folder, "input": input_bytes, "resume": resume,
            "wanted": u.runnable, "phases": phases(out, u), "breakdown": u.peak_breakdown}


def phases(out: Path, u) -> list[tuple[str, float, float, int, float]]:
    """(phase, start s, end s, tasks, cores wanted) per step: its plan (read: the splits), then its tasks;
    times from the files each phase writes last (``_splits.json``, ``_plan.json``, task markers)."""
    rows, prev_end = [], 0.0
    for step in sorted(p for p in (out / "steps").iterdir() if p.is_dir()):
        plan_file = step / ("_splits.json" if step.name.startswith("00_") else "_plan.json")
        markers = sorted(m.stat().st_mtime - u.started for m in (step / "_tasks").glob("*.json"))
        if not markers:
            continue
        plan_end = plan_file.stat().st_mtime - u.started if plan_file.exists() else prev_end
        plan_end = min(max(plan_end, prev_end), markers[0])
        rows.append((f"{step.name} plan", prev_end, plan_end, 0, u.runnable_between(prev_end, plan_end)))
        rows.append((f"{step.name} tasks", plan_end, markers[-1], len(markers), u.runnable_between(plan_end, markers[-1])))
        prev_end = markers[-1]
    rows.append(("manifest, stats, cleanup", prev_end, u.wall, 0, u.runnable_between(prev_end, u.wall)))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, nargs="+", default=[20_000], help="corpus sizes (default 20000)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--shard-rows", type=int, default=5000)
    ap.add_argument("--work", default="/tmp/corpus_scale", help="scratch folder (removed unless --keep)")
    ap.add_argument("--keep", action="store_true", help="keep the corpora and outputs")
    ap.add_argument("--layouts", nargs="+", choices=["1", "16"], default=["1", "16"],
                    help="which layouts to run: 1 file, 16 files (default both)")
    args = ap.parse_args(argv)
    prose = next((p for p in PROSE if p.exists()), None)
    if prose is None:
        raise SystemExit("no prose corpus found (looked for " + ", ".join(map(str, PROSE)) + ")")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    gib = 1 << 30
    print(f"corpus: paragraphs of {prose}; {args.workers} workers; figures are wall-clock on a shared machine (noisy); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    rows = []
    try:
        for n in args.docs:
            t0 = time.time()
            one, many, text_bytes = build(n, work, prose)
            gz = (one / "corpus.jsonl.gz").stat().st_size
            print(f"\n{n:,} documents: {text_bytes / 1e6:,.0f} MB of text, {gz / 1e6:,.0f} MB gzipped (built in {time.time() - t0:.0f}s)")
            layouts = {"1": ("1 file", str(one / "corpus.jsonl.gz")), "16": ("16 files", str(many / "*.jsonl.gz"))}
            for label, inputs in (layouts[k] for k in args.layouts):
                r = run_one(inputs, gz, work / f"out-{n}-{label.replace(' ', '')}", args.workers, args.shard_rows)
                r.update(label=label, n=n)
                rows.append(r)
                print(f"  {label:>8}: {r['docs'] / r['wall']:7,.0f} docs/s ({r['docs'] / r['wall'] / args.workers:6,.0f} per core), "
                      f"cores busy {r['cpu'] / r['wall']:.2f} of {args.workers}, peak RSS {r['rss'] / gib:.2f} GiB, "
                      f"OUT peak {r['peak'] / gz:.2f}x / end {r['end'] / gz:.2f}x the gzipped input "
                      f"({r['kept']:,} of {r['docs']:,} kept, {r['wall']:.0f}s, {r['docs'] / r['cpu']:,.0f} docs per CPU-second, "
                      f"load average {os.getloadavg()[0]:.1f}); a finished run rerun: {r['resume']:.1f}s")
                print(f"{'':12}cores wanted (processes ready to run) {r['wanted']:.2f} of {args.workers}; timeline:")
                for name, a, b, ntasks, wanted in r["phases"]:
                    print(f"{'':14}{name:<28}{a:7.1f}s - {b:7.1f}s  {ntasks:5d} tasks  cores wanted {wanted:.2f}")
                top = sorted(r["breakdown"].items(), key=lambda kv: -kv[1])[:6]
                print(f"{'':12}OUT at its peak: " + ", ".join(f"{k} {v / gz:.2f}x" for k, v in top))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("\ngoals: from 1 file cores busy >= 1.7 of 2 (cores wanted shows it without other jobs' load); OUT end <= 1.3x and peak <= 2x the gzipped input; "
          "peak RSS < 4 GiB at 1M documents; docs/s per core within 10% across sizes")
    for label in ("1 file", "16 files"):
        mine = [r for r in rows if r["label"] == label]
        if len(mine) >= 2:
            a, b = mine[0], mine[-1]
            ratio = (b["docs"] / b["wall"]) / (a["docs"] / a["wall"])
            print(f"  {label}: docs/s at {b['n']:,} / at {a['n']:,} = {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
