"""WARC (plain, per-record .gz, .zst, also .bz2 and .xz) read by a small resynchronising parser; ARC by the same
pieces (:mod:`curate.readers.arc`).

Each ``response`` record with an HTML or plain-text payload becomes a document; other records are counted
skips. A response whose HTTP status is not 2xx (an error page, a redirect's body, a 304 with none) is set aside
as ``http_status``, its row's text the status line (``HTTP status 404 Not Found``), a blank line, then the decoded
body; a payload without a status line that parses is read as a page, as before. (ARC records hold the same HTTP
response and are read alike.) Ids: the ``WARC-Record-ID`` (its uuid), else ``<file name>@<offset>`` where
``offset`` is the record's byte offset in the file (for .gz: the offset of the member it starts in, ``+n`` when it
is not the first record of that member).

Version lines read: ``WARC/1.0`` and ``WARC/1.1`` (any ``WARC/1.x``), and ``WARC/0.17`` / ``WARC/0.18`` (the drafts
Heritrix wrote before ISO 28500: the same named headers, WARC-Type, Content-Length ...), all read alike.

Damage never ends a file: the parser resyncs at the next version line (or the next gzip member) and
sets aside what it skipped as one row with its offset and reason:
- ``corrupt_gzip`` / ``corrupt_zstd`` (``_bz2``, ``_xz``): a member that does not decode; the records of later members are read;
- ``truncated_gzip`` / ``truncated_zstd`` (``_bz2``, ``_xz``) / ``truncated_record``: the file ends inside a record;
- ``bad_content_length``: a record whose Content-Length runs into the next record's header (it is cut
  there and the next record is read), or stops short of its real end;
- ``malformed_record``: an unparseable header, or bytes between records that are not a record.
A body's size is checked before it is read: a record larger than ``max_doc_bytes`` is skipped unread
(``too_large`` for responses). A gzip WARC written as one member (not one member per record, as
``example-bad.warc.gz.bad`` is) is read all the same and counted in ``warc_single_gzip_members``.

Splits: record offsets. For .gz/.zst, cuts at member starts whose content begins with ``WARC/`` (planning
seeks to each cut point and test-decodes a few KiB); for plain WARC, at version lines whose
Content-Length lands on the next header. A split owns the records whose header starts in its range. ARC files
split the same way (:func:`curate.readers.arc.plan`).
"""
from __future__ import annotations

import io
import re
import zlib
from collections import deque

from curate.readers import streams
from curate.readers.text import check_text, decode, row
from curate.schema import HTML, PLAIN

_HTML_TYPES = ("text/html", "application/xhtml+xml")
MAX_HEADER = 64 << 10
_MAGIC = b"WARC/"
_VERSION = re.compile(rb"WARC/(?:1\.|0\.1[78])")  # the version lines read (see the module docstring)
_LINE_VERSION = re.compile(b"\n" + _VERSION.pattern)
_MIN_VERSION, _MAX_VERSION = len(b"WARC/1."), len(b"WARC/0.17")  # bytes that decide whether one starts here
_HEAD_END = re.compile(rb"\r?\n\r?\n")


def is_arc(path: str) -> bool:
    kind = streams.sniff(path)
    with open(path, "rb") as f:
        head = f.read(64 << 10)
    if kind != "plain":
        try:
            head, _ = streams._decode_prefix(head, kind, 64)
        except Exception:
            return False
    return head.lstrip().startswith(b"filedesc://")


# --- planning -----------------------------------------------------------------------------------

def plan(path: str, target_bytes: int) -> list[dict]:
    if is_arc(path):
        from curate.readers import arc

        return arc.plan(path, target_bytes)
    return streams.split_plan(path, "warc", target_bytes, _next_plain_record, lambda b: b.startswith(b"WARC/"))


