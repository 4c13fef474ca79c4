"""Parquet and Arrow IPC (file or stream format), read in batches, never whole.

Ids: the row's own ``id_field`` when it has one, else ``<file name>:<row>`` (row numbers from 1, over the
whole file). Splits: consecutive Parquet row groups, or Arrow IPC record batches, of about ``target_bytes``
(planning reads the footer and the batches' message headers, no data). A split decodes only its own row
groups or batches; the rows before it are counted from the metadata. An Arrow *stream* (no footer) is one split.

A Feather V1 file (``.feather`` written before Feather V2, which is Arrow IPC) is read too, as one split.

Text columns (:mod:`curate.readers.arrow_text`): every string-like Arrow type pyarrow, Polars and DuckDB write
is read: ``string``, ``large_string``, ``string_view`` (Polars' default), ``binary``, ``large_binary`` and
``binary_view`` (bytes that are not UTF-8 are set aside as ``invalid_utf8``), a dictionary of any of them
(Polars' Categorical, Parquet dictionary pages) and a run-end encoded column of them (read as the dictionary it
amounts to). Other types (numbers, lists, structs) set the row aside as ``missing_text``.

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
``missing_text``, each row's text naming the file's columns and the ``text_field`` setting (no column is guessed;
the read step counts the file in ``files_without_text_column``); one where two columns bear the name of a column read (pyarrow allows it) is not read, one
``duplicate_column`` row names the columns and the rows not read.
"""
from __future__ import annotations

import io
import itertools
import json
import os
import struct

import pyarrow as pa

from curate.readers.arrow_text import PREFIX, check, is_text, lengths, run_ends_as_dictionary
from curate.readers.arrow_text import texts as arrow_texts
from curate.readers.jsonl import as_str, no_text_field, table_row
from curate.readers.parquet_pages import HeaderRefused, chunk_pages
from curate.readers.text import row

BATCH_ROWS = 4096
MAX_DECODE_BYTES = 256 << 20  # a Parquet page or compressed Arrow batch decoding to more than this (or to twice
MAX_DECODE_RATIO = 100        # max_doc_bytes) and to more than this many times its bytes on disk is not decoded
SLICE_BYTES = 64 << 20  # text bytes decoded to Python at once (and per Parquet batch, by its average row)
_ARROW_MAGIC = b"ARROW1"
_FEATHER_V1_MAGIC = b"FEA1"


class DecodeTooLarge(ValueError):
    """A unit (Parquet row group, Arrow batch) that would decode one piece to more than ``decode_cap``."""


class DuplicateColumn(ValueError):
    """A file where two or more columns bear the name of a column read (text, id, url): which is meant is unknown."""


