"""Hostile input, eighth round: tokenizer training and tokenization of kept documents.

- a document of one long line (no newline) was cut for SentencePiece by measuring the rest of the line anew at
  every cut: quadratic (a 30 MB line took 70 s); the pieces stay the same and the cost is linear;
- a document the tokenizer normalizes to no token (zero-width spaces under NFKC) was written as a document of
  EOD alone, and not counted as empty;
- ``sampled_documents`` counted null and empty texts that gave nothing to train on.
"""
import numpy as np

import curated  # tests/data/pretrain/curated.py (pytest's pythonpath)
from pretrain.data.manifest_check import manifest_entries
from pretrain.data.tokenize import encode_documents
from pretrain.data.tokenizer import MAX_LINE_BYTES, _chunks, sample_training_text
from pretrain.data.tokenizer_sample import sample_spread_text


def test_a_long_line_is_cut_into_pieces_sentencepiece_keeps():
    for line in ("日本語" * 700_000, "a" * 3_000_000, ("word " * 100 + "x" * 20_000) * 30):
        pieces = list(_chunks(line))
        assert "".join(pieces) == line
        assert all(len(p.encode()) <= MAX_LINE_BYTES for p in pieces)
        assert len(pieces) >= len(line.encode()) // MAX_LINE_BYTES


class _Normalizing:
    """A tokenizer whose normalization removes zero-width spaces (as an NFKC SentencePiece model does)."""
    eod_id = 2

    def encode(self, text):
        return [ord(c) % 50 + 3 for c in text if c != "\u200b"]

    def encode_batch(self, texts, num_threads=1):
        return [self.encode(t) for t in texts]


def test_a_text_that_encodes_to_no_token_is_counted_empty_not_written():
    ids, counts = encode_documents(_Normalizing(), ["abc", "\u200b\u200b", "", None, "d"])
    assert ids == [[ord("a") % 50 + 3, ord("b") % 50 + 3, ord("c") % 50 + 3, 2], [ord("d") % 50 + 3, 2]]
    assert counts == {"errors": 1, "empty": 2, "skipped": [(1, "empty"), (2, "empty"), (3, "encode_error")]}


def test_sampled_documents_counts_only_documents_that_gave_text(tmp_path):
    texts = [d["text"] for d in curated.prose_docs(6)] + ["", "   ", "\n\n"]
    cur = curated.make_curated(tmp_path / "cur", texts, shards=3)
    _, info = sample_training_text(cur, max_bytes=0)
    assert info["documents"] == 9 and info["sampled_documents"] == 6
    _, info = sample_spread_text(manifest_entries(cur), 10_000_000)
    assert info["sampled_documents"] == 6
