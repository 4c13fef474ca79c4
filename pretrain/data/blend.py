"""Blends of indexed datasets, as Megatron-core's BlendedDataset; ``pretrain blend build|inspect``.

Each split (train, valid, test) of a blend is built like Megatron-core's BlendedMegatronDatasetBuilder:
the weights are normalized; dataset ``d`` is asked for ``ceil(ceil(S * w_d) * 1.005)`` samples of its
own split (a :class:`~pretrain.data.gpt_dataset.GPTDataset`); the blend holds ``sum_d ceil(S * w_d)``
samples, interleaved by greedy error minimization: position ``i`` takes the dataset with the largest
``w_d * max(i, 1) - count_d`` (ties to the first), so every prefix of the blend stays within one
sample of ``w_d * i`` per dataset. With ``order = "megatron"``: same inputs and seed, same arrays as
Megatron-core; with ``order = "stable"`` (default) the datasets' own indices are extension-stable
(``pretrain/data/stable_order.py``) and so is the blend.

Index cache layout (``pretrain blend build --out CACHE``, or ``cache_dir`` of :func:`build_blend_splits`)::

    CACHE/dataset_index.npy, dataset_sample_index.npy, index.json   the train blend
    CACHE/<name>/document_index.npy, sample_index.npy, shuffle_index.npy, index.json
    CACHE/valid/... and CACHE/test/...                             the same for the other splits

Each ``index.json`` holds the hash of every parameter and of the data the arrays were built from; a
folder whose key differs is rebuilt, and arrays are never read half-written. ``pretrain blend build`` refuses,
before it builds anything, a CACHE where a file it would replace is not an index cache's (:func:`cache_dir_problem`)
unless ``--force``.
"""
from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import numpy as np

from pretrain.data.blend_spec import BlendSpec, BlendSpecError, load_blend_spec
from pretrain.data.defaults import DEFAULT_MAX_EPOCHS
from pretrain.data.gpt_dataset import (
    DEFAULT_SPLIT, SPLIT_NAMES, EmptySplitError, GPTDataset, IndexCache, _normalize, build_gpt_dataset,
    cache_key, index_bytes, parse_split, requested_per_dataset, split_matrix, split_ranges,
)
from pretrain.data.index_cache import deferred_sync
from pretrain.data.indexed import IndexedDataset
from pretrain.data.parts import open_indexed

MID_LEVEL_SURPLUS = 0.005
BLEND_ARRAYS = ("dataset_index", "dataset_sample_index")  # a blend split's cached arrays
GPT_ARRAYS = ("document_index", "sample_index", "shuffle_index")  # a dataset's (gpt_dataset.build_gpt_dataset)


# ------------------------------------------------------------------------------------ blending indices

def _greedy_blend(weights, size, dataset_index, dataset_sample_index):
    counts = np.zeros(weights.shape[0], dtype=np.int64)
    for i in range(size):
        x = max(float(i), 1.0)
        best = 0
        best_error = weights[0] * x - counts[0]
        for d in range(1, weights.shape[0]):
            error = weights[d] * x - counts[d]
            if error > best_error:
                best_error = error
                best = d
        dataset_index[i] = best
        dataset_sample_index[i] = counts[best]
        counts[best] += 1


try:  # compiled: one pass in machine code, no Python loop per sample
    import numba

    _greedy_blend = numba.njit(cache=True, nogil=True)(_greedy_blend)
except ImportError:  # pragma: no cover - numba is a dependency; keep working without it
    pass


