"""`pretrain tokenize --parts / --executor ray / --merge`: a dataset of parts that reads as one dataset, resumes,
survives a lost Ray node, and merges into the bytes of a one-process run; manifests that lie are refused."""
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from curate.executors.local import LocalExecutor
from pretrain.cli import main as pretrain_main
from pretrain.data.blend import build_blend_splits
from pretrain.data.gpt_dataset import build_gpt_dataset
from pretrain.data.indexed import IndexedDataset
from pretrain.data.parts import PartsDataset, merge_parts, open_indexed
from pretrain.data.tokenize import tokenize_curated
from pretrain.data.tokenize_parts import tokenize_to_parts
from pretrain.data.tokenizer import train_tokenizer

ROOT = Path(__file__).resolve().parents[1]
import curated  # tests/data/pretrain/curated.py (pytest's pythonpath)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("parts")
    texts = [d["text"] for d in curated.prose_docs()][:160]
    texts.insert(5, "")  # empty: counted and skipped in both modes
    cur = curated.make_curated(root / "curated", texts, shards=6, batch_rows=9)
    tok = train_tokenizer(cur, 700, root / "tok.model", max_bytes=600_000, threads=2)
    one = root / "one"
    tokenize_curated(cur, tok.model_path, one, workers=1, progress=False)
    return root, cur, tok, one


def one_stats_skipped(prefix) -> list:
    """The skipped documents the one-process output's record names."""
    return json.loads(Path(f"{prefix}.json").read_text())["stats"]["skipped"]


def same_files(a, b) -> bool:
    return all(Path(f"{a}{e}").read_bytes() == Path(f"{b}{e}").read_bytes() for e in (".bin", ".idx"))


def part_bytes(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("part-*"))}


def test_parts_read_as_the_one_process_file_and_merge_to_its_bytes(setup, tmp_path):
    root, cur, tok, one = setup
    stats = tokenize_to_parts(cur, tok.model_path, tmp_path / "p", LocalExecutor(1), part_bytes=1, log=lambda m: None)
    assert stats["parts"] == 6 and stats["empty"] == 1
    assert [(e["why"], e["id"]) for e in stats["skipped"]] == [("empty", one_stats_skipped(one)[0]["id"])]
    record = json.loads((tmp_path / "p" / "parts.json").read_text())
    assert [p["name"] for p in record["parts"]] == [f"part-{i:05d}" for i in range(6)]
    ds, ref = PartsDataset(tmp_path / "p"), IndexedDataset(one)
    assert (ds.num_documents, ds.num_tokens) == (ref.num_documents, ref.num_tokens) == (
        record["documents"], record["tokens"])
    for name in ("sequence_lengths", "sequence_pointers", "document_indices"):
        assert np.array_equal(getattr(ds, name), getattr(ref, name)), name
    assert all(np.array_equal(ds[i], ref[i]) for i in range(0, len(ref), 7))
    assert np.array_equal(ds.document(len(ref) - 1), ref.document(len(ref) - 1))
    merge_parts(tmp_path / "p", tmp_path / "merged")
    assert same_files(tmp_path / "merged", one)
    # two workers and bigger parts: the same documents, other part boundaries
    with _local(2) as ex:
        tokenize_to_parts(cur, tok.model_path, tmp_path / "p2", ex, part_bytes=250_000, merge=True,
                          log=lambda m: None)
    assert 1 < len(PartsDataset(tmp_path / "p2").record["parts"]) < 6
    assert same_files(tmp_path / "p2", one)  # --merge: PREFIX.bin/.idx


class _local:
    def __init__(self, workers):
        self.ex = LocalExecutor(workers)

    def __enter__(self):
        return self.ex

    def __exit__(self, *exc):
        self.ex.close()


