"""Decompressed bytes of an input file as a stream of events, resynchronising after damage.

``events(path, kind, start)`` reads the file from compressed offset ``start`` and yields:

- ``("data", member, bytes)``: decompressed bytes of the member (a gzip member, zstd frame, bz2 or xz
  stream) that starts at compressed offset ``member`` (for a plain file: ``member`` is 0 and the bytes are the file's own);
- ``("damage", offset, end, message)``: the compressed bytes ``[offset, end)`` could not be decoded (a
  corrupt member); reading resumes at ``end``, the next valid member header;
- ``("truncated", member, message)``: the file ends inside the member that starts at ``member``.

A member's output is held back until its checksum has been verified, up to ``VERIFY_BYTES``; so a damaged
small member (a WARC.gz record) yields nothing but its ``damage`` event. Larger members stream on
unverified (memory stays bounded) and their bytes before the damage are already out.

``next_member(f, offset)`` finds the first valid member header at or after ``offset`` without decompressing
the file: it scans for the magic bytes and test-decodes a little from each candidate. The splitters use it
to cut a file at member boundaries; the reader uses it to resync.
"""
from __future__ import annotations

import bz2
import lzma
import os
import zlib

CHUNK = 1 << 20
OUT_CHUNK = 1 << 20
VERIFY_BYTES = 16 << 20
_PROBE_OUT = 64 << 10

GZIP_MAGIC = b"\x1f\x8b\x08"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
BZ2_MAGIC = b"BZh"  # then the block size digit 1-9, then a block's or the end's magic (see _is_bz2)
XZ_MAGIC = b"\xfd7zXZ\x00"
MAGIC = {"gzip": GZIP_MAGIC, "zstd": ZSTD_MAGIC, "bz2": BZ2_MAGIC, "xz": XZ_MAGIC}
# compressed bytes a probe reads: a bz2 stream's first output comes only after its first block (<= ~900 KB)
_PROBE_IN = {"bz2": (1 << 20) + (64 << 10)}


def _is_skippable(buf: bytes) -> bool:
    """A zstd skippable frame (magic 0x184D2A50-0x184D2A5F) starts ``buf``."""
    return len(buf) >= 4 and buf[1:4] == b"\x2a\x4d\x18" and 0x50 <= buf[0] <= 0x5F


def _is_bz2(buf: bytes) -> bool:
    """A bz2 stream header: ``BZh``, a block size digit, then a block's magic (pi) or the end's (sqrt pi)."""
    return (buf[:3] == BZ2_MAGIC and len(buf) >= 10 and 0x31 <= buf[3] <= 0x39
            and buf[4:10] in (b"1AY&SY", b"\x17rE8P\x90"))


def _cut_bz2_header(head: bytes) -> bool:
    """A whole file shorter than a bz2 header that starts as one (``BZh`` + digit + the start of a block's or
    the end's magic): a bz2 stream cut short, read as bz2 so that it is set aside as truncated."""
    return (3 <= len(head) < 10 and head[:3] == BZ2_MAGIC and (len(head) == 3 or 0x31 <= head[3] <= 0x39)
            and any(m.startswith(head[4:]) for m in (b"1AY&SY", b"\x17rE8P\x90")))


# What a name claims, and the compressions that are recognised but not read (set aside with a reason).
CLAIMS = ((".gz", "gzip"), (".zst", "zstd"), (".bz2", "bz2"), (".xz", "xz"))
UNSUPPORTED = {"zip": b"PK\x03\x04", "7z": b"7z\xbc\xaf\x27\x1c", "lz4": b"\x04\x22\x4d\x18"}


def claimed(path: str) -> str:
    """The compression a file's name says it has ("plain" when none)."""
    lower = path.lower()
    return next((kind for suffix, kind in CLAIMS if lower.endswith(suffix)), "plain")


def _looks_like_text(head: bytes) -> bool:
    """Almost no control characters (any 8-bit text encoding passes; random or compressed bytes have ~11%)."""
    controls = sum(head.count(bytes([c])) for c in range(32) if c not in (9, 10, 12, 13)) + head.count(b"\x7f")
    return controls <= len(head) // 100


def unreadable(path: str) -> tuple[str, str] | None:
    """``(reason, message)`` when a file's bytes cannot be read as what they are, else None: zip, 7z or lz4
    data (recognised, not read), or a name that says compressed over bytes that are neither a compression
    that is read (gzip, zstd, bz2, xz) nor text. (Bytes of one compression under another's name, and plain
    text named ``.gz``, are read as what they are.)"""
    with open(path, "rb") as f:
        head = f.read(64 << 10)
    claim = claimed(path)
    kind = sniff(path)
    if kind == "plain":
        for other, magic in UNSUPPORTED.items():
            if head.startswith(magic):
                return ("unsupported_compression", f"{other} data (first bytes {head[:8].hex()}): not read; "
                                                   f"unpack it, or recompress it as gzip, zstd, bz2 or xz")
    if claim != "plain" and kind == "plain" and head and not _looks_like_text(head):
        return ("wrong_compression", f"the name says {claim} but the bytes are not {claim}, nor gzip, zstd, bz2, "
                                     f"xz or text (first bytes {head[:8].hex()}); nothing was read")
    return None


