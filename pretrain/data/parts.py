"""A dataset of parts: ``PREFIX/part-NNNNN.bin/.idx`` plus ``PREFIX/parts.json``, read as one indexed dataset.

``pretrain tokenize --parts`` (and ``--executor ray``) writes one Megatron ``.bin/.idx`` per task (a group of
curated shards, in manifest order) and, last, ``parts.json`` naming every part with its documents, tokens and
file sizes. :class:`PartsDataset` has the reader interface of :class:`~pretrain.data.indexed.IndexedDataset`
that the GPT dataset and blends use (sequence lengths, document indices, pointers, fingerprint): its sequences
are the parts' sequences in part order, so the document/sample/shuffle indices built over it equal those built
over the merged file (:func:`merge_parts`), and so do the samples, whatever the number of parts.
Pointers are byte offsets in the parts' ``.bin`` files laid end to end (as in the merged ``.bin``); the tokens
are read from each part's own memory map.

:func:`open_indexed` opens either form: ``PREFIX.idx`` (a single file, merged or not) when it exists, else
``PREFIX/parts.json``.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path

import numpy as np

from curate import json_files
from pretrain.data.indexed import (
    DTYPE_CODES, IndexedDataset, IndexedDatasetBuilder, atomic_file, data_file_path, index_file_path,
)

PARTS_INDEX = "parts.json"
PARTS_FORMAT = "quarry-parts"
PARTS_VERSION = 1


def part_name(i: int) -> str:
    return f"part-{i:05d}"


def parts_index_path(prefix) -> Path:
    return Path(os.fspath(prefix)) / PARTS_INDEX


def is_parts_dataset(prefix) -> bool:
    return parts_index_path(prefix).is_file()


def open_indexed(prefix):
    """``PREFIX.bin/.idx`` as an IndexedDataset when there, else the parts dataset ``PREFIX/parts.json``."""
    try:
        return _open_indexed(os.fspath(prefix))
    except OSError as e:
        if e.errno != errno.EMFILE:
            raise
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        raise OSError(e.errno, f"too many open files opening {prefix}: every dataset and every part holds its .bin "
                      f"open (memory-mapped); this process may open {soft} (hard limit {hard}): raise it with "
                      "`ulimit -n`, or merge parts (pretrain tokenize --merge)") from None


def _open_indexed(prefix: str):
    if os.path.isfile(index_file_path(prefix)) and is_parts_dataset(prefix):
        _check_merge_is_current(prefix)
    if os.path.isfile(index_file_path(prefix)) or not is_parts_dataset(prefix):
        if not os.path.isfile(index_file_path(prefix)) and os.path.isdir(prefix):
            raise FileNotFoundError(f"{prefix} is a folder without {PARTS_INDEX}: not a dataset of parts (a "
                                    "`pretrain tokenize --parts` run that has not finished? rerun it)")
        return IndexedDataset(prefix)
    return PartsDataset(prefix)


def _check_merge_is_current(prefix: str) -> None:
    """``PREFIX.bin/.idx`` beside ``PREFIX/parts.json``: read only if merged from these very parts (``PREFIX.json``)."""
    try:
        record = json_files.read_json(prefix + ".json")
    except (OSError, ValueError):
        return  # not written by --merge: a one-file run of the user's, read as asked
    want = record.get("parts_sha256") if isinstance(record, dict) else None
    if want and want != hashlib.sha256(parts_index_path(prefix).read_bytes()).hexdigest():
        raise ValueError(f"{prefix}.bin/.idx were merged from other parts than {prefix}/{PARTS_INDEX} names: run "
                         "`pretrain tokenize ... --merge` again, or delete the stale .bin/.idx")


def write_parts_index(prefix, dtype, parts: list[dict], extra: dict | None = None) -> dict:
    """``PREFIX/parts.json``: the parts in order with their counts, and the totals. Written last, atomically."""
    record = {"format": PARTS_FORMAT, "version": PARTS_VERSION, "dtype": np.dtype(dtype).str,
              "documents": sum(p["documents"] for p in parts), "tokens": sum(p["tokens"] for p in parts),
              "parts": parts, **(extra or {})}
    with atomic_file(parts_index_path(prefix)) as f:
        f.write((json.dumps(record, indent=1) + "\n").encode())
    return record


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def read_parts_index(prefix) -> dict:
    """The parts index, checked: every name a plain part file inside PREFIX and named once, counts that are
    numbers, each part's ``bin_bytes`` its tokens' bytes, and the totals (``documents``, ``tokens``, and the
    ``stats`` a tokenize run records: documents, tokens, rows, parts) the sums of the parts'. A parts.json whose
    totals lie is refused, not merged or trained on (the files themselves: :func:`check_part_files`)."""
    path = parts_index_path(prefix)
    try:
        record = json_files.read_json(path)
        if record.get("format") != PARTS_FORMAT or record.get("version") != PARTS_VERSION:
            raise ValueError(f"format {record.get('format')!r} version {record.get('version')!r}")
        dtype = np.dtype(record["dtype"])
        if dtype not in DTYPE_CODES.values():
            raise ValueError(f"dtype {dtype}")
        if not isinstance(record["parts"], list):
            raise ValueError("'parts' is not a list")
        seen = set()
        for p in record["parts"]:
            if not isinstance(p["name"], str) or not p["name"].startswith("part-") or "/" in p["name"] \
                    or ".." in p["name"]:
                raise ValueError(f"part name {p['name']!r}")
            if p["name"] in seen:
                raise ValueError(f"part {p['name']} is listed twice (its documents would be read twice)")
            seen.add(p["name"])
            for key in ("documents", "tokens", "bin_bytes"):
                if not _count(p[key]):
                    raise ValueError(f"{key} of {p['name']}: {p[key]!r}")
            for key in ("idx_bytes", "rows", "shards"):  # recorded by `pretrain tokenize --parts`
                if key in p and not _count(p[key]):
                    raise ValueError(f"{key} of {p['name']}: {p[key]!r}")
        for key in ("documents", "tokens"):
            if not _count(record[key]):
                raise ValueError(f"{key}: {record[key]!r}")
        if not isinstance(record.get("stats", {}), dict):
            raise ValueError("'stats' is not a table")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{path} is not a parts index written by `pretrain tokenize --parts` ({e})") from None
    _check_totals(path, record, dtype)
    return record


def _check_totals(path, record: dict, dtype: np.dtype) -> None:
    """Each part's ``bin_bytes`` against its tokens, and every total of ``parts.json`` against its parts."""
    again = "the file was edited or damaged: run `pretrain tokenize --parts` again (it redoes only what changed)"
    parts = record["parts"]
    for p in parts:
        if p["bin_bytes"] != p["tokens"] * dtype.itemsize:
            raise ValueError(f"{path}: part {p['name']} has {p['tokens']:,} tokens of {dtype} "
                             f"({p['tokens'] * dtype.itemsize:,} bytes) but bin_bytes {p['bin_bytes']:,}: {again}")
    sums = {key: sum(p[key] for p in parts) for key in ("documents", "tokens")}
    if all("rows" in p for p in parts):
        sums["rows"] = sum(p["rows"] for p in parts)
    stats = record.get("stats") or {}
    claims = [(key, record[key]) for key in ("documents", "tokens")]
    claims += [(f"stats.{key}", stats[key]) for key in ("documents", "tokens", "rows") if key in stats and key in sums]
    for name, claimed in claims:
        key = name.rsplit(".", 1)[-1]
        if claimed != sums[key]:
            raise ValueError(f"{path} says {claimed!r} {key} in all ({name}) but its {len(parts)} parts add up to "
                             f"{sums[key]:,}: {again}")
    if "parts" in stats and stats["parts"] != len(parts):
        raise ValueError(f"{path} says stats.parts = {stats['parts']!r} but lists {len(parts)} parts: {again}")


