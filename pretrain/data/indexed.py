"""Megatron-LM's indexed dataset (``<prefix>.bin`` + ``<prefix>.idx``), byte for byte.

The ``.bin`` is every sequence's token ids back to back (little-endian, no header, no separators).
The ``.idx`` (all little-endian, no padding) is::

    offset      size  content
    0           9     magic b"MMIDIDX\\x00\\x00"
    9           8     uint64 version = 1
    17          1     uint8 dtype code of the .bin tokens (see DTYPE_CODES)
    18          8     uint64 N = number of sequences
    26          8     uint64 D = number of documents + 1
    34          4N    int32 sequence lengths (tokens)
    34+4N       8N    int64 sequence pointers (byte offset of each sequence in the .bin)
    34+12N      8D    int64 document indices (0, ..., N): document k is sequences [d[k], d[k+1])

Files written here open in Megatron-core's ``IndexedDataset`` and the other way round. Quarry writes one
sequence per document (the document's tokens followed by EOD), so N = D - 1.
Every file is written to a temporary name and renamed into place, ``.bin`` before ``.idx``.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import struct
import tempfile
from pathlib import Path

import numpy as np

from curate.config import ConfigError

IDX_READ_BYTES = 16 << 20  # an .idx up to this size is read into memory, a larger one memory-mapped
MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
HEADER = struct.Struct("<9sQBQQ")  # magic, version, dtype code, N, D: 34 bytes
assert HEADER.size == 34

DTYPE_CODES: dict[int, np.dtype] = {
    1: np.dtype("<u1"), 2: np.dtype("<i1"), 3: np.dtype("<i2"), 4: np.dtype("<i4"),
    5: np.dtype("<i8"), 6: np.dtype("<f8"), 7: np.dtype("<f4"), 8: np.dtype("<u2"),
}
CODE_OF_DTYPE = {dt: code for code, dt in DTYPE_CODES.items()}


def optimal_dtype(vocab_size: int | None) -> np.dtype:
    """Megatron's ``DType.optimal_dtype``: uint16 when the vocabulary is under 65,500 ids, else int32."""
    if vocab_size is not None and vocab_size < 65500:
        return np.dtype("<u2")
    return np.dtype("<i4")


def dtype_code(dtype) -> int:
    dt = np.dtype(dtype).newbyteorder("<")
    if dt not in CODE_OF_DTYPE:
        raise ValueError(f"dtype {dtype} has no .idx code; use one of {sorted(map(str, CODE_OF_DTYPE))}")
    return CODE_OF_DTYPE[dt]


def data_file_path(prefix: str | os.PathLike) -> str:
    return f"{os.fspath(prefix)}.bin"


def index_file_path(prefix: str | os.PathLike) -> str:
    return f"{os.fspath(prefix)}.idx"


def encode_index(dtype, sequence_lengths, document_indices) -> bytes:
    """The whole ``.idx`` file as bytes."""
    dtype = np.dtype(dtype)
    lengths = np.ascontiguousarray(sequence_lengths, dtype="<i4")
    docs = np.ascontiguousarray(document_indices, dtype="<i8")
    if len(docs) == 0 or docs[0] != 0 or docs[-1] != len(lengths) or np.any(np.diff(docs) < 0):
        raise ValueError("document indices must start at 0, never decrease and end at the sequence count")
    if np.any(lengths < 0):
        raise ValueError("negative sequence length")
    pointers = np.zeros(len(lengths), dtype="<i8")
    if len(lengths) > 1:
        np.cumsum(lengths[:-1], dtype="<i8", out=pointers[1:])
    pointers *= dtype.itemsize
    header = HEADER.pack(MAGIC, VERSION, dtype_code(dtype), len(lengths), len(docs))
    return header + lengths.tobytes() + pointers.tobytes() + docs.tobytes()


