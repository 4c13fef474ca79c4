"""Seekable single-stream gzip: split one ``gzip file.jsonl`` member into line ranges that read independently.

A gzip member cannot be entered in the middle: inflating needs the 32 KiB of output before the point and
the exact bit where a deflate block starts. ``indexed_gzip`` (zran) records such seek points in one pass;
:func:`build` makes that pass once per file when the read step plans its splits, and at the same time

- counts newlines and notes the first line start after every ``GRAIN`` bytes of output, so the splits
  are cut at line starts and each knows how many lines come before it (the ids are line numbers);
- checks the whole stream against the gzip trailer (CRC-32 and length): a file that is not exactly one
  intact member (truncated, damaged, several members, bytes after the member) gets no index, and is
  read as before (:mod:`curate.readers.streams`), which sets its damage aside with a reason.

The index is written atomically (``export_index`` to a temporary name, then renamed). :func:`read_range`
seeks to a split's first byte through it and yields the split's decompressed bytes; each split then costs
its own bytes plus at most one seek-point spacing, instead of everything before it.
"""
from __future__ import annotations

import os
import zlib

import indexed_gzip

from curate.readers.lines import count_ends

CHUNK = 4 << 20
GRAIN = 1 << 20  # candidate cut points: the first line start after every GRAIN bytes of output (less for small splits)
MIN_SPACING, MAX_SPACING = 1 << 20, 16 << 20
ERRORS = (OSError, ValueError, EOFError, zlib.error, indexed_gzip.ZranError)


def spacing_for(target: int) -> int:
    """Seek points every quarter split (index size: 32 KiB per point, about 1% of the gzip at 16 MiB splits)."""
    return max(MIN_SPACING, min(MAX_SPACING, target // 4))


def build(path: str, index_path: str, target: int) -> list[tuple[int, int | None, int]] | None:
    """Index ``path`` into ``index_path``; returns ``[(dstart, dstop, newlines_before)]`` for splits of about
    ``target`` decompressed bytes cut at line starts (``dstop`` None for the last), or None when the file
    is not one intact gzip member (nothing is written then)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        f.seek(max(size - 8, 0))
        trailer = f.read(8)
    if len(trailer) < 8:
        return None
    want_crc, want_len = int.from_bytes(trailer[:4], "little"), int.from_bytes(trailer[4:], "little")
    grain = max(1, min(GRAIN, target // 8))
    candidates = []  # (line start, newlines before it), one per grain of output
    crc, pos, newlines, next_grain, cr = 0, 0, 0, grain, False  # line ends: \n, \r\n or a lone \r
    try:
        with indexed_gzip.IndexedGzipFile(path, spacing=spacing_for(target), readbuf_size=CHUNK) as g:
            while True:
                chunk = g.read(CHUNK)
                if not chunk:
                    break
                crc = zlib.crc32(chunk, crc)
                end = pos + len(chunk)
                while next_grain < end:
                    k = chunk.find(b"\n", max(next_grain - pos, 0))
                    if k == -1:
                        break  # a line longer than the rest of the chunk: look again in the next one
                    cut = pos + k + 1
                    candidates.append((cut, newlines + count_ends(chunk, cr, k + 1)))
                    next_grain = max(next_grain + grain, cut + 1)
                newlines += count_ends(chunk, cr)
                cr = chunk.endswith(b"\r")
                pos = end
            if crc != want_crc or pos % (1 << 32) != want_len or pos == 0:
                return None  # not exactly one intact member: the streaming reader handles (and reports) it
            tmp = os.path.join(os.path.dirname(index_path), f".{os.path.basename(index_path)}.tmp")
            os.makedirs(os.path.dirname(index_path) or ".", exist_ok=True)
            g.export_index(tmp)
        os.replace(tmp, index_path)
    except ERRORS:
        return None
    n = max(1, -(-pos // max(target, 1)))
    cuts, ci = [], 0
    for k in range(1, n):  # the candidate nearest each equal share of the stream
        goal = k * pos // n
        while ci < len(candidates) and candidates[ci][0] < goal:
            ci += 1
        if ci < len(candidates) and candidates[ci][0] < pos and (not cuts or candidates[ci][0] > cuts[-1][0]):
            cuts.append(candidates[ci])
    bounds = [(0, 0)] + cuts
    stops = [c for c, _ in cuts] + [None]
    return [(a, b, nl) for (a, nl), b in zip(bounds, stops)]


def open_at(path: str, index_path: str, dstart: int):
    """``path`` opened through its index and positioned at decompressed offset ``dstart``; None when the
    index is gone or does not fit the file (the caller then reads from the start of the file)."""
    if not os.path.exists(index_path):
        return None
    try:
        g = indexed_gzip.IndexedGzipFile(path, index_file=index_path, skip_crc_check=True, readbuf_size=1 << 20)
    except ERRORS:
        return None
    try:
        g.seek(dstart)
    except ERRORS:
        g.close()
        return None
    return g


def read_range(g, dstart: int, dstop: int | None, chunk: int = 1 << 20):
    """The decompressed bytes ``[dstart, dstop)`` from ``g`` (:func:`open_at`), in chunks; closes ``g``."""
    with g:
        left = None if dstop is None else dstop - dstart
        while left is None or left > 0:
            data = g.read(chunk if left is None else min(chunk, left))
            if not data:
                return
            if left is not None:
                left -= len(data)
            yield data
