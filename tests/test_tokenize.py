"""`pretrain tokenize`: curated shards to .bin/.idx, in parallel, resumable, byte-identical."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pretrain.cli import main as pretrain_main
from pretrain.data.indexed import IndexedDataset
from pretrain.data.tokenize import tokenize_curated
from pretrain.data.tokenizer import train_tokenizer

ROOT = Path(__file__).resolve().parents[1]
import curated  # tests/data/pretrain/curated.py (pytest's pythonpath)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokenize")
    docs = [d["text"] for d in curated.prose_docs()]
    texts = docs[:150]
    texts.insert(7, None)  # not a string: an encode error, counted and skipped
    texts.insert(20, "")  # empty: counted and skipped
    cur = curated.make_curated(root / "curated", texts, shards=3, batch_rows=16)
    tok = train_tokenizer(cur, 700, root / "tok.model", max_bytes=600_000, threads=2)
    return root, cur, tok, [t for t in texts if t]


def test_documents_end_with_eod_and_decode_back(setup):
    root, cur, tok, good = setup
    stats = tokenize_curated(cur, tok.model_path, root / "out" / "web", workers=1, progress=False)
    assert (stats["documents"], stats["errors"], stats["empty"], stats["rows"]) == (len(good), 1, 1, len(good) + 2)
    # the two skipped documents are named: shard, batch, row in it, id, why (rows 7 and 20 of 16-row batches)
    assert [(Path(e["shard"]).name, e["batch"], e["row"], e["id"], e["why"]) for e in stats["skipped"]] == [
        ("part-00000.arrow", 0, 7, "doc0-7", "encode_error"), ("part-00000.arrow", 1, 4, "doc0-20", "empty")]
    ds = IndexedDataset(root / "out" / "web")
    assert ds.dtype == np.uint16 and len(ds) == ds.num_documents == len(good)
    assert stats["tokens"] == ds.num_tokens == len(ds.tokens)
    for i, text in enumerate(good):
        seq = ds[i]
        assert seq[-1] == tok.eod_id and tok.eod_id not in seq[:-1]
        assert tok.decode(seq[:-1]) == text
    assert not (root / "out" / "web.parts").exists()
    again = tokenize_curated(cur, tok.model_path, root / "out" / "web", workers=1, progress=False)
    assert again["documents"] == stats["documents"]  # up to date: nothing redone


def test_two_workers_and_parquet_give_the_same_bytes(setup, tmp_path, monkeypatch):
    root, cur, tok, good = setup
    one = root / "out" / "one"
    tokenize_curated(cur, tok.model_path, one, workers=1, progress=False)
    import pretrain.data.tokenize as tokenize_module

    monkeypatch.setattr(tokenize_module, "CHUNK_DOCS", 3)  # a task encoded and written in several pieces
    tokenize_curated(cur, tok.model_path, tmp_path / "chunked", workers=1, progress=False)
    monkeypatch.undo()
    two = tmp_path / "two"
    tokenize_curated(cur, tok.model_path, two, workers=2, progress=False)
    pq = curated.make_curated(tmp_path / "pq", [t for t in good], shards=2, fmt="parquet")
    tokenize_curated(pq, tok.model_path, tmp_path / "pq_out", workers=1, progress=False)
    for ext in (".bin", ".idx"):
        assert Path(f"{one}{ext}").read_bytes() == Path(f"{two}{ext}").read_bytes()
        assert Path(f"{one}{ext}").read_bytes() == Path(f"{tmp_path}/pq_out{ext}").read_bytes()
        assert Path(f"{one}{ext}").read_bytes() == Path(f"{tmp_path}/chunked{ext}").read_bytes()


@pytest.mark.timeout(180)
def test_killed_run_resumes_to_identical_files(setup, tmp_path):
    root, cur, tok, good = setup
    big = curated.make_curated(tmp_path / "big", good * 2, shards=4, batch_rows=6)  # ~50 tasks
    clean = tmp_path / "clean"
    tokenize_curated(big, tok.model_path, clean, workers=1, progress=False)
    prefix = tmp_path / "killed"
    cmd = [sys.executable, "-m", "pretrain", "tokenize", "--input", str(big), "--tokenizer", tok.model_path,
           "--output-prefix", str(prefix), "--workers", "1", "--no-progress"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parts = Path(f"{prefix}.parts")
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if parts.is_dir() and len([p for p in parts.glob("0*.json")]) >= 3:
            break
        time.sleep(0.005)
    assert proc.poll() is None, "tokenize finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = len(list(parts.glob("0*.json")))
    assert 3 <= done and not Path(f"{prefix}.idx").exists()
    rerun = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    assert f"resuming: {done} of" in rerun.stderr
    for ext in (".bin", ".idx"):
        assert Path(f"{prefix}{ext}").read_bytes() == Path(f"{clean}{ext}").read_bytes()
    assert not parts.exists()


def test_bad_input_is_reported(setup, tmp_path, capsys):
    root, cur, tok, good = setup
    (tmp_path / "empty").mkdir()
    rc = pretrain_main(["tokenize", "--input", str(tmp_path / "empty"), "--tokenizer", tok.model_path,
                        "--output-prefix", str(tmp_path / "x")])
    assert rc == 2 and "no manifest.json" in capsys.readouterr().err
    rc = pretrain_main(["tokenize", "--input", str(cur), "--tokenizer", str(tmp_path / "none.model"),
                        "--output-prefix", str(tmp_path / "x")])
    assert rc == 2 and "none.model" in capsys.readouterr().err
    rc = pretrain_main(["tokenize", "--input", str(cur), "--tokenizer", tok.model_path, "--text-column", "body",
                        "--output-prefix", str(tmp_path / "x"), "--no-progress"])
    assert rc == 2 and "no 'body' column" in capsys.readouterr().err
    rc = pretrain_main(["tokenize", "--input", str(cur), "--tokenizer", tok.model_path,
                        "--output-prefix", str(tmp_path / "ok"), "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0 and "1 encode errors, 1 empty" in out
    assert "part-00000.arrow batch 0 row 7 (id doc0-7): encode_error" in out
    assert "part-00000.arrow batch 1 row 4 (id doc0-20): empty" in out
    assert os.path.isfile(tmp_path / "ok.bin")
    record = json.loads(Path(f"{tmp_path / 'ok'}.json").read_text())
    assert [e["id"] for e in record["stats"]["skipped"]] == ["doc0-7", "doc0-20"]


@pytest.mark.parametrize("manifest, message", [
    ('{"shards": [{"path": "../../../etc/passwd"}], "dropped": []}', "not a path inside"),
    ('{"shards": [{"path": "/etc/passwd"}], "dropped": []}', "not a path inside"),
    ('{"shards": 5}', "not a curation manifest"),
    ("not json", "not a curation manifest"),
    ('{"shards": [{"rows": 3}]}', "not a curation manifest"),
])
def test_a_crafted_or_damaged_manifest_is_refused_naming_it(setup, tmp_path, capsys, manifest, message):
    import shutil

    root, cur, tok, good = setup
    copy = tmp_path / "cur"
    shutil.copytree(cur, copy)
    (copy / "manifest.json").write_text(manifest)
    rc = pretrain_main(["tokenize", "--input", str(copy), "--tokenizer", tok.model_path,
                        "--output-prefix", str(tmp_path / "x"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "manifest.json" in err
    assert not (tmp_path / "x.bin").exists()


_TOKENIZE_IN_A_CHILD = "import sys; from pretrain.cli import main; sys.exit(main(sys.argv[1:]))"


def test_a_crafted_shard_whose_manifest_matches_is_refused_naming_it(setup, tmp_path):
    """A shard whose text offsets point past its data, with a manifest whose sha256 and rows were made to match
    (a curation folder handed over by a hostile user): pyarrow read outside its memory (SystemError deep in
    to_pylist, or a segmentation fault). Now each command that reads shards stops at once naming the shard.
    Run in a child, so a crash fails the test only."""
    import hashlib
    import json
    import shutil

    import pyarrow as pa
    import pyarrow.ipc as ipc

    root, cur, tok, good = setup
    copy = tmp_path / "cur"
    shutil.copytree(cur, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    entry = manifest["shards"][0]
    path = copy / entry["path"]
    with ipc.open_file(str(path)) as reader:
        batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
    b = batches[0]
    k = b.schema.names.index("text")
    col = b.column(k)
    offsets = np.frombuffer(col.buffers()[1], dtype=np.int64 if pa.types.is_large_string(col.type) else np.int32).copy()
    offsets[len(offsets) // 2] = 2_000_000_000  # far past the data (the last offset still in bounds)
    bad = pa.Array.from_buffers(col.type, len(col), [col.buffers()[0], pa.py_buffer(offsets.tobytes()), col.buffers()[2]],
                                offset=col.offset)
    batches[0] = pa.RecordBatch.from_arrays([bad if i == k else b.column(i) for i in range(b.num_columns)], schema=b.schema)
    with pa.OSFile(str(path), "wb") as f, ipc.new_file(f, b.schema) as w:
        for batch in batches:
            w.write_batch(batch)
    entry["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (copy / "manifest.json").write_text(json.dumps(manifest))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for args in (["tokenize", "--input", str(copy), "--tokenizer", tok.model_path, "--output-prefix",
                  str(tmp_path / "x"), "--no-progress"],
                 ["tokenizer", "train", "--input", str(copy), "--vocab-size", "300", "--output",
                  str(tmp_path / "t.model")]):
        r = subprocess.run([sys.executable, "-c", _TOKENIZE_IN_A_CHILD, *args], capture_output=True, text=True,
                           env=env, timeout=300)
        assert r.returncode == 2, (args[0], r.returncode, r.stderr[-1500:])
        assert entry["path"] in r.stderr and "damaged" in r.stderr and "Traceback" not in r.stderr, r.stderr[-1500:]
    assert not (tmp_path / "x.bin").exists() and not (tmp_path / "t.model").exists()


def test_a_damaged_shard_is_named(setup, tmp_path, capsys):
    import json
    import shutil

    root, cur, tok, good = setup
    copy = tmp_path / "cur"
    shutil.copytree(cur, copy)
    first = json.loads((copy / "manifest.json").read_text())["shards"][0]["path"]
    (copy / first).write_bytes(b"not arrow at all")
    rc = pretrain_main(["tokenize", "--input", str(copy), "--tokenizer", tok.model_path,
                        "--output-prefix", str(tmp_path / "x"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and first in err and "damaged" in err
