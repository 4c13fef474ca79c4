"""Input fingerprints: size, modification time, a hash of the first and last MiB of every input, and a hash of
a few blocks sampled across it.

``run.json`` records them; a rerun whose inputs changed stops with a message listing them
(``curate run --allow-changed-inputs`` redoes the read tasks of the changed files and what follows).

``sample_sha256`` (``SAMPLE_BLOCKS`` blocks of 64 KiB, evenly spaced from the first byte to the last) is what a
read task checks again before and after reading (``curate.tasks.check_unchanged``): a file rewritten in place
with the same size and its modification time put back is caught when the rewrite touches a sampled block. It
costs at most 512 KiB of reading per check whatever the file's size, and depends only on the bytes (a copy of
the file elsewhere has the same one, unlike an inode or a ctime). Records written before it existed lack it: a
missing key is unknown, never a change.
"""
from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

EDGE = 1 << 20  # bytes hashed at each end of a file
SAMPLE_BLOCK = 64 << 10  # bytes of one sampled block
SAMPLE_BLOCKS = 8  # blocks sampled per file: the first, the last and six evenly spaced between
SAMPLE = "sample_sha256"


def fingerprint(path: str) -> dict:
    st = os.stat(path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        head = f.read(EDGE)
        h.update(head)
        if st.st_size > EDGE:
            f.seek(max(EDGE, st.st_size - EDGE))
            h.update(f.read(EDGE))
        if len(head) == st.st_size <= SAMPLE_BLOCK * SAMPLE_BLOCKS:  # the whole file, read already
            sample = hashlib.sha256(str(st.st_size).encode() + head).hexdigest()
        else:
            sample = _sample(f, st.st_size)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "edges_sha256": h.hexdigest(), SAMPLE: sample}


def sample_offsets(size: int) -> list[int]:
    """Where the sampled blocks start: the whole file when it is no larger than the blocks together."""
    if size <= SAMPLE_BLOCK * SAMPLE_BLOCKS:
        return [0]
    last = size - SAMPLE_BLOCK
    return [last * i // (SAMPLE_BLOCKS - 1) for i in range(SAMPLE_BLOCKS)]


def content_sample(path: str) -> str:
    """``sample_sha256`` of the file as it is now (OSError when it cannot be read)."""
    with open(path, "rb") as f:
        return _sample(f, os.fstat(f.fileno()).st_size)


def _sample(f, size: int) -> str:
    h = hashlib.sha256(str(size).encode())
    whole = size <= SAMPLE_BLOCK * SAMPLE_BLOCKS
    for offset in sample_offsets(size):
        f.seek(offset)
        h.update(f.read(size if whole else SAMPLE_BLOCK))
    return h.hexdigest()


def fingerprints(paths: list[str]) -> dict[str, dict]:
    """Fingerprints of many files (read in a few threads: the work is waiting for the disk)."""
    with ThreadPoolExecutor(max_workers=min(8, max(1, len(paths)))) as pool:
        return dict(zip(paths, pool.map(fingerprint, paths)))


def differences(was: dict, now: dict) -> list[str]:
    """How ``now`` differs from ``was`` (empty: the same file); a key one of them lacks is not compared."""
    what = []
    if was.get("size") != now.get("size"):
        what.append(f"size {was.get('size')} -> {now.get('size')}")
    if was.get("mtime_ns") != now.get("mtime_ns"):
        what.append("modified")
    if any(k in was and k in now and was[k] != now[k] for k in ("edges_sha256", SAMPLE)):
        what.append("content")
    return what


def changed(previous: dict[str, dict], current: dict[str, dict]) -> list[str]:
    """Lines naming each input whose fingerprint differs, and how."""
    lines = []
    for path, now in current.items():
        was = previous.get(path)
        what = differences(was, now) if was is not None else []
        if what:
            lines.append(f"{path} ({', '.join(what)})")
    return lines


def as_recorded(previous: dict[str, dict], current: dict[str, dict]) -> dict[str, dict]:
    """What ``run.json`` records: an unchanged file keeps its earlier record (one written before a key existed
    lacks it, so the keys of the tasks that read it, and their markers, stay what they were), a changed or new
    file its current fingerprint."""
    return {path: previous[path] if path in previous and not differences(previous[path], now) else now
            for path, now in current.items()}