def _check_index(idx_path, lengths, pointers, doc_indices, itemsize: int, bin_size: int) -> None:
    """Every sequence inside the .bin and documents in order: a damaged or crafted .idx fails here, with what
    is wrong, not later as short samples or reads past the data (one vectorised pass over the index)."""
    if (lengths < 0).any():
        raise ValueError(f"{idx_path}: sequence {int(np.argmax(lengths < 0))} has a negative length")
    bad = (pointers < 0) | (pointers % itemsize != 0) | (pointers + lengths.astype(np.int64) * itemsize > bin_size)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{idx_path}: sequence {i} (byte {int(pointers[i])}, {int(lengths[i])} tokens) lies outside "
                         f"the {bin_size}-byte .bin or is not aligned to its {itemsize}-byte tokens")
    if doc_indices[0] != 0 or (np.diff(doc_indices) < 0).any():
        raise ValueError(f"{idx_path}: document indices must start at 0 and never decrease")
    _check_layout(idx_path, lengths, pointers, itemsize, bin_size)


_LAYOUT_CHUNK = 1 << 22  # sequences per step of the layout check: bounded temporaries for any index size


def _check_layout(idx_path, lengths, pointers, itemsize: int, bin_size: int) -> None:
    """The sequences lie back to back from byte 0 to the end of the .bin, as Megatron's and Quarry's writers
    lay them: pointer[0] == 0, pointer[i + 1] == pointer[i] + length[i] * itemsize, and the last sequence
    ends at the .bin's last byte. The sample gather takes sequence i to run up to pointer[i + 1] (and the last
    to the end of the .bin), so a gap, an overlap or trailing bytes would feed bytes that belong to no sequence
    (or to another one) into training samples: refused here, naming the first sequence that is out of place.
    Vectorised in chunks over the (memory-mapped) arrays."""
    n = len(lengths)
    if n == 0:
        if bin_size:
            raise ValueError(f"{idx_path}: the index has no sequences but its .bin holds {bin_size} bytes "
                             f"(trailing bytes that belong to no sequence)")
        return
    if int(pointers[0]) != 0:
        raise ValueError(f"{idx_path}: sequence 0 starts at byte {int(pointers[0])}, not 0: the sequences must "
                         f"lie back to back from the start of the .bin ({int(pointers[0])} bytes before it "
                         f"belong to no sequence)")
    for a in range(0, n - 1, _LAYOUT_CHUNK):
        b = min(a + _LAYOUT_CHUNK, n - 1)  # compares the ends of sequences [a, b) with the starts of [a+1, b+1)
        ends = pointers[a:b].astype(np.int64) + lengths[a:b].astype(np.int64) * itemsize
        wrong = pointers[a + 1:b + 1] != ends
        if wrong.any():
            j = int(np.argmax(wrong))
            i, end, start = a + j + 1, int(ends[j]), int(pointers[a + j + 1])
            how = (f"a gap of {start - end} bytes after sequence {i - 1}" if start > end else
                   f"overlapping sequence {i - 1} or going backwards by {end - start} bytes")
            raise ValueError(f"{idx_path}: sequence {i} starts at byte {start}, but sequence {i - 1} ends at byte "
                             f"{end} ({how}): the sequences of a Megatron .idx must lie back to back in the .bin")
    end = int(pointers[-1]) + int(lengths[-1]) * itemsize
    if end != bin_size:
        raise ValueError(f"{idx_path}: the last sequence ({n - 1}) ends at byte {end} but the .bin holds {bin_size} "
                         f"bytes ({bin_size - end} trailing bytes that belong to no sequence)")


def write_index(idx_path: str | os.PathLike, dtype, sequence_lengths, document_indices, durable: bool = True) -> None:
    data = encode_index(dtype, sequence_lengths, document_indices)
    with _atomic_file(idx_path, durable) as f:
        f.write(data)


