"""Decompressed bytes of an input file as a stream of events, resynchronising after damage.

``events(path, kind, start)`` reads the file from compressed offset ``start`` and yields:

- ``("data", member, bytes)``: decompressed bytes of the gzip member / zstd frame that starts at compressed
  offset ``member`` (for a plain file: ``member`` is 0 and the bytes are the file's own);
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

import os
import zlib

CHUNK = 1 << 20
OUT_CHUNK = 1 << 20
VERIFY_BYTES = 16 << 20
_PROBE_OUT = 64 << 10

GZIP_MAGIC = b"\x1f\x8b\x08"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _is_skippable(buf: bytes) -> bool:
    """A zstd skippable frame (magic 0x184D2A50-0x184D2A5F) starts ``buf``."""
    return len(buf) >= 4 and buf[1:4] == b"\x2a\x4d\x18" and 0x50 <= buf[0] <= 0x5F


# What a name claims, and the compressions that are recognised but not read (set aside with a reason).
CLAIMS = ((".gz", "gzip"), (".zst", "zstd"), (".bz2", "bz2"), (".xz", "xz"))
UNSUPPORTED = {"bz2": b"BZh", "xz": b"\xfd7zXZ\x00"}


def claimed(path: str) -> str:
    """The compression a file's name says it has ("plain" when none)."""
    lower = path.lower()
    return next((kind for suffix, kind in CLAIMS if lower.endswith(suffix)), "plain")


def _looks_like_text(head: bytes) -> bool:
    """Almost no control characters (any 8-bit text encoding passes; random or compressed bytes have ~11%)."""
    controls = sum(head.count(bytes([c])) for c in range(32) if c not in (9, 10, 12, 13)) + head.count(b"\x7f")
    return controls <= len(head) // 100


def unreadable(path: str) -> tuple[str, str] | None:
    """``(reason, message)`` when a file's bytes cannot be read as what they are, else None: bz2/xz data
    (recognised, not read), or a name that says compressed over bytes that are neither gzip, zstd nor text.
    (gzip bytes named ``.zst``, zstd bytes named ``.gz`` and plain text named ``.gz`` are read as what they are.)"""
    with open(path, "rb") as f:
        head = f.read(64 << 10)
    for kind, magic in UNSUPPORTED.items():
        if head.startswith(magic) and (kind != "bz2" or head[4:10] == b"1AY&SY" or len(head) < 64):
            return ("unsupported_compression", f"{kind}-compressed data (first bytes {head[:8].hex()}): "
                                               f"not read; recompress it as gzip or zstd")
    claim = claimed(path)
    if claim != "plain" and sniff(path) == "plain" and head and not _looks_like_text(head):
        return ("wrong_compression", f"the name says {claim} but the bytes are not {claim}, nor gzip, zstd or "
                                     f"text (first bytes {head[:8].hex()}); nothing was read")
    return None


def sniff(path: str) -> str:
    """The compression a file really has, from its first bytes (a name can lie)."""
    with open(path, "rb") as f:
        head = f.read(4)
    if head[:3] == GZIP_MAGIC:
        return "gzip"
    if head == ZSTD_MAGIC or _is_skippable(head):
        return "zstd"
    return "plain"


class _Decoder:
    """One member's decoder with the same face for gzip and zstd."""

    def __init__(self, kind: str):
        if kind == "gzip":
            self._d = zlib.decompressobj(31)
            self.errors = (zlib.error,)
        else:
            import zstandard

            self._d = zstandard.ZstdDecompressor().decompressobj()
            self.errors = (zstandard.ZstdError,)
        self.kind = kind

    def feed(self, data: bytes) -> tuple[bytes, bytes]:
        """Decode ``data``; returns (output, input left over after the member ended or was not consumed)."""
        if self.kind == "gzip":
            out = self._d.decompress(data, OUT_CHUNK)
            return out, (self._d.unused_data if self._d.eof else self._d.unconsumed_tail)
        out = self._d.decompress(data)
        return out, (self._d.unused_data if self._d.eof else b"")

    @property
    def eof(self) -> bool:
        return self._d.eof


