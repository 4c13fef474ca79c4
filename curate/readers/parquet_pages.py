"""The pages of one Parquet column chunk, from their headers: how many values each holds and how many bytes it
decodes to, read without decoding any page (pyarrow reads a page whole, whatever the batch size asked, and does
not say how large its pages are).

A page header is a Thrift struct in the compact protocol (parquet-format's ``PageHeader``: 1 ``type``,
2 ``uncompressed_page_size``, 3 ``compressed_page_size``, 5 ``data_page_header``, 7 ``dictionary_page_header``,
8 ``data_page_header_v2``; the first field of each of those three is ``num_values``); the page's bytes follow
it. Only those fields are read; the rest (statistics, CRCs) are skipped by their lengths. A header is read from
at most ``MAX_HEADER_BYTES`` (parquet-cpp's own limit), and walked over at most ``MAX_HEADER_ITEMS`` fields and
elements: a real header holds a few dozen, and the walk is Python, so 16 MB of one-byte list elements took 6 s a
header (parquet-cpp parses such a header in milliseconds and would decode the page behind it: a header that
is refused is not passed to pyarrow unchecked, see ``HeaderRefused``)."""
from __future__ import annotations

from dataclasses import dataclass

MAX_HEADER_BYTES = 16 << 20
MAX_HEADER_ITEMS = 100_000
MAX_PAGES = 1 << 20  # a column chunk of more pages is not walked (the caller reads it as before)


@dataclass(frozen=True)
class Page:
    kind: int            # 0 data, 2 dictionary, 3 data v2 (parquet-format's PageType)
    values: int          # num_values (rows, nulls included, for a top-level column)
    decoded_bytes: int   # uncompressed_page_size
    stored_bytes: int    # compressed_page_size

    @property
    def is_data(self) -> bool:
        return self.kind in (0, 3)


class HeaderRefused(ValueError):
    """A page header too intricate to walk (more than ``MAX_HEADER_ITEMS`` fields and elements). Unlike other
    ``ValueError``s of the walk (headers pyarrow will reject in turn), pyarrow may read such a header and
    decode the page behind it unchecked: the caller sets the row group aside."""


class _Truncated(Exception):
    """The header runs past the bytes read so far."""


def column_pages(f, start: int, total: int, values: int | None = None) -> list[Page]:
    """The pages of the column chunk stored at ``start`` for ``total`` bytes (its ``dictionary_page_offset``, or
    ``data_page_offset`` when it has no dictionary page, and its ``total_compressed_size``) in the binary file
    ``f``, up to the data page that brings the chunk's ``values`` (its ``num_values``; pyarrow reads no further,
    so bytes after that page cannot hide one). ``ValueError`` when the headers do not walk to the end of the
    chunk."""
    pages: list[Page] = []
    pos, end = start, start + total
    seen = 0
    while pos < end and (values is None or seen < values):
        if len(pages) >= MAX_PAGES:
            raise ValueError(f"more than {MAX_PAGES} pages in one column chunk")
        page, size = _header_at(f, pos)
        if page.stored_bytes < 0 or page.decoded_bytes < 0 or page.values < 0:
            raise ValueError(f"a page header at byte {pos} with a negative size")
        pages.append(page)
        pos += size + page.stored_bytes
        seen += page.values if page.is_data else 0
    if pos > end or (values is None and pos != end):
        raise ValueError(f"the pages end at byte {pos}, not at the column chunk's end {end}")
    return pages


def chunk_pages(f, chunk) -> list[Page]:
    """``column_pages`` of a column chunk given by its pyarrow metadata (``ColumnChunkMetaData``): from its
    dictionary page, or its first data page, up to its ``num_values``."""
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page and chunk.dictionary_page_offset else \
        chunk.data_page_offset
    return column_pages(f, start, chunk.total_compressed_size, chunk.num_values)


def _header_at(f, pos: int) -> tuple[Page, int]:
    want = 256
    while True:
        f.seek(pos)
        data = f.read(want)
        try:
            return _page_header(data)
        except _Truncated:
            if len(data) < want or want >= MAX_HEADER_BYTES:
                raise ValueError(f"a page header at byte {pos} that does not end (within {want} bytes)") from None
            want = min(want * 16, MAX_HEADER_BYTES)


def _page_header(data: bytes) -> tuple[Page, int]:
    r = _Reader(data)
    kind = decoded = stored = values = None
    for fid, ftype in r.fields():
        if fid in (1, 2, 3) and ftype == 5:
            v = r.varint_zigzag()
            if fid == 1:
                kind = v
            elif fid == 2:
                decoded = v
            else:
                stored = v
        elif fid in (5, 7, 8) and ftype == 12:
            for sub, stype in r.fields():
                if sub == 1 and stype == 5:
                    values = r.varint_zigzag()
                else:
                    r.skip(stype)
        else:
            r.skip(ftype)
    if kind is None or decoded is None or stored is None:
        raise ValueError("a page header without its type or sizes")
    return Page(kind, values or 0, decoded, stored), r.pos


class _Reader:
    """Thrift's compact protocol, enough to walk and skip a struct."""

    def __init__(self, data: bytes):
        self.data, self.pos, self.depth, self.items = data, 0, 0, 0

    def count(self) -> None:
        self.items += 1
        if self.items > MAX_HEADER_ITEMS:
            raise HeaderRefused(f"a page header of more than {MAX_HEADER_ITEMS:,} fields and elements "
                                "(a real one holds a few dozen)")

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise _Truncated
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        out, shift = 0, 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 63:
                raise ValueError("a varint longer than 10 bytes")

    def varint_zigzag(self) -> int:
        v = self.varint()
        return (v >> 1) ^ -(v & 1)

    def fields(self):
        """(field id, type) of each field of the struct that starts here, up to its stop byte."""
        self.depth += 1
        if self.depth > 64:
            raise ValueError("structs nested more than 64 deep")
        fid = 0
        while True:
            b = self.byte()
            if b == 0:
                self.depth -= 1
                return
            delta, ftype = b >> 4, b & 0x0F
            fid = fid + delta if delta else self.varint_zigzag()
            self.count()
            yield fid, ftype

    def skip(self, ftype: int, element: bool = False) -> None:
        if element:
            self.count()
        if ftype in (1, 2):  # a field's boolean lives in its type byte; an element's is a byte of its own
            if element:
                self.byte()
            return
        if ftype in (9, 10, 11):
            self.depth += 1
            try:
                if self.depth > 64:
                    raise ValueError("containers nested more than 64 deep")
                self._skip_container(ftype)
            finally:
                self.depth -= 1
            return
        if ftype == 3:
            self.byte()
        elif ftype in (4, 5, 6):
            self.varint()
        elif ftype == 7:
            self._advance(8)
        elif ftype == 8:
            self._advance(self.varint())
        elif ftype == 12:
            for _, t in self.fields():
                self.skip(t)
        else:
            raise ValueError(f"a Thrift field of unknown type {ftype}")

    def _skip_container(self, ftype: int) -> None:
        if ftype in (9, 10):
            b = self.byte()
            n, etype = b >> 4, b & 0x0F
            if n == 15:
                n = self.varint()
            for _ in range(n):
                self.skip(etype, True)
        elif ftype == 11:
            n = self.varint()
            if n:
                b = self.byte()
                for _ in range(n):
                    self.skip(b >> 4, True)
                    self.skip(b & 0x0F, True)

    def _advance(self, n: int) -> None:
        if n < 0:
            raise ValueError("a negative length")
        self.pos += n
        if self.pos > len(self.data):
            raise _Truncated
