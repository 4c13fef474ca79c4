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


def read_parts_index(prefix) -> dict:
    """The parts index, checked: every name a plain part file inside PREFIX, counts that are numbers."""
    path = parts_index_path(prefix)
    try:
        record = json_files.read_json(path)
        if record.get("format") != PARTS_FORMAT or record.get("version") != PARTS_VERSION:
            raise ValueError(f"format {record.get('format')!r} version {record.get('version')!r}")
        dtype = np.dtype(record["dtype"])
        if dtype not in DTYPE_CODES.values():
            raise ValueError(f"dtype {dtype}")
        for p in record["parts"]:
            if not isinstance(p["name"], str) or not p["name"].startswith("part-") or "/" in p["name"] \
                    or ".." in p["name"]:
                raise ValueError(f"part name {p['name']!r}")
            for key in ("documents", "tokens", "bin_bytes"):
                if not isinstance(p[key], int) or p[key] < 0:
                    raise ValueError(f"{key} of {p['name']}: {p[key]!r}")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path} is not a parts index written by `pretrain tokenize --parts` ({e})") from None
    return record


class PartsDataset:
    """The parts of ``PREFIX/`` as one indexed dataset (see the module docstring)."""

    def __init__(self, prefix):
        self.prefix = os.fspath(prefix)
        self.record = read_parts_index(self.prefix)
        self.dtype = np.dtype(self.record["dtype"])
        self.parts: list[IndexedDataset] = []
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
