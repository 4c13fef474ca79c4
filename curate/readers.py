"""Readers: one generator per input format, each yielding documents and set-aside records.

Every reader yields ``("doc", row)`` for a document and ``("drop", row, reason)`` for input that
cannot become one (a corrupt record, invalid UTF-8, binary junk, an empty or oversized document);
``("skip", kind)`` counts records that are not documents at all (WARC request/revisit/metadata
records, non-HTML responses). A reader never raises on bad input: a broken stream ends that
file's documents with one ``drop`` row that says why.

Formats: ``warc`` (``.warc``, ``.warc.gz``; ARC too, through warcio), ``html`` (one page per file),
``jsonl`` (``.jsonl``, ``.json``, ``.gz``, ``.zst``), ``parquet``, ``arrow`` (IPC / Feather).
"""
from __future__ import annotations

import gzip
import io
import json
import os
import re
import zlib
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from curate.schema import HTML, PLAIN

FORMATS = ("warc", "html", "jsonl", "parquet", "arrow")
DEFAULT_MAX_DOC_BYTES = 10 * 1024 * 1024  # a 10 MB document is far beyond any real web page's text

_SUFFIXES = [
    (".warc.gz", "warc"), (".warc", "warc"), (".arc.gz", "warc"), (".arc", "warc"),
    (".jsonl.gz", "jsonl"), (".jsonl.zst", "jsonl"), (".json.gz", "jsonl"), (".jsonl", "jsonl"), (".json", "jsonl"),
    (".parquet", "parquet"), (".arrow", "arrow"), (".feather", "arrow"), (".ipc", "arrow"),
    (".html.gz", "html"), (".html", "html"), (".htm", "html"),
]
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_CHARSET_RE = re.compile(rb"charset\s*=\s*[\"']?([A-Za-z0-9_.:-]+)", re.I)


def infer_format(path: str) -> str | None:
    lower = path.lower()
    for suffix, fmt in _SUFFIXES:
        if lower.endswith(suffix):
            return fmt
    return None


def read_file(path: str, fmt: str, *, text_field: str = "text", id_field: str = "id",
              max_doc_bytes: int = DEFAULT_MAX_DOC_BYTES) -> Iterator[tuple]:
    """Yield ``("doc", row)``, ``("drop", row, reason)`` or ``("skip", kind)`` for one input file."""
    source = path
    name = os.path.basename(path)
    if fmt == "warc":
        yield from _read_warc(path, source, max_doc_bytes)
    elif fmt == "html":
        yield from _read_html_file(path, source, name, max_doc_bytes)
    elif fmt == "jsonl":
        yield from _read_jsonl(path, source, name, text_field, id_field, max_doc_bytes)
    elif fmt in ("parquet", "arrow"):
        yield from _read_table(path, fmt, source, name, text_field, id_field, max_doc_bytes)
    else:
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")


# --- splits: one large input file becomes several read tasks -------------------------------------
# The runner calls ``plan_splits`` once per input file (in the driver or a task) and runs one read task per
# split with ``read_split``. A split is a small JSON-serialisable dict: ``{"path", "format", ...}`` plus
# format-specific keys (byte range, record offsets, row groups, record batches). Every document of the file
# is yielded by exactly one split, with the same id whatever the split size.

DEFAULT_SPLIT_BYTES = 64 * 1024 * 1024


def plan_splits(path: str, fmt: str, *, target_bytes: int = DEFAULT_SPLIT_BYTES) -> list[dict]:
    """The read tasks of one input file: a list of splits, in file order (today: the whole file)."""
    return [{"path": path, "format": fmt}]


def read_split(split: dict, *, text_field: str = "text", id_field: str = "id",
               max_doc_bytes: int = DEFAULT_MAX_DOC_BYTES) -> Iterator[tuple]:
    """Yield the same tuples as :func:`read_file`, for one split from :func:`plan_splits`."""
    yield from read_file(split["path"], split["format"], text_field=text_field, id_field=id_field,
                         max_doc_bytes=max_doc_bytes)


def _row(id_: str, text: str, source: str, url: str = "", content_type: str = PLAIN) -> dict:
    return {"id": id_, "text": text, "source": source, "url": url, "content_type": content_type}


