"""``PREFIX/parts.json`` is not trusted: its totals (documents, tokens, and the stats a tokenize run records) must be
the sums of its parts, each part's ``bin_bytes`` its tokens' bytes, no part listed twice, and the part files the
sizes it records. A parts.json whose totals lie used to be merged (and trained on) silently; a part cut short or an
.idx grown since counted as up to date on a rerun; a task marker's counts went into parts.json unchecked."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from curate.executors.local import LocalExecutor
from pretrain.data.indexed import IndexedDataset
from pretrain.data.parts import PartsDataset, merge_parts, open_indexed, read_parts_index
from pretrain.data.tokenize import tokenize_curated
from pretrain.data.tokenize_parts import tokenize_to_parts

import curated  # tests/data/pretrain/curated.py (pytest's pythonpath)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("totals")
    cur, tok = curated.curated_and_tokenizer(root, 60, shards=4, batch_rows=9, vocab=500, max_bytes=300_000, threads=2)
    one = root / "one"
    tokenize_curated(cur, tok.model_path, one, workers=1, progress=False)
    return cur, tok, one


def _parts(setup, folder: Path, log=None) -> dict:
    cur, tok, _ = setup
    tokenize_to_parts(cur, tok.model_path, folder, LocalExecutor(1), part_bytes=1, log=log or (lambda m: None))
    return json.loads((folder / "parts.json").read_text())


def _same_record(folder: Path, record: dict) -> bool:
    """parts.json is ``record`` but for the CPU seconds its run took."""
    def strip(r):
        return {**r, "stats": {k: v for k, v in r["stats"].items() if k != "worker_cpu_seconds"}}
    return strip(json.loads((folder / "parts.json").read_text())) == strip(record)


def _same_as_one(folder: Path, one: Path) -> bool:
    merge_parts(folder, folder.parent / "m", durable=False)
    merged = folder.parent / "m"
    return all(Path(f"{merged}{e}").read_bytes() == Path(f"{one}{e}").read_bytes() for e in (".bin", ".idx"))


def _lie(record: dict, how: str) -> dict:
    r = json.loads(json.dumps(record))
    if how == "documents":
        r["documents"] += 1
    elif how == "tokens":
        r["tokens"] -= 5
    elif how.startswith("stats."):
        r["stats"][how[6:]] += 3
    elif how == "bin_bytes":  # a part's size in bytes that its tokens cannot fill
        r["parts"][1]["bin_bytes"] += 2
    elif how == "twice":  # a part listed twice, the totals made to agree: its documents would be read twice
        r["parts"].insert(2, dict(r["parts"][1]))
        for key in ("documents", "tokens"):
            r[key] = r["stats"][key] = sum(p[key] for p in r["parts"])
        r["stats"]["rows"] = sum(p["rows"] for p in r["parts"])
        r["stats"]["parts"] = len(r["parts"])
    elif how == "bool":
        r["parts"][0]["shards"] = True
    return r


LIES = {"documents": "documents in all", "tokens": "tokens in all", "stats.documents": r"stats\.documents",
        "stats.tokens": r"stats\.tokens", "stats.rows": r"stats\.rows", "stats.parts": r"stats\.parts",
        "bin_bytes": "part part-00001 has", "twice": "part part-00001 is listed twice", "bool": "shards of part-00000"}


@pytest.mark.parametrize("how", list(LIES))
def test_a_parts_json_whose_totals_lie_is_refused_naming_what(setup, tmp_path, how):
    folder = tmp_path / "p"
    record = _parts(setup, folder)
    (folder / "parts.json").write_text(json.dumps(_lie(record, how)))
    for read in (read_parts_index, PartsDataset, open_indexed, lambda f: merge_parts(f, tmp_path / "m")):
        with pytest.raises(ValueError, match=LIES[how]):
            read(folder)
    assert not (tmp_path / "m.bin").exists() and not (tmp_path / "m.idx").exists()
    # a rerun of the tokenize does not take it as up to date: it writes a true one (keeping the intact parts)
    said = []
    cur, tok, one = setup
    tokenize_to_parts(cur, tok.model_path, folder, LocalExecutor(1), part_bytes=1, log=said.append)
    assert any("tokenizing again" in m for m in said) and any("resuming: 4 of 4" in m for m in said), said
    assert _same_record(folder, record) and _same_as_one(folder, one)


def _stamp(folder: Path) -> dict:
    return {p.name: os.stat(p).st_ino for p in sorted(folder.glob("part-*"))}


@pytest.mark.parametrize("damage", ["bin cut short", "idx grown", "idx missing", "bin a folder"])
def test_a_part_whose_files_are_not_the_recorded_sizes_is_refused_and_redone(setup, tmp_path, damage):
    folder = tmp_path / "p"
    record = _parts(setup, folder)
    assert all("idx_bytes" in p for p in record["parts"])
    bin_, idx = folder / "part-00002.bin", folder / "part-00002.idx"
    if damage == "bin cut short":
        bin_.write_bytes(bin_.read_bytes()[:-2])
    elif damage == "idx grown":  # the .idx reader takes trailing bytes; the recorded size does not
        idx.write_bytes(idx.read_bytes() + b"\0" * 8)
    elif damage == "idx missing":
        idx.unlink()
    else:
        bin_.unlink()
        bin_.mkdir()
    with pytest.raises(ValueError, match="part part-00002"):
        PartsDataset(folder)
    with pytest.raises(ValueError, match="part part-00002"):
        merge_parts(folder, tmp_path / "m")
    if damage == "bin a folder":
        bin_.rmdir()
    before = _stamp(folder)
    said = []
    cur, tok, one = setup
    tokenize_to_parts(cur, tok.model_path, folder, LocalExecutor(1), part_bytes=1, log=said.append)
    assert any("part-00002" in m and "tokenizing that part again" in m for m in said), said
    assert any("resuming: 3 of 4" in m for m in said), said  # only the damaged part is tokenized again
    after = _stamp(folder)
    assert {k for k in after if before.get(k) != after[k]} <= {"part-00002.bin", "part-00002.idx"}
    assert _same_record(folder, record) and _same_as_one(folder, one)


def test_a_task_marker_whose_counts_lie_is_not_written_into_parts_json(setup, tmp_path):
    folder = tmp_path / "p"
    record = _parts(setup, folder)
    (folder / "parts.json").unlink()  # as after a killed run: the markers are what a rerun resumes from
    marker = folder / "_tasks" / "part-00001.json"
    m = json.loads(marker.read_text())
    marker.write_text(json.dumps({**m, "documents": m["documents"] + 7}))
    said = []
    cur, tok, one = setup
    tokenize_to_parts(cur, tok.model_path, folder, LocalExecutor(1), part_bytes=1, log=said.append)
    assert any("resuming: 3 of 4" in m for m in said), said  # part-00001 was tokenized again
    assert _same_record(folder, record)
    assert PartsDataset(folder).num_documents == IndexedDataset(one).num_documents


def test_a_merged_file_cut_short_is_merged_again(setup, tmp_path):
    cur, tok, one = setup
    folder = tmp_path / "p"
    tokenize_to_parts(cur, tok.model_path, folder, LocalExecutor(1), part_bytes=1, merge=True, log=lambda m: None)
    merged = tmp_path / "p.bin"
    merged.write_bytes(merged.read_bytes()[:-4])
    said = []
    tokenize_to_parts(cur, tok.model_path, folder, LocalExecutor(1), part_bytes=1, merge=True, log=said.append)
    assert any("merged again" in m for m in said), said
    assert merged.read_bytes() == Path(f"{one}.bin").read_bytes()
    assert isinstance(open_indexed(folder), IndexedDataset)


def test_a_hand_written_parts_json_without_tokenize_fields_still_reads(tmp_path):
    from pretrain.data.indexed import IndexedDatasetBuilder, data_file_path
    from pretrain.data.parts import part_name, write_parts_index

    parts = []
    for i in range(3):
        with IndexedDatasetBuilder(tmp_path / "p" / part_name(i), np.uint16, durable=False) as b:
            b.add_documents(np.arange(12, dtype=np.uint16), [5, 7])
        parts.append({"name": part_name(i), "documents": 2, "tokens": 12,
                      "bin_bytes": os.path.getsize(data_file_path(tmp_path / "p" / part_name(i)))})
    write_parts_index(tmp_path / "p", np.uint16, parts)
    ds = PartsDataset(tmp_path / "p")
    assert (ds.num_documents, ds.num_tokens) == (6, 36)
