"""Parquet and Arrow IPC (file or stream format), read in batches, never whole.

Ids: the row's own ``id_field`` when it has one, else ``<file name>:<row>`` (row numbers from 1, over the
whole file). Splits: consecutive Parquet row groups, or Arrow IPC record batches, of about ``target_bytes``
(planning reads the footer and the batches' message headers, no data). A split decodes only its own row
groups or batches; the rows before it are counted from the metadata. An Arrow *stream* (no footer) is one split.

Text columns: every string-like Arrow type pyarrow, Polars and DuckDB write is read: ``string``,
``large_string``, ``string_view`` (Polars' default), ``binary``, ``large_binary`` and ``binary_view`` (bytes
that are not UTF-8 are set aside as ``invalid_utf8``), a dictionary of any of them (Polars' Categorical,
Parquet dictionary pages) and a run-end encoded column of them (read as the dictionary it amounts to). Other
types (numbers, lists, structs) set the row aside as ``missing_text``.

Memory is bounded by bytes, not rows: Parquet batches are sized from the row group's bytes per row, a
dictionary column is read as a dictionary (a text repeated in 4096 rows is held once, not 4096 times), and a
batch is handed on in slices of at most ``SLICE_BYTES`` of text. pyarrow decodes a Parquet page, or a compressed
Arrow batch, whole: the sizes they decode to are read first (Parquet's page headers, ``parquet_pages``; the
lengths in front of an Arrow batch's compressed buffers), and one that decodes to more than ``decode_cap`` and
to more than ``MAX_DECODE_RATIO`` times its bytes on disk (a decompression bomb) is not decoded: its row group or
batch is one ``decode_too_large`` row. A Parquet batch holds no more rows than its densest page's
``SLICE_BYTES`` worth.

Damage is set aside per unit: a Parquet row group or Arrow batch that cannot be decoded, or whose text, id or
url column's offsets or views point outside its data (checked before any value is read), becomes one row
(``corrupt_row_group`` / ``corrupt_batch``) with its position; an unreadable footer makes one row for the file
(``corrupt_file``); an Arrow stream that ends early keeps its complete batches (``truncated_arrow``).
Only the text, id and url columns are read; a file without the text column sets every row aside as
``missing_text``.
"""
from __future__ import annotations

import io
import itertools
import os
import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.readers.jsonl import table_row
from curate.readers.parquet_pages import chunk_pages
from curate.readers.text import row

BATCH_ROWS = 4096
MAX_DECODE_BYTES = 256 << 20  # a Parquet page or compressed Arrow batch decoding to more than this (or to twice
MAX_DECODE_RATIO = 100        # max_doc_bytes) and to more than this many times its bytes on disk is not decoded
SLICE_BYTES = 64 << 20  # text bytes decoded to Python at once (and per Parquet batch, by its average row)
PREFIX = 10000  # bytes of a too-large text that are decoded (the row keeps a prefix only)
_ARROW_MAGIC = b"ARROW1"


class DecodeTooLarge(ValueError):
    """A unit (Parquet row group, Arrow batch) that would decode one piece to more than ``decode_cap``."""


def _is_bomb(decoded: int, stored: int, cap: int) -> bool:
    """A piece pyarrow decodes whole that decodes to more than ``cap`` and to more than ``MAX_DECODE_RATIO``
    times its bytes on disk (``stored``): a decompression bomb, not decoded."""
    return decoded > cap and decoded > MAX_DECODE_RATIO * max(stored, 1)


def decode_cap(max_doc_bytes: int) -> int:
    """Bytes one piece pyarrow decodes whole (a Parquet page, a compressed Arrow batch) may decode to before its
    ratio to the bytes on disk is asked: ``MAX_DECODE_BYTES``, or twice ``max_doc_bytes`` when larger."""
    return max(MAX_DECODE_BYTES, 2 * max_doc_bytes)


