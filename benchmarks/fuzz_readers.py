"""Damaged and crafted input files through the readers: how many crash the process, end in ``reader_error`` (a
reader bug), read differently in splits than whole, or read slowly.

Seeds: a WARC (plain, .gz, .zst), an ARC, JSONL (plain, .gz, .zst, .bz2, .xz), Parquet (plain; zstd with a
dictionary column), Arrow IPC (file, zstd file, stream with ``string_view`` and a dictionary) and an HTML page,
built here or taken from ``tests/data/readers``. Each file tried is a seed with 1 to 20 random mutations (bytes
flipped, cut, inserted, copied from elsewhere in the file, the file truncated, or a token such as
``Content-Length: 99999999`` or ``{"text":`` put in). Each is read whole and in splits of 4 KiB; the items must
be the same. The reading runs in a child process, so a crash (a segmentation fault in a C library) is counted and
the child restarted, not the end of the run.

    python benchmarks/fuzz_readers.py                      # 600 files, about two minutes
    python benchmarks/fuzz_readers.py --files 3000 --seed 7
"""
from __future__ import annotations

import argparse
import bz2
import gzip
import io
import json
import lzma
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKENS = [b"\n", b"\r\n\r\n", b"WARC/1.0\r\n", b"Content-Length: 99999999\r\n", b"\x00" * 8, b'{"text":', b"\xff\xfe"]

_CHILD = r"""
import json, sys, time
from curate import readers

def items(path, fmt, target):
    out = []
    for split in readers.plan_splits(path, fmt, target_bytes=target):
        json.dumps(split)
        for it in readers.read_split(split, max_doc_bytes=1 << 20):
            if it[0] == "doc":
                out.append(["doc", it[1]["id"], it[1]["text"]])
            elif it[0] == "drop":
                out.append(["drop", it[1]["id"], it[2]])
            elif it[0] == "skip":
                out.append(["skip", it[1]])
    return out

for line in open(sys.argv[1]):
    path = line.strip()
    print("START", path, flush=True)
    fmt = readers.infer_format(path)
    t = time.process_time()
    try:
        whole, small = items(path, fmt, 1 << 62), items(path, fmt, 4096)
        result = {"reader_error": sum(1 for x in whole + small if x[0] == "drop" and x[2] == "reader_error"),
                  "differs": whole != small}
    except Exception as e:
        result = {"raised": f"{type(e).__name__}: {e}"[:300]}
    result["seconds"] = time.process_time() - t
    print("DONE", json.dumps(result), flush=True)
"""


def seeds() -> dict[str, bytes]:
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    data = ROOT / "tests" / "data" / "readers"
    out = {"a.warc.gz": (data / "example.warc.gz").read_bytes(), "c.arc": (data / "example.arc").read_bytes()}
    out["b.warc"] = gzip.decompress(out["a.warc.gz"])
    zst = zstandard.ZstdCompressor()
    out["l.warc.zst"] = zst.compress(out["b.warc"])
    lines = "".join(json.dumps({"id": f"x{i}", "text": f"document {i} " * (i % 50 + 1), "url": f"http://e/{i}"}) + "\n"
                    for i in range(200)).encode()
    out.update({"d.jsonl": lines, "e.jsonl.gz": gzip.compress(lines), "i.jsonl.zst": zst.compress(lines),
                "j.jsonl.bz2": bz2.compress(lines), "k.jsonl.xz": lzma.compress(lines)})
    table = pa.table({"id": [f"r{i}" for i in range(300)], "text": [f"row text {i} " * (i % 40 + 1) for i in range(300)]})
    for name, kw in (("f.parquet", {"row_group_size": 37}),
                     ("m.parquet", {"row_group_size": 50, "compression": "zstd", "use_dictionary": ["id"]})):
        buf = io.BytesIO()
        pq.write_table(table, buf, **kw)
        out[name] = buf.getvalue()
    for name, options in (("g.arrow", None), ("n.arrow", pa.ipc.IpcWriteOptions(compression="zstd"))):
        buf = io.BytesIO()
        with pa.ipc.new_file(buf, table.schema, options=options) as w:
            for batch in table.to_batches(max_chunksize=41):
                w.write_batch(batch)
        out[name] = buf.getvalue()
    views = pa.table({"id": pa.array(table["id"].to_pylist()).dictionary_encode(),
                      "text": pa.array(table["text"].to_pylist(), pa.string_view())})
    buf = io.BytesIO()
    with pa.ipc.new_stream(buf, views.schema) as w:
        for batch in views.to_batches(max_chunksize=41):
            w.write_batch(batch)
    out["o.arrow"] = buf.getvalue()
    out["h.html"] = (b"<html><head><meta charset=utf-8><title>t</title></head><body><p>"
                     + "words é ".encode() * 300 + b"</p></body></html>")
    return out


