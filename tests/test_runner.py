"""The runner: conservation at every stage, the manifest contract, resume after SIGKILL."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from curate.executors.local import LocalExecutor
from curate.pipeline import load_pipeline
from curate.runner import run_pipeline
from curate.shards import read_shard, sha256_file

ROOT = Path(__file__).resolve().parents[1]

PIPELINE = """
[pipeline]
name = "runner-test"
output = "{out}"
shard_rows = {shard_rows}

[[sources]]
path = "{sample}/prose.jsonl.gz"
[[sources]]
path = "{sample}/iana.warc.gz"
[[sources]]
path = "{data}/readers/*.warc*"
format = "warc"

[[stages]]
type = "normalize"
[[stages]]
type = "exact_dedup"
"""


# two global steps with map stages between and after them: a kill can land in a read, a plan, a fused
# map step, the removal of an intermediate step, or the final manifest and plan cleanup
MORE_STAGES = """
[[stages]]
type = "c4_quality"
[[stages]]
type = "exact_dedup"
name = "dedup_folded"
lowercase = true
[[stages]]
type = "gopher_repetition"
"""


def write_pipeline(tmp_path, sample_dir, data_dir, out, shard_rows=50, more=""):
    p = tmp_path / f"p-{Path(out).name}.toml"
    p.write_text(PIPELINE.format(out=out, shard_rows=shard_rows, sample=sample_dir, data=data_dir) + more)
    return p


def test_counts_add_up_on_real_data(tmp_path, sample_dir, data_dir):
    out = tmp_path / "out"
    stats = run_pipeline(load_pipeline(write_pipeline(tmp_path, sample_dir, data_dir, out)), LocalExecutor(2), progress=False)
    stages = stats["stages"]
    assert [s["name"] for s in stages] == ["read", "normalize", "exact_dedup"]
    for prev, cur in zip(stages, stages[1:]):
        assert cur["in"] == prev["kept"]
    for s in stages:
        assert s["in"] == s["kept"] + sum(s["dropped"].values())
    assert stages[-1]["dropped"]["exact_duplicate"] >= 15  # the sample's 15 planted copies
    manifest = json.loads((out / "manifest.json").read_text())
    kept_rows = sum(e["rows"] for e in manifest["shards"])
    dropped_rows = sum(e["rows"] for e in manifest["dropped"])
    assert kept_rows == stages[-1]["kept"]
    assert kept_rows + dropped_rows == stages[0]["in"]  # every input document is somewhere
    for e in manifest["shards"] + manifest["dropped"]:
        assert sha256_file(out / e["path"]) == e["sha256"]
        assert read_shard(out / e["path"]).num_rows == e["rows"]
    dropped = pa.concat_tables([read_shard(out / e["path"]) for e in manifest["dropped"]], promote_options="default")
    assert {"id", "text", "source", "url", "stage", "reason"} <= set(dropped.column_names)
    dups = dropped.filter(pc.equal(dropped["reason"], "exact_duplicate"))
    assert all(d is not None for d in dups["duplicate_of"].to_pylist())
    kept = pa.concat_tables([read_shard(out / e["path"]) for e in manifest["shards"]])
    pairs = list(zip(kept["source"].to_pylist(), kept["id"].to_pylist()))
    assert len(pairs) == len(set(pairs))  # ids are unique within a source


def test_bad_pipeline_fails_at_start_naming_the_key(tmp_path, sample_dir, data_dir):
    p = write_pipeline(tmp_path, sample_dir, data_dir, tmp_path / "o")
    p.write_text(p.read_text().replace('type = "normalize"', 'type = "normalize"\nnormalisation = "NFC"'))
    r = subprocess.run([sys.executable, "-m", "curate", "run", str(p)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2
    assert "unknown key 'normalisation'" in r.stderr and "normalization" in r.stderr
    p.write_text(p.read_text().replace('normalisation = "NFC"', '').replace('type = "exact_dedup"', 'type = "exact_dedupe"'))
    r = subprocess.run([sys.executable, "-m", "curate", "run", str(p)], capture_output=True, text=True, cwd=ROOT)
    assert "'exact_dedupe' is not a stage" in r.stderr and "exact_dedup" in r.stderr
    assert not (tmp_path / "o").exists()


def test_input_and_output_flags_replace_the_file(tmp_path, sample_dir, data_dir):
    p = write_pipeline(tmp_path, sample_dir, data_dir, tmp_path / "ignored")
    out = tmp_path / "other"
    r = subprocess.run([sys.executable, "-m", "curate", "run", str(p), "--input", str(sample_dir / "fortunes.jsonl.gz"),
                        "--output", str(out), "--workers", "1", "--quiet"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    stats = json.loads((out / "stats.json").read_text())
    assert stats["stages"][0]["in"] == 250
    assert not (tmp_path / "ignored").exists()
    r = subprocess.run([sys.executable, "-m", "curate", "stats", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert "exact_dedup" in r.stdout and "250" in r.stdout


def _shard_digests(out: Path) -> dict:
    manifest = json.loads((out / "manifest.json").read_text())
    return {e["path"]: e["sha256"] for e in manifest["shards"] + manifest["dropped"]}


@pytest.mark.slow
def test_killed_run_resumes_to_identical_shards(tmp_path, sample_dir, data_dir):
    clean = tmp_path / "clean"
    p = write_pipeline(tmp_path, sample_dir, data_dir, clean, shard_rows=20, more=MORE_STAGES)
    cmd = [sys.executable, "-m", "curate", "run", str(p), "--workers", "2", "--quiet"]
    t0 = time.time()
    subprocess.run(cmd, check=True, cwd=ROOT)
    full = time.time() - t0
    expected = _shard_digests(clean)
    expected_stats = json.loads((clean / "stats.json").read_text())
    strip = lambda st: [{k: v for k, v in s.items() if k != "plan"} for s in st["stages"]]
    for i, frac in enumerate((0.3, 0.5, 0.7, 0.9)):
        out = tmp_path / f"killed{i}"
        p2 = write_pipeline(tmp_path, sample_dir, data_dir, out, shard_rows=20, more=MORE_STAGES)
        proc = subprocess.Popen(cmd[:4] + [str(p2)] + cmd[5:], cwd=ROOT, start_new_session=True)
        time.sleep(full * frac)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        subprocess.run(cmd[:4] + [str(p2)] + cmd[5:], check=True, cwd=ROOT)
        assert _shard_digests(out) == expected
        assert strip(json.loads((out / "stats.json").read_text())) == strip(expected_stats)
        assert not list(out.rglob("*.tmp"))
        assert not [q for q in (out / "steps").rglob("*.arrow")]  # intermediates removed after the resume too
        assert not (out / "plans").exists() and not (out / "run.lock").exists()
