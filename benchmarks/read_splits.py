#!/usr/bin/env python
"""What splitting an input file costs: planning time, and reading in splits against reading whole.

    .venv/bin/python benchmarks/read_splits.py [--mb 16 64] [--split-mb 4] [--prose PATH]

Builds JSONL of real prose (``../shared/corpora/prose/english_prose.jsonl`` repeated, else the repository's
``pipelines/sample/prose.jsonl.gz``) at each size as plain ``.jsonl``, one-member ``.jsonl.gz``, many-member
``.jsonl.gz`` (1 MiB members, as bgzip writes them) and ``.jsonl.zst``, plus a per-record ``.warc.gz`` made of
the sample crawl's pages, and an Arrow IPC file of the prose's paragraphs, one per record batch (as a writer
that flushes every row makes: tens of thousands of batches; splits by batch, each split walks only its own
batches' headers, the rows before it come from the plan). For each it prints: the number of splits, planning
seconds (and MB planned per second), and CPU seconds to read every split one after the other against one
whole read (``split/whole``: what splitting adds in total work). A one-stream gzip is planned twice: with a seek index (``gz-1-member``,
what the read step does: planning decompresses once, each split reads its own range) and without one
(``gz-1-no-index``, the fallback for a damaged file: each split decompresses from the start, about
``(n + 1) / 2`` times the work, capped at 8 splits), as is a one-frame ``.jsonl.zst`` (capped at 32). All figures are measured
in this one run (the machine is shared).
"""
from __future__ import annotations

import argparse
import gzip
import os
import shutil
import tempfile
import time
from pathlib import Path

import zstandard

from curate import readers

ROOT = Path(__file__).resolve().parents[1]


def _prose(path: str | None) -> bytes:
    candidates = [path] if path else [str(ROOT.parent / "shared" / "corpora" / "prose" / "english_prose.jsonl"),
                                      str(ROOT / "pipelines" / "sample" / "prose.jsonl.gz")]
    for p in candidates:
        if p and os.path.exists(p):
            return gzip.open(p).read() if p.endswith(".gz") else Path(p).read_bytes()
    raise SystemExit("no prose found; pass --prose FILE.jsonl")


def _build(base: bytes, mb: int, d: Path) -> dict[str, str]:
    want = mb * (1 << 20)
    payload = base * (want // len(base) + 1)
    payload = payload[: payload.rindex(b"\n", 0, want) + 1]
    files = {"jsonl": d / f"p{mb}.jsonl", "gz-1-member": d / f"p{mb}.jsonl.gz", "gz-members": d / f"m{mb}.jsonl.gz",
             "zst": d / f"p{mb}.jsonl.zst"}
    files["jsonl"].write_bytes(payload)
    files["gz-1-member"].write_bytes(gzip.compress(payload, compresslevel=1, mtime=0))
    step = 1 << 20
    with open(files["gz-members"], "wb") as f:
        for i in range(0, len(payload), step):
            f.write(gzip.compress(payload[i:i + step], compresslevel=1, mtime=0))
    files["zst"].write_bytes(zstandard.ZstdCompressor(level=3).compress(payload))
    return {k: str(v) for k, v in files.items()}


def _warc(mb: int, d: Path) -> str:
    from warcio.archiveiterator import ArchiveIterator
    from warcio.warcwriter import WARCWriter

    src = ROOT / "pipelines" / "sample" / "web-pages-87.warc.gz"
    out = d / f"w{mb}.warc.gz"
    with open(out, "wb") as f:
        w = WARCWriter(f, gzip=True)
        while f.tell() < mb * (1 << 20) // 3:  # WARC bodies compress about 3x
            with open(src, "rb") as s:
                for rec in ArchiveIterator(s):
                    w.write_record(rec)
    return str(out)


def _arrow(base: bytes, mb: int, d: Path) -> str:
    """The prose's paragraphs as an Arrow IPC file of one-row record batches (a writer that flushes every row)."""
    import json

    import pyarrow as pa

    texts = [p for line in base.splitlines() if line.strip() for p in json.loads(line)["text"].split("\n\n") if p]
    out = d / f"a{mb}.arrow"
    schema = pa.schema([("text", pa.string())])
    with pa.OSFile(str(out), "wb") as f, pa.ipc.new_file(f, schema) as w:
        i = 0
        while f.tell() < mb * (1 << 20):
            w.write_batch(pa.record_batch([pa.array([texts[i % len(texts)]])], schema=schema))
            i += 1
    return str(out)


def _cpu_read(splits) -> tuple[float, int]:
    t0, n = time.process_time(), 0
    for s in splits:
        for it in readers.read_split(s):
            n += it[0] in ("doc", "drop")
    return time.process_time() - t0, n


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, nargs="+", default=[16, 64], help="input sizes in MB (default: 16 64)")
    ap.add_argument("--split-mb", type=float, default=4, help="target split size in MB (default: 4)")
    ap.add_argument("--prose", help="a JSONL file of documents to repeat (default: the shared prose corpus)")
    args = ap.parse_args(argv)
    base = _prose(args.prose)
    target = int(args.split_mb * (1 << 20))
    tmp = Path(tempfile.mkdtemp(prefix="read-splits-"))
    print(f"{'input':<14}{'MB':>6}{'splits':>8}{'plan s':>9}{'MB/s':>9}{'whole s':>9}{'split s':>9}{'split/whole':>12}")
    try:
        for mb in args.mb:
            files = _build(base, mb, tmp)
            files["warc.gz"] = _warc(mb, tmp)
            files["arrow-1-row"] = _arrow(base, mb, tmp)
            rows = list(files.items())
            rows.insert(2, ("gz-1-no-index", files["gz-1-member"]))
            for name, path in rows:
                fmt = "warc" if "warc" in path else "arrow" if path.endswith(".arrow") else "jsonl"
                size = os.path.getsize(path) / (1 << 20)
                index = str(tmp / f"{name}.gzidx") if name == "gz-1-member" else None
                t0 = time.perf_counter()
                splits = readers.plan_splits(path, fmt, target_bytes=target, index_path=index)
                plan_s = time.perf_counter() - t0
                whole_s, n_whole = _cpu_read(readers.plan_splits(path, fmt, target_bytes=1 << 62))
                split_s, n_split = _cpu_read(splits)
                assert n_whole == n_split, f"{path}: {n_whole} records whole, {n_split} in splits"
                print(f"{name:<14}{size:>6.0f}{len(splits):>8}{plan_s:>9.3f}{size / max(plan_s, 1e-9):>9.0f}"
                      f"{whole_s:>9.2f}{split_s:>9.2f}{split_s / max(whole_s, 1e-9):>12.2f}")
            for p in files.values():
                os.unlink(p)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