class IndexedDatasetBuilder:
    """Streams token sequences into ``<prefix>.bin``; ``finalize()`` writes the ``.idx``.

    Both files appear only at ``finalize()`` (written under temporary names, then renamed), so an
    interrupted build leaves no ``.bin``/``.idx`` pair behind. ``durable=False`` skips the fsyncs (for
    intermediate files that a killed process, not a power cut, must not leave half-written).
    """

    def __init__(self, prefix: str | os.PathLike, dtype=np.uint16, durable: bool = True):
        self.prefix = os.fspath(prefix)
        self.durable = durable
        self.dtype = np.dtype(dtype).newbyteorder("<")
        dtype_code(self.dtype)
        Path(self.prefix).parent.mkdir(parents=True, exist_ok=True)
        fd, self._tmp_bin = tempfile.mkstemp(
            prefix=f".{Path(self.prefix).name}.", suffix=".bin.tmp", dir=Path(self.prefix).parent
        )
        _default_mode(self._tmp_bin)
        self._bin = os.fdopen(fd, "wb", buffering=1 << 20)
        self._lengths: list[np.ndarray] = []
        self._doc_ends: list[np.ndarray] = []  # per chunk: end sequence index of each document
        self._num_sequences = 0
        self._closed = False

    @property
    def num_sequences(self) -> int:
        return self._num_sequences

    def add_document(self, tokens, lengths=None) -> None:
        """One document: ``tokens`` (1-D), split into sequences of ``lengths`` (default: one sequence)."""
        tokens = np.asarray(tokens)
        if lengths is None:
            lengths = [len(tokens)]
        self.add_documents(tokens, np.asarray(lengths, dtype=np.int64), np.array([len(lengths)]))

    def add_documents(self, tokens, sequence_lengths, sequences_per_document=None) -> None:
        """Many documents at once: the concatenated ``tokens``, each sequence's length, and how many
        sequences each document has (default: one sequence per document)."""
        lengths = np.asarray(sequence_lengths, dtype=np.int64)
        tokens = np.asarray(tokens)
        if int(lengths.sum()) != len(tokens):
            raise ValueError(f"sequence lengths add up to {int(lengths.sum())}, not {len(tokens)} tokens")
        if np.any(lengths > np.iinfo(np.int32).max):
            raise ValueError("a sequence longer than 2^31-1 tokens does not fit the .idx format")
        if sequences_per_document is None:
            sequences_per_document = np.ones(len(lengths), dtype=np.int64)
        per_doc = np.asarray(sequences_per_document, dtype=np.int64)
        if int(per_doc.sum()) != len(lengths):
            raise ValueError("sequences_per_document does not add up to the number of sequences")
        self._bin.write(np.ascontiguousarray(tokens, dtype=self.dtype).tobytes())
        self._lengths.append(lengths.astype(np.int32))
        self._doc_ends.append(self._num_sequences + np.cumsum(per_doc))
        self._num_sequences += len(lengths)

    def add_index(self, prefix: str | os.PathLike) -> None:
        """Append another indexed dataset (same dtype): its ``.bin`` is byte-copied."""
        other = IndexedDataset(prefix)
        if other.dtype != self.dtype:
            raise ValueError(f"{prefix} holds {other.dtype}, this builder writes {self.dtype}")
        self._bin.flush()
        with open(data_file_path(prefix), "rb") as src:
            shutil.copyfileobj(src, self._bin, 1 << 22)
        self._lengths.append(np.array(other.sequence_lengths, dtype=np.int32))
        self._doc_ends.append(self._num_sequences + np.array(other.document_indices[1:], dtype=np.int64))
        self._num_sequences += len(other)
        other.close()

    def finalize(self) -> None:
        self._bin.flush()
        if self.durable:
            os.fsync(self._bin.fileno())
        self._bin.close()
        lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, np.int32)
        docs = np.concatenate([np.zeros(1, np.int64)] + self._doc_ends)
        os.replace(self._tmp_bin, data_file_path(self.prefix))
        write_index(index_file_path(self.prefix), self.dtype, lengths, docs, self.durable)
        self._closed = True

    def abort(self) -> None:
        if not self._closed:
            self._bin.close()
            if os.path.exists(self._tmp_bin):
                os.unlink(self._tmp_bin)
            self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.abort()
        elif not self._closed:
            self.finalize()
        return False


class DataChangedError(ConfigError):
    """A token file changed under a running reader (a ``.bin`` truncated in place): the memory map would end the
    process with SIGBUS at the first read past the new end."""


