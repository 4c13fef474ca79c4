"""Hostile input, fifth round: WARC/0.17 and 0.18 records, tables with two columns of one name, Feather V1,
JSONL with old Mac line ends (a lone CR), the shared Arrow text helper."""
from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
import zstandard

from curate import readers
from curate.cli import main as curate_main
from curate.readers import plan_splits, read_file, read_split
from curate.readers.arrow_text import NotText, string_array
from tests.test_hostile_inputs3 import _jsonl, _markers, _pipeline


def _all(path, fmt, target=1 << 62):
    """Every item of a file read split by split (``target``: split size), counts left out."""
    out = []
    for split in plan_splits(str(path), fmt, target_bytes=target):
        out += [it for it in read_split(split) if it[0] != "count"]
    return out


def _short(items):
    """Documents and set-aside rows as (kind, id, text, url[, reason]); skips and counts left out."""
    return [(it[0], it[1]["id"], it[1]["text"], it[1]["url"]) + ((it[2],) if it[0] == "drop" else ())
            for it in items if it[0] in ("doc", "drop")]


# ------------------------------------------------------------------------------------- WARC/0.17, 0.18

def _warc_record(version: str, rtype: str, n: int, body: bytes, length: int | None = None) -> bytes:
    block = body if rtype != "response" else b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + body
    head = (f"WARC/{version}\r\nWARC-Type: {rtype}\r\nWARC-Target-URI: http://example.org/{n}\r\n"
            f"WARC-Date: 2008-04-30T20:48:25Z\r\nWARC-Record-ID: <urn:uuid:0000-{n}>\r\n"
            f"Content-Type: application/http; msgtype=response\r\nContent-Length: {length or len(block)}\r\n\r\n")
    return head.encode() + block + b"\r\n\r\n"


def _heritrix(version: str) -> list[bytes]:
    """A warcinfo record then three responses, as Heritrix wrote them (angle-bracketed record ids)."""
    return ([_warc_record(version, "warcinfo", 0, b"software: Heritrix/1.14.0\r\n")]
            + [_warc_record(version, "response", n, f"<html><body>page {n} of the crawl</body></html>".encode())
               for n in (1, 2, 3)])


@pytest.mark.parametrize("version", ["0.17", "0.18"])
def test_warc_0_17_and_0_18_records_are_read_like_1_0(tmp_path, version):
    want = _short(read_file(str(_write(tmp_path / "v10.warc", b"".join(_heritrix("1.0")))), "warc"))
    assert [d[:2] for d in want] == [("doc", "0000-1"), ("doc", "0000-2"), ("doc", "0000-3")]
    for name, data in ((f"v{version}.warc", b"".join(_heritrix(version))),
                       (f"v{version}.warc.gz", b"".join(gzip.compress(r) for r in _heritrix(version)))):
        path = _write(tmp_path / name, data)
        assert _short(read_file(str(path), "warc")) == want, name
        # the records are also where a file is cut into splits (a split per record: the same documents)
        splits = plan_splits(str(path), "warc", target_bytes=100)
        assert len(splits) == 4, (name, splits)
        assert _short(_all(path, "warc", 100)) == want, name


@pytest.mark.parametrize("version", ["0.17", "0.18", "1.0"])
def test_damage_in_an_old_warc_resyncs_at_the_next_record_as_in_1_0(tmp_path, version):
    recs = _heritrix(version)
    long = _warc_record(version, "response", 2, b"<html><body>page 2 of the crawl</body></html>", length=10_000)
    path = _write(tmp_path / "d.warc", recs[0] + recs[1] + b"stray bytes between records\r\n" + long + recs[3])
    got = [it[:2] + it[4:] for it in _short(read_file(str(path), "warc"))]
    # the junk is one row (from the blank line that closes the record before), the record whose Content-Length
    # runs into the next header is cut there, and the next record is read
    junk_at = len(recs[0]) + len(recs[1]) - 4
    assert got == [("doc", "0000-1"), ("drop", f"d.warc@{junk_at}:junk", "malformed_record"),
                   ("drop", "0000-2", "bad_content_length"), ("doc", "0000-3")]


