"""Blend specs: which indexed datasets are mixed, and how much of each.

A spec is a TOML file (kept under ``data_specs/``)::

    split = "969,30,1"            # train, valid, test shares of every dataset's documents

    [[datasets]]
    name = "web"                  # a folder name in the index cache; unique
    prefix = "out/demo/tokens/web"  # <prefix>.bin + <prefix>.idx, or a folder of parts <prefix>/parts.json
    weight = 0.7                  # share of the samples (weights are normalized), or instead:
    # epochs = 2.0                # passes over this dataset's train split in the train token budget

or Megatron-LM's ``--data-path`` string: ``"0.7 out/web 0.3 out/books"`` (weights and prefixes), or
prefixes alone (``"out/web out/books"``: weighted by their sizes, as Megatron does).
Relative prefixes resolve against the current directory, as in Megatron-LM, not against the spec file.
"""
from __future__ import annotations

import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from curate.file_kind import file_name_key

TOP_KEYS = {"split", "datasets", "description"}
DATASET_KEYS = {"name", "prefix", "weight", "epochs"}
RESERVED_NAMES = {"valid", "test"}  # sub-folders of the index cache
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


class BlendSpecError(ValueError):
    pass


MAX_EPOCHS = 1_000_000  # passes over one dataset: more is a typo (its sample counts would overflow)


@dataclass
class DatasetSpec:
    name: str
    prefix: str
    weight: float | None = None
    epochs: float | None = None


@dataclass
class BlendSpec:
    datasets: list[DatasetSpec]
    split: str | None = None
    source: str = ""
    megatron_form: bool = False  # given as a Megatron --data-path string
    description: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def weighted(self) -> bool:
        return all(d.weight is not None or d.epochs is not None for d in self.datasets)

    @property
    def uses_epochs(self) -> bool:
        return any(d.epochs is not None for d in self.datasets)


def load_blend_spec(spec: str | os.PathLike | BlendSpec) -> BlendSpec:
    """A TOML spec file, or a Megatron-LM ``"w1 prefix1 w2 prefix2"`` / ``"prefix1 prefix2"`` string."""
    if isinstance(spec, BlendSpec):
        return spec
    text = os.fspath(spec)
    if text.endswith(".toml") or (os.path.isfile(text) and not os.path.isfile(text + ".idx")):
        if not os.path.isfile(text):
            raise BlendSpecError(f"blend spec {text} not found")
        try:
            body = Path(text).read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise BlendSpecError(f"blend spec {text}: not UTF-8 text (byte {e.start}); a spec is a TOML file") from None
        return parse_toml_spec(body, source=text)
    return parse_megatron_blend(text)


def parse_toml_spec(text: str, source: str = "<spec>") -> BlendSpec:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BlendSpecError(f"{source}: not valid TOML: {e}") from None
    except RecursionError:  # arrays or inline tables nested thousands deep
        raise BlendSpecError(f"{source}: not valid TOML: nested too deep to read") from None
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise BlendSpecError(f"{source}: unknown top-level key {unknown[0]!r} (allowed: {sorted(TOP_KEYS)})")
    split = data.get("split")
    if split is not None and not isinstance(split, str):
        raise BlendSpecError(f"{source}: 'split' must be a string like \"969,30,1\", got {split!r}")
    entries = data.get("datasets")
    if not isinstance(entries, list) or not entries:
        raise BlendSpecError(f"{source}: needs at least one [[datasets]] table")
    datasets = []
    for i, entry in enumerate(entries):
        where = f"{source}: datasets[{i}]"
        if not isinstance(entry, dict):
            raise BlendSpecError(f"{where} must be a table")
        unknown = sorted(set(entry) - DATASET_KEYS)
        if unknown:
            raise BlendSpecError(f"{where}: unknown key {unknown[0]!r} (allowed: {sorted(DATASET_KEYS)})")
        for key in ("name", "prefix"):
            if key not in entry:
                raise BlendSpecError(f"{where}: missing key {key!r}")
            if not isinstance(entry[key], str) or not entry[key]:
                raise BlendSpecError(f"{where}: {key!r} must be a non-empty string")
        where = f"{source}: dataset {entry['name']!r}"
        if "weight" in entry and "epochs" in entry:
            raise BlendSpecError(f"{where}: give 'weight' or 'epochs', not both")
        if "weight" not in entry and "epochs" not in entry:
            raise BlendSpecError(f"{where}: missing key 'weight' (or 'epochs')")
        key = "weight" if "weight" in entry else "epochs"
        value = _positive(entry[key], f"{where}: {key!r}")
        if key == "epochs" and value > MAX_EPOCHS:
            raise BlendSpecError(f"{where}: 'epochs' = {value!r}: at most {MAX_EPOCHS:,} passes over a dataset "
                                 "(a few are usual; a larger blend wants a 'weight')")
        datasets.append(DatasetSpec(entry["name"], entry["prefix"], **{key: value}))
    _keep_weights_summable(datasets)
    _check_names(datasets, source)
    if split is not None:
        _check_split(split, source)
    return BlendSpec(datasets, split=split, source=source, description=str(data.get("description", "")))


