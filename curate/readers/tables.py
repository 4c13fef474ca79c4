"""Parquet and Arrow IPC (file or stream format), read in batches, never whole.

Ids: the row's own ``id_field`` when it has one, else ``<file name>:<row>`` (row numbers from 1, over the
whole file). Splits: consecutive Parquet row groups, or Arrow IPC record batches, of about ``target_bytes``
(planning reads the footer only). An Arrow *stream* (no footer) is one split.

Damage is set aside per unit: a Parquet row group or Arrow batch that cannot be decoded becomes one row
(``corrupt_row_group`` / ``corrupt_batch``) with its position; an unreadable footer makes one row for the file
(``corrupt_file``); an Arrow stream that ends early keeps its complete batches (``truncated_arrow``).
Only the text, id and url columns are read; a file without the text column sets every row aside as
``missing_text``.
"""
from __future__ import annotations

import os

import pyarrow as pa

from curate.readers.jsonl import table_row
from curate.readers.text import row

BATCH_ROWS = 4096
_ARROW_MAGIC = b"ARROW1"


def plan(path: str, fmt: str, target_bytes: int) -> list[dict]:
    base = {"path": path, "format": fmt}
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            md = pq.ParquetFile(path).metadata
            sizes = [md.row_group(i).total_byte_size for i in range(md.num_row_groups)]
        else:
            with pa.memory_map(path) as src:
                reader = pa.ipc.open_file(src)
                n = reader.num_record_batches
            sizes = [os.path.getsize(path) / max(n, 1)] * n
    except (pa.ArrowException, OSError, ValueError):
        return [{**base, "first": 0, "last": None}]
    splits, first, acc = [], 0, 0
    for i, s in enumerate(sizes):
        if acc and acc + s > target_bytes:
            splits.append({**base, "first": first, "last": i})
            first, acc = i, 0
        acc += s
    splits.append({**base, "first": first, "last": None})
    return splits


def read(split: dict, name: str, text_field: str, id_field: str, max_doc_bytes: int):
    path, fmt = split["path"], split["format"]
    first, last = split.get("first", 0), split.get("last")
    try:
        wanted = (text_field, id_field, "url")
        units = _parquet_units(path, wanted) if fmt == "parquet" else _arrow_units(path)
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
        try:
            for batch in load():
                yield from _batch_rows(batch, row0, name, path, text_field, id_field, max_doc_bytes)
                row0 += batch.num_rows
        except (pa.ArrowException, OSError, ValueError, EOFError) as e:
            reason = "truncated_arrow" if unit == "stream" else f"corrupt_{unit}"
            yield ("drop", row(f"{name}:{unit}{index}", f"{type(e).__name__}: {e}"[:500], path), reason)
            if unit == "stream":
                return


def _parquet_units(path: str, wanted: tuple):
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    md = pf.metadata
    columns = [c for c in dict.fromkeys(wanted) if c in pf.schema_arrow.names]

    def loader(i):
        return lambda: pf.iter_batches(batch_size=BATCH_ROWS, row_groups=[i], columns=columns)

    return [(i, md.row_group(i).num_rows, loader(i), "row_group") for i in range(md.num_row_groups)]


def _arrow_units(path: str):
    src = pa.memory_map(path)
    try:
        reader = pa.ipc.open_file(src)
    except pa.ArrowInvalid:
        src.seek(0)
        head = src.read(8)
        src.seek(8 if head.startswith(_ARROW_MAGIC) else 0)  # a file whose footer is gone: read it as a stream
        stream = pa.ipc.open_stream(src)  # no readable schema: the caller sets the file aside as corrupt_file
        return [(0, 0, lambda: stream, "stream")]
    units = []
    for i in range(reader.num_record_batches):
        try:
            batch = reader.get_batch(i)
            units.append((i, batch.num_rows, (lambda b=batch: [b]), "batch"))
        except (pa.ArrowException, OSError) as e:
            units.append((i, 0, (lambda e=e: _raise(e)), "batch"))
    return units


def _raise(e):
    raise e


def _batch_rows(batch: pa.RecordBatch, row0: int, name: str, source: str, text_field: str, id_field: str, max_doc_bytes: int):
    names = batch.schema.names
    cols = {}
    for field in (id_field, "url"):
        if field in names:
            cols[field] = _column(batch.column(names.index(field)))
    text_col = batch.column(names.index(text_field)) if text_field in names else None
    texts, sizes = _texts(text_col, batch.num_rows)
    for k in range(batch.num_rows):
        obj = {f: c[k] for f, c in cols.items()}
        fallback = f"{name}:{row0 + k + 1}"
        t = texts[k]
        if isinstance(t, bytes):  # not valid UTF-8
            own = obj.get(id_field)
            yield ("drop", row(str(own) if own not in (None, "") else fallback, t[:10000].decode("utf-8", "replace"), source), "invalid_utf8")
            continue
        obj[text_field] = t
        yield table_row(obj, fallback, source, text_field, id_field, sizes[k], max_doc_bytes)


def _column(col: pa.Array) -> list:
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        return [None if b is None else b.decode("utf-8", "replace") for b in col.cast(pa.large_binary()).to_pylist()]
    try:
        return col.to_pylist()
    except (pa.ArrowException, ValueError, UnicodeDecodeError):
        return [None] * len(col)


def _texts(col, n: int) -> tuple[list, list]:
    """Texts as str (bytes where not valid UTF-8, None where not text) and their sizes in bytes."""
    if col is None:
        return [None] * n, [0] * n
    t = col.type
    if pa.types.is_dictionary(t):
        col, t = col.dictionary_decode(), t.value_type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        raw = col.cast(pa.large_binary()).to_pylist()
        texts = []
        for b in raw:
            if b is None:
                texts.append(None)
                continue
            try:
                texts.append(b.decode("utf-8"))
            except UnicodeDecodeError:
                texts.append(b)
        return texts, [0 if b is None else len(b) for b in raw]
    return [None] * n, [0] * n
