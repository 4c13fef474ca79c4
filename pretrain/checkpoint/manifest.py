"""Integrity of a checkpoint folder (imports nothing of pretrain): ``manifest.json`` records every file's size
and SHA-256 when it is saved; :func:`problems` compares the folder with it.

``manifest.json``::

    {"format": 1, "algorithm": "sha256",
     "files": {"dcp/.metadata": {"size": 221480, "sha256": "..."}, "dcp/__0_0.distcp": {...}, "meta.json": {...}}}

The manifest is written (atomically) after every rank's files are on disk and before ``latest`` moves, so a
checkpoint that ``latest`` names always has one. Checksums catch accidents (a truncated copy, a flipped bit, a
file deleted); they are no defence against someone who rewrites the manifest too: that is what the restricted
loaders of :mod:`pretrain.checkpoint.safe_load` are for.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path, PurePosixPath

from curate import json_files

MANIFEST = "manifest.json"
ALGORITHM = "sha256"
_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")


def entry_problem(name, want) -> str | None:
    """Why a manifest entry ``name: want`` is unusable (None: well-formed): ``name`` a relative path inside the
    folder, ``want`` ``{"size": non-negative int, "sha256": 64 hex digits}``."""
    if not isinstance(name, str) or not name or "\x00" in name or "\\" in name:
        return "its name is not a file name"
    pure = PurePosixPath(name)
    if pure.is_absolute() or ".." in pure.parts:
        return "its name leads outside the checkpoint folder"
    if not isinstance(want, dict):
        return "it is not an object"
    size = want.get("size")
    if type(size) is not int or size < 0:
        return f"its size is {size!r}, not a non-negative integer"
    digest = want.get(ALGORITHM)
    if not isinstance(digest, str) or not _HEX_DIGEST.fullmatch(digest.lower()):
        return f"its {ALGORITHM} is not a hexadecimal digest"
    return None


def file_digest(path: Path) -> dict:
    with open(path, "rb") as f:
        digest = hashlib.file_digest(f, ALGORITHM).hexdigest()
    return {"size": os.path.getsize(path), ALGORITHM: digest}


def checkpoint_files(d: Path) -> list[str]:
    """Every file of checkpoint folder ``d`` but the manifest, as sorted relative POSIX paths."""
    d = Path(d)
    def recorded(p: Path) -> bool:  # not the manifest, not a temporary ".name.tmpPID" of an atomic write
        return p.is_file() and p.name != MANIFEST and (p.name == ".metadata" or not p.name.startswith("."))

    return sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if recorded(p))


def digests(d: Path, names: list[str]) -> dict:
    return {name: file_digest(Path(d) / name) for name in names}


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: readers see the old file or the new."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():  # a write or rename that failed (a full disk) leaves no temp file behind
            tmp.unlink()


def write_manifest(d: Path, files: dict) -> None:
    write_atomic(Path(d) / MANIFEST, json.dumps({"format": 1, "algorithm": ALGORITHM,
                                                  "files": dict(sorted(files.items()))}, indent=1))


def has_manifest(d: Path) -> bool:
    """Whether ``d`` has a manifest: anything under its name (a FIFO, a folder) is one, found unreadable by
    :func:`problems`, not a missing one (which makes an older, unverifiable checkpoint)."""
    return os.path.lexists(Path(d) / MANIFEST)


def read_by_a_load(name: str) -> bool:
    """Whether a load reads the file ``name`` of a checkpoint folder: the DCP files, the RNG states, the JSON
    files beside them."""
    return name.startswith(("dcp/", "rng/")) or ("/" not in name and name.endswith(".json"))


def unlisted(d: Path, files: dict) -> list[str]:
    """The files of ``d`` a load reads that the manifest's ``files`` does not list: a manifest whose list was
    emptied or cut passed damaged weights as intact."""
    return [name for name in checkpoint_files(d) if read_by_a_load(name) and name not in files]


def problems(d: Path, part: int = 0, parts: int = 1) -> list[str]:
    """What is wrong with checkpoint folder ``d`` against its manifest (empty: intact). A folder without a
    manifest gives one problem; the caller decides whether an unverifiable (older) checkpoint is acceptable.
    ``part``/``parts``: check only every ``parts``-th recorded file from the ``part``-th (ranks share the
    hashing; the manifest itself is read by every one)."""
    d = Path(d)
    try:
        manifest = json_files.read_json(d / MANIFEST)
        files = manifest["files"]
        if manifest.get("algorithm") != ALGORITHM or not isinstance(files, dict):
            return [f"{MANIFEST} has an unknown layout"]
    except FileNotFoundError:
        return [f"no {MANIFEST}"]
    except (ValueError, KeyError, TypeError) as e:
        return [f"{MANIFEST} is unreadable ({e})"]
    out = [f"{name} is not in {MANIFEST} (its list was cut short, or the file was added)"
           for name in (unlisted(d, files) if part == 0 else [])]
    for name, want in sorted(files.items())[part::parts]:
        why = entry_problem(name, want)
        if why:
            out.append(f"{MANIFEST} has an unreadable entry for {name!r} ({why})")
            continue
        path = d / name
        if not path.is_file():
            from curate.file_kind import file_problem

            out.append(f"{name} {'is missing' if not os.path.lexists(path) else file_problem(path)}")
            continue
        size = os.path.getsize(path)
        if size != want["size"]:
            out.append(f"{name} has {size:,} bytes, the manifest says {want['size']:,}"
                       + (" (truncated)" if size < want["size"] else ""))
            continue
        if file_digest(path)[ALGORITHM] != want[ALGORITHM].lower():
            out.append(f"{name} does not match its {ALGORITHM} checksum (corrupted)")
    return out
