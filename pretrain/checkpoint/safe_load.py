"""Reading a DCP checkpoint without running any code it carries.

``torch.distributed.checkpoint`` stores two kinds of pickles: ``dcp/.metadata`` (read with ``pickle.load``) and,
inside the ``.distcp`` shards, one ``torch.save`` record per entry. Tensors are read with
``torch.load(weights_only=True)`` already; the non-tensor entries (optimizer hyper-parameters such as ``lr`` or
``betas``) are read with ``torch.load(weights_only=False)``, and the metadata with a plain unpickler: a hostile
checkpoint runs its code there. This module closes both:

- :class:`SafeFileSystemReader` reads ``.metadata`` with :class:`MetadataUnpickler`, which resolves only the
  classes DCP writes into it (its metadata dataclasses, ``_StorageInfo``, ``torch.Size``, torch dtypes and
  layouts, ``pathlib`` paths) and refuses every other global;
- :class:`SafeLoadPlanner` reads the non-tensor entries with ``torch.load(weights_only=True)``.

A refusal raises :class:`UnsafeCheckpointError` naming the file and the global it asked for.
"""
from __future__ import annotations

import io
import os
import pickle
import stat
from pathlib import Path, PurePosixPath

import torch
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.planner import ReadItem

_DCP_METADATA_CLASSES = {
    "torch.distributed.checkpoint.metadata": {
        "Metadata", "MetadataIndex", "StorageMeta", "TensorProperties", "TensorStorageMetadata",
        "BytesStorageMetadata", "ChunkStorageMetadata", "_MEM_FORMAT_ENCODING",
    },
    "torch.distributed.checkpoint.filesystem": {"_StorageInfo"},
    "torch": {"Size"},
    "torch.serialization": {"_get_layout"},  # looks a layout up by name (torch.strided, ...)
    "pathlib": {"PosixPath", "PurePosixPath", "WindowsPath", "PureWindowsPath", "Path"},
    "collections": {"OrderedDict"},
}


def weights_only_reason(e: BaseException) -> str:
    """The short reason of a ``torch.load(weights_only=True)`` refusal ("asks for builtins.exec")."""
    import re

    m = re.search(r"Unsupported global: GLOBAL (\S+)", str(e))
    if m:
        return f"it asks for {m.group(1)}, which weights_only loading refuses"
    m = re.search(r"WeightsUnpickler error:\s*(\S[^\n]*)", str(e))  # garbage: "Unsupported operand 0"
    if m:
        return f"{type(e).__name__}: {m.group(1)}"
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}"


class UnsafeCheckpointError(ValueError):
    """A checkpoint file asked to run or build something a checkpoint never contains."""


class _NotRegular(UnsafeCheckpointError):
    """A checkpoint file that is not a regular file, or cannot be opened."""


class MetadataUnpickler(pickle.Unpickler):
    """``pickle.Unpickler`` that resolves only the globals DCP metadata is made of."""

    def find_class(self, module: str, name: str):
        if name in _DCP_METADATA_CLASSES.get(module, ()):
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise UnsafeCheckpointError(f"it asks for {module}.{name}, which DCP metadata never contains")


def read_dcp_metadata(path: str | Path):
    """The ``Metadata`` object of ``path`` (a ``.metadata`` file), read with :class:`MetadataUnpickler`."""
    path = Path(path)
    try:
        with open_regular(path) as f:
            metadata = MetadataUnpickler(f).load()
    except _NotRegular:
        raise
    except UnsafeCheckpointError as e:
        raise UnsafeCheckpointError(f"{path}: refused to unpickle it: {e} (the file was damaged or tampered "
                                    f"with; nothing in it was run)") from None
    except Exception as e:  # truncated, garbage
        raise UnsafeCheckpointError(f"{path}: not a readable DCP metadata file ({type(e).__name__}: {e})") from None
    from torch.distributed.checkpoint.metadata import Metadata

    if not isinstance(metadata, Metadata):
        raise UnsafeCheckpointError(f"{path}: holds a {type(metadata).__name__}, not DCP metadata")
    _check_entries(metadata, path)
    return metadata


