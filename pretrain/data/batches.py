"""What the training loop eats: the train/validation datasets (the blend's, or synthetic tokens), the checks that
the data exists and fits the vocabulary, and this dp rank's slice of each global batch.

One step consumes the global batch [consumed, consumed + B) of the train split in order (dp rank r takes
micro-batch j = samples consumed + (j * dp + r) * mbs + [0, mbs)), so a resume that restores consumed_samples
continues the same data order."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from pretrain.config import Config, ConfigError, batch_size_at


class DataError(ConfigError):
    """The training data cannot be used as it is (tokens outside the vocabulary); says what to change."""


class SyntheticDataset:
    """Deterministic learnable token sequences with the blend datasets' interface: sample i is an arithmetic
    progression modulo the vocabulary (start and stride drawn from (seed, i)) with 1 in 8 tokens replaced by noise."""

    def __init__(self, num_samples: int, seq_len: int, vocab_size: int, seed: int):
        self.n, self.seq_len, self.vocab, self.seed = num_samples, seq_len, vocab_size, seed

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> np.ndarray:
        if not 0 <= i < self.n:
            raise IndexError(i)
        rng = np.random.default_rng([self.seed, i])
        start, stride = rng.integers(0, self.vocab), rng.integers(1, 8)
        x = (start + stride * np.arange(self.seq_len + 1)) % self.vocab
        noise = rng.random(self.seq_len + 1) < 0.125
        x[noise] = rng.integers(0, self.vocab, int(noise.sum()))
        return x.astype(np.int64)

    def get_batch(self, indices) -> np.ndarray:
        return np.stack([self[int(i)] for i in indices]) if len(indices) else np.empty((0, self.seq_len + 1),
                                                                                       np.int64)


def build_datasets(cfg: Config, num_train: int, num_valid: int):
    d = cfg.data
    if d.kind == "synthetic":
        train = SyntheticDataset(num_train, d.seq_len, cfg.model.vocab_size, cfg.train.seed)
        valid = SyntheticDataset(num_valid, d.seq_len, cfg.model.vocab_size, cfg.train.seed + 1) if num_valid else None
        return train, valid
    from pretrain.data.blend import build_blend_splits
    from pretrain.data.gpt_dataset import EmptySplitError

    try:
        train, valid, _ = build_blend_splits(d.blend, d.seq_len, (num_train, num_valid, 0), cfg.train.seed,
                                             d.cache_dir, order=d.order)
    except EmptySplitError as e:
        raise ConfigError(f"data.blend {d.blend}: {e}" + (" (or set train.eval_interval = 0: no validation)"
                                                          if num_valid else "")) from e
    except (ValueError, IndexError) as e:  # a damaged .idx or index cache, a blend that draws too much
        raise ConfigError(f"data.blend {d.blend}: {e}") from e
    return train, valid


DEMO_HINT = ("run `make demo` (or steps 1-6 of pipelines/demo.sh) to tokenize the repository's sample, or train on "
             "synthetic tokens: --set data.kind=synthetic --set model.vocab_size=256")


def check_data_paths(cfg: Config) -> None:
    """Before any process-group work: the tokenizer and the blend's .bin/.idx files exist."""
    d = cfg.data
    if d.kind != "blend":
        return
    if d.tokenizer and cfg.model.vocab_size is None and not Path(d.tokenizer).is_file():
        from curate.file_kind import file_problem

        problem = file_problem(d.tokenizer)
        if problem and problem.startswith("not found"):
            raise ConfigError(f"data.tokenizer {d.tokenizer} {problem}: {DEMO_HINT}")
        raise ConfigError(f"data.tokenizer {d.tokenizer} {problem}: give a SentencePiece .model file")
    from pretrain.data.blend_spec import BlendSpecError, load_blend_spec

    try:
        spec = load_blend_spec(d.blend)
    except (BlendSpecError, OSError) as e:
        raise ConfigError(f"data.blend {d.blend}: {e}") from e
    from pretrain.data.parts import PARTS_INDEX, is_parts_dataset

    for ds in spec.datasets:
        if is_parts_dataset(ds.prefix):  # a dataset of parts (pretrain tokenize --parts): PREFIX/parts.json
            continue
        for ext in (".bin", ".idx"):
            if not Path(ds.prefix + ext).is_file():
                raise ConfigError(f"data.blend {d.blend}: dataset {ds.name!r} has no {ds.prefix}{ext} (nor "
                                  f"{ds.prefix}/{PARTS_INDEX}): {DEMO_HINT}")


def local_indices(first_sample: int, n_micro: int, mbs: int, dp: int, dp_rank: int) -> np.ndarray:
    """Sample indices of this dp rank's micro-batches of the global batch starting at ``first_sample``, in order."""
    j = np.arange(n_micro, dtype=np.int64)[:, None]
    return (first_sample + (j * dp + dp_rank) * mbs + np.arange(mbs, dtype=np.int64)[None, :]).reshape(-1)


def local_batch(ds, first_sample: int, n_micro: int, mbs: int, dp: int, dp_rank: int,
                vocab_size: int | None = None) -> torch.Tensor:
    """This dp rank's micro-batches of the global batch starting at ``first_sample``, stacked [n_micro * mbs, T+1]
    (one vectorised ``get_batch`` call). With ``vocab_size``, every token must be a vocabulary id: data
    tokenized with a larger vocabulary (or a damaged .bin) stops the run here, naming the sample, instead of
    as an index error inside the embedding (a device-side assert on a GPU)."""
    idx = local_indices(first_sample, n_micro, mbs, dp, dp_rank)
    if hasattr(ds, "get_batch"):
        batch = np.ascontiguousarray(ds.get_batch(idx), dtype=np.int64)
    else:
        batch = np.stack([np.asarray(ds[int(i)], dtype=np.int64) for i in idx])
    if vocab_size is not None and batch.size and (batch.min() < 0 or batch.max() >= vocab_size):
        row = int(np.argmax(((batch < 0) | (batch >= vocab_size)).any(axis=1)))
        bad = batch[row][(batch[row] < 0) | (batch[row] >= vocab_size)][0]
        raise DataError(f"sample {int(idx[row])} holds token id {int(bad)}, outside the model's vocabulary of "
                         f"{vocab_size}: the data was tokenized with another tokenizer (or its .bin is damaged); "
                         "re-tokenize it with data.tokenizer, or set model.vocab_size to that tokenizer's")
    return torch.from_numpy(batch)


def build_data(cfg: Config, env, num_train: int, num_valid: int):
    """Rank 0 builds (and caches) the blend indices first, then the others read them."""
    if not dist.is_initialized() or cfg.data.kind == "synthetic":
        return build_datasets(cfg, num_train, num_valid)
    if env.rank == 0:
        out = build_datasets(cfg, num_train, num_valid)
    dist.barrier()
    if env.rank != 0:
        out = build_datasets(cfg, num_train, num_valid)
    return out


def batch_plan(cfg: Config, step: int, consumed: int):
    """(first sample, micro-batches) of each remaining step, in order."""
    t, p = cfg.train, cfg.parallel
    while step < t.steps:
        gbs = batch_size_at(cfg, consumed)
        yield consumed, gbs // (t.micro_batch * p.dp)
        consumed += gbs
        step += 1
