"""The extension-stable sample order (``order = "stable"``, the default): the first N samples of a dataset never
depend on how many samples are asked for, so a run resumed with a larger ``train.steps`` continues exactly the
order it started with.

Megatron-core's ``GPTDataset`` (``order = "megatron"``, see :func:`pretrain.data.gpt_dataset.build_gpt_indices`)
shuffles the documents of all the epochs it needs together and the samples of the whole run together, both
from one ``RandomState(seed)``: asking for more samples than one epoch holds changes the epoch count and with it
every index (a 40-document dataset built for 40 vs 120 samples shares none of its first 30 samples). Here:

- document index: epoch ``e`` is its own permutation of the split's documents, drawn from ``(seed, 0, e)``;
  the epochs are concatenated in order, so more epochs only append;
- sample index: cut from that stream exactly as Megatron cuts it (:func:`build_sample_index`), so its first
  rows depend only on the first epochs;
- shuffle index: the samples are shuffled within fixed blocks of one epoch's worth of samples
  (``(tokens_per_epoch - extra) // seq_len``), block ``b`` drawn from ``(seed, 1, b)``; only whole blocks are
  built, so the dataset holds ``ceil(N / block) * block >= N`` samples.

Trade-off against Megatron's order: the arrays are not Megatron-core's (``order = "megatron"`` keeps them,
byte for byte); every epoch's samples stay within their own block, so a repeated sample never comes back
within the same block (Megatron mixes the samples of all epochs but a short last one); and up to one block of
samples more than requested is indexed.
"""
from __future__ import annotations

import numpy as np

from pretrain.data.gpt_dataset import (
    GPTIndices, build_sample_index, check_index_fits, num_epochs_needed, split_tokens,
)

_DOCUMENTS, _SAMPLES = 0, 1  # random streams: (seed, stream, epoch or block)


def _rng(seed: int, stream: int, k: int) -> np.random.Generator:
    return np.random.default_rng([int(seed) & 0xFFFFFFFFFFFFFFFF, stream, k])


def epoch_documents(documents: np.ndarray, seed: int, epoch: int) -> np.ndarray:
    """Epoch ``epoch``'s document order: a permutation of ``documents`` drawn from (seed, epoch) alone."""
    return _rng(seed, _DOCUMENTS, epoch).permutation(np.asarray(documents, dtype=np.int32))


def block_shuffle(block: int, num_blocks: int, seed: int) -> np.ndarray:
    """Samples ``[b * block, (b + 1) * block)`` permuted among themselves for every block ``b``."""
    total = block * num_blocks
    dtype = np.uint32 if total < np.iinfo(np.uint32).max - 1 else np.int64
    out = np.empty(total, dtype=dtype)
    for b in range(num_blocks):
        out[b * block:(b + 1) * block] = _rng(seed, _SAMPLES, b).permutation(block) + b * block
    return out


def build_stable_indices(sizes: np.ndarray, documents: np.ndarray, num_samples: int | None, seq_len: int,
                         seed: int, extra: int = 1, drop_last_partial: bool = True,
                         what: str = "the split") -> GPTIndices:
    """Indices of the extension-stable order (see the module doc) for sequence ids ``documents`` of a dataset
    whose sequence lengths are ``sizes``; ``num_samples`` None means the samples of one epoch."""
    sizes = np.asarray(sizes)
    documents = np.asarray(documents)
    tokens_per_epoch = split_tokens(sizes, documents, seq_len, what)
    block = max(1, (tokens_per_epoch - extra) // seq_len)  # samples in one epoch (at least one)
    blocks = 1 if num_samples is None else max(1, -(-int(num_samples) // block))
    epochs = num_epochs_needed(tokens_per_epoch, blocks * block, seq_len, extra)
    check_index_fits(len(documents), epochs, tokens_per_epoch, num_samples, seq_len, what)
    document_index = np.concatenate([epoch_documents(documents, seed, e) for e in range(epochs)])
    sample_index = build_sample_index(sizes, document_index, seq_len, epochs, tokens_per_epoch,
                                      drop_last_partial, extra)
    if sample_index.shape[0] - 1 < blocks * block:  # cannot happen: epochs cover blocks * block samples
        raise AssertionError((sample_index.shape, blocks, block))
    sample_index = np.array(sample_index[:blocks * block + 1])  # whole blocks only
    return GPTIndices(document_index, sample_index, block_shuffle(block, blocks, seed), epochs,
                      tokens_per_epoch, False)