def open_regular(path: Path):
    """``path`` opened for reading in binary, if it is a regular file (a link to one counts): opening a FIFO
    blocks until a writer comes (a checkpoint whose ``.metadata`` was a FIFO hung ``generate`` for ever), a
    device never ends. UnsafeCheckpointError naming it otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # non-blocking: a FIFO opens at once
    except OSError as e:
        raise _NotRegular(f"{path}: cannot be read ({e.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _NotRegular(f"{path}: not a regular file (a FIFO, device, socket or directory); refusing "
                                    f"to read it")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _is_shape(value) -> bool:
    return isinstance(value, (tuple, list)) and all(type(n) is int and n >= 0 for n in value)


def _check_entries(metadata, path: Path) -> None:
    """The part of the metadata Quarry reads itself (tensor names, shapes, dtypes) is of DCP's types: a mapping
    of string names to tensor or bytes entries, each shape and chunk of non-negative integers, each dtype a
    torch dtype (a name that was an integer raised AttributeError in the readers, a traceback)."""
    from torch.distributed.checkpoint.metadata import (
        BytesStorageMetadata, ChunkStorageMetadata, TensorStorageMetadata,
    )

    entries = getattr(metadata, "state_dict_metadata", None)
    if not isinstance(entries, dict):
        raise UnsafeCheckpointError(f"{path}: its entries are a {type(entries).__name__}, not a mapping; the file "
                                    f"was damaged or tampered with")
    for name, entry in entries.items():
        if not isinstance(name, str):
            raise UnsafeCheckpointError(f"{path}: an entry is named {str(name)[:80]!r}, not a string; the file was "
                                        f"damaged or tampered with")
        if isinstance(entry, BytesStorageMetadata):
            continue
        chunks = getattr(entry, "chunks", None)
        if not (isinstance(entry, TensorStorageMetadata) and _is_shape(entry.size)
                and isinstance(getattr(entry.properties, "dtype", None), torch.dtype) and isinstance(chunks, list)
                and all(isinstance(c, ChunkStorageMetadata) and _is_shape(c.offsets) and _is_shape(c.sizes)
                        for c in chunks)):
            raise UnsafeCheckpointError(f"{path}: the entry {name[:80]!r} is not a tensor description (shape, "
                                        f"dtype, chunks); the file was damaged or tampered with")


def record_bytes(metadata) -> dict[str, int]:
    """Bytes of the records each entry's data is stored in, by entry name (from ``storage_data``, which
    :func:`check_storage_paths` keeps within the files): a tensor cannot hold more than its records."""
    out: dict[str, int] = {}
    for key, info in (getattr(metadata, "storage_data", None) or {}).items():
        fqn, length = getattr(key, "fqn", None), getattr(info, "length", None)
        if isinstance(fqn, str) and type(length) is int:
            out[fqn] = out.get(fqn, 0) + length
    return out


def check_storage_paths(metadata, dcp_dir: str | Path) -> None:
    """Refuse (UnsafeCheckpointError) DCP metadata whose ``storage_data`` sends a read outside ``dcp_dir``: every
    ``relative_path`` must be a relative path without ``..`` naming a regular file inside ``dcp_dir`` (a link only
    to a regular file inside it; never a FIFO, a device, /etc/passwd), and every ``offset``/``length`` must be
    non-negative integers within that file."""
    dcp_dir = Path(dcp_dir)
    where = dcp_dir / ".metadata"
    storage = getattr(metadata, "storage_data", None)
    if storage is None:
        return  # DCP reads nothing by path then (and would fail on its own)
    if not isinstance(storage, dict):
        raise UnsafeCheckpointError(f"{where}: its storage_data is a {type(storage).__name__}, not a mapping")
    base = Path(os.path.realpath(dcp_dir))
    sizes: dict[str, int] = {}
    for key, info in storage.items():
        what = f"{where}: the storage of {getattr(key, 'fqn', key)!r}"
        rel = getattr(info, "relative_path", None)
        if isinstance(rel, PurePosixPath):
            rel = str(rel)
        if not isinstance(rel, str) or not rel or "\x00" in rel or "\\" in rel:
            raise UnsafeCheckpointError(f"{what} is not a file name ({rel!r}); the file was damaged or tampered with")
        pure = PurePosixPath(rel)
        if pure.is_absolute() or ".." in pure.parts:
            raise UnsafeCheckpointError(f"{what} is {rel!r}, outside {dcp_dir}; refusing to read it (the file was "
                                        f"damaged or tampered with)")
        if rel not in sizes:
            path = dcp_dir / rel
            try:
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    real = Path(os.path.realpath(path))
                    if base not in real.parents:
                        raise UnsafeCheckpointError(f"{what} is {rel!r}, a link leading outside {dcp_dir}; refusing "
                                                    f"to read it (the file was damaged or tampered with)")
                    st = os.stat(real)
            except OSError as e:
                raise UnsafeCheckpointError(f"{what} is {rel!r}, which cannot be read ({e.strerror}); the "
                                            f"checkpoint is incomplete or damaged") from None
            if not stat.S_ISREG(st.st_mode):
                raise UnsafeCheckpointError(f"{what} is {rel!r}, not a regular file (a FIFO, device, socket or "
                                            f"directory); refusing to read it")
            sizes[rel] = st.st_size
        offset, length = getattr(info, "offset", None), getattr(info, "length", None)
        if type(offset) is not int or type(length) is not int or offset < 0 or length < 0 \
                or offset + length > sizes[rel]:
            raise UnsafeCheckpointError(f"{what} claims bytes {offset!r}+{length!r} of {rel!r}, which holds "
                                        f"{sizes[rel]:,}; the file was damaged or tampered with")


class SafeFileSystemReader(FileSystemReader):
    """``FileSystemReader`` whose ``.metadata`` goes through :class:`MetadataUnpickler`."""

    def read_metadata(self, *args, **kwargs):
        from torch.distributed.checkpoint.metadata import StorageMeta

        rank = kwargs.get("rank")
        metadata = read_dcp_metadata(self._get_metadata_path(rank))
        check_storage_paths(metadata, self.path)
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


class SafeLoadPlanner(DefaultLoadPlanner):
    """``DefaultLoadPlanner`` that reads non-tensor entries with ``torch.load(weights_only=True)``."""

    refused: str | None = None

    def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
        fqn = read_item.dest_index.fqn
        try:
            obj = torch.load(value, weights_only=True)
        except Exception as e:
            self.refused = f"entry {fqn!r}: {weights_only_reason(e)}"
            raise UnsafeCheckpointError(f"refused to load entry {self.refused}") from None
        if self.flatten_state_dict:
            from torch.distributed.checkpoint._traverse import set_element

            set_element(self.original_state_dict, self.mappings[fqn], obj)
        else:
            self.state_dict[fqn] = obj
