"""Arrow text columns of any string-like type, read as text: the one place that knows those types.

String-like: ``string``, ``large_string``, ``string_view`` (Polars' default), ``binary``, ``large_binary`` and
``binary_view`` (bytes that are not UTF-8 are reported row by row, never raised), a dictionary of any of them
(Polars' Categorical, Parquet dictionary pages) and a run-end encoded column of them. UTF-8 is checked for the
string types too: an Arrow IPC reader does not check it, so a ``string`` column can hold any bytes.

- :func:`texts`: Python ``str`` per row, memory bounded (the Parquet/Arrow reader, :mod:`curate.readers.tables`);
- :func:`string_array`: a plain ``string`` / ``large_string`` Arrow array, the rows that are not UTF-8 null and
  listed (whole shards: the tokenizer);
- :func:`check`, :func:`lengths`, :func:`run_ends_as_dictionary`: the pieces both are made of.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

PREFIX = 10000  # bytes of a too-large text that are decoded (the row keeps a prefix only)
PIECE_ROWS = 4096  # rows decoded to Python at once where a column holds bytes that are not UTF-8

_AS_BYTES = {pa.string(): pa.binary(), pa.large_string(): pa.large_binary(), pa.string_view(): pa.binary_view()}


class NotText(ValueError):
    """A column whose type is not string-like (numbers, lists, structs ...); ``type`` names it."""

    def __init__(self, t):
        super().__init__(f"type {t} is not text: give a column of strings (string, large_string, string_view) or "
                         "UTF-8 bytes (binary, large_binary, binary_view), plain, dictionary or run-end encoded")
        self.type = t


def is_view(t) -> bool:
    return pa.types.is_string_view(t) or pa.types.is_binary_view(t)


def is_offset_text(t) -> bool:
    return (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t))


def is_text(t) -> bool:
    """A plain string-like type (not a dictionary or run-end encoding of one)."""
    return is_view(t) or is_offset_text(t)


def plain_type(t):
    """The type :func:`string_array` gives a column of type ``t``: ``string`` for string and binary,
    ``large_string`` for the others; ``NotText`` where ``t`` is not string-like."""
    if pa.types.is_dictionary(t) or pa.types.is_run_end_encoded(t):
        return plain_type(t.value_type)
    if pa.types.is_string(t) or pa.types.is_binary(t):
        return pa.string()
    if is_text(t):
        return pa.large_string()
    raise NotText(t)


def run_ends_as_dictionary(col):
    """A run-end encoded column as the dictionary array it amounts to (row -> its run's value), never expanded:
    one value repeated over a million rows stays one value (``pc.run_end_decode`` would copy it per row).
    Raises ``ArrowInvalid`` where the run ends do not hold together. Other columns are returned as they are."""
    if not pa.types.is_run_end_encoded(col.type):
        return col
    col.validate(full=True)
    ends = col.run_ends.to_numpy(zero_copy_only=False).astype(np.int64)
    idx = np.searchsorted(ends, np.arange(col.offset, col.offset + len(col), dtype=np.int64), side="right")
    values = run_ends_as_dictionary(col.values)
    return pa.DictionaryArray.from_arrays(pa.array(idx, pa.int64()), values)


def check(col: pa.Array) -> None:
    """Raise ``ArrowInvalid`` where a column's buffers do not hold together (offsets or views past their data,
    a dictionary's indices of the wrong size). Arrow IPC readers map a file's buffers without checking them:
    a damaged batch's offsets would take pyarrow outside its memory (a segmentation fault, the worker lost).
    Text is checked as bytes: UTF-8 is decided row by row."""
    t = col.type
    if pa.types.is_dictionary(t):
        col.indices.validate(full=True)  # (an index past the dictionary is no text: see lengths, texts)
        check(col.dictionary)
        return
    as_bytes = _AS_BYTES.get(t)
    (col.view(as_bytes) if as_bytes is not None else col).validate(full=True)


def lengths(col) -> np.ndarray | None:
    """Bytes of each value of a string-like column (0 for nulls), without copying its data; None when not text."""
    t = col.type
    if pa.types.is_dictionary(t):
        values = lengths(col.dictionary)
        if values is None:
            return None
        idx = col.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        ok = (idx >= 0) & (idx < len(values))  # an index past the dictionary (a damaged file): no text
        return np.where(ok, values[np.where(ok, idx, 0)] if len(values) else 0, 0).astype(np.int64)
    if is_view(t):
        views = col.buffers()[1]
        if views is None or len(col) == 0:
            return np.zeros(len(col), np.int64)
        out = np.frombuffer(views, dtype=np.int32).reshape(-1, 4)[col.offset:col.offset + len(col), 0].astype(np.int64)
        if col.null_count:
            out[col.is_null().to_numpy(zero_copy_only=False)] = 0
        return out
    if is_offset_text(t):
        return pc.binary_length(col).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    return None


def texts(col, n: int, max_bytes: int) -> tuple[list, list]:
    """Texts of a column (``None`` for a missing one, of ``n`` rows) as str (bytes where not valid UTF-8, None
    where null or not text) and their sizes in bytes. A dictionary's values are decoded once each (rows sharing a
    value share one str); a text over ``max_bytes`` is decoded as a prefix only (of ``max(max_bytes,
    PREFIX) + 1`` bytes: the caller sets it aside as too large). Run-end encoded columns: pass them through
    :func:`run_ends_as_dictionary` first."""
    if col is None:
        return [None] * n, [0] * n
    t = col.type
    if pa.types.is_dictionary(t):
        if not is_text(t.value_type):
            return [None] * n, [0] * n
        size = len(col.dictionary)
        idx = [i if i is not None and 0 <= i < size else None for i in col.indices.to_pylist()]
        used = sorted({i for i in idx if i is not None})  # only the values these rows use are decoded
        decoded = {i: texts(col.dictionary.slice(i, 1), 1, max_bytes) for i in used}  # (no take for views)
        return ([None if i is None else decoded[i][0][0] for i in idx],
                [0 if i is None else decoded[i][1][0] for i in idx])
    if not is_text(t):
        return [None] * n, [0] * n
    sizes = lengths(col)
    if sizes is not None and len(sizes) and int(sizes.max()) > max_bytes:
        col = pc.binary_slice(col.cast(pa.large_binary()), 0, max(max_bytes, PREFIX) + 1)
    raw = col.cast(pa.large_binary()).to_pylist()
    out = []
    for b in raw:
        if b is None:
            out.append(None)
            continue
        try:
            out.append(b.decode("utf-8"))
        except UnicodeDecodeError:
            if len(b) > max_bytes:  # a prefix cut inside a character: still text, too large
                out.append(b[:PREFIX].decode("utf-8", "replace"))
            else:
                out.append(b)
    return out, sizes.tolist() if sizes is not None else [0 if b is None else len(b) for b in raw]


def string_array(column) -> tuple[pa.Array | pa.ChunkedArray, list[int]]:
    """``column`` (an Array or ChunkedArray of a string-like type) as a plain array of type
    :func:`plain_type`, and the rows (positions in ``column``) whose bytes are not UTF-8: null in it. Valid text
    is not copied (string, binary, large_string, large_binary); views are copied once, a dictionary or run-end
    encoded column is expanded (each value checked once). ``NotText`` for any other type."""
    target = plain_type(column.type)
    if isinstance(column, pa.ChunkedArray):
        out, bad, at = [], [], 0
        for chunk in column.chunks:
            arr, rows = string_array(chunk)
            out.append(arr)
            bad += [at + r for r in rows]
            at += len(chunk)
        return pa.chunked_array(out, type=target), bad
    column = run_ends_as_dictionary(column)
    if pa.types.is_dictionary(column.type):
        values, bad_values = string_array(column.dictionary)
        out = values.take(column.indices)
        if not bad_values:
            return out, []
        idx = column.indices.fill_null(-1).to_numpy(zero_copy_only=False)
        return out, np.flatnonzero(np.isin(idx, bad_values)).tolist()
    as_bytes = _AS_BYTES.get(column.type)
    raw = column.view(as_bytes) if as_bytes is not None else column
    try:
        return raw.cast(target), []  # all valid UTF-8 (the cast checks)
    except pa.ArrowInvalid:
        pass
    pieces, bad = [], []
    for a in range(0, len(raw), PIECE_ROWS):
        piece = raw.slice(a, PIECE_ROWS)
        try:
            pieces.append(piece.cast(target))
            continue
        except pa.ArrowInvalid:
            pass
        decoded = []
        for k, b in enumerate(piece.to_pylist()):
            try:
                decoded.append(None if b is None else b.decode("utf-8"))
            except UnicodeDecodeError:
                decoded.append(None)
                bad.append(a + k)
        pieces.append(pa.array(decoded, target))
    return pa.concat_arrays(pieces), bad
