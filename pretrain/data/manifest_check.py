"""A curation ``manifest.json`` checked before its shards are tokenized or sampled: it must not lie.

``pretrain tokenize`` and ``pretrain tokenizer train`` read the shards a manifest names. A manifest that names a
shard twice (under another spelling of its path, through a hard link, or as a byte-identical copy: same sha256)
would tokenize it twice; a shard cut short, rewritten
or swapped after curation would be read as it is now. So: every entry needs ``path``, ``rows`` and ``sha256``; no
shard may be listed twice; every shard must exist (:func:`manifest_entries`, on the driver, no shard read); and
before a task reads a shard it checks its row count and sha256 against the manifest, and that no page or batch of it
is a decompression bomb (:func:`verify_shard`, in the worker: the hashing runs where the reading does, in
parallel). Each refusal names the shard.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from curate import json_files
from curate.file_kind import file_id


@dataclass(frozen=True)
class ManifestShard:
    path: str  # absolute path of the shard
    name: str  # its path as the manifest writes it (relative to the folder)
    rows: int
    sha256: str


class SeenShards:
    """The shards listed so far, so that none is read twice under another name: the same path (any spelling), the
    same file (:func:`curate.file_kind.file_id`: a hard link), or the same bytes (the manifest's sha256: a copy;
    each shard's bytes are checked against its sha256 before it is read). Empty shards are exempt from the last: two
    of them may well be the same bytes, and reading one twice adds nothing."""

    def __init__(self):
        self.names: dict = {}

    def add(self, path, sha256: str, rows: int, name: str) -> str | None:
        """Record shard ``path``; when it was seen already, return the name it was seen under, saying how."""
        keys = [("path", os.path.realpath(path)), ("file", file_id(os.stat(path)))]
        if rows:
            keys.append(("bytes", sha256.lower()))
        how = {"path": "", "file": ", a hard link to the same file", "bytes": ", a byte-identical copy"}
        for key in keys:
            if key in self.names:
                return self.names[key] + how[key[0]]
        for key in keys:
            self.names[key] = name
        return None


def manifest_entries(input_dir) -> list[ManifestShard]:
    """The kept shards of a curation output, in manifest order, each with the rows and sha256 it must have."""
    from curate.shards import manifest_shards

    input_dir = Path(input_dir)
    manifest = input_dir / "manifest.json"
    if not manifest.is_file():
        raise FileNotFoundError(f"{input_dir} has no manifest.json: give a curation output folder")
    paths = manifest_shards(input_dir)  # a damaged manifest, a path outside the folder: refused there
    entries = json_files.read_json(manifest)["shards"]
    out, seen = [], SeenShards()
    for path, e in zip(paths, entries):
        name = e["path"]
        rows, sha = e.get("rows"), e.get("sha256")
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0 or not isinstance(sha, str) \
                or len(sha) != 64:
            raise ValueError(f"{manifest}: the entry of shard {name} needs 'rows' (a count) and 'sha256' (64 hex "
                             f"digits), got rows={rows!r} sha256={sha!r}: rerun `curate run` on {input_dir} to "
                             "rewrite the manifest (a manifest made by hand: curate.shards.shard_entry writes entries)")
        if not path.is_file():
            raise FileNotFoundError(f"shard {name} named by {manifest} is missing")
        also = seen.add(path, sha, rows, name)
        if also:
            raise ValueError(f"{manifest} lists shard {name} twice (also as {also}): its documents would be "
                             f"tokenized twice; rerun `curate run` on {input_dir} to rewrite the manifest")
        out.append(ManifestShard(str(path.absolute()), name, rows, sha))
    return out


def shard_row_count(path: str) -> int:
    """Rows of an Arrow IPC or Parquet shard, from its metadata (no column is decoded)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    try:
        if path.endswith(".parquet"):
            return pq.ParquetFile(path).metadata.num_rows
        with ipc.open_file(pa.memory_map(path)) as reader:
            return reader.count_rows()
    except (pa.ArrowInvalid, OSError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise ValueError(f"shard {path} is damaged or not an Arrow/Parquet file ({e})") from None


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_shard(shard: ManifestShard, check_hash: bool = True) -> None:
    """The shard on disk is the one the manifest names: same sha256 (when ``check_hash``) and row count."""
    if check_hash:
        got = sha256_of(shard.path)
        if got != shard.sha256:
            size = os.path.getsize(shard.path)
            raise ValueError(f"shard {shard.name} ({size:,} bytes) does not match its manifest entry: sha256 "
                             f"{got[:16]}..., the manifest says {shard.sha256[:16]}... (cut short, damaged, rewritten "
                             "or replaced after curation); restore it, or rerun `curate run` to rewrite the folder")
    rows = shard_row_count(shard.path)
    if rows != shard.rows:
        raise ValueError(f"shard {shard.name} holds {rows:,} rows, its manifest entry says {shard.rows:,}: the "
                         "manifest or the shard was changed after curation; rerun `curate run` to rewrite the folder")
    from curate.readers.tables import decode_bomb

    bomb = decode_bomb(shard.path, "parquet" if shard.path.endswith(".parquet") else "arrow")
    if bomb:  # a shard is read whole: a few KB that decode to GBs would be decoded in the worker
        raise ValueError(f"shard {shard.name} is a decompression bomb, not what curation writes: {bomb}; rerun "
                         "`curate run` on the raw data to rewrite the folder")


def input_shards(entries) -> list[str]:
    """The SHA-256 of every curated shard a dataset was tokenized from that holds rows (empty shards are alike
    everywhere): recorded with the dataset (``PREFIX.json``, ``parts.json``), so that a blend can tell two datasets
    made from the same documents (a ``--merge`` file and its parts, a one-file and a ``--parts`` run of one
    folder, a folder and a subset of it)."""
    return sorted({e.sha256 for e in entries if e.rows})
