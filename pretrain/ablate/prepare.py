"""The data of an ablation, made once in ``DIR`` and reused by every run (and by a rerun):

- the tokenizer: the spec's, or ``DIR/tokenizer.model`` trained with `pretrain tokenizer train`'s code on a
  bounded sample of every variant's curated folders (one thread: the same sample gives the same model);
- every curated folder tokenized once into ``DIR/data/tokens/NAME-HASH.bin/.idx`` (HASH: of the folder's path, so
  a folder two variants share, e.g. the same books beside two web filters, is tokenized once) with
  `pretrain tokenize`'s code (it skips a folder whose output is up to date and resumes a killed one);
- a blend spec per variant, ``DIR/data/VARIANT/blend.toml``: its datasets weighted by the spec's ``weights`` or,
  without them, by their token counts (the folders' natural mix); every document goes to the train split, since
  the runs are measured on the spec's evaluation tasks. A variant given as ``blend`` uses its own file.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from pretrain.ablate.spec import Spec, Variant


def tokenizer_path(spec: Spec, out: Path, log=print) -> str:
    """The tokenizer every run uses: the spec's, or one trained here once."""
    if spec.tokenizer:
        return spec.tokenizer
    from pretrain.data.tokenizer import specials_path, train_tokenizer

    model = out / "tokenizer.model"
    if model.is_file() and specials_path(model).is_file():  # the .json is written after the .model
        return str(model)
    # each folder once, however many variants share it (a folder given twice would be sampled twice)
    folders = list(dict.fromkeys(str(Path(f).resolve()) for v in spec.variants for f in v.curated))
    log(f"training a {spec.vocab_size}-piece tokenizer on up to {spec.tokenizer_sample_bytes:,} bytes sampled "
        f"from {len(folders)} curated folders")
    train_tokenizer(folders, spec.vocab_size, model, max_bytes=spec.tokenizer_sample_bytes, seed=0, threads=1)
    return str(model)


def dataset_names(variant: Variant) -> list[str]:
    """A unique dataset name per curated folder: the folder's name as a blend's dataset name may be
    (``blend_spec._check_names``: letters, digits, '_', '.', '-', at most ``MAX_DATASET_NAME`` bytes; other
    characters become '_', a leading '.', '_' or '-' is dropped), numbered when two would be one cache folder (on a
    case-insensitive file system too, and beside the ``valid`` and ``test`` split folders)."""
    from curate.file_kind import file_name_key
    from pretrain.data.blend_spec import MAX_DATASET_NAME

    names: list[str] = []
    taken = {"valid", "test"}  # the index cache's split folders
    for folder in variant.curated:
        base = re.sub(r"[^A-Za-z0-9_.\-]", "_", Path(folder).name).lstrip("._-")[:MAX_DATASET_NAME - 8] or "data"
        name, k = base, 2
        while file_name_key(name) in taken:
            name, k = f"{base}-{k}", k + 1
        names.append(name)
        taken.add(file_name_key(name))
    return names


def prepare_variant(variant: Variant, tokenizer: str, out: Path, log=print) -> str:
    """The blend spec of ``variant`` (its curated folders tokenized first, when it has any)."""
    if variant.blend:
        return variant.blend
    from pretrain.data.indexed import IndexedDataset
    from pretrain.data.tokenize import tokenize_curated

    folder = out / "data" / variant.name
    folder.mkdir(parents=True, exist_ok=True)
    (out / "data" / "tokens").mkdir(exist_ok=True)
    datasets = []
    for name, curated in zip(dataset_names(variant), variant.curated):
        key = hashlib.sha256(str(Path(curated).resolve()).encode()).hexdigest()[:10]
        stem = (Path(curated).name or "data").encode()[:128].decode(errors="ignore")  # + .bin: a file name
        prefix = out / "data" / "tokens" / f"{stem}-{key}"
        stats = tokenize_curated(curated, tokenizer, prefix, workers=1, progress=False, log=lambda _msg: None)
        if not stats["tokens"]:
            raise ValueError(f"variant {variant.name!r}: {curated} has no text to train on "
                             f"({stats['documents']} documents, {stats['empty']} empty)")
        datasets.append({"name": name, "prefix": str(prefix), "tokens": IndexedDataset(prefix).num_tokens})
    from pretrain.data.blend import weight_shares

    # shares as the blend code takes weights (1e308 and 1e308: half and half; their sum overflowed to 0 and 0)
    shares = weight_shares(variant.weights or [d["tokens"] for d in datasets])
    lines = [f"# variant {variant.name!r} of an ablation: written by `pretrain ablate`", 'split = "100,0,0"', ""]
    for d, w in zip(datasets, shares):
        lines += ["[[datasets]]", f"name = {json.dumps(d['name'])}", f"prefix = {json.dumps(d['prefix'])}",
                  f"weight = {w!r}  # {d['tokens']:,} tokens", ""]
    path = folder / "blend.toml"
    from curate.shards import atomic_path

    with atomic_path(path) as tmp:
        Path(tmp).write_text("\n".join(lines))
    log(f"variant {variant.name}: " + ", ".join(f"{d['name']} {d['tokens']:,} tokens" for d in datasets))
    return str(path)