def test_a_warc_version_that_is_not_read_is_set_aside_not_lost(tmp_path):
    path = _write(tmp_path / "v2.warc", _warc_record("2.0", "response", 1, b"<html>x</html>")
                  + _warc_record("1.0", "response", 2, b"<html>page two</html>"))
    got = [it[:2] + it[4:] for it in _short(read_file(str(path), "warc"))]
    assert got == [("drop", "v2.warc@0:junk", "malformed_record"), ("doc", "0000-2")]


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# ------------------------------------------------------------------------- tables: two columns of one name

def _write_table(path: Path, table: pa.Table, kind: str) -> Path:
    if kind == "parquet":
        pq.write_table(table, path, row_group_size=2)
    elif kind == "arrow":
        with ipc.new_file(str(path), table.schema) as w:
            for b in table.to_batches(max_chunksize=2):
                w.write_batch(b)
    elif kind == "stream":
        with ipc.new_stream(str(path), table.schema) as w:
            w.write_table(table)
    return path


@pytest.mark.parametrize("kind", ["parquet", "arrow", "stream"])
@pytest.mark.parametrize("column", ["text", "id", "url"])
def test_two_columns_of_the_name_read_set_the_file_aside_naming_them(tmp_path, kind, column):
    cols = {"text": pa.array([f"text {i}" for i in range(6)]), "id": pa.array([f"i{i}" for i in range(6)]),
            "url": pa.array([f"http://x/{i}" for i in range(6)])}
    names = ["text", "id", "url", column]
    table = pa.Table.from_arrays([cols[n] if k < 3 else pa.array([f"other {i}" for i in range(6)])
                                  for k, n in enumerate(names)], names=names)
    fmt = "parquet" if kind == "parquet" else "arrow"
    path = _write_table(tmp_path / f"dup.{fmt}", table, kind)
    for target in (1 << 62, 1):  # whole, and a split per row group / batch: one row either way
        items = _all(path, fmt, target)
        assert [(it[0], it[1]["id"], it[2]) for it in items] == [
            ("drop", f"dup.{fmt}:duplicate_column", "duplicate_column")]
        message = items[0][1]["text"]
        assert f"2 columns are named {column!r}" in message and "rename or drop" in message, message
        assert kind == "stream" or "(6 rows)" in message, message
    assert "duplicate_column" in readers.READ_REASONS


def test_two_columns_of_a_name_not_read_do_not_matter(tmp_path):
    table = pa.Table.from_arrays([pa.array(["a", "b"]), pa.array([1, 2]), pa.array([3, 4])], names=["text", "n", "n"])
    path = _write_table(tmp_path / "ok.parquet", table, "parquet")
    assert [(it[0], it[1]["text"]) for it in read_file(str(path), "parquet")] == [("doc", "a"), ("doc", "b")]


# ------------------------------------------------------------------------------------------- Feather V1

def _feather_v1(path: Path, table: pa.Table) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (pyarrow 25 deprecates writing V1)
        feather.write_feather(table, str(path), version=1)
    assert path.read_bytes()[:4] == b"FEA1"
    return path


def test_feather_v1_is_read_like_feather_v2(tmp_path, recwarn):
    table = pa.table({"id": ["a", None, "c"], "text": ["first text", "second text", ""],
                      "url": ["http://a", "http://b", None], "n": [1, 2, 3]})
    v1 = _feather_v1(tmp_path / "v1.feather", table)
    feather.write_feather(table, str(tmp_path / "v2.feather"))
    got = _short(read_file(str(v1), "arrow"))
    v2 = _short(read_file(str(tmp_path / "v2.feather"), "arrow"))
    assert got == [tuple(x.replace("v2.feather", "v1.feather") for x in it) for it in v2]
    assert got[:2] == [("doc", "a", "first text", "http://a"), ("doc", "v1.feather:2", "second text", "http://b")]
    assert got[2][-1] == "empty_document"
    assert len(plan_splits(str(v1), "arrow", target_bytes=1)) == 1
    assert not [w for w in recwarn if "Feather V1" in str(w.message)]  # read quietly


