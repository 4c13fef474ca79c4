"""The ablation spec (`pretrain ablate SPEC.toml`): which data variants to compare, on which proxy model, with
how many tokens and seeds, evaluated on which tasks. ``load_spec`` reads and checks it before anything runs:
unknown keys, a variant without data, a baseline that is not a variant, a token budget under one step, a
layout asking for more devices than a run can have all fail at start with a message saying what to change.

Relative paths are taken relative to the current directory (as everywhere in Quarry) and made absolute here,
so runs in other processes or on Ray workers see the same files.
"""
from __future__ import annotations

import os
import re
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path

from curate.config import ConfigError, check_keys, check_type, load_toml

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")  # at most 64 characters: it names folders


@dataclass
class Variant:
    name: str  # the variant's name (a folder name: 1-64 letters, digits, _ . -)
    curated: list[str] = field(default_factory=list)  # curation output folders, tokenized once and mixed
    weights: list[float] = field(default_factory=list)  # one per curated folder; []: mixed by token count
    blend: str | None = None  # instead of curated: a blend spec whose prefixes `tokenizer` tokenized


@dataclass
class Spec:
    config: str  # the train config of every run (model, optimizer, schedule, layout)
    tokens: int  # training tokens per run (steps = tokens // (global_batch * seq_len), same for every variant)
    seeds: list[int]  # each seed changes initialisation and data order; the same seeds for every variant
    baseline: str  # the variant the others are compared with
    variants: list[Variant]  # [[variants]] tables, at least two
    tasks: list  # [[tasks]] tables: the evaluation tasks (pretrain eval's task tables)
    tokenizer: str | None = None  # absent: one tokenizer trained on a sample of all variants, shared by every run
    vocab_size: int = 4096  # the trained tokenizer's vocabulary (no `tokenizer` given)
    tokenizer_sample_bytes: int = 20_000_000  # text sampled from all variants to train that tokenizer
    eval_points: int = 8  # evaluations per run (eval.interval = steps // eval_points; and the last step)
    overrides: list[str] = field(default_factory=list)  # "table.key=value" applied to the config of every run
    contamination_threshold: float = 0.01  # a variant holding a larger share of eval items is named in a warning
    source: str = ""  # the spec file (not a key)

    @property
    def names(self) -> list[str]:
        return [v.name for v in self.variants]


SPEC_KEYS = [f.name for f in fields(Spec) if f.name != "source"]
VARIANT_KEYS = [f.name for f in fields(Variant)]
REQUIRED = ("config", "tokens", "seeds", "baseline", "variants", "tasks")


def load_spec(path: str | os.PathLike) -> Spec:
    """Read SPEC.toml and check what can be checked without the data: keys, types, names, files."""
    raw = load_toml(path, what="ablation spec", hint=" (see pipelines/ablate_demo.toml for an example)")
    return spec_from_dict(raw, str(path))


def spec_from_dict(raw: dict, source: str = "<spec>") -> Spec:
    where = source
    check_keys(raw, SPEC_KEYS, where)
    missing = [k for k in REQUIRED if k not in raw]
    if missing:
        raise ConfigError(f"{where}: missing key {missing[0]!r} (required: {', '.join(REQUIRED)}; see "
                          "docs/ablate.md)")
    hints = typing.get_type_hints(Spec)
    raw = dict(raw)
    if isinstance(raw.get("tokens"), float) and raw["tokens"].is_integer():  # tokens = 2e6
        raw["tokens"] = int(raw["tokens"])
    for key, value in raw.items():
        if key not in ("variants", "tasks"):
            check_type(value, hints[key], f"{where}: {key}")
    if not isinstance(raw["variants"], list) or not all(isinstance(v, dict) for v in raw["variants"]):
        raise ConfigError(f"{where}: variants must be [[variants]] tables")
    if not isinstance(raw["tasks"], list) or not all(isinstance(t, dict) for t in raw["tasks"]):
        raise ConfigError(f"{where}: tasks must be [[tasks]] tables")
    variants = [_variant(v, f"{where}: [[variants]] #{i + 1}") for i, v in enumerate(raw["variants"])]
    spec = Spec(**{**raw, "variants": variants, "source": source})
    _check_values(spec, where)
    spec.config = _existing(spec.config, f"{where}: config")
    if os.path.isfile(source) and os.path.samefile(spec.config, source):  # it trained every run on defaults
        raise ConfigError(f"{where}: config = {raw['config']!r} is this ablation spec itself: give the train config "
                          "of the runs (model, optimizer, layout), e.g. pretrain/configs/proxy-tiny.toml")
    if spec.tokenizer is not None:
        spec.tokenizer = _existing(spec.tokenizer, f"{where}: tokenizer")
    return spec


