"""What hostile table inputs and duplicated giant documents cost: peak memory (VmHWM of a fresh child process)
of reading a Parquet / Arrow file whose dictionary-encoded text column repeats one large text in every row,
and of one Parquet value of hundreds of MB between small rows (at two sizes: the peak should grow with the
value, a few times its size); of decompression bombs (a value of NULs stored in KBs; Quarry's reader against
pyarrow's own); of exact_dedup's plan over many copies of one large document; and the time to
read the last split of a zstd Arrow IPC file against reading the whole file (a split decodes only its own
batches).

    python benchmarks/hostile_memory.py                      # 200 rows of 5 MiB, 200 documents of 5 MB
    python benchmarks/hostile_memory.py --rows 50 --mib 2 --huge-mib 50,100

Each figure is measured in its own child process, side by side with what the rows would hold decoded.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_READ = """
import sys, json
from curate import readers
n = sum(1 for it in readers.read_file(sys.argv[1], sys.argv[2]) if it[0] == "doc")
peak = int([l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]) // 1024
print(json.dumps({"docs": n, "peak_mb": peak}))
"""

_DEDUP = """
import sys, json
from pathlib import Path
from curate.executors.local import LocalExecutor
from curate.stages.exact_dedup import ExactDedup, Params
shards = sys.argv[2:]
stats = ExactDedup("exact_dedup", Params()).plan(shards, Path(sys.argv[1]), LocalExecutor(1))
held = sum(p.stat().st_size for p in (Path(sys.argv[1]) / "texts").rglob("*") if p.is_file())
peak = int([l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]) // 1024
print(json.dumps({"duplicates": stats["duplicates"], "texts_part_bytes": held, "peak_mb": peak}))
"""


def _child(code: str, *args) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def tables(tmp: Path, rows: int, mib: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    big = "y" * (mib << 20)
    table = pa.table({"text": pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array([big]))})
    pq.write_table(table, tmp / "d.parquet")
    with pa.ipc.new_file(tmp / "d.arrow", table.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
        w.write_table(table)
    base = _child("import json; from curate import readers\n"
                  "peak = int([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]) // 1024\n"
                  "print(json.dumps({'peak_mb': peak}))")["peak_mb"]
    print(f"dictionary-encoded text, {rows} rows of {mib} MiB ({rows * mib} MiB decoded per row); "
          f"a child that only imports the readers peaks at {base} MB")
    for name, fmt in (("d.parquet", "parquet"), ("d.arrow", "arrow")):
        r = _child(_READ, tmp / name, fmt)
        print(f"  {fmt:8s} {os.path.getsize(tmp / name) / 1e6:8.2f} MB on disk: {r['docs']} documents, "
              f"peak {r['peak_mb']} MB ({r['peak_mb'] / (rows * mib):.2f} x the decoded size)")


def huge_value(tmp: Path, sizes: list[int]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    print("one huge Parquet value between two small rows (written by pyarrow's defaults: dictionary-encoded, "
          "snappy); the reader sets it aside as too_large after reading it")
    for mib in sizes:
        path = tmp / f"huge-{mib}.parquet"
        pq.write_table(pa.table({"text": ["a small document", "x" * (mib << 20), "another small document"]}), path)
        r = _child(_READ, path, "parquet")
        print(f"  {mib:5d} MiB value: {r['docs']} documents, peak {r['peak_mb']} MB "
              f"({r['peak_mb'] / mib:.2f} x the value)")


_PYARROW = """
import sys, json
import pyarrow as pa, pyarrow.parquet as pq
if sys.argv[2] == "parquet":
    n = sum(b.num_rows for b in pq.ParquetFile(sys.argv[1]).iter_batches(batch_size=1))
else:
    r = pa.ipc.open_file(sys.argv[1])
    n = sum(r.get_batch(i).num_rows for i in range(r.num_record_batches))