def _check_text(row: dict, raw_len: int, max_doc_bytes: int) -> tuple:
    if raw_len > max_doc_bytes:
        return ("drop", row, "too_large")
    text = row["text"]
    if not text.strip():
        return ("drop", row, "empty_document")
    if "\x00" in text[:65536]:
        row["text"] = text.replace("\x00", "")
        return ("drop", row, "binary_content")
    return ("doc", row)


# --- WARC / ARC ---------------------------------------------------------------------------------

def _read_warc(path: str, source: str, max_doc_bytes: int) -> Iterator[tuple]:
    from warcio.archiveiterator import ArchiveIterator

    position = 0
    try:
        with open(path, "rb") as f:
            for record in ArchiveIterator(f, arc2warc=True):
                position += 1
                rtype = record.rec_type
                if rtype != "response":
                    yield ("skip", rtype)
                    continue
                url = record.rec_headers.get_header("WARC-Target-URI") or ""
                rec_id = (record.rec_headers.get_header("WARC-Record-ID") or "").strip("<>")
                rec_id = rec_id.removeprefix("urn:uuid:") or f"{os.path.basename(path)}:{position}"
                http = record.http_headers
                ctype = (http.get_header("Content-Type") if http else None) or ""
                mime = ctype.split(";")[0].strip().lower()
                if mime and mime not in _HTML_TYPES and mime != "text/plain":
                    yield ("skip", f"response:{mime}")
                    continue
                try:
                    body = record.content_stream().read()
                except Exception:  # chunked-encoding errors, truncated payloads
                    yield ("drop", _row(rec_id, "", source, url, HTML), "malformed_record")
                    continue
                if getattr(record.raw_stream, "limit", 0) > 0:  # the stream ended inside this record
                    raise EOFError("compressed stream ended inside a record")
                if b"\x00" in body[:65536] and body.count(b"\x00") > len(body[:65536]) // 100:
                    yield ("drop", _row(rec_id, "", source, url, HTML), "binary_content")
                    continue
                if mime == "text/plain":
                    text, ok = _decode(body, ctype.encode("latin-1", "replace"), html=False)
                    content_type = PLAIN
                else:
                    text, ok = _decode(body, ctype.encode("latin-1", "replace"), html=True)
                    content_type = HTML
                row = _row(rec_id, text, source, url, content_type)
                if not ok:
                    yield ("drop", row, "invalid_utf8")
                    continue
                yield _check_text(row, len(body), max_doc_bytes)
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        reason = "truncated_gzip" if path.endswith(".gz") else "malformed_record"
        yield ("drop", _row(f"{os.path.basename(path)}:error@{position}", str(e)[:500], source, ""), reason)
    except Exception as e:  # warcio's ArchiveLoadFailed and friends: the rest of the file is unreadable
        reason = "truncated_gzip" if "gzip" in str(e).lower() else "malformed_record"
        yield ("drop", _row(f"{os.path.basename(path)}:error@{position}", str(e)[:500], source, ""), reason)


def _decode(body: bytes, content_type: bytes, html: bool) -> tuple[str, bool]:
    """Bytes to str: the HTTP charset, then the HTML meta charset, then detection. ``ok`` is False
    when no encoding decodes the bytes cleanly (the text then holds a best-effort decode)."""
    candidates = []
    m = _CHARSET_RE.search(content_type)
    if m:
        candidates.append(m.group(1).decode("ascii", "ignore"))
    if html:
        m = _CHARSET_RE.search(body[:4096])
        if m:
            candidates.append(m.group(1).decode("ascii", "ignore"))
    candidates.append("utf-8")
    for enc in candidates:
        try:
            return body.decode(_normalize_encoding(enc)), True
        except (LookupError, UnicodeDecodeError):
            continue
    from charset_normalizer import from_bytes

    best = from_bytes(body[:200_000]).best()
    if best is not None:
        try:
            return body.decode(best.encoding), True
        except (LookupError, UnicodeDecodeError):
            pass
    return body.decode("utf-8", errors="replace"), False


