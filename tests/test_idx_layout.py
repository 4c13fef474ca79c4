"""The reader refuses .idx/.bin pairs whose sequences are not laid out back to back (gaps, overlaps, pointers
going backwards, trailing bytes after the last sequence) and float token dtypes, naming the file and the first
bad sequence: such files would otherwise feed filler bytes or other sequences' tokens into training samples."""
from pathlib import Path

import numpy as np
import pytest

from pretrain.data.indexed import HEADER, MAGIC, IndexedDataset, IndexedDatasetBuilder, encode_index


def _write(prefix: Path, code: int, lengths, pointers, bin_bytes: bytes, docs=None) -> Path:
    n = len(lengths)
    docs = np.arange(n + 1) if docs is None else np.asarray(docs)
    prefix.with_suffix(".idx").write_bytes(
        HEADER.pack(MAGIC, 1, code, n, len(docs)) + np.asarray(lengths, "<i4").tobytes()
        + np.asarray(pointers, "<i8").tobytes() + np.asarray(docs, "<i8").tobytes())
    prefix.with_suffix(".bin").write_bytes(bin_bytes)
    return prefix


def _u16(n_tokens: int) -> bytes:
    return np.arange(1, n_tokens + 1, dtype="<u2").tobytes()


def test_valid_back_to_back_file_loads(tmp_path):
    p = _write(tmp_path / "ok", 8, [3, 0, 2, 4], [0, 6, 6, 10], _u16(9))
    ds = IndexedDataset(p)
    assert [list(ds[i]) for i in range(4)] == [[1, 2, 3], [], [4, 5], [6, 7, 8, 9]]


def test_builder_written_file_loads(tmp_path):
    with IndexedDatasetBuilder(tmp_path / "b", dtype=np.int32) as b:
        for k in range(50):
            b.add_document(np.arange(k % 7, dtype=np.int32))
    ds = IndexedDataset(tmp_path / "b")
    assert len(ds) == 50 and list(ds[6]) == list(range(6))


def test_empty_index_with_empty_bin_loads_and_with_bytes_is_refused(tmp_path):
    assert len(IndexedDataset(_write(tmp_path / "e", 8, [], [], b""))) == 0
    with pytest.raises(ValueError, match=r"e\.idx.*no sequences.*4 bytes"):
        IndexedDataset(_write(tmp_path / "e", 8, [], [], _u16(2)))


def test_gaps_between_sequences_are_refused(tmp_path):
    # 3 tokens, a 2-token gap, 3 tokens: both sequences inside the .bin
    p = _write(tmp_path / "gaps", 8, [3, 3], [0, 10], _u16(8))
    with pytest.raises(ValueError, match=r"gaps\.idx: sequence 1 starts at byte 10.*ends at byte 6.*gap of 4 bytes"):
        IndexedDataset(p)


def test_first_sequence_not_at_byte_zero_is_refused(tmp_path):
    p = _write(tmp_path / "late", 8, [3, 3], [2, 8], _u16(7))
    with pytest.raises(ValueError, match=r"late\.idx: sequence 0 starts at byte 2, not 0"):
        IndexedDataset(p)


def test_trailing_bytes_after_the_last_sequence_are_refused(tmp_path):
    p = _write(tmp_path / "trailing", 8, [3, 3], [0, 6], _u16(10))
    with pytest.raises(ValueError, match=r"trailing\.idx: the last sequence \(1\) ends at byte 12.*20 bytes.*8 trailing"):
        IndexedDataset(p)


@pytest.mark.parametrize("pointers", [[0, 0, 0], [0, 6, 2], [0, 4, 10]])
def test_overlapping_or_backwards_pointers_are_refused(tmp_path, pointers):
    p = _write(tmp_path / "ov", 8, [3, 3, 3], pointers, _u16(9))
    with pytest.raises(ValueError, match=r"ov\.idx: sequence \d starts at byte \d+.*overlapping.*backwards"):
        IndexedDataset(p)


def test_first_bad_sequence_is_named_in_a_large_index(tmp_path, monkeypatch):
    import pretrain.data.indexed as indexed
    monkeypatch.setattr(indexed, "_LAYOUT_CHUNK", 1000)  # the bad sequence lies in a later chunk
    n = 5000
    lengths = np.full(n, 2)
    pointers = np.arange(n, dtype=np.int64) * 4
    pointers[3456:] += 2
    p = _write(tmp_path / "big", 8, lengths, pointers, _u16(2 * n + 1))
    with pytest.raises(ValueError, match=r"big\.idx: sequence 3456 starts at byte 13826.*gap of 2 bytes"):
        IndexedDataset(p)


@pytest.mark.parametrize("code, dt", [(6, "<f8"), (7, "<f4")])
def test_float_token_dtypes_are_refused(tmp_path, code, dt):
    p = _write(tmp_path / "fl", code, [2, 2], [0, 2 * np.dtype(dt).itemsize],
               np.array([1.0, 4.7, 2.0, 3.0], dt).tobytes())
    with pytest.raises(ValueError, match=rf"fl\.idx: dtype code {code} .*not a token dtype"):
        IndexedDataset(p)


def test_megatron_layout_with_several_sequences_per_document_loads(tmp_path):
    # Megatron's writer: pointers are the running byte sums of the lengths, documents group sequences
    (tmp_path / "m.idx").write_bytes(encode_index(np.int32, [2, 1, 3], [0, 2, 3]))
    (tmp_path / "m.bin").write_bytes(np.arange(6, dtype="<i4").tobytes())
    ds = IndexedDataset(tmp_path / "m")
    assert list(ds.document(0)) == [0, 1, 2] and list(ds.document(1)) == [3, 4, 5]
