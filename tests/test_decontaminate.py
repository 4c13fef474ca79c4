"""decontaminate: MT-NLG n-gram rules (13-grams, 8 for short tasks, 200 characters, 10 splits)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from curate import shuffle
from curate.executors.local import LocalExecutor
from curate.schema import documents_to_table
from curate.shards import read_shard, write_shard
from curate.stages.decontaminate import Decontaminate, Params, eval_examples
from curate.stages.minhash.shingles import normalize

DATA = Path(__file__).resolve().parent / "data" / "dedup"


@pytest.fixture(autouse=True)
def small_parts(monkeypatch):
    """Several shard groups and hash ranges even on these small corpora."""
    monkeypatch.setattr(shuffle, "TASK_BYTES", 40_000)
    monkeypatch.setattr(shuffle, "RANGE_BYTES", 60_000)


def vocabulary(rng, size=20_000) -> list[str]:
    letters = rng.integers(97, 123, size=(size, 7), dtype=np.uint8)
    return [bytes(r).decode() for r in letters]


def sentence(rng, vocab, n) -> list[str]:
    return [vocab[i] for i in rng.integers(len(vocab), size=n)]


def write_docs(tmp: Path, docs: list[tuple[str, str]], per_shard: int) -> list[str]:
    paths = []
    for k, lo in enumerate(range(0, len(docs), per_shard)):
        rows = [{"id": i, "text": t, "source": "t", "url": "", "content_type": "text/plain"} for i, t in docs[lo:lo + per_shard]]
        paths.append(str(write_shard(documents_to_table(rows), tmp / f"in-{k:05d}.arrow")))
    return paths


def run(inputs, plan_dir, workers=1, **params):
    stage = Decontaminate("decontaminate", Params(**params))
    stats = stage.plan(inputs, Path(plan_dir), LocalExecutor(workers))
    out = [stage.apply_with_plan(read_shard(p), i, Path(plan_dir)) for i, p in enumerate(inputs)]
    return stats, pa.concat_tables([r.kept for r in out]), pa.concat_tables([r.dropped for r in out])


def test_every_planted_13gram_is_found_and_control_text_is_untouched(tmp_path):
    rng = np.random.default_rng(11)
    vocab = vocabulary(rng)
    examples = [" ".join(sentence(rng, vocab, int(rng.integers(30, 80)))) for _ in range(40)]
    jsonl = tmp_path / "task.jsonl"
    jsonl.write_text("".join(json.dumps({"id": f"q{i}", "text": t, "label": "x"}) + "\n" for i, t in enumerate(examples[:30])))
    txt = tmp_path / "task.txt"
    txt.write_text("\n".join(examples[30:]) + "\n")
    docs, planted = [], {}
    for i in range(300):  # control: same vocabulary, no eval n-gram
        docs.append((f"ctl-{i:04d}", " ".join(sentence(rng, vocab, int(rng.integers(150, 400))))))
    for i in range(120):
        ex = examples[int(rng.integers(len(examples)))].split()
        start = int(rng.integers(0, len(ex) - 13 + 1))
        gram = ex[start:start + 13]
        shown = [w.capitalize() + "," if k % 4 == 0 else w for k, w in enumerate(gram)]  # case and punctuation vary
        body = sentence(rng, vocab, int(rng.integers(60, 400)))
        pos = int(rng.integers(0, len(body) + 1))
        text = " ".join(body[:pos] + shown + body[pos:])
        docs.append((f"hit-{i:04d}", text))
        planted[f"hit-{i:04d}"] = " ".join(gram)
    order = rng.permutation(len(docs))
    docs = [docs[k] for k in order]
    inputs = write_docs(tmp_path, docs, per_shard=70)
    stats, kept, dropped = run(inputs, tmp_path / "plan", workers=2, eval_files=[str(jsonl), str(txt)],
                               split_output="joined")
    assert stats["documents"] == len(docs)
    assert stats["documents_matched"] == len(planted)  # every planted 13-gram, and nothing else
    assert stats["documents_split"] + stats["documents_trimmed"] + stats["documents_removed"] == len(planted)
    assert stats["documents_split"] > 0 and stats["documents_trimmed"] > 0 and stats["documents_removed"] > 0
    original = dict(docs)
    out = dict(zip(kept.column("id").to_pylist(), kept.column("text").to_pylist()))
    for i, t in out.items():
        if i.startswith("ctl-"):
            assert t == original[i]  # byte for byte
        else:
            assert planted[i] not in normalize(t)  # the n-gram is gone
            assert len(t) < len(original[i])
    assert all(i.startswith("ctl-") for i in out if out[i] == original[i])
    assert sum(i.startswith("ctl-") for i in out) == 300
    assert set(dropped.column("reason").to_pylist()) <= {"contaminated"}
    assert all(i.startswith("hit-") for i in dropped.column("id").to_pylist())
    assert kept.num_rows + dropped.num_rows == len(docs)


def test_short_tasks_use_the_whole_example_as_one_ngram(tmp_path):
    rng = np.random.default_rng(5)
    vocab = vocabulary(rng)
    nine, four = sentence(rng, vocab, 9), sentence(rng, vocab, 4)
    ev = tmp_path / "short.jsonl"
    ev.write_text(json.dumps({"question": " ".join(nine), "answer": " ".join(four)}) + "\n")
    pad = lambda: " ".join(sentence(rng, vocab, 120))
    docs = [
        ("whole", pad() + " " + " ".join(nine) + " " + pad()),  # the 9-word example: found
        ("part", pad() + " " + " ".join(nine[:8]) + " " + pad()),  # 8 of its words: not the n-gram
        ("tiny", pad() + " " + " ".join(four) + " " + pad()),  # under min_ngram: not indexed
    ]
    inputs = write_docs(tmp_path, docs, per_shard=3)
    stats, kept, _ = run(inputs, tmp_path / "plan", eval_files=[str(ev)], eval_fields=["question", "answer"])
    assert stats["index_lengths"] == [9]
    assert stats["eval_files"][0]["too_short"] == 1
    assert stats["documents_matched"] == 1
    texts = dict(zip(kept.column("id").to_pylist(), kept.column("text").to_pylist()))
    assert texts["part"] == docs[1][1] and texts["tiny"] == docs[2][1]
    assert " ".join(nine) not in texts["whole"]


def test_an_eval_file_with_lone_surrogate_escapes_still_decontaminates(tmp_path):
    """JSON's "\\ud800" in an eval example stopped the planning step with a UnicodeEncodeError (the index's
    Arrow buffers); it is U+FFFD now, and the words around it are still found."""
    rng = np.random.default_rng(6)
    vocab = vocabulary(rng)
    words = sentence(rng, vocab, 30)
    ev = tmp_path / "ev.jsonl"
    ev.write_text('{"text": "' + " ".join(words[:15]) + ' \\ud800 ' + " ".join(words[15:]) + '"}\n')
    assert "\ufffd" in eval_examples(str(ev), [])[0]
    pad = lambda: " ".join(sentence(rng, vocab, 120))
    inputs = write_docs(tmp_path, [("hit", pad() + " " + " ".join(words[:15]) + " " + pad()), ("miss", pad())], 2)
    stats, kept, _ = run(inputs, tmp_path / "plan", eval_files=[str(ev)])
    assert stats["documents_matched"] == 1


@pytest.mark.parametrize("split_output", ["joined", "documents"])
def test_cuts_200_characters_each_side_drops_short_pieces_and_over_split_documents(tmp_path, split_output):
    rng = np.random.default_rng(3)
    vocab = vocabulary(rng)
    gram = " ".join(sentence(rng, vocab, 13))
    ev = tmp_path / "ev.txt"
    ev.write_text(gram + "\n")

    def filler(n):  # exactly n characters, no eval n-gram; a space at each end
        words, s = [], " "
        while len(s) < n:
            s += vocab[int(rng.integers(len(vocab)))] + " "
        return s[:n - 1] + " "
    a, b = filler(500), filler(500)
    middle = a + gram + b
    start = filler(600)
    over = "".join(filler(700) + gram for _ in range(11)) + filler(700)  # 12 pieces > 10
    ten = "".join(filler(700) + gram for _ in range(9)) + filler(700)  # exactly 10 pieces
    small = filler(150) + gram + filler(150)
    docs = [("middle", middle), ("start", gram + start), ("end", start + gram), ("over", over), ("ten", ten), ("small", small)]
    inputs = write_docs(tmp_path, docs, per_shard=4)
    stats, kept, dropped = run(inputs, tmp_path / "plan", eval_files=[str(ev)], split_output=split_output)
    if split_output == "joined":
        texts = dict(zip(kept.column("id").to_pylist(), kept.column("text").to_pylist()))
        assert "split_id" not in kept.column_names and kept.num_rows == 4
    else:  # one document per piece, numbered by split_id; unsplit documents have a null split_id
        texts = {}
        for i, t, k in zip(kept.column("id").to_pylist(), kept.column("text").to_pylist(), kept.column("split_id").to_pylist()):
            assert (k is not None) == (i in ("middle", "ten"))
            assert k is None or k == len(texts.get(i, "").split("\n\n")) - (i not in texts)
            texts[i] = t if i not in texts else texts[i] + "\n\n" + t
        assert kept.num_rows == 4 + 1 + 9 == 4 + stats["pieces_added"]
        assert kept.column("id").to_pylist() == ["middle"] * 2 + ["start", "end"] + ["ten"] * 10  # input order
    assert texts["middle"] == a[:300].strip() + "\n\n" + b[200:].strip()
    assert texts["start"] == start[200:].strip()
    assert texts["end"] == start[:400].strip()
    assert texts["ten"].count("\n\n") == 9
    assert set(dropped.column("id").to_pylist()) == {"over", "small"}
    assert stats["documents_split"] == 2 and stats["documents_trimmed"] == 2 and stats["documents_removed"] == 2
    assert stats["removed_split_over_limit"] == 1 and stats["removed_no_fragment_left"] == 1
    assert stats["matches"] == 1 + 1 + 1 + 11 + 9 + 1


def test_eval_files_jsonl_fields_text_lines_and_gzip(tmp_path):
    j = tmp_path / "a.jsonl.gz"
    with gzip.open(j, "wt") as f:
        f.write(json.dumps({"text": "first example", "id": "x"}) + "\n\n")
        f.write(json.dumps({"q": "no text key", "choices": ["one", {"deep": "two"}], "n": 3}) + "\n")
    assert eval_examples(str(j), []) == ["first example", "no text key", "one", "two"]
    assert eval_examples(str(j), ["q"]) == ["no text key"]
    t = tmp_path / "b.txt"
    t.write_text("line one\n\n  \nline two\n")
    assert [x.strip() for x in eval_examples(str(t), [])] == ["line one", "line two"]
    bad = tmp_path / "c.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(ValueError, match="c.jsonl:1"):
        eval_examples(str(bad), [])
    with pytest.raises(FileNotFoundError):
        Decontaminate("d", Params(eval_files=[str(tmp_path / "missing.jsonl")]))
    with pytest.raises(ValueError, match="eval_files"):
        Params()


def test_real_licences_one_sentence_of_the_mit_licence(tmp_path):
    files = sorted((DATA / "licenses").glob("*.txt"))
    docs = [(f.name, f.read_text(encoding="utf-8", errors="replace")) for f in files]
    sentence_ = ("THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, "
                 "INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY")
    ev = tmp_path / "mit.txt"
    ev.write_text(sentence_ + "\n")
    inputs = write_docs(tmp_path, docs, per_shard=10)
    # the warranty sentence is in more than 10 documents: a common phrase, not a leak (max_matches = 10)
    common, kept, dropped = run(inputs, tmp_path / "common", eval_files=[str(ev)])
    assert common["documents_matched"] == 0 and common["ngrams_too_common"] >= 1 and dropped.num_rows == 0
    assert kept.column("text").to_pylist() == [t for _, t in docs]
    stats, kept, dropped = run(inputs, tmp_path / "plan", eval_files=[str(ev)], max_matches=0, split_output="joined")
    key = normalize(sentence_)
    contaminated = {i for i, t in docs if key in normalize(t)}
    assert len(contaminated) > 10
    assert stats["documents_matched"] == len(contaminated)
    out = dict(zip(kept.column("id").to_pylist(), kept.column("text").to_pylist()))
    for i, t in docs:
        if i in contaminated:
            assert i not in out or key not in normalize(out[i])
        else:
            assert out[i] == t
    # a resumed plan returns the same report
    again, kept2, _ = run(inputs, tmp_path / "plan", eval_files=[str(ev)], max_matches=0, split_output="joined")
    assert again == stats and kept2.column("text").to_pylist() == kept.column("text").to_pylist()


def test_an_ngram_in_more_than_max_matches_documents_does_not_cut(tmp_path):
    """Megatron / NeMo Curator: an eval n-gram found in more than max_matches training documents is a
    common phrase; it is counted per document across every shard group and hash range."""
    rng = np.random.default_rng(8)
    vocab = vocabulary(rng)
    common, rare = " ".join(sentence(rng, vocab, 13)), " ".join(sentence(rng, vocab, 13))
    ev = tmp_path / "ev.txt"
    ev.write_text(common + "\n" + rare + "\n")
    pad = lambda: " ".join(sentence(rng, vocab, 80))
    docs = [(f"c{i:02d}", pad() + " " + common + " " + pad() + " " + common + " " + pad()) for i in range(12)]
    docs += [(f"r{i:02d}", pad() + " " + rare + " " + pad()) for i in range(3)]
    docs += [(f"x{i:02d}", pad()) for i in range(40)]
    order = rng.permutation(len(docs))
    docs = [docs[k] for k in order]
    inputs = write_docs(tmp_path, docs, per_shard=4)
    stats, kept, dropped = run(inputs, tmp_path / "p10", workers=2, eval_files=[str(ev)])
    assert stats["ngrams_too_common"] == 1 and stats["ngrams_matched"] == 2
    assert stats["documents_matched"] == 3 and stats["matches_ignored_common"] == 24
    out = {i: t for i, t in zip(kept.column("id").to_pylist(), kept.column("text").to_pylist())}
    original = dict(docs)
    assert all(out[i] == original[i] for i in original if not i.startswith("r"))
    assert all(rare not in t for i, t in zip(kept.column("id").to_pylist(), kept.column("text").to_pylist()) if i.startswith("r"))
    stats12, kept12, _ = run(inputs, tmp_path / "p12", eval_files=[str(ev)], max_matches=12)
    assert stats12["ngrams_too_common"] == 0 and stats12["documents_matched"] == 15
    assert stats12["documents_split"] == 15 and stats12["pieces_added"] == 12 * 2 + 3
    assert kept12.num_rows == len(docs) + stats12["pieces_added"]
    split = kept12.filter(pa.compute.starts_with(kept12.column("id"), "c"))
    assert split.num_rows == 36 and split.column("split_id").to_pylist()[:3] == [0, 1, 2]
    assert kept12.filter(pa.compute.starts_with(kept12.column("id"), "x")).column("split_id").null_count == 40


def test_bad_new_keys_are_refused(tmp_path):
    ev = tmp_path / "e.txt"
    ev.write_text("x\n")
    with pytest.raises(ValueError, match="max_matches"):
        Params(eval_files=[str(ev)], max_matches=-1)
    with pytest.raises(ValueError, match="split_output"):
        Params(eval_files=[str(ev)], split_output="glued")


def test_same_plan_for_any_worker_count_and_after_a_kill(tmp_path):
    rng = np.random.default_rng(12)
    vocab = vocabulary(rng)
    grams = [" ".join(sentence(rng, vocab, 13)) for _ in range(3)]
    ev = tmp_path / "ev.txt"
    ev.write_text("\n".join(grams) + "\n")
    pad = lambda: " ".join(sentence(rng, vocab, 60))
    docs = [(f"d{i:03d}", pad() + (" " + grams[i % 3] + " " + pad() if i % 4 == 0 else "")) for i in range(120)]
    inputs = write_docs(tmp_path, docs, per_shard=5)
    s1, k1, d1 = run(inputs, tmp_path / "w1", workers=1, eval_files=[str(ev)], max_matches=12)
    s2, k2, d2 = run(inputs, tmp_path / "w2", workers=2, eval_files=[str(ev)], max_matches=12)
    assert s1 == s2 and k1.equals(k2) and d1.equals(d2)
    assert s1["ngrams_too_common"] == 0 and s1["documents_matched"] == 30 and s1["pieces_added"] > 0
    files = sorted(p.relative_to(tmp_path / "w1") for p in (tmp_path / "w1").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "w2") for p in (tmp_path / "w2").rglob("*") if p.is_file())
    for f in files:
        assert (tmp_path / "w1" / f).read_bytes() == (tmp_path / "w2" / f).read_bytes(), f
    plan = tmp_path / "w1"
    for name in ("decontam_stats.json", "frequent.npy"):
        (plan / name).unlink()
    for sub in ("matches", "pairs", "frequent", "results"):
        victims = sorted((plan / sub).iterdir())
        victims[len(victims) // 2].unlink()
    s3, k3, d3 = run(inputs, plan, workers=2, eval_files=[str(ev)], max_matches=12)
    assert s3 == s1 and k3.equals(k1) and d3.equals(d1)