def _next_plain_record(f, pos: int, size: int) -> int | None:
    """The first offset >= pos where a WARC record starts whose Content-Length lands on the next record."""
    while pos < size:
        f.seek(pos)
        window = f.read(streams.CHUNK)
        if not window:
            return None
        for v in _VERSION.finditer(window):
            at = pos + v.start()
            f.seek(at)
            head = f.read(MAX_HEADER)
            m = _HEAD_END.search(head)
            length = _content_length(head[: m.start()]) if m else None
            if length is not None and (at == 0 or _byte_before(f, at) == b"\n"):
                f.seek(at + m.end() + length)
                after = f.read(64)
                if after.strip() == b"" or after.lstrip().startswith(b"WARC/"):
                    return at
        if len(window) < streams.CHUNK:
            return None
        pos += len(window) - _MAX_VERSION + 1
    return None


def _byte_before(f, at: int) -> bytes:
    f.seek(at - 1)
    return f.read(1)


def _content_length(header: bytes) -> int | None:
    m = re.search(rb"(?im)^content-length:\s*(\d{1,15})\s*$", header)
    return int(m.group(1)) if m else None


# --- the parser ---------------------------------------------------------------------------------

class _Stream:
    """A growable buffer over stream events that knows which member each byte came from.

    A ``damage`` event is a barrier: the buffer stops growing there (as at the end of the file) until the
    parser has dealt with what came before it and calls :meth:`take_damage`."""

    def __init__(self, evts, plain: bool, pos: int = 0):
        self.evts, self.buf, self.pos, self.plain = evts, bytearray(), pos, plain
        self.members: deque = deque()  # (stream position of the member's first byte, member offset)
        self.eof, self.truncated, self.damage = False, None, None

    @property
    def at_end(self) -> bool:
        return self.eof or self.damage is not None

    def fill(self, n: int) -> bool:
        while len(self.buf) < n and not self.at_end:
            ev = next(self.evts, None)
            if ev is None:
                self.eof = True
            elif ev[0] == "data":
                if not self.members or self.members[-1][1] != ev[1]:
                    self.members.append((self.pos + len(self.buf), ev[1]))
                self.buf += ev[2]
            elif ev[0] == "damage":
                self.damage = ev
            else:
                self.eof, self.truncated = True, ev
        return len(self.buf) >= n

    def more(self) -> bool:
        return self.fill(len(self.buf) + 1)

    def consume(self, n: int) -> None:
        del self.buf[:n]
        self.pos += n

    def reset(self) -> None:
        self.consume(len(self.buf))

    def take_damage(self):
        ev, self.damage = self.damage, None
        self.reset()
        return ev

    def where(self) -> tuple[int, int]:
        """(member offset, offset inside that member's output) of buf[0]; for a plain file (0, file offset)."""
        while len(self.members) > 1 and self.members[1][0] <= self.pos:
            self.members.popleft()
        if self.plain or not self.members:
            return (0, self.pos)
        start, member = self.members[0]
        return (member, max(self.pos - start, 0))

    def find(self, needle: bytes | re.Pattern, start: int = 0, limit: int | None = None, width: int = 0) -> int:
        """The first offset >= start (and < limit) of ``needle``: bytes, or a pattern of at most ``width`` bytes."""
        while True:
            if isinstance(needle, bytes):
                i, width = self.buf.find(needle, start), len(needle)
            else:
                m = needle.search(self.buf, start)
                i = m.start() if m else -1
            if i != -1 and (limit is None or i < limit):
                return i
            if limit is not None and len(self.buf) >= limit:
                return -1
            start = max(start, len(self.buf) - width + 1)
            if not self.more():
                return -1


def read(split: dict, name: str, max_doc_bytes: int):
    path = split["path"]
    if is_arc(path):
        from curate.readers import arc  # (arc reuses this module's parser pieces)

        yield from arc.read(split, name, max_doc_bytes)
        return
    yield from _WarcSplit(split, name, max_doc_bytes).records()


