"""The Megatron-LM .bin/.idx format, byte for byte, and its reader."""
import os
import struct

import numpy as np
import pytest

from pretrain.data.indexed import (
    IndexedDataset, IndexedDatasetBuilder, dtype_code, encode_index, optimal_dtype, write_index,
)

# Two documents of uint16 tokens: [1, 2, 3] and [65535, 0]. Every byte written out by hand (little-endian).
GOLDEN_IDX = bytes(
    [0x4D, 0x4D, 0x49, 0x44, 0x49, 0x44, 0x58, 0x00, 0x00]  # magic b"MMIDIDX\0\0"
    + [1, 0, 0, 0, 0, 0, 0, 0]                              # uint64 version 1
    + [8]                                                   # uint8 dtype code 8 = uint16
    + [2, 0, 0, 0, 0, 0, 0, 0]                              # uint64 N = 2 sequences
    + [3, 0, 0, 0, 0, 0, 0, 0]                              # uint64 D = 2 documents + 1
    + [3, 0, 0, 0] + [2, 0, 0, 0]                           # int32 lengths 3, 2
    + [0, 0, 0, 0, 0, 0, 0, 0] + [6, 0, 0, 0, 0, 0, 0, 0]   # int64 byte pointers 0, 6
    + [0] * 8 + [1, 0, 0, 0, 0, 0, 0, 0] + [2, 0, 0, 0, 0, 0, 0, 0]  # int64 document indices 0, 1, 2
)
GOLDEN_BIN = bytes([1, 0, 2, 0, 3, 0, 0xFF, 0xFF, 0, 0])


def test_writer_produces_the_golden_bytes(tmp_path):
    with IndexedDatasetBuilder(tmp_path / "g", dtype=np.uint16) as b:
        b.add_document([1, 2, 3])
        b.add_document(np.array([65535, 0]))
    assert (tmp_path / "g.idx").read_bytes() == GOLDEN_IDX
    assert (tmp_path / "g.bin").read_bytes() == GOLDEN_BIN
    assert len(GOLDEN_IDX) == 34 + 12 * 2 + 8 * 3


def test_reader_reads_hand_written_bytes_zero_copy(tmp_path):
    (tmp_path / "h.idx").write_bytes(GOLDEN_IDX)
    (tmp_path / "h.bin").write_bytes(GOLDEN_BIN)
    ds = IndexedDataset(tmp_path / "h")
    assert len(ds) == 2 and ds.num_documents == 2 and ds.dtype == np.uint16
    assert ds[0].tolist() == [1, 2, 3] and ds[1].tolist() == [65535, 0]
    assert ds.get(0, offset=1, length=2).tolist() == [2, 3]
    assert ds.get(1, offset=1).tolist() == [0]
    assert ds.document_indices.tolist() == [0, 1, 2]
    assert ds.sequence_pointers.tolist() == [0, 6]
    view = ds.get(0, 1, 2)
    assert np.shares_memory(view, ds.tokens) and not view.flags.writeable  # a view of the memory map
    with pytest.raises(IndexError):
        ds.get(0, offset=2, length=2)
    with pytest.raises(IndexError):
        ds.get(2)


def test_documents_of_several_sequences_and_int32_tokens(tmp_path):
    """D counts documents, N sequences: a document split in two sequences gives N=3, D=3."""
    with IndexedDatasetBuilder(tmp_path / "s", dtype=np.int32) as b:
        b.add_document([1, 2, 70000], lengths=[2, 1])
        b.add_document([4])
    raw = (tmp_path / "s.idx").read_bytes()
    magic, version, code, n, d = struct.unpack("<9sQBQQ", raw[:34])
    assert (magic, version, code, n, d) == (b"MMIDIDX\x00\x00", 1, 4, 3, 3)
    assert np.frombuffer(raw, "<i4", 3, 34).tolist() == [2, 1, 1]
    assert np.frombuffer(raw, "<i8", 3, 34 + 12).tolist() == [0, 8, 12]  # itemsize 4
    assert np.frombuffer(raw, "<i8", 3, 34 + 36).tolist() == [0, 2, 3]
    assert (tmp_path / "s.bin").read_bytes() == np.array([1, 2, 70000, 4], "<i4").tobytes()
    ds = IndexedDataset(tmp_path / "s")
    assert ds.document(0).tolist() == [1, 2, 70000] and ds.document(1).tolist() == [4]


