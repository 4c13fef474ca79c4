"""The engine around the stages: the output folder (data/, cleanup, keep_* options), the manifest from task
markers, the output lock, input fingerprints, per-record isolation, and text made valid before it is written."""
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

import curate.shards
import curate.stages
from curate import readers
from curate.executors.local import LocalExecutor
from curate.lock import OutputLock
from curate.pipeline import ConfigError, load_pipeline
from curate.runner import run_pipeline
from curate.shards import read_shard, sha256_file

ROOT = Path(__file__).resolve().parents[1]

PIPELINE = """
[pipeline]
name = "engine-test"
output = "{out}"
shard_rows = 40
workers = {workers}
{extra}

[[sources]]
path = "{inputs}"

[[stages]]
type = "normalize"
{stages}
[[stages]]
type = "exact_dedup"
[[stages]]
type = "c4_quality"
"""


def pipeline_file(tmp_path, out, inputs, extra="", stages="", workers=1, name="p.toml"):
    p = tmp_path / name
    p.write_text(PIPELINE.format(out=out, inputs=inputs, extra=extra, stages=stages, workers=workers))
    return p


def cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "curate", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout)


def digests(out: Path) -> dict:
    m = json.loads((out / "manifest.json").read_text())
    return {e["path"]: (e["rows"], e["sha256"]) for e in m["shards"] + m["dropped"]}


def counts(stats: dict) -> list:
    """The funnel without the plans' timings."""
    return [{k: v for k, v in s.items() if k != "plan"} for s in stats["stages"]]


def shard_files(folder: Path) -> set:
    return {p for p in folder.rglob("*") if p.suffix in (".arrow", ".parquet")}


