"""Hostile input, third round (issue 21, section 2): table inputs of every string-like Arrow type and memory
bounded by bytes, ARC files with lying lengths, inputs that change during a run, exact_dedup without texts in
memory, misleading paths (a literal `a[1].jsonl`, a glob over the output folder), Ctrl-C / SIGTERM, and
`export-hf` into a folder that holds other files."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from curate import readers, steps, tasks
from curate.cli import main as curate_main
from curate.commands import dispatch
from curate.executors.local import LocalExecutor
from curate.pipeline import load_pipeline
from curate.readers import arc, tables
from curate.runner import run_pipeline
from curate.shards import read_shard
from tests.conftest import ROOT


def _items(path, fmt):
    out = {"docs": [], "drops": [], "skips": []}
    for it in readers.read_file(str(path), fmt):
        if it[0] == "doc":
            out["docs"].append(it[1])
        elif it[0] == "drop":
            assert it[2] in readers.READ_REASONS
            out["drops"].append((it[2], it[1]))
        elif it[0] == "skip":
            out["skips"].append(it[1])
    return out


# --- Arrow and table inputs ------------------------------------------------------------------------

TEXTS = ["first text", "second text", None, "first text"]
TYPES = [pa.string(), pa.large_string(), pa.string_view(), pa.binary(), pa.large_binary(), pa.binary_view()]


def _typed(t):
    values = [None if x is None else (x.encode() if "binary" in str(t) else x) for x in TEXTS]
    return pa.array(values, pa.binary() if "binary" in str(t) else pa.string()).cast(t)


@pytest.mark.parametrize("encoding", ["plain", "dictionary", "run_end"])
@pytest.mark.parametrize("t", TYPES, ids=str)
@pytest.mark.parametrize("fmt", ["arrow", "arrow-stream", "parquet"])
def test_every_string_like_arrow_type_is_text(tmp_path, t, encoding, fmt):
    col = _typed(t)
    ids = pa.array([f"r{i}" for i in range(4)])
    if encoding == "dictionary":
        col = col.dictionary_encode()
    elif encoding == "run_end":  # (read as the dictionary it amounts to: a repeated value is never copied)
        if fmt == "parquet":
            pytest.skip("Parquet has no run-end encoded columns")
        try:
            col, ids = pc.run_end_encode(col), pc.run_end_encode(ids)
        except pa.ArrowNotImplementedError:
            pytest.skip(f"pyarrow cannot run-end encode {t}")
    table = pa.table({"id": ids, "text": col})
    path = tmp_path / ("t.parquet" if fmt == "parquet" else "t.arrow")
    if fmt == "parquet":
        try:
            pq.write_table(table, path)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
            pytest.skip(f"Parquet cannot store {t}")
    elif fmt == "arrow":
        with pa.ipc.new_file(path, table.schema) as w:
            w.write_table(table)
    else:
        with pa.ipc.new_stream(path, table.schema) as w:
            w.write_table(table)
    got = _items(path, "parquet" if fmt == "parquet" else "arrow")
    assert [d["text"] for d in got["docs"]] == ["first text", "second text", "first text"]
    assert [d["id"] for d in got["docs"]] == ["r0", "r1", "r3"]
    assert [r for r, _ in got["drops"]] == ["missing_text"]


def test_polars_and_duckdb_files_are_read(tmp_path):
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    df = pl.DataFrame({"id": ["a", "b"], "text": ["polars text one", "polars text two"],
                       "url": pl.Series(["http://x/1", "http://x/2"], dtype=pl.Categorical)})
    df.write_ipc(tmp_path / "p.arrow")  # string_view columns
    df.write_ipc_stream(tmp_path / "ps.arrow")
    df.write_parquet(tmp_path / "p.parquet")
    duckdb.sql(f"copy (select 'd' as id, 'duck text' as text) to '{tmp_path / 'd.parquet'}'")
    for name, fmt in (("p.arrow", "arrow"), ("ps.arrow", "arrow"), ("p.parquet", "parquet")):
        got = _items(tmp_path / name, fmt)
        assert [d["text"] for d in got["docs"]] == ["polars text one", "polars text two"], name
        assert [d["url"] for d in got["docs"]] == ["http://x/1", "http://x/2"], name
    assert [d["text"] for d in _items(tmp_path / "d.parquet", "parquet")["docs"]] == ["duck text"]


def _ipc_file(path, batches: int, rows: int, compression="zstd"):
    schema = pa.schema([("text", pa.string())])
    with pa.ipc.new_file(path, schema, options=pa.ipc.IpcWriteOptions(compression=compression)) as w:
        for b in range(batches):
            w.write_batch(pa.record_batch([[f"batch {b} row {i} " + "words " * 20 for i in range(rows + b)]], schema=schema))


def test_ipc_batch_rows_come_from_the_headers(tmp_path):
    _ipc_file(tmp_path / "a.arrow", 5, 7)
    counted = tables.ipc_batches(str(tmp_path / "a.arrow"), 5)
    assert [r for r, _, _ in counted] == [7, 8, 9, 10, 11]
    # a compressed batch's decoded bytes, read from the lengths before its buffers: what decoding it gives
    reader = pa.ipc.open_file(str(tmp_path / "a.arrow"))
    decoded = [sum(b.size for b in reader.get_batch(i).column(0).buffers() if b is not None) for i in range(5)]
    assert [d for _, _, d in counted] == decoded and all(s < d for _, s, d in counted)
    assert tables.ipc_batches(str(tmp_path / "a.arrow"), 4) is None  # not what the footer says: not trusted


def test_an_arrow_split_decodes_only_its_own_batches(tmp_path):
    """Batch 0's compressed body is smashed: reading the whole file sets it aside, but a split that starts
    later never decodes it, and its rows keep the ids (row numbers) they have in the whole file."""
    path = tmp_path / "a.arrow"
    _ipc_file(path, 4, 50)
    blob = bytearray(path.read_bytes())
    src = pa.memory_map(str(path))
    src.seek(8)
    reader = pa.ipc.MessageReader.open_stream(src)
    next(reader)  # the schema
    body_at = None
    m = next(reader)
    assert m.type == "record batch"
    body_at = src.tell() - m.body.size
    src.close()
    blob[body_at + 20: body_at + 60] = b"\xff" * 40
    path.write_bytes(bytes(blob))
    whole = list(readers.read_file(str(path), "arrow"))
    assert [it[2] for it in whole if it[0] == "drop"] == ["corrupt_batch"]
    splits = readers.plan_splits(str(path), "arrow", target_bytes=1)
    assert len(splits) == 4
    later = [it for s in splits[1:] for it in readers.read_split(s)]
    assert all(it[0] == "doc" for it in later)
    assert [it[1]["id"] for it in later] == [it[1]["id"] for it in whole if it[0] == "doc"]
    assert later[0][1]["id"] == "a.arrow:51"


def test_dictionary_texts_are_not_expanded_per_row(tmp_path):
    """200 rows sharing one 5 MiB text (dictionary-encoded): 1 GB decoded per row; read in a child process
    whose peak memory stays far below that."""
    big = "y" * (5 << 20)
    table = pa.table({"text": pa.DictionaryArray.from_arrays(pa.array([0] * 200, pa.int32()), pa.array([big]))})
    pq.write_table(table, tmp_path / "d.parquet")
    with pa.ipc.new_file(tmp_path / "d.arrow", table.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
        w.write_table(table)
    code = ("import sys\nfrom curate import readers\n"
            "n = sum(1 for it in readers.read_file(sys.argv[1], sys.argv[2]) if it[0] == 'doc')\n"
            "peak = [line for line in open('/proc/self/status') if line.startswith('VmHWM')][0].split()[1]\n"
            "print(n, int(peak) // 1024)")  # (ru_maxrss would include the parent's peak: it survives exec)
    for name, fmt in (("d.parquet", "parquet"), ("d.arrow", "arrow")):
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path / name), fmt], capture_output=True, text=True,
                             timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
        n, peak_mb = map(int, out.stdout.split())
        assert n == 200 and peak_mb < 700, (name, n, peak_mb)  # decoded per row: over 1000 MB


def test_one_huge_parquet_value_is_read_plain(tmp_path):
    """A 200 MiB value between two small rows (pyarrow's defaults write it dictionary-encoded): set aside as
    too_large, the small rows kept, in a child whose peak stays under 4.75 x the value (a dictionary read of
    the value's one-row batch held it once more: 1.17 GB)."""
    mib = 200
    pq.write_table(pa.table({"text": ["a small document", "x" * (mib << 20), "another small document"]}),
                   tmp_path / "huge.parquet")
    code = ("import sys, collections\nfrom curate import readers\n"
            "kinds = collections.Counter(it[0] if it[0] == 'doc' else it[2] "
            "for it in readers.read_file(sys.argv[1], 'parquet'))\n"
            "peak = [line for line in open('/proc/self/status') if line.startswith('VmHWM')][0].split()[1]\n"
            "print(kinds['doc'], kinds['too_large'], int(peak) // 1024)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "huge.parquet")], capture_output=True,
                         text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    docs, too_large, peak_mb = map(int, out.stdout.split())
    assert (docs, too_large) == (2, 1)
    assert peak_mb < 4.75 * mib, peak_mb


def test_one_row_batches_of_a_dictionary_column_read_the_same(tmp_path, monkeypatch):
    """Rows read one per batch (large rows: read plain) give the documents a dictionary read gives."""
    texts = [f"text {i % 3} " * 50 for i in range(30)]
    pq.write_table(pa.table({"id": [str(i) for i in range(30)], "text": texts}), tmp_path / "d.parquet",
                   row_group_size=7)
    path = str(tmp_path / "d.parquet")
    whole = [it[1] for it in readers.read_file(path, "parquet")]
    monkeypatch.setattr(tables, "SLICE_BYTES", 1)
    one_by_one = [it[1] for it in readers.read_file(path, "parquet")]
    assert [d["text"] for d in whole] == texts
    assert one_by_one == whole


def test_read_batches_are_bounded_by_bytes(tmp_path, monkeypatch):
    """shard_rows documents, or BATCH_CHARS of text, whichever first."""
    monkeypatch.setattr(tasks, "BATCH_CHARS", 2000)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": str(i), "text": f"document {i} " + "x" * 490}) + "\n" for i in range(20)))
    toml = tmp_path / "p.toml"
    toml.write_text(f'[pipeline]\nname = "b"\noutput = "{tmp_path / "out"}"\nshard_rows = 4096\n\n'
                    f'[[sources]]\npath = "{src}"\n')
    stats = run_pipeline(load_pipeline(toml), LocalExecutor(1), progress=False)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert stats["stages"][0]["kept"] == 20
    assert [e["rows"] for e in manifest["shards"]] == [4] * 5


# --- ARC --------------------------------------------------------------------------------------------

def _corpus():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_corpus", ROOT / "tests" / "hostile" / "make_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_arc_lengths_that_lie_do_not_swallow_records(tmp_path):
    mc = _corpus()
    expected = mc.build_arc(tmp_path)
    assert len(expected) >= 8
    for name, want in expected.items():
        got = _items(tmp_path / name, "warc")
        drops = {}
        for r, _ in got["drops"]:
            drops[r] = drops.get(r, 0) + 1
        assert (len(got["docs"]), drops, len(got["skips"])) == (want["docs"], want["drops"], want["skips"]), name
    got = _items(tmp_path / "non-numeric-length.arc", "warc")
    assert [d["url"] for d in got["docs"]] == [f"http://arc.example/{i}" for i in (0, 2, 3, 4)]
    assert "not an ARC record header" in got["drops"][0][1]["text"]
    got = _items(tmp_path / "long-length.arc", "warc")
    assert "arc.example/2" not in got["drops"][0][1]["text"]  # cut where the next record starts


def test_arc_header_lines():
    assert arc.header(b"http://x.y/ 1.2.3.4 20200101000000 text/html 12") == ("http://x.y/", "text/html", 12)
    assert arc.header(b"http://x.y/ 1.2.3.4 20200101000000 text/html abc") is None
    assert arc.header(b"http://x.y/ 1.2.3.4 20200101000000 text/html -1") is None
    assert arc.header(b"just a line of text with five words 1") is None


# --- inputs that change during a run -----------------------------------------------------------------

def _jsonl(path: Path, n: int) -> None:
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": f"document number {i} " * 5}) + "\n" for i in range(n)))


def _pipeline(tmp_path, src, out, extra=""):
    toml = tmp_path / "p.toml"
    toml.write_text(f'[pipeline]\nname = "c"\noutput = "{out}"\nshard_rows = 100\n{extra}\n[[sources]]\npath = "{src}"\n')
    return toml


@pytest.mark.parametrize("change", ["shrink", "grow", "rewrite"])
def test_an_input_that_changes_after_planning_stops_the_run(tmp_path, monkeypatch, capsys, change):
    src = tmp_path / "in.jsonl"
    _jsonl(src, 1000)
    toml = _pipeline(tmp_path, src, tmp_path / "out")
    planned = steps.read_tasks

    def plan_then_change(*a, **k):
        result = planned(*a, **k)
        data = src.read_bytes()
        if change == "shrink":
            src.write_bytes(data[: len(data) // 3])
        elif change == "grow":
            src.write_bytes(data + data[:500])
        else:
            time.sleep(0.01)
            src.write_bytes(data.replace(b"document", b"Document"))
            os.utime(src, ns=(time.time_ns(), time.time_ns() + 10 ** 9))
        return result

    monkeypatch.setattr(steps, "read_tasks", plan_then_change)
    assert curate_main(["run", str(toml), "--quiet", "--workers", "1"]) == 1
    err = capsys.readouterr().err
    assert f"input {src} changed" in err and "--allow-changed-inputs" in err
    assert not list((tmp_path / "out").glob("data/*"))
    monkeypatch.setattr(steps, "read_tasks", planned)
    assert curate_main(["run", str(toml), "--quiet", "--allow-changed-inputs"]) == 0
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    lines = src.read_bytes().count(b"\n")
    assert stats["stages"][0]["in"] == lines + (1 if not src.read_bytes().endswith(b"\n") else 0)


def test_a_file_that_grows_while_it_is_read_stops_and_leaves_no_shards(tmp_path, monkeypatch, capsys):
    """The change comes after 300 documents (3 shards written): the task stops at its next check, removes
    what it wrote, and no marker claims the split."""
    src = tmp_path / "in.jsonl"
    _jsonl(src, 3000)
    toml = _pipeline(tmp_path, src, tmp_path / "out")
    reading = readers.read_split

    def read_then_append(split, **kw):
        for n, item in enumerate(reading(split, **kw)):
            if n == 300:
                with open(src, "a") as f:
                    f.write(json.dumps({"id": "late", "text": "a line written while the file was read"}) + "\n")
            yield item

    monkeypatch.setattr(tasks.readers, "read_split", read_then_append)
    assert curate_main(["run", str(toml), "--quiet", "--workers", "1"]) == 1
    assert "changed while it was read" in capsys.readouterr().err
    out = tmp_path / "out"
    assert not list(out.glob("data/*")) and not list(out.glob("dropped/**/*.arrow"))
    assert not list(out.glob("steps/00_read/_tasks/*.json"))


def test_a_file_changing_while_it_is_read_stops_its_task(tmp_path):
    src = tmp_path / "in.jsonl"
    _jsonl(src, 10)
    st = os.stat(src)
    split = {"path": str(src), "format": "jsonl",
             "expect": {"path": str(src), "size": st.st_size, "mtime_ns": st.st_mtime_ns}}
    tasks.check_unchanged(split, "now")
    with open(src, "ab") as f:
        f.write(b'{"text": "more"}\n')
    with pytest.raises(tasks.InputChanged, match=r"size \d+ -> \d+"):
        tasks.check_unchanged(split, "while it was read")
    src.unlink()
    with pytest.raises(tasks.InputChanged, match="No such file"):
        tasks.check_unchanged(split, "while it was read")


# --- exact_dedup --------------------------------------------------------------------------------------

def test_exact_dedup_plan_holds_no_texts(tmp_path):
    from curate.schema import documents_to_table
    from curate.shards import write_shard
    from curate.stages.exact_dedup import ExactDedup, Params

    big = "the same long page " * 20000  # 380 kB
    shards = []
    for s in range(4):
        rows = [{"id": f"s{s}-{i}", "text": big if i % 2 == 0 else f"unique {s} {i}", "source": "x", "url": "",
                 "content_type": "text/plain"} for i in range(25)]
        path = tmp_path / f"in{s}.arrow"
        write_shard(documents_to_table(rows), path)
        shards.append(str(path))
    stage = ExactDedup("exact_dedup", Params())
    stats = stage.plan(shards, tmp_path / "plan", LocalExecutor(1))
    assert stats["duplicates"] == 4 * 13 - 1
    held = sum(p.stat().st_size for p in (tmp_path / "plan" / "texts").rglob("*") if p.is_file())
    assert held < len(big)  # 52 copies of the text were candidates; not even one is in the plan
    result = stage.apply_with_plan(read_shard(shards[1]), 1, tmp_path / "plan")
    assert set(result.dropped.column("duplicate_of").to_pylist()) == {"s0-0"}


# --- misleading paths ---------------------------------------------------------------------------------

def test_an_existing_path_is_taken_literally(tmp_path):
    odd = tmp_path / "a[1].jsonl"
    _jsonl(odd, 3)
    _jsonl(tmp_path / "a1.jsonl", 5)  # what the glob a[1].jsonl would match
    files = readers.expand_sources([{"path": str(odd)}])
    assert [f["path"] for f in files] == [str(odd)]
    assert [f["path"] for f in readers.expand_sources([{"path": str(tmp_path / "a[0-9].jsonl")}])] == [
        str(tmp_path / "a1.jsonl")]
    toml = _pipeline(tmp_path, tmp_path / "nothing.jsonl", tmp_path / "out")
    assert curate_main(["run", str(toml), "--quiet", "--input", str(odd)]) == 0
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["stages"][0]["kept"] == 3


def test_a_folder_as_source_says_to_give_a_glob(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    _jsonl(tmp_path / "in" / "a.jsonl", 2)
    toml = _pipeline(tmp_path, tmp_path / "in", tmp_path / "out")
    assert curate_main(["run", str(toml), "--quiet"]) == 2
    assert "is a folder: give a glob of the files to read" in capsys.readouterr().err


def test_a_file_named_by_several_matches_is_read_once(tmp_path, capsys):
    """A ``**`` glob through a link to a folder above matched the same file once per level of links (40
    times); a link, a hard link or a second source naming a file read already: each file is read once, and the
    paths left out are named."""
    data = tmp_path / "in"
    data.mkdir()
    _jsonl(data / "a.jsonl", 3)
    (data / "up").symlink_to("..")               # in/up/in/up/... : a loop the glob walks to its depth limit
    (data / "b.jsonl").symlink_to("a.jsonl")
    os.link(data / "a.jsonl", data / "c.jsonl")
    (tmp_path / "p.toml").write_text(f'[pipeline]\nname = "c"\noutput = "{tmp_path / "out"}"\n'
                                     f'[[sources]]\npath = "{data}/**/*.jsonl"\n'
                                     f'[[sources]]\npath = "{data / "a.jsonl"}"\n')
    files = readers.expand_sources([{"path": f"{data}/**/*.jsonl"}, {"path": str(data / "a.jsonl")}])
    assert [f["path"] for f in files] == [str(data / "a.jsonl")]
    assert curate_main(["run", str(tmp_path / "p.toml"), "--quiet"]) == 0
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["stages"][0]["kept"] == 3
    err = capsys.readouterr().err
    assert "name a file already read" in err and f"the same file as {str(data / 'a.jsonl')!r}" in err


def test_a_glob_over_the_output_folder_never_reads_the_output(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    pq.write_table(pa.table({"id": ["p1", "p2"], "text": ["parquet one", "parquet two"]}), data / "in.parquet")
    toml = _pipeline(tmp_path, f"{data}/**/*.parquet", data / "curated", extra='format = "parquet"\n')
    for attempt in range(2):
        assert curate_main(["run", str(toml), "--quiet"]) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    assert "inside the output folder" in err and "not read" in err
    stats = json.loads((data / "curated" / "stats.json").read_text())
    assert stats["stages"][0]["kept"] == 2
    toml = _pipeline(tmp_path, f"{data}/curated/**/*.parquet", tmp_path / "other" / "curated2", extra='format = "parquet"\n')
    toml.write_text(toml.read_text().replace(str(tmp_path / "other" / "curated2"), str(data / "curated")))
    assert curate_main(["run", str(toml), "--quiet"]) == 2
    assert "never reads its own output" in capsys.readouterr().err


# --- signals ------------------------------------------------------------------------------------------

def test_ctrl_c_is_one_line_for_any_command(capsys):
    class Module:
        INTERRUPT_HINT = "a rerun resumes"

        @staticmethod
        def run(args):
            raise KeyboardInterrupt

    assert dispatch.run_interruptible("pretrain train", Module, None) == 130
    assert capsys.readouterr().err.strip() == "pretrain train: interrupted; a rerun resumes"


_DEFAULT_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                   "os.execv(sys.executable, [sys.executable, '-m', 'curate'] + sys.argv[1:])")


def _left_in_session(pid: int, within_s: float = 20) -> list[str]:
    """The processes still in the session ``pid`` led (its workers, fork server, resource tracker) once they
    have had ``within_s`` to end."""
    deadline = time.time() + within_s
    left = None
    while time.time() < deadline:
        left = subprocess.run(["pgrep", "-s", str(pid)], capture_output=True, text=True).stdout.split()
        if not left:
            break
        time.sleep(0.2)
    return left


def _interrupt(proc, sig, started) -> str:
    deadline = time.time() + 120
    while time.time() < deadline and not started():
        time.sleep(0.2)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)  # what Ctrl-C does: the whole foreground group
    else:
        proc.send_signal(sig)
    return proc.communicate(timeout=60)[1]


@pytest.mark.slow  # about 20 s each: a run big enough to be interrupted
@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGKILL, -9)])
def test_signals_end_curate_run_and_its_workers(tmp_path, sig, status):
    """SIGKILL cannot be handled: the workers end themselves once the driver is gone (they waited for ever,
    with the fork server and resource tracker)."""
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": str(i), "text": "some words here and there " * 30}) + "\n"
                           for i in range(150000)))
    toml = _pipeline(tmp_path, src, tmp_path / "out", extra="workers = 2\nsplit_bytes = 2000000\n")
    toml.write_text(toml.read_text() + '\n[[stages]]\ntype = "normalize"\n')
    proc = subprocess.Popen([sys.executable, "-c", _DEFAULT_SIGINT, "run", str(toml), "--quiet"], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    markers = tmp_path / "out" / "steps" / "00_read" / "_tasks"
    err = _interrupt(proc, sig, lambda: markers.is_dir() and any(markers.iterdir()))
    assert proc.returncode == status, err
    if sig != signal.SIGKILL:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and "rerun the same command to resume" in lines[0], err
        assert not (tmp_path / "out" / "run.lock").exists()
    left = _left_in_session(proc.pid)
    assert not left, f"processes left behind: {left}"


@pytest.mark.slow  # about 15 s each
@pytest.mark.parametrize("parts", [True, False])
@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGKILL, -9)])
def test_signals_end_pretrain_tokenize_and_its_workers(tmp_path, parts, sig, status):
    """`pretrain tokenize` with workers: SIGTERM unwinds as Ctrl-C does (one line, the workers ended), and
    after SIGKILL the workers end themselves; before, both left the pool's workers, the fork server and the
    resource tracker running."""
    import importlib.util

    from pretrain.data.tokenizer import train_tokenizer

    import curated
    texts = [d["text"] for d in curated.prose_docs()][:200]
    cur = curated.make_curated(tmp_path / "curated", texts * 150, shards=30, batch_rows=500)
    tok = train_tokenizer(cur, 500, tmp_path / "tok.model", max_bytes=300_000, threads=1)
    out = tmp_path / "tokens"
    cmd = [sys.executable, "-m", "pretrain", "tokenize", "--input", str(cur), "--tokenizer", tok.model_path,
           "--output-prefix", str(out), "--workers", "2", "--no-progress"]
    if parts:
        cmd += ["--parts", "--part-bytes", "1"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    # the workers are up once the fork server has children
    err = _interrupt(proc, sig, lambda: len(subprocess.run(["pgrep", "-s", str(proc.pid)], capture_output=True,
                                                           text=True).stdout.split()) >= 4)
    assert proc.returncode == status, err
    if sig == signal.SIGTERM:
        assert "terminated (SIGTERM); rerun the same command to resume" in err, err
    left = _left_in_session(proc.pid)
    assert not left, f"processes left behind: {left}"


# --- export-hf ----------------------------------------------------------------------------------------

def test_export_hf_refuses_a_folder_with_other_files(tmp_path, capsys):
    from pretrain.cli import main as pretrain_main
    from pretrain.export_hf import ExportError, check_out_dir

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes")
    (mine / "config.json").write_text("{}")
    with pytest.raises(ExportError, match="--force"):
        check_out_dir(mine)
    check_out_dir(mine, force=True)
    check_out_dir(tmp_path / "new")
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    for name in ("config.json", "model.safetensors", "quarry_export.json", "tokenizer.model"):
        (earlier / name).write_text("x")
    check_out_dir(earlier)  # an earlier export is written over (pipelines/demo.sh reruns)
    (earlier / "README.md").write_text("mine")
    with pytest.raises(ExportError, match="README.md"):
        check_out_dir(earlier)
    # the command refuses before it loads anything, and the user's files are untouched
    assert pretrain_main(["export-hf", str(tmp_path / "no-checkpoint"), str(mine)]) == 2
    assert "--force" in capsys.readouterr().err
    assert (mine / "config.json").read_text() == "{}"