def _variant(table: dict, where: str) -> Variant:
    check_keys(table, VARIANT_KEYS, where)
    hints = typing.get_type_hints(Variant)
    if "name" not in table:
        raise ConfigError(f"{where}: missing key 'name'")
    for key, value in table.items():
        if key == "weights" and isinstance(value, list):
            _floats(value, f"{where}.weights")
        check_type(value, hints[key], f"{where}.{key}")
    v = Variant(**table)
    where = f"{where.rsplit(':', 1)[0]}: variant {v.name[:70]!r}{'...' if len(v.name) > 70 else ''}"
    if not NAME_RE.fullmatch(v.name):  # (match: "$" lets a trailing newline through)
        raise ConfigError(f"{where}: the name must be 1 to 64 letters, digits, '_', '.' or '-', starting with a "
                          "letter or digit (it names a folder)")
    if bool(v.curated) == bool(v.blend):
        raise ConfigError(f"{where}: give its data as either curated = [folders] or blend = \"spec.toml\" "
                          f"(it has {'both' if v.curated else 'neither'})")
    if v.weights and len(v.weights) != len(v.curated):
        raise ConfigError(f"{where}: weights has {len(v.weights)} values for {len(v.curated)} curated folders")
    if any(w <= 0 for w in v.weights):
        raise ConfigError(f"{where}: weights must be > 0")
    if v.weights:  # shares as the blend code takes them: 1e308 and 1e308 are half and half (their sum overflows)
        from pretrain.data.blend import weight_shares

        shares = weight_shares(v.weights)
        if not all(0 < x <= 1 for x in shares):
            w = v.weights[next(i for i, x in enumerate(shares) if not 0 < x <= 1)]
            raise ConfigError(f"{where}: weights = {v.weights}: {w:g} is no share of the whole beside "
                              f"{max(v.weights):g} (it comes out 0): weights are shares, e.g. 0.7 and 0.3, or 7 and 3")
    for i, folder in enumerate(v.curated):
        v.curated[i] = _existing(folder, f"{where}: curated folder", folder=True)
        if not (Path(v.curated[i]) / "manifest.json").is_file():
            raise ConfigError(f"{where}: {folder} has no manifest.json: give a curation output folder "
                              "(what `curate run` writes)")
    seen = [os.path.realpath(f) for f in v.curated]
    if len(set(seen)) < len(seen):  # its documents would be tokenized and mixed in twice
        twice = next(f for f, r in zip(v.curated, seen) if seen.count(r) > 1)
        raise ConfigError(f"{where}: curated folder {twice} is listed twice (give weights = [...] to weigh "
                          "folders unequally)")
    if v.blend:
        v.blend = _existing(v.blend, f"{where}: blend")
        from pretrain.data.blend import check_dataset_names
        from pretrain.data.blend_spec import BlendSpecError

        try:  # its datasets' names become folders of each run's index cache: refused now, not by run 1
            check_dataset_names(v.blend)
        except BlendSpecError as e:
            raise ConfigError(f"{where}: blend: {e}") from None
    return v


def _floats(values: list, where: str) -> None:
    """An integer too large for a float (``weights = [1e400-as-digits, 1]``) raised OverflowError in the type check."""
    for x in values:
        if isinstance(x, int) and not isinstance(x, bool):
            try:
                float(x)
            except OverflowError:
                raise ConfigError(f"{where}: a number of {len(str(abs(x)))} digits is too large: weights are shares, "
                                  "e.g. 0.7 and 0.3, or 7 and 3") from None