def _unique(names: list, wanted: tuple, rows: int | None = None) -> None:
    """Raise ``DuplicateColumn`` where a column read is named by more than one column of the file (pyarrow allows
    it, and would silently take the first)."""
    for c in dict.fromkeys(wanted):
        at = [i for i, n in enumerate(names) if n == c]
        if len(at) > 1:
            held = f" ({_rows(rows)})" if rows is not None else ""
            raise DuplicateColumn(f"{len(at)} columns are named {c!r} (columns {', '.join(map(str, at))} of "
                                  f"{len(names)}): which one to read is unknown, so no row of the file{held} was read; "
                                  "rename or drop all but one, or read another column (the source's text_field / "
                                  "id_field)")


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
                 _arrow_units(path, first, cap, last=last, rows_before=before, wanted=wanted))
    except DuplicateColumn as e:
        if first == 0:
            yield ("drop", row(f"{name}:duplicate_column", str(e), path), "duplicate_column")
        return
    except (pa.ArrowException, OSError, ValueError) as e:
        if first == 0:
            yield ("drop", row(f"{name}:error", f"{type(e).__name__}: {e}"[:500], path), "corrupt_file")
        return
    row0, note = 0, None  # note: why a file without the text column sets each row aside (its columns named)
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
                    if note is None and text_field not in batch.schema.names:
                        note = no_text_field(text_field, _columns(path, fmt) or batch.schema.names, "column", "file")
                        if first == 0:  # (once per file: its first split)
                            yield ("count", "files_without_text_column", 1)
                    yield from _batch_rows(batch, row0, name, path, text_field, id_field, max_doc_bytes, note)
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
    _unique(names, wanted, md.num_rows)
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
    values among small ones). A page header too intricate to walk (``HeaderRefused``) sets the row group aside
    (``corrupt_row_group``): a header that merely does not walk is left to pyarrow, which rejects it in turn."""
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
            except HeaderRefused as e:  # pyarrow might read it, and decode the page behind it unchecked
                raise HeaderRefused(f"row group {index} ({_rows(rg.num_rows)}) not decoded: column "
                                    f"{c.path_in_schema!r}: {e}") from None
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
                 rows_before: int | None = None, wanted: tuple = ()):
    """One unit per record batch of an IPC file, decoded only when its split reads it; a file without a footer
    is read as one stream. With ``rows_before`` (the plan counted the rows before ``first``) the batches before
    ``first`` are one unit of that many rows and only those from ``first`` to ``last`` are walked; else the
    rows of the batches before ``first`` come from their message headers. A compressed batch that decodes to
    more than ``cap`` and to more than ``MAX_DECODE_RATIO`` times its bytes on disk (a decompression bomb) is
    not decoded: ``DecodeTooLarge`` when its unit is read. A Feather V1 file is one unit (``_feather_v1``)."""
    src = pa.memory_map(path)
    try:
        reader = pa.ipc.open_file(src)
    except pa.ArrowInvalid:
        src.seek(0)
        head = src.read(8)
        if head.startswith(_FEATHER_V1_MAGIC):
            return _feather_v1(path, wanted)
        start = 8 if head.startswith(_ARROW_MAGIC) else 0  # a file whose footer is gone: read it as a stream
        src.seek(start)
        stream = pa.ipc.open_stream(src)  # no readable schema: the caller sets the file aside as corrupt_file
        _unique(stream.schema.names, wanted)
        bombs = _stream_bombs(src, start, cap)
        if not bombs:
            src.seek(start)
            return [(0, 0, lambda: pa.ipc.open_stream(src), "stream")]
        return [(0, 0, lambda: _stream_batches(src, bombs), "stream")]
    n = reader.num_record_batches
    names = reader.schema.names
    if len(set(names)) < len(names):  # (the rows are counted from the batches' headers only then)
        counted = ipc_batches(path, n)
        _unique(names, wanted, None if counted is None else sum(r for r, _, _ in counted))
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


def _feather_v1(path: str, wanted: tuple):
    """A Feather V1 file (``FEA1``, the format before Feather V2 = Arrow IPC) as one unit of the columns read,
    through pyarrow's Feather reader (deprecated since pyarrow 25, hence its warning is silenced). It has no
    batches to split at, so the file is one split. Memory stays bounded although the file is read whole: V1 is
    never compressed, and with the file memory-mapped the columns are views of the map, not copies (a 50 MB
    file read so allocates nothing); the table's rows are then handed on in batches and slices as any other's."""
    import warnings

    import pyarrow.feather as feather

    _check_feather_v1(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        table = feather.read_table(path, memory_map=True)
    names = table.schema.names
    _unique(names, wanted, table.num_rows)
    table = table.select([i for i, n in enumerate(names) if n in wanted])
    return [(0, table.num_rows, lambda: table.to_batches(max_chunksize=BATCH_ROWS), "file")]


_V1_BITS = {0: 1, 1: 8, 2: 16, 3: 32, 4: 64, 5: 8, 6: 16, 7: 32, 8: 64, 9: 32, 10: 64}  # Type: bits per value
_V1_OFFSETS = {11: 4, 12: 4, 17: 8, 18: 8}  # UTF8, BINARY, LARGE_UTF8, LARGE_BINARY: bytes per offset


def _check_feather_v1(path: str) -> None:
    """Raise ``ValueError`` unless a Feather V1 file's metadata (a ``CTable`` flatbuffer, Arrow's feather.fbs)
    holds together: every offset inside it, each column's buffers inside the file and as large as its length
    needs, every column as long as the table. pyarrow's V1 reader trusts all of it (no flatbuffer verification,
    no bounds on the buffers it slices): a flipped byte there crashed the worker."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        f.seek(max(size - 8, 0))
        tail = f.read(8)
        n = struct.unpack_from("<I", tail)[0] if len(tail) == 8 else size
        if tail[4:] != b"FEA1" or n > size - 12:
            raise ValueError("a Feather V1 file whose footer is incomplete")
        f.seek(size - 8 - n)
        fb = _Flat(f.read(n))
    root = fb.ref(0)
    rows, version, columns = fb.scalar(root, 1, "<q"), fb.scalar(root, 3, "<i"), fb.ref_of(root, 2)
    for i in range(fb.at("<I", columns)):
        col = fb.ref(columns + 4 + 4 * i)
        fb.string(fb.ref_of(col, 0))  # the name
        kind = fb.scalar(col, 2, "<B")  # TypeMetadata: 1 category, 2 timestamp, 3 date, 4 time
        meta = fb.ref_of(col, 3, kind != 0)
        unit = fb.scalar(meta, 0, "<b") if kind in (2, 4) else 0  # (a time is in seconds or milliseconds)
        if kind > 4 or not 0 <= unit <= (1 if kind == 4 else 3):
            raise ValueError(f"Feather V1 metadata: column {i} has a type that is not one")
        if kind == 2 and fb.field(meta, 1) is not None:
            fb.string(fb.ref_of(meta, 1))  # the time zone
        _check_v1_array(fb, fb.ref_of(col, 1), rows, version, size, index=kind == 1)
        if kind == 1:  # a category column's levels
            _check_v1_array(fb, fb.ref_of(meta, 0), None, version, size)