class _WarcSplit:
    """One split of a WARC file: its records, resynchronised at the next header after damage or junk.
    A record belongs to the split its header starts in (``owned``); yields the reader's items."""

    def __init__(self, split: dict, name: str, max_doc_bytes: int):
        self.path, self.name, self.max_doc_bytes = split["path"], name, max_doc_bytes
        self.kind = kind = streams.sniff(self.path)
        self.start, self.stop = split.get("start", 0), split.get("stop")
        self.s = _Stream(streams.events(self.path, kind, self.start), kind == "plain",
                         self.start if kind == "plain" else 0)
        self.max_body = max_doc_bytes + MAX_HEADER
        self.multi_record_members: set = set()
        self.quiet = False  # the rest of a malformed record is not reported a second time as junk

    def label(self, where) -> str:
        member, intra = where
        if self.kind == "plain":
            return f"{self.name}@{intra}"
        return f"{self.name}@{member}" + (f"+{intra}" if intra else "")

    def offset(self, where) -> int:
        return where[1] if self.kind == "plain" else where[0]

    def owned(self, where) -> bool:
        o = self.offset(where)
        return o >= self.start and (self.stop is None or o < self.stop)

    def records(self):
        s = self.s
        while True:
            # 1. the next record header, skipping (and setting aside) anything else
            if not s.fill(_MIN_VERSION):
                if (yield from self._end_of_data()):
                    continue
                break
            s.fill(_MAX_VERSION)
            if not _VERSION.match(s.buf):
                yield from self._skip_junk()
                continue
            self.quiet = False
            rec_at = s.where()
            if self.stop is not None and self.offset(rec_at) >= self.stop:
                return
            if self.kind != "plain" and rec_at[1] > 0:
                self.multi_record_members.add(rec_at[0])
            yield from self._record_at(rec_at)
        if self.multi_record_members and self.kind == "gzip":  # (bz2 and xz WARCs are one stream by nature)
            yield ("count", "warc_single_gzip_members", len(self.multi_record_members))

    def _end_of_data(self):
        """Fewer bytes left than a header: junk, damage or a cut. Returns True where reading goes on."""
        s, path = self.s, self.path
        junk_at = s.where()
        if bytes(s.buf).strip() and self.owned(junk_at):
            yield ("drop", row(self.label(junk_at) + ":junk", bytes(s.buf[:10000]).decode("utf-8", "replace"), path),
                   "malformed_record")
        s.reset()
        if s.damage is not None:
            yield from self._cut_short(None)
            return True
        if s.truncated and self.owned(junk_at):
            yield ("drop", row(self.label(junk_at) + ":truncated", s.truncated[2], path), "truncated_" + self.kind)
        return False

    def _skip_junk(self):
        """Bytes that are not a record header: skip to the next header at a line start (kept up to 10 kB)."""
        s = self.s
        junk_at, prefix = s.where(), b""
        while True:
            v = _VERSION.search(s.buf)
            i = v.start() if v else -1
            if i != -1 and (i == 0 or s.buf[i - 1:i] == b"\n"):
                if len(prefix) < 10000:
                    prefix += bytes(s.buf[: min(i, 10000 - len(prefix))])
                s.consume(i)
                break
            cut = max(len(s.buf) - _MAX_VERSION if i == -1 else i + 1, 0)
            if len(prefix) < 10000:
                prefix += bytes(s.buf[: min(cut, 10000 - len(prefix))])
            s.consume(cut)
            if i == -1 and not s.more():
                prefix += bytes(s.buf[: max(10000 - len(prefix), 0)])
                s.reset()
                break
        if prefix.strip() and self.owned(junk_at) and not self.quiet:
            yield ("drop", row(self.label(junk_at) + ":junk", prefix.decode("utf-8", "replace"), self.path),
                   "malformed_record")

    def _record_at(self, rec_at):
        """2. the header block, 3. the record's block, its size checked before it is read."""
        s, path = self.s, self.path
        while True:
            m = _HEAD_END.search(s.buf, 0, MAX_HEADER)
            if m or len(s.buf) >= MAX_HEADER or not s.more():
                break
        if not m and s.at_end:
            yield from self._cut_short(rec_at)
            return
        length = _content_length(bytes(s.buf[: m.start()])) if m else None
        if length is None:
            if self.owned(rec_at):
                yield ("drop", row(self.label(rec_at), bytes(s.buf[:2000]).decode("utf-8", "replace"), path),
                       "malformed_record")
            s.consume(len(_MAGIC))
            self.quiet = True
            return
        fields = _fields(bytes(s.buf[: m.start()]).decode("latin-1"))
        hlen = m.end()
        if length > self.max_body:
            yield from self._huge_record(rec_at, fields, hlen, length)
            return
        end = hlen + length
        have = s.fill(end)
        if not (have and _clean_end(s, end)):
            # (a header that starts before ``end`` and ends after it counts: a length a few bytes too long)
            k = _header_in(s.buf, hlen, end + 1, valid=True)
            if k != -1:  # Content-Length runs into the next record: cut the record there
                yield from self._bad_length(rec_at, fields, hlen, k, k)
                return
            if not have:  # the file ends (or is damaged) inside this record
                yield from self._cut_short(rec_at, fields)
                return
            k = s.find(_LINE_VERSION, end, end + self.max_body, 1 + _MAX_VERSION)
            if k != -1:  # Content-Length stops short of the record's end
                yield from self._bad_length(rec_at, fields, hlen, k, k + 1)
                return
        block = bytes(s.buf[hlen:end])
        s.consume(end)
        if self.owned(rec_at):
            yield from _record(fields, block, self.label(rec_at), path, self.max_doc_bytes)

    def _bad_length(self, rec_at, fields, hlen: int, k: int, resume: int):
        """A Content-Length that does not end at the record's end: the block up to ``k``, on from ``resume``."""
        if self.owned(rec_at):
            yield ("drop", _meta_row(fields, self.label(rec_at), self.path, bytes(self.s.buf[hlen:min(k, hlen + 10000)])),
                   "bad_content_length")
        self.s.consume(resume)

    def _huge_record(self, rec_at, fields, hlen: int, length: int):
        """Before trusting a huge Content-Length, look for a real header within the next max_body bytes."""
        s = self.s
        s.fill(hlen + self.max_body)
        k = _header_in(s.buf, hlen, len(s.buf), valid=True)
        if k != -1:
            yield from self._bad_length(rec_at, fields, hlen, k, k)
            return
        if not _skip(s, hlen + length):
            yield from self._cut_short(rec_at, fields)
            return
        if self.owned(rec_at):
            if fields.get("warc-type") == "response":
                yield ("drop", _meta_row(fields, self.label(rec_at), self.path, f"record of {length} bytes"), "too_large")
            else:
                yield ("skip", fields.get("warc-type") or "unknown")

    def _cut_short(self, rec_at, fields=None):
        """The record at ``rec_at`` ends at damage or at the end of the file: one row, and on."""
        s, start, stop = self.s, self.start, self.stop
        if s.damage is not None:
            _, at, end, message = s.take_damage()
            mine = self.owned(rec_at) if rec_at is not None else (at >= start and (stop is None or at < stop))
            if mine:
                where = rec_at if rec_at is not None else (at, 0)
                text = f"compressed bytes {at}-{end} unreadable: {message}"
                yield ("drop", _meta_row(fields or {}, self.label(where) + ("" if rec_at else ":damaged"), self.path,
                                         text), "corrupt_" + self.kind)
            if stop is not None and end >= stop:
                s.eof = True  # what follows belongs to the next split
            return
        if rec_at is not None and self.owned(rec_at):
            reason = "truncated_" + self.kind if s.truncated else "truncated_record"
            text = bytes(s.buf[:10000]) if not fields else (s.truncated[2] if s.truncated else "")
            yield ("drop", _meta_row(fields or {}, self.label(rec_at), self.path, text), reason)
            s.truncated = None  # reported with this record
        s.reset()