def _normalize_encoding(enc: str) -> str:
    enc = enc.lower()
    # WHATWG: pages labelled latin-1/iso-8859-1/ascii are decoded as windows-1252.
    return "cp1252" if enc in ("iso-8859-1", "latin-1", "latin1", "us-ascii", "ascii") else enc


# --- HTML files ---------------------------------------------------------------------------------

def _read_html_file(path: str, source: str, name: str, max_doc_bytes: int) -> Iterator[tuple]:
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            body = f.read()
    except (OSError, EOFError, zlib.error):
        yield ("drop", _row(name, "", source), "truncated_gzip" if path.endswith(".gz") else "malformed_record")
        return
    text, ok = _decode(body, b"", html=True)
    row = _row(name, text, source, "", HTML)
    yield _check_text(row, len(body), max_doc_bytes) if ok else ("drop", row, "invalid_utf8")


# --- JSONL --------------------------------------------------------------------------------------

def _open_lines(path: str):
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    if path.endswith(".zst"):
        import zstandard

        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), read_across_frames=True))
    return open(path, "rb")


def _read_jsonl(path: str, source: str, name: str, text_field: str, id_field: str, max_doc_bytes: int) -> Iterator[tuple]:
    line_no = 0
    try:
        with _open_lines(path) as f:
            for line_no, raw in enumerate(f, start=1):
                if not raw.strip():
                    continue
                fallback_id = f"{name}:{line_no}"
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    yield ("drop", _row(fallback_id, raw.decode("utf-8", "replace"), source), "invalid_utf8")
                    continue
                try:
                    obj = json.loads(line)
                except ValueError:
                    yield ("drop", _row(fallback_id, line[:10000], source), "malformed_record")
                    continue
                if not isinstance(obj, dict):
                    yield ("drop", _row(fallback_id, line[:10000], source), "malformed_record")
                    continue
                yield _table_row(obj, fallback_id, source, text_field, id_field, len(raw), max_doc_bytes)
    except (EOFError, OSError, zlib.error) as e:
        yield ("drop", _row(f"{name}:error@{line_no + 1}", str(e)[:500], source), "truncated_gzip")
    except Exception as e:  # zstd frame errors and the like
        yield ("drop", _row(f"{name}:error@{line_no + 1}", str(e)[:500], source), "malformed_record")


def _table_row(obj: dict, fallback_id: str, source: str, text_field: str, id_field: str, raw_len: int, max_doc_bytes: int) -> tuple:
    own_id = obj.get(id_field)
    id_ = str(own_id) if own_id not in (None, "") else fallback_id
    url = obj.get("url") or ""
    text = obj.get(text_field)
    if not isinstance(text, str):
        return ("drop", _row(id_, "" if text is None else str(text)[:10000], source, str(url)), "missing_text")
    return _check_text(_row(id_, text, source, str(url)), raw_len, max_doc_bytes)


# --- Parquet / Arrow ----------------------------------------------------------------------------

def _read_table(path: str, fmt: str, source: str, name: str, text_field: str, id_field: str, max_doc_bytes: int) -> Iterator[tuple]:
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path) if fmt == "parquet" else feather.read_table(path)
    except (pa.ArrowException, OSError) as e:
        yield ("drop", _row(f"{name}:error", str(e)[:500], source), "malformed_record")
        return
    if text_field not in table.column_names:
        yield ("drop", _row(f"{name}:error", f"no column {text_field!r}; columns: {table.column_names}", source), "missing_text")
        return
    position = 0
    for batch in table.to_batches(max_chunksize=4096):
        for obj in batch.to_pylist():
            position += 1
            text = obj.get(text_field)
            size = len(text.encode("utf-8", "surrogatepass")) if isinstance(text, str) else 0
            yield _table_row(obj, f"{name}:{position}", source, text_field, id_field, size, max_doc_bytes)


def expand_sources(sources: list[dict]) -> list[dict]:
    """Expand each source's glob into files (sorted, so task order is stable); keep per-source options."""
    import glob

    files = []
    for src in sources:
        matches = sorted(p for p in glob.glob(src["path"], recursive=True) if Path(p).is_file())
        for p in matches:
            files.append({**src, "path": p, "format": src.get("format") or infer_format(p)})
    return files
