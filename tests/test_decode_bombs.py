"""Decompression bombs in table inputs: a Parquet page or a compressed Arrow batch of a few KB that decodes to
hundreds of MB (pyarrow decodes either whole, whatever the batch size asked) is set aside undecoded as one
``decode_too_large`` row, and the rest of the file is read; batches are sized by the pages' own densities."""
import os
import random
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curate import readers
from curate.readers import tables
from curate.readers.parquet_pages import column_pages

ROOT = Path(__file__).resolve().parents[1]
BOMB_MIB = 300  # over MAX_DECODE_BYTES (256 MiB); zstd stores it in about 10 KB

_READ = ("import sys, collections\nfrom curate import readers\n"
         "items = list(readers.read_file(sys.argv[1], sys.argv[2]))\n"
         "kinds = collections.Counter(it[0] if it[0] == 'doc' else it[2] for it in items)\n"
         "peak = [line for line in open('/proc/self/status') if line.startswith('VmHWM')][0].split()[1]\n"
         "print(kinds['doc'], kinds['decode_too_large'], int(peak) // 1024)\n"
         "print([it[1]['text'] for it in items if it[0] == 'drop'])")


def _read_in_child(path, fmt):
    out = subprocess.run([sys.executable, "-c", _READ, str(path), fmt], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    first, said = out.stdout.splitlines()[:2]
    docs, bombs, peak_mb = map(int, first.split())
    return docs, bombs, peak_mb, said


def test_a_parquet_page_that_decodes_to_hundreds_of_mb_is_not_decoded(tmp_path):
    """Three row groups, the middle one a 300 MiB value stored in ~10 KB: the small row groups are read, the
    bomb is one ``decode_too_large`` row naming the row group and the sizes, and the reading process's peak
    stays far below the value (decoding it peaked at over 3x the value)."""
    schema = pa.schema([("id", pa.string()), ("text", pa.string())])
    path = tmp_path / "bomb.parquet"
    with pq.ParquetWriter(path, schema, compression="zstd") as w:
        w.write_table(pa.table({"id": ["a", "b"], "text": ["small one", "small two"]}, schema=schema))
        w.write_table(pa.table({"id": ["x"], "text": ["\0" * (BOMB_MIB << 20)]}, schema=schema))
        w.write_table(pa.table({"id": ["c"], "text": ["small three"]}, schema=schema))
    assert path.stat().st_size < 1 << 20
    docs, bombs, peak_mb, said = _read_in_child(path, "parquet")
    assert (docs, bombs) == (3, 1), said
    assert "row group 1 (1 row)" in said and "'text'" in said and f"{BOMB_MIB << 20:,}"[:9] in said
    assert peak_mb < BOMB_MIB, peak_mb


def test_a_compressed_arrow_batch_that_decodes_to_hundreds_of_mb_is_not_decoded(tmp_path):
    schema = pa.schema([("text", pa.string())])
    path = tmp_path / "bomb.arrow"
    with pa.ipc.new_file(path, schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
        w.write_batch(pa.record_batch([["small one", "small two"]], schema=schema))
        w.write_batch(pa.record_batch([["\0" * (BOMB_MIB << 20), "small, beside the bomb"]], schema=schema))
        w.write_batch(pa.record_batch([["small three"]], schema=schema))
    assert path.stat().st_size < 1 << 20
    docs, bombs, peak_mb, said = _read_in_child(path, "arrow")
    assert (docs, bombs) == (3, 1), said
    assert "batch 1 (2 rows)" in said
    assert peak_mb < BOMB_MIB, peak_mb


def test_large_values_that_do_not_compress_are_still_read(tmp_path, monkeypatch):
    """The limit asks for both: decoded past the cap, and past 100x the bytes on disk. A page of random text
    (about 1.3x) past the cap is decoded as before (it is set aside as too_large by max_doc_bytes, not undecoded)."""
    monkeypatch.setattr(tables, "MAX_DECODE_BYTES", 1 << 20)
    monkeypatch.setattr(tables, "SLICE_BYTES", 1 << 19)
    rnd = random.Random(0)
    noise = "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(3 << 20))
    pq.write_table(pa.table({"text": ["small", noise, "\0" * (3 << 20), "small again"]}), tmp_path / "t.parquet",
                   compression="zstd", row_group_size=1)
    items = list(readers.read_file(str(tmp_path / "t.parquet"), "parquet", max_doc_bytes=1 << 20))
    assert [it[0] if it[0] == "doc" else it[2] for it in items] == ["doc", "too_large", "decode_too_large", "doc"]


def test_a_batch_holds_no_more_rows_than_its_densest_page_allows(tmp_path, monkeypatch):
    """Many small rows and a few large values in one row group: the batch size from the row group's average row
    (4,096 rows, 12 MiB of text where the large values are) is cut to the densest page's SLICE_BYTES worth. The
    documents are the same as an unbounded read's."""
    texts = [f"small {i}" for i in range(60000)]
    for k in (30000, 30001, 30002):
        texts[k] = f"large {k} " + "y" * (4 << 20)
    path = tmp_path / "mixed.parquet"
    pq.write_table(pa.table({"text": texts}), path, use_dictionary=False, compression="zstd")
    whole = [it[1]["text"] for it in readers.read_file(str(path), "parquet", max_doc_bytes=8 << 20)]
    monkeypatch.setattr(tables, "SLICE_BYTES", 1 << 20)
    rg = pq.ParquetFile(path).metadata.row_group(0)
    assert (1 << 20) // (rg.total_byte_size / rg.num_rows) > tables.BATCH_ROWS  # by the average: 4,096 rows
    assert tables._rows_by_pages(str(path), rg, ["text"], 1 << 30, 0) < tables.BATCH_ROWS // 4  # their page
    batches = []
    real = tables._batch_rows
    monkeypatch.setattr(tables, "_batch_rows", lambda batch, *a: batches.append(batch.num_rows) or real(batch, *a))
    assert [it[1]["text"] for it in readers.read_file(str(path), "parquet", max_doc_bytes=8 << 20)] == whole
    assert max(batches) < tables.BATCH_ROWS // 4


def _files(tmp_path):
    """The same table as each writer Quarry reads writes it: pyarrow (v1 and v2 data pages, dictionary or plain,
    page index, checksums, codecs), Polars and DuckDB."""
    rnd = random.Random(1)
    texts = [("word " * rnd.randint(1, 400)) + str(i) if i % 7 else None for i in range(3000)]
    t = pa.table({"id": [f"d{i}" for i in range(3000)], "text": texts, "n": list(range(3000))})
    pq.write_table(t, tmp_path / "pa.parquet", row_group_size=1000)
    pq.write_table(t, tmp_path / "pa_v2.parquet", data_page_version="2.0", compression="zstd", write_page_index=True)
    pq.write_table(t, tmp_path / "pa_plain.parquet", use_dictionary=False, compression="gzip", data_page_size=10_000)
    pq.write_table(t, tmp_path / "pa_crc.parquet", write_page_checksum=True, compression="lz4")
    files = [tmp_path / f"{n}.parquet" for n in ("pa", "pa_v2", "pa_plain", "pa_crc")]
    try:
        import polars as pl

        pl.from_arrow(t).write_parquet(tmp_path / "pl.parquet", statistics=True, row_group_size=700)
        files.append(tmp_path / "pl.parquet")
    except ImportError:
        pass
    try:
        import duckdb

        con = duckdb.connect()
        con.register("t", t)
        con.execute(f"COPY t TO '{tmp_path / 'duck.parquet'}' (FORMAT parquet, COMPRESSION zstd)")
        files.append(tmp_path / "duck.parquet")
    except ImportError:
        pass
    return files


def _chunks(path):
    md = pq.ParquetFile(path).metadata
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        for j in range(rg.num_columns):
            c = rg.column(j)
            start = c.dictionary_page_offset if c.has_dictionary_page and c.dictionary_page_offset else c.data_page_offset
            yield rg, c, start


def test_page_headers_of_every_writer_walk_to_the_chunk_end(tmp_path):
    """Each column chunk's pages, from their headers alone: their values add up to the row group's rows, and
    their sizes to the chunk's."""
    for path in _files(tmp_path):
        with open(path, "rb") as f:
            for rg, c, start in _chunks(path):
                pages = column_pages(f, start, c.total_compressed_size)
                assert sum(p.values for p in pages if p.is_data) == rg.num_rows, path
                # the chunk is the headers and the pages: its two sizes differ by the pages' alone
                headers = c.total_compressed_size - sum(p.stored_bytes for p in pages)
                assert c.total_uncompressed_size == headers + sum(p.decoded_bytes for p in pages), (path, c)


def test_damaged_page_headers_are_a_value_error_never_a_hang_or_a_crash(tmp_path):
    """Random bytes changed in the pages' headers: each walk ends, in a list of pages or a ValueError; a file
    read through them gives documents or a row naming the damage."""
    path = tmp_path / "pa.parquet"
    pq.write_table(pa.table({"text": [f"text {i} " * 30 for i in range(2000)]}), path, data_page_size=4000,
                   use_dictionary=False)
    data = path.read_bytes()
    (rg, c, start), = _chunks(path)
    rnd = random.Random(2)
    for k in range(300):
        mutated = bytearray(data)
        for _ in range(rnd.randint(1, 4)):
            at = start + rnd.randrange(c.total_compressed_size)
            mutated[at] = rnd.randrange(256)
        bad = tmp_path / f"bad{k % 3}.parquet"
        bad.write_bytes(bytes(mutated))
        with open(bad, "rb") as f:
            try:
                column_pages(f, start, c.total_compressed_size)
            except ValueError:
                pass
        if k < 30:
            reasons = {it[2] for it in readers.read_file(str(bad), "parquet") if it[0] == "drop"}
            assert reasons <= {"corrupt_row_group", "invalid_utf8", "decode_too_large"}, reasons


@pytest.mark.parametrize("n", [15, 1 << 40])
def test_a_header_claiming_a_huge_list_ends(n, tmp_path):
    """A list of 2^40 booleans in a header (each a byte of its own): the walk runs out of bytes, it does not
    loop over the count."""
    from curate.readers.parquet_pages import _page_header

    count = bytes([0xF1]) + _varint(n) if n >= 15 else bytes([(n << 4) | 1])
    header = bytes([0x15, 0x00, 0x15, 0x02, 0x15, 0x02]) + bytes([0x19]) + count + bytes(4) + b"\0"
    try:
        _page_header(header)
    except Exception as e:  # noqa: BLE001 - the kind of error is what is asserted
        assert type(e).__name__ in ("_Truncated", "ValueError"), e


def _varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def test_a_bomb_in_an_arrow_stream_is_skipped_and_the_stream_read_on(tmp_path, monkeypatch):
    """An Arrow stream (no footer: Polars' ``write_ipc_stream``) with a dictionary column: the bomb batch is one
    ``decode_too_large`` row, the batches after it (and their dictionary) are read, and the row numbers of the
    later rows count the bomb's rows."""
    monkeypatch.setattr(tables, "MAX_DECODE_BYTES", 1 << 20)
    schema = pa.schema([("kind", pa.dictionary(pa.int32(), pa.string())), ("text", pa.string())])
    path = tmp_path / "s.arrows"
    kinds = lambda *v: pa.array(list(v)).dictionary_encode()
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_stream(
            f, schema, options=pa.ipc.IpcWriteOptions(compression="zstd", emit_dictionary_deltas=True)) as w:
        w.write_batch(pa.record_batch([kinds("a", "b"), ["small one", "small two"]], schema=schema))
        w.write_batch(pa.record_batch([kinds("c", "c"), ["\0" * (8 << 20), "beside the bomb"]], schema=schema))
        w.write_batch(pa.record_batch([kinds("d"), ["small three"]], schema=schema))
    items = list(readers.read_file(str(path), "arrow", max_doc_bytes=64 << 10))
    assert [it[0] if it[0] == "doc" else it[2] for it in items] == ["doc", "doc", "decode_too_large", "doc"]
    assert "batch 1 of the stream (2 rows)" in items[2][1]["text"]
    assert [it[1]["id"] for it in items if it[0] == "doc"] == ["s.arrows:1", "s.arrows:2", "s.arrows:5"]
    assert [it[1]["text"] for it in items if it[0] == "doc"] == ["small one", "small two", "small three"]


def test_a_header_nesting_containers_deeply_is_a_value_error():
    """Lists of lists 10,000 deep (one byte each) in a header: a ValueError, not Python's recursion limit."""
    from curate.readers.parquet_pages import _page_header

    header = bytes([0x15, 0x00, 0x15, 0x02, 0x15, 0x02, 0x19]) + bytes([0x19]) * 10000 + bytes(10000) + b"\0"
    with pytest.raises(ValueError, match="nested"):
        _page_header(header)


def test_bytes_between_arrow_messages_do_not_hide_a_bomb(tmp_path, monkeypatch):
    """The batches' sizes are read where the file's footer says the batches are (where pyarrow reads them), not
    by walking the messages one after another: junk between two messages made that walk fail, and the bomb
    after it was decoded."""
    monkeypatch.setattr(tables, "MAX_DECODE_BYTES", 1 << 20)
    schema = pa.schema([("text", pa.string())])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
        w.write_batch(pa.record_batch([["small one"]], schema=schema))
        w.write_batch(pa.record_batch([["\0" * (8 << 20)]], schema=schema))
    data = bytearray(sink.getvalue().to_pybytes())
    first = tables._footer_batches(pa.BufferReader(bytes(data)))[1][0]
    n = int.from_bytes(data[-10:-6], "little")
    md = bytes(data[len(data) - 10 - n:len(data) - 10])
    root = int.from_bytes(md[:4], "little")
    vec = root + tables._fb_field(md, root, 3)
    vec += int.from_bytes(md[vec:vec + 4], "little")
    for k in range(int.from_bytes(md[vec:vec + 4], "little")):  # each batch 16 bytes further on
        at = len(data) - 10 - n + vec + 4 + 24 * k
        data[at:at + 8] = (int.from_bytes(data[at:at + 8], "little") + 16).to_bytes(8, "little")
    data[first:first] = b"\xab" * 16
    path = tmp_path / "gap.arrow"
    path.write_bytes(bytes(data))
    reader = pa.ipc.open_file(str(path))
    assert reader.get_batch(0).column(0).to_pylist() == ["small one"]  # pyarrow reads it by the footer
    counted = tables.ipc_batches(str(path), 2)
    assert counted is not None and counted[1][2] > 8 << 20
    items = list(readers.read_file(str(path), "arrow", max_doc_bytes=64 << 10))
    assert [it[0] if it[0] == "doc" else it[2] for it in items] == ["doc", "decode_too_large"]


def test_bytes_after_a_column_chunks_last_page_do_not_hide_a_bomb(tmp_path, monkeypatch):
    """pyarrow reads a column chunk's pages until their values add up to the chunk's ``num_values``; bytes after
    that page (inside the chunk's stated size) are never read. The walk stops there too: junk after the last
    page made it fail, which skipped the check."""
    import io

    path = tmp_path / "b.parquet"
    pq.write_table(pa.table({"text": ["\0" * (8 << 20)]}), path, compression="zstd", use_dictionary=False)
    (rg, c, start), = _chunks(path)
    with open(path, "rb") as f:
        f.seek(start)
        chunk = f.read(c.total_compressed_size) + b"\xff" * 64  # as if the chunk's size said 64 bytes more
    pages = column_pages(io.BytesIO(chunk), 0, len(chunk), c.num_values)
    assert sum(p.values for p in pages if p.is_data) == c.num_values and pages[-1].decoded_bytes > 8 << 20
    with pytest.raises(ValueError):
        column_pages(io.BytesIO(chunk), 0, len(chunk))  # walked to the stated end: the junk is no page
    monkeypatch.setattr(tables, "MAX_DECODE_BYTES", 1 << 20)
    monkeypatch.setattr(tables, "SLICE_BYTES", 1 << 20)
    items = list(readers.read_file(str(path), "parquet", max_doc_bytes=64 << 10))
    assert [it[2] for it in items] == ["decode_too_large"]


def test_a_page_header_of_millions_of_items_is_refused_at_once(monkeypatch):
    """A page header holding a list of 4 million one-byte elements (parquet-cpp reads headers of up to 16 MB):
    the walk stops after ``MAX_HEADER_ITEMS`` fields and elements (it took 6 s, in Python, per header) with
    ``HeaderRefused``, not a plain ``ValueError`` that would leave the page to pyarrow unchecked."""
    import curate.readers.parquet_pages as pp
    from curate.readers.parquet_pages import MAX_HEADER_ITEMS, HeaderRefused, _page_header

    n = 4 << 20
    header = bytes([0x15, 0x00, 0x15, 0x02, 0x15, 0x02, 0x19, 0xF5]) + _varint(n) + bytes(n) + b"\0"
    walked = []
    monkeypatch.setattr(pp._Reader, "count", lambda self, real=pp._Reader.count: walked.append(1) or real(self))
    with pytest.raises(HeaderRefused, match=f"{MAX_HEADER_ITEMS:,}"):
        _page_header(header)
    assert len(walked) == MAX_HEADER_ITEMS + 1  # stopped there, not after 4 million
    assert _page_header(bytes([0x15, 0x00, 0x15, 0x02, 0x15, 0x02, 0x19, 0x35]) + bytes(3) + b"\0")[0].decoded_bytes == 1


def test_a_row_group_whose_header_is_refused_is_set_aside_not_read_unchecked(tmp_path, monkeypatch):
    """A refused header sets its row group aside as ``corrupt_row_group`` (named, its rows counted), where any other
    header that does not walk is left to pyarrow: the real headers of a file, with the bound lowered to 2 items."""
    import curate.readers.parquet_pages as pp

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"text": [f"document number {i}" for i in range(30)]}), path, row_group_size=10)
    monkeypatch.setattr(pp, "MAX_HEADER_ITEMS", 2)
    items = list(readers.read_file(str(path), "parquet"))
    assert [it[2] for it in items] == ["corrupt_row_group"] * 3
    assert all("not decoded" in it[1]["text"] and "fields and elements" in it[1]["text"] for it in items)
    monkeypatch.undo()
    assert sum(it[0] == "doc" for it in readers.read_file(str(path), "parquet")) == 30