def _skip(s: _Stream, n: int) -> bool:
    """Consume ``n`` bytes without holding them; False when the stream ends first."""
    while n > 0:
        if not s.buf and not s.more():
            return False
        take = min(n, len(s.buf))
        s.consume(take)
        n -= take
    return True


def _header_in(buf, lo: int, hi: int, valid: bool = False) -> int:
    """Offset of the first version line at a line start that starts in buf[lo:hi] (its bytes all in buf), or
    -1. With ``valid``: only one that opens a parseable header block (a WARC-Type and a Content-Length)."""
    for v in _LINE_VERSION.finditer(buf, max(lo - 1, 0), hi + _MAX_VERSION):
        i = v.start()
        if i + 1 >= hi:
            break
        if not valid:
            return i + 1
        m = _HEAD_END.search(buf, i + 1, i + 1 + MAX_HEADER)
        if m:
            head = bytes(buf[i + 1:m.start()])
            if _content_length(head) is not None and re.search(rb"(?im)^warc-type:", head):
                return i + 1
    return -1


def _clean_end(s: _Stream, end: int) -> bool:
    """Does the record end where its Content-Length says: a blank line (then anything), or the end?"""
    s.fill(end + 64)
    after = bytes(s.buf[end:end + 64])
    if after.startswith((b"\r\n\r\n", b"\n\n", b"\r\n\n")):
        return True
    stripped = after.lstrip(b"\r\n")
    return stripped.startswith(b"WARC/") or (s.at_end and not stripped.strip())


