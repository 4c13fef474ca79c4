"""``pretrain tokenize`` / ``pretrain tokenizer train`` inputs: text columns of other Arrow types, a tokenizer
sidecar with ids outside the vocabulary, output prefixes that name folders."""
import hashlib
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from pretrain.cli import main as pretrain_main
from pretrain.data.indexed import IndexedDataset
from pretrain.data.tokenize import merge_parts, output_prefix_problem, tokenize_curated
from pretrain.data.tokenizer import load_tokenizer, text_array, train_tokenizer

import curated  # tests/data/pretrain/curated.py (pytest's pythonpath)


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokinputs")
    cur, tokenizer = curated.curated_and_tokenizer(root, 60, shards=2, batch_rows=16, vocab=400, max_bytes=200_000)
    return tokenizer, cur


def _folder(path: Path, table: pa.Table) -> Path:
    (path / "data").mkdir(parents=True)
    shard = path / "data" / "s.arrow"
    with ipc.new_file(str(shard), table.schema) as w:
        w.write_table(table)
    sha = hashlib.sha256(shard.read_bytes()).hexdigest()
    (path / "manifest.json").write_text(json.dumps({"shards": [{"path": "data/s.arrow", "rows": table.num_rows,
                                                                "sha256": sha}], "dropped": []}))
    return path


# ------------------------------------------------------------------------------------------ text columns

def test_text_array_types():
    assert text_array(pa.array(["a", "b"]), "s").to_pylist() == ["a", "b"]
    assert text_array(pa.array(["a", "b"], pa.large_string()), "s").to_pylist() == ["a", "b"]
    assert text_array(pa.array([b"ok", b"\xff\xfe", None], pa.binary()), "s").to_pylist() == ["ok", None, None]
    assert text_array(pa.array([b"ok"], pa.large_binary()), "s").to_pylist() == ["ok"]
    assert text_array(pa.array(["a", "b", "a"]).dictionary_encode(), "s").to_pylist() == ["a", "b", "a"]
    if hasattr(pa, "string_view"):
        assert text_array(pa.array(["a"], pa.string_view()), "s").to_pylist() == ["a"]
        assert text_array(pa.array([b"a"], pa.binary_view()), "s").to_pylist() == ["a"]
    for bad in (pa.array([1, 2]), pa.array([["x"]]), pa.array([1.5])):
        with pytest.raises(ValueError, match=r"shard s: column 'text' has type .*not text"):
            text_array(bad, "s")


@pytest.mark.parametrize("name,column", [("int", pa.array([1, 2], pa.int64())),
                                         ("list", pa.array([["x"], ["y"]], pa.list_(pa.string())))])
