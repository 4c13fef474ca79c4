"""A hostile crawl: no input makes a reader raise or a run fail, and every record is accounted for.

The corpus is built at test time by ``tests/hostile/make_corpus.py``, which knows what it planted in
each file (documents, set-aside rows by reason, skipped records, counters).
"""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from curate import readers
from curate.shards import read_shard

ROOT = Path(__file__).resolve().parents[1]


def _make_corpus():
    spec = importlib.util.spec_from_file_location("make_corpus", ROOT / "tests" / "hostile" / "make_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    return root, _make_corpus().build(root)


def _tally(items):
    got = {"docs": 0, "drops": {}, "skips": 0, "counts": {}}
    rows = []
    for it in items:
        if it[0] == "doc":
            got["docs"] += 1
            rows.append(it[1])
        elif it[0] == "drop":
            got["drops"][it[2]] = got["drops"].get(it[2], 0) + 1
            rows.append(it[1])
            assert it[2] in readers.READ_REASONS, it[2]
        elif it[0] == "skip":
            got["skips"] += 1
        else:
            assert it[0] == "count"
            got["counts"][it[1]] = got["counts"].get(it[1], 0) + it[2]
    return got, rows


def test_every_hostile_file_is_accounted_for(corpus):
    root, expected = corpus
    assert len(expected) >= 55
    wrong = {}
    for rel, want in sorted(expected.items()):
        got, rows = _tally(readers.read_file(str(root / rel), want["format"]))
        if got != {k: want[k] for k in ("docs", "drops", "skips", "counts")}:
            wrong[rel] = {"got": got, "planted": want}
        for r in rows:  # everything a reader yields can be written: valid UTF-8, the base columns
            for k in ("id", "text", "source", "url", "content_type"):
                assert isinstance(r[k], str)
                r[k].encode("utf-8")
        ids = [r["id"] for r in rows]
        assert len(ids) == len(set(ids)), f"{rel}: ids repeat"
    assert not wrong, json.dumps(wrong, indent=1)


def test_hostile_files_read_the_same_in_splits(corpus):
    root, expected = corpus
    for rel, want in sorted(expected.items()):
        if "giant" in rel:
            continue
        path = str(root / rel)
        whole = [it for it in readers.read_file(path, want["format"]) if it[0] != "count"]
        for target in (1, 700):
            splits = readers.plan_splits(path, want["format"], target_bytes=target)
            got = [it for s in splits for it in readers.read_split(s) if it[0] != "count"]
            assert got == whole, f"{rel} in {len(splits)} splits of {target} bytes"


def test_specific_repairs(corpus):
    root, _ = corpus
    items = list(readers.read_file(str(root / "jsonl" / "surrogates.jsonl"), "jsonl"))
    docs = [it[1] for it in items if it[0] == "doc"]
    assert docs[0]["text"] == "lone \ufffd high" and "\U0001F600" in docs[1]["text"]
    assert docs[2]["id"] == "s3\ufffd" and docs[2]["url"] == "http://x/\ufffd"
    # a bogus charset falls back to detection: the Cyrillic page is read right, nothing raises
    docs = [it[1] for it in readers.read_file(str(root / "warc" / "charsets.warc.gz"), "warc") if it[0] == "doc"]
    assert "Привет, мир!" in docs[5]["text"] and all("page" in d["text"] for d in docs[:5])
    # a page whose declared charset is wrong is decoded by detection, not replaced with U+FFFD
    docs = [it[1] for it in readers.read_file(str(root / "warc" / "wrong-charset.warc.gz"), "warc") if it[0] == "doc"]
    assert "café de la gare sert une crème brûlée très appréciée" in docs[0]["text"]
    # the damaged member is one row that says where; the records after it are read
    items = list(readers.read_file(str(root / "warc" / "corrupt-member.warc.gz"), "warc"))
    assert [it[0] for it in items] == ["doc", "doc", "drop", "doc", "doc", "doc"]
    assert "unreadable" in items[2][1]["text"] and "@" in items[2][1]["id"]
    # a lying Content-Length does not swallow the next record's header
    items = list(readers.read_file(str(root / "warc" / "long-length.warc"), "warc"))
    assert [it[0] for it in items] == ["doc", "drop", "doc", "doc"] and "WARC/1.0" not in items[1][1]["text"]
    assert items[2][1]["url"] == "http://hostile.example/2"


PIPELINE = """
[pipeline]
name = "hostile"
output = "{out}"
workers = {workers}
shard_rows = 20

[[sources]]
path = "{root}/warc/*"
format = "warc"

[[sources]]
path = "{root}/jsonl/*"
format = "jsonl"

[[sources]]
path = "{root}/html/*"
format = "html"

[[sources]]
path = "{root}/parquet/*"
format = "parquet"

[[sources]]
path = "{root}/arrow/*"
format = "arrow"
{stages}
"""


@pytest.mark.slow
@pytest.mark.parametrize("stages", ["", '\n[[stages]]\ntype = "normalize"\n'])
def test_curate_run_over_the_hostile_corpus(corpus, tmp_path, stages):
    root, expected = corpus
    out = tmp_path / "out"
    toml = tmp_path / "hostile.toml"
    toml.write_text(PIPELINE.format(out=out, root=root, workers=2, stages=stages))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for attempt in range(2):  # the second run resumes a finished folder
        proc = subprocess.run([sys.executable, "-m", "curate", "run", str(toml), "--quiet"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    stats = json.loads((out / "stats.json").read_text())
    read = stats["stages"][0]
    docs = sum(e["docs"] for e in expected.values())
    drops = {}
    for e in expected.values():
        for reason, n in e["drops"].items():
            drops[reason] = drops.get(reason, 0) + n
    assert read["name"] == "read" and read["kept"] == docs
    assert read["dropped"] == dict(sorted(drops.items()))
    assert read["in"] == docs + sum(drops.values())
    for prev, cur in zip(stats["stages"], stats["stages"][1:]):
        assert cur["in"] == prev["kept"] and cur["in"] == cur["kept"] + sum(cur["dropped"].values())
    manifest = json.loads((out / "manifest.json").read_text())
    kept = [read_shard(out / e["path"]) for e in manifest["shards"]]
    assert sum(t.num_rows for t in kept) == stats["stages"][-1]["kept"]
    dropped = [read_shard(out / e["path"]) for e in manifest["dropped"]]
    assert sum(t.num_rows for t in dropped) == sum(sum(s["dropped"].values()) for s in stats["stages"])