def build_blending_indices(weights, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(dataset_index int16, dataset_sample_index int64) of a blend of ``size`` samples."""
    w = np.ascontiguousarray(weights, dtype=np.float64)
    if len(w) >= 32767:
        raise ValueError("at most 32,766 datasets can be blended (the dataset index is int16)")
    dataset_index = np.zeros(size, dtype=np.int16)
    dataset_sample_index = np.zeros(size, dtype=np.int64)
    if size:
        _greedy_blend(w, int(size), dataset_index, dataset_sample_index)
    return dataset_index, dataset_sample_index


def _check_blend_indices(dataset_index, sample_index, lengths: list[int], split: str, weights=None,
                         size: int | None = None) -> None:
    """Each blended sample names a dataset that exists and a sample inside it (a damaged or crafted blend
    cache fails here, not as a sample silently taken from the wrong dataset by a negative index). And what every
    build holds, which in-range values can break (a ``dataset_sample_index`` of zeros trains on one sample of
    each dataset): ``size`` samples; dataset ``d`` drawn at most ``w_d * size + 1`` times (the greedy interleave
    never puts a dataset a full sample ahead of its share); and dataset ``d``'s samples taken in order 0, 1, 2, ...
    Linear passes in blocks (a stable sort of int16 is a radix sort)."""
    which, local = np.asarray(dataset_index), np.asarray(sample_index)
    if which.shape != local.shape or which.ndim != 1:
        raise ValueError(f"{split} blend index: dataset and sample arrays of shapes {which.shape} and {local.shape}")
    if size is not None and len(which) != size:
        raise ValueError(f"{split} blend index: {len(which)} samples, the blend has {size}")
    if not len(which):
        return
    if which.min() < 0 or which.max() >= len(lengths):
        raise ValueError(f"{split} blend index: a dataset index outside the {len(lengths)} datasets")
    if local.min() < 0 or (local >= np.asarray(lengths, dtype=np.int64)[which]).any():
        raise ValueError(f"{split} blend index: a sample index outside its dataset")
    k, seen, step = len(lengths), np.zeros(len(lengths), dtype=np.int64), 1 << 22
    for beg in range(0, len(which), step):
        w = which[beg:beg + step].astype(np.intp)
        order = np.argsort(w, kind="stable")
        counts = np.bincount(w, minlength=k)
        first = np.cumsum(counts) - counts  # where each dataset's run starts in the sorted block
        ws = w[order]
        if not np.array_equal(local[beg:beg + step][order], seen[ws] + np.arange(len(w)) - first[ws]):
            raise ValueError(f"{split} blend index: a dataset's samples are not taken in order 0, 1, 2, ... (a "
                             "sample repeated or skipped)")
        seen += counts
    if weights is not None:
        over = seen > np.asarray(weights, dtype=np.float64) * len(which) + 1 + 1e-6
        if over.any():
            d = int(np.argmax(over))
            raise ValueError(f"{split} blend index: dataset {d} drawn {int(seen[d])} times, more than its weight "
                             f"{weights[d]:.4g} gives of {len(which)} samples")


class BlendedDataset:
    """Sample ``i`` is sample ``dataset_sample_index[i]`` of dataset ``dataset_index[i]``."""

    def __init__(self, datasets: list[GPTDataset], weights: list[float], dataset_index: np.ndarray,
                 dataset_sample_index: np.ndarray, names: list[str], split: str = "train", size: int | None = None):
        self.datasets = datasets
        self.weights = weights
        self.dataset_index = dataset_index
        self.dataset_sample_index = dataset_sample_index
        self.names = names
        self.split = split
        self.seq_len = datasets[0].seq_len
        self._size = len(dataset_index)
        _check_blend_indices(dataset_index, dataset_sample_index, [len(d) for d in datasets], split, weights, size)

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, idx: int) -> np.ndarray:
        if idx < 0:
            idx += self._size
        if not 0 <= idx < self._size:
            raise IndexError(f"sample {idx} out of range for {self._size} samples")
        return self.datasets[self.dataset_index[idx]][int(self.dataset_sample_index[idx])]

    def get_batch(self, indices) -> np.ndarray:
        """Samples ``indices`` as one ``[len(indices), seq_len + 1]`` int64 array (one gather per dataset)."""
        idx = np.asarray(indices, dtype=np.int64)
        idx = np.where(idx < 0, idx + self._size, idx)
        if len(idx) and (idx.min() < 0 or idx.max() >= self._size):
            raise IndexError(f"sample index out of range for {self._size} samples")
        which = np.asarray(self.dataset_index[idx])
        local = np.asarray(self.dataset_sample_index[idx])
        out = np.empty((len(idx), self.datasets[0]._size), dtype=np.int64)
        for d in np.unique(which):
            rows = which == d
            out[rows] = self.datasets[d].get_batch(local[rows])
        return out

    def __repr__(self) -> str:
        parts = ", ".join(f"{n}={w:.3g}" for n, w in zip(self.names, self.weights))
        return f"BlendedDataset({self.split}, samples={len(self)}, {parts})"


# ------------------------------------------------------------------------------------------- building

def check_dataset_names(spec) -> None:
    """The names a blend's datasets give their index cache folders, checked before anything is read: loading the
    spec checks them (``blend_spec._check_names``: a plain folder name of at most ``MAX_DATASET_NAME`` bytes, no
    two one folder on a case-insensitive file system), and a spec made in code is checked here.
    A :class:`BlendSpecError` naming the names."""
    from pretrain.data.blend_spec import _check_names

    spec = load_blend_spec(spec)
    _check_names(spec.datasets, spec.source, spec.megatron_form)


def least_index_bytes(samples: int, seq_len: int) -> int:
    """The least memory the indices of a blend of ``samples`` samples of ``seq_len`` tokens take: the rule of
    :func:`~pretrain.data.gpt_dataset.check_index_fits` (``index_bytes``) with no documents and one epoch, for the
    sample and shuffle indices of its datasets, whose samples add up to at least ``samples``. A build that needs
    more than the available memory is refused (``IndexTooLargeError``); `pretrain ablate` checks this bound for its
    ``tokens`` before it tokenizes anything."""
    return index_bytes(0, 1, samples * seq_len, seq_len)


def most_samples_within(memory: int, seq_len: int) -> int:
    """The most samples whose :func:`least_index_bytes` is at most ``memory`` bytes (0 when none fits)."""
    base = least_index_bytes(0, seq_len)
    per_sample = least_index_bytes(1, seq_len) - base  # index_bytes grows linearly in the samples
    return max(0, (memory - base) // per_sample)


def weight_shares(weights) -> list[float]:
    """The shares ``weights`` (positive, finite) give, normalised as a blend spec's weights are: scaled down by the
    largest when their sum overflows (``1e308`` and ``1e308`` are half and half, not 0 and 0:
    ``blend_spec._keep_weights_summable``), then divided by their sum (``gpt_dataset._normalize``, as the build).
    A share can still come out 0 (``1e-300`` beside ``1e300``): the caller refuses that."""
    from pretrain.data.blend_spec import DatasetSpec, _keep_weights_summable

    datasets = [DatasetSpec("", "", weight=float(w)) for w in weights]
    _keep_weights_summable(datasets)
    return [float(w) for w in _normalize([d.weight for d in datasets])]


def check_distinct_datasets(spec: BlendSpec, indexed: list) -> None:
    """No data is read twice under two names: two datasets (or two parts of a dataset of parts) whose ``.bin`` is
    one file (another spelling of the prefix, ``tokens/web`` and ``./tokens/web``, a link, a hard link), or the same
    bytes (a copy: same ``.idx``, then same ``.bin``), are refused naming both; a dataset is listed once, and its
    weight says how much of it is drawn. Empty files are exempt (reading nothing twice adds nothing)."""
    import filecmp
    import os

    from curate.file_kind import file_id
    from pretrain.data.indexed import data_file_path

    files, contents = {}, {}
    for d, ix in zip(spec.datasets, indexed):
        for part in getattr(ix, "parts", [ix]):
            path = data_file_path(part.prefix)
            st = os.stat(path)
            if not st.st_size:
                continue
            where = f"dataset {d.name!r} ({path})"
            if file_id(st) in files:
                raise BlendSpecError(f"{where} is the same file as {files[file_id(st)]}: its data would be "
                                     "read twice; list each dataset once (its weight says how much of it is drawn)")
            files[file_id(st)] = where
            same = contents.setdefault(part.fingerprint(), [])  # same .idx bytes and .bin size
            for other, other_where in same:
                if filecmp.cmp(path, other, shallow=False):
                    raise BlendSpecError(f"{where} holds the same bytes as {other_where} (a copy): its data would be "
                                         "read twice; list each dataset once (its weight says how much of it is drawn)")
            same.append((path, where))
    _check_distinct_sources(spec, indexed)


def _check_distinct_sources(spec: BlendSpec, indexed: list) -> None:
    """Two datasets tokenized from the same curated shards (their records' ``input_shards``): a ``--merge`` file
    and its parts folder, a one-file and a ``--parts`` run of one folder, a folder and a subset of it hold the
    same documents in other files, and a blend of both read them twice. Datasets whose records predate the field
    are not compared."""
    from pretrain.data.tokenize import output_record

    owner: dict[str, str] = {}
    for d, ix in zip(spec.datasets, indexed):
        # the dataset as opened: a parts folder's record is in memory, a file's is PREFIX.json
        record = ix.record if hasattr(ix, "parts") else output_record(ix.prefix)
        shards = record.get("input_shards") if isinstance(record, dict) else None
        if not isinstance(shards, list):
            continue
        for sha in dict.fromkeys(s for s in shards if isinstance(s, str)):
            first = owner.setdefault(sha, d.name)
            if first != d.name:
                raise BlendSpecError(f"datasets {first!r} and {d.name!r} were tokenized from the same curated shard "
                                     f"(sha256 {sha[:12]}...): their documents would be read twice; list one of them "
                                     "(its weight says how much of it is drawn)")


def _split_tokens(indexed: IndexedDataset, split: str, k: int) -> int:
    r = split_ranges(len(indexed), split)[k]
    if r is None:
        return 0
    return int(indexed.sequence_lengths[r[0]:r[1]].sum(dtype=np.int64))


def resolve_weights(spec: BlendSpec, indexed: list[IndexedDataset], split: str,
                    budget_tokens: int | None) -> list[float]:
    """Normalized weights. ``epochs = e`` gives a dataset ``e * (its train tokens) / budget`` of the
    budget; datasets with a ``weight`` share what is left in proportion to their weights. When every
    dataset is given in epochs, the weights are proportional to ``epochs * train tokens``."""
    if not spec.uses_epochs:
        return _normalize([d.weight for d in spec.datasets])
    train_tokens = [_split_tokens(ix, split, 0) for ix in indexed]
    if all_in_epochs(spec):
        raw = [d.epochs * t for d, t in zip(spec.datasets, train_tokens)]
        if sum(raw) <= 0:
            raise EmptySplitError("the datasets given in epochs have no train tokens")
        return _normalize(raw)
    if not budget_tokens:
        raise BlendSpecError("a blend that mixes 'weight' and 'epochs' needs a train token budget "
                             "(train samples x sequence length, or --tokens)")
    shares = [d.epochs * t / budget_tokens if d.epochs is not None else None
              for d, t in zip(spec.datasets, train_tokens)]
    fixed = sum(s for s in shares if s is not None)
    if fixed >= 1:
        raise BlendSpecError(f"the datasets given in epochs need {fixed:.3g}x the token budget "
                             f"({budget_tokens:,} tokens); nothing is left for the weighted ones")
    weighted_total = sum(d.weight for d in spec.datasets if d.weight is not None)
    raw = [s if s is not None else (1 - fixed) * d.weight / weighted_total
           for s, d in zip(shares, spec.datasets)]
    return _normalize(raw)


def all_in_epochs(spec: BlendSpec) -> bool:
    """Whether every dataset of the blend is given in epochs (none by weight)."""
    return bool(spec.datasets) and all(d.epochs is not None for d in spec.datasets)


def epochs_tokens(spec: BlendSpec, train_tokens: list[int]) -> float:
    """The train tokens a blend given wholly in epochs reads when each dataset is read as often as given."""
    return sum(d.epochs * t for d, t in zip(spec.datasets, train_tokens))


def epochs_not_as_given(spec: BlendSpec, train_tokens: list[int], budget_tokens: int | None,
                        tolerance: float = 0.1) -> str | None:
    """Where every dataset is given in epochs, those set only the mix: with a train budget other than the
    tokens the epochs add up to (by more than ``tolerance``), each dataset is read that many times more or
    fewer times than given. The warning that says so, or None (call it for such a blend only)."""
    want = epochs_tokens(spec, train_tokens)
    if not budget_tokens or want <= 0 or abs(budget_tokens / want - 1) <= tolerance:
        return None
    f = budget_tokens / want
    shown = ", ".join(f"{d.name} {d.epochs:g} -> {d.epochs * f:.2f}" for d in spec.datasets[:5])
    more = f" and {len(spec.datasets) - 5} more" if len(spec.datasets) > 5 else ""
    return (f"every dataset of the blend is given in epochs, so they set only its mix: the train budget of "
            f"{budget_tokens:,} tokens is {f:.2f}x the {int(want):,} tokens those epochs add up to, so each "
            f"dataset is read {f:.2f}x as many times as given ({shown}{more}). To read them as given, train on "
            f"{int(want):,} tokens; or give weights")


def _split_root(cache_dir: Path, k: int) -> Path:
    return cache_dir if k == 0 else cache_dir / SPLIT_NAMES[k]


def _blend_split(k: int, datasets: list, blend_weights: list, blend_size: int, names: list, cache_dir):
    """The BlendedDataset of split ``k`` over its ``datasets``, its indices read from (or built into) the cache."""
    desc = {"class": "BlendedDataset", "format": 1, "split": SPLIT_NAMES[k],
            "datasets": [cache_key(d.cache_description) for d in datasets], "weights": blend_weights,
            "size": blend_size}

    def build():
        di, dsi = build_blending_indices(blend_weights, blend_size)
        counts = np.bincount(di, minlength=len(datasets))
        for j, c in enumerate(counts):
            if c > len(datasets[j]):
                raise IndexError(f"the {SPLIT_NAMES[k]} blend draws {c} samples from {names[j]}, "
                                 f"which has {len(datasets[j])}")
        return {"dataset_index": di, "dataset_sample_index": dsi}, {"counts": counts.tolist()}

    names_ = BLEND_ARRAYS
    if cache_dir is None:
        arrays, _ = build()
    else:
        arrays, _ = IndexCache(_split_root(cache_dir, k)).get_or_build(cache_key(desc), desc, names_, build)
    try:
        return BlendedDataset(datasets, blend_weights, arrays["dataset_index"],
                              arrays["dataset_sample_index"], names, SPLIT_NAMES[k], blend_size)
    except ValueError as e:
        if cache_dir is None:
            raise
        raise ValueError(f"{e}: the blend cache {_split_root(cache_dir, k)} is damaged; delete it and it is "
                         "rebuilt") from e


def _is_cache_meta(path: Path) -> bool:
    """An ``index.json`` as :class:`~pretrain.data.index_cache.IndexCache` writes it (key, description, arrays)."""
    from curate.shards import read_record

    meta = read_record(path)  # None: missing, not a regular file, not JSON, not an object
    return (meta is not None and isinstance(meta.get("key"), str) and isinstance(meta.get("arrays"), dict)
            and "description" in meta)


def _is_npy(path: Path) -> bool:
    import stat

    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return False
        with open(path, "rb") as f:
            return f.read(6) == b"\x93NUMPY"
    except OSError:
        return False


def cache_folders(spec, num_samples) -> list[tuple[Path, tuple[str, ...]]]:
    """(folder relative to the cache, the arrays cached there) for every folder a build of ``num_samples``
    (train, valid, test) writes: a blend split's root and each dataset's folder below it."""
    spec = load_blend_spec(spec)
    check_dataset_names(spec)
    blended = not (len(spec.datasets) == 1 and not spec.weighted)  # a lone unweighted prefix is not blended
    out = []
    for k, n in enumerate(num_samples):
        if not n:
            continue
        root = _split_root(Path(), k)
        if blended:
            out.append((root, BLEND_ARRAYS))
        out += [(root / d.name, GPT_ARRAYS) for d in spec.datasets]
    return out


def cache_dir_problem(spec, cache_dir, num_samples, force: bool = False) -> str | None:
    """A message when building ``spec``'s indices into ``cache_dir`` cannot or must not go ahead, else None:
    a folder it writes is a file (or below one), or a file it writes a folder; and, unless ``force``, a file it
    would replace is not an index cache's: an ``index.json`` that is not one
    :class:`~pretrain.data.index_cache.IndexCache` wrote (a dataset's ``PREFIX.json`` sidecar, say), or an array
    ``.npy`` without one beside it (other than the arrays of a build killed before its ``index.json``: ``.npy``
    files beside its ``.lock``). A rebuild onto its own earlier cache goes ahead (a changed key is rebuilt)."""
    import os

    from curate.write_guard import blocking_file

    cache_dir = Path(cache_dir)
    for rel, arrays in cache_folders(spec, num_samples):
        folder = cache_dir / rel
        above = blocking_file(folder)
        if above:
            return f"{folder}: {above} is a file, where the index cache needs a folder; choose another cache folder"
        meta = folder / IndexCache.META
        files = [folder / f"{a}.npy" for a in arrays] + [meta]
        for f in files:
            if f.is_dir():
                return f"{f} is a folder, where the index cache writes a file; choose another cache folder"
        existing = [f for f in files if os.path.lexists(f)]
        if force or not existing:
            continue
        if os.path.lexists(meta):
            if _is_cache_meta(meta):
                continue
            return (f"{meta} exists and is not an index cache file Quarry wrote: choose another cache folder, or "
                    f"pass --force to overwrite it (and the arrays beside it)")
        if (folder / ".lock").is_file() and all(_is_npy(f) for f in existing):
            continue  # a build killed between its arrays and its index.json
        return (f"{existing[0]} exists and is not part of an index cache Quarry wrote: choose another cache "
                f"folder, or pass --force to overwrite it")
    if not force:
        foreign = _foreign_entries(cache_dir, cache_folders(spec, num_samples))
        if foreign:
            return (f"{cache_dir} holds files an index cache does not ({', '.join(foreign[:3])}"
                    f"{', ...' if len(foreign) > 3 else ''}): choose another cache folder (an empty or new one), or "
                    "pass --force to write into it anyway (those files are kept)")
    return None


def _foreign_entries(cache_dir: Path, folders) -> list[str]:
    """Entries of the folders a build writes that are not an index cache's: in each, its arrays, ``index.json``,
    ``.lock``, hidden ``.*.tmp`` files and sub-folders that are this build's or another index cache's (a dataset
    since dropped from the spec); anything else (a user's notes, a dataset's own ``.bin/.idx``) is the user's."""
    import os

    arrays = {cache_dir / rel: names for rel, names in folders}
    mine = set(arrays) | {cache_dir} | {cache_dir / rel.parent for rel, _ in folders}
    out = []
    for folder in sorted(mine):
        if not folder.is_dir() or folder.is_symlink():
            continue
        ours = {IndexCache.META, ".lock"} | {f"{a}.npy" for a in arrays.get(folder, BLEND_ARRAYS + GPT_ARRAYS)}
        for entry in sorted(os.listdir(folder)):
            path = folder / entry
            if entry in ours or (entry.startswith(".") and entry.endswith(".tmp")) or path in mine:
                continue
            if path.is_dir() and not path.is_symlink() and (
                    (path / ".lock").is_file() or _is_cache_meta(path / IndexCache.META)):
                continue
            out.append(str(path))
    return out


def build_blend_splits(spec, seq_len: int, num_samples, seed: int, cache_dir, split: str | None = None,
                       *, pad_id: int = -1, verbose: bool = False, order: str = "stable") -> list:
    """The train, valid and test datasets of a blend (None for a split with 0 requested samples).

    ``spec``: a spec ``.toml`` path or a Megatron ``"w1 prefix1 w2 prefix2"`` string (relative prefixes
    resolve against the current directory, as in Megatron-LM). ``num_samples``: (train, valid, test).
    Each dataset has ``len(ds)`` and ``ds[i]`` -> int64 array of ``seq_len + 1`` tokens; read the train
    one in order 0, 1, 2, ... (resume = skip the consumed samples). A blend of weighted datasets is a
    :class:`BlendedDataset`; a single unweighted prefix gives a plain :class:`GPTDataset` (as Megatron).

    ``order = "stable"`` (default): every dataset's order is extension-stable
    (:mod:`pretrain.data.stable_order`) and the greedy blend is a function of the weights alone, so the first N
    samples of a split are the same whatever sample count is asked for (unless the spec mixes ``weight`` and
    ``epochs``: those weights depend on the token budget). ``order = "megatron"``: Megatron-core's arrays.
    """
    with deferred_sync():  # thousands of datasets: one sync at the end, not an fsync per cache file
        return _build_blend_splits(spec, seq_len, num_samples, seed, cache_dir, split, pad_id, verbose, order)


def _build_blend_splits(spec, seq_len, num_samples, seed, cache_dir, split, pad_id, verbose, order) -> list:
    spec = load_blend_spec(spec)
    check_dataset_names(spec)
    split = split or spec.split or DEFAULT_SPLIT
    sizes = [int(n) if n else 0 for n in num_samples]
    if len(sizes) != 3 or any(n < 0 for n in sizes):
        raise ValueError(f"num_samples must be (train, valid, test) counts >= 0, got {num_samples!r}")
    if seq_len <= 1:
        raise ValueError(f"sequence length must be > 1, got {seq_len}")
    cache_dir = Path(cache_dir) if cache_dir is not None else None
    indexed = [open_indexed(d.prefix) for d in spec.datasets]
    check_distinct_datasets(spec, indexed)
    names = [d.name for d in spec.datasets]
    out: list = [None, None, None]

    def log(msg):
        if verbose:
            print(msg, file=sys.stderr)

    def gpt(j: int, k: int, n: int | None) -> GPTDataset:
        root = _split_root(cache_dir, k) / names[j] if cache_dir is not None else None
        ds = build_gpt_dataset(indexed[j], split, SPLIT_NAMES[k], n, seq_len, seed, root, pad_id=pad_id,
                               name=names[j], order=order)
        log(f"  {SPLIT_NAMES[k]:5s} {names[j]}: {len(ds):,} samples, {ds.num_epochs} epoch(s)")
        return ds

    matrix = split_matrix(parse_split(split))
    for k, n in enumerate(sizes):
        if n and matrix[k] is None:  # as Megatron: no dataset for a split that the split string zeroes
            warnings.warn(f"{n} {SPLIT_NAMES[k]} samples requested, but split {split!r} gives that split "
                          f"no data: no {SPLIT_NAMES[k]} dataset", stacklevel=2)
            sizes[k] = 0

    if len(spec.datasets) == 1 and not spec.weighted:  # Megatron: a lone prefix is not blended
        for k, n in enumerate(sizes):
            if n:
                out[k] = gpt(0, k, n)
        return out

    budget = sizes[0] * seq_len if sizes[0] else None
    weights = resolve_weights(spec, indexed, split, budget) if spec.weighted else None
    if all_in_epochs(spec):  # (the train tokens are summed for such a blend only)
        said = epochs_not_as_given(spec, [_split_tokens(ix, split, 0) for ix in indexed], budget)
        if said:
            warnings.warn(said, stacklevel=2)
    if order == "stable" and spec.uses_epochs and not all_in_epochs(spec):
        warnings.warn("the blend mixes 'weight' and 'epochs', so its weights depend on the number of train "
                      "samples: a run extended to more steps will not keep its data order (give every dataset "
                      "a weight, or every one epochs)", stacklevel=2)
    for k, size in enumerate(sizes):
        if not size:
            continue
        if weights is not None:
            per_dataset = requested_per_dataset(weights, size, MID_LEVEL_SURPLUS)
            datasets = [gpt(j, k, per_dataset[j]) for j in range(len(indexed))]
            blend_size = sum(requested_per_dataset(weights, size, 0.0))
            blend_weights = weights
        else:  # Megatron's unweighted list: one epoch of each, weighted by its length
            datasets = [gpt(j, k, None) for j in range(len(indexed))]
            blend_weights = [len(d) for d in datasets]
            blend_size = min(size, sum(blend_weights))
        blend_weights = _normalize(blend_weights)  # Megatron normalizes again inside BlendedDataset
        out[k] = _blend_split(k, datasets, blend_weights, blend_size, names, cache_dir)
        log(f"  {SPLIT_NAMES[k]:5s} blend: {len(out[k]):,} samples")
    return out


# ------------------------------------------------------------------------------------------- inspect

def inspect_blend(spec, tokens: float | None = None, split: str | None = None,
                  max_epochs: float = DEFAULT_MAX_EPOCHS) -> tuple[list[dict], list[str]]:
    """Rows of (dataset, documents, tokens, train tokens, weight, tokens drawn, epochs) for a train
    budget of ``tokens`` (default: all train tokens once; where every dataset is given in epochs, the tokens
    those add up to), and warnings."""
    spec = load_blend_spec(spec)
    check_dataset_names(spec)
    split = split or spec.split or DEFAULT_SPLIT
    indexed = [open_indexed(d.prefix) for d in spec.datasets]
    check_distinct_datasets(spec, indexed)
    train_tokens = [_split_tokens(ix, split, 0) for ix in indexed]
    if tokens:
        budget = int(tokens)
    elif all_in_epochs(spec):  # the epochs as given
        budget = int(epochs_tokens(spec, train_tokens)) or sum(train_tokens)
    else:
        budget = sum(train_tokens)
    if spec.weighted:
        weights = resolve_weights(spec, indexed, split, budget)
    else:
        weights = _normalize(train_tokens) if sum(train_tokens) else [1 / len(indexed)] * len(indexed)
    rows, warnings = [], []
    said = epochs_not_as_given(spec, train_tokens, budget) if all_in_epochs(spec) else None
    if said:
        warnings.append(said)
    for d, ix, tt, w in zip(spec.datasets, indexed, train_tokens, weights):
        drawn = w * budget
        epochs = drawn / tt if tt else math.inf
        rows.append({"dataset": d.name, "prefix": d.prefix, "documents": ix.num_documents,
                     "tokens": ix.num_tokens, "train_tokens": tt, "weight": w, "drawn": drawn,
                     "epochs": epochs})
        if not tt:
            warnings.append(f"{d.name} has no train tokens ({ix.num_documents:,} documents, split {split!r}): "
                            "training on this blend fails; add data or change the split")
        elif epochs > max_epochs:
            warnings.append(f"{d.name} would be repeated {epochs:.2f} times (more than {max_epochs:g} "
                            f"epochs) for {budget:,} train tokens: lower its weight or add data")
    return rows, warnings


def format_table(rows: list[dict], budget: int) -> str:
    head = ["dataset", "documents", "tokens", "train tokens", "weight", "tokens drawn", "epochs"]
    body = [[r["dataset"], f"{r['documents']:,}", _human(r["tokens"]), _human(r["train_tokens"]),
             f"{100 * r['weight']:.2f}%", _human(r["drawn"]), f"{r['epochs']:.2f}"] for r in rows]
    total = ["total", f"{sum(r['documents'] for r in rows):,}", _human(sum(r["tokens"] for r in rows)),
             _human(sum(r["train_tokens"] for r in rows)), "100.00%", _human(budget), ""]
    widths = [max(len(x[i]) for x in [head, total] + body) for i in range(len(head))]
    fmt = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    sep = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(head), sep] + [fmt(b) for b in body] + [sep, fmt(total)])


def _human(n: float) -> str:
    n = float(n)
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f}{unit}"
    return f"{n:.0f}"
