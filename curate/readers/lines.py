"""Cut a stream of events (see :mod:`curate.readers.streams`) into lines, each tagged with where it starts.

A line is tagged ``(member, j, dpos)``: the compressed offset of the member its first byte is in, the number
of newlines before it inside that member (for a plain file: in the whole file), and its position in the
decompressed stream. ``member`` and ``j`` do not depend on where reading began, so they make stable ids.
"""
from __future__ import annotations

PREFIX = 10000  # bytes of a too-long or cut line kept in its set-aside row


def split_lines(evts, *, max_line: int, j0: int = 0, base: int = 0, skip_until: int = 0):
    """Yield ``("line", member, j, dpos, raw, length)`` (``raw`` is only a prefix when ``length > len(raw)``:
    the line was longer than ``max_line``), ``("damage", offset, end, message, dpos)`` and
    ``("truncated", member, message, dpos, line_start, prefix)``. Lines starting before ``skip_until`` are
    counted but not yielded."""
    buf, length, start = bytearray(), 0, None  # the line in progress and its (member, j, dpos)
    cur, j, dpos = None, j0, base
    for ev in evts:
        if ev[0] == "damage":
            buf.clear()
            length, start = 0, None
            yield (*ev, dpos)
            continue
        if ev[0] == "truncated":
            yield (*ev, dpos, start, bytes(buf[:PREFIX]))
            return
        _, member, data = ev
        if member != cur:
            if cur is not None:
                j = 0
            cur = member
        n = len(data)
        if dpos + n <= skip_until:  # fast path: nothing here is yielded
            count = data.count(b"\n")
            if count:
                last = data.rfind(b"\n")
                j += count
                start = (member, j, dpos + last + 1) if last + 1 < n else None
            elif start is None:
                start = (member, j, dpos)
            buf.clear()
            dpos += n
            continue
        i = 0
        while i < n:
            if start is None:
                start = (member, j, dpos)
            k = data.find(b"\n", i)
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
                yield ("line", *start, bytes(buf[:PREFIX]) if length > max_line else bytes(buf), length)
            buf.clear()
            length, start = 0, None
            j += 1
    if start is not None and length and start[2] >= skip_until:
        yield ("line", *start, bytes(buf[:PREFIX]) if length > max_line else bytes(buf), length)