def test_result_in_data_intermediates_and_plans_removed(tmp_path, sample_dir):
    out = tmp_path / "out"
    stats = run_pipeline(load_pipeline(pipeline_file(tmp_path, out, sample_dir / "prose.jsonl.gz")), LocalExecutor(2),
                         progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    listed = {out / e["path"] for e in manifest["shards"]}
    assert listed == shard_files(out / "data") and listed  # a glob over data/ is the result
    assert {out / e["path"] for e in manifest["dropped"]} == shard_files(out / "dropped")
    assert not shard_files(out / "steps")  # intermediate shards are gone, markers stay
    assert list((out / "steps").rglob("_tasks/*.json"))
    assert not (out / "plans").exists()
    assert not (out / "run.lock").exists()
    assert sum(e["rows"] for e in manifest["shards"]) == stats["stages"][-1]["kept"]
    for e in manifest["shards"] + manifest["dropped"]:
        assert sha256_file(out / e["path"]) == e["sha256"]
        assert read_shard(out / e["path"]).num_rows == e["rows"]

    kept = tmp_path / "kept"
    p = pipeline_file(tmp_path, kept, sample_dir / "prose.jsonl.gz", extra="keep_intermediate = true\nkeep_plans = true")
    assert counts(run_pipeline(load_pipeline(p), LocalExecutor(1), progress=False)) == counts(stats)
    assert digests(kept) == digests(out)
    assert shard_files(kept / "steps/00_read") and shard_files(kept / "steps/01_exact_dedup") == set()
    assert (kept / "plans/01_exact_dedup").is_dir()


def test_keep_dropped_ids_and_none(tmp_path, sample_dir):
    runs = {}
    for mode in ("full", "ids", "none"):
        out = tmp_path / mode
        p = pipeline_file(tmp_path, out, sample_dir / "prose.jsonl.gz", extra=f'keep_dropped = "{mode}"')
        runs[mode] = (run_pipeline(load_pipeline(p), LocalExecutor(1), progress=False), out)
    assert counts(runs["full"][0]) == counts(runs["ids"][0]) == counts(runs["none"][0])  # the same counts whatever is kept
    full, ids, none = (json.loads((runs[m][1] / "manifest.json").read_text()) for m in ("full", "ids", "none"))
    assert full["shards"] == ids["shards"] == none["shards"]
    assert none["dropped"] == [] and not shard_files(runs["none"][1] / "dropped")
    t_full = pa.concat_tables([read_shard(runs["full"][1] / e["path"]) for e in full["dropped"]], promote_options="default")
    t_ids = pa.concat_tables([read_shard(runs["ids"][1] / e["path"]) for e in ids["dropped"]], promote_options="default")
    assert set(t_ids.column_names) == {"id", "url", "stage", "reason", "duplicate_of"}
    assert t_ids.column("id").to_pylist() == t_full.column("id").to_pylist()
    assert t_ids.column("reason").to_pylist() == t_full.column("reason").to_pylist()


def test_resumed_run_reads_only_markers(tmp_path, sample_dir, monkeypatch):
    out = tmp_path / "out"
    p = pipeline_file(tmp_path, out, sample_dir / "prose.jsonl.gz")
    stats = run_pipeline(load_pipeline(p), LocalExecutor(1), progress=False)
    manifest = (out / "manifest.json").read_text()

    def no(*a, **k):
        raise AssertionError("a resumed run with nothing to do must not read or hash a shard")

    monkeypatch.setattr(curate.shards, "sha256_file", no)
    monkeypatch.setattr(curate.shards, "read_shard", no)
    t0 = time.time()
    assert run_pipeline(load_pipeline(p), LocalExecutor(1), progress=False) == stats
    assert time.time() - t0 < 10
    assert (out / "manifest.json").read_text() == manifest


def test_second_run_on_a_folder_in_use_stops_naming_the_first(tmp_path, sample_dir):
    out = tmp_path / "out"
    p = pipeline_file(tmp_path, out, sample_dir / "prose.jsonl.gz")
    out.mkdir()
    with OutputLock(out):
        r = cli("run", p, "--quiet")
        assert r.returncode == 2
        assert f"pid {os.getpid()}" in r.stderr and "in use" in r.stderr
        assert "Traceback" not in r.stderr
    # a lock left by a killed run (its process is gone, so no flock is held) is taken over
    (out / "run.lock").write_text(json.dumps({"pid": 999999, "host": "gone", "started": "then", "command": "x"}))
    r = cli("run", p)
    assert r.returncode == 0, r.stderr
    assert "taking over the lock" in r.stdout and not (out / "run.lock").exists()


@pytest.mark.slow
def test_two_staggered_runs_one_waits_out_the_other(tmp_path, sample_dir):
    out = tmp_path / "out"
    p = pipeline_file(tmp_path, out, sample_dir / "prose.jsonl.gz", workers=2)
    first = subprocess.Popen([sys.executable, "-m", "curate", "run", str(p), "--quiet"], cwd=ROOT,
                             stderr=subprocess.PIPE, text=True)
    for _ in range(200):  # wait until the first run holds the folder
        if (out / "run.lock").exists() and (out / "run.lock").read_text().strip():
            break
        time.sleep(0.05)
    second = cli("run", p, "--quiet")
    assert first.wait(timeout=300) == 0, first.stderr.read()
    if second.returncode != 0:  # the first still ran: refused, naming it
        assert second.returncode == 2 and f"pid {first.pid}" in second.stderr
    clean = tmp_path / "clean"
    run_pipeline(load_pipeline(pipeline_file(tmp_path, clean, sample_dir / "prose.jsonl.gz", name="c.toml")),
                 LocalExecutor(1), progress=False)
    assert digests(out) == digests(clean)


@pytest.mark.slow
def test_changed_input_stops_the_rerun_and_allow_redoes_it(tmp_path, sample_dir):
    src = tmp_path / "in"
    src.mkdir()
    lines = gzip.open(sample_dir / "prose.jsonl.gz", "rt").read().splitlines()
    (src / "a.jsonl").write_text("\n".join(lines[:150]) + "\n")
    (src / "b.jsonl").write_text("\n".join(lines[150:300]) + "\n")
    out = tmp_path / "out"
    p = pipeline_file(tmp_path, out, src / "*.jsonl")
    assert cli("run", p, "--quiet").returncode == 0
    run_json = json.loads((out / "run.json").read_text())
    assert set(run_json["fingerprints"]) == {str(src / "a.jsonl"), str(src / "b.jsonl")}
    assert {"size", "mtime_ns", "edges_sha256"} <= set(run_json["fingerprints"][str(src / "b.jsonl")])

    (src / "b.jsonl").write_text("\n".join(lines[150:280] + lines[:5]) + "\n")  # edited: fewer docs, 5 copies
    r = cli("run", p, "--quiet")
    assert r.returncode == 2
    assert "changed" in r.stderr and str(src / "b.jsonl") in r.stderr and str(src / "a.jsonl") not in r.stderr
    assert "--allow-changed-inputs" in r.stderr
    r = cli("run", p, "--quiet", "--allow-changed-inputs")
    assert r.returncode == 0, r.stderr
    fresh = tmp_path / "fresh"
    assert cli("run", p, "--quiet", "--output", fresh).returncode == 0
    assert digests(out) == digests(fresh)
    assert counts(json.loads((out / "stats.json").read_text())) == counts(json.loads((fresh / "stats.json").read_text()))
    assert {q.relative_to(out) for q in shard_files(out / "data")} == {q.relative_to(fresh) for q in shard_files(fresh / "data")}
    assert cli("run", p, "--quiet").returncode == 0  # and now the folder matches its inputs again


def test_output_that_is_a_file_or_an_old_folder_is_refused(tmp_path, sample_dir):
    f = tmp_path / "afile"
    f.write_text("x")
    r = cli("run", pipeline_file(tmp_path, f, sample_dir / "prose.jsonl.gz"), "--quiet")
    assert r.returncode == 2 and "is a file" in r.stderr and "Traceback" not in r.stderr
    r = cli("run", pipeline_file(tmp_path, f / "sub", sample_dir / "prose.jsonl.gz"), "--quiet")
    assert r.returncode == 2 and "is a file" in r.stderr
    old = tmp_path / "old"
    old.mkdir()
    (old / "run.json").write_text(json.dumps({"stages": [], "inputs": [], "format": "arrow"}))
    r = cli("run", pipeline_file(tmp_path, old, sample_dir / "prose.jsonl.gz"), "--quiet")
    assert r.returncode == 2 and "earlier version" in r.stderr


def _with_stage(monkeypatch, type_):
    monkeypatch.setitem(curate.stages.STAGES, type_, {
        "boom": "tests.engine_stages:Boom", "always_boom": "tests.engine_stages:AlwaysBoom",
        "disk_full": "tests.engine_stages:DiskFull"}[type_])


def test_a_stage_raising_on_one_document_sets_it_aside(tmp_path, sample_dir, monkeypatch):
    _with_stage(monkeypatch, "boom")
    src = tmp_path / "in.jsonl"
    docs = [json.loads(x) for x in gzip.open(sample_dir / "prose.jsonl.gz", "rt").read().splitlines()[:120]]
    for i in (3, 50, 51):
        docs[i]["text"] += " BOOM"
    src.write_text("".join(json.dumps(d) + "\n" for d in docs))
    out = tmp_path / "out"
    p = pipeline_file(tmp_path, out, src, stages='[[stages]]\ntype = "boom"')
    stats = run_pipeline(load_pipeline(p), LocalExecutor(1), progress=False)
    boom = next(s for s in stats["stages"] if s["name"] == "boom")
    assert boom["dropped"] == {"stage_error": 3} and boom["kept"] == boom["in"] - 3
    assert boom["errors"] == {"ValueError: cannot handle BOOM": 3}
    manifest = json.loads((out / "manifest.json").read_text())
    dropped = pa.concat_tables([read_shard(out / e["path"]) for e in manifest["dropped"]], promote_options="default")
    bad = dropped.filter(pa.compute.equal(dropped["reason"], "stage_error")).to_pylist()
    assert sorted(r["id"] for r in bad) == sorted(docs[i].get("id", f"in.jsonl:{i + 1}") for i in (3, 50, 51))
    assert all(r["stage"] == "boom" and r["error"] == "ValueError: cannot handle BOOM" for r in bad)


@pytest.mark.parametrize("type_,says", [("always_boom", "raised on every document"),
                                        ("disk_full", "No space left on device"),
                                        ("buggy_plan", "ValueError: a bug in a plan")])
def test_an_error_not_about_one_document_stops_the_run_clearly(tmp_path, sample_dir, type_, says):
    out = tmp_path / "out"
    p = pipeline_file(tmp_path, out, sample_dir / "prose.jsonl.gz", stages=f'[[stages]]\ntype = "{type_}"')
    code = (f"import curate.stages as s; s.STAGES[{type_!r}] = 'tests.engine_stages:" +
            {"always_boom": "AlwaysBoom", "disk_full": "DiskFull", "buggy_plan": "BuggyPlan"}[type_] +
            f"'; from curate.cli import main; raise SystemExit(main(['run', {str(p)!r}, '--quiet']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 1
    assert says in r.stderr and "rerun the same command" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.splitlines()) <= 3
    if "traceback in " in r.stderr:  # an unexpected error: its traceback went to a file
        path = Path(r.stderr.split("traceback in ")[1].split(";")[0])
        assert "Traceback" in path.read_text()
        path.unlink()
    assert not (out / "manifest.json").exists() and not (out / "run.lock").exists()


def test_lone_surrogates_are_replaced_and_counted(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "text": "left \\ud800 right, a plain document with words"}\n'
                   '{"id": "b", "text": "a second document, nothing odd in it at all"}\n')
    out = tmp_path / "out"
    p = tmp_path / "p.toml"
    p.write_text(f'[pipeline]\noutput = "{out}"\n[[sources]]\npath = "{src}"\n')
    r = cli("run", p, "--quiet")
    assert r.returncode == 0, r.stderr
    stats = json.loads((out / "stats.json").read_text())
    assert stats["stages"][0]["counters"]["surrogates_replaced"] == 1
    kept = read_shard(out / json.loads((out / "manifest.json").read_text())["shards"][0]["path"])
    assert kept.column("text").to_pylist()[0] == "left \ufffd right, a plain document with words"


