"""JSONL (plain, .gz, .zst, .bz2, .xz): one JSON object per line; a line ends at ``\n``, ``\r\n`` or a lone ``\r``
(:mod:`curate.readers.lines`).

Ids: the record's own ``id_field`` when it has one, else ``<file name>:<line>`` (line numbers from 1) for a
plain file and for the first gzip member / zstd frame of a compressed file, and ``<file name>@<offset>:<line>``
for a line that starts in a later member (``offset``: the member's byte offset in the file, ``line``: counted
inside that member). A single-member ``.jsonl.gz`` therefore keeps plain line numbers. ``<file name>`` is the
file's base name, or the run's longer name for it when two inputs share a base name
(:func:`curate.readers.id_prefixes`), written as a JSON string when it holds ``@`` or ``:``
(:func:`curate.readers.safe_id_name`).

Size: ``max_doc_bytes`` bounds the document's text, counted in UTF-8 (as for a Parquet/Arrow row), not the line,
which can be up to 6 times longer (``json.dumps`` writes each non-ASCII character as a ``\\uXXXX`` escape by
default: 6 bytes for 2 or 3 in UTF-8, and any character may be written so). A line is read and parsed up to
:func:`max_line_bytes` (``6 * max_doc_bytes`` plus 1 MiB for the other fields); a longer line is ``too_large``
whatever it holds, set aside unparsed (its first 10,000 bytes kept, its id read from them when they name one)
without ever being held whole.

Splits (each owns the lines that *start* in it):
- plain: byte ranges ``[start, stop)`` cut at line starts. Planning reads the file once to count line ends
  (for the line numbers), at disk speed, without parsing. (A split may also start mid-line: it then
  skips to the next line start, which the split before reads to.)
- compressed with many members (``cat a.gz b.gz``, bgzip, pzstd, pbzip2, ``cat a.xz b.xz``): ranges of members ``[start, stop)``. The
  boundary between two splits is the first newline at or after the start of the cut member, so a line that
  runs across members is read once. Planning seeks to each cut point and test-decodes a few KiB there.
- one gzip stream (``gzip file.jsonl``), when the plan is given an ``index_dir``: planning decompresses the
  file once and writes a seek index there (:mod:`curate.readers.gzindex`); the splits are ranges of the
  *decompressed* stream about ``target_bytes`` long, cut at line starts, each with the count of lines
  before it, and each reads only its own range (plus at most one seek-point spacing).
- otherwise compressed as one stream (zstd, bz2, xz; gzip without an index or whose index cannot be built: damaged,
  truncated): up to ``MAX_STREAM_SPLITS[kind]`` ranges of the *decompressed* stream; every split decompresses
  from the start and skips (counting newlines only) up to its range, so planning costs nothing but the total
  decompression grows to about ``(n + 1) / 2`` times the file's. zstd decompresses far faster than the map
  stages run, so it gets 32 splits; gzip (this path is only its fallback), bz2 and xz get 8
  (``benchmarks/read_splits.py`` prints the costs; figures in docs/benchmarks.md).

A split with an index that has gone missing (removed with the run's plans) is read the second way, with the
same records and ids.

Text encoding: UTF-8 (a byte order mark on a line is dropped). A file whose decompressed bytes begin with a UTF-16
or UTF-32 byte order mark, or that is UTF-16 by its NULs (:func:`curate.readers.text.sniff`: every other byte of
its ASCII), as PowerShell's ``>`` and Windows editors write JSONL, is read as that encoding (RFC 7159 allowed JSON
text in UTF-16 and UTF-32): planned as one split, its bytes decoded to UTF-8 as they stream (an invalid sequence
becomes U+FFFD), so its lines, ids and counts are those of the same file in UTF-8; the read step counts it in
``jsonl_utf16_files`` (``jsonl_utf32_files``).
"""
from __future__ import annotations

import codecs
import json
import math
import os
import re

from curate import json_files
from curate.readers import gzindex, streams
from curate.readers.lines import PREFIX, count_ends, split_lines
from curate.readers.text import check_text, row, sniff, utf8_size

MAX_STREAM_SPLITS = {"gzip": 8, "zstd": 32, "bz2": 8, "xz": 8}
LINE_FACTOR = 6  # the most bytes a JSON string spends on one byte of its UTF-8 text ("\u0041" for "A")
LINE_SLACK = 1 << 20  # room for the other fields of a line beside its text
_LINE_END = re.compile(rb"\r\n|\r|\n")


