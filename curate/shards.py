"""Writing and reading shards, atomically, and the manifest that lists them.

A shard is one Arrow table on disk: Arrow IPC (Feather v2) with zstd by default (``.arrow``),
or Parquet (``.parquet``). Both open directly in pyarrow and Polars; DuckDB reads Parquet (Arrow IPC only
through an extension it downloads).
Every write goes to a temporary file in the same folder and is renamed into place, so a reader
never sees half a shard and a killed run leaves nothing that looks finished.
"""
from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq

from curate import json_files
from curate.contracts import ShardEntry
from curate.os_errors import naming

FORMATS = {"arrow": ".arrow", "parquet": ".parquet"}


def shard_suffix(fmt: str) -> str:
    return FORMATS[fmt]


def write_shard(table: pa.Table, path: str | Path, fmt: str = "arrow") -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_path(path) as tmp:
            table = table.combine_chunks() if table.num_rows else table
            if fmt == "parquet":
                pq.write_table(table, tmp, compression="zstd")
            else:
                feather.write_feather(table, tmp, compression="zstd")
    except OSError as e:  # a full disk: say which shard (pyarrow's message names no file)
        named = naming(e, path)
        if named is e:
            raise
        raise named from e
    return path


def write_shard_entry(table: pa.Table, path: str | Path, root: str | Path, fmt: str = "arrow") -> ShardEntry:
    """Write a shard and return its manifest entry (path relative to ``root``, rows, sha256), hashed
    here, in the task that wrote it, so the manifest never re-reads a shard."""
    path = write_shard(table, path, fmt)
    return ShardEntry(os.path.relpath(path, root), table.num_rows, sha256_file(path))


_SURROGATE = re.compile("[\ud800-\udfff]")


def rows_to_table(rows: list[dict], schema: pa.Schema) -> tuple[pa.Table, int]:
    """Rows (dicts) to a table, making text valid first: a lone surrogate (``"\\ud800"`` in JSON) cannot be
    written as UTF-8, so each one is replaced by U+FFFD. Returns the table and how many were replaced."""
    try:
        return pa.Table.from_pylist(rows, schema=schema), 0
    except (UnicodeEncodeError, pa.ArrowInvalid):
        pass
    replaced = 0
    clean = []
    for row in rows:
        fixed = {}
        for k, v in row.items():
            if isinstance(v, str) and _SURROGATE.search(v):
                v, n = _SURROGATE.subn("\ufffd", v)
                replaced += n
            fixed[k] = v
        clean.append(fixed)
    return pa.Table.from_pylist(clean, schema=schema), replaced


def read_shard(path: str | Path, columns: list[str] | None = None) -> pa.Table:
    path = str(path)
    try:
        if path.endswith(".parquet"):
            table = pq.read_table(path, columns=columns)
        else:
            table = feather.read_table(path, columns=columns, memory_map=True)
    except pa.ArrowInvalid as e:  # pyarrow's message names no file
        raise pa.ArrowInvalid(f"shard {path} is damaged or not an Arrow/Parquet file ({e})") from e
    return checked(table, path)


def checked(data, path: str | Path):
    """``data`` (a table or record batch read from the shard at ``path``) once its buffers are checked whole:
    offsets inside their data, UTF-8 strings. Arrow IPC maps a file's buffers unchecked, so a damaged or
    crafted shard (a curation folder handed over, a manifest's sha256 made to match) would take pyarrow
    outside its memory (a segmentation fault) or raise SystemError deep inside; here it is an
    ``ArrowInvalid`` naming the shard. The check is one pass over the bytes, far below any stage's cost."""
    try:
        data.validate(full=True)
    except pa.ArrowInvalid as e:
        raise pa.ArrowInvalid(f"shard {path} is damaged: {e}") from None
    return data


def write_json(obj, path: str | Path) -> Path:
    """``obj`` as JSON in ``path``, atomically. Strict JSON: a float that is not finite (an overflowing
    perplexity, the epochs of a dataset without tokens) is written as ``null``, since ``Infinity`` and ``NaN``
    are not JSON and jq, JavaScript and most other readers refuse the file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        text = json.dumps(obj, indent=2, sort_keys=False, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(obj), indent=2, sort_keys=False, allow_nan=False)
    with atomic_path(path) as tmp:
        with open(tmp, "w") as f:
            f.write(text + "\n")
    return path


def _finite(obj):
    """``obj`` with every float that is not finite replaced by None (dicts, lists and tuples walked)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def read_json(path: str | Path):
    """A JSON file's value (``json_files.read_json``: bounded, bad or too deeply nested JSON a ``ValueError``)."""
    return json_files.read_json(path)


def read_record(path: str | Path) -> dict | None:
    """A JSON object a run wrote for itself (a task marker, a cache, a plan's record), or None when it is
    missing, not JSON or not an object: records are written atomically, so a damaged one was damaged after
    the fact, and the work it records is redone rather than trusted."""
    try:
        obj = read_json(path)
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def shard_entry(path: str | Path, root: str | Path) -> dict:
    """One manifest entry: path relative to ``root``, row count and checksum."""
    path = Path(path)
    rows = read_shard(path, columns=[]).num_rows if path.stat().st_size else 0
    return {"path": os.path.relpath(path, root), "rows": rows, "sha256": sha256_file(path)}


def manifest_shards(output_dir: str | Path, which: str = "shards") -> list[Path]:
    """Absolute paths of the kept (``shards``) or set-aside (``dropped``) shards of a curation output."""
    output_dir = Path(output_dir)
    path = output_dir / "manifest.json"
    try:
        entries = read_json(path)[which]
        names = [e["path"] for e in entries]
    except (ValueError, KeyError, TypeError) as e:  # damaged, or not a curate manifest
        raise ValueError(f"{path} is not a curation manifest ({type(e).__name__}: {e}); rerun `curate run` "
                         "on that folder to rewrite it") from e
    for name in names:  # shards live inside the folder: a manifest cannot point a reader anywhere else
        if not is_inside(name):
            raise ValueError(f"{path} names the shard {name!r}, which is not a path inside {output_dir}")
    return [output_dir / name for name in names]


def is_inside(name) -> bool:
    """Whether ``name`` (read from a record on disk) is a relative path that stays inside its folder."""
    return isinstance(name, str) and not Path(name).is_absolute() and ".." not in Path(name).parts


class atomic_path:
    """Context manager yielding a temp path next to ``path``; renamed onto ``path`` (after fsync) on success."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __enter__(self) -> str:
        if self.path.is_dir():  # the rename would fail after the work: say so naming the path, not the temp file
            raise IsADirectoryError(errno.EISDIR, "is a folder, where a file is to be written", str(self.path))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, self.tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        os.close(fd)
        return self.tmp

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                with open(self.tmp, "rb+") as f:
                    os.fsync(f.fileno())
                os.chmod(self.tmp, 0o644)  # mkstemp makes 0600 files; shards are meant to be shared
                os.replace(self.tmp, self.path)  # (fails where ``path`` is a folder: the temp file goes below)
        finally:
            if os.path.exists(self.tmp):
                os.unlink(self.tmp)
        return False


def claim_plan_dir(plan_dir: Path, config: dict, parts) -> None:
    """Keep the parts of an earlier plan in ``plan_dir`` only if it was made with the same ``config``
    (parameters and inputs); otherwise delete ``parts`` (names inside ``plan_dir``) and record the new config."""
    import shutil

    path = Path(plan_dir) / "config.json"
    if path.exists():
        if read_json(path) == json.loads(json.dumps(config)):
            return
        for name in parts:
            target = Path(plan_dir) / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
    write_json(config, path)