def sniff(path: str) -> str:
    """The compression a file really has, from its first bytes (a name can lie)."""
    with open(path, "rb") as f:
        head = f.read(10)
    if head[:3] == GZIP_MAGIC:
        return "gzip"
    if head[:4] == ZSTD_MAGIC or _is_skippable(head):
        return "zstd"
    if _is_bz2(head) or _cut_bz2_header(head):
        return "bz2"
    if head[:6] == XZ_MAGIC:
        return "xz"
    return "plain"


class _Decoder:
    """One member's decoder with the same face for gzip, zstd, bz2 and xz."""

    def __init__(self, kind: str):
        if kind == "gzip":
            self._d = zlib.decompressobj(31)
            self.errors = (zlib.error,)
        elif kind == "zstd":
            import zstandard

            self._d = zstandard.ZstdDecompressor().decompressobj()
            self.errors = (zstandard.ZstdError,)
        elif kind == "bz2":
            self._d = bz2.BZ2Decompressor()
            self.errors = (OSError, ValueError)  # "Invalid data stream"
        elif kind == "xz":
            self._d = lzma.LZMADecompressor(lzma.FORMAT_XZ)
            self.errors = (lzma.LZMAError,)
        else:
            raise ValueError(f"no decoder for {kind!r}")
        self.kind = kind

    def feed(self, data: bytes) -> tuple[bytes, bytes]:
        """Decode ``data``; returns (output, input left over after the member ended or was not consumed).
        At most ``OUT_CHUNK`` bytes come out of one gzip, bz2 or xz call; while ``wants_input`` is False the
        decoder holds more output, and the next call should pass ``b""``."""
        d = self._d
        if self.kind == "gzip":
            out = d.decompress(data, OUT_CHUNK)
            return out, (d.unused_data if d.eof else d.unconsumed_tail)
        if self.kind == "zstd":
            out = d.decompress(data)
            return out, (d.unused_data if d.eof else b"")
        out = d.decompress(data, OUT_CHUNK)  # bz2 / xz keep unconsumed input inside
        return out, (d.unused_data if d.eof else b"")

    @property
    def wants_input(self) -> bool:
        return self.kind in ("gzip", "zstd") or self._d.needs_input

    def piece(self, data: bytes) -> tuple[bytes, bytes]:
        """(what to feed now, what to keep for later) out of the pending input ``data``."""
        if self.kind == "gzip":
            return data, b""
        if not self.wants_input:
            return b"", data
        return data[:65536], data[65536:]

    @property
    def eof(self) -> bool:
        return self._d.eof


def _decode_prefix(buf: bytes, kind: str, n_out: int) -> tuple[bytes, bool]:
    """Decode the member at ``buf[0]`` until ``n_out`` bytes of output; raises the decoder's errors."""
    dec, out, produced, data = _Decoder(kind), [], 0, buf
    while (data or not dec.wants_input) and not dec.eof and produced < n_out:
        piece, tail = dec.piece(data)
        o, left = dec.feed(piece)
        data = left + tail
        out.append(o)
        produced += len(o)
    return b"".join(out), dec.eof


def _probe(buf: bytes, kind: str) -> bytes | None:
    """The first decoded bytes when a valid member starts at ``buf[0]``, else None."""
    try:
        out, eof = _decode_prefix(buf, kind, _PROBE_OUT)
    except _Decoder(kind).errors:
        return None
    return out if (out or eof) else None


def next_member(f, offset: int, kind: str, limit: int | None = None, accept=None) -> int | None:
    """The offset of the first valid member header in ``[offset, limit)``, or None.

    ``accept(first_bytes)`` can reject a member by its decompressed start (a WARC cut must start a record)."""
    magic = MAGIC[kind]
    size = os.fstat(f.fileno()).st_size
    limit = size if limit is None else min(limit, size)
    pos = offset
    while pos < limit:
        f.seek(pos)
        window = f.read(CHUNK + 10)
        if not window:
            return None
        i = window.find(magic)
        while i != -1 and pos + i < limit:
            if kind == "bz2" and not _is_bz2(window[i:i + 10]) and i + 10 <= len(window):
                i = window.find(magic, i + 1)
                continue
            f.seek(pos + i)
            probe = f.read(_PROBE_IN.get(kind, 256 << 10))
            first = _probe(probe, kind)
            if first is not None and (accept is None or accept(first)):
                return pos + i
            i = window.find(magic, i + 1)
        pos += CHUNK
    return None


