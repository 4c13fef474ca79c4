"""A folder records the curate code that started it; a rerun with other code (an upgrade, an edit) says that the
folder may hold output of both versions instead of resuming silently."""
import json

from curate.code_fingerprint import code_sha256
from test_engine import cli, pipeline_file


def test_the_code_is_recorded_and_a_rerun_with_other_code_is_told(tmp_path, sample_dir):
    out = tmp_path / "out"
    p = pipeline_file(tmp_path, out, sample_dir / "prose.jsonl.gz")
    first = cli("run", p, "--quiet")
    assert first.returncode == 0, first.stderr
    record = json.loads((out / "run.json").read_text())
    assert record["code"] == code_sha256()
    again = cli("run", p, "--quiet")  # the same code: resumed without a word about it
    assert again.returncode == 0 and "other curate code" not in again.stderr

    record["code"] = "0" * 64  # as an older curate would have left it
    (out / "run.json").write_text(json.dumps(record))
    other = cli("run", p, "--quiet")
    assert other.returncode == 0, other.stderr
    assert "started by other curate code" in other.stderr and "new --output" in other.stderr
    assert json.loads((out / "run.json").read_text())["code"] == "0" * 64  # still names the code that started it

    del record["code"]  # a folder of a curate from before the record
    (out / "run.json").write_text(json.dumps(record))
    older = cli("run", p, "--quiet")
    assert older.returncode == 0 and "started by other curate code" in older.stderr


def test_the_fingerprint_follows_the_package_files(tmp_path, monkeypatch):
    import curate.code_fingerprint as cf

    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "model.json").write_text("{}")
    (pkg / "__pycache__").mkdir()
    monkeypatch.setattr(cf, "PACKAGE", pkg)
    cf.code_sha256.cache_clear()
    try:
        before = cf.code_sha256()
        (pkg / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")  # compiled files do not count
        cf.code_sha256.cache_clear()
        assert cf.code_sha256() == before
        (pkg / "sub" / "model.json").write_text('{"w": 1}')  # a shipped model does
        cf.code_sha256.cache_clear()
        assert cf.code_sha256() != before
    finally:
        cf.code_sha256.cache_clear()
