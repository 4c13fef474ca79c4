"""GPT samples over an indexed dataset, with Megatron-core's index construction (``order = "megatron"``) or the
extension-stable one (``order = "stable"``, the default: :mod:`pretrain.data.stable_order`).

For one split of one ``.bin/.idx`` dataset, three arrays decide which tokens sample ``i`` holds:

- document index: the split's sequence ids repeated once per epoch and shuffled (int32);
- sample index: ``[num_samples + 1, 2]`` rows of (position in the document index, token offset) where
  each sample starts. Samples run across document boundaries and sample ``k + 1`` starts ``seq_len``
  tokens after sample ``k``, so with the extra token (the default) the last label of one sample is the
  first input of the next;
- shuffle index: a permutation of the samples (uint32, int64 past 2^32 - 2).

Given the same ``.idx``, split, seed, sequence length and sample count these arrays equal the ones
Megatron-core's ``GPTDataset`` builds: the epoch count, the separate-last-epoch rule (the last epoch is
shuffled apart when fewer than 80% of its samples are needed) and the order of draws from one
``numpy.random.RandomState(seed)`` (document shuffle(s), then shuffle-index shuffle(s)) follow it.
The sample index is computed with prefix sums and ``searchsorted`` instead of a per-sample loop.

Unlike Megatron-core: a split that gets no tokens raises :class:`EmptySplitError` (Megatron loops
forever, NVIDIA/Megatron-LM#957), and the cache is keyed by every parameter plus the dataset's
fingerprint and written so that it is never read half-written (see :class:`IndexCache`).
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pretrain.data.defaults import ORDERS
from pretrain.data.index_cache import IndexCache, cache_key
from pretrain.data.indexed import IndexedDataset
from pretrain.data import parts_gather
from pretrain.data.parts_gather import sample_from_state

SPLIT_NAMES = ("train", "valid", "test")
DEFAULT_SPLIT = "969,30,1"
LAST_EPOCH_THRESHOLD = 0.80
CACHE_FORMAT = 1


# document-index entries (epochs x documents) above which samples longer than the whole split are refused
MAX_SPANNING_ENTRIES = 50_000_000
# index entries checked at a time (the checks of an index cache): bounded temporary memory at billions of entries
CHECK_BLOCK = 1 << 22
# parts up to which a read checks every part's .bin (two system calls each: cheaper than finding the parts it reads)
CHECK_ALL_PARTS = 4


class IndexTooLargeError(ValueError):
    """Sample indices that cannot fit in the host's memory (asked for before any is built)."""


class EmptySplitError(ValueError):
    """A split that must produce samples has no documents or no tokens."""


# ---------------------------------------------------------------------------------------------- splits

def parse_split(split: str) -> list[float]:
    """"969,30,1" -> normalized [train, valid, test] fractions (missing trailing parts are 0)."""
    if not isinstance(split, str):
        raise ValueError(f"split must be a string like '969,30,1', got {split!r}")
    pieces = [x.strip() for x in re.split(r"[,/]", split)]  # Megatron accepts "969,30,1" and "969/30/1"
    if not 1 <= len(pieces) <= 3 or not all(re.fullmatch(r"[0-9]*\.?[0-9]+|[0-9]+\.", x) for x in pieces):
        raise ValueError(f"split {split!r} must be 1 to 3 non-negative numbers (train, valid, test) "
                         "separated by commas, like '969,30,1'")
    parts = [float(x) for x in pieces]
    if not all(math.isfinite(x) for x in parts):  # digits past 1.8e308: inf, and inf / inf is NaN
        shown = split if len(split) <= 60 else split[:30] + "..."
        raise ValueError(f"split {shown!r}: a part too large to be a number (over 1.8e308); the parts are shares, "
                         "like '969,30,1'")
    parts += [0.0] * (3 - len(parts))
    if not math.isfinite(sum(parts)):  # shares: 1e308,1e308 is half and half, but their sum overflows
        parts = [x / max(parts) for x in parts]
    total = sum(parts)
    if total <= 0:
        raise ValueError(f"split {split!r} adds up to 0")
    return _normalize(parts)


