"""Has a variant seen the test? Before any training, each variant's text is scanned for the evaluation items
with the ``decontaminate`` stage's n-gram rules (curate/stages/decontaminate.py, MT-NLG / GPT-3):

- an item's strings (a ``text``; a choice item's ``context`` and each of its ``choices``) are split into
  words as the stage does (lowercase, punctuation removed, digits as written); a string of at least ``ngram`` (13)
  words gives all its 13-grams, one of ``min_ngram`` (8) to 12 words is itself one n-gram, a shorter one none;
- every run of n words of the variant's documents is looked up (the stage's compiled scan);
- an n-gram found in more than ``max_matches`` (10) documents is a common phrase, not a leak (the stage's
  rule), and does not count;
- an item is *found* when any of its remaining n-grams is in the variant's text.

The result per variant: items, found, share, and the same per task. A variant given as a blend of token
files is scanned as its documents decoded with the ablation's tokenizer.
"""
from __future__ import annotations

from collections import defaultdict
import numpy as np

from curate.stages.decontaminate import Params, _all_strings, find_matches
from curate.stages.minhash.kernels import _example_ngrams
from curate.stages.minhash.shingles import words

RULES = Params(eval_files=["<the ablation's tasks>"])  # the stage's defaults: ngram, min_ngram, max_matches
BATCH_DOCS = 2048


def item_ngrams(item: dict, ngram: int = RULES.ngram, min_ngram: int = RULES.min_ngram):
    """(n-gram hashes, their lengths in words) of one evaluation item: its string values, each an example of
    the stage's index."""
    strings = [s for s in _all_strings(item) if s]
    if not strings:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    wh, _, _, wo = words(strings, fold_digits=RULES.fold_digits)
    return _example_ngrams(wh, wo, ngram, min_ngram)


class Index:
    """The n-grams of every item of every task, and which item each came from."""

    def __init__(self, tasks: dict[str, list[dict]], ngram: int = RULES.ngram, min_ngram: int = RULES.min_ngram):
        grams = [(task, item_ngrams(item, ngram, min_ngram)) for task, items in tasks.items() for item in items]
        self.items = [(task, np.unique(h)) for task, (h, _) in grams]
        self.tasks = {task: len(items) for task, items in tasks.items()}
        all_h = [h for _, h in self.items]
        self.table = np.unique(np.concatenate(all_h)) if all_h else np.zeros(0, np.uint64)
        self.lengths = sorted({int(n) for _, (_, lens) in grams for n in np.unique(lens)})

    def found(self, hit: np.ndarray) -> dict:
        """Items (and per task) whose n-grams meet the set ``hit`` of leaked n-gram hashes."""
        per_task = {t: 0 for t in self.tasks}
        for task, h in self.items:
            if len(h) and np.isin(h, hit).any():
                per_task[task] += 1
        total, found = sum(self.tasks.values()), sum(per_task.values())
        return {"items": total, "found": found, "share": found / total if total else 0.0,
                "tasks": {t: {"items": n, "found": per_task[t], "share": per_task[t] / n if n else 0.0}
                          for t, n in self.tasks.items()}}


def scan(index: Index, batches, max_matches: int = RULES.max_matches) -> np.ndarray:
    """The index n-grams found in the documents of ``batches`` (iterables of texts), common phrases left out."""
    docs_of: dict[int, int] = defaultdict(int)
    if len(index.table) == 0:
        return np.zeros(0, np.uint64)
    for texts in batches:
        for spans in find_matches(texts, index.table, index.lengths, fold_digits=RULES.fold_digits).values():
            for h in {h for _, _, h in spans}:  # each document counted once per n-gram
                docs_of[h] += 1
    kept = [h for h, n in docs_of.items() if not max_matches or n <= max_matches]
    return np.asarray(sorted(kept), np.uint64)


def curated_batches(folders: list[str]):
    """Text batches of curation output folders (their kept shards)."""
    from curate.schema import TEXT
    from curate.shards import manifest_shards, read_shard

    for folder in folders:
        for path in manifest_shards(folder):
            texts = read_shard(path, columns=[TEXT]).column(TEXT)
            for lo in range(0, len(texts), BATCH_DOCS):
                yield texts.slice(lo, BATCH_DOCS)


def blend_batches(blend: str, tokenizer: str):
    """Text batches of a blend spec's datasets, each document decoded with ``tokenizer``."""
    from pretrain.data.blend_spec import load_blend_spec
    from pretrain.data.indexed import IndexedDataset
    from pretrain.data.tokenizer import load_tokenizer

    tok = load_tokenizer(tokenizer)
    for d in load_blend_spec(blend).datasets:
        ds = IndexedDataset(d.prefix)
        for lo in range(0, ds.num_documents, BATCH_DOCS):
            yield [tok.decode(ds.document(k)) for k in range(lo, min(lo + BATCH_DOCS, ds.num_documents))]


def check_variants(spec, tasks: dict[str, list[dict]], tokenizer: str) -> dict:
    """{variant: {"items", "found", "share", "tasks": {task: {...}}}} for every variant of the spec."""
    index = Index(tasks)
    out = {}
    for v in spec.variants:
        batches = curated_batches(v.curated) if v.curated else blend_batches(v.blend, tokenizer)
        out[v.name] = index.found(scan(index, batches))
    return out


def warnings_for(contamination: dict, threshold: float) -> list[str]:
    return [f"warning: variant {name!r} holds {c['found']} of {c['items']} evaluation items ({c['share']:.1%}, "
            f"over contamination_threshold {threshold:.1%}): its scores on them are not a fair comparison"
            for name, c in contamination.items() if c["share"] > threshold]


def format_line(name: str, c: dict) -> str:
    per = ", ".join(f"{t} {x['found']}/{x['items']}" for t, x in c["tasks"].items())
    return f"contamination: {name}: {c['found']} of {c['items']} eval items found ({c['share']:.1%}; {per})"