def _decode_prefix(buf: bytes, kind: str, n_out: int) -> tuple[bytes, bool]:
    """Decode the member at ``buf[0]`` until ``n_out`` bytes of output; raises the decoder's errors."""
    dec, out, produced, data = _Decoder(kind), [], 0, buf
    while data and not dec.eof and produced < n_out:
        piece, tail = (data, b"") if kind == "gzip" else (data[:65536], data[65536:])
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
    magic = GZIP_MAGIC if kind == "gzip" else ZSTD_MAGIC
    size = os.fstat(f.fileno()).st_size
    limit = size if limit is None else min(limit, size)
    pos = offset
    while pos < limit:
        f.seek(pos)
        window = f.read(CHUNK + len(magic))
        if not window:
            return None
        i = window.find(magic)
        while i != -1 and pos + i < limit:
            f.seek(pos + i)
            probe = f.read(256 << 10)
            first = _probe(probe, kind)
            if first is not None and (accept is None or accept(first)):
                return pos + i
            i = window.find(magic, i + 1)
        pos += CHUNK
    return None


def events(path: str, kind: str, start: int = 0):
    """Yield the events described in the module docstring, from compressed offset ``start``."""
    if kind == "plain":
        with open(path, "rb") as f:
            f.seek(start)
            while True:
                chunk = f.read(CHUNK)
                if not chunk:
                    return
                yield ("data", 0, chunk)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        f.seek(start)
        off, pending = start, b""  # ``off``: the compressed offset of pending[0]
        while True:
            if len(pending) < 4:
                pending += f.read(CHUNK)
                if not pending:
                    return
            if kind == "gzip" and pending.strip(b"\x00") == b"" and len(pending) < CHUNK:
                return  # zero padding after the last member
            if kind == "zstd" and _is_skippable(pending):  # pzstd's index frames: no data, skipped
                if len(pending) < 8:
                    pending += f.read(8)
                skip = 8 + int.from_bytes(pending[4:8], "little")
                off += skip
                f.seek(off)
                pending = b""
                continue
            member, dec, held, held_len, streaming = off, _Decoder(kind), [], 0, False
            try:
                while not dec.eof:
                    if not pending:
                        pending = f.read(CHUNK)
                        if not pending:
                            break
                    piece, tail = (pending, b"") if kind == "gzip" else (pending[:65536], pending[65536:])
                    out, left = dec.feed(piece)
                    pending = left + tail
                    off += len(piece) - len(left)
                    if out:
                        if streaming:
                            yield ("data", member, out)
                        else:
                            held.append(out)
                            held_len += len(out)
                            if held_len > VERIFY_BYTES:
                                streaming = True
                                yield ("data", member, b"".join(held))
                                held.clear()
            except dec.errors as e:
                nxt = next_member(f, member + 1, kind)
                yield ("damage", member, size if nxt is None else nxt, f"{type(e).__name__}: {e}")
                if nxt is None:
                    return
                f.seek(nxt)
                off, pending = nxt, b""
                continue
            if held:
                yield ("data", member, b"".join(held))
            if not dec.eof:
                yield ("truncated", member, f"the file ends inside the {kind} member at byte {member}")
                return
            # The member ended; ``pending`` holds what followed it. Resync if it is not a member header.
            if len(pending) < 4:
                pending += f.read(CHUNK)
            magic = GZIP_MAGIC if kind == "gzip" else ZSTD_MAGIC
            ok_next = pending.startswith(magic[: len(pending)]) or (kind == "zstd" and _is_skippable(pending))
            if pending and not ok_next and pending.strip(b"\x00"):
                nxt = next_member(f, off, kind)
                yield ("damage", off, size if nxt is None else nxt, "bytes after a member that are not a member")
                if nxt is None:
                    return
                f.seek(nxt)
                off, pending = nxt, b""