def plan(path: str, fmt: str, target_bytes: int) -> list[dict]:
    base = {"path": path, "format": fmt}
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            md = pq.ParquetFile(path).metadata
            sizes = [md.row_group(i).total_byte_size for i in range(md.num_row_groups)]
        else:
            with pa.memory_map(path) as src:
                n = pa.ipc.open_file(src).num_record_batches
            batches = ipc_batches(path, n)
            sizes = [b for _, b, _ in batches] if batches else [os.path.getsize(path) / max(n, 1)] * n
    except (pa.ArrowException, OSError, ValueError):
        return [{**base, "first": 0, "last": None}]
    # an Arrow split also says how many rows come before it (its documents' ids count them), so that reading it
    # walks only its own batches' headers, not every batch of the file (which made a file's splits quadratic)
    rows = [r for r, _, _ in batches] if fmt != "parquet" and batches else None
    splits, first, acc = [], 0, 0
    for i, s in enumerate(sizes):
        if acc and acc + s > target_bytes:
            splits.append({**base, "first": first, "last": i})
            first, acc = i, 0
        acc += s
    splits.append({**base, "first": first, "last": None})
    if rows is not None:
        before = [0, *itertools.accumulate(rows)]  # rows before each batch
        for split in splits:
            split["rows_before"] = before[split["first"]]
    return splits


def read(split: dict, name: str, text_field: str, id_field: str, max_doc_bytes: int):
    path, fmt = split["path"], split["format"]
    first, last = split.get("first", 0), split.get("last")
    try:
        wanted = (text_field, id_field, "url")
        cap = decode_cap(max_doc_bytes)
        before = split.get("rows_before") if fmt != "parquet" else None
        units = (_parquet_units(path, wanted, text_field, cap) if fmt == "parquet" else
                 _arrow_units(path, first, cap, last=last, rows_before=before))
    except (pa.ArrowException, OSError, ValueError) as e:
        if first == 0:
            yield ("drop", row(f"{name}:error", f"{type(e).__name__}: {e}"[:500], path), "corrupt_file")
        return
    row0 = 0
    for index, n_rows, load, unit in units:
        if index < first:
            row0 += n_rows
            continue
        if last is not None and index >= last:
            return
        start = row0
        try:
            for batch in load():
                if isinstance(batch, Skipped):  # a stream's bomb: one row, its rows counted
                    yield ("drop", row(f"{name}:{unit}{index}:{row0 + 1}", batch.why[:500], path), "decode_too_large")
                else:
                    yield from _batch_rows(batch, row0, name, path, text_field, id_field, max_doc_bytes)
                row0 += batch.num_rows
        except DecodeTooLarge as e:  # not decoded: its rows are this one row, as a damaged unit's are
            yield ("drop", row(f"{name}:{unit}{index}", str(e)[:500], path), "decode_too_large")
        except (pa.ArrowException, OSError, ValueError, EOFError) as e:
            reason = "truncated_arrow" if unit == "stream" else f"corrupt_{unit}"
            yield ("drop", row(f"{name}:{unit}{index}", f"{type(e).__name__}: {e}"[:500], path), reason)
            if unit == "stream":
                return
        row0 = max(row0, start + n_rows)  # a damaged unit's rows still count: ids do not depend on the split


