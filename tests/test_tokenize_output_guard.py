"""``pretrain tokenize`` outputs: what counts as up to date, and what may be written over.

- Outputs of older text reading rules (before b05eb25 a binary text column was all encode errors: an empty
  dataset, exit 0) carry a key without the reader version, so they are stale and tokenized again, not kept.
- An up-to-date record beside a ``.bin`` cut short, or a resumed task whose marker is damaged or lies, is not
  trusted: the work is done again.
- ``PREFIX.bin/.idx/.json`` (and the ``PREFIX/`` folder of ``--parts``) that Quarry did not write are refused
  unless ``force``; the one-file run's scratch folder ``PREFIX.parts/`` is never taken from a user.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from curate.executors.local import LocalExecutor
from pretrain.cli import main as pretrain_main
from pretrain.data import tokenize as tokmod
from pretrain.data.indexed import IndexedDataset, IndexedDatasetBuilder
from pretrain.data.parts import PartsDataset
from pretrain.data.tokenize import tokenize_curated
from pretrain.data.tokenize_parts import tokenize_to_parts
from pretrain.data.tokenizer import load_tokenizer

import curated  # tests/data/pretrain/curated.py (pytest's pythonpath)
QUIET = dict(progress=False, log=lambda m: None)


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    root = tmp_path_factory.mktemp("guard")
    cur, tokenizer = curated.curated_and_tokenizer(root, 40, shards=2, batch_rows=8, vocab=400, max_bytes=200_000)
    texts = [d["text"] for d in curated.prose_docs()][:40]
    binary = root / "binary"  # the same texts in a binary column (UTF-8 bytes), one shard
    (binary / "data").mkdir(parents=True)
    table = pa.table({"id": [f"d{i}" for i in range(len(texts))], "text": pa.array([t.encode() for t in texts],
                                                                                    pa.binary())})
    with ipc.new_file(str(binary / "data" / "s.arrow"), table.schema) as w:
        w.write_table(table)
    sha = hashlib.sha256((binary / "data" / "s.arrow").read_bytes()).hexdigest()
    (binary / "manifest.json").write_text(json.dumps({"shards": [{"path": "data/s.arrow", "rows": len(texts),
                                                                  "sha256": sha}], "dropped": []}))
    ref = root / "ref"
    tokenize_curated(binary, tokenizer.model_path, ref, **QUIET)
    return tokenizer, cur, binary, ref, len(texts)


def _same(a, b) -> bool:
    return all(Path(f"{a}{e}").read_bytes() == Path(f"{b}{e}").read_bytes() for e in (".bin", ".idx"))


# ------------------------------------------------------------------------- finding 3: older reading rules

def _pre_b05eb25_output(prefix: Path, binary: Path, tokenizer, rows: int) -> None:
    """What `pretrain tokenize` wrote before b05eb25 for a binary text column: every row an encode error, an empty
    .bin/.idx, and PREFIX.json keyed by the job of that version (no reader version in it)."""
    tk = load_tokenizer(tokenizer.model_path)
    dtype = np.dtype(np.uint16)
    job = {"version": 1, "manifest_sha256": hashlib.sha256((binary / "manifest.json").read_bytes()).hexdigest(),
           "shards": [str((binary / "data" / "s.arrow").resolve())], "tokenizer_sha256": tk.sha256(),
           "specials": tk.specials(), "dtype": dtype.str, "text_column": "text"}
    key = hashlib.sha256(json.dumps(job, sort_keys=True).encode()).hexdigest()
    with IndexedDatasetBuilder(prefix, dtype) as b:
        pass
    stats = {"documents": 0, "tokens": 0, "dtype": "uint16", "tasks": 1, "rows": rows, "errors": rows, "empty": 0,
             "text_bytes": 0, "worker_cpu_seconds": 0.1, "seconds": 0.2}
    Path(f"{prefix}.json").write_text(json.dumps({"job_key": key, "stats": stats, "tokenizer": tk.model_path,
                                                  "input": str(binary)}, indent=2))


def test_an_output_of_the_old_reading_rules_is_tokenized_again(tok, tmp_path):
    tokenizer, _, binary, ref, rows = tok
    out = tmp_path / "web"
    _pre_b05eb25_output(out, binary, tokenizer, rows)
    said = []
    stats = tokenize_curated(binary, tokenizer.model_path, out, progress=False, log=said.append)
    assert (stats["documents"], stats["errors"]) == (rows, 0)  # was: "up to date", 0 documents
    assert any("tokenizing again" in m for m in said), said
    assert _same(out, ref) and IndexedDataset(out).num_documents == rows
    record = json.loads(Path(f"{out}.json").read_text())
    assert record["format"] == "quarry-tokenize" and record["reader"] == tokmod.READER_VERSION
    said.clear()
    tokenize_curated(binary, tokenizer.model_path, out, progress=False, log=said.append)
    assert any("up to date" in m for m in said)  # and the new output is kept on the next run


def _old_rules(monkeypatch):
    """The reading rules of READER_VERSION 1: a binary column read as all encode errors."""
    import pretrain.data.tokenizer as tokenizer_mod

    real = tokenizer_mod.text_array

    def text_array(column, path, text_column="text"):
        if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
            return pa.array([None] * len(column), pa.string())
        return real(column, path, text_column)

    monkeypatch.setattr(tokenizer_mod, "text_array", text_array)
    monkeypatch.setattr(tokmod, "READER_VERSION", 1, raising=False)


@pytest.mark.parametrize("mode", ["one file", "parts", "parts merged"])
def test_a_reader_version_bump_makes_every_kind_of_output_stale(tok, tmp_path, monkeypatch, mode):
    tokenizer, _, binary, ref, rows = tok
    out = tmp_path / "web"

    def run():
        if mode == "one file":
            return tokenize_curated(binary, tokenizer.model_path, out, **QUIET)
        return tokenize_to_parts(binary, tokenizer.model_path, out, LocalExecutor(1), merge=mode == "parts merged",
                                 log=lambda m: None)

    with monkeypatch.context() as m:
        _old_rules(m)
        assert run()["documents"] == 0
    assert run()["documents"] == rows
    if mode == "parts":
        assert PartsDataset(out).num_documents == rows
    else:
        assert _same(out, ref)


# ------------------------------------------------------------------------- nothing on disk trusted blindly

def test_an_up_to_date_record_beside_a_bin_cut_short_is_tokenized_again(tok, tmp_path):
    tokenizer, _, binary, ref, rows = tok
    out = tmp_path / "web"
    tokenize_curated(binary, tokenizer.model_path, out, **QUIET)
    data = Path(f"{out}.bin")
    data.write_bytes(data.read_bytes()[:-6])
    said = []
    tokenize_curated(binary, tokenizer.model_path, out, progress=False, log=said.append)
    assert not any("up to date" in m for m in said) and _same(out, ref)


def test_damaged_or_lying_task_markers_of_a_killed_run_are_redone(tok, tmp_path, monkeypatch):
    tokenizer, cur, _, _, _ = tok
    one = tmp_path / "one"
    tokenize_curated(cur, tokenizer.model_path, one, **QUIET)
    out = tmp_path / "web"

    def killed(*a, **k):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:  # every task done, killed before the merge
        m.setattr(tokmod, "merge_parts", killed)
        with pytest.raises(KeyboardInterrupt):
            tokenize_curated(cur, tokenizer.model_path, out, **QUIET)
    markers = sorted(Path(f"{out}.parts").glob("0*.json"))
    assert len(markers) >= 3
    markers[0].write_text("{")  # damaged: was a traceback-free 'not JSON' error that stopped every rerun
    lie = json.loads(markers[1].read_text())
    markers[1].write_text(json.dumps({**lie, "documents": lie["documents"] + 3, "tokens": lie["tokens"] + 9}))
    said = []
    stats = tokenize_curated(cur, tokenizer.model_path, out, progress=False, log=said.append)
    assert any(f"resuming: {len(markers) - 2} of {len(markers)}" in m for m in said), said
    assert _same(out, one) and stats["documents"] == IndexedDataset(one).num_documents


# ------------------------------------------------------------------------- finding 4: files Quarry did not write

FOREIGN = {".bin": b"my own tokens", ".idx": b"my own index", ".json": b'{"my": "settings"}'}


@pytest.mark.parametrize("suffix", list(FOREIGN))
def test_a_file_quarry_did_not_write_is_refused_unless_force(tok, tmp_path, suffix):
    tokenizer, _, binary, ref, _ = tok
    out = tmp_path / "web"
    mine = Path(f"{out}{suffix}")
    mine.write_bytes(FOREIGN[suffix])
    with pytest.raises(ValueError, match=rf"{mine.name}.*--force"):
        tokenize_curated(binary, tokenizer.model_path, out, **QUIET)
    assert mine.read_bytes() == FOREIGN[suffix]
    assert [p.name for p in tmp_path.iterdir()] == [mine.name]  # nothing else written
    with pytest.raises(ValueError, match=rf"{mine.name}.*--force"):  # --merge writes PREFIX.bin/.idx/.json too
        tokenize_to_parts(binary, tokenizer.model_path, out, LocalExecutor(1), merge=True, log=lambda m: None)
    assert mine.read_bytes() == FOREIGN[suffix] and not out.exists()
    tokenize_curated(binary, tokenizer.model_path, out, force=True, **QUIET)
    assert _same(out, ref)
    tokenize_curated(binary, tokenizer.model_path, out, **QUIET)  # now Quarry's: a rerun needs no --force


def test_the_command_refuses_a_file_it_did_not_write(tok, tmp_path, capsys):
    tokenizer, _, binary, _, _ = tok
    mine = tmp_path / "web.bin"
    mine.write_bytes(b"my own tokens")
    rc = pretrain_main(["tokenize", "--input", str(binary), "--tokenizer", tokenizer.model_path, "--output-prefix",
                        str(tmp_path / "web"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "not written by Quarry" in err and "Traceback" not in err, err
    assert mine.read_bytes() == b"my own tokens"


def test_a_fifo_at_the_record_is_refused_not_read(tok, tmp_path):
    tokenizer, _, binary, _, _ = tok
    os.mkfifo(tmp_path / "web.json")
    with pytest.raises(ValueError, match=r"web\.json exists and is not the record"):
        tokenize_curated(binary, tokenizer.model_path, tmp_path / "web", **QUIET)


def test_outputs_of_an_older_quarry_and_of_a_killed_run_are_quarry_s(tok, tmp_path):
    tokenizer, _, binary, ref, rows = tok
    out = tmp_path / "web"
    _pre_b05eb25_output(out, binary, tokenizer, rows)  # an older version's record: no "format" in it
    assert tokmod.foreign_output_problem(out) is None
    Path(f"{out}.json").unlink()  # killed between its merge and its record: its scratch folder says so
    Path(f"{out}.parts").mkdir()
    Path(f"{out}.parts", "job.json").write_text(json.dumps({"job_key": "0" * 64}))
    assert tokmod.foreign_output_problem(out) is None
    tokenize_curated(binary, tokenizer.model_path, out, **QUIET)
    assert _same(out, ref) and not Path(f"{out}.parts").exists()


def test_a_scratch_folder_of_the_user_s_is_never_taken(tok, tmp_path):
    tokenizer, _, binary, _, _ = tok
    out = tmp_path / "web"
    scratch = Path(f"{out}.parts")
    scratch.mkdir()
    (scratch / "notes.txt").write_text("mine")
    for force in (False, True):  # the run removes that folder when it ends: --force does not make it Quarry's
        with pytest.raises(ValueError, match=r"web\.parts/ holds files Quarry did not write \(notes\.txt"):
            tokenize_curated(binary, tokenizer.model_path, out, force=force, **QUIET)
    assert (scratch / "notes.txt").read_text() == "mine" and not Path(f"{out}.bin").exists()
    (scratch / "notes.txt").unlink()
    scratch.rmdir()
    scratch.write_text("a file")
    with pytest.raises(ValueError, match="is not a folder"):
        tokenize_curated(binary, tokenizer.model_path, out, force=True, **QUIET)


def test_a_parts_folder_of_the_user_s_is_refused_unless_force(tok, tmp_path):
    tokenizer, _, binary, _, rows = tok
    out = tmp_path / "web"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "part-00000.bin").write_bytes(b"my part")
    with pytest.raises(ValueError, match=r"web/ holds files Quarry did not write \(notes\.txt, part-00000\.bin.*"
                                         r"--force"):
        tokenize_to_parts(binary, tokenizer.model_path, out, LocalExecutor(1), log=lambda m: None)
    assert (out / "part-00000.bin").read_bytes() == b"my part" and sorted(p.name for p in out.iterdir()) == [
        "notes.txt", "part-00000.bin"]
    tokenize_to_parts(binary, tokenizer.model_path, out, LocalExecutor(1), log=lambda m: None, force=True)
    assert PartsDataset(out).num_documents == rows and (out / "notes.txt").read_text() == "mine"
    tokenize_to_parts(binary, tokenizer.model_path, out, LocalExecutor(1), log=lambda m: None)  # now Quarry's
    empty = tmp_path / "empty"
    empty.mkdir()  # an empty folder, or one a killed run left with only its lock, is fine
    (empty / "run.lock").write_text("")
    tokenize_to_parts(binary, tokenizer.model_path, empty, LocalExecutor(1), log=lambda m: None)


def test_the_command_s_force_writes_over_a_file_it_did_not_write(tok, tmp_path, capsys):
    with pytest.raises(SystemExit):
        pretrain_main(["tokenize", "--help"])
    if "--force" not in capsys.readouterr().out:
        pytest.skip("pretrain/commands/tokenize.py has no --force yet (the library's force= is tested above)")
    tokenizer, _, binary, ref, _ = tok
    (tmp_path / "web.bin").write_bytes(b"my own tokens")
    rc = pretrain_main(["tokenize", "--input", str(binary), "--tokenizer", tokenizer.model_path, "--output-prefix",
                        str(tmp_path / "web"), "--no-progress", "--force"])
    assert rc == 0 and _same(tmp_path / "web", ref)
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "notes.txt").write_text("mine")
    argv = ["tokenize", "--input", str(binary), "--tokenizer", tokenizer.model_path, "--output-prefix",
            str(tmp_path / "p"), "--parts", "--no-progress"]
    assert pretrain_main(argv) == 2 and "--force" in capsys.readouterr().err
    assert pretrain_main(argv + ["--force"]) == 0 and (tmp_path / "p" / "notes.txt").read_text() == "mine"
