"""Hostile input, third round: inputs rewritten in place with the same size and modification time,
values that make no sense, the lock's message, ARC splits."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from curate import fingerprint, steps, tasks
from curate.cli import main as curate_main
from tests.test_readers import _items as _comparable  # counts summed: splits report them per split


def _jsonl(path: Path, n: int, word: str = "document") -> None:
    path.write_text("".join(json.dumps({"id": f"d{i:05d}", "text": f"{word} number {i} " * 5}) + "\n"
                            for i in range(n)))


def _pipeline(tmp_path, src, out, extra="", split_bytes=20000):
    toml = tmp_path / "p.toml"
    toml.write_text(f'[pipeline]\nname = "c"\noutput = "{out}"\nshard_rows = 100\nsplit_bytes = {split_bytes}\n{extra}\n'
                    f'[[sources]]\npath = "{src}"\n')
    return toml


def _rewrite_keeping_size_and_mtime(path: Path, old: bytes, new: bytes, at: int | None = None) -> None:
    """Replace one ``old`` (the first at or after byte ``at``, else the middle one) by ``new`` of the same
    length, in place, and put the modification time back."""
    assert len(old) == len(new)
    st = os.stat(path)
    data = path.read_bytes()
    i = data.index(old, at if at is not None else len(data) // 2)
    with open(path, "r+b") as f:
        f.seek(i)
        f.write(new)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size and os.stat(path).st_mtime_ns == st.st_mtime_ns


def _markers(out: Path) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in (out / "steps" / "00_read" / "_tasks").glob("*.json")}


def test_a_same_size_same_mtime_rewrite_after_planning_stops_the_run(tmp_path, monkeypatch, capsys):
    src = tmp_path / "in.jsonl"
    _jsonl(src, 1000)
    toml = _pipeline(tmp_path, src, tmp_path / "out")
    planned = steps.read_tasks

    def plan_then_rewrite(*a, **k):
        result = planned(*a, **k)
        _rewrite_keeping_size_and_mtime(src, b"document", b"Document")
        return result

    monkeypatch.setattr(steps, "read_tasks", plan_then_rewrite)
    assert curate_main(["run", str(toml), "--quiet", "--workers", "1"]) == 1
    err = capsys.readouterr().err
    assert f"input {src} changed" in err and "same size and modification time" in err
    assert "--allow-changed-inputs" in err
    assert not list((tmp_path / "out").glob("data/*"))
    monkeypatch.setattr(steps, "read_tasks", planned)
    # the rerun sees the rewrite against run.json too, and reads the new version once allowed
    assert curate_main(["run", str(toml), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{src} (content)" in err and "--allow-changed-inputs" in err
    assert curate_main(["run", str(toml), "--quiet", "--allow-changed-inputs"]) == 0
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["stages"][0]["kept"] == 1000


def test_a_same_size_same_mtime_rewrite_while_reading_stops_the_task_and_leaves_no_shards(tmp_path, monkeypatch, capsys):
    from curate import readers

    src = tmp_path / "in.jsonl"
    _jsonl(src, 3000)
    toml = _pipeline(tmp_path, src, tmp_path / "out", split_bytes=100_000_000)  # one task
    reading = readers.read_split

    def read_then_rewrite(split, **kw):
        for n, item in enumerate(reading(split, **kw)):
            if n == 300:  # the records already read are not those of the file any more
                _rewrite_keeping_size_and_mtime(src, b"document", b"DOCUMENT", at=0)
            yield item

    monkeypatch.setattr(tasks.readers, "read_split", read_then_rewrite)
    assert curate_main(["run", str(toml), "--quiet", "--workers", "1"]) == 1
    err = capsys.readouterr().err
    assert f"input {src} changed while it was read (content rewritten, same size and modification time)" in err
    out = tmp_path / "out"
    assert not list(out.glob("data/*")) and not list(out.glob("steps/00_read/_tasks/*.json"))


def test_a_rewrite_between_runs_redoes_only_the_tasks_of_that_file(tmp_path, capsys):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _jsonl(a, 400)
    _jsonl(b, 400)
    toml = _pipeline(tmp_path, tmp_path / "*.jsonl", tmp_path / "out")
    assert curate_main(["run", str(toml), "--quiet"]) == 0
    before = _markers(tmp_path / "out")
    _rewrite_keeping_size_and_mtime(b, b"document", b"Document")
    assert curate_main(["run", str(toml), "--quiet"]) == 2
    assert f"{b} (content)" in capsys.readouterr().err
    assert curate_main(["run", str(toml), "--quiet", "--allow-changed-inputs"]) == 0
    after = _markers(tmp_path / "out")
    redone = {name for name in after if after[name] != before.get(name)}
    assert redone and all(name.startswith("src00001-") for name in redone)  # b's tasks, none of a's
    texts = [json.loads(line)["text"] for line in b.read_text().splitlines()]
    import pyarrow.dataset as ds
    kept = ds.dataset(str(tmp_path / "out" / "data"), format="arrow").to_table().column("text").to_pylist()
    assert sum("Document" in t for t in kept) == sum("Document" in t for t in texts) == 1


def test_an_untouched_input_resumes_without_redoing_a_task(tmp_path):
    src = tmp_path / "in.jsonl"
    _jsonl(src, 1000)
    toml = _pipeline(tmp_path, src, tmp_path / "out")
    assert curate_main(["run", str(toml), "--quiet"]) == 0
    manifest = (tmp_path / "out" / "manifest.json").read_bytes()
    before = _markers(tmp_path / "out")
    assert len(before) > 3
    gone = sorted(before)[1]
    (tmp_path / "out" / "steps" / "00_read" / "_tasks" / gone).unlink()  # a task the killed run did not finish
    assert curate_main(["run", str(toml), "--quiet"]) == 0
    after = _markers(tmp_path / "out")
    assert {n for n in after if after[n] != before[n]} == {gone}
    assert (tmp_path / "out" / "manifest.json").read_bytes() == manifest


def _old_fingerprint(path: str) -> dict:
    """What ``curate.fingerprint.fingerprint`` recorded before ``sample_sha256``."""
    st = os.stat(path)
    import hashlib
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read(fingerprint.EDGE))
        if st.st_size > fingerprint.EDGE:
            f.seek(max(fingerprint.EDGE, st.st_size - fingerprint.EDGE))
            h.update(f.read(fingerprint.EDGE))
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "edges_sha256": h.hexdigest()}


def test_a_folder_planned_without_the_sample_resumes(tmp_path, monkeypatch):
    """run.json, _splits.json and the task keys written by a version without ``sample_sha256``: a rerun keeps
    every finished task, redoes the unfinished one, and reports no change."""
    src = tmp_path / "in.jsonl"
    _jsonl(src, 1000)
    toml = _pipeline(tmp_path, src, tmp_path / "out")
    out = tmp_path / "out"
    monkeypatch.setattr(fingerprint, "fingerprint", _old_fingerprint)
    assert curate_main(["run", str(toml), "--quiet"]) == 0
    old_run = json.loads((out / "run.json").read_text())
    assert fingerprint.SAMPLE not in old_run["fingerprints"][str(src)]
    manifest = (out / "manifest.json").read_bytes()
    before = _markers(out)
    gone = sorted(before)[2]
    (out / "steps" / "00_read" / "_tasks" / gone).unlink()
    monkeypatch.undo()
    assert curate_main(["run", str(toml)]) == 0
    after = _markers(out)
    assert {n for n in after if after[n] != before[n]} == {gone}
    assert (out / "manifest.json").read_bytes() == manifest
    assert json.loads((out / "run.json").read_text()) == old_run  # unchanged: the sample stays unknown there


def test_a_split_planned_without_the_sample_checks_size_and_mtime_only(tmp_path):
    src = tmp_path / "in.jsonl"
    _jsonl(src, 50)
    st = os.stat(src)
    old = {"path": str(src), "format": "jsonl", "expect": {"path": str(src), "size": st.st_size, "mtime_ns": st.st_mtime_ns}}
    new = {**old, "expect": {**old["expect"], fingerprint.SAMPLE: fingerprint.fingerprint(str(src))[fingerprint.SAMPLE]}}
    tasks.check_unchanged(new, "now")
    _rewrite_keeping_size_and_mtime(src, b"number", b"NUMBER")
    tasks.check_unchanged(old, "now")  # unknown: not a change
    tasks.check_unchanged(new, "while it was read", content=False)  # the check every 1,024 items: stat only
    with pytest.raises(tasks.InputChanged, match=f"input {src} changed now .content rewritten.*--allow-changed-inputs"):
        tasks.check_unchanged(new, "now")


def test_the_sample_is_bounded_and_spread_and_survives_a_copy(tmp_path):
    big = tmp_path / "big.bin"
    size = 5 * fingerprint.SAMPLE_BLOCK * fingerprint.SAMPLE_BLOCKS + 12345
    big.write_bytes(os.urandom(size))
    offsets = fingerprint.sample_offsets(size)
    assert len(offsets) == fingerprint.SAMPLE_BLOCKS and offsets[0] == 0
    assert offsets[-1] == size - fingerprint.SAMPLE_BLOCK and offsets == sorted(offsets)
    was = fingerprint.fingerprint(str(big))
    copy = tmp_path / "elsewhere" / "copy.bin"
    copy.parent.mkdir()
    shutil.copyfile(big, copy)  # another inode, another mtime, same bytes
    assert fingerprint.content_sample(str(copy)) == was[fingerprint.SAMPLE]

    def flip(at: int) -> str:
        with open(big, "r+b") as f:
            f.seek(at)
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ 1]))
        return fingerprint.content_sample(str(big))

    middle = offsets[4] + 10  # inside a sampled block, far from both ends: caught
    assert flip(middle) != was[fingerprint.SAMPLE]
    flip(middle)
    assert fingerprint.content_sample(str(big)) == was[fingerprint.SAMPLE]
    unsampled = offsets[4] - 10  # between two sampled blocks (as docs/safety.md says): not caught
    assert flip(unsampled) == was[fingerprint.SAMPLE]

    whole = fingerprint.SAMPLE_BLOCK * fingerprint.SAMPLE_BLOCKS
    for n in (0, 1, whole, whole + 1):  # planning's sample (from the edges' bytes) is the tasks' one
        p = tmp_path / f"f{n}"
        p.write_bytes(os.urandom(n))
        assert fingerprint.fingerprint(str(p))[fingerprint.SAMPLE] == fingerprint.content_sample(str(p))


# --- values that make no sense fail at start, saying what to change -----------------------------------

@pytest.mark.parametrize("type_, params, says", [
    ("decontaminate", {"ngram": 65}, "ngram = 65: must be in [1, 64]"),
    ("decontaminate", {"ngram": 10 ** 12}, "ngram = 1000000000000: must be in [1, 64]"),
    ("decontaminate", {"ngram": 0}, "ngram = 0: must be in [1, 64]"),
    ("decontaminate", {"window": 10 ** 18}, "window = 1000000000000000000: must be in [0, 100,000,000]"),
    ("decontaminate", {"window": -1}, "window = -1: must be in [0,"),
    ("decontaminate", {"min_fragment": 10 ** 15}, "min_fragment = 1000000000000000: must be in [0,"),
    ("decontaminate", {"max_splits": 0}, "max_splits = 0: must be in [1,"),
    ("decontaminate", {"max_splits": 10 ** 9}, "max_splits = 1000000000: must be in [1, 1,000,000]"),
    ("decontaminate", {"max_matches": -1}, "max_matches = -1: must be in [0,"),
    ("decontaminate", {"max_matches": 2 ** 62}, "0 = no limit"),
    ("minhash_dedup", {"seed": -1}, "seed = -1: must be in [0, 2**32 - 1]"),
    ("minhash_dedup", {"seed": 2 ** 32}, "seed = 4294967296"),
    ("gopher_repetition", {"dup_line_frac": 1e12}, "dup_line_frac = 1000000000000.0: a share, must be between 0 and 1"),
    ("gopher_quality", {"min_alpha_words_ratio": 2.0}, "min_alpha_words_ratio = 2.0: a share"),
    ("gopher_quality", {"max_bullet_lines_ratio": 1.5}, "list its reason in `skip`"),
    ("fineweb_quality", {"short_line_thr": 3}, "short_line_thr = 3: a share"),
    ("fineweb_quality", {"char_duplicates_ratio": 1e300}, "char_duplicates_ratio"),
    ("c4_quality", {"max_word_length": 0}, "max_word_length = 0: every line with a word would be removed"),
])
def test_a_value_that_makes_no_sense_is_refused_naming_it(type_, params, says):
    from curate.config import ConfigError
    from curate.pipeline import parse_stage

    table = {"type": type_, **({"eval_files": ["evals.jsonl"]} if type_ == "decontaminate" else {}), **params}
    with pytest.raises(ConfigError) as e:
        parse_stage(table, "p.toml: [[stages]] #1")
    assert says in str(e.value)


@pytest.mark.parametrize("type_, params", [
    ("decontaminate", {"ngram": 64, "min_ngram": 64, "window": 100_000_000, "max_splits": 1_000_000, "max_matches": 0}),
    ("decontaminate", {"ngram": 1, "min_ngram": 1, "window": 0, "min_fragment": 0, "max_splits": 1}),
    ("minhash_dedup", {"seed": 0}), ("minhash_dedup", {"seed": 2 ** 32 - 1}),
    ("gopher_repetition", {"dup_line_frac": 1.0, "top_2gram_frac": 0, "top_ngram_needs_repeat": True}),
    ("gopher_quality", {"min_alpha_words_ratio": 1, "max_symbol_word_ratio": 5.0}),  # per word: may pass 1
    ("fineweb_quality", {"new_line_ratio": 4.0, "line_punct_thr": 1.0}),  # newlines per token: may pass 1
    ("c4_quality", {"max_word_length": -1}),
])
def test_the_edges_of_each_range_are_accepted(type_, params):
    from curate.pipeline import parse_stage

    table = {"type": type_, **({"eval_files": ["evals.jsonl"]} if type_ == "decontaminate" else {}), **params}
    assert parse_stage(table, "p.toml").params.items() >= params.items()


def test_decontaminate_ngram_over_the_kernel_limit_stops_the_run_at_start(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    _jsonl(src, 10)
    evals = tmp_path / "evals.jsonl"
    evals.write_text(json.dumps({"text": "an evaluation example " * 30}) + "\n")
    toml = _pipeline(tmp_path, src, tmp_path / "out", extra=f'[[stages]]\ntype = "decontaminate"\n'
                                                              f'eval_files = ["{evals}"]\nngram = 100\n')
    assert curate_main(["run", str(toml), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "ngram = 100: must be in [1, 64]" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


# --- the lock names the command that holds it ----------------------------------------------------------

def test_the_lock_message_names_the_command_holding_it(tmp_path, monkeypatch, capsys):
    from curate.lock import OutputLock

    src = tmp_path / "in.jsonl"
    _jsonl(src, 10)
    out = tmp_path / "out"
    out.mkdir()
    toml = _pipeline(tmp_path, src, out)
    monkeypatch.setattr("sys.argv", ["/somewhere/pretrain/__main__.py", "tokenize", "--input", "c", "--parts"])
    lock = OutputLock(out).acquire()
    monkeypatch.undo()
    try:
        assert json.loads((out / "run.lock").read_text())["program"] == "pretrain tokenize"
        assert curate_main(["run", str(toml), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert "in use by another run: `pretrain tokenize`" in err and f"pid {os.getpid()}" in err
        assert "curate run" not in err and "--parts" in err
        # a lock file written before `program` was recorded: named from its command line
        old = {"pid": os.getpid(), "host": "h", "started": "then", "command": "/venv/bin/curate run other.toml"}
        os.ftruncate(lock.fd, 0)
        os.pwrite(lock.fd, json.dumps(old).encode(), 0)
        assert curate_main(["run", str(toml), "--quiet"]) == 2
        assert "in use by another run: `curate run`, pid" in capsys.readouterr().err
    finally:
        lock.release()
    assert curate_main(["run", str(toml), "--quiet"]) == 0


# --- the watched child is kept from task to task -------------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "fork"), reason="the watched child needs fork")
def test_the_watched_child_serves_the_next_task_and_ends_with_the_run(tmp_path):
    import pyarrow as pa

    from curate import stage_watch
    from curate.chain import StageChain, _build_stage
    from curate.contracts import StepOutput
    from curate.pipeline import StageSpec
    from curate.schema import documents_to_table

    spec = StageSpec("gopher_quality", "gopher_quality", {}, stage_timeout_s=30)
    step = StepOutput(stages=(spec,), root=str(tmp_path), out_dir=str(tmp_path / "data"),
                      drop_dir=str(tmp_path / "dropped"), format="arrow", keep_dropped="full")
    text = "The quick brown fox jumps over the lazy dog and the cat sat on the mat by the door. " * 10
    table = documents_to_table([{"id": f"d{i}", "text": text, "source": "s", "url": "", "content_type": "text/plain"}
                                for i in range(4)])
    pids = []
    try:
        for task in range(2):
            chain = StageChain(step, f"t{task}")
            chain.run(table, f"b{task}")
            pids.append(stage_watch.kept_sandbox(_build_stage).pid)
            chain.marker("k", [], docs=table.num_rows)
            assert chain.counts["gopher_quality"].kept == 4
        assert pids[0] is not None and pids[0] == pids[1] and os.path.exists(f"/proc/{pids[0]}")
        box = stage_watch.kept_sandbox(_build_stage)
        box.busy = True  # as when the task process was interrupted between a request and its reply
        box.apply(chain.keys["gopher_quality"], table, 30)
        assert box.pid != pids[0] and not os.path.exists(f"/proc/{pids[0]}")  # ended, a fresh one started
        pids.append(box.pid)
    finally:
        stage_watch.close_kept()
    assert not os.path.exists(f"/proc/{pids[-1]}") and not stage_watch._KEPT


def test_a_run_in_this_process_leaves_no_watched_child(tmp_path):
    from curate import stage_watch

    src = tmp_path / "in.jsonl"
    _jsonl(src, 300)
    toml = _pipeline(tmp_path, src, tmp_path / "out", extra='\n[[stages]]\ntype = "gopher_repetition"\n')
    assert curate_main(["run", str(toml), "--quiet", "--workers", "1"]) == 0
    assert not stage_watch._KEPT


# --- ARC files split as WARC files do ------------------------------------------------------------------

def _make_corpus():
    import importlib.util

    from tests.conftest import ROOT

    spec = importlib.util.spec_from_file_location("make_corpus", ROOT / "tests" / "hostile" / "make_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _arc_split_invariant(path: Path, targets, min_splits: int) -> list:
    from curate.readers import plan_splits, read_file, read_split

    whole = _comparable(read_file(str(path), "warc"))
    assert whole[0], "nothing read"
    most = 1
    for target in targets:
        splits = plan_splits(str(path), "warc", target_bytes=target)
        json.dumps(splits)
        got = _comparable(it for s in splits for it in read_split(s))
        most = max(most, len(splits))
        assert got == whole, f"{path.name}: {len(splits)} splits of {target} bytes differ from the whole read"
    assert most >= min_splits, f"{path.name}: {most} splits at most"
    return whole[0]


def _arc_records(mc, n: int) -> tuple[bytes, list[bytes]]:
    desc = mc._arc_record("filedesc://many.arc", b"1 0 Many\nURL IP-address Archive-date Content-type Archive-length\n",
                          mime="text/plain")
    recs = [mc._arc_record(f"http://arc.example/{i}", mc._http(mc._page(i))) for i in range(n)]
    return desc, recs


@pytest.mark.parametrize("gz", [False, True])
def test_arc_files_split_by_record(tmp_path, gz):
    import gzip

    mc = _make_corpus()
    desc, recs = _arc_records(mc, 40)
    path = tmp_path / ("many.arc.gz" if gz else "many.arc")
    path.write_bytes(b"".join(gzip.compress(r) for r in [desc] + recs) if gz else desc + b"".join(recs))
    items = _arc_split_invariant(path, [1, 700, 4000, 1 << 30], min_splits=40)
    assert [it[1]["url"] for it in items if it[0] == "doc"] == [f"http://arc.example/{i}" for i in range(40)]


def test_an_arc_in_one_gzip_stream_is_one_split(tmp_path):
    import gzip

    from curate.readers import plan_splits

    mc = _make_corpus()
    desc, recs = _arc_records(mc, 10)
    path = tmp_path / "one.arc.gz"
    path.write_bytes(gzip.compress(desc + b"".join(recs)))
    assert len(plan_splits(str(path), "warc", target_bytes=1)) == 1
    _arc_split_invariant(path, [1], min_splits=1)


def test_hostile_arc_files_split_as_they_read_whole(tmp_path):
    """Lengths that lie, are not numbers or are absurd, junk, a cut or a corrupt member: any split gives the
    items of the whole file (a cut never lands inside a record whose header is valid and whose length ends
    cleanly, and damage belongs to the split it is in)."""
    mc = _make_corpus()
    expected = mc.build_arc(tmp_path)
    split_somewhere = 0
    for name in expected:
        if name == "blank-lines.arc":  # 3 MB of newlines: one target is enough
            _arc_split_invariant(tmp_path / name, [1 << 20], min_splits=1)
            continue
        _arc_split_invariant(tmp_path / name, [1, 300, 2000], min_splits=1)
        from curate.readers import plan_splits

        split_somewhere += len(plan_splits(str(tmp_path / name), "warc", target_bytes=1)) > 3
    assert split_somewhere >= 8


def test_the_shipped_arc_splits(tmp_path):
    from tests.conftest import ROOT

    _arc_split_invariant(ROOT / "tests" / "data" / "readers" / "example.arc", [1, 100, 1000], min_splits=2)


_CRASHING_READER = '''
import ctypes
import os

import curate.readers

_read_split = curate.readers.read_split


def read_split(split, **kw):  # a C library failing on one file's bytes (SIGSEGV), as pyarrow did on a crafted batch
    if os.path.basename(split["path"]) == "crash.jsonl":
        ctypes.string_at(0)
    return _read_split(split, **kw)


curate.readers.read_split = read_split
'''


def _run_with_a_crashing_reader(tmp_path: Path, out: Path, workers: int, executor: str = "local"):
    """``curate run`` over three JSONL files, ``crash.jsonl`` among them, in a process whose reader crashes
    (SIGSEGV) on that file, as do its workers."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(_CRASHING_READER)
    for name in ("a", "crash", "b"):
        if not (tmp_path / f"{name}.jsonl").exists():  # (a rerun reads the same files)
            _jsonl(tmp_path / f"{name}.jsonl", 20)
    toml = _pipeline(tmp_path, tmp_path / "*.jsonl", out, extra=f"workers = {workers}\nmax_retries = 1")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), str(root)])}
    return subprocess.run([sys.executable, "-m", "curate", "run", str(toml), "--quiet", "--executor", executor],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)


