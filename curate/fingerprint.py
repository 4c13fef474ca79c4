"""Input fingerprints: size, modification time and a hash of the first and last MiB of every input.

``run.json`` records them; a rerun whose inputs changed stops with a message listing them
(``curate run --allow-changed-inputs`` redoes the read tasks of the changed files and what follows).
"""
from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

EDGE = 1 << 20  # bytes hashed at each end of a file


def fingerprint(path: str) -> dict:
    st = os.stat(path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read(EDGE))
        if st.st_size > EDGE:
            f.seek(max(EDGE, st.st_size - EDGE))
            h.update(f.read(EDGE))
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "edges_sha256": h.hexdigest()}


def fingerprints(paths: list[str]) -> dict[str, dict]:
    """Fingerprints of many files (read in a few threads: the work is waiting for the disk)."""
    with ThreadPoolExecutor(max_workers=min(8, max(1, len(paths)))) as pool:
        return dict(zip(paths, pool.map(fingerprint, paths)))


def changed(previous: dict[str, dict], current: dict[str, dict]) -> list[str]:
    """Lines naming each input whose fingerprint differs, and how."""
    lines = []
    for path, now in current.items():
        was = previous.get(path)
        if was is None or was == now:
            continue
        what = []
        if was.get("size") != now["size"]:
            what.append(f"size {was.get('size')} -> {now['size']}")
        if was.get("mtime_ns") != now["mtime_ns"]:
            what.append("modified")
        if was.get("edges_sha256") != now["edges_sha256"]:
            what.append("content")
        lines.append(f"{path} ({', '.join(what)})")
    return lines