class IndexedDataset:
    """Reader: the ``.idx`` arrays and the ``.bin`` tokens as zero-copy numpy views of memory maps.

    ``ds[i]`` is sequence ``i``; ``ds.get(i, offset, length)`` a slice of it; ``ds.tokens`` the whole
    ``.bin`` as one 1-D array (so sequence ``i`` starts at ``ds.sequence_pointers[i] // itemsize``).
    """

    def __init__(self, prefix: str | os.PathLike):
        self.prefix = os.fspath(prefix)
        idx_path, bin_path = index_file_path(self.prefix), data_file_path(self.prefix)
        for p in (idx_path, bin_path):
            if not os.path.isfile(p):
                what = "is not a regular file (a folder, a pipe or a device)" if os.path.exists(p) else "not found"
                raise FileNotFoundError(f"indexed dataset file {p} {what} (prefix {self.prefix!r})")
        with open(idx_path, "rb") as f:
            head = f.read(HEADER.size)
        if len(head) < HEADER.size or head[:9] != MAGIC:
            raise ValueError(f"{idx_path} is not a Megatron .idx file (bad magic)")
        _, version, code, n, d = HEADER.unpack(head)
        if version != VERSION:
            raise ValueError(f"{idx_path}: .idx version {version}, only version 1 is supported")
        if code not in DTYPE_CODES:
            raise ValueError(f"{idx_path}: unknown dtype code {code}")
        self.dtype = DTYPE_CODES[code]
        if self.dtype.kind not in "iu":
            raise ValueError(f"{idx_path}: dtype code {code} ({self.dtype.name}) is not a token dtype: token ids "
                             f"are integers (Megatron's token dtypes are uint8, int8, int16, uint16, int32, int64)")
        expected = HEADER.size + 12 * n + 8 * d
        size = os.path.getsize(idx_path)
        if size < expected:
            raise ValueError(f"{idx_path} is truncated: {size} bytes, the header promises {expected}")
        if size > expected:  # no writer leaves bytes after the arrays: a damaged file, or two written into one
            raise ValueError(f"{idx_path} is damaged: {size} bytes, {size - expected} after the {expected} its header "
                             "promises; tokenize again")
        if size <= IDX_READ_BYTES:  # read, not mapped: a mapping holds a file descriptor, and a blend of thousands
            self._idx_mmap = np.fromfile(idx_path, dtype=np.uint8)  # of datasets would run out of them
        else:
            self._idx_mmap = np.memmap(idx_path, mode="r", dtype=np.uint8)
        buf = self._idx_mmap
        self.sequence_lengths = np.frombuffer(buf, dtype="<i4", count=n, offset=HEADER.size)
        self.sequence_pointers = np.frombuffer(buf, dtype="<i8", count=n, offset=HEADER.size + 4 * n)
        self.document_indices = np.frombuffer(buf, dtype="<i8", count=d, offset=HEADER.size + 12 * n)
        if d < 1 or self.document_indices[-1] != n:
            raise ValueError(f"{idx_path}: the last document index is not the sequence count {n}")
        bin_size = os.path.getsize(bin_path)
        need = int(self.sequence_pointers[-1]) + int(self.sequence_lengths[-1]) * self.dtype.itemsize if n else 0
        if bin_size < need:
            raise ValueError(f"{bin_path} is truncated: {bin_size} bytes, the index needs {need}")
        _check_index(idx_path, self.sequence_lengths, self.sequence_pointers, self.document_indices,
                     self.dtype.itemsize, bin_size)
        self._bin_size = bin_size
        st = os.stat(bin_path)
        self._bin_written = (st.st_ino, st.st_mtime_ns)  # a rewrite in place keeps the size, not the time
        if bin_size:
            self._bin_mmap = np.memmap(bin_path, mode="r", dtype=np.uint8)
            self.tokens = np.frombuffer(self._bin_mmap, dtype=self.dtype, count=bin_size // self.dtype.itemsize)
        else:
            self._bin_mmap = None
            self.tokens = np.zeros(0, dtype=self.dtype)
        self._fingerprint: str | None = None

    def __len__(self) -> int:
        return len(self.sequence_lengths)

    def check_size(self) -> None:
        """The ``.bin`` still has the size it had at open (one ``fstat`` on the descriptor the memory map holds):
        a file truncated in place while training reads it fails here, naming it, instead of killing the process
        with SIGBUS; and the file at its path is still the one opened, unwritten (a rewrite of the same size went
        unnoticed: the run trained on a mix of old and new tokens). This narrows the race but cannot close it: a file cut between this check and the read
        still ends the process."""
        mm = getattr(self._bin_mmap, "_mmap", None)
        if mm is None:
            return
        try:
            size = mm.size()
        except (OSError, ValueError):  # a closed map: nothing is read through it
            return
        if size < self._bin_size:
            raise DataChangedError(f"{data_file_path(self.prefix)} shrank while in use ({size:,} bytes, its .idx "
                                   f"needs {self._bin_size:,}): restore it and rerun")
        try:
            st = os.stat(data_file_path(self.prefix))
        except OSError:
            return  # gone from its folder: the map still reads the file it opened
        if (st.st_ino, st.st_mtime_ns) != self._bin_written:  # rewritten in place, or replaced: other tokens
            raise DataChangedError(f"{data_file_path(self.prefix)} was written while in use (the run read its "
                                   "tokens as they were): rerun once it no longer changes")

    @property
    def num_documents(self) -> int:
        return len(self.document_indices) - 1

    @property
    def num_tokens(self) -> int:
        return int(self.sequence_lengths.sum(dtype=np.int64))

    def __getitem__(self, i: int) -> np.ndarray:
        if isinstance(i, (int, np.integer)):
            return self.get(int(i))
        raise TypeError("index an IndexedDataset with an int (use get(i, offset, length) for slices)")

    def get(self, i: int, offset: int = 0, length: int | None = None) -> np.ndarray:
        """Tokens ``[offset, offset + length)`` of sequence ``i`` (to its end when length is None), zero-copy."""
        n = len(self.sequence_lengths)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"sequence {i} out of range for {n} sequences")
        seq_len = int(self.sequence_lengths[i])
        if length is None:
            length = seq_len - offset
        if offset < 0 or length < 0 or offset + length > seq_len:
            raise IndexError(f"slice [{offset}, {offset + length}) outside sequence {i} of {seq_len} tokens")
        start = int(self.sequence_pointers[i]) // self.dtype.itemsize + offset
        return self.tokens[start:start + length]

    def document(self, k: int) -> np.ndarray:
        """All tokens of document ``k`` (its sequences concatenated)."""
        a, b = int(self.document_indices[k]), int(self.document_indices[k + 1])
        if a == b:
            return self.tokens[:0]
        start = int(self.sequence_pointers[a]) // self.dtype.itemsize
        stop = int(self.sequence_pointers[b - 1]) // self.dtype.itemsize + int(self.sequence_lengths[b - 1])
        return self.tokens[start:stop]

    def fingerprint(self) -> str:
        """sha256 of the ``.idx`` bytes and the ``.bin`` size: changes whenever the dataset does."""
        if self._fingerprint is None:
            h = hashlib.sha256()
            h.update(memoryview(self._idx_mmap))
            h.update(str(os.path.getsize(data_file_path(self.prefix))).encode())
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    def close(self) -> None:
        for name in ("sequence_lengths", "sequence_pointers", "document_indices", "tokens"):
            self.__dict__.pop(name, None)
        self._idx_mmap = self._bin_mmap = None

    def __getstate__(self):
        return {"prefix": self.prefix}

    def __setstate__(self, state):
        self.__init__(state["prefix"])

    def __repr__(self) -> str:
        return f"IndexedDataset({self.prefix!r}, sequences={len(self)}, documents={self.num_documents}, dtype={self.dtype})"


class _atomic_file:
    """``with _atomic_file(path) as f``: write to a temp file beside ``path``, fsync, rename onto it."""

    def __init__(self, path, durable: bool = True):
        self.path = Path(path)
        self.durable = durable

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, self.tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        _default_mode(self.tmp)
        self.f = os.fdopen(fd, "wb")
        return self.f

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.f.flush()
            if self.durable:
                os.fsync(self.f.fileno())
            self.f.close()
            os.replace(self.tmp, self.path)
        else:
            self.f.close()
            if os.path.exists(self.tmp):
                os.unlink(self.tmp)
        return False


def _default_mode(path) -> None:
    """mkstemp makes 0600 files; give the final file the usual 0666 & ~umask."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


def atomic_file(path, durable: bool = True):
    return _atomic_file(path, durable)


__all__ = [
    "MAGIC", "DTYPE_CODES", "IndexedDataset", "IndexedDatasetBuilder", "optimal_dtype", "dtype_code",
    "encode_index", "write_index", "data_file_path", "index_file_path", "atomic_file",
]