def split_matrix(fractions: list[float]) -> list[tuple[float, float] | None]:
    """Book-ends of each split, as Megatron: [0.969, 0.03, 0.001] -> [(0, .969), (.969, .999), (.999, 1)];
    a split of fraction 0 is None."""
    ends = functools.reduce(lambda a, b: a + [a[-1] + b], fractions, [0])
    out = []
    for beg, end in zip(ends[:-1], ends[1:]):
        out.append(None if end <= beg else (beg, end))
    return out


def split_ranges(num_sequences: int, split: str) -> list[tuple[int, int] | None]:
    """Sequence id range ``[beg, end)`` of each split (None for a 0 split), rounded as Megatron."""
    ranges = []
    for bookend in split_matrix(parse_split(split)):
        if bookend is None:
            ranges.append(None)
        else:
            ranges.append((int(round(bookend[0] * float(num_sequences))),
                           int(round(bookend[1] * float(num_sequences)))))
    return ranges


def _normalize(weights) -> list[float]:
    w = np.array(weights, dtype=np.float64)
    return (w / np.sum(w)).tolist()


# --------------------------------------------------------------------------------------------- indices

def num_epochs_needed(tokens_per_epoch: int, num_samples: int | None, seq_len: int, extra: int = 1) -> int:
    """Smallest epoch count whose tokens cover ``num_samples * seq_len + extra`` (1 when num_samples is None)."""
    if num_samples is None:
        return 1
    if tokens_per_epoch <= 0:
        raise EmptySplitError("the split has no tokens, so no number of epochs can cover the samples")
    needed = num_samples * seq_len + extra
    return max(1, -(-needed // tokens_per_epoch))


def build_document_index(documents: np.ndarray, num_epochs: int, rng: np.random.RandomState,
                         separate_final_epoch: bool) -> np.ndarray:
    """The documents tiled ``num_epochs`` times and shuffled (int32); with ``separate_final_epoch`` the
    first ``num_epochs - 1`` epochs are shuffled together and the last one on its own."""
    documents = np.asarray(documents, dtype=np.int32)
    if not separate_final_epoch or num_epochs == 1:
        index = np.tile(documents, num_epochs)
        rng.shuffle(index)
        return index
    first = build_document_index(documents, num_epochs - 1, rng, False)
    last = build_document_index(documents, 1, rng, False)
    return np.concatenate((first, last))


def sample_index_dtype(document_index_len: int, max_sequence_length: int) -> np.dtype:
    """int32 when every entry fits, else int64 (as Megatron's helpers pick their C++ template)."""
    if max(document_index_len, max_sequence_length) <= np.iinfo(np.int32).max:
        return np.dtype(np.int32)
    return np.dtype(np.int64)


def build_sample_index(sizes: np.ndarray, document_index: np.ndarray, seq_len: int, num_epochs: int,
                       tokens_per_epoch: int, drop_last_partial: bool = True, extra: int = 1) -> np.ndarray:
    """``[num_samples + 1, 2]`` (document-index position, offset) of every sample start, vectorized.

    Sample ``k`` covers the ``seq_len + extra`` tokens of the flattened (shuffled) document stream that
    start at position ``k * seq_len``. Row ``k`` (k >= 1) records where the previous sample's last token
    sits (``extra=1``: that token is shared) or just after it (``extra=0``), in the document holding it.
    """
    if seq_len <= 1:
        raise ValueError(f"sequence length must be > 1, got {seq_len}")
    if tokens_per_epoch <= 1:
        raise EmptySplitError(f"the split has {tokens_per_epoch} tokens per epoch; at least 2 are needed")
    total = num_epochs * tokens_per_epoch
    if drop_last_partial:
        num_samples = (total - extra) // seq_len
    else:  # Megatron computes this in single precision: keep its exact result
        num_samples = int(np.ceil(np.float32(np.float32(total - extra) / np.float32(seq_len))))
    dtype = sample_index_dtype(len(document_index), int(sizes.max()) if len(sizes) else 0)

    doc_lengths = np.asarray(sizes)[document_index].astype(np.int64)
    ends = np.cumsum(doc_lengths)                        # flattened end of each document-index entry
    last_token = np.arange(1, num_samples + 1, dtype=np.int64) * seq_len - (1 - extra)
    rows = np.empty((num_samples + 1, 2), dtype=np.int64)
    rows[0] = 0
    pos = np.searchsorted(ends, last_token, side="right")  # entry holding that token (skips empty docs)
    inside = pos < len(ends)
    p = pos[inside]
    rows[1:][inside, 0] = p
    rows[1:][inside, 1] = last_token[inside] - (ends[p] - doc_lengths[p]) + (1 - extra)
    if not inside.all():  # the kept partial sample runs past the end: Megatron points at the last document
        rows[1:][~inside, 0] = len(document_index) - 1
        rows[1:][~inside, 1] = int(sizes[document_index[-1]]) - extra
    return rows.astype(dtype, copy=False)


def build_shuffle_index(num_samples: int, total_size: int, rng: np.random.RandomState) -> np.ndarray:
    """A permutation of ``[0, num_samples)`` followed by one of ``[num_samples, total_size)``."""
    dtype = np.uint32 if total_size < np.iinfo(np.uint32).max - 1 else np.int64
    first = np.arange(0, num_samples, dtype=dtype)
    rng.shuffle(first)
    if num_samples == total_size:
        return first
    last = np.arange(num_samples, total_size, dtype=dtype)
    rng.shuffle(last)
    return np.concatenate((first, last))


@dataclass
class GPTIndices:
    document_index: np.ndarray
    sample_index: np.ndarray
    shuffle_index: np.ndarray
    num_epochs: int
    tokens_per_epoch: int
    separate_final_epoch: bool


def split_tokens(sizes: np.ndarray, documents: np.ndarray, seq_len: int, what: str = "the split") -> int:
    """Tokens in one epoch of the split's ``documents``; a clear error for a split too small to sample."""
    if len(documents) == 0:
        raise EmptySplitError(f"{what} has no documents; change the split or add data "
                              "(Megatron-LM would hang here, NVIDIA/Megatron-LM#957)")
    tokens_per_epoch = int(np.sum(sizes[documents], dtype=np.int64))
    if tokens_per_epoch <= 1:
        raise EmptySplitError(f"{what} has {tokens_per_epoch} tokens; change the split or add data "
                              "(Megatron-LM would hang here, NVIDIA/Megatron-LM#957)")
    if seq_len <= 1:
        raise ValueError(f"sequence length must be > 1, got {seq_len}")
    return tokens_per_epoch


def index_bytes(n_documents: int, epochs: int, tokens_per_epoch: int, seq_len: int) -> int:
    """At most the bytes of the three indices: the document index (int32 per document and epoch), the sample
    index (two int64 per sample) and the shuffle index (int64 per sample)."""
    samples = epochs * tokens_per_epoch // seq_len
    return epochs * n_documents * 4 + (samples + 1) * 16 + samples * 8


def check_index_fits(n_documents: int, epochs: int, tokens_per_epoch: int, num_samples: int | None, seq_len: int,
                     what: str = "the split") -> None:
    """Refuse indices larger than the host's available memory before building them (a sample count or a
    sequence length typed a few digits too long would otherwise run for hours and end out of memory)."""
    from curate.host_memory import available_bytes

    if seq_len > tokens_per_epoch and epochs * n_documents > MAX_SPANNING_ENTRIES:
        # fits, but each sample is longer than the whole split: a sequence length typed a few digits too long
        # (1e11 for 1e3), which would spend minutes tiling the documents over a million epochs
        raise IndexTooLargeError(
            f"{what}: a sample of {seq_len:,} tokens is longer than the split's {tokens_per_epoch:,} tokens (each "
            f"would span {seq_len / tokens_per_epoch:,.0f} passes over it, {epochs:,} in all): ask for a "
            f"shorter sequence, or add data")
    need, have = index_bytes(n_documents, epochs, tokens_per_epoch, seq_len), available_bytes()
    if have is not None and need > have:
        raise IndexTooLargeError(
            f"{what}: {'one epoch of' if num_samples is None else f'{num_samples:,}'} samples of {seq_len:,} tokens "
            f"take {epochs:,} epochs of its "
            f"{tokens_per_epoch:,} tokens, whose indices need about {need / 2**30:,.1f} GiB, more than the "
            f"{have / 2**30:,.1f} GiB of memory available: ask for fewer samples or a shorter sequence, or add data")


def build_gpt_indices(sizes: np.ndarray, documents: np.ndarray, num_samples: int | None, seq_len: int,
                      seed: int, extra: int = 1, drop_last_partial: bool = True,
                      what: str = "the split") -> GPTIndices:
    """Megatron-core's GPTDataset index construction for sequence ids ``documents`` of a dataset whose
    sequence lengths are ``sizes``; ``num_samples`` None means one epoch."""
    sizes = np.asarray(sizes)
    documents = np.asarray(documents)
    tokens_per_epoch = split_tokens(sizes, documents, seq_len, what)
    epochs = num_epochs_needed(tokens_per_epoch, num_samples, seq_len, extra)
    check_index_fits(len(documents), epochs, tokens_per_epoch, num_samples, seq_len, what)
    separate = False
    sans_final = None
    if epochs > 1:
        sans_final = ((epochs - 1) * tokens_per_epoch - extra) // seq_len
        from_final = num_samples - sans_final
        per_epoch = (tokens_per_epoch - extra) // seq_len
        assert 0 <= from_final <= per_epoch + 1
        separate = from_final < int(LAST_EPOCH_THRESHOLD * per_epoch)
    rng = np.random.RandomState(seed)
    document_index = build_document_index(documents, epochs, rng, separate)
    sample_index = build_sample_index(sizes, document_index, seq_len, epochs, tokens_per_epoch,
                                      drop_last_partial, extra)
    total = sample_index.shape[0] - 1
    shuffle_index = build_shuffle_index(sans_final if separate else total, total, rng)
    return GPTIndices(document_index, sample_index, shuffle_index, epochs, tokens_per_epoch, separate)


# --------------------------------------------------------------------------------------------- dataset

class GPTDataset:
    """Samples of ``seq_len + 1`` tokens (int64) from one split of an indexed dataset.

    ``ds[i]`` follows the shuffle index, so reading ``0, 1, 2, ...`` gives Megatron's sample order; resume
    by skipping the samples already consumed. ``ds.get_batch(indices)`` reads many samples in one call.
    """

    def __init__(self, indexed: IndexedDataset, indices: GPTIndices | dict, seq_len: int, *,
                 num_samples: int | None = None, extra: int = 1, pad_id: int = -1,
                 name: str = "", split: str = "train", documents: tuple[int, int] | None = None):
        self.indexed = indexed
        self.documents = (0, len(indexed)) if documents is None else (int(documents[0]), int(documents[1]))
        get = indices.__getitem__ if isinstance(indices, dict) else functools.partial(getattr, indices)
        self.document_index = get("document_index")
        self.sample_index = get("sample_index")
        self.shuffle_index = get("shuffle_index")
        self.seq_len = int(seq_len)
        self.extra = int(extra)
        self.pad_id = int(pad_id)
        self.num_samples = num_samples
        self.name = name
        self.split = split
        self._length = self.sample_index.shape[0] - 1
        self._size = self.seq_len + self.extra
        # Plain (aligned, non-subclass) arrays for the gather (pretrain.data.parts_gather); starts has one extra
        # entry (the token count) so document e spans tokens [starts[e], starts[e + 1]). A one-file dataset is a
        # dataset of one part.
        self._shuffle = np.asarray(self.shuffle_index)
        self._sample_flat = np.ascontiguousarray(self.sample_index).reshape(-1)
        self._document_index = np.asarray(self.document_index)
        if hasattr(indexed, "token_parts"):
            part_starts, part_tokens = indexed.token_parts()
        else:
            part_starts, part_tokens = [0, len(indexed.tokens)], [indexed.tokens]
        self._part_starts = np.ascontiguousarray(part_starts, dtype=np.int64)
        self._part_tokens = list(part_tokens)
        self._starts = np.empty(len(indexed) + 1, dtype=np.int64)
        np.floor_divide(indexed.sequence_pointers, indexed.dtype.itemsize, out=self._starts[:-1])
        self._starts[-1] = int(self._part_starts[-1])
        self._num_tokens = int(self._starts[-1])
        # The gather reads document e as tokens [starts[e], starts[e + 1]): that is the document exactly only when
        # the sequences lie back to back (IndexedDataset refuses other layouts at load; checked once more here for
        # any other dataset object), else gap bytes or other documents' tokens would be trained on.
        seq_lengths = np.asarray(indexed.sequence_lengths)
        if len(seq_lengths) and not np.array_equal(np.diff(self._starts), seq_lengths):
            e = int(np.argmax(np.diff(self._starts) != seq_lengths))
            raise ValueError(f"{getattr(indexed, 'prefix', self.name or 'dataset')}: sequence {e} has "
                             f"{int(seq_lengths[e])} tokens but spans {int(self._starts[e + 1] - self._starts[e])} "
                             f"tokens of the .bin: its sequences are not laid out back to back")
        self._code = parts_gather.compiled_code(self._shuffle, self._sample_flat, self._document_index, self._starts,
                                                 indexed.dtype)  # None: the Python gather
        self._addresses = None  # each part's token address, and the state row of ds[i]: built per process
        self._state = None
        self._check_indices()

    def _check_indices(self) -> None:
        """The compiled gather reads without bounds checks, so every index it follows is checked once here
        (vectorised): a damaged or crafted index cache fails with what is wrong instead of reading past the
        arrays. And in-range values can still lie (a shuffle index of zeros trains on one sample; a document index
        naming validation documents trains on them), so what every build holds is checked too, in linear passes:
        the document index holds each document of the split ``[beg, end)`` the same number of times (the epochs)
        and no other; each sample starts ``seq_len`` tokens after the previous one in the stream of those
        documents; the shuffle index is a permutation of the samples."""
        doc, sample, shuffle = self._document_index, np.asarray(self.sample_index), self._shuffle
        where = f"{self.name or 'dataset'} ({self.split}) index"
        if doc.ndim != 1 or sample.ndim != 2 or sample.shape[1] != 2 or sample.shape[0] < 1 or shuffle.ndim != 1:
            raise ValueError(f"{where}: arrays of the wrong shape (document {doc.shape}, sample {sample.shape}, "
                             f"shuffle {shuffle.shape})")
        if len(doc) and (doc.min() < 0 or doc.max() >= len(self.indexed)):
            raise ValueError(f"{where}: a document index outside the {len(self.indexed)} documents")
        if len(shuffle) and (shuffle.min() < 0 or shuffle.max() >= self._length):
            raise ValueError(f"{where}: a shuffle entry outside the {self._length} samples")
        if len(doc) == 0 and self._length:
            raise ValueError(f"{where}: samples over an empty document index")
        step = CHECK_BLOCK
        for beg in range(0, sample.shape[0] if len(doc) else 0, step):
            rows, offsets = sample[beg:beg + step, 0].astype(np.int64), sample[beg:beg + step, 1].astype(np.int64)
            if rows.min() < 0 or rows.max() >= len(doc) or offsets.min() < 0:
                raise ValueError(f"{where}: a sample starts outside the document index or at a negative offset")
            if (self._starts[doc[rows]] + offsets + self.extra > self._num_tokens).any():
                raise ValueError(f"{where}: a sample reads past the end of the tokens")
        self._check_structure(where)

    def _check_structure(self, where: str) -> None:
        """The invariants of :meth:`_check_indices` that in-range values can break (see there)."""
        doc, sample, shuffle = self._document_index, np.asarray(self.sample_index), self._shuffle
        lo, hi = self.documents
        n, step = hi - lo, CHECK_BLOCK
        if n <= 0 or len(doc) % n:
            raise ValueError(f"{where}: {len(doc)} document index entries are not whole epochs of the split's "
                             f"{max(n, 0)} documents")
        counts = np.zeros(n, dtype=np.int64)
        for beg in range(0, len(doc), step):
            d = doc[beg:beg + step].astype(np.int64) - lo
            if len(d) and (d.min() < 0 or d.max() >= n):
                raise ValueError(f"{where}: a document outside the split's documents [{lo}, {hi}) (another split's, "
                                 "or none of this dataset's)")
            counts += np.bincount(d, minlength=n)
        epochs = len(doc) // n
        if (counts != epochs).any():
            k = int(np.argmax(counts != epochs))
            raise ValueError(f"{where}: document {lo + k} appears {int(counts[k])} times in the document index, not "
                             f"once per epoch ({epochs})")
        if self.num_samples is not None and self._length < self.num_samples:
            raise ValueError(f"{where}: {self._length} samples, fewer than the {self.num_samples} asked for")
        self._check_sample_stream(where, doc, sample, step)
        seen = np.zeros(len(shuffle), dtype=bool)
        for beg in range(0, len(shuffle), step):
            seen[shuffle[beg:beg + step]] = True
        if len(shuffle) != self._length or not seen.all():  # all in range (checked above): every sample once
            raise ValueError(f"{where}: the shuffle index is not a permutation of the {self._length} samples (a "
                             f"sample repeated, another never drawn)")

    def _check_sample_stream(self, where: str, doc: np.ndarray, sample: np.ndarray, step: int) -> None:
        """Each sample starts ``seq_len`` tokens after the previous one in the stream of documents (a partial last one
        kept by drop_last_partial=False points at the last token the stream has), at an offset inside its document.
        The stream is walked ``step`` document-index entries at a time (the stream position and length of every
        entry at once were two int64 arrays the length of the document index: GBs at billions of entries). The
        samples go forward through the stream, so their entries never go back (an index whose entries do is refused
        here: it breaks the rule), and each block of entries is read once. Called once the document index is known
        to hold each document of the split once per epoch."""
        if not len(doc):
            return
        sizes = np.asarray(self.indexed.sequence_lengths)
        beg_doc, end_doc = self.documents
        total = len(doc) // (end_doc - beg_doc) * int(sizes[beg_doc:end_doc].sum(dtype=np.int64))
        held, pos, lengths, starts, last_row = -1, 0, None, None, 0  # block held; where the next one starts
        for beg in range(0, sample.shape[0], step):
            rows, offsets = sample[beg:beg + step, 0].astype(np.int64), sample[beg:beg + step, 1].astype(np.int64)
            k = np.arange(beg, beg + len(rows), dtype=np.int64) * self.seq_len
            want = np.where(k - (1 - self.extra) < total, k, total - self.extra)
            ok = rows[0] >= last_row and not (np.diff(rows) < 0).any()
            last_row = int(rows[-1])
            got, room = np.empty(len(rows), np.int64), np.empty(len(rows), np.int64)
            blocks = rows // step  # sorted, when ok
            for b in range(int(blocks[0]), int(blocks[-1]) + 1) if ok else ():
                i, j = np.searchsorted(blocks, [b, b + 1])
                if i == j:
                    continue
                if b != held:  # forward to block b: the entries' lengths, and where each starts in the stream
                    for c in range(held + 1, b):  # blocks no sample starts in
                        pos += int(sizes[doc[c * step:(c + 1) * step]].sum(dtype=np.int64))
                    lengths = sizes[doc[b * step:(b + 1) * step]].astype(np.int64)
                    starts = np.cumsum(lengths)
                    starts -= lengths
                    starts += pos
                    held, pos = b, int(starts[-1] + lengths[-1])
                r = rows[i:j] - b * step
                got[i:j], room[i:j] = starts[r] + offsets[i:j], lengths[r]
            if not ok or (offsets > room - self.extra).any() or (got != want).any():
                raise ValueError(f"{where}: a sample does not start {self.seq_len} tokens after the one before it in "
                                 "the document stream")

    def check_files(self, idx=None) -> None:
        """The token files that samples ``idx`` read (all of them when None) still hold what the index needs, before
        each read (see ``IndexedDataset.check_size``): reading a memory map past the end of a file cut short is a
        SIGBUS, and a file written since it was opened holds other tokens. Of a dataset of more than
        ``CHECK_ALL_PARTS`` parts only the parts the samples read are checked: every part cost two system calls per
        read (0.6 ms per ``ds[i]`` at 200 parts), and a part not read is checked when it is read."""
        parts = getattr(self.indexed, "parts", None)
        if idx is not None and parts is not None and len(parts) > CHECK_ALL_PARTS:
            for p in self._parts_read(idx):
                parts[p].check_size()
            return
        check = getattr(self.indexed, "check_size", None)
        if check is not None:
            check()

    def _parts_read(self, idx: np.ndarray) -> set[int]:
        """The parts that samples ``idx`` read from: those holding the documents of the document-index entries each
        spans, from its first to its last (as ``parts_gather.gather_one`` walks them; a document lies in one part)."""
        if len(idx) == 1:  # ds[i]: one run of entries
            j = int(self._shuffle[idx[0]])
            entries = slice(int(self._sample_flat[2 * j]), int(self._sample_flat[2 * j + 2]) + 1)
        else:
            j = self._shuffle[idx].astype(np.int64)
            first, last = self._sample_flat[2 * j].astype(np.int64), self._sample_flat[2 * j + 2].astype(np.int64)
            counts = last - first + 1
            entries = np.repeat(first - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
        part = np.searchsorted(self._part_starts, self._starts[self._document_index[entries]], side="right") - 1
        return set(np.minimum(part, len(self._part_starts) - 2).tolist())  # (a document at the very end: the last)

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, idx: int) -> np.ndarray:
        n = self._length
        if idx < 0:
            idx += n
        if not 0 <= idx < n:
            raise IndexError(f"sample {idx} out of range for {n} samples")
        self.check_files(np.array([idx], dtype=np.int64))
        out = np.empty(self._size, dtype=np.int64)
        state = self._state
        if state is None:
            state = self._make_state()
        if state is False:
            self._gather(np.array([idx], dtype=np.int64), out[None, :])
        else:
            sample_from_state(idx, state, out)
        return out

    def _make_state(self):
        """The int64 row of ``parts_gather.sample_from_state``, False when the Python gather is used (addresses:
        built per process, not pickled)."""
        self._state = False if self._code is None else parts_gather.state_row(
            self._shuffle, self._sample_flat, self._document_index, self._starts, self._part_starts,
            self._part_addresses(), self._code, self.extra, self.pad_id)
        return self._state

    def _part_addresses(self) -> np.ndarray:
        if self._addresses is None:  # the parts' memory maps live as long as self.indexed
            self._addresses = parts_gather.part_addresses(self._part_tokens)
        return self._addresses

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_state"] = d["_addresses"] = None  # addresses are only valid in this process
        return d

    def _gather(self, idx: np.ndarray, out: np.ndarray) -> None:
        parts_gather.gather(idx, self._shuffle, self._sample_flat, self._document_index, self._starts,
                             self._part_starts, self._part_tokens, out, self.extra, self.pad_id,
                             None if self._code is None else self._part_addresses(), self._code)

    def get_batch(self, indices) -> np.ndarray:
        """Samples ``indices`` as one ``[len(indices), seq_len + 1]`` int64 array."""
        idx = np.asarray(indices, dtype=np.int64)
        if idx.ndim != 1:
            raise ValueError("indices must be 1-D")
        idx = np.where(idx < 0, idx + self._length, idx)
        if len(idx) and (idx.min() < 0 or idx.max() >= self._length):
            raise IndexError(f"sample index out of range for {self._length} samples")
        self.check_files(idx)
        out = np.empty((len(idx), self._size), dtype=np.int64)
        self._gather(idx, out)
        return out

    @property
    def num_epochs(self) -> int | None:
        return getattr(self, "_num_epochs", None)

    def __repr__(self) -> str:
        return (f"GPTDataset({self.name or self.indexed.prefix!r}, split={self.split}, samples={len(self)}, "
                f"seq_len={self.seq_len})")


def gpt_cache_description(indexed: IndexedDataset, split: str, split_name: str, beg: int, end: int,
                          num_samples: int | None, seq_len: int, seed: int, extra: int,
                          drop_last_partial: bool, order: str = "megatron") -> dict:
    """Everything the GPT indices depend on (the cache key is a hash of it; Megatron's order keeps the key it
    had before orders existed)."""
    return {**({"order": order} if order != "megatron" else {}),
        "class": "GPTDataset", "format": CACHE_FORMAT,
        "dataset_path": str(Path(indexed.prefix).resolve()), "fingerprint": indexed.fingerprint(),
        "split": split, "index_split": split_name, "sequence_range": [beg, end],
        "num_samples": num_samples, "sequence_length": int(seq_len), "random_seed": int(seed),
        "add_extra_token_to_sequence": bool(extra), "drop_last_partial_sequence": bool(drop_last_partial),
    }


def build_gpt_dataset(indexed: IndexedDataset, split: str, split_name: str, num_samples: int | None,
                      seq_len: int, seed: int, cache_dir: str | Path | None = None, *, extra: int = 1,
                      drop_last_partial: bool = True, pad_id: int = -1, name: str = "",
                      order: str = "stable") -> GPTDataset:
    """One split of one indexed dataset as a :class:`GPTDataset`, its indices loaded from ``cache_dir``
    when a cache built with the same parameters and data is there, else built (and saved there).
    ``order``: "stable" (the first N samples do not depend on ``num_samples``) or "megatron" (Megatron-core's
    arrays)."""
    if order not in ORDERS:
        raise ValueError(f"order {order!r}: use one of {', '.join(ORDERS)}")
    k = SPLIT_NAMES.index(split_name)
    rng_ = split_ranges(len(indexed), split)[k]
    what = f"split {split_name!r} ({split}) of {name or indexed.prefix}"
    if rng_ is None:
        raise EmptySplitError(f"{what} is 0 in the split string, yet {num_samples} samples were requested")
    beg, end = rng_
    if end <= beg:
        raise EmptySplitError(
            f"{what} gets no documents ({len(indexed)} sequences in the dataset); change the split or add "
            "data (Megatron-LM would hang here, NVIDIA/Megatron-LM#957)")
    desc = gpt_cache_description(indexed, split, split_name, beg, end, num_samples, seq_len, seed, extra,
                                 drop_last_partial, order)

    def build():
        if order == "stable":
            from pretrain.data.stable_order import build_stable_indices as build_indices
        else:
            build_indices = build_gpt_indices
        ix = build_indices(indexed.sequence_lengths, np.arange(beg, end, dtype=np.int32), num_samples,
                           seq_len, seed, extra, drop_last_partial, what=what)
        arrays = {"document_index": ix.document_index, "sample_index": ix.sample_index,
                  "shuffle_index": ix.shuffle_index}
        info = {"num_epochs": ix.num_epochs, "tokens_per_epoch": ix.tokens_per_epoch,
                "separate_final_epoch": ix.separate_final_epoch}
        return arrays, info

    names = ("document_index", "sample_index", "shuffle_index")
    if cache_dir is None:
        arrays, info = build()
    else:
        arrays, info = IndexCache(cache_dir).get_or_build(cache_key(desc), desc, names, build)
    try:
        ds = GPTDataset(indexed, arrays, seq_len, num_samples=num_samples, extra=extra, pad_id=pad_id,
                        name=name, split=split_name, documents=(beg, end))
    except ValueError as e:
        if cache_dir is None:
            raise
        raise ValueError(f"{e}: the index cache {cache_dir} is damaged; delete it and it is rebuilt") from e
    ds.cache_description = desc
    ds._num_epochs = info.get("num_epochs")
    ds.tokens_per_epoch = info.get("tokens_per_epoch")
    ds.separate_final_epoch = info.get("separate_final_epoch")
    return ds


def requested_per_dataset(weights: list[float], size: int, surplus: float = 0.005) -> list[int]:
    """Samples each blended dataset is asked for: ceil(ceil(size * w) * (1 + surplus))."""
    return [int(math.ceil(math.ceil(size * w) * (1 + surplus))) for w in weights]