def plan(path: str, target_bytes: int, index_path: str | None = None) -> list[dict]:
    """The splits of one JSONL file; ``index_path``: where a single-stream gzip may write its seek index."""
    size = os.path.getsize(path)
    kind = streams.sniff(path) if size else "plain"
    base = {"path": path, "format": "jsonl"}
    small = size <= target_bytes
    if small and not (kind == "gzip" and index_path is not None and size * 4 > target_bytes):
        return [{**base, "start": 0, "stop": None}]  # (a .gz may still hold several splits' worth of text)
    if unicode_form(path, kind):  # UTF-16/UTF-32: line ends are not single bytes there; read it whole
        return [{**base, "start": 0, "stop": None}]
    if kind == "plain":
        return _plan_plain(path, size, target_bytes, base)
    cuts = []
    with open(path, "rb") as f:
        pos = target_bytes
        while pos < size:
            c = streams.next_member(f, pos, kind)
            if c is None:
                break
            cuts.append(c)
            pos = max(c + 1, pos + target_bytes)
    if cuts:
        bounds = [0] + cuts + [None]
        return [{**base, "start": a, "stop": b} for a, b in zip(bounds, bounds[1:])]
    if kind == "gzip" and index_path is not None:
        ranges = gzindex.build(path, index_path, target_bytes)
        if ranges is not None and len(ranges) == 1:
            os.unlink(index_path)  # one split: read from the start, no index needed
        if (ranges is not None and len(ranges) == 1) or (ranges is None and small):
            return [{**base, "start": 0, "stop": None}]
        if ranges is not None:
            return [{**base, "start": 0, "stop": None, "dstart": a, "dstop": b, "newlines": n, "index": index_path}
                    for a, b, n in ranges]
    estimate = _estimate_decompressed(path, kind, size)
    n = max(1, min(MAX_STREAM_SPLITS[kind], math.ceil(estimate / target_bytes)))
    bounds = [round(k * estimate / n) for k in range(n)] + [None]
    return [{**base, "start": 0, "stop": None, "dstart": a, "dstop": b} for a, b in zip(bounds, bounds[1:])]


def _plan_plain(path: str, size: int, target: int, base: dict) -> list[dict]:
    """Cuts at line starts about ``target`` bytes apart, with the count of line ends before each (one read)."""
    starts = [0]
    with open(path, "rb") as f:
        a = target
        while a < size:
            start = _line_start(f, a)
            if start is None or start >= size:
                break
            starts.append(start)
            a = start + target
        newlines, pos, n, cr = [0], 0, 0, False
        f.seek(0)
        for start in starts[1:]:  # line ends before start, less the one the reader starts on (at start - 1)
            while pos < start:
                chunk = f.read(min(streams.CHUNK, start - pos))
                if not chunk:
                    break
                n += count_ends(chunk, cr)
                cr = chunk.endswith(b"\r")
                pos += len(chunk)
            newlines.append(n - 1)
    stops = starts[1:] + [None]
    return [{**base, "start": a, "stop": b, "newlines": n} for a, b, n in zip(starts, stops, newlines)]


def _line_start(f, at: int) -> int | None:
    """The first line start at or after ``at`` (just past the first line end found from ``at - 1`` on)."""
    pos = at - 1
    while True:
        f.seek(pos)
        chunk = f.read(streams.CHUNK + 1)  # (one byte more: a "\n" after a "\r" at the end)
        if not chunk:
            return None
        m = _LINE_END.search(chunk)
        if m and m.start() < streams.CHUNK:
            return pos + m.end()
        pos += streams.CHUNK


_UTF32_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)
_SNIFF_BYTES = 1024


def unicode_form(path: str, kind: str) -> str | None:
    """``"utf-32"`` / ``"utf-16"`` (a byte order mark) or ``"utf-16-le"`` / ``"utf-16-be"`` (no mark, its NULs)
    when the file's decompressed bytes begin so, else None (UTF-8, or anything else: read as UTF-8)."""
    try:
        with open(path, "rb") as f:
            head = f.read(_SNIFF_BYTES if kind == "plain" else 64 << 10)
        if kind != "plain":
            while kind == "zstd" and streams._is_skippable(head) and len(head) >= 8:
                head = head[8 + int.from_bytes(head[4:8], "little"):]
            head, _ = streams._decode_prefix(head, kind, _SNIFF_BYTES)
    except Exception:  # (damage is the reader's to report)
        return None
    if head.startswith(_UTF32_BOMS):
        return "utf-32"
    form = sniff(head[:_SNIFF_BYTES])
    return form if form in ("utf-16", "utf-16-le", "utf-16-be") else None


