"""minhash_dedup and decontaminate as stages of a TOML pipeline: manifest, stats, resume, `curate clusters`."""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from curate.cli import main as curate_main
from curate.executors.local import LocalExecutor
from curate.pipeline import load_pipeline
from curate.runner import run_pipeline
from curate.shards import read_shard

PIPELINE = """
[pipeline]
name = "dedup-test"
output = "{out}"
shard_rows = 60

[[sources]]
path = "{src}"

[[stages]]
type = "minhash_dedup"
threshold = 0.8
verify = true

[[stages]]
type = "decontaminate"
eval_files = ["{ev}"]
ngram = 13
"""


def corpus(rng):
    letters = rng.integers(97, 123, size=(20_000, 7), dtype=np.uint8)
    vocab = [bytes(r).decode() for r in letters]
    words = lambda n: [vocab[i] for i in rng.integers(len(vocab), size=n)]
    docs, dups, eval_texts = [], {}, []
    for i in range(200):
        docs.append({"id": f"u{i:03d}", "text": " ".join(words(150))})
    for i in range(20):  # near-duplicates: one word changed
        base = words(150)
        docs.append({"id": f"n{i:03d}a", "text": " ".join(base)})
        other = list(base)
        other[75] = "changed"
        docs.append({"id": f"n{i:03d}b", "text": " ".join(other)})
        dups[f"n{i:03d}"] = 2
    for i in range(10):  # contaminated by an eval passage
        passage = words(40)
        eval_texts.append(" ".join(passage))
        docs.append({"id": f"c{i:03d}", "text": " ".join(words(100) + passage[5:25] + words(100))})
    order = rng.permutation(len(docs))
    return [docs[k] for k in order], eval_texts


def test_pipeline_sets_aside_with_reasons_reports_and_resumes(tmp_path, capsys):
    rng = np.random.default_rng(0)
    docs, eval_texts = corpus(rng)
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in docs))
    ev = tmp_path / "eval.jsonl"
    ev.write_text("".join(json.dumps({"text": t}) + "\n" for t in eval_texts))
    out = tmp_path / "out"
    toml = tmp_path / "p.toml"
    toml.write_text(PIPELINE.format(out=out, src=src, ev=ev))
    stats = run_pipeline(load_pipeline(toml), LocalExecutor(2), progress=False)
    by_name = {s["name"]: s for s in stats["stages"]}
    mh, dc = by_name["minhash_dedup"], by_name["decontaminate"]
    assert mh["dropped"] == {"near_duplicate": 20}
    assert mh["plan"]["clusters"] == 20 and mh["plan"]["verify"] is True
    assert dc["plan"]["documents_matched"] == 10
    assert dc["plan"]["documents_split"] + dc["plan"]["documents_trimmed"] + dc["plan"]["documents_removed"] == 10
    manifest = json.loads((out / "manifest.json").read_text())
    dropped = pa.concat_tables([read_shard(out / e["path"]) for e in manifest["dropped"]], promote_options="default")
    kept = pa.concat_tables([read_shard(out / e["path"]) for e in manifest["shards"]])
    kept_ids = set(kept.column("id").to_pylist())
    near = dropped.filter(pa.compute.equal(dropped.column("reason"), "near_duplicate")).to_pylist()
    assert len(near) == 20
    for row in near:  # each pair keeps one: the smaller id, since there are no quality scores
        assert row["stage"] == "minhash_dedup" and row["id"].endswith("b") and row["duplicate_of"] == row["id"][:-1] + "a"
        assert row["duplicate_of"] in kept_ids
    contaminated = dropped.filter(pa.compute.equal(dropped.column("reason"), "contaminated")).to_pylist()
    assert len(contaminated) == dc["plan"]["documents_removed"]
    for row in kept.to_pylist():
        if row["id"].startswith("c"):
            for t in eval_texts:
                assert " ".join(t.split()[5:18]) not in row["text"]
    # split documents become pieces of their own (same id, a split_id): the stats count the pieces added
    split_ids = [r["id"] for r in kept.to_pylist() if r.get("split_id") is not None]
    assert dc.get("added", 0) == len(split_ids) - len(set(split_ids))
    assert (dc["added"] > 0) == (dc["plan"]["documents_split"] > 0)
    assert kept.num_rows + dropped.num_rows == len(docs) + dc.get("added", 0)

    # a second run finds every task and plan done and writes the same manifest
    again = run_pipeline(load_pipeline(toml), LocalExecutor(1), progress=False)
    assert again == stats
    assert json.loads((out / "manifest.json").read_text()) == manifest

    capsys.readouterr()
    assert curate_main(["clusters", str(out), "--show", "3"]) == 0
    shown = capsys.readouterr().out
    assert "20 clusters" in shown and shown.count("\ncluster ") + shown.startswith("cluster ") == 3
    assert "J=1.000" in shown and "J=0.9" in shown  # representative, and its near-duplicate's exact Jaccard
    assert curate_main(["clusters", str(tmp_path), "--show", "1"]) == 0  # a folder above: found by scanning
    assert capsys.readouterr().out.count("representative") == 1
    assert curate_main(["clusters", str(tmp_path / "nothing-here")]) == 2