def test_a_column_that_is_not_text_is_refused_naming_shard_and_type(tok, tmp_path, capsys, name, column):
    tokenizer, _ = tok
    cur = _folder(tmp_path / name, pa.table({"id": ["a", "b"], "text": column}))
    rc = pretrain_main(["tokenize", "--input", str(cur), "--tokenizer", tokenizer.model_path, "--output-prefix",
                        str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "s.arrow" in err and str(column.type) in err and "Traceback" not in err, err
    assert not (tmp_path / "out.bin").exists()
    with pytest.raises(ValueError, match=r"s\.arrow.*not text"):
        train_tokenizer(cur, 300, tmp_path / "t.model", max_bytes=10_000, threads=1)


@pytest.mark.parametrize("typ", [pa.binary(), pa.large_binary()])
def test_a_binary_column_of_utf8_is_read_as_text(tok, tmp_path, typ):
    tokenizer, _ = tok
    texts = [b"first valid text", b"ok text", b"\xff\xfe not utf-8", None]
    cur = _folder(tmp_path / "bin", pa.table({"id": ["a", "b", "c", "d"], "text": pa.array(texts, typ)}))
    stats = tokenize_curated(cur, tokenizer.model_path, tmp_path / "out", progress=False)
    assert (stats["documents"], stats["errors"]) == (2, 2)
    ds = IndexedDataset(tmp_path / "out")
    assert [tokenizer.decode(ds[i][:-1]) for i in range(2)] == ["first valid text", "ok text"]
    t = train_tokenizer(cur, 300, tmp_path / "t.model", max_bytes=10_000, threads=1)
    assert t.vocab_size > 0


def test_dictionary_and_large_string_columns(tok, tmp_path):
    tokenizer, _ = tok
    col = pa.array(["hello there", "general text", "hello there"]).dictionary_encode()
    cur = _folder(tmp_path / "dict", pa.table({"id": ["a", "b", "c"], "text": col}))
    stats = tokenize_curated(cur, tokenizer.model_path, tmp_path / "out", progress=False)
    assert (stats["documents"], stats["errors"]) == (3, 0)


# ------------------------------------------------------------------------------------------ sidecar ids

@pytest.mark.parametrize("field,value", [("eod_id", -1), ("eod_id", 400), ("eod_id", 10_000), ("pad_id", -2),
                                         ("bos_id", 400)])
def test_sidecar_ids_outside_the_vocabulary_are_refused_naming_it(tok, tmp_path, capsys, field, value):
    tokenizer, cur = tok
    model = tmp_path / "m.model"
    model.write_bytes(Path(tokenizer.model_path).read_bytes())
    meta = json.loads(Path(tokenizer.model_path).with_suffix(".json").read_text())
    meta[field] = value
    (tmp_path / "m.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=rf"m\.json: {field} = {value} "):
        load_tokenizer(model)
    rc = pretrain_main(["tokenize", "--input", str(cur), "--tokenizer", str(model), "--output-prefix",
                        str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "m.json" in err and field in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out.parts").exists() and not (tmp_path / "out.bin").exists()


def test_sidecar_pad_minus_one_still_means_none(tok, tmp_path):
    tokenizer, _ = tok
    model = tmp_path / "m.model"
    model.write_bytes(Path(tokenizer.model_path).read_bytes())
    meta = json.loads(Path(tokenizer.model_path).with_suffix(".json").read_text())
    meta["pad_id"] = -1
    (tmp_path / "m.json").write_text(json.dumps(meta))
    assert load_tokenizer(model).pad_id == -1


# ------------------------------------------------------------------------------------------ output prefix

@pytest.mark.parametrize("suffix", [".bin", ".idx", ".json"])
def test_an_output_file_that_is_a_folder_is_refused_at_start(tok, tmp_path, capsys, suffix):
    tokenizer, cur = tok
    (tmp_path / f"d{suffix}").mkdir()
    rc = pretrain_main(["tokenize", "--input", str(cur), "--tokenizer", tokenizer.model_path, "--output-prefix",
                        str(tmp_path / "d"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and f"d{suffix} is a folder" in err and "merge.tmp" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"d{suffix}"]


@pytest.mark.parametrize("trailing", [True, False])
def test_a_prefix_naming_a_folder_is_refused(tok, tmp_path, capsys, trailing):
    tokenizer, cur = tok
    (tmp_path / "dd").mkdir()
    prefix = str(tmp_path / "dd") + ("/" if trailing else "")
    rc = pretrain_main(["tokenize", "--input", str(cur), "--tokenizer", tokenizer.model_path, "--output-prefix",
                        prefix, "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "names a folder" in err and os.path.join(str(tmp_path / "dd"), "tokens") in err, err
    assert list((tmp_path / "dd").iterdir()) == []
    with pytest.raises(ValueError, match="names a folder"):
        tokenize_curated(cur, tokenizer.model_path, prefix, progress=False)


def test_output_prefix_problem(tmp_path):
    (tmp_path / "f").write_text("x")
    assert output_prefix_problem(tmp_path / "ok") is None
    assert "which is a file" in output_prefix_problem(tmp_path / "f" / "x")
    (tmp_path / "p").mkdir()
    assert output_prefix_problem(tmp_path / "p", parts=True) is None  # --parts: PREFIX/ is the folder of parts
    assert "names a folder" in output_prefix_problem(str(tmp_path / "p") + "/", parts=True, merge=True)


def test_merge_parts_removes_its_temp_file_on_failure(tok, tmp_path):
    tokenizer, cur = tok
    stats = tokenize_curated(cur, tokenizer.model_path, tmp_path / "a", progress=False)
    assert stats["documents"] > 0
    # parts are gone after a run; make a run's parts again by hand and fail the merge (PREFIX.bin a folder)
    from pretrain.data.manifest_check import manifest_entries
    from pretrain.data.tokenize import plan_tasks, run_task

    parts = tmp_path / "parts"
    parts.mkdir()
    tasks = plan_tasks(manifest_entries(cur))
    for t in tasks:
        run_task(t, str(parts), "<u2", "text", tokenizer)
    (tmp_path / "b.bin").mkdir()
    with pytest.raises(OSError):
        merge_parts(parts, tasks, str(tmp_path / "b"), "<u2")
    assert not (tmp_path / "b.bin.merge.tmp").exists()