def check_part_files(prefix, record: dict) -> str | None:
    """The first part whose files are not the sizes ``parts.json`` records (missing, not a regular file, cut
    short or grown), as a message naming the part; None when every part's ``.bin`` (and ``.idx`` where the size
    is recorded) is. Only ``stat``: cheap for thousands of parts (opening a part checks its counts too)."""
    prefix = os.fspath(prefix)
    for p in record["parts"]:
        part = os.path.join(prefix, p["name"])
        for path, key in ((data_file_path(part), "bin_bytes"), (index_file_path(part), "idx_bytes")):
            if not os.path.lexists(path):
                return f"part {p['name']}: {path} is missing"
            if not os.path.isfile(path):
                return f"part {p['name']}: {path} is not a regular file"
            if key not in p:  # a parts.json of older runs (or made by hand) records no .idx size
                continue
            st = os.stat(path)
            if st.st_size != p[key]:
                return (f"part {p['name']}: {path} is {st.st_size:,} bytes, {PARTS_INDEX} says {p[key]:,} (cut "
                        "short, damaged or rewritten since it was tokenized)")
    return None


class PartsDataset:
    """The parts of ``PREFIX/`` as one indexed dataset (see the module docstring)."""

    def __init__(self, prefix):
        self.prefix = os.fspath(prefix)
        self.record = read_parts_index(self.prefix)
        self.dtype = np.dtype(self.record["dtype"])
        self.parts: list[IndexedDataset] = []
        bad = check_part_files(self.prefix, self.record)
        if bad is not None:
            raise ValueError(f"{self.prefix}/{PARTS_INDEX}: {bad}: tokenize again (`pretrain tokenize --parts` "
                             "redoes only the parts that changed)")
        for p in self.record["parts"]:
            part = IndexedDataset(os.path.join(self.prefix, p["name"]))
            got = (part.num_documents, part.num_tokens, os.path.getsize(data_file_path(part.prefix)))
            if got != (p["documents"], p["tokens"], p["bin_bytes"]) or part.dtype != self.dtype:
                raise ValueError(f"{part.prefix}.bin/.idx hold {got[0]} documents, {got[1]} tokens, {got[2]} bytes "
                                 f"of {part.dtype}; {PARTS_INDEX} says {p['documents']}, {p['tokens']}, "
                                 f"{p['bin_bytes']} of {self.dtype}: the part was changed or damaged, tokenize again")
            self.parts.append(part)
        self.sequence_lengths = (np.concatenate([p.sequence_lengths for p in self.parts]) if self.parts
                                 else np.zeros(0, np.int32))
        bin_bytes = np.array([p["bin_bytes"] for p in self.record["parts"]], dtype=np.int64)
        self.part_byte_starts = np.concatenate([[0], np.cumsum(bin_bytes)]).astype(np.int64)
        self._pointers = None
        self._documents = None
        self._fingerprint: str | None = None

    @property
    def sequence_pointers(self) -> np.ndarray:
        """Byte offset of every sequence in the parts' ``.bin`` files laid end to end (the merged ``.bin``)."""
        if self._pointers is None:
            self._pointers = np.concatenate(
                [p.sequence_pointers + base for p, base in zip(self.parts, self.part_byte_starts[:-1])]
            ) if self.parts else np.zeros(0, np.int64)
        return self._pointers

    @property
    def document_indices(self) -> np.ndarray:
        if self._documents is None:
            ends, base = [np.zeros(1, np.int64)], 0
            for p in self.parts:
                ends.append(np.asarray(p.document_indices[1:], dtype=np.int64) + base)
                base += len(p)
            self._documents = np.concatenate(ends)
        return self._documents

    def __len__(self) -> int:
        return len(self.sequence_lengths)

    def check_size(self) -> None:
        """Every part's ``.bin`` still has its size (:meth:`IndexedDataset.check_size`)."""
        for p in self.parts:
            p.check_size()

    @property
    def num_documents(self) -> int:
        return int(self.record["documents"])

    @property
    def num_tokens(self) -> int:
        return int(self.record["tokens"])

    @property
    def total_token_slots(self) -> int:
        """Tokens in all parts' ``.bin`` files (the merged ``.bin``'s length in tokens)."""
        return int(self.part_byte_starts[-1]) // self.dtype.itemsize

    def token_parts(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """(token offset where each part starts, plus the total; each part's tokens as a memory-mapped array)."""
        return self.part_byte_starts // self.dtype.itemsize, [p.tokens for p in self.parts]

    def _locate(self, i: int) -> tuple[IndexedDataset, int]:
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"sequence {i} out of range for {n} sequences")
        starts = self._sequence_starts()
        p = int(np.searchsorted(starts, i, side="right")) - 1
        return self.parts[p], i - int(starts[p])

    def _sequence_starts(self) -> np.ndarray:
        if not hasattr(self, "_seq_starts"):
            self._seq_starts = np.concatenate([[0], np.cumsum([len(p) for p in self.parts])]).astype(np.int64)
        return self._seq_starts

    def __getitem__(self, i: int) -> np.ndarray:
        if isinstance(i, (int, np.integer)):
            return self.get(int(i))
        raise TypeError("index a PartsDataset with an int (use get(i, offset, length) for slices)")

    def get(self, i: int, offset: int = 0, length: int | None = None) -> np.ndarray:
        part, j = self._locate(i)
        return part.get(j, offset, length)

    def document(self, k: int) -> np.ndarray:
        a, b = int(self.document_indices[k]), int(self.document_indices[k + 1])
        return np.concatenate([self.get(s) for s in range(a, b)]) if b > a else np.zeros(0, self.dtype)

    def fingerprint(self) -> str:
        """sha256 of ``parts.json`` (every part's counts and sizes) and of each part's ``.idx`` size, mtime and
        inode: changes whenever a part is rewritten, without reading every ``.idx`` of thousands of parts (the
        parts' own open checks their counts against ``parts.json``)."""
        if self._fingerprint is None:
            h = hashlib.sha256(parts_index_path(self.prefix).read_bytes())
            for p in self.parts:
                st = os.stat(index_file_path(p.prefix))
                h.update(f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino};".encode())
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    def close(self) -> None:
        for p in self.parts:
            p.close()
        self.parts = []

    def __getstate__(self):
        return {"prefix": self.prefix}

    def __setstate__(self, state):
        self.__init__(state["prefix"])

    def __repr__(self) -> str:
        return (f"PartsDataset({self.prefix!r}, parts={len(self.parts)}, sequences={len(self)}, "
                f"documents={self.num_documents}, dtype={self.dtype})")