def test_reader_counters_are_summed_into_the_read_stage(tmp_path, sample_dir, monkeypatch):
    real = readers.read_split

    def counting(split, **kw):
        for item in real(split, **kw):
            yield item
            if item[0] == "doc":
                yield ("count", "docs_seen_twice", 2)

    monkeypatch.setattr(readers, "read_split", counting)
    out = tmp_path / "out"
    stats = run_pipeline(load_pipeline(pipeline_file(tmp_path, out, sample_dir / "prose.jsonl.gz")),
                         LocalExecutor(1), progress=False)
    read = stats["stages"][0]
    assert read["counters"] == {"docs_seen_twice": 2 * read["kept"]}


def test_bad_keep_dropped_fails_at_start(tmp_path, sample_dir):
    p = pipeline_file(tmp_path, tmp_path / "o", sample_dir / "prose.jsonl.gz", extra='keep_dropped = "some"')
    with pytest.raises(ConfigError, match="keep_dropped.*full, ids, none"):
        load_pipeline(p)


@pytest.mark.parametrize("stage, message", [
    ('[[stages]]\ntype = "langid"\nthreshold = nan', r"threshold = nan: expected a finite number"),
    ('[[stages]]\ntype = "gopher_quality"\nmax_symbol_word_ratio = inf', r"max_symbol_word_ratio = inf: expected a finite"),
    ('[[stages]]\ntype = "langid"\nlanguages = [1]', r"languages = \[1\]: expected list\[str\]"),
])
def test_nonsense_stage_values_fail_at_start_naming_what_to_change(tmp_path, sample_dir, stage, message):
    p = pipeline_file(tmp_path, tmp_path / "o", sample_dir / "prose.jsonl.gz", stages=stage)
    with pytest.raises(ConfigError, match=message):
        load_pipeline(p)