def test_token_dtype_follows_megatron_vocabulary_threshold():
    assert optimal_dtype(65499) == np.uint16
    assert optimal_dtype(65500) == np.int32
    assert optimal_dtype(None) == np.int32
    assert [dtype_code(t) for t in (np.uint8, np.int8, np.int16, np.int32, np.int64, np.float64, np.float32,
                                    np.uint16)] == [1, 2, 3, 4, 5, 6, 7, 8]


def test_round_trip_and_merge(tmp_path):
    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 50000, rng.integers(0, 300)) for _ in range(200)]
    with IndexedDatasetBuilder(tmp_path / "all", np.uint16) as b:
        for doc in docs:
            b.add_document(doc)
    ds = IndexedDataset(tmp_path / "all")
    assert len(ds) == 200 and all(np.array_equal(ds[i], d) for i, d in enumerate(docs))
    assert ds.num_tokens == sum(map(len, docs))
    # the same documents as two datasets appended one to the other: identical files
    for name, part in (("a", docs[:77]), ("b", docs[77:])):
        with IndexedDatasetBuilder(tmp_path / name, np.uint16) as b:
            b.add_documents(np.concatenate(part), [len(d) for d in part])
    with IndexedDatasetBuilder(tmp_path / "merged", np.uint16) as b:
        b.add_index(tmp_path / "a")
        b.add_index(tmp_path / "b")
    for ext in (".bin", ".idx"):
        assert (tmp_path / f"merged{ext}").read_bytes() == (tmp_path / f"all{ext}").read_bytes()


def test_bad_files_are_refused(tmp_path):
    (tmp_path / "x.bin").write_bytes(GOLDEN_BIN)
    (tmp_path / "x.idx").write_bytes(b"NOTMAGIC!" + GOLDEN_IDX[9:])
    with pytest.raises(ValueError, match="magic"):
        IndexedDataset(tmp_path / "x")
    (tmp_path / "x.idx").write_bytes(GOLDEN_IDX[:-8])
    with pytest.raises(ValueError, match="truncated"):
        IndexedDataset(tmp_path / "x")
    (tmp_path / "x.idx").write_bytes(GOLDEN_IDX)
    (tmp_path / "x.bin").write_bytes(GOLDEN_BIN[:-2])
    with pytest.raises(ValueError, match="truncated"):
        IndexedDataset(tmp_path / "x")
    with pytest.raises(FileNotFoundError, match="nope.idx not found"):
        IndexedDataset(tmp_path / "nope")
    os.mkfifo(tmp_path / "fifo.idx")  # opened, it would block for ever
    (tmp_path / "fifo.bin").write_bytes(GOLDEN_BIN)
    with pytest.raises(FileNotFoundError, match="fifo.idx is not a regular file"):
        IndexedDataset(tmp_path / "fifo")
    with pytest.raises(ValueError, match="document indices"):
        encode_index(np.uint16, [1, 2], [0, 1])


def _patched(offset: int, fmt: str, value) -> bytes:
    """GOLDEN_IDX with one field overwritten, as a crafted or damaged index would be."""
    b = bytearray(GOLDEN_IDX)
    struct.pack_into(fmt, b, offset, value)
    return bytes(b)


# offsets in GOLDEN_IDX: lengths at 34, pointers at 42, document indices at 58
@pytest.mark.parametrize("offset, fmt, value, message", [
    (38, "<i", -2, "negative length"),                 # second sequence's length
    (38, "<i", 400, "truncated"),                       # the last sequence longer than the .bin
    (34, "<i", 9, "outside"),                           # a middle sequence running past the .bin's end
    (50, "<q", 10**12, "truncated"),                    # the last pointer far past the .bin
    (50, "<q", -6, "outside"),                          # a negative pointer
    (50, "<q", 5, "aligned"),                           # an odd byte pointer into uint16 tokens
    (58, "<q", 1, "document indices"),                  # documents not starting at 0
    (66, "<q", 3, "document indices"),                  # document indices 0, 3, 2: out of order
])
def test_crafted_index_fields_are_refused_naming_the_problem(tmp_path, offset, fmt, value, message):
    (tmp_path / "x.bin").write_bytes(GOLDEN_BIN)
    (tmp_path / "x.idx").write_bytes(_patched(offset, fmt, value))
    with pytest.raises(ValueError, match=message):
        IndexedDataset(tmp_path / "x")


def test_interrupted_builder_leaves_no_dataset(tmp_path):
    with pytest.raises(RuntimeError):
        with IndexedDatasetBuilder(tmp_path / "k", np.uint16) as b:
            b.add_document([1, 2, 3])
            raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []
    write_index(tmp_path / "w.idx", np.uint16, [3, 2], [0, 1, 2])
    assert (tmp_path / "w.idx").read_bytes() == GOLDEN_IDX
