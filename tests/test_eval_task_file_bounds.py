"""Bounds on what one eval item or task may cost, and damaged ``.gz`` task files (a hostile probe's findings):

- one choice item with 1,000,000 choices (a 10.9 MB line, under the line cap) ran over 120 s and 1 GB: an item
  holds at most ``MAX_CHOICES`` choices (more is set aside, counted and named, like any bad item); the characters
  one item has the tokenizer encode (its context once per choice) are bounded (``MAX_ITEM_ENCODE_CHARS``), the
  shared context is encoded once per item, and a task scores at most ``MAX_REQUESTS`` requests;
- a ``.jsonl.gz`` with bytes after its gzip member was refused as "Not a gzipped file (b'ga')": it is refused
  saying how many bytes follow the gzip data and where (lm-eval's reader refuses it too, so reading its members
  alone would give figures lm-eval does not); NUL padding and several members are read, as ``gzip`` reads them.
"""
from __future__ import annotations

import gzip
import json
import time

import pytest

from pretrain.eval import requests as requests_mod
from pretrain.eval import tasks as tasks_mod
from pretrain.eval.requests import build_requests, prepare_task
from pretrain.eval.tasks import EvalDataError, TaskSpec, read_items

MAX_CHOICES = getattr(tasks_mod, "MAX_CHOICES", 1_000)

GOOD = {"context": "The cat sat on", "choices": ["the mat", "a dog"], "label": 0}


def chars(text: str) -> list[int]:
    return [3 + ord(c) % 200 for c in text]


