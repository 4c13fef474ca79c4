"""ARC files (the Internet Archive's format before WARC; plain or one gzip member per record), read by a small
resynchronising parser, as WARC is (:mod:`curate.readers.warc`).

A record is a header line ``URL IP DATE MIME LENGTH`` (version 1; version 2 has ten fields, LENGTH last), then
LENGTH bytes (an HTTP response for ``http://`` URLs), then a newline. The first record (``filedesc://``) describes
the file and is counted as a ``warcinfo`` skip. Ids: ``<file name>@<offset>`` (for .gz: the offset of the member
the record starts in, ``+n`` inside it).

A length never swallows other records, and damage never ends the file:
- ``bad_content_length``: a LENGTH that runs into the next record's header line (the record is cut there and the
  next one read), or that stops short of it (reading resumes at the next header line);
- ``malformed_record``: a header line that does not parse (a LENGTH that is not a number, too few fields) and
  the bytes up to the next header line, set aside as one row;
- ``truncated_record`` / ``truncated_gzip``, ``corrupt_gzip``: as for WARC;
- ``too_large``: a LENGTH over ``max_doc_bytes`` (the body is skipped unread, unless a header line comes first).

Splits, as for WARC (:func:`plan`): a plain ARC is cut at a valid header line (at a line start) whose LENGTH ends
cleanly (newlines, then a header line or the end of the file); a compressed one at a member whose first line is
a valid header (``.arc.gz`` holds one gzip member per record; one stream is one split). A record belongs to the
split its header starts in, so a split reads on past its end to finish its last record and the items of all
splits are those of the whole file, ids included.
"""
from __future__ import annotations

import re

from curate.readers import streams
from curate.readers.warc import MAX_HEADER, _meta_row, _record, _skip, _Stream

MAX_LINE = 8 << 10  # an ARC header line is a URL and four to nine short fields
_HTML_TYPES = ("text/html", "application/xhtml+xml", "text/plain")
_LENGTH = re.compile(rb"^\d{1,15}$")
_BLANK = re.compile(rb"[\r\n]*")
_LINE_START = re.compile(rb"\n(?=[^\r\n])")  # a newline that starts a line that is not blank


def header(line: bytes) -> tuple[str, str, int] | None:
    """``(url, mime, length)`` of a valid ARC header line, else None."""
    line = line.rstrip(b"\r")
    if not line or len(line) > MAX_LINE or b"\x00" in line:
        return None
    parts = line.split(b" ")
    if len(parts) not in (5, 10) or not _is_url(parts[0]) or not _LENGTH.match(parts[-1]):
        return None
    return parts[0].decode("latin-1"), parts[3].decode("latin-1").lower(), int(parts[-1])


def looks_like_header(line: bytes) -> bool:
    """A line that starts a record, valid or not (a URL then a few fields): where a record before it must end."""
    parts = line.rstrip(b"\r").split(b" ")
    return 3 <= len(parts) <= 12 and len(line) <= MAX_LINE and _is_url(parts[0])


def _is_url(token: bytes) -> bool:
    return b"://" in token or token.startswith((b"dns:", b"filedesc:"))


def plan(path: str, target_bytes: int) -> list[dict]:
    """Splits of about ``target_bytes`` (``{"path", "format": "warc", "start", "stop"}``), cut where a record
    starts; planning reads a few KiB at each cut."""
    return streams.split_plan(path, "warc", target_bytes, _next_plain_record, _starts_record)


def _starts_record(first: bytes) -> bool:
    """A member's first bytes start with a valid header line (not the file's ``filedesc`` record)."""
    line = first.split(b"\n", 1)[0]
    parsed = header(line) if b"\n" in first else None
    return parsed is not None and not parsed[0].startswith("filedesc:")


def _next_plain_record(f, pos: int, size: int) -> int | None:
    """The first line start at or after ``pos`` holding a valid header line whose LENGTH ends cleanly."""
    while pos < size:
        f.seek(pos - 1)
        window = f.read(streams.CHUNK + 1)  # from the byte before pos: a line start is just after a newline
        if len(window) < 2:
            return None
        for m in _LINE_START.finditer(window):
            at = pos + m.start()
            if _record_starts_at(f, at, size):
                return at
        if len(window) < streams.CHUNK + 1:
            return None
        pos += streams.CHUNK
    return None


