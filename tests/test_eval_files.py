"""The shipped evaluation files (pipelines/sample/evals/) are valid for their kind and share no text with
the training sample: every line a JSON object with the kind's keys and types, labels in range, choices
distinct, each cloze target already in its passage, and no 13-word shingle (the ``decontaminate``
stage's normalization) in common with the sample's training text (prose, fortunes, the WARCs' text)
or with tests/data/pretrain/english_prose_sample.jsonl.gz (tests train tiny models on it)."""
from __future__ import annotations

import gzip
import html
import json
import re
from pathlib import Path

import numpy as np
import pytest

from curate.stages.minhash.shingles import shingle_sets

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "pipelines" / "sample"
EVALS = SAMPLE / "evals"
TEST_PROSE = ROOT / "tests" / "data" / "pretrain" / "english_prose_sample.jsonl.gz"
NGRAM = 13
KEYS = {"prose.jsonl": {"text": str}, "cloze.jsonl": {"text": str},
        "choice.jsonl": {"context": str, "choices": list, "label": int}}
COUNTS = {"prose.jsonl": (40, 80), "cloze.jsonl": (100, 200), "choice.jsonl": (100, 200)}


def read_lines(name: str) -> list[dict]:
    items = []
    for n, line in enumerate((EVALS / name).read_text(encoding="utf-8").split("\n")[:-1], 1):
        item = json.loads(line)
        assert isinstance(item, dict), f"{name}:{n} is not a JSON object"
        items.append(item)
    return items


def eval_texts() -> dict[str, list[str]]:
    """Every text a model reads from each file: bpb and cloze passages, a choice's context + each choice."""
    out = {name: [x["text"] for x in read_lines(name)] for name in ("prose.jsonl", "cloze.jsonl")}
    out["choice.jsonl"] = [f'{x["context"]} {c}' for x in read_lines("choice.jsonl") for c in x["choices"]]
    return out


def training_texts() -> list[str]:
    """The sample's training text (and the tests' prose sample, on which tests train tiny models); for the
    WARCs, all of their bytes with tags stripped (more than is trained on)."""
    texts = []
    for path in (SAMPLE / "prose.jsonl.gz", SAMPLE / "fortunes.jsonl.gz", TEST_PROSE):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            texts += [json.loads(line)["text"] for line in f if line.strip()]
    for warc in sorted(SAMPLE.glob("*.warc.gz")):
        raw = gzip.decompress(warc.read_bytes()).decode("utf-8", errors="replace")
        texts.append(html.unescape(re.sub(r"<[^>]*>", " ", raw)))
    return texts


@pytest.fixture(scope="module")
def train_shingles() -> np.ndarray:
    return np.unique(shingle_sets(training_texts(), NGRAM)[0])


def shared(texts: list[str], train: np.ndarray) -> list[int]:
    """Indexes of the texts sharing at least one shingle with ``train`` (sorted unique hashes)."""
    flat, offsets = shingle_sets(texts, NGRAM)
    pos = np.minimum(np.searchsorted(train, flat), len(train) - 1)
    hit = train[pos] == flat
    return [i for i, (a, b) in enumerate(zip(offsets[:-1], offsets[1:])) if hit[a:b].any()]


@pytest.mark.parametrize("name", sorted(KEYS))
def test_every_line_has_the_kinds_keys_and_types(name):
    items = read_lines(name)
    low, high = COUNTS[name]
    assert low <= len(items) <= high, f"{name}: {len(items)} items"
    for n, item in enumerate(items, 1):
        assert set(item) == set(KEYS[name]), f"{name}:{n} keys {sorted(item)}"
        for key, kind in KEYS[name].items():
            assert type(item[key]) is kind, f"{name}:{n} {key} is {type(item[key]).__name__}"
            if kind is str:
                assert item[key].strip(), f"{name}:{n} {key} is empty"
    texts = [json.dumps(x, sort_keys=True) for x in items]
    assert len(set(texts)) == len(texts), f"{name} repeats an item"


def test_prose_passages_are_one_to_four_kb_and_small_in_all():
    sizes = [len(x["text"].encode()) for x in read_lines("prose.jsonl")]
    assert all(900 <= s <= 4096 for s in sizes), (min(sizes), max(sizes))
    assert sum(sizes) <= 150_000


def test_choice_items_have_four_distinct_choices_and_a_label_in_range():
    items = read_lines("choice.jsonl")
    for n, item in enumerate(items, 1):
        choices = item["choices"]
        assert len(choices) == 4 and all(isinstance(c, str) and c.strip() for c in choices), f"choice.jsonl:{n}"
        assert len(set(choices)) == 4, f"choice.jsonl:{n} repeats a choice"
        assert 0 <= item["label"] < 4, f"choice.jsonl:{n} label {item['label']}"
        assert item["context"] not in choices
    labels = [x["label"] for x in items]
    assert all(labels.count(k) >= len(items) // 8 for k in range(4)), "labels are not shuffled"


def test_cloze_target_is_a_word_already_in_the_passage():
    for n, item in enumerate(read_lines("cloze.jsonl"), 1):
        context, target = item["text"].rsplit(" ", 1)
        assert re.fullmatch(r"[A-Za-z]{3,}", target), f"cloze.jsonl:{n} target {target!r}"
        assert re.search(rf"(?<![A-Za-z]){target}(?![A-Za-z])", context), f"cloze.jsonl:{n}: {target!r} not earlier"


def test_the_three_files_share_no_passage():
    texts = eval_texts()
    for a in texts:
        index = np.unique(shingle_sets(texts[a], NGRAM)[0])
        for b in texts:
            if a < b:
                assert not shared(texts[b], index), f"{a} and {b} share a {NGRAM}-word shingle"


def test_no_eval_text_shares_a_13_word_shingle_with_the_training_sample(train_shingles):
    for name, texts in eval_texts().items():
        found = shared(texts, train_shingles)
        assert not found, f"{name}: items {found[:5]} share a {NGRAM}-word shingle with pipelines/sample"


def test_the_overlap_check_finds_a_training_passage(train_shingles):
    """The check above can fail: a piece of a sample document, reformatted, is found; unseen Hamlet is not."""
    with gzip.open(SAMPLE / "prose.jsonl.gz", "rt", encoding="utf-8") as f:
        doc = json.loads(f.readline())["text"]
    piece = " ".join(doc.split()[100:130]).upper()
    assert shared(["Some words of ours first. " + piece, "To be, or not to be: that is the question"],
                  train_shingles) == [0]


def test_every_item_is_read_as_its_kind_by_pretrain_eval():
    from pretrain.eval.tasks import TaskSpec, read_items

    for kind, name in (("bpb", "prose.jsonl"), ("cloze", "cloze.jsonl"), ("choice", "choice.jsonl")):
        got = read_items(TaskSpec(name=name.split(".")[0], kind=kind, path=str(EVALS / name)))
        assert got.skipped == 0 and not got.problems, (name, got.problems)
        assert got.items == read_lines(name)