peak = int([l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]) // 1024
print(json.dumps({"rows": n, "peak_mb": peak}))
"""


def bombs(tmp: Path, sizes: list[int]) -> None:
    """Decompression bombs: one value of NULs that zstd stores in KBs, after a small row, as Parquet and as a
    compressed Arrow IPC file; peak of Quarry's reader against pyarrow's own reading of the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    print("decompression bombs (one value of NULs, zstd, after a small row): Quarry's reader sets the page or "
          "batch aside as decode_too_large, undecoded")
    for mib in sizes:
        small, big = pa.table({"text": ["a small document"]}), pa.table({"text": ["\0" * (mib << 20)]})
        pq_path, ipc_path = tmp / f"bomb-{mib}.parquet", tmp / f"bomb-{mib}.arrow"
        with pq.ParquetWriter(pq_path, small.schema, compression="zstd") as w:
            w.write_table(small)
            w.write_table(big)
        with pa.ipc.new_file(ipc_path, small.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
            w.write_table(small)
            w.write_table(big)
        del big
        for path, fmt in ((pq_path, "parquet"), (ipc_path, "arrow")):
            q, a = _child(_READ, path, fmt), _child(_PYARROW, path, fmt)
            print(f"  {mib:5d} MiB value, {fmt:7s} file of {path.stat().st_size / 1024:6.0f} KB: Quarry "
                  f"{q['docs']} document, peak {q['peak_mb']} MB; pyarrow reading it, peak {a['peak_mb']} MB "
                  f"({a['peak_mb'] / q['peak_mb']:.1f} x)")


def dedup(tmp: Path, docs: int, mib: int) -> None:
    from curate.schema import documents_to_table
    from curate.shards import write_shard

    big = ("a long duplicated page " * ((mib << 20) // 23 + 1))[: mib << 20]
    per = 12  # documents per shard (the read step's batches hold at most 64 Mi characters)
    shards = []
    for s in range(0, docs, per):
        rows = [{"id": f"d{i}", "text": big, "source": "b", "url": "", "content_type": "text/plain"}
                for i in range(s, min(s + per, docs))]
        shards.append(str(write_shard(documents_to_table(rows), tmp / f"in-{s:05d}.arrow")))
    r = _child(_DEDUP, tmp / "plan", *shards)
    print(f"exact_dedup over {docs} copies of a {mib} MiB document ({docs * mib} MiB of text): "
          f"{r['duplicates']} duplicates, plan texts part {r['texts_part_bytes']} bytes, peak {r['peak_mb']} MB")


def splits(tmp: Path) -> None:
    import pyarrow as pa

    from curate import readers

    schema = pa.schema([("text", pa.string())])
    with pa.ipc.new_file(tmp / "s.arrow", schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
        for b in range(64):
            w.write_batch(pa.record_batch([[f"batch {b} row {i} " + "words of text " * 40 for i in range(2000)]],
                                          schema=schema))
    path = str(tmp / "s.arrow")
    parts = readers.plan_splits(path, "arrow", target_bytes=1)
    t0 = time.perf_counter()
    n_whole = sum(1 for _ in readers.read_file(path, "arrow"))
    whole = time.perf_counter() - t0
    t0 = time.perf_counter()
    n_last = sum(1 for _ in readers.read_split(parts[-1]))
    last = time.perf_counter() - t0
    print(f"zstd Arrow IPC file of {len(parts)} batches: the whole file ({n_whole} rows) {whole:.2f} s, "
          f"its last split ({n_last} rows) {last:.3f} s: {whole / max(last, 1e-9):.0f} x")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200, help="rows (and duplicated documents) (default 200)")
    ap.add_argument("--mib", type=int, default=5, help="size of the repeated text in MiB (default 5)")
    ap.add_argument("--huge-mib", default="100,200",
                    help="sizes of the one huge Parquet value, MiB, comma-separated (default 100,200)")
    ap.add_argument("--bomb-mib", default="300,1000",
                    help="sizes of the decompression bombs' value, MiB, comma-separated (default 300,1000)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        tables(tmp, args.rows, args.mib)
        huge_value(tmp, [int(x) for x in args.huge_mib.split(",") if x])
        bombs(tmp, [int(x) for x in args.bomb_mib.split(",") if x])
        dedup(tmp, args.rows, args.mib)
        splits(tmp)


if __name__ == "__main__":
    main()