def _fields(header: str) -> dict:
    fields = {}
    for line in header.splitlines()[1:]:
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    return fields


def _meta_row(fields: dict, fallback: str, source: str, text) -> dict:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    url = fields.get("warc-target-uri", "").strip("<>")
    return row(_record_id(fields) or fallback, text, source, url, HTML)


def _record_id(fields: dict) -> str:
    rid = fields.get("warc-record-id", "").strip().strip("<>")
    return rid.removeprefix("urn:uuid:")


def _record(fields: dict, block: bytes, fallback: str, source: str, max_doc_bytes: int):
    rtype = fields.get("warc-type", "")
    if rtype != "response":
        yield ("skip", rtype or "unknown")
        return
    http, body = _split_http(block)
    ctype = http.get("content-type", "")
    mime = ctype.split(";")[0].strip().lower()
    if mime and mime not in _HTML_TYPES and mime != "text/plain":
        yield ("skip", f"response:{mime}")
        return
    if "chunked" in http.get("transfer-encoding", "").lower():
        body = _dechunk(body)
    body, too_big = _decode_content(body, http.get("content-encoding", "").lower(), max_doc_bytes)
    r = _meta_row(fields, fallback, source, "")
    if too_big:
        yield ("drop", r, "too_large")
        return
    html = mime != "text/plain"
    text, ok = decode(body, ctype.encode("latin-1", "replace"), html=html)
    r["text"], r["content_type"] = text, (HTML if html else PLAIN)
    status = http_status(block)
    if status is not None and not 200 <= status[0] < 300:  # an error page, a redirect's body: not the page
        head = (f"HTTP status {status[0]}{' ' + status[1] if status[1] else ''}" if status[0] else
                f"HTTP status line unreadable: {status[1]}")
        r["text"] = f"{head}\n\n{text}"
        yield ("drop", r, "http_status")
        return
    if not ok:
        yield ("drop", r, "invalid_utf8")
        return
    yield check_text(r, len(body), max_doc_bytes)


_STATUS_LINE = re.compile(rb"HTTP/[0-9.]{1,4}[ \t]+([0-9]{3})(?![0-9])[ \t]*([^\r\n]{0,200})")


