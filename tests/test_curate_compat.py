"""A curation folder written by an earlier curate (tests/data/compat/curated/, from commit 16b8117 with
tests/data/compat/pipeline.toml) is still read, and a rerun of the same pipeline resumes it as finished:
nothing redone, the same manifest.json and stats.json byte for byte. The folder holds no absolute path
(shards, markers and run.json name files relative to the folder or as the pipeline gave them), so the
test runs from any checkout."""
import json
import os
import shutil
from pathlib import Path

from curate.cli import main as curate_main
from curate.shards import manifest_shards, read_json, read_shard, sha256_file

COMPAT = Path(__file__).parent / "data" / "compat"
CURATED = COMPAT / "curated"


def test_an_earlier_folder_is_read():
    shards = manifest_shards(CURATED)
    assert [p.name for p in shards] == ["src00000-0000-00000.arrow", "src00000-0000-00001.arrow",
                                        "src00001-0000-00000.arrow"]
    assert sum(read_shard(p).num_rows for p in shards) == 7
    entries = read_json(CURATED / "manifest.json")
    for which in ("shards", "dropped"):
        for entry, path in zip(entries[which], manifest_shards(CURATED, which)):
            assert sha256_file(path) == entry["sha256"]
            assert read_shard(path).num_rows == entry["rows"]
    assert [p.parent.name + "/" + p.name for p in manifest_shards(CURATED, "dropped")] == [
        "00_read/normalize-src00000-0000-00000.arrow", "00_read/read-src00000-0000.arrow",
        "01_exact_dedup/exact_dedup-src00000-0000-00000.arrow", "01_exact_dedup/exact_dedup-src00000-0000-00001.arrow",
        "01_exact_dedup/exact_dedup-src00000-0000-00002.arrow"]


def test_curate_stats_reads_an_earlier_folder(capsys):
    assert curate_main(["stats", str(CURATED)]) == 0
    out = capsys.readouterr().out
    assert "exact_dedup  10     7        3    70.0  exact_duplicate=3" in out
    assert out.rstrip().endswith("14 input documents -> 7 kept (50.0%)")


def test_a_rerun_resumes_an_earlier_folder_as_finished(tmp_path, monkeypatch):
    work = tmp_path / "compat"
    shutil.copytree(COMPAT, work)
    monkeypatch.chdir(work)  # the pipeline's paths are relative to its folder
    fingerprints = read_json(work / "curated" / "run.json")["fingerprints"]
    for path, fp in fingerprints.items():  # a checkout gives files the time of the checkout
        os.utime(path, ns=(fp["mtime_ns"], fp["mtime_ns"]))
    files = sorted(p for p in (work / "curated").rglob("*") if p.is_file())
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in files}

    assert curate_main(["run", "pipeline.toml", "--quiet"]) == 0

    after = sorted(p for p in (work / "curated").rglob("*") if p.is_file())
    assert after == files  # no file added or removed
    for p in files:
        if p.name in ("manifest.json", "stats.json"):  # written again at the end of every run: the same bytes
            assert p.read_bytes() == before[p][1], p
        else:  # markers, shards, run.json: not written again (nothing was redone)
            assert (p.stat().st_mtime_ns, p.read_bytes()) == before[p], p
    stats = json.loads((work / "curated" / "stats.json").read_text())
    assert [s["name"] for s in stats["stages"]] == ["read", "normalize", "exact_dedup"]