def split_plan(path: str, fmt: str, target_bytes: int, next_plain, starts_record) -> list[dict]:
    """Splits of about ``target_bytes`` of a record file (``{"path", "format", "start", "stop"}``), cut where a
    record starts: in a plain file at ``next_plain(f, pos, size)`` (an offset or None), in a compressed one at
    the next member whose first bytes ``starts_record``; planning reads a few KiB at each cut."""
    size = os.path.getsize(path)
    cuts = []
    if size > target_bytes:
        kind = sniff(path)
        with open(path, "rb") as f:
            pos = target_bytes
            while pos < size:
                c = (next_plain(f, pos, size) if kind == "plain"
                     else next_member(f, pos, kind, accept=starts_record))
                if c is None:
                    break
                cuts.append(c)
                pos = max(c + 1, pos + target_bytes)
    bounds = [0] + cuts + [None]
    return [{"path": path, "format": fmt, "start": a, "stop": b} for a, b in zip(bounds, bounds[1:])]


def events(path: str, kind: str, start: int = 0):
    """Yield the events described in the module docstring, from compressed offset ``start``."""
    if kind == "plain":
        yield from _plain_events(path, start)
        return
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        f.seek(start)
        off, pending = start, b""  # ``off``: the compressed offset of pending[0]
        while True:
            if len(pending) < 4:
                pending += f.read(CHUNK)
                if not pending:
                    return
            if kind in ("gzip", "xz") and pending.strip(b"\x00") == b"" and len(pending) < CHUNK:
                return  # zero padding after the last member
            if kind == "zstd" and _is_skippable(pending):  # pzstd's index frames: no data, skipped
                if len(pending) < 8:
                    pending += f.read(8)
                off += 8 + int.from_bytes(pending[4:8], "little")
                f.seek(off)
                pending = b""
                continue
            member, dec = off, _Decoder(kind)
            try:
                off, pending = yield from _member_events(f, dec, member, pending)
            except dec.errors as e:
                nxt = next_member(f, member + 1, kind)
                yield ("damage", member, size if nxt is None else nxt, f"{type(e).__name__}: {e}")
                if nxt is None:
                    return
                f.seek(nxt)
                off, pending = nxt, b""
                continue
            if not dec.eof:
                yield ("truncated", member, f"the file ends inside the {kind} member at byte {member}")
                return
            # The member ended; ``pending`` holds what followed it. Resync if it is not a member header.
            if len(pending) < 10:
                pending += f.read(CHUNK)
            if kind == "xz" and pending[:4] == b"\x00\x00\x00\x00":
                off, pending = _skip_xz_padding(f, off, pending)
            magic = MAGIC[kind]
            ok_next = pending.startswith(magic[: len(pending)]) or (kind == "zstd" and _is_skippable(pending))
            if pending and not ok_next and pending.strip(b"\x00"):
                nxt = next_member(f, off, kind)
                yield ("damage", off, size if nxt is None else nxt, "bytes after a member that are not a member")
                if nxt is None:
                    return
                f.seek(nxt)
                off, pending = nxt, b""


def _plain_events(path: str, start: int):
    with open(path, "rb") as f:
        f.seek(start)
        while chunk := f.read(CHUNK):
            yield ("data", 0, chunk)


def _member_events(f, dec: "_Decoder", member: int, pending: bytes):
    """Decode the member starting at compressed offset ``member`` (its first bytes in ``pending``), yielding its
    ``data`` events: held back until the member's end (its checksum) up to ``VERIFY_BYTES``, streamed after.
    Returns ``(offset, pending)`` after the member (or where the file ended: ``dec.eof`` says which); a damaged
    member raises one of ``dec.errors``."""
    off, held, held_len, streaming = member, [], 0, False
    while not dec.eof:
        if not pending and dec.wants_input:
            pending = f.read(CHUNK)
            if not pending:
                break
        piece, tail = dec.piece(pending)
        out, left = dec.feed(piece)
        pending = left + tail
        off += len(piece) - len(left)
        if not out:
            continue
        if streaming:
            yield ("data", member, out)
            continue
        held.append(out)
        held_len += len(out)
        if held_len > VERIFY_BYTES:
            streaming = True
            yield ("data", member, b"".join(held))
            held.clear()
    if held:
        yield ("data", member, b"".join(held))
    return off, pending


def _skip_xz_padding(f, off: int, pending: bytes) -> tuple[int, bytes]:
    """Past xz stream padding (a multiple of 4 zero bytes, read on up to 64 MiB): the offset and bytes after it."""
    body = pending.lstrip(b"\x00")
    while not body and len(pending) < (64 << 20):
        more = f.read(CHUNK)
        if not more:
            break
        pending += more
        body = pending.lstrip(b"\x00")
    off += len(pending) - len(body)
    return off, body or f.read(CHUNK)