def test_a_split_that_crashes_its_reader_is_set_aside_and_the_run_goes_on(tmp_path):
    """A worker that dies of SIGSEGV every time it reads a split (a library failing on a damaged or crafted
    file) no longer stops the run: the split is one ``read_crashed`` row naming the file and the signal, said
    in a warning; the other files are read and the counts add up. (The crash is made by a ``sitecustomize``
    that every process of the run loads, the pool's workers included.)"""
    out = tmp_path / "out"
    r = _run_with_a_crashing_reader(tmp_path, out, workers=2)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "crash.jsonl" in r.stderr and "SIGSEGV" in r.stderr and "read_crashed" in r.stderr
    read = json.loads((out / "stats.json").read_text())["stages"][0]
    assert read == {"name": "read", "type": "read", "in": 41, "kept": 40, "dropped": {"read_crashed": 1}}, read
    import pyarrow as pa

    dropped = [pa.ipc.open_file(str(p)).read_all() for p in (out / "dropped").rglob("read-*.arrow")]
    rows = [r for t in dropped for r in t.to_pylist()]
    assert len(rows) == 1 and rows[0]["reason"] == "read_crashed" and "crash.jsonl" in rows[0]["id"]
    assert "SIGSEGV" in rows[0]["text"]


@pytest.mark.slow
def test_on_ray_a_split_that_crashes_its_reader_is_set_aside_and_the_run_goes_on(tmp_path):
    """The same on Ray, which says only that a task's worker died (``WorkerCrashedError``): the task's run alone
    in a child process tells the crash (SIGSEGV) from a kill, and the split is set aside as above."""
    pytest.importorskip("ray")
    out = tmp_path / "out"
    r = _run_with_a_crashing_reader(tmp_path, out, workers=2, executor="ray")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "crash.jsonl" in r.stderr and "SIGSEGV" in r.stderr and "read_crashed" in r.stderr
    read = json.loads((out / "stats.json").read_text())["stages"][0]
    assert read == {"name": "read", "type": "read", "in": 41, "kept": 40, "dropped": {"read_crashed": 1}}, read