def test_feather_v1_categorical_and_damaged(tmp_path):
    cat = pa.table({"text": pa.array(["same", "same", "other"]).dictionary_encode()})
    path = _feather_v1(tmp_path / "cat.feather", cat)
    assert [(it[0], it[1]["text"]) for it in read_file(str(path), "arrow")] == [
        ("doc", "same"), ("doc", "same"), ("doc", "other")]
    data = _feather_v1(tmp_path / "good.feather", pa.table({"text": ["x" * 100] * 50})).read_bytes()
    cut = _write(tmp_path / "cut.feather", data[: len(data) // 2])
    assert [(it[0], it[2]) for it in read_file(str(cut), "arrow")] == [("drop", "corrupt_file")]


_FLIP_EVERY_METADATA_BYTE = """
import struct, sys
from collections import Counter
from curate.readers import read_file
good = open(sys.argv[1], "rb").read()
n = struct.unpack_from("<I", good, len(good) - 8)[0]
seen = Counter()
for pos in range(len(good) - 8 - n, len(good) - 4):
    for v in (0x00, 0xFF, 0x80, good[pos] ^ 1, good[pos] ^ 0x10):
        bad = bytearray(good)
        bad[pos] = v
        open(sys.argv[2], "wb").write(bytes(bad))
        items = [it for it in read_file(sys.argv[2], "arrow") if it[0] != "count"]
        assert items and all(it[0] == "doc" or it[2] in ("corrupt_file", "missing_text", "invalid_utf8",
                                                          "duplicate_column", "empty_document") for it in items), items
        seen[items[0][2] if items[0][0] == "drop" else "doc"] += 1
print(dict(seen))
"""


def test_feather_v1_metadata_damage_is_set_aside_not_a_crash(tmp_path):
    """pyarrow's V1 reader trusts the file's metadata: one flipped byte there was a segmentation fault."""
    import subprocess
    import sys

    table = pa.table({"id": ["a", None, "c"], "text": ["one", "two", None],
                      "cat": pa.array(["x", "y", "x"]).dictionary_encode()})
    path = _feather_v1(tmp_path / "small.feather", table)
    run = subprocess.run([sys.executable, "-c", _FLIP_EVERY_METADATA_BYTE, str(path), str(tmp_path / "bad.feather")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]  # (-11: the reader crashed)
    assert "corrupt_file" in run.stdout and "doc" in run.stdout, run.stdout


# ---------------------------------------------------------------------------- JSONL with lone CR line ends

def _records(n: int) -> list[bytes]:
    return [json.dumps({"text": f"text number {i} " + "w" * (i * 7 % 40)}).encode() for i in range(n)]


@pytest.mark.parametrize("ends", [[b"\r"], [b"\r\n"], [b"\r", b"\n", b"\r\n", b"\r\r", b"\n\r"]])
def test_jsonl_lines_may_end_with_cr_crlf_or_lf(tmp_path, ends):
    recs = _records(40)
    lf = _write(tmp_path / "lf.jsonl", b"".join(r + b"\n" for r in recs))
    data = b"".join(r + ends[i % len(ends)] for i, r in enumerate(recs))
    texts = [json.loads(r)["text"] for r in recs]
    numbers = [str(i + 1 + sum(ends[k % len(ends)] in (b"\r\r", b"\n\r") for k in range(i))) for i in range(40)]
    for name, raw in (("cr.jsonl", data), ("cr.jsonl.zst", zstandard.ZstdCompressor().compress(data)),
                      ("cr.jsonl.gz", b"".join(gzip.compress(data[a:a + 97]) for a in range(0, len(data), 97)))):
        path = _write(tmp_path / name, raw)
        whole = _all(path, "jsonl")
        assert [(it[0], it[1]["text"]) for it in whole] == [("doc", t) for t in texts], name
        if name == "cr.jsonl":  # line numbers count every line end, empty lines included
            assert [it[1]["id"] for it in whole] == [f"cr.jsonl:{n}" for n in numbers]
        for target in (1, 50, 333):  # ids and texts do not depend on where the file is cut
            assert _all(path, "jsonl", target) == whole, (name, target)
    assert [it[1]["id"] for it in _all(lf, "jsonl", 50)] == [f"lf.jsonl:{i + 1}" for i in range(40)]


def test_a_crlf_cut_between_two_gzip_members_is_not_a_record_lost_or_read_twice(tmp_path):
    recs = _records(12)
    data = b"".join(r + b"\r\n" for r in recs)
    cuts = [0] + [data.index(b"\r\n", 20 * k) + 1 for k in range(1, 12, 3)] + [len(data)]  # each between \r and \n
    path = _write(tmp_path / "m.jsonl.gz", b"".join(gzip.compress(data[a:b]) for a, b in zip(cuts, cuts[1:])))
    whole = _all(path, "jsonl")
    assert [it[1]["text"] for it in whole] == [json.loads(r)["text"] for r in recs]
    assert _all(path, "jsonl", 1) == whole


def test_a_member_without_a_line_end_does_not_make_the_next_line_read_twice(tmp_path):
    """A line that runs over three gzip members: the first line of the third was read by two splits."""
    recs = _records(6)
    data = b"".join(r + b"\n" for r in recs)
    a = data.index(b"\n", 40) - 20
    b = data.index(b"\n", 40) + 1  # member 2 holds the end of a line and nothing more
    path = _write(tmp_path / "m.jsonl.gz", gzip.compress(data[:a]) + gzip.compress(data[a:b]) + gzip.compress(data[b:]))
    whole = _all(path, "jsonl")
    assert len(whole) == 6
    assert _all(path, "jsonl", 1) == whole


def test_a_cr_jsonl_run_in_many_tasks_resumes_to_the_same_output(tmp_path):
    import pyarrow.dataset as ds

    outs = {}
    for name, end in (("lf", "\n"), ("cr", "\r")):
        src = tmp_path / f"{name}.jsonl"
        _jsonl(src, 1000)
        src.write_bytes(src.read_bytes().replace(b"\n", end.encode()))
        out = tmp_path / f"out_{name}"
        (tmp_path / name).mkdir()
        toml = _pipeline(tmp_path / name, src, out)
        assert curate_main(["run", str(toml), "--quiet"]) == 0
        before = _markers(out)
        assert len(before) > 3  # several read tasks
        manifest = (out / "manifest.json").read_bytes()
        (out / "steps" / "00_read" / "_tasks" / sorted(before)[1]).unlink()  # a task the killed run did not finish
        assert curate_main(["run", str(toml), "--quiet"]) == 0
        assert (out / "manifest.json").read_bytes() == manifest
        outs[name] = sorted(ds.dataset(str(out / "data"), format="arrow").to_table().column("id").to_pylist())
    assert outs["cr"] == outs["lf"] and len(outs["lf"]) == 1000


# ------------------------------------------------------------------------------------ the Arrow text helper

def test_string_array_reads_every_string_like_type():
    texts = ["a", "\u00e9t\u00e9", None, "a"]
    raw = [None if t is None else t.encode() for t in texts]
    for col in (pa.array(texts), pa.array(texts, pa.large_string()), pa.array(texts, pa.string_view()),
                pa.array(raw, pa.binary()), pa.array(raw, pa.large_binary()), pa.array(raw, pa.binary_view()),
                pa.array(texts).dictionary_encode(), pa.array(raw, pa.binary_view()).dictionary_encode(),
                pa.RunEndEncodedArray.from_arrays([1, 2, 3, 4], pa.array(texts)),
                pa.chunked_array([pa.array(raw[:1], pa.binary()), pa.array(raw[1:], pa.binary())])):
        out, bad = string_array(col)
        assert out.to_pylist() == texts and bad == [], col.type
        assert out.type in (pa.string(), pa.large_string()), col.type


def test_string_array_nulls_and_reports_rows_that_are_not_utf8():
    bad_bytes = [b"ok", b"\xff\xfe", None, b"\xed\xa0\x80", b"fine"]  # (a lone surrogate is not UTF-8 either)
    want = ["ok", None, None, None, "fine"]
    for col in (pa.array(bad_bytes, pa.binary()), pa.array(bad_bytes, pa.binary_view()),
                pa.array(bad_bytes, pa.binary()).view(pa.string()),  # an IPC string column is not checked
                pa.chunked_array([pa.array(bad_bytes[:2], pa.binary()), pa.array(bad_bytes[2:], pa.binary())]),
                pa.array(bad_bytes, pa.binary()).dictionary_encode()):
        out, bad = string_array(col)
        assert out.to_pylist() == want and bad == [1, 3], col.type
    out, bad = string_array(pa.RunEndEncodedArray.from_arrays([2, 5], pa.array([b"x", b"\xff"], pa.large_binary())))
    assert out.to_pylist() == ["x", "x", None, None, None] and bad == [2, 3, 4]


@pytest.mark.parametrize("col", [pa.array([1, 2]), pa.array([["x"]]), pa.array([1.5]), pa.array([None, None])])
def test_string_array_refuses_a_column_that_is_not_text_naming_its_type(col):
    with pytest.raises(NotText, match="is not text") as e:
        string_array(col)
    assert e.value.type == col.type and str(col.type) in str(e.value)