def test_samples_over_parts_equal_samples_over_the_merged_file(setup, tmp_path, monkeypatch):
    root, cur, tok, one = setup
    tokenize_to_parts(cur, tok.model_path, tmp_path / "p", LocalExecutor(1), part_bytes=1, log=lambda m: None)
    parts, merged = PartsDataset(tmp_path / "p"), IndexedDataset(one)
    for order in ("stable", "megatron"):
        a = build_gpt_dataset(parts, "969,30,1", "train", 300, 32, 1234, tmp_path / f"c-{order}", order=order)
        b = build_gpt_dataset(merged, "969,30,1", "train", 300, 32, 1234, None, order=order)
        assert len(a) == len(b) and np.array_equal(np.asarray(a.shuffle_index), b.shuffle_index)
        assert np.array_equal(a.get_batch(np.arange(len(a))), b.get_batch(np.arange(len(b))))
        assert all(np.array_equal(a[i], b[i]) for i in range(0, len(a), 5))
    a = build_gpt_dataset(parts, "969,30,1", "train", 50, 32, 1234, tmp_path / "c-stable", order="stable")
    assert np.array_equal(a[3], build_gpt_dataset(merged, "969,30,1", "train", 50, 32, 1234)[3])  # cached load
    # a blend spec naming the folder reads it as one dataset, beside a plain prefix
    spec = tmp_path / "blend.toml"
    spec.write_text(f'[[datasets]]\nname = "web"\nprefix = "{tmp_path / "p"}"\nweight = 0.6\n'
                    f'[[datasets]]\nname = "books"\nprefix = "{one}"\nweight = 0.4\n')
    ref = tmp_path / "ref.toml"
    ref.write_text(spec.read_text().replace(str(tmp_path / "p"), str(one)))
    import pretrain.data.blend

    with monkeypatch.context() as m:  # both blends read one curated folder's documents twice, which is refused
        m.setattr(pretrain.data.blend, "check_distinct_datasets", lambda *a: None)
        x = build_blend_splits(spec, 32, (200, 0, 0), 7, tmp_path / "bc")[0]
        y = build_blend_splits(ref, 32, (200, 0, 0), 7, None)[0]
        assert pretrain_main(["blend", "inspect", str(spec)]) == 0
    assert np.array_equal(x.get_batch(np.arange(len(x))), y.get_batch(np.arange(len(y))))
    assert pretrain_main(["blend", "inspect", str(spec)]) == 2  # as a user would run it


def test_a_killed_run_resumes_and_a_second_run_is_locked_out(setup, tmp_path, capsys):
    root, cur, tok, one = setup

    class Dies(LocalExecutor):  # the driver dies after two tasks finished
        def map(self, fn, items, desc=None, on_result=None):
            seen = []

            def hook(r):
                on_result(r)
                seen.append(r)
                if len(seen) == 2:
                    raise KeyboardInterrupt

            return super().map(fn, items, desc, hook)

    with pytest.raises(KeyboardInterrupt):
        tokenize_to_parts(cur, tok.model_path, tmp_path / "p", Dies(1), part_bytes=1, log=lambda m: None)
    assert not (tmp_path / "p" / "parts.json").exists() and len(list((tmp_path / "p" / "_tasks").iterdir())) == 2
    (tmp_path / "p" / ".part-00004.x.bin.tmp").write_bytes(b"half")  # a half-written part of the killed run
    said = []
    tokenize_to_parts(cur, tok.model_path, tmp_path / "p", LocalExecutor(1), part_bytes=1, merge=True, log=said.append)
    assert "resuming: 2 of 6 parts already done" in said and not list((tmp_path / "p").glob(".*.tmp"))
    assert same_files(tmp_path / "p", one)
    from curate.lock import OutputLock

    with OutputLock(tmp_path / "p"):
        rc = pretrain_main(["tokenize", "--input", str(cur), "--tokenizer", tok.model_path, "--output-prefix",
                            str(tmp_path / "p"), "--parts", "--no-progress"])
    assert rc == 2 and "in use by another" in capsys.readouterr().err