def _record_starts_at(f, at: int, size: int) -> bool:
    f.seek(at)
    head = f.read(MAX_LINE + 2)
    nl = head.find(b"\n")
    parsed = header(head[:nl]) if nl != -1 else None
    if parsed is None or parsed[0].startswith("filedesc:"):
        return False
    end = at + nl + 1 + parsed[2]
    if end > size:
        return False
    f.seek(end)
    after = f.read(MAX_LINE + 64)
    if after[:1] not in (b"\n", b"\r") and end < size:
        return False
    rest = after.lstrip(b"\r\n")
    if not rest:
        return end + len(after) >= size  # only newlines up to the end of the file
    line = rest.split(b"\n", 1)[0]
    return looks_like_header(line)


def read(split: dict | str, name: str, max_doc_bytes: int):
    if isinstance(split, str):
        split = {"path": split}
    yield from _ArcFile(split, name, max_doc_bytes).records()


class _ArcFile:
    def __init__(self, split: dict, name: str, max_doc_bytes: int):
        path = split["path"]
        self.path, self.name, self.max_doc_bytes = path, name, max_doc_bytes
        self.kind = kind = streams.sniff(path)
        self.start, self.stop = split.get("start") or 0, split.get("stop")
        self.s = _Stream(streams.events(path, kind, self.start), kind == "plain", self.start if kind == "plain" else 0)
        self.max_body = max_doc_bytes + MAX_HEADER

    def past_stop(self) -> bool:
        """The record at the start of the buffer belongs to the next split."""
        if self.stop is None:
            return False
        member, intra = self.s.where()
        return (intra if self.kind == "plain" else member) >= self.stop

    def label(self, where) -> str:
        member, intra = where
        if self.kind == "plain":
            return f"{self.name}@{intra}"
        return f"{self.name}@{member}" + (f"+{intra}" if intra else "")

    def records(self):
        s = self.s
        while True:
            while s.fill(1) and (blank := _BLANK.match(s.buf).end()):  # the newline(s) between records
                s.consume(blank)
            if not s.buf:
                if s.damage is not None:
                    if self.stop is not None and s.damage[1] >= self.stop:
                        return  # a damaged member of the next split
                    yield from self._damaged(None)
                    continue
                if s.truncated:
                    yield ("drop", _meta_row({}, self.label(s.where()) + ":truncated", self.path, s.truncated[2]),
                           "truncated_" + self.kind)
                return
            nl = s.find(b"\n", 0, MAX_LINE + 2)
            line = bytes(s.buf[: nl if nl != -1 else len(s.buf)])
            parsed = header(line) if (nl != -1 or s.at_end) else None
            if self.past_stop():
                return
            if parsed is None:
                yield from self._junk()
                continue
            yield from self._record(parsed, (nl + 1) if nl != -1 else len(s.buf))

    def _next_header(self, lo: int, hi: int) -> int:
        """Offset of the first valid header line at a line start in buf[lo:hi] (filling up to ``hi``), or -1.
        Blank lines are skipped by the regex engine, not one by one."""
        s = self.s
        s.fill(hi)
        pos = max(lo - 1, 0)
        while True:
            m = _LINE_START.search(s.buf, pos, min(hi, len(s.buf)))
            if m is None:
                return -1
            i = m.start()
            s.fill(i + 1 + MAX_LINE + 2)
            j = s.buf.find(b"\n", i + 1, i + 2 + MAX_LINE)
            line = bytes(s.buf[i + 1: j if j != -1 else len(s.buf)])
            if (j != -1 or s.at_end) and header(line) is not None:
                return i + 1
            pos = i + 1

    def _junk(self):
        """Bytes that do not start with a valid header line: up to the next one, set aside as one row (memory
        stays bounded: the bytes are consumed as they are scanned, the first 10 kB kept for the row)."""
        s, at, prefix = self.s, self.s.where(), bytearray()

        def take(n: int) -> None:
            prefix.extend(s.buf[: max(min(n, 10000 - len(prefix)), 0)])
            s.consume(n)

        while True:
            s.fill(1 << 20)
            k = self._next_header(1, len(s.buf))
            if k != -1:
                take(k)
                break
            if s.at_end:
                take(len(s.buf))
                break
            keep = len(s.buf) - MAX_LINE - 2  # a header line may straddle what is in memory: keep its start
            cut = s.buf.rfind(b"\n", 0, keep) if keep > 0 else -1
            take(cut if cut > 0 else max(keep, 1))
        if bytes(prefix).strip():
            first = bytes(prefix).split(b"\n", 1)[0][:200].decode("utf-8", "replace")
            yield ("drop", _meta_row({}, self.label(at) + ":malformed", self.path,
                                     f"not an ARC record header: {first!r}\n" + prefix.decode("utf-8", "replace")),
                   "malformed_record")

    def _record(self, parsed, body_at: int):
        s, (url, mime, length) = self.s, parsed
        at = s.where()
        fields = {"warc-type": "response", "warc-target-uri": url}
        label = self.label(at)
        if length > self.max_body:
            s.fill(body_at + self.max_body)
            k = self._next_header(body_at, len(s.buf))
            if k != -1:
                yield from self._bad_length(fields, label, body_at, k, k)
                return
            if not _skip(s, body_at + length):
                yield from self._cut_short(fields, label)
                return
            yield ("drop", _meta_row(fields, label, self.path, f"record of {length} bytes"), "too_large")
            return
        end = body_at + length
        have = s.fill(end + 1)
        if not (have and self._clean_end(end)):
            k = self._next_header(body_at, min(end, len(s.buf)))
            if k != -1:  # the length runs into the next record: cut there
                yield from self._bad_length(fields, label, body_at, k, k)
                return
            if not s.fill(end):
                yield from self._cut_short(fields, label)
                return
            k = self._next_header(end, end + self.max_body)
            if k != -1 or s.at_end:  # the length stops short of the record's end
                yield from self._bad_length(fields, label, body_at, k if k != -1 else len(s.buf), k if k != -1 else len(s.buf))
                return
        block = bytes(s.buf[body_at:end])
        s.consume(end)
        yield from self._item(url, mime, block, label)

    def _clean_end(self, end: int) -> bool:
        """The record ends where its length says: newlines, then a header line or the end of the data."""
        s = self.s
        s.fill(end + 1)
        if s.buf[end:end + 1] not in (b"\n", b"\r"):
            return len(s.buf) <= end and s.at_end  # no newline after the record: only the end of the data is clean
        p = end
        while True:  # the blank run after the record (however long: the records loop skips it)
            s.fill(p + MAX_LINE + 4)
            p = _BLANK.match(s.buf, p).end()
            if p < len(s.buf) or s.at_end:
                break
            if p - end > self.max_body:
                return True
        if p >= len(s.buf):
            return True
        rest = bytes(s.buf[p:p + MAX_LINE + 2])
        nl = rest.find(b"\n")
        return looks_like_header(rest[: nl if nl != -1 else len(rest)])

    def _bad_length(self, fields, label: str, body_at: int, k: int, resume: int):
        s = self.s
        text = f"the length runs to byte {k - body_at} of the next record or stops short of it\n" + \
            bytes(s.buf[body_at:min(k, body_at + 10000)]).decode("utf-8", "replace")
        yield ("drop", _meta_row(fields, label, self.path, text), "bad_content_length")
        s.consume(resume)

    def _cut_short(self, fields, label: str):
        s = self.s
        if s.damage is not None:
            yield from self._damaged(label, fields)
            return
        reason = "truncated_" + self.kind if s.truncated else "truncated_record"
        text = s.truncated[2] if s.truncated else bytes(s.buf[:10000]).decode("utf-8", "replace")
        yield ("drop", _meta_row(fields, label, self.path, text), reason)
        s.truncated = None
        s.reset()

    def _damaged(self, label, fields=None):
        _, at, end, message = self.s.take_damage()
        yield ("drop", _meta_row(fields or {}, label or f"{self.name}@{at}:damaged", self.path,
                                 f"compressed bytes {at}-{end} unreadable: {message}"), "corrupt_" + self.kind)

    def _item(self, url: str, mime: str, block: bytes, label: str):
        if url.startswith("filedesc:"):
            yield ("skip", "warcinfo")
            return
        fields = {"warc-type": "response", "warc-target-uri": url}
        if not block.startswith(b"HTTP/"):
            if url.startswith("dns:") or (mime and mime.split(";")[0] not in _HTML_TYPES):
                yield ("skip", f"response:{mime or 'unknown'}")
                return
            block = f"HTTP/1.0 200 OK\r\nContent-Type: {mime or 'text/html'}\r\n\r\n".encode("latin-1") + block
        yield from _record(fields, block, label, self.path, self.max_doc_bytes)