def test_a_step_redone_after_its_inputs_and_plan_were_removed_gives_the_same_shards(tmp_path, sample_dir):
    out = tmp_path / "out"
    p = pipeline_file(tmp_path, out, sample_dir / "prose.jsonl.gz")
    stats = run_pipeline(load_pipeline(p), LocalExecutor(1), progress=False)
    expected = digests(out)
    for marker in (out / "steps/01_exact_dedup/_tasks").glob("*.json"):
        marker.unlink()  # as if those tasks never ran; their inputs (00_read shards) and the plan are gone
    assert not shard_files(out / "steps/00_read") and not (out / "plans").exists()
    again = run_pipeline(load_pipeline(p), LocalExecutor(1), progress=False)
    assert counts(again) == counts(stats)
    assert digests(out) == expected
    assert not shard_files(out / "steps") and not (out / "plans").exists()


def test_one_read_task_per_split_every_document_once(tmp_path, sample_dir, monkeypatch):
    """The runner's side of input splitting: whatever splits ``readers.plan_splits`` makes, each is one read
    task, and the kept documents are those of an unsplit run (here a file cut in three ranges of documents)."""
    whole = tmp_path / "whole"
    stats = run_pipeline(load_pipeline(pipeline_file(tmp_path, whole, sample_dir / "prose.jsonl.gz", name="w.toml")),
                         LocalExecutor(1), progress=False)
    real_plan, real_read = readers.plan_splits, readers.read_split

    def plan_splits(path, fmt, *, target_bytes, **kw):
        (whole,) = real_plan(path, fmt, target_bytes=1 << 40)
        return [{"whole": whole, "part": k, "parts": 3} for k in range(3)]

    def read_split(split, **kw):
        docs = 0
        for item in real_read(split["whole"], **kw):
            if item[0] == "doc":
                docs += 1
                if min((docs - 1) // 150, split["parts"] - 1) != split["part"]:
                    continue
            elif split["part"] != 0:
                continue
            yield item

    monkeypatch.setattr(readers, "plan_splits", plan_splits)
    monkeypatch.setattr(readers, "read_split", read_split)
    out = tmp_path / "split"
    split_stats = run_pipeline(load_pipeline(pipeline_file(tmp_path, out, sample_dir / "prose.jsonl.gz")),
                               LocalExecutor(1), progress=False)  # in-process: the patched reader is used
    assert sorted(p.stem for p in (out / "steps/00_read/_tasks").glob("*.json")) == [
        "src00000-0000", "src00000-0001", "src00000-0002"]
    assert counts(split_stats) == counts(stats)
    ids = lambda o: sorted(i for e in json.loads((o / "manifest.json").read_text())["shards"]
                           for i in read_shard(o / e["path"]).column("id").to_pylist())
    assert ids(out) == ids(whole)
    assert json.loads((out / "steps/00_read/_splits.json").read_text())[str(sample_dir / "prose.jsonl.gz")]["splits"][2]["part"] == 2


def test_matched_paths_that_are_not_files_are_named_not_silently_skipped(tmp_path, sample_dir):
    import os

    src = tmp_path / "in"
    src.mkdir()
    (src / "real.jsonl").write_text('{"text": "one real document of plain prose."}\n')
    (src / "folder.jsonl").mkdir()
    os.mkfifo(src / "pipe.jsonl")  # reading it would block the run forever
    (src / "gone.jsonl").symlink_to(tmp_path / "nowhere")
    (src / "sub").mkdir()  # a plain directory is no surprise under a glob, and is not named
    p = pipeline_file(tmp_path, tmp_path / "out", src / "*")
    r = cli("run", p, "--workers", "1")
    assert r.returncode == 0, r.stderr
    warning = next(line for line in r.stderr.splitlines() if "not files" in line)
    assert "3 matched path(s)" in warning
    for name, why in [("folder.jsonl", "a folder"), ("pipe.jsonl", "a named pipe"), ("gone.jsonl", "broken")]:
        assert name in warning and why in warning
    assert "sub'" not in warning
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["stages"][0]["in"] == 1


@pytest.mark.parametrize("content", [b"{bad", b"[1, 2]", b'{"stages": [{"name": 3}]}', b"\xff\xfe"])
def test_curate_stats_on_a_damaged_stats_file_says_so_without_a_traceback(tmp_path, content):
    (tmp_path / "stats.json").write_bytes(content)
    r = cli("stats", tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "is not a curate run's stats" in r.stderr and "stats.json" in r.stderr


def test_damaged_task_records_are_redone_and_a_damaged_run_file_is_refused(tmp_path, sample_dir):
    out = tmp_path / "out"
    p = pipeline_file(tmp_path, out, sample_dir / "prose.jsonl.gz")
    stats = run_pipeline(load_pipeline(p), LocalExecutor(1), progress=False)
    expected = digests(out)
    outside = tmp_path / "precious.txt"
    outside.write_text("not curate's")
    markers = sorted((out / "steps").glob("*/_tasks/*.json"))
    markers[0].write_text("{not json")  # as a disk error would leave it: the task is redone
    markers[-1].write_text(json.dumps({"key": "stale", "outputs": [{"path": str(outside)}, {"path": "../../precious.txt"}]}))
    (out / "steps/00_read/_splits.json").write_text("[")
    assert counts(run_pipeline(load_pipeline(p), LocalExecutor(1), progress=False)) == counts(stats)
    assert digests(out) == expected
    assert outside.read_text() == "not curate's"  # a marker cannot make curate delete files outside OUT
    assert all(json.loads(m.read_text())["key"] != "stale" for m in markers)  # both tasks were redone
    (out / "run.json").write_text("[]")
    with pytest.raises(ConfigError, match="run.json is damaged"):
        run_pipeline(load_pipeline(p), LocalExecutor(1), progress=False)