def _check_values(spec: Spec, where: str) -> None:
    names = spec.names
    if len(names) < 2:
        raise ConfigError(f"{where}: {len(names)} variant(s): an ablation compares at least two [[variants]]")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"{where}: variant name {dupes[0]!r} is used twice")
    from curate.file_kind import file_name_key

    folders: dict[str, str] = {}
    for n in names:  # DIR/runs/VARIANT and DIR/data/VARIANT: one folder on macOS and Windows
        other = folders.setdefault(file_name_key(n), n)
        if other != n:
            raise ConfigError(f"{where}: variant names {other!r} and {n!r} differ only in case: on a case-insensitive "
                              "file system (macOS, Windows) they are one folder of the ablation; rename one")
    if spec.baseline not in names:
        raise ConfigError(f"{where}: baseline = {spec.baseline!r} is not a variant; variants: {', '.join(names)}")
    if spec.tokens < 1:
        raise ConfigError(f"{where}: tokens = {spec.tokens}: must be at least 1")
    if not spec.seeds:
        raise ConfigError(f"{where}: seeds is empty: give one or more, e.g. seeds = [1, 2]")
    if len(set(spec.seeds)) != len(spec.seeds):
        raise ConfigError(f"{where}: seeds {spec.seeds} repeat a seed")
    if any(not 0 <= s < 2 ** 32 for s in spec.seeds):  # each run's train.seed and model.init_seed
        raise ConfigError(f"{where}: seeds must be in [0, 2**32 - 1]")
    if not spec.tasks:
        raise ConfigError(f"{where}: no [[tasks]]: the runs are compared on their evaluation tasks; add at least "
                          "one (kind = \"bpb\" on held-out text is the most sensitive at small scale)")
    if spec.eval_points < 1:
        raise ConfigError(f"{where}: eval_points = {spec.eval_points}: must be at least 1")
    if spec.vocab_size < 300:
        raise ConfigError(f"{where}: vocab_size = {spec.vocab_size}: must be at least 300 (256 byte pieces and "
                          "the special ids)")
    if spec.tokenizer_sample_bytes < 1000:
        raise ConfigError(f"{where}: tokenizer_sample_bytes = {spec.tokenizer_sample_bytes}: too small")
    if not 0 <= spec.contamination_threshold <= 1:
        raise ConfigError(f"{where}: contamination_threshold must be a share in [0, 1]")
    _check_overrides(spec.overrides, where)
    if spec.tokenizer is None:
        blends = [v.name for v in spec.variants if v.blend]
        if blends:
            raise ConfigError(f"{where}: variant {blends[0]!r} is a blend spec of token files: set tokenizer = "
                              "the .model its prefixes were tokenized with (a trained one would not match)")


def _check_overrides(overrides: list[str], where: str) -> None:
    """``overrides`` of keys every run's config gets from the ablation (``runs.RUN_KEYS``) would be replaced without
    a word: refused, naming for each the spec key (or option) that sets it."""
    from pretrain.ablate.runs import RUN_KEYS
    from pretrain.config import parse_override

    taken = []
    for text in overrides:
        try:
            table, key, _value = parse_override(text)
        except ConfigError as e:
            raise ConfigError(f"{where}: overrides: {str(e).replace('--set ', '', 1)}") from None
        name = f"{table.strip()}.{key.strip()}"
        if name in RUN_KEYS and name not in (t for t, _ in taken):
            taken.append((name, RUN_KEYS[name]))
    if taken:
        raise ConfigError(f"{where}: overrides set keys the ablation sets in every run itself (the override would "
                          "be replaced): " + "; ".join(f"{name}: set by {by}" for name, by in taken)
                          + "; remove them from overrides")


def _existing(path: str, where: str, folder: bool = False) -> str:
    p = Path(path).expanduser()
    if not (p.is_dir() if folder else p.is_file()):
        raise ConfigError(f"{where} {path!r} does not exist (relative paths are taken from the current "
                          f"directory, {os.getcwd()})")
    return str(p.resolve())
