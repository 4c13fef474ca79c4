"""Datasets tokenized before records named their curated shards (``input_shards`` in ``PREFIX.json``, ``parts.json``
and ``--merge``'s ``P.json``) were not compared by the blend's "two datasets from the same shards" check, and an
up-to-date rerun of `pretrain tokenize` did not add the field: such datasets stayed uncompared until tokenized again.
An up-to-date rerun now records it, atomically, without tokenizing again; and the blend refuses them afterwards."""
import hashlib
import json
import os
from pathlib import Path

import pytest

from pretrain.cli import main as pretrain_main

import curated  # tests/data/pretrain/curated.py (pytest's pythonpath)


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    root = tmp_path_factory.mktemp("input_shards")
    cur, tokenizer = curated.curated_and_tokenizer(root, 60, shards=3, batch_rows=16, vocab=400, max_bytes=200_000)
    return tokenizer, cur


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _as_written_before_the_field(one: Path, parts: Path) -> None:
    """The records as a `pretrain tokenize` of before ``input_shards`` wrote them: ``one.json`` and
    ``parts/parts.json`` without it, and ``parts.json`` (the merge record) naming that parts.json."""
    from pretrain.data.parts import read_parts_index, write_parts_index

    record = json.loads(one.with_suffix(".json").read_text())
    del record["input_shards"]
    one.with_suffix(".json").write_text(json.dumps(record, indent=2))
    index = read_parts_index(parts)
    kept = {k: v for k, v in index.items() if k not in ("format", "version", "dtype", "documents", "tokens", "parts",
                                                        "input_shards")}
    write_parts_index(parts, index["dtype"], index["parts"], kept)
    merged = json.loads(Path(f"{parts}.json").read_text())
    del merged["input_shards"]
    merged["parts_sha256"] = _sha(parts / "parts.json")
    Path(f"{parts}.json").write_text(json.dumps(merged, indent=2))


def _files(*paths: Path) -> dict:
    """Each file's inode and modification time: a file tokenized or merged again is a new file."""
    return {p: (os.stat(p).st_ino, os.stat(p).st_mtime_ns) for p in paths}


def test_an_up_to_date_rerun_records_the_input_shards_and_the_blend_then_refuses_the_pair(tok, tmp_path, capsys):
    from pretrain.data.parts import open_indexed

    tokenizer, cur = tok
    one, parts = tmp_path / "one", tmp_path / "p"
    run = ["tokenize", "--input", str(cur), "--tokenizer", tokenizer.model_path, "--no-progress"]
    as_parts = ["--output-prefix", str(parts), "--parts", "--part-bytes", "20000"]
    assert pretrain_main([*run, "--output-prefix", str(one)]) == 0
    assert pretrain_main([*run, *as_parts, "--merge"]) == 0
    want = json.loads(one.with_suffix(".json").read_text())["input_shards"]
    assert want and len(list(parts.glob("part-*.bin"))) > 1
    _as_written_before_the_field(one, parts)
    capsys.readouterr()
    pairs = (f"1 {one} 1 {parts}/", f"1 {parts} 1 {parts}/")  # a one-file and a --parts run; a merge and its parts
    for spec in pairs:  # the gap: datasets of older records are not compared
        assert pretrain_main(["blend", "inspect", spec]) == 0, capsys.readouterr().err

    tokens = [one.with_suffix(".bin"), one.with_suffix(".idx"), Path(f"{parts}.bin"), Path(f"{parts}.idx"),
              *parts.glob("part-*")]
    before = _files(*tokens)
    assert pretrain_main([*run, "--output-prefix", str(one)]) == 0
    assert pretrain_main([*run, *as_parts]) == 0  # without --merge: the merge record follows parts.json all the same
    err = capsys.readouterr().err
    assert "up to date" in err and "recorded" in err
    assert json.loads(one.with_suffix(".json").read_text())["input_shards"] == want
    assert json.loads((parts / "parts.json").read_text())["input_shards"] == want
    merged = json.loads(Path(f"{parts}.json").read_text())
    assert merged["input_shards"] == want and merged["parts_sha256"] == _sha(parts / "parts.json")
    assert not list(tmp_path.glob("**/.*.tmp"))  # written atomically: no temporary file left
    assert len(open_indexed(parts)) == 60  # the merged files still read as current (not "merged from other parts")
    assert pretrain_main([*run, *as_parts, "--merge"]) == 0
    assert f"{parts}.bin/.idx are up to date" in capsys.readouterr().err
    assert _files(*tokens) == before  # nothing tokenized or merged again

    for spec in pairs:
        assert pretrain_main(["blend", "inspect", spec]) == 2
        assert "were tokenized from the same curated shard" in capsys.readouterr().err
    records = {p: p.read_bytes() for p in (one.with_suffix(".json"), parts / "parts.json", Path(f"{parts}.json"))}
    assert pretrain_main([*run, "--output-prefix", str(one)]) == 0
    assert pretrain_main([*run, *as_parts, "--merge"]) == 0
    assert {p: p.read_bytes() for p in records} == records  # once recorded, a rerun writes nothing