def parse_megatron_blend(text: str) -> BlendSpec:
    """Megatron-LM's ``--data-path`` list: ``w1 p1 w2 p2 ...`` or ``p1 p2 ...``."""
    parts = text.split()
    if not parts:
        raise BlendSpecError("empty blend: give a spec .toml or \"w1 prefix1 w2 prefix2 ...\"")
    weights: list[float] | None = None
    prefixes = parts
    if len(parts) % 2 == 0:
        try:
            weights = [float(parts[i]) for i in range(0, len(parts), 2)]
            prefixes = [parts[i + 1] for i in range(0, len(parts), 2)]
        except ValueError:
            weights, prefixes = None, parts
    if weights is None:
        for p in prefixes:
            try:
                float(p)
            except ValueError:
                continue
            raise BlendSpecError(f"blend {text!r}: a weight without a prefix (expected \"w1 prefix1 w2 prefix2 ...\")")
    datasets, seen = [], {}
    for i, prefix in enumerate(prefixes):
        base = re.sub(r"[^A-Za-z0-9_.\-]", "_", os.path.basename(prefix.rstrip("/")) or "dataset")
        if base[0] in "._-" or base in RESERVED_NAMES:
            base = "d" + base
        seen[base] = seen.get(base, 0) + 1
        name = base if seen[base] == 1 else f"{base}_{seen[base]}"
        weight = None
        if weights is not None:
            weight = _positive(weights[i], f"blend {text!r}: weight of {prefix!r}")
        datasets.append(DatasetSpec(name, prefix, weight=weight))
    _keep_weights_summable(datasets)
    _check_names(datasets, text, megatron_form=True)
    return BlendSpec(datasets, source=text, megatron_form=True)


def _keep_weights_summable(datasets: list[DatasetSpec]) -> None:
    """Weights are shares: ``1e308`` and ``1e308`` are half and half, but their sum overflows to inf and every
    normalized weight became 0 (a blend of 0 samples). Such weights are scaled down by the largest, in place."""
    weights = [d.weight for d in datasets if d.weight is not None]
    if weights and not math.isfinite(sum(weights)):
        top = max(weights)
        for d in datasets:
            if d.weight is not None:
                d.weight = d.weight / top


def _positive(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BlendSpecError(f"{what} must be a positive number, got {value!r}")
    try:
        number = float(value)  # a TOML integer has any number of digits: past 1.8e308 it is no float
    except OverflowError:
        hint = (f"at most {MAX_EPOCHS:,} passes over a dataset" if "epochs" in what else
                "weights are shares: 0.7 and 0.3, or 7 and 3")
        raise BlendSpecError(f"{what} is a number of {len(str(abs(value)))} digits, too large: {hint}") from None
    if not math.isfinite(number) or number <= 0:
        raise BlendSpecError(f"{what} must be positive, got {value!r}")
    return number


MAX_DATASET_NAME = 64  # bytes of UTF-8, as a pipeline's stage names (curate.pipeline.MAX_STAGE_NAME): a folder name


def _check_names(datasets: list[DatasetSpec], source: str, megatron_form: bool = False) -> None:
    """The names a blend's datasets give their index cache folders (``CACHE/NAME/``, ``CACHE/valid/NAME/``): each
    a plain folder name of at most :data:`MAX_DATASET_NAME` bytes (a 5,000-character name passed the spec, then
    every build failed with "File name too long"; a --data-path string's names are its prefixes' file names, not
    bounded here), and no two of them one folder on a case-insensitive file system (``a`` and ``A``; ``Valid``
    and the ``valid`` split folder)."""
    seen: dict[str, str] = {}
    for d in datasets:
        shown = f"{d.name[:40]!r}{'...' if len(d.name) > 40 else ''}"
        if not _NAME_RE.fullmatch(d.name):
            raise BlendSpecError(f"{source}: dataset name {shown} must be a plain folder name "
                                 "(letters, digits, '_', '-', '.')")
        size = len(d.name.encode("utf-8"))
        if not megatron_form and size > MAX_DATASET_NAME:
            raise BlendSpecError(f"{source}: dataset name {shown} ({size} characters) must be at most "
                                 f"{MAX_DATASET_NAME} (it names the dataset's folder in the index cache)")
        if d.name in RESERVED_NAMES:
            raise BlendSpecError(f"{source}: dataset name {d.name!r} is reserved (the cache keeps the "
                                 "valid and test splits in folders of those names)")
        if file_name_key(d.name) in RESERVED_NAMES:
            raise BlendSpecError(f"{source}: dataset name {shown} and the {file_name_key(d.name)} split's folder "
                                 "of the index cache differ only in case: on a case-insensitive file system (macOS, "
                                 "Windows) they are one folder; rename it")
        other = seen.get(file_name_key(d.name))
        if other == d.name:
            raise BlendSpecError(f"{source}: dataset name {d.name!r} appears twice")
        if other is not None:
            raise BlendSpecError(f"{source}: dataset names {other!r} and {shown} differ only in case (or Unicode "
                                 "form): on a case-insensitive file system (macOS, Windows) they are one folder of "
                                 "the index cache; rename one")
        seen[file_name_key(d.name)] = d.name


def _check_split(split: str, source: str) -> None:
    from pretrain.data.gpt_dataset import parse_split

    try:
        parse_split(split)
    except ValueError as e:
        raise BlendSpecError(f"{source}: 'split': {e}") from None