def merge_parts(prefix, output_prefix, durable: bool = True) -> dict:
    """The parts of ``prefix`` concatenated into one Megatron ``output_prefix.bin/.idx`` (the bytes tokenizing in
    one process writes)."""
    ds = PartsDataset(prefix)
    try:
        with IndexedDatasetBuilder(output_prefix, ds.dtype, durable=durable) as builder:
            for part in ds.parts:
                builder.add_index(part.prefix)
    finally:
        ds.close()
    return {"documents": ds.num_documents, "tokens": ds.num_tokens, "parts": len(ds.record["parts"]),
            "dtype": str(ds.dtype)}


def marker_holds(prefix, marker: dict, counts) -> bool:
    """Whether a finished task's marker can be taken: its ``counts`` are non-negative integers, and the indexed
    dataset at ``prefix`` holds the ``documents`` and ``tokens`` it records. ``KeyError`` (a count missing),
    ``OSError`` and ``ValueError`` (damaged files) are the caller's to catch."""
    from pretrain.data.indexed import IndexedDataset

    if any(isinstance(marker[k], bool) or not isinstance(marker[k], int) or marker[k] < 0 for k in counts):
        return False
    part = IndexedDataset(prefix)
    try:
        return (part.num_documents, part.num_tokens) == (marker["documents"], marker["tokens"])
    finally:
        part.close()
