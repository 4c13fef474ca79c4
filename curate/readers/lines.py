"""Cut a stream of events (see :mod:`curate.readers.streams`) into lines, each tagged with where it starts.

A line ends at ``\\n``, ``\\r\\n`` or a lone ``\\r`` (old Mac files), as Python's universal newlines do; a ``\\r\\n``
is one line end, even where a chunk ends between its two bytes (but not across two members: each member's
lines are counted on their own). A line is tagged ``(member, j, dpos)``: the compressed offset of the member its
first byte is in, the number of line ends before it inside that member (for a plain file: in the whole file),
and its position in the decompressed stream. ``member`` and ``j`` do not depend on where reading began, so they
make stable ids.
"""
from __future__ import annotations

PREFIX = 10000  # bytes of a too-long or cut line kept in its set-aside row


def count_ends(data: bytes, cr: bool = False, end: int | None = None) -> int:
    """Line ends in ``data[:end]``; ``cr``: the bytes before ``data`` ended with ``\\r`` (a ``\\n`` first completes
    that line end: it is not another)."""
    end = len(data) if end is None else end
    n = data.count(b"\n", 0, end) - (cr and end > 0 and data[:1] == b"\n")
    if data.find(b"\r", 0, end) == -1:  # (the common case: one count)
        return n
    return n + data.count(b"\r", 0, end) - data.count(b"\r\n", 0, end)


def split_lines(evts, *, max_line: int, j0: int = 0, base: int = 0, skip_until: int = 0):
    """Yield ``("line", member, j, dpos, raw, length)`` (``raw`` is only a prefix when ``length > len(raw)``:
    the line was longer than ``max_line``), ``("damage", offset, end, message, dpos)`` and
    ``("truncated", member, message, dpos, line_start, prefix)``. Lines starting before ``skip_until`` are
    counted but not yielded."""
    buf, length, start = bytearray(), 0, None  # the line in progress and its (member, j, dpos)
    cur, j, dpos = None, j0, base
    cr = False  # the last line ended with a "\r" that was the last byte of its chunk
    for ev in evts:
        if ev[0] == "damage":
            buf.clear()
            length, start, cr = 0, None, False
            yield (*ev, dpos)
            continue
        if ev[0] == "truncated":
            yield (*ev, dpos, start, bytes(buf[:PREFIX]))
            return
        _, member, data = ev
        if member != cur:
            if cur is not None:
                j = 0
            cur, cr = member, False
        n, crs = len(data), b"\r" in data  # (a chunk without "\r" is searched for "\n" only)
        if dpos + n <= skip_until:  # fast path: nothing here is yielded
            last = max(data.rfind(b"\n"), data.rfind(b"\r") if crs else -1)
            if last != -1:
                j += count_ends(data, cr)
                start = (member, j, dpos + last + 1) if last + 1 < n else None
            elif start is None:
                start = (member, j, dpos)
            cr = data.endswith(b"\r")
            buf.clear()
            dpos += n
            continue
        i = 0
        if cr and data[:1] == b"\n":  # the rest of a "\r\n" cut between two chunks
            i, dpos = 1, dpos + 1
        cr = False
        while i < n:
            if start is None:
                start = (member, j, dpos)
            k = data.find(b"\n", i)
            r = data.find(b"\r", i, n if k == -1 else k) if crs else -1
            if r != -1:  # a "\r" ends the line first; with a "\n" right after it, the two are one line end
                k = r + 1 if data[r + 1:r + 2] == b"\n" else r
                cr = k == n - 1 and data[k:k + 1] == b"\r"
            end = n if k == -1 else k + 1
            room = max_line - len(buf)
            if room > 0:
                buf += data[i:min(end, i + room)]
            length += end - i
            dpos += end - i
            i = end
            if k == -1:
                break
            if start[2] >= skip_until:
                line = bytes(buf[:PREFIX]) if length > max_line else bytes(buf)
                buf.clear()  # (before the line is handed on: a long line is not held twice while it is parsed)
                yield ("line", *start, line, length)
                del line
            buf.clear()
            length, start = 0, None
            j += 1
    if start is not None and length and start[2] >= skip_until:
        yield ("line", *start, bytes(buf[:PREFIX]) if length > max_line else bytes(buf), length)