def _parquet_units(path: str, wanted: tuple, text_field: str, cap: int = MAX_DECODE_BYTES):
    import pyarrow.parquet as pq

    probe = pq.ParquetFile(path)
    md = probe.metadata
    names = probe.schema_arrow.names
    columns = [c for c in dict.fromkeys(wanted) if c in names]
    # a dictionary-encoded text column stays a dictionary: its repeated texts are not decoded once per row.
    # Batches of one row (rows of SLICE_BYTES or more on average) are read plain: a row holds one text, so
    # there is nothing to share, and pyarrow's dictionary read of a huge value holds it once more (a 200 MB
    # value: 1.09 GB against 0.69 GB)
    pf = pq.ParquetFile(path, read_dictionary=[text_field]) if _dictionary_pages(md, text_field) else probe

    def loader(i):
        def load():
            rg = md.row_group(i)
            per_row = rg.total_byte_size / max(rg.num_rows, 1)
            rows = int(max(1, min(BATCH_ROWS, SLICE_BYTES // max(per_row, 1))))
            rows = min(rows, _rows_by_pages(path, rg, columns, cap, i))
            return (pf if rows > 1 else probe).iter_batches(batch_size=rows, row_groups=[i], columns=columns)
        return load

    return [(i, md.row_group(i).num_rows, loader(i), "row_group") for i in range(md.num_row_groups)]


def _rows_by_pages(path: str, rg, columns: list, cap: int, index: int) -> int:
    """Rows a batch of row group ``index`` may hold, from the pages of the columns read (``parquet_pages``).
    pyarrow decodes a page whole, so a page that decodes to more than ``cap`` and to more than
    ``MAX_DECODE_RATIO`` times its bytes on disk (a decompression bomb: a few KB that decode to GBs) raises
    ``DecodeTooLarge`` when the unit is read; and a batch holds no more rows than the densest page's
    ``SLICE_BYTES`` worth (the batch size by the row group's average row alone let one batch span several huge
    values among small ones)."""
    rows = BATCH_ROWS
    chunks = [rg.column(j) for j in range(rg.num_columns)]
    chunks = [c for c in chunks if c.path_in_schema in columns]  # every chunk read is walked: sizes could lie
    try:
        f = open(path, "rb")
    except OSError:
        return rows  # pyarrow says what is wrong when it reads the file
    with f:
        walked = []
        for c in chunks:
            try:
                walked.append((c, chunk_pages(f, c)))
            except (OSError, ValueError):
                pass  # headers that do not walk: pyarrow says what is wrong when it reads them
    for c, pages in walked:
        for p in pages:
            if _is_bomb(p.decoded_bytes, p.stored_bytes, cap):
                raise DecodeTooLarge(f"row group {index} ({_rows(rg.num_rows)}) not decoded: a page of column "
                                     f"{c.path_in_schema!r} decodes to {p.decoded_bytes:,} bytes from "
                                     f"{p.stored_bytes:,}")
            if p.is_data and p.values and p.decoded_bytes:
                rows = min(rows, max(1, SLICE_BYTES * p.values // p.decoded_bytes))
    return rows


def decode_bomb(path: str, fmt: str, cap: int | None = None) -> str | None:
    """Where a Parquet or Arrow IPC file holds a decompression bomb (a page or compressed batch that decodes to
    more than ``cap`` and to more than ``MAX_DECODE_RATIO`` times its bytes on disk), in words; else None. Reads
    headers only. For files read whole rather than through ``read`` (a curation folder's shards)."""
    import pyarrow.parquet as pq

    cap = MAX_DECODE_BYTES if cap is None else cap
    if fmt == "parquet":
        md = pq.ParquetFile(path).metadata
        for i in range(md.num_row_groups):
            rg = md.row_group(i)
            try:
                _rows_by_pages(path, rg, [rg.column(j).path_in_schema for j in range(rg.num_columns)], cap, i)
            except DecodeTooLarge as e:
                return str(e)
        return None
    with pa.memory_map(path) as src:
        n = pa.ipc.open_file(src).num_record_batches
    for i, (rows, stored, decoded) in enumerate(ipc_batches(path, n) or []):
        if _is_bomb(decoded, stored, cap):
            return f"batch {i} ({_rows(rows)}) decompresses to {decoded:,} bytes from {stored:,}"
    return None


def _dictionary_pages(md, field: str) -> bool:
    """Does any row group store ``field`` (a top-level column) with a dictionary page?"""
    try:
        for i in range(md.num_row_groups):
            rg = md.row_group(i)
            for j in range(rg.num_columns):
                c = rg.column(j)
                if c.path_in_schema == field and c.has_dictionary_page:
                    return True
    except (pa.ArrowException, ValueError, IndexError):
        return False
    return False


def _arrow_units(path: str, first: int = 0, cap: int = MAX_DECODE_BYTES, last: int | None = None,
                 rows_before: int | None = None):
    """One unit per record batch of an IPC file, decoded only when its split reads it; a file without a footer
    is read as one stream. With ``rows_before`` (the plan counted the rows before ``first``) the batches before
    ``first`` are one unit of that many rows and only those from ``first`` to ``last`` are walked; else the
    rows of the batches before ``first`` come from their message headers. A compressed batch that decodes to
    more than ``cap`` and to more than ``MAX_DECODE_RATIO`` times its bytes on disk (a decompression bomb) is
    not decoded: ``DecodeTooLarge`` when its unit is read."""
    src = pa.memory_map(path)
    try:
        reader = pa.ipc.open_file(src)
    except pa.ArrowInvalid:
        src.seek(0)
        head = src.read(8)
        start = 8 if head.startswith(_ARROW_MAGIC) else 0  # a file whose footer is gone: read it as a stream
        src.seek(start)
        stream = pa.ipc.open_stream(src)  # no readable schema: the caller sets the file aside as corrupt_file
        bombs = _stream_bombs(src, start, cap)
        if not bombs:
            src.seek(start)
            return [(0, 0, lambda: pa.ipc.open_stream(src), "stream")]
        return [(0, 0, lambda: _stream_batches(src, bombs), "stream")]
    n = reader.num_record_batches
    lo = first if rows_before is not None and 0 < first < n else 0  # the first batch whose header is walked
    end = n if last is None else min(last, n)
    counted = ipc_batches(path, n, lo, end)
    units = [(lo - 1, rows_before, None, "batch")] if lo else []  # the batches before the split: the plan's count
    for i in range(lo, end):
        sizes = counted[i - lo] if counted else None
        if i < first:
            units.append((i, sizes[0] if sizes else _rows_of(reader, i), None, "batch"))
        else:
            units.append((i, sizes[0] if sizes else 0, _batch_loader(reader, i, sizes, cap), "batch"))
    return units


class Skipped:
    """A stream's record batch that was not decoded (``DecodeTooLarge``): its rows, and why."""

    def __init__(self, rows: int, why: str):
        self.num_rows, self.why = rows, why


def _stream_bombs(src, start: int, cap: int) -> tuple[list, dict] | None:
    """Where an Arrow stream's messages lie, when one of its compressed record batches is a bomb (see
    ``_arrow_units``): (each message's byte range, {its index among the record batches: ``Skipped``}); else
    None (no bomb, or messages that do not walk: the stream is read as it is)."""
    ranges, bombs, k = [], {}, 0
    try:
        src.seek(start)
        pos = start
        for m in pa.ipc.MessageReader.open_stream(src):
            end = src.tell()
            if m.type == "record batch":
                rows, stored, decoded = _batch_sizes(m)
                if _is_bomb(decoded, stored, cap):
                    bombs[k] = Skipped(rows, f"batch {k} of the stream ({_rows(rows)}) not decoded: it decompresses "
                                             f"to {decoded:,} bytes from {stored:,}")
                    pos = end
                    k += 1
                    continue
                k += 1
            ranges.append((pos, end))
            pos = end
    except (pa.ArrowException, OSError, ValueError, struct.error, IndexError):
        pass  # the stream ends early or is damaged there: read up to that point as before
    if not bombs:
        return None
    ranges.append((pos, src.size()))  # the end-of-stream marker, or what did not walk
    return ranges, bombs


def _stream_batches(src, found):
    """The stream's record batches, read from its messages without its bombs, with a ``Skipped`` in the place
    of each bomb."""
    ranges, bombs = found
    reader = pa.ipc.open_stream(_Ranges(src, ranges))
    k = 0
    while True:
        while k in bombs:
            yield bombs[k]
            k += 1
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            return
        yield batch
        k += 1


class _Ranges(io.RawIOBase):
    """The byte ranges ``[a, b)`` of ``src`` (a pyarrow file) read one after the other, as one file."""

    def __init__(self, src, ranges):
        self.src, self.ranges, self.i, self.at = src, [r for r in ranges if r[1] > r[0]], 0, 0

    def readable(self) -> bool:
        return True

    def readinto(self, out) -> int:
        while self.i < len(self.ranges):
            a, b = self.ranges[self.i]
            if a + self.at < b:
                n = min(len(out), b - a - self.at)
                data = self.src.read_at(n, a + self.at)
                out[:len(data)] = data
                self.at += len(data)
                return len(data)
            self.i, self.at = self.i + 1, 0
        return 0


def _rows(n: int) -> str:
    return f"{n:,} row" + ("" if n == 1 else "s")


def _batch_loader(reader, i: int, sizes: tuple[int, int, int] | None, cap: int):
    rows, stored, decoded = sizes or (0, 0, 0)
    if _is_bomb(decoded, stored, cap):
        def refuse():
            raise DecodeTooLarge(f"batch {i} ({_rows(rows)}) not decoded: it decompresses to {decoded:,} bytes "
                                 f"from {stored:,}")
        return refuse
    return lambda: [reader.get_batch(i)]


def _rows_of(reader, i: int) -> int:
    try:
        return reader.get_batch(i).num_rows
    except (pa.ArrowException, OSError):
        return 0


def ipc_batches(path: str, n: int, first: int = 0, last: int | None = None) -> list[tuple[int, int, int]] | None:
    """``(rows, body bytes, decoded bytes)`` of record batches ``first`` to ``last`` (all by default) of an Arrow
    IPC file of ``n`` batches, from the messages' headers and, for a compressed batch, the 8-byte length before
    each of its buffers (no batch is decoded or decompressed); None when the messages cannot be walked, or the
    file is not ``n`` batches."""
    last = n if last is None else min(last, n)
    out = []
    try:
        with pa.memory_map(path) as src:
            found = _footer_batches(src, first, last)
            if found is not None:  # where get_batch reads them (bytes between messages do not hide one)
                count, offsets = found
                if count != n:
                    return None
                for offset in offsets:
                    src.seek(offset)
                    m = pa.ipc.read_message(src)
                    if m.type != "record batch":
                        return None
                    out.append(_batch_sizes(m))
                return out
            src.seek(8)
            for m in pa.ipc.MessageReader.open_stream(src):
                if m.type == "record batch":
                    out.append(_batch_sizes(m))
    except (pa.ArrowException, OSError, ValueError, struct.error, IndexError):
        return None
    return out[first:last] if len(out) == n else None


def _batch_sizes(m) -> tuple[int, int, int]:
    """(rows, body bytes, decoded bytes) of a record batch ``Message``, from its header (and, compressed, the
    lengths in front of its buffers)."""
    rows, buffers, compressed = _batch_header(m.metadata.to_pybytes())
    body = m.body if m.body is not None else pa.py_buffer(b"")
    return rows, body.size, _decoded_bytes(body, buffers) if compressed else body.size


def _footer_batches(src, first: int = 0, last: int | None = None) -> tuple[int, list[int]] | None:
    """How many record batches an Arrow IPC file's footer lists (``Footer.recordBatches``, field 3: a vector of
    24-byte ``Block`` structs, ``offset`` first), and the offsets of batches ``first`` to ``last`` (all by
    default); None when the footer cannot be read."""
    size = src.size()
    if size < 18:
        return None
    tail = src.read_at(10, size - 10)
    if tail[4:] != _ARROW_MAGIC:
        return None
    n = struct.unpack_from("<i", tail, 0)[0]
    if not 0 < n <= size - 18:
        return None
    md = src.read_at(n, size - 10 - n)
    root = struct.unpack_from("<I", md, 0)[0]
    fo = _fb_field(md, root, 3)
    if not fo:
        return 0, []
    vec = root + fo + struct.unpack_from("<I", md, root + fo)[0]
    count = struct.unpack_from("<I", md, vec)[0]
    if 4 + 24 * count > len(md) - vec:
        raise ValueError("a footer's batch list past its end")
    last = count if last is None else min(last, count)
    return count, [struct.unpack_from("<q", md, vec + 4 + 24 * k)[0] for k in range(first, last)]


def _fb_field(md: bytes, table: int, k: int) -> int:
    """The offset of field ``k`` of the flatbuffer table at ``table`` (0: absent)."""
    vt = table - struct.unpack_from("<i", md, table)[0]
    return struct.unpack_from("<H", md, vt + 4 + 2 * k)[0] if 4 + 2 * k + 2 <= struct.unpack_from("<H", md, vt)[0] else 0


def _batch_header(md: bytes) -> tuple[int, list[tuple[int, int]], bool]:
    """(``RecordBatch.length``, its buffers as (offset, length) in the body, whether the body is compressed)
    from an IPC ``Message`` flatbuffer: Message.header is field 2; of the RecordBatch table, ``length`` (int64)
    is field 0, ``buffers`` (a vector of 16-byte structs) field 2 and ``compression`` field 3."""
    root = struct.unpack_from("<I", md, 0)[0]
    fo = _fb_field(md, root, 2)
    if not fo:
        raise ValueError("a record batch message without a header")
    header = root + fo + struct.unpack_from("<I", md, root + fo)[0]
    lo = _fb_field(md, header, 0)
    length = struct.unpack_from("<q", md, header + lo)[0] if lo else 0
    if length < 0:
        raise ValueError("a negative batch length")
    buffers = []
    bo = _fb_field(md, header, 2)
    if bo:
        vec = header + bo + struct.unpack_from("<I", md, header + bo)[0]
        count = struct.unpack_from("<I", md, vec)[0]
        if 4 + 16 * count > len(md) - vec:
            raise ValueError("a buffer list past the message's end")
        buffers = [struct.unpack_from("<qq", md, vec + 4 + 16 * k) for k in range(count)]
    return length, buffers, bool(_fb_field(md, header, 3))


def _decoded_bytes(body: pa.Buffer, buffers: list[tuple[int, int]]) -> int:
    """Bytes a compressed batch's buffers decompress to: each buffer starts with its decompressed length as an
    int64 (-1: stored as is)."""
    view = memoryview(body)
    total = 0
    for offset, length in buffers:
        if length <= 0:
            continue
        if offset < 0 or length < 8 or offset + 8 > len(view):
            raise ValueError("a compressed buffer outside the batch's body")
        n = struct.unpack_from("<q", view, offset)[0]
        total += length - 8 if n == -1 else max(n, 0)
    return total


def _run_ends_as_dictionary(col):
    """A run-end encoded column as the dictionary array it amounts to (row -> its run's value), never expanded:
    one value repeated over a million rows stays one value (``pc.run_end_decode`` would copy it per row).
    Raises ``ArrowInvalid`` where the run ends do not hold together."""
    if not pa.types.is_run_end_encoded(col.type):
        return col
    col.validate(full=True)
    ends = col.run_ends.to_numpy(zero_copy_only=False).astype(np.int64)
    idx = np.searchsorted(ends, np.arange(col.offset, col.offset + len(col), dtype=np.int64), side="right")
    values = _run_ends_as_dictionary(col.values)
    return pa.DictionaryArray.from_arrays(pa.array(idx, pa.int64()), values)


def _batch_rows(batch: pa.RecordBatch, row0: int, name: str, source: str, text_field: str, id_field: str, max_doc_bytes: int):
    names = batch.schema.names
    text_col = _run_ends_as_dictionary(batch.column(names.index(text_field))) if text_field in names else None
    if text_col is not None:
        _check(text_col)  # texts that do not hold together: the batch is corrupt_batch (the caller)
    sound = {}  # the id and url columns that hold together; others are left unread (fallback ids, no url)
    for field in dict.fromkeys((id_field, "url")):
        if field in names and field != text_field:
            try:
                col = _run_ends_as_dictionary(batch.column(names.index(field)))
                _check(col)
                sound[field] = col
            except (pa.ArrowException, ValueError):
                pass
    for a, b in _slices(text_col, batch.num_rows):
        cols = {}
        for field in (id_field, "url"):
            if field in sound:
                cols[field] = _column(sound[field].slice(a, b - a))
        texts, sizes = _texts(None if text_col is None else text_col.slice(a, b - a), b - a, max_doc_bytes)
        for k in range(b - a):
            obj = {f: c[k] for f, c in cols.items()}
            fallback = f"{name}:{row0 + a + k + 1}"
            t = texts[k]
            if isinstance(t, bytes):  # not valid UTF-8
                own = obj.get(id_field)
                yield ("drop", row(str(own) if own not in (None, "") else fallback, t[:PREFIX].decode("utf-8", "replace"), source),
                       "invalid_utf8")
                continue
            obj[text_field] = t
            yield table_row(obj, fallback, source, text_field, id_field, sizes[k], max_doc_bytes)


_AS_BYTES = {pa.string(): pa.binary(), pa.large_string(): pa.large_binary(), pa.string_view(): pa.binary_view()}


def _check(col: pa.Array) -> None:
    """Raise ``ArrowInvalid`` where a column's buffers do not hold together (offsets or views past their data,
    a dictionary's indices of the wrong size). Arrow IPC readers map a file's buffers without checking them:
    a damaged batch's offsets would take pyarrow outside its memory (a segmentation fault, the worker lost),
    so the batch is set aside instead. Text is checked as bytes: UTF-8 is decided row by row."""
    t = col.type
    if pa.types.is_dictionary(t):
        col.indices.validate(full=True)  # (an index past the dictionary is no text: see _lengths, _texts)
        _check(col.dictionary)
        return
    as_bytes = _AS_BYTES.get(t)
    (col.view(as_bytes) if as_bytes is not None else col).validate(full=True)


def _slices(col, n: int):
    """Row ranges ``[a, b)`` of a batch, each holding at most SLICE_BYTES of text (at least one row)."""
    lengths = _lengths(col) if col is not None else None
    if lengths is None or n == 0 or int(lengths.sum()) <= SLICE_BYTES:
        yield 0, n
        return
    a, acc = 0, 0
    for i, size in enumerate(lengths.tolist()):
        if i > a and acc + size > SLICE_BYTES:
            yield a, i
            a, acc = i, 0
        acc += size
    yield a, n


def _lengths(col) -> np.ndarray | None:
    """Bytes of each value of a string-like column (0 for nulls), without copying its data; None when not text."""
    t = col.type
    if pa.types.is_dictionary(t):
        values = _lengths(col.dictionary)
        if values is None:
            return None
        idx = col.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        ok = (idx >= 0) & (idx < len(values))  # an index past the dictionary (a damaged file): no text
        return np.where(ok, values[np.where(ok, idx, 0)] if len(values) else 0, 0).astype(np.int64)
    if _is_view(t):
        views = col.buffers()[1]
        if views is None or len(col) == 0:
            return np.zeros(len(col), np.int64)
        lengths = np.frombuffer(views, dtype=np.int32).reshape(-1, 4)[col.offset:col.offset + len(col), 0].astype(np.int64)
        if col.null_count:
            lengths[col.is_null().to_numpy(zero_copy_only=False)] = 0
        return lengths
    if _is_offset_text(t):
        return pc.binary_length(col).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    return None


def _is_view(t) -> bool:
    return pa.types.is_string_view(t) or pa.types.is_binary_view(t)


def _is_offset_text(t) -> bool:
    return (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t))


def _is_text(t) -> bool:
    return _is_view(t) or _is_offset_text(t)


def _column(col: pa.Array) -> list:
    t = col.type
    if pa.types.is_dictionary(t):  # (Arrow has no take for view types: the values are mapped here)
        values = _column(col.dictionary)
        return [None if i is None or not 0 <= i < len(values) else values[i] for i in col.indices.to_pylist()]
    if _is_text(t):
        return [None if b is None else b.decode("utf-8", "replace") for b in col.cast(pa.large_binary()).to_pylist()]
    try:
        return col.to_pylist()
    except (pa.ArrowException, ValueError, OverflowError):  # (a timestamp past Python's datetime, a date64 ...)
        return [_value(col, i) for i in range(len(col))]


def _value(col: pa.Array, i: int):
    """One value of a column whose ``to_pylist`` fails: as Python, else as Arrow prints it, else None."""
    try:
        return col[i].as_py()
    except (pa.ArrowException, ValueError, OverflowError):
        pass
    try:
        return col.slice(i, 1).cast(pa.string())[0].as_py()
    except (pa.ArrowException, ValueError, OverflowError):
        return None


def _texts(col, n: int, max_doc_bytes: int) -> tuple[list, list]:
    """Texts as str (bytes where not valid UTF-8, None where not text) and their sizes in bytes. A dictionary's
    values are decoded once each (rows sharing a value share one str); a text over ``max_doc_bytes`` is decoded
    as a prefix only (the row is set aside as too_large, keeping a prefix)."""
    if col is None:
        return [None] * n, [0] * n
    t = col.type
    if pa.types.is_dictionary(t):
        if not _is_text(t.value_type):
            return [None] * n, [0] * n
        size = len(col.dictionary)
        idx = [i if i is not None and 0 <= i < size else None for i in col.indices.to_pylist()]
        used = sorted({i for i in idx if i is not None})  # only the values these rows use are decoded
        decoded = {i: _texts(col.dictionary.slice(i, 1), 1, max_doc_bytes) for i in used}  # (no take for views)
        return ([None if i is None else decoded[i][0][0] for i in idx], [0 if i is None else decoded[i][1][0] for i in idx])
    if not _is_text(t):
        return [None] * n, [0] * n
    lengths = _lengths(col)
    if lengths is not None and len(lengths) and int(lengths.max()) > max_doc_bytes:
        col = pc.binary_slice(col.cast(pa.large_binary()), 0, max(max_doc_bytes, PREFIX) + 1)
    raw = col.cast(pa.large_binary()).to_pylist()
    texts = []
    for b in raw:
        if b is None:
            texts.append(None)
            continue
        try:
            texts.append(b.decode("utf-8"))
        except UnicodeDecodeError:
            if len(b) > max_doc_bytes:  # a prefix cut inside a character: still text, too large
                texts.append(b[:PREFIX].decode("utf-8", "replace"))
            else:
                texts.append(b)
    sizes = lengths.tolist() if lengths is not None else [0 if b is None else len(b) for b in raw]
    return texts, sizes