def test_a_crash_in_process_ends_the_run_and_the_rerun_sets_the_split_aside(tmp_path):
    """``workers = 1`` reads in the driver's own process, so a crash there ends the run (with the crash's
    traceback); the rerun reads the split the run died in in a child process, and sets it aside as
    ``read_crashed`` when it crashes there too: the same output as a run of two workers."""
    out = tmp_path / "out"
    run = lambda: _run_with_a_crashing_reader(tmp_path, out, workers=1)
    first = run()
    assert first.returncode == -11 or first.returncode == 139, (first.returncode, first.stderr[-2000:])
    assert "Segmentation fault" in first.stderr  # faulthandler's traceback
    second = run()
    assert second.returncode == 0, second.stderr[-2000:]
    assert "the last run ended while reading" in second.stderr and "crash.jsonl" in second.stderr
    assert "SIGSEGV" in second.stderr and "read_crashed" in second.stderr
    read = json.loads((out / "stats.json").read_text())["stages"][0]
    assert read == {"name": "read", "type": "read", "in": 41, "kept": 40, "dropped": {"read_crashed": 1}}, read
    assert not list(out.rglob("_in_process.json"))
    third = run()  # finished: nothing runs again
    assert third.returncode == 0 and "crash.jsonl" not in third.stderr, third.stderr[-2000:]


def test_a_shard_whose_offsets_point_outside_its_data_is_named_not_read(tmp_path):
    """What a step reads from the step before (and decontaminate, dedup and the tokenizer read): a shard whose
    buffers do not hold together is an ArrowInvalid naming it, before any value is read (unchecked, pyarrow
    read outside its memory)."""
    import numpy as np
    import pyarrow as pa

    from curate.shards import read_shard

    good = pa.array(["one", "two"])
    offsets = pa.py_buffer(np.array([0, 900_000_000, 6], dtype=np.int32).tobytes())
    bad = pa.Array.from_buffers(pa.string(), 2, [None, offsets, good.buffers()[2]])
    path = tmp_path / "s.arrow"
    batch = pa.record_batch({"id": pa.array(["a", "b"]), "text": bad})
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_file(f, batch.schema) as w:
        w.write_batch(batch)
    with pytest.raises(pa.ArrowInvalid, match=f"shard {path} is damaged"):
        read_shard(path)
    assert read_shard(path, columns=["id"]).column("id").to_pylist() == ["a", "b"]  # the sound column reads
