"""Curated shards open as they are in DuckDB and Polars: the same rows, ids and texts as pyarrow reads.

Arrow IPC shards: Polars reads them with ``pl.read_ipc``; DuckDB has no built-in Arrow IPC file reader (its
``arrow`` extension is a download), so it scans them through a ``pyarrow.dataset`` (zero-copy, no conversion
of the files). Parquet shards: DuckDB's ``read_parquet`` and ``pl.read_parquet``.
"""
from __future__ import annotations

import json
import subprocess
import sys

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads
import pytest

from curate.shards import manifest_shards, read_shard
from tests.conftest import ROOT, SAMPLE

PIPELINE = """
[pipeline]
name = "interop"
output = "{out}"
workers = 1
shard_rows = 100
format = "{fmt}"

[[sources]]
path = "{sample}"

[[stages]]
type = "normalize"

[[stages]]
type = "exact_dedup"
"""


@pytest.fixture(scope="module", params=["arrow", "parquet"])
def curated(request, tmp_path_factory):
    fmt = request.param
    tmp = tmp_path_factory.mktemp(f"interop_{fmt}")
    out = tmp / "out"
    toml = tmp / "pipeline.toml"
    toml.write_text(PIPELINE.format(out=out, fmt=fmt, sample=SAMPLE / "prose.jsonl.gz"))
    proc = subprocess.run([sys.executable, "-m", "curate", "run", str(toml), "--quiet"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return fmt, out


def duckdb_relation(con, paths, fmt):
    files = [str(p) for p in paths]
    if fmt == "parquet":
        return con.read_parquet(files)
    con.register("shards", pads.dataset(files, format="ipc"))  # an Arrow dataset over the files, scanned lazily
    return con.sql("select * from shards")


@pytest.mark.parametrize("which", ["shards", "dropped"])
def test_shards_open_in_duckdb_and_polars(curated, which):
    fmt, out = curated
    paths = manifest_shards(out, which)
    assert paths and all(p.suffix == f".{fmt}" for p in paths)
    manifest = json.loads((out / "manifest.json").read_text())
    expected_rows = sum(e["rows"] for e in manifest[which])

    ref = pa.concat_tables([read_shard(p) for p in paths])
    assert ref.num_rows == expected_rows
    ref_ids, ref_text = ref.column("id").to_pylist(), ref.column("text").to_pylist()
    assert len(set(ref_ids)) == len(ref_ids)

    con = duckdb.connect()
    rel = duckdb_relation(con, paths, fmt)
    assert rel.aggregate("count(*)").fetchall()[0][0] == expected_rows
    rows = rel.select("id, text").fetchall()
    assert sorted(rows) == sorted(zip(ref_ids, ref_text))

    polars_df = pl.concat([pl.read_ipc(p) if fmt == "arrow" else pl.read_parquet(p) for p in paths])
    assert polars_df.height == expected_rows
    assert polars_df["id"].to_list() == ref_ids
    assert polars_df["text"].to_list() == ref_text
    assert set(polars_df.columns) == set(ref.column_names)

    if which == "dropped":  # the reasons recorded in the dropped shards add up to the funnel in stats.json
        stats = json.loads((out / "stats.json").read_text())
        funnel = {(s["name"], r): n for s in stats["stages"] for r, n in s["dropped"].items()}
        by_reason = dict(((stage, reason), n) for stage, reason, n in
                         rel.aggregate("stage, reason, count(*)", "stage, reason").fetchall())
        assert by_reason == funnel
        assert by_reason == {("exact_dedup", "exact_duplicate"): 15}  # prose.jsonl.gz plants 15 exact copies
        assert dict(polars_df.group_by("reason").len().iter_rows()) == {"exact_duplicate": 15}