def _as_utf8(evts, form: str):
    """The events of a UTF-16/UTF-32 stream with its data decoded to UTF-8 (a code unit cut between two chunks is
    carried over; after damage decoding starts afresh; invalid sequences become U+FFFD)."""
    new = codecs.getincrementaldecoder(form)
    dec, member = new(errors="replace"), 0
    for ev in evts:
        if ev[0] == "data":
            member = ev[1]
            out = dec.decode(ev[2])
            if out:
                yield ("data", member, out.encode("utf-8"))
            continue
        tail = dec.decode(b"", final=True)
        if tail:
            yield ("data", member, tail.encode("utf-8"))
        dec = new(errors="replace")
        yield ev
    tail = dec.decode(b"", final=True)
    if tail:
        yield ("data", member, tail.encode("utf-8"))


def _estimate_decompressed(path: str, kind: str, size: int) -> int:
    with open(path, "rb") as f:
        head = f.read(1 << 20)
    while kind == "zstd" and streams._is_skippable(head) and len(head) >= 8:
        head = head[8 + int.from_bytes(head[4:8], "little"):]
    try:
        out, _ = streams._decode_prefix(head, kind, 64 << 20)
    except Exception:
        return size
    return int(len(out) * size / max(len(head), 1))


def read(split: dict, name: str, text_field: str, id_field: str, max_doc_bytes: int):
    path, source = split["path"], split["path"]
    size = os.path.getsize(path)
    kind = streams.sniff(path) if size else "plain"
    start, stop = split.get("start", 0), split.get("stop")
    dstart, dstop = split.get("dstart", 0), split.get("dstop")
    max_line = max_line_bytes(max_doc_bytes)  # longer lines are too large whatever they hold; not parsed
    form = unicode_form(path, kind) if size and not (start or dstart or split.get("index")) else None
    if form:  # UTF-16/UTF-32, one split (``plan``): its bytes decoded to UTF-8 as they stream
        yield ("count", "jsonl_utf32_files" if form == "utf-32" else "jsonl_utf16_files", 1)
        lines = split_lines(_as_utf8(streams.events(path, kind, 0), form), max_line=max_line)
    elif kind == "plain":
        begin = max(start - 1, 0)
        lines = split_lines(streams.events(path, "plain", begin), max_line=max_line, j0=split.get("newlines", 0), base=begin)
    elif kind == "gzip" and split.get("index") and (g := gzindex.open_at(path, split["index"], dstart)) is not None:
        data = (("data", 0, b) for b in gzindex.read_range(g, dstart, dstop))
        lines = split_lines(data, max_line=max_line, j0=split["newlines"], base=dstart)
    else:
        lines = split_lines(streams.events(path, kind, start), max_line=max_line, skip_until=dstart)
    skip_first = start > 0
    owned = _in_range(kind, start, stop, dstart, dstop)
    for ev in lines:
        if ev[0] == "line":
            _, member, j, dpos, raw, length = ev
            if skip_first:
                skip_first = False
                continue
            if kind == "plain":
                if stop is not None and dpos >= stop:
                    return
            elif stop is not None and member >= stop:
                # the line that begins the cut member still belongs here (a first line of a later member does
                # not: the cut member held no line end, and the next split reads that line)
                if member == stop and j == 0 and raw.strip():
                    yield _record(raw, length, _line_id(name, member, j), source, text_field, id_field, max_doc_bytes)
                return
            elif dstop is not None and dpos >= dstop:
                return
            if not raw.strip():
                continue
            yield _record(raw, length, _line_id(name, member, j), source, text_field, id_field, max_doc_bytes)
        elif ev[0] == "damage":
            _, offset, end, message, dpos = ev
            if owned(offset, dpos):
                reason = "corrupt_" + kind
                yield ("drop", row(f"{name}@{offset}:damaged", f"bytes {offset}-{end} unreadable: {message}", source), reason)
        else:  # truncated
            _, member, message, dpos, line_start, prefix = ev
            if owned(member, dpos):
                text = prefix.decode("utf-8", "replace") or message
                rid = _line_id(name, *line_start[:2]) if line_start else f"{name}@{member}:truncated"
                yield ("drop", row(rid, text, source), "truncated_" + kind)


def max_line_bytes(max_doc_bytes: int) -> int:
    """The longest line read and parsed: one whose text, every character escaped, is ``max_doc_bytes`` in
    UTF-8, with ``LINE_SLACK`` for its other fields. A longer line's text cannot fit within ``max_doc_bytes``
    unless its other fields are larger still; it is set aside as ``too_large`` unparsed."""
    return LINE_FACTOR * max_doc_bytes + LINE_SLACK


