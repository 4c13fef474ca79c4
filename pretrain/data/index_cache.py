"""The index cache: one folder of ``<name>.npy`` arrays plus ``index.json`` naming the key they were built for
(:class:`IndexCache`), built so that a blend over thousands of datasets stays fast: small arrays are read and large
ones memory-mapped at the data offset ``index.json`` records (no header parse, one file descriptor per large array
only), and a blend build writes its files with one sync at the end (:class:`deferred_sync`) instead of an fsync
per file.
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
from pathlib import Path

import numpy as np

from curate import json_files
from pretrain.data.indexed import atomic_file


def cache_key(description: dict) -> str:
    return hashlib.sha256(json.dumps(description, sort_keys=True).encode()).hexdigest()


class IndexCache:
    """One folder of ``<name>.npy`` arrays plus ``index.json`` naming the key they were built for.

    Writers hold an exclusive ``flock`` on ``.lock``, delete ``index.json`` first, write every array under
    a temporary name and rename it into place, and write ``index.json`` last; readers hold a shared lock
    while they check the key and open the arrays (memory-mapped). So an array is only ever read under
    the ``index.json`` of the build that wrote it: never half-written, never from other parameters.
    """

    META = "index.json"

    def __init__(self, directory: str | Path):
        self.dir = Path(directory)

    def _lock(self, exclusive: bool):
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        return fd

    @staticmethod
    def _unlock(fd) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def _load_unlocked(self, key: str, names) -> tuple[dict, dict] | None:
        meta_path = self.dir / self.META
        try:
            meta = json_files.read_json(meta_path)
        except (OSError, ValueError):
            return None
        if not isinstance(meta, dict) or meta.get("key") != key:
            return None
        try:
            arrays = {n: _open_array(self.dir / f"{n}.npy", meta.get("arrays", {}).get(n)) for n in names}
        except (FileNotFoundError, ValueError, TypeError, KeyError):
            return None
        return arrays, meta.get("info", {})

    def load(self, key: str, names) -> tuple[dict, dict] | None:
        if not (self.dir / self.META).exists():
            return None
        fd = self._lock(exclusive=False)
        try:
            return self._load_unlocked(key, names)
        finally:
            self._unlock(fd)

    def _save_unlocked(self, key: str, description: dict, arrays: dict, info: dict) -> None:
        """:meth:`_write`; a write the disk could not hold is an ``OSError`` naming the file and saying the disk is
        full (``np.save`` says only "N requested and M written", with no errno and no path)."""
        from curate.os_errors import MACHINE_ERRNOS, errno_of

        self._writing = self.dir
        try:
            self._write(key, description, arrays, info)
        except OSError as e:
            code = errno_of(e)
            if code not in MACHINE_ERRNOS:
                raise
            full = code in (errno.ENOSPC, errno.EDQUOT)
            raise OSError(code, f"{os.strerror(code)} writing the index cache"
                          + (" (the disk is full: free space or choose another cache folder)" if full else ""),
                          str(self._writing)) from None

    def _write(self, key: str, description: dict, arrays: dict, info: dict) -> None:
        meta_path = self.dir / self.META
        if meta_path.exists():
            meta_path.unlink()
        durable = not _DEFERRED_SYNC["active"]  # in a blend build: one sync at its end, not four fsyncs per dataset
        offsets, headers = {}, {}
        for name, arr in arrays.items():
            arr = np.ascontiguousarray(arr)
            self._writing = self.dir / f"{name}.npy"
            with atomic_file(self._writing, durable) as f:
                np.save(f, arr, allow_pickle=False)
                offsets[name] = f.tell() - arr.nbytes  # where the data starts: a load maps it without parsing
            with open(self.dir / f"{name}.npy", "rb") as f:
                headers[name] = f.read(offsets[name]).decode("latin1")
        meta = {"key": key, "description": description, "info": info,
                "arrays": {n: {"dtype": str(np.asarray(a).dtype), "shape": list(np.shape(a)), "offset": offsets[n],
                               "header": headers[n]}
                           for n, a in arrays.items()}}
        self._writing = meta_path
        with atomic_file(meta_path, durable) as f:
            f.write((json.dumps(meta, indent=2, sort_keys=True) + "\n").encode())
        if not durable:
            _DEFERRED_SYNC["pending"].add(str(self.dir))

    def get_or_build(self, key: str, description: dict, names, build):
        """The cached arrays for ``key``, or ``build() -> (arrays, info)`` run once, saved and returned."""
        hit = self.load(key, names)
        if hit is not None:
            return hit
        fd = self._lock(exclusive=True)
        try:
            hit = self._load_unlocked(key, names)  # another process may have built it meanwhile
            if hit is not None:
                return hit
            arrays, info = build()
            self._save_unlocked(key, description, arrays, info)
            return arrays, info
        finally:
            self._unlock(fd)


_DEFERRED_SYNC = {"active": False, "pending": set()}  # pending: folders written without fsync
CACHE_READ_BYTES = 4 << 20  # a cached array up to this size is read, a larger one memory-mapped: a mapping holds a
                            # file descriptor, and a blend of 10,000 datasets has 30,000 cached arrays


class deferred_sync:
    """``with deferred_sync():`` the caches built inside are written without an fsync per file (atomic renames
    still: a killed build leaves nothing half-written under a final name), and one sync at the end (``syncfs`` of
    the file system holding them, ``os.sync()`` where there is none) makes
    them durable. A blend of thousands of datasets writes four files per dataset: per-file fsyncs were most of
    its build time. A cache file damaged by a power cut before that sync fails to load and is rebuilt."""

    def __enter__(self):
        self.outer = _DEFERRED_SYNC["active"]
        _DEFERRED_SYNC["active"] = True
        return self

    def __exit__(self, *exc):
        _DEFERRED_SYNC["active"] = self.outer
        if not self.outer and _DEFERRED_SYNC["pending"]:
            folders, _DEFERRED_SYNC["pending"] = _DEFERRED_SYNC["pending"], set()
            sync_file_systems(sorted(folders))
        return False


def sync_file_systems(folders: list[str]) -> None:
    """Flush the file systems holding ``folders``, each once (Linux ``syncfs``; ``os.sync()`` elsewhere)."""
    import ctypes
    import ctypes.util

    try:
        syncfs = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).syncfs
    except (OSError, AttributeError):
        os.sync()
        return
    devices = set()
    for folder in folders:
        try:
            fd = os.open(folder, os.O_RDONLY)
        except OSError:
            continue
        try:
            if os.fstat(fd).st_dev not in devices:
                devices.add(os.fstat(fd).st_dev)
                if syncfs(fd) != 0:
                    os.sync()
        finally:
            os.close(fd)


def _open_array(path: Path, meta: dict | None) -> np.ndarray:
    """A cached ``.npy`` read (up to ``CACHE_READ_BYTES``) or memory-mapped at the data offset its ``index.json``
    records (no header parse: thousands of datasets load in a blend) when the file has the header and size it
    names; else (a cache written before offsets, or a file replaced since) ``np.load``, whose array the dataset's
    checks then judge."""
    if not meta or "offset" not in meta:
        return np.load(path, mmap_mode="r" if os.path.getsize(path) > CACHE_READ_BYTES else None, allow_pickle=False)
    dtype, shape, offset = np.dtype(meta["dtype"]), tuple(int(x) for x in meta["shape"]), int(meta["offset"])
    if dtype.hasobject:
        raise ValueError(f"{path}: object arrays are never loaded")
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    with open(path, "rb") as f:
        header = f.read(offset).decode("latin1")
    if header != meta.get("header") or os.path.getsize(path) != offset + nbytes:  # replaced since: read what it
        return _open_array(path, None)                                           # holds (the checks judge it)
    if nbytes == 0:
        return np.zeros(shape, dtype)
    if nbytes > CACHE_READ_BYTES:
        return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)
    arr = np.fromfile(path, dtype=dtype, count=nbytes // dtype.itemsize, offset=offset).reshape(shape)
    arr.flags.writeable = False
    return arr