def http_status(block: bytes) -> tuple[int, str] | None:
    """``(code, reason phrase)`` of a response block's HTTP status line (``HTTP/1.1 404 Not Found``, ``HTTP/2
    200``); ``(0, the line)`` where the block begins with ``HTTP/`` but its status is not three digits
    (``HTTP/1.1 2000``, ``HTTP/1.1 abc``, ``HTTP/1.1 +200``: not a 2xx response, set aside with the others); None
    where the block holds no HTTP head (a payload stored without one, ``garbage line``): read as a page."""
    m = _STATUS_LINE.match(block)
    if m is None:
        if not block.startswith(b"HTTP/"):
            return None
        return 0, block[:200].split(b"\n", 1)[0].decode("latin-1").strip()
    return int(m.group(1)), m.group(2).decode("latin-1").strip()


def _split_http(block: bytes) -> tuple[dict, bytes]:
    """(the HTTP headers, the payload) of a response record's block. The headers end at the first blank line
    however long they are (a 2 MB header, or 100,000 header lines, lost the page as ``empty_document``): the
    block is in memory already, bounded by ``max_doc_bytes``, and one search of it is linear."""
    if not block.startswith(b"HTTP/"):
        return {}, block
    m = _HEAD_END.search(block)
    if not m:
        return {}, b""
    return _fields(block[: m.start()].decode("latin-1")), block[m.end():]


def _dechunk(body: bytes) -> bytes:
    """Undo HTTP chunked transfer encoding; a body that is not validly chunked is returned as it is."""
    out, pos = bytearray(), 0
    try:
        while True:
            eol = body.index(b"\n", pos)
            size = int(body[pos:eol].split(b";")[0].strip(), 16)
            if size == 0:
                return bytes(out)
            start = eol + 1
            if start + size > len(body):
                return body
            out += body[start:start + size]
            pos = start + size
            pos += 2 if body[pos:pos + 2] == b"\r\n" else (1 if body[pos:pos + 1] == b"\n" else 0)
    except ValueError:
        return body if not out else bytes(out)


MAX_CONTENT_CODINGS = 4  # HTTP allows a list ("gzip, gzip"); a payload listed with more is taken as it is


def _decode_content(body: bytes, encoding: str, max_doc_bytes: int) -> tuple[bytes, bool]:
    """Undo Content-Encoding (gzip, deflate, br, zstd; a list such as ``gzip, gzip`` in reverse order, as it was
    applied, at most ``MAX_CONTENT_CODINGS``), never producing more than ``max_doc_bytes``."""
    codings = [c.strip() for c in encoding.split(",") if c.strip() and c.strip() != "identity"]
    if len(codings) > MAX_CONTENT_CODINGS:
        return body, False
    for coding in reversed(codings):
        body, too_big = _decode_one(body, coding, max_doc_bytes)
        if too_big:
            return body, True
    return body, False


def _decode_one(body: bytes, encoding: str, max_doc_bytes: int) -> tuple[bytes, bool]:
    try:
        if encoding in ("gzip", "x-gzip", "deflate"):
            d = zlib.decompressobj(47 if encoding != "deflate" else 15)
            try:
                out = d.decompress(body, max_doc_bytes + 1)
            except zlib.error:
                d = zlib.decompressobj(-15)
                out = d.decompress(body, max_doc_bytes + 1)
            return out, len(out) > max_doc_bytes
        if encoding == "br":
            import brotli

            out = brotli.Decompressor().process(body, output_buffer_limit=max_doc_bytes + 1)
            return out, len(out) > max_doc_bytes
        if encoding == "zstd":  # RFC 8878, sent by current browsers and servers
            import zstandard

            with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(body)) as r:
                out = r.read(max_doc_bytes + 1)
            return out, len(out) > max_doc_bytes
    except Exception:  # a wrong Content-Encoding label: the payload is taken as it is
        return body, False
    return body, False