def _in_range(kind, start, stop, dstart, dstop):
    def owned(member: int, dpos: int) -> bool:
        if dstart or dstop is not None:
            return dpos >= dstart and (dstop is None or dpos < dstop)
        return member >= start and (stop is None or member < stop)
    return owned


def _line_id(name: str, member: int, j: int) -> str:
    return f"{name}:{j + 1}" if member == 0 else f"{name}@{member}:{j + 1}"


def _record(raw: bytes, length: int, fallback_id: str, source: str, text_field: str, id_field: str, max_doc_bytes: int) -> tuple:
    if length > len(raw):  # far longer than max_doc_bytes: not parsed, a prefix is kept
        return ("drop", row(_sniff_id(raw, id_field) or fallback_id, raw[:PREFIX].decode("utf-8", "replace"), source), "too_large")
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        return ("drop", row(fallback_id, raw[:PREFIX].decode("utf-8", "replace"), source), "invalid_utf8")
    try:
        obj = json_files.loads(line.lstrip("\ufeff"))  # (a number of 5,000 digits: its digits)
    except (ValueError, RecursionError):
        return ("drop", row(fallback_id, line[:PREFIX], source), "malformed_record")
    if not isinstance(obj, dict):
        return ("drop", row(fallback_id, line[:PREFIX], source), "malformed_record")
    # the limit is on the text, not the line (escapes, other fields); a line of at most max_doc_bytes holds a
    # text of at most as many bytes (a JSON escape is never shorter than what it stands for)
    size = len(raw) if len(raw) <= max_doc_bytes else None
    return table_row(obj, fallback_id, source, text_field, id_field, size, max_doc_bytes)


def _sniff_id(raw: bytes, id_field: str) -> str | None:
    """The id of a line too long to parse, when its first KiB names one (``"id": "..."`` or a number)."""
    m = re.search(rb'"' + re.escape(id_field.encode()) + rb'"\s*:\s*("(?:[^"\\]|\\.){0,400}"|-?\d{1,30})', raw[:PREFIX])
    if not m:
        return None
    try:
        return as_str(json.loads(m.group(1)))
    except ValueError:
        return None


def table_row(obj: dict, fallback_id: str, source: str, text_field: str, id_field: str, raw_len: int | None,
              max_doc_bytes: int) -> tuple:
    """A JSON object or table row to a document (shared with the Parquet/Arrow reader). ``raw_len``: the text's
    size in UTF-8 bytes, or an upper bound of it, that is checked against ``max_doc_bytes``; None: measured here."""
    own_id = obj.get(id_field)
    id_ = as_str(own_id) if own_id not in (None, "") else fallback_id
    url = obj.get("url")
    url = "" if url is None else as_str(url)
    text = obj.get(text_field)
    if not isinstance(text, str):
        why = ("" if text is None else as_str(text)[:PREFIX]) if text_field in obj else \
            no_text_field(text_field, list(obj), "field", "record")
        return ("drop", row(id_, why, source, url), "missing_text")
    if raw_len is None:  # (more characters than max_doc_bytes: more bytes too, nothing to encode)
        raw_len = len(text) if len(text) > max_doc_bytes else utf8_size(text)
    return check_text(row(id_, text, source, url), raw_len, max_doc_bytes)


NAMES_SHOWN = 20  # the fields (columns) a missing_text row's note lists


def no_text_field(text_field: str, names: list, field: str = "field", where: str = "record") -> str:
    """The text of a ``missing_text`` row whose record (file) has no field (column) ``text_field``: the names it
    has, and the setting that chooses one (``text_field`` of the source). Nothing is guessed: a ``Text`` or
    ``content`` column is named, not read."""
    shown = [json.dumps(str(n)[:100], ensure_ascii=False) for n in names[:NAMES_SHOWN]]
    more = f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else ""
    has = f"its {field}s: {', '.join(shown)}{more}" if shown else f"it has no {field}s"
    return (f"no {field} {json.dumps(text_field, ensure_ascii=False)} in this {where}; {has}. The source's "
            f"text_field names the {field} that holds the text (text_field = \"...\" under [[sources]])")


def as_str(v) -> str:
    """A field's value as text: strings as they are, bytes decoded, lists and objects as JSON."""
    if isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if not isinstance(v, (list, dict)):
        return str(v)
    try:
        return json.dumps(v, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):
        return str(v)