def _check_v1_array(fb: "_Flat", arr: int, rows: int | None, version: int, size: int, index: bool = False) -> None:
    """A V1 ``PrimitiveArray``: a type pyarrow reads (an integer one for a category's codes), ``rows`` values
    (when given), its bytes inside the file and enough of them for its null bitmap, offsets and values."""
    t, offset, length = fb.scalar(arr, 0, "<b"), fb.scalar(arr, 2, "<q"), fb.scalar(arr, 3, "<q")
    nulls, total = fb.scalar(arr, 4, "<q"), fb.scalar(arr, 5, "<q")

    def padded(n: int) -> int:  # (files of format version 2 pad each buffer to 8 bytes)
        return n if version < 2 else -(-n // 8) * 8

    need = padded(-(-length // 8)) if nulls > 0 else 0
    need += padded((length + 1) * _V1_OFFSETS[t]) if t in _V1_OFFSETS else -(-length * _V1_BITS.get(t, 0) // 8)
    known = range(1, 9) if index else (*_V1_BITS, *_V1_OFFSETS)  # (a category's codes: an integer type)
    if (t not in known or length < 0 or (rows is not None and length != rows) or not 0 <= nulls <= length
            or offset < 0 or total < need or offset + total > size):
        raise ValueError(f"Feather V1 metadata: a column's type, length or bytes do not hold together (type {t}, "
                         f"{length} values, {nulls} nulls, bytes {offset}+{total} of a {size}-byte file)")


class _Flat:
    """Bounds-checked reads of a flatbuffer: ``ValueError`` where an offset leads outside it."""

    def __init__(self, data: bytes):
        self.data = data

    def at(self, fmt: str, pos: int):
        if not 0 <= pos <= len(self.data) - struct.calcsize(fmt):
            raise ValueError("Feather V1 metadata: an offset outside it")
        return struct.unpack_from(fmt, self.data, pos)[0]

    def ref(self, pos: int) -> int:
        """What the offset at ``pos`` points to (a table, string or vector)."""
        return pos + self.at("<I", pos)

    def field(self, table: int, k: int) -> int | None:
        """Where field ``k`` of the table at ``table`` is, or None where it is absent."""
        vt = table - self.at("<i", table)
        if 4 + 2 * k + 2 > self.at("<H", vt):
            return None
        off = self.at("<H", vt + 4 + 2 * k)
        return table + off if off else None

    def scalar(self, table: int, k: int, fmt: str):
        pos = self.field(table, k)
        return 0 if pos is None else self.at(fmt, pos)

    def ref_of(self, table: int, k: int, required: bool = True) -> int | None:
        """The table, string or vector field ``k`` points to; a ``ValueError`` where it is absent and required."""
        pos = self.field(table, k)
        if pos is None:
            if required:
                raise ValueError(f"Feather V1 metadata: a required field ({k}) is missing")
            return None
        return self.ref(pos)

    def string(self, pos: int) -> bytes:
        n = self.at("<I", pos)
        if pos + 4 + n > len(self.data):
            raise ValueError("Feather V1 metadata: a string past its end")
        return self.data[pos + 4:pos + 4 + n]


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


def _columns(path: str, fmt: str) -> list | None:
    """The names of a file's columns (all of them, not only those read), or None when they cannot be read."""
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return pq.ParquetFile(path).schema_arrow.names
        with pa.memory_map(path) as src:
            try:
                return pa.ipc.open_file(src).schema.names
            except pa.ArrowInvalid:
                src.seek(0)
                head = src.read(8)
                if head.startswith(_FEATHER_V1_MAGIC):
                    return None
                src.seek(8 if head.startswith(_ARROW_MAGIC) else 0)
                return pa.ipc.open_stream(src).schema.names
    except (pa.ArrowException, OSError, ValueError):
        return None


def _batch_rows(batch: pa.RecordBatch, row0: int, name: str, source: str, text_field: str, id_field: str,
                max_doc_bytes: int, note: str | None = None):
    """The batch's rows as reader items; ``note``: the text of each row's ``missing_text`` row when the file has no
    text column."""
    names = batch.schema.names
    text_col = run_ends_as_dictionary(batch.column(names.index(text_field))) if text_field in names else None
    if text_col is not None:
        check(text_col)  # texts that do not hold together: the batch is corrupt_batch (the caller)
        t = text_col.type
        if not is_text(t.value_type if pa.types.is_dictionary(t) else t):
            note = not_text_column(text_field, batch.schema.field(text_field).type)
        else:
            note = None
    sound = {}  # the id and url columns that hold together; others are left unread (fallback ids, no url)
    for field in dict.fromkeys((id_field, "url")):
        if field in names and field != text_field:
            try:
                col = run_ends_as_dictionary(batch.column(names.index(field)))
                check(col)
                sound[field] = col
            except (pa.ArrowException, ValueError):
                pass
    for a, b in _slices(text_col, batch.num_rows):
        cols = {}
        for field in (id_field, "url"):
            if field in sound:
                cols[field] = _column(sound[field].slice(a, b - a))
        texts, sizes = arrow_texts(None if text_col is None else text_col.slice(a, b - a), b - a, max_doc_bytes)
        values = _column(text_col.slice(a, b - a)) if text_col is not None and note else None
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
            item = table_row(obj, fallback, source, text_field, id_field, sizes[k], max_doc_bytes)
            if note and item[0] == "drop":  # no text column, or one that does not hold text (its value kept)
                value = values[k] if values is not None else None
                item[1]["text"] = note if value is None else f"{note}. Its value: {as_str(value)[:PREFIX]}"
            yield item


def not_text_column(text_field: str, type_) -> str:
    """The text of a ``missing_text`` row whose file's text column holds something other than text."""
    return (f"the column {json.dumps(text_field, ensure_ascii=False)} holds {str(type_)[:200]}, not text (a "
            f"string, large_string, string_view or binary column, or a dictionary of one). The source's text_field "
            f"names the column that holds the text (text_field = \"...\" under [[sources]])")


def _slices(col, n: int):
    """Row ranges ``[a, b)`` of a batch, each holding at most SLICE_BYTES of text (at least one row)."""
    sizes = lengths(col) if col is not None else None
    if sizes is None or n == 0 or int(sizes.sum()) <= SLICE_BYTES:
        yield 0, n
        return
    a, acc = 0, 0
    for i, size in enumerate(sizes.tolist()):
        if i > a and acc + size > SLICE_BYTES:
            yield a, i
            a, acc = i, 0
        acc += size
    yield a, n


def _column(col: pa.Array) -> list:
    t = col.type
    if pa.types.is_dictionary(t):  # (Arrow has no take for view types: the values are mapped here)
        values = _column(col.dictionary)
        return [None if i is None or not 0 <= i < len(values) else values[i] for i in col.indices.to_pylist()]
    if is_text(t):
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