def mutate(data: bytes, rng: random.Random) -> bytes:
    data = bytearray(data)
    for _ in range(rng.choice([1, 1, 2, 5, 20])):
        if not data:
            break
        i, op = rng.randrange(len(data)), rng.random()
        if op < 0.4:
            data[i] = rng.randrange(256)
        elif op < 0.55:
            del data[i:i + rng.randrange(1, 200)]
        elif op < 0.7:
            data[i:i] = os.urandom(rng.randrange(1, 50))
        elif op < 0.8:
            j = rng.randrange(len(data))
            data[i:i] = data[j:j + rng.randrange(1, 500)]
        elif op < 0.9:
            data = data[:i]
        else:
            data[i:i] = rng.choice(TOKENS)
    return bytes(data)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=600, help="mutated files to try (default 600)")
    ap.add_argument("--seed", type=int, default=0, help="random seed of the mutations (default 0)")
    ap.add_argument("--keep", help="folder to copy the files that fail into (default: not kept)")
    a = ap.parse_args(argv)
    rng = random.Random(a.seed)
    base = seeds()
    names = sorted(base)
    failures: dict[str, list[str]] = {"crashed": [], "raised": [], "reader_error": [], "differs": []}
    slowest = (0.0, "")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.time()
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for k in range(a.files):
            name = rng.choice(names)
            path = Path(d) / f"{k:05d}_{name}"
            path.write_bytes(mutate(base[name], rng))
            paths.append(str(path))
        todo = list(paths)
        while todo:
            listing = Path(d) / "todo.txt"  # (a file, not stdin: a pipe both ways would fill and deadlock)
            listing.write_text("".join(p + "\n" for p in todo))
            child = subprocess.Popen([sys.executable, "-c", _CHILD, str(listing)], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=env)
            current = None
            for line in child.stdout:
                word, _, rest = line.rstrip("\n").partition(" ")
                if word == "START":
                    current = rest
                elif word == "DONE":
                    r = json.loads(rest)
                    for kind in ("raised", "reader_error", "differs"):
                        if r.get(kind):
                            failures[kind].append(current)
                    slowest = max(slowest, (r["seconds"], current))
                    todo.remove(current)
                    current = None
            child.wait()
            if current is not None:  # the child died reading it
                failures["crashed"].append(f"{current} (exit {child.returncode})")
                todo.remove(current)
        if a.keep:
            keep = Path(a.keep)
            keep.mkdir(parents=True, exist_ok=True)
            for kind, items in failures.items():
                for item in items:
                    src = Path(item.split(" ")[0])
                    (keep / f"{kind}-{src.name}").write_bytes(src.read_bytes())
    counts = {}
    for p in paths:
        fmt = Path(p).name.split("_", 1)[1].split(".", 1)[1]
        counts[fmt] = counts.get(fmt, 0) + 1
    print(f"{len(paths)} mutated files (seed {a.seed}), each read whole and in 4 KiB splits, in {time.time() - t0:.0f} s: "
          + ", ".join(f"{n} {fmt}" for fmt, n in sorted(counts.items())))
    for kind, items in failures.items():
        print(f"  {kind:13} {len(items):5d}" + (f"  e.g. {', '.join(Path(i).name for i in items[:3])}" if items else ""))
    print(f"  slowest read: {slowest[0]:.2f} CPU s ({Path(slowest[1]).name if slowest[1] else '-'})")
    return 1 if any(failures.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