def test_the_command_writes_parts_and_the_merged_file(setup, tmp_path, capsys):
    root, cur, tok, one = setup
    argv = ["tokenize", "--input", str(cur), "--tokenizer", tok.model_path, "--output-prefix", str(tmp_path / "t"),
            "--parts", "--part-bytes", "300K", "--no-progress"]
    assert pretrain_main(argv) == 0
    assert "parts)" in capsys.readouterr().out and not (tmp_path / "t.bin").exists()
    assert isinstance(open_indexed(tmp_path / "t"), PartsDataset)
    assert pretrain_main(argv + ["--merge"]) == 0
    assert same_files(tmp_path / "t", one) and isinstance(open_indexed(tmp_path / "t"), IndexedDataset)
    assert pretrain_main(["tokenize", "--input", str(cur), "--tokenizer", tok.model_path, "--output-prefix",
                          str(tmp_path / "u"), "--address", "auto"]) == 2
    assert "--address is for --executor ray" in capsys.readouterr().err


# ------------------------------------------------------------------------------------- manifests that lie

def lying_copy(cur: Path, tmp_path: Path, how: str) -> tuple[Path, str]:
    copy = tmp_path / "cur"
    shutil.copytree(cur, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    first = manifest["shards"][1]
    path = copy / first["path"]
    if how == "listed twice":
        manifest["shards"].append(dict(first))
    elif how == "listed twice under another spelling":
        manifest["shards"].append({**first, "path": first["path"].replace("shards/", "shards/./")})
    elif how == "cut short":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif how == "rewritten with fewer rows":
        import pyarrow.feather as feather

        table = feather.read_table(path)
        feather.write_feather(table.slice(0, table.num_rows - 2), path, compression="zstd")
    elif how == "a decompression bomb":  # the same rows, one text 4 MiB of NULs that zstd stores in KBs
        import hashlib

        import pyarrow as pa
        import pyarrow.feather as feather

        table = feather.read_table(path)
        texts = table.column("text").to_pylist()
        texts[0] = "\0" * (4 << 20)
        table = table.set_column(table.schema.get_field_index("text"), "text", pa.array(texts, table.schema.field("text").type))
        feather.write_feather(table, path, compression="zstd")
        first["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    elif how == "rows lie":
        first["rows"] += 3
    elif how == "no sha256":
        del first["sha256"]
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy, first["path"]


LIES = {"listed twice": "twice", "listed twice under another spelling": "twice", "cut short": "sha256",
        "rewritten with fewer rows": "sha256", "rows lie": "rows", "no sha256": "'sha256'",
        "a decompression bomb": "decompression bomb"}


@pytest.fixture(autouse=True)
def small_decode_cap(monkeypatch):
    """A bomb of 4 MiB is one here (the cap is 256 MiB: tests/test_decode_bombs.py reads one of that size)."""
    from curate.readers import tables

    monkeypatch.setattr(tables, "MAX_DECODE_BYTES", 1 << 20)


@pytest.mark.parametrize("how", sorted(LIES))
@pytest.mark.parametrize("mode", [[], ["--parts"]])
def test_a_manifest_that_lies_is_refused_naming_the_shard(setup, tmp_path, capsys, how, mode):
    root, cur, tok, one = setup
    copy, name = lying_copy(cur, tmp_path, how)
    rc = pretrain_main(["tokenize", "--input", str(copy), "--tokenizer", tok.model_path, "--output-prefix",
                        str(tmp_path / "x"), "--no-progress", *mode])
    err = capsys.readouterr().err
    assert rc == 2 and name in err and LIES[how] in err, err
    assert not (tmp_path / "x.bin").exists() and not (tmp_path / "x" / "parts.json").exists()


@pytest.mark.parametrize("how", ["listed twice", "cut short", "rows lie", "a decompression bomb"])
def test_tokenizer_training_refuses_a_manifest_that_lies(setup, tmp_path, capsys, how):
    root, cur, tok, one = setup
    copy, name = lying_copy(cur, tmp_path, how)
    for extra in ([], ["--sample-bytes", "100K"]):
        rc = pretrain_main(["tokenizer", "train", "--input", str(copy), "--vocab-size", "400", "--output",
                            str(tmp_path / "t.model"), *extra])
        err = capsys.readouterr().err
        assert rc == 2 and name in err and LIES[how] in err, (extra, err)
    assert not (tmp_path / "t.model").exists()


# ------------------------------------------------------------------------------------------ on a cluster

class NodeKiller:
    """Removes a worker node (not gracefully) once a few tasks finished, the others running or queued."""

    def __init__(self, inner, cluster, node, after: int = 2):
        self.inner, self.cluster, self.node, self.after, self.removed = inner, cluster, node, after, False

    def map(self, fn, items, desc=None, on_result=None):
        seen = 0

        def hook(result):
            nonlocal seen
            seen += 1
            if seen == self.after and not self.removed:
                self.cluster.remove_node(self.node, allow_graceful=False)
                self.removed = True
            on_result(result)

        return self.inner.map(fn, items, desc=desc, on_result=hook)


@pytest.mark.slow
def test_three_node_ray_cluster_losing_a_node_gives_the_local_parts(setup, tmp_path):
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    from curate.executors.ray import RayExecutor

    root, cur, tok, one = setup
    big = curated.make_curated(tmp_path / "big", [d["text"] for d in curated.prose_docs()][:240] * 2, shards=16,
                               batch_rows=16)
    tokenize_to_parts(big, tok.model_path, tmp_path / "local", LocalExecutor(1), part_bytes=1, log=lambda m: None)
    tokenize_curated(big, tok.model_path, tmp_path / "one", workers=1, progress=False)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        cluster.wait_for_nodes()
        killer = NodeKiller(RayExecutor(max_retries=5), cluster, workers[0])
        stats = tokenize_to_parts(big, tok.model_path, tmp_path / "ray", killer, part_bytes=1, merge=True,
                                  log=lambda m: None)
        assert killer.removed and stats["parts"] == 16
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert part_bytes(tmp_path / "ray") == part_bytes(tmp_path / "local")
    assert same_files(tmp_path / "ray", tmp_path / "one")  # the merged file: one-process bytes
    a = build_gpt_dataset(PartsDataset(tmp_path / "ray"), "969,30,1", "train", 400, 64, 3, None)
    b = build_gpt_dataset(IndexedDataset(tmp_path / "one"), "969,30,1", "train", 400, 64, 3, None)
    assert np.array_equal(a.get_batch(np.arange(len(a))), b.get_batch(np.arange(len(b))))


def test_thousands_of_parts_hold_one_file_each_and_too_many_say_ulimit(tmp_path):
    """An .idx is read, not mapped: a dataset of N parts holds N files open (the .bin maps), and past the limit the
    error says what to raise."""
    import subprocess
    import sys

    from pretrain.data.indexed import IndexedDatasetBuilder, data_file_path
    from pretrain.data.parts import part_name, write_parts_index

    parts = []
    for i in range(150):
        with IndexedDatasetBuilder(tmp_path / "p" / part_name(i), np.uint16, durable=False) as b:
            b.add_documents(np.arange(12, dtype=np.uint16), [5, 7])
        parts.append({"name": part_name(i), "documents": 2, "tokens": 12, "rows": 2, "shards": 1,
                      "bin_bytes": os.path.getsize(data_file_path(tmp_path / "p" / part_name(i)))})
    write_parts_index(tmp_path / "p", np.uint16, parts)
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), "
            "resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
            "from pretrain.data.parts import open_indexed\n"
            "ds = open_indexed(sys.argv[2]); print(ds.num_documents)")
    ok = subprocess.run([sys.executable, "-c", code, "250", str(tmp_path / "p")], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.strip() == "300", ok.stderr  # 150 parts under 250 files
    bad = subprocess.run([sys.executable, "-c", code, "120", str(tmp_path / "p")], capture_output=True, text=True)
    assert bad.returncode != 0 and "ulimit -n" in bad.stderr and "too many open files" in bad.stderr


def test_parquet_shards_give_the_same_parts_as_arrow(setup, tmp_path):
    root, cur, tok, one = setup
    texts = [d["text"] for d in curated.prose_docs()][:160]
    texts.insert(5, "")
    pq = curated.make_curated(tmp_path / "pq", texts, shards=6, fmt="parquet")
    tokenize_to_parts(pq, tok.model_path, tmp_path / "p", LocalExecutor(1), part_bytes=1, merge=True, log=lambda m: None)
    assert same_files(tmp_path / "p", one)


@pytest.mark.slow
def test_training_on_the_parts_gives_the_losses_of_the_merged_file(setup, tmp_path):
    import os
    import subprocess
    import sys

    root, cur, tok, one = setup
    tokenize_to_parts(cur, tok.model_path, tmp_path / "p", LocalExecutor(1), part_bytes=1, log=lambda m: None)
    losses = {}
    for name, prefix in (("parts", tmp_path / "p"), ("merged", one)):
        spec = tmp_path / f"{name}.toml"
        spec.write_text(f'split = "1,0,0"\n[[datasets]]\nname = "web"\nprefix = "{prefix}"\nweight = 1.0\n')
        args = [sys.executable, "-m", "pretrain", "train", "--config", str(ROOT / "pretrain" / "configs" / "tiny.toml"),
                "--set", f"data.blend='{spec}'", "--set", f"data.tokenizer='{tok.model_path}'",
                "--set", f"data.cache_dir='{tmp_path}/cache-{name}'", "--set", "train.steps=6",
                "--set", f"log.dir='{tmp_path}/log-{name}'", "--set", f"checkpoint.dir='{tmp_path}/ckpt-{name}'",
                "--set", "checkpoint.interval=0", "--set", "log.interval=1"]
        out = subprocess.run(args, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stdout + out.stderr
        rows = [json.loads(x) for x in (tmp_path / f"log-{name}" / "metrics.jsonl").read_text().splitlines()]
        losses[name] = [r["loss"] for r in rows if "loss" in r]
    assert len(losses["parts"]) == 6 and losses["parts"] == losses["merged"]


def test_a_merged_file_of_older_parts_is_never_read_for_the_new_ones(setup, tmp_path):
    root, cur, tok, one = setup
    said = []
    tokenize_to_parts(cur, tok.model_path, tmp_path / "p", LocalExecutor(1), part_bytes=1, merge=True, log=said.append)
    assert isinstance(open_indexed(tmp_path / "p"), IndexedDataset)
    index = tmp_path / "p" / "parts.json"
    record = json.loads(index.read_text())
    index.write_text(json.dumps({**record, "stats": {}}))  # parts.json changed since the merge
    with pytest.raises(ValueError, match="merged from other parts"):
        open_indexed(tmp_path / "p")
    tokenize_to_parts(cur, tok.model_path, tmp_path / "p", LocalExecutor(1), part_bytes=250_000, log=said.append)
    assert any("were merged from the parts being rewritten: removed" in m for m in said)
    assert not (tmp_path / "p.bin").exists() and isinstance(open_indexed(tmp_path / "p"), PartsDataset)


def test_the_python_gather_over_parts_equals_the_compiled_one(setup, tmp_path, monkeypatch):
    import pretrain.data.parts_gather as pg

    root, cur, tok, one = setup
    tokenize_to_parts(cur, tok.model_path, tmp_path / "p", LocalExecutor(1), part_bytes=1, log=lambda m: None)
    merged = build_gpt_dataset(IndexedDataset(one), "1", "train", 200, 48, 9)
    compiled = build_gpt_dataset(PartsDataset(tmp_path / "p"), "1", "train", 200, 48, 9)
    monkeypatch.setattr(pg, "compiled", False)  # as without numba
    python = build_gpt_dataset(PartsDataset(tmp_path / "p"), "1", "train", 200, 48, 9)
    idx = np.arange(len(merged))
    want = merged.get_batch(idx)
    assert np.array_equal(python.get_batch(idx), want) and np.array_equal(compiled.get_batch(idx), want)
    assert all(np.array_equal(python[i], want[i]) and np.array_equal(compiled[i], want[i]) for i in idx)


def test_negative_max_retries_is_refused_by_the_parser(tmp_path, capsys):
    from pretrain.cli import main

    with pytest.raises(SystemExit) as e:
        main(["tokenize", "--input", str(tmp_path), "--tokenizer", "t.model", "--output-prefix", str(tmp_path / "x"),
              "--parts", "--max-retries", "-1"])
    assert e.value.code == 2 and "--max-retries: must be >= 0" in capsys.readouterr().err