def write(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


# ------------------------------------------------------------------------------------- choices per item

def test_an_item_with_more_than_max_choices_is_set_aside_and_named(tmp_path):
    many = {"context": "a", "choices": [f"c{i}" for i in range(MAX_CHOICES + 1)], "label": 0}
    most = {"context": "a", "choices": [f"c{i}" for i in range(MAX_CHOICES)], "label": 3}
    f = write(tmp_path / "c.jsonl", [GOOD, many, most])
    got = read_items(TaskSpec("c", "choice", f))
    assert [len(it["choices"]) for it in got.items] == [2, MAX_CHOICES] and got.skipped == 1
    assert got.problems == [f"{f}:2: {MAX_CHOICES + 1:,} choices: an item may hold at most {MAX_CHOICES:,} "
                            f"(MAX_CHOICES; each choice is scored on its own)"]


def test_a_million_choices_is_set_aside_quickly_and_alone_is_an_error(tmp_path):
    f = write(tmp_path / "c1m.jsonl", [{"context": "a", "choices": [f"c{i}" for i in range(1_000_000)], "label": 0}])
    t = time.perf_counter()
    with pytest.raises(EvalDataError, match=r"no valid item .*1,000,000 choices: an item may hold at most 1,000"):
        prepare_task(TaskSpec("c1m", "choice", f), chars, 1, window=64)
    assert time.perf_counter() - t < 20  # was > 120 s (a request per choice, each encoded and scored)


# ------------------------------------------------------------------------------------- encoding cost

class Counting:
    def __init__(self):
        self.chars = self.calls = 0

    def __call__(self, text):
        self.calls += 1
        self.chars += len(text)
        return chars(text)


def test_an_items_context_is_encoded_once_not_once_per_choice(tmp_path):
    item = {"context": "x" * 1000, "choices": ["a", "b", "c", "d"], "label": 1}
    f = write(tmp_path / "c.jsonl", [item])
    enc = Counting()
    _, reqs, _ = prepare_task(TaskSpec("c", "choice", f), enc, 1, window=64)
    assert enc.calls == 5 and len(reqs) == 4  # 4 x (context + choice), then the context alone once (was 8 calls)
    plain = [requests_mod.encode_pair(chars, item["context"], " " + c, 1) for c in item["choices"]]
    got = [(q.tokens, q.n_cont) for q in reqs]
    want = [((ctx + cont)[-65:], len(cont)) for ctx, cont in plain]
    assert got == want  # the same requests as encoding each pair alone


def test_an_item_too_costly_to_encode_is_set_aside_before_it_is_encoded(tmp_path, monkeypatch):
    monkeypatch.setattr(requests_mod, "MAX_ITEM_ENCODE_CHARS", 10_000)
    big = {"context": "y" * 3000, "choices": ["a", "b", "c", "d"], "label": 0}  # 4 x 3002 > 10,000
    f = write(tmp_path / "c.jsonl", [GOOD, big])
    enc = Counting()
    items, reqs, _ = prepare_task(TaskSpec("c", "choice", f), enc, 1, window=64)
    assert len(items.items) == 1 and items.skipped == 1 and enc.chars < 100
    assert "12,008 characters to encode, more than the 10,000 one item may take" in items.problems[0]
    # with few-shot examples (built once every item is read) the examples count too
    ctx = {"context": "z" * 2000, "choices": ["a", "b"], "label": 0}
    f2 = write(tmp_path / "s.jsonl", [ctx, dict(ctx, context="w" * 2000), dict(ctx, context="v" * 2000)])
    reqs, problems = build_requests("choice", read_items(TaskSpec("s", "choice", f2, shots=2)), chars, 1, window=64,
                                    shots=2)
    assert len(reqs) == 0 and len(problems) == 3 and "characters to encode" in problems[0]


@pytest.mark.parametrize("kind", ["choice", "bpb"])
def test_a_task_of_more_than_max_requests_is_an_error_saying_set_a_limit(tmp_path, monkeypatch, kind):
    monkeypatch.setattr(requests_mod, "MAX_REQUESTS", 10)
    rows = [GOOD] * 6 if kind == "choice" else [{"text": "word " * 100}] * 3  # 12 requests; 3 x 9 windows
    f = write(tmp_path / "t.jsonl", rows)
    with pytest.raises(EvalDataError, match=r"more than the 10 one task scores \(MAX_REQUESTS\): set limit"):
        prepare_task(TaskSpec("t", kind, f, stride=8 if kind == "bpb" else 0), chars, 1, window=64)
    items, reqs, _ = prepare_task(TaskSpec("t", kind, f, limit=1), chars, 1, window=64)
    assert len(items.items) == 1 and 0 < len(reqs) <= 10


# ------------------------------------------------------------------------------------- .gz task files

LINE = (json.dumps(GOOD) + "\n").encode()


def test_bytes_after_the_gzip_data_are_refused_saying_how_many_and_where(tmp_path):
    member = gzip.compress(LINE * 2)
    f = tmp_path / "g.jsonl.gz"
    f.write_bytes(member + b"garbagegarbage")
    with pytest.raises(EvalDataError) as e:
        read_items(TaskSpec("g", "choice", str(f)))
    assert f"{f}: 14 bytes after the gzip data at offset {len(member)}" in str(e.value)
    assert "gzip -dc" in str(e.value) and "Not a gzipped file" not in str(e.value)
    f.write_bytes(member + b"\0\0\0" + b"\x1f")  # padding, then one stray byte
    with pytest.raises(EvalDataError, match=f"1 byte after the gzip data at offset {len(member) + 3}"):
        read_items(TaskSpec("g", "choice", str(f)))


def test_nul_padding_and_several_members_are_read_as_gzip_reads_them(tmp_path):
    f = tmp_path / "g.jsonl.gz"
    for data, n in [(gzip.compress(LINE * 2) + b"\0" * 512, 2), (gzip.compress(LINE * 2) + gzip.compress(LINE), 3),
                    (gzip.compress(LINE) + b"\0" * 7 + gzip.compress(LINE * 4) + b"\0", 5)]:
        f.write_bytes(data)
        assert gzip.decompress(data) == LINE * n  # what lm-eval's reader gets
        got = read_items(TaskSpec("g", "choice", str(f)))
        assert len(got.items) == n and got.skipped == 0


def test_a_truncated_or_damaged_gzip_file_is_an_error_naming_it(tmp_path):
    f = tmp_path / "g.jsonl.gz"
    data = gzip.compress(LINE * 50)
    for bad, said in [(data[:-6], "ends inside the gzip member at offset 0 (the file is truncated)"),
                      (data[:-8] + b"\0\0\0\0" + data[-4:], "the gzip member at offset 0 is damaged"),
                      (b"not gzip at all", "the gzip member at offset 0 is damaged")]:
        f.write_bytes(bad)
        with pytest.raises(EvalDataError, match="cannot be decompressed") as e:
            read_items(TaskSpec("g", "choice", str(f)))
        assert said in str(e.value) and str(f) in str(e.value)


def test_a_large_gzip_file_streams_in_bounded_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(tasks_mod, "MAX_FILE_BYTES", 4 << 20)
    f = tmp_path / "bomb.jsonl.gz"
    f.write_bytes(gzip.compress(LINE * 20 + b" " * (8 << 20)))  # 8 MiB of spaces: 8 KiB compressed
    with pytest.raises(EvalDataError, match="decompresses to more than"):
        read_items(TaskSpec("b", "choice", str(f)))
