"""The command lines against a reader that goes away (`curate run P.toml | head -1`), closed standard streams,
`--quiet`, and integer options out of range: the real commands, in subprocesses, on tiny inputs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEXT = "the cat sat on the mat and the dog ate the food " * 3
NOISE = ("Traceback", "BrokenPipe", "Broken pipe", "Exception ignored", "error:")


def write_inputs(folder: Path, files: int = 1, docs: int = 300) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(files):
        with open(folder / f"a{k}.jsonl", "w", encoding="utf-8") as f:
            for i in range(docs):  # clusters of three near-duplicates, and one of all 300 at the default threshold
                f.write(json.dumps({"id": f"d{k}_{i}", "text": TEXT + f"x{i // 3}"}) + "\n")
    return str(folder / "*.jsonl")


def write_pipeline(tmp: Path, stage: str, workers: int = 1, files: int = 1) -> tuple[Path, Path]:
    out = tmp / f"out_{stage}_{workers}"
    p = tmp / f"p_{stage}_{workers}.toml"
    p.write_text(f'[pipeline]\nname = "pipes"\noutput = "{out}"\nworkers = {workers}\n'
                 f'[[sources]]\npath = "{write_inputs(tmp / f"in{files}", files)}"\n'
                 f'[[stages]]\ntype = "{stage}"\n', encoding="utf-8")
    return p, out


def env(quiet_env: bool = False) -> dict:
    """The environment without the test session's TQDM_DISABLE (conftest): a run prints as for a user."""
    e = {k: v for k, v in os.environ.items() if k != "TQDM_DISABLE"}
    if quiet_env:
        e["TQDM_DISABLE"] = "1"
    return e


def run_closed(prog: str, *args, stdout_closed=True, stderr_closed=False, timeout=60) -> subprocess.CompletedProcess:
    """`python -m prog args` with stdout (and/or stderr) a pipe whose reader is already gone: every write to it
    fails with EPIPE, from the first line on (the harshest `| head -1`). What is not closed is captured."""
    fds, closed = {}, []
    for name, close in (("stdout", stdout_closed), ("stderr", stderr_closed)):
        if close:
            r, w = os.pipe()
            os.close(r)
            fds[name] = w
            closed.append(w)
        else:
            fds[name] = subprocess.PIPE
    try:
        proc = subprocess.Popen([sys.executable, "-m", prog, *map(str, args)], cwd=ROOT, env=env(), text=True,
                                stdin=subprocess.DEVNULL, **fds)
    finally:
        for w in closed:
            os.close(w)
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out or "", err or "")


def assert_clean(err: str) -> None:
    assert not any(word in err for word in NOISE), err


@pytest.fixture(scope="module")
def minhash_out(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("pipes")
    p, out = write_pipeline(tmp, "minhash_dedup")
    r = subprocess.run([sys.executable, "-m", "curate", "run", str(p), "--quiet"], cwd=ROOT, env=env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return out


# --------------------------------------------------------------------- a reader gone: the work goes on, exit 0

@pytest.mark.parametrize("stage, workers, files", [
    ("normalize", 1, 1),  # died printing the funnel table after the run, exit 1
    ("minhash_dedup", 2, 4),  # with a process pool's workers inheriting the pipe
])
def test_run_with_stdout_closed_finishes_and_exits_0(tmp_path, stage, workers, files):
    p, out = write_pipeline(tmp_path, stage, workers, files)
    r = run_closed("curate", "run", p)
    assert r.returncode == 0, r.stderr
    assert_clean(r.stderr)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["stages"][0]["in"] == 300 * files
    assert (out / "manifest.json").is_file()


def test_run_with_stdout_and_stderr_closed_finishes(tmp_path):
    p, out = write_pipeline(tmp_path, "minhash_dedup", workers=2, files=4)
    r = run_closed("curate", "run", p, stderr_closed=True)
    assert r.returncode == 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["stages"][-1]["kept"] >= 1 and stats["stages"][0]["in"] == 1200


def test_run_with_standard_streams_closed_at_start(tmp_path):
    p, out = write_pipeline(tmp_path, "minhash_dedup")
    r = subprocess.run(["bash", "-c", f'exec "{sys.executable}" -m curate run "{p}" <&- >&- 2>&-'], cwd=ROOT,
                       env=env(), timeout=60)
    assert r.returncode == 0
    assert json.loads((out / "stats.json").read_text())["stages"][0]["in"] == 300


def test_run_piped_to_head_exits_0(tmp_path):
    p, out = write_pipeline(tmp_path, "normalize")
    script = f'"{sys.executable}" -m curate run "{p}" 2>"{tmp_path / "err"}" | head -1 >/dev/null; ' \
             'echo "${PIPESTATUS[0]}"'
    r = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "0", (tmp_path / "err").read_text()
    assert_clean((tmp_path / "err").read_text())
    assert (out / "stats.json").is_file()


@pytest.mark.parametrize("args", [
    ["stats", "{out}"],
    ["stats", "{out}", "--json"],
    ["clusters", "{out}", "--show", "50"],
    ["stages"],
    ["--help"],
])
def test_printing_commands_with_stdout_closed_exit_0(minhash_out, args):
    r = run_closed("curate", *[a.format(out=minhash_out) for a in args])
    assert r.returncode == 0, r.stderr
    assert_clean(r.stderr)


def test_clusters_piped_to_head_exits_0(minhash_out, tmp_path):
    script = f'"{sys.executable}" -m curate clusters "{minhash_out}" --show 50 --members 400 2>"{tmp_path / "err"}" ' \
             '| head -1 >/dev/null; echo "${PIPESTATUS[0]}"'
    r = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "0", (tmp_path / "err").read_text()
    assert_clean((tmp_path / "err").read_text())


def test_pretrain_commands_with_stdout_closed(tmp_path):
    r = run_closed("pretrain", "config")
    assert r.returncode == 0, r.stderr
    assert_clean(r.stderr)
    ckpt = tmp_path / "ckpt"
    r = run_closed("pretrain", "train", "--config", "pretrain/configs/tiny.toml", "--set", "data.kind=synthetic",
                   "--set", "model.vocab_size=256", "--set", "train.steps=4", "--set", "log.interval=1",
                   "--set", f"checkpoint.dir={ckpt}", "--set", f"log.dir={tmp_path / 'log'}",
                   "--set", "checkpoint.interval=4", timeout=120)
    assert r.returncode == 0, r.stderr
    assert_clean(r.stderr)
    assert (ckpt / "step_00000004").is_dir()


def test_stdout_on_a_full_disk_is_said_once_and_the_run_succeeds(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    p, out = write_pipeline(tmp_path, "normalize")
    r = subprocess.run(["bash", "-c", f'"{sys.executable}" -m curate run "{p}" >/dev/full'], cwd=ROOT, env=env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.count("output to stdout could not be written (No space left on device)") == 1
    assert (out / "stats.json").is_file()


def test_guarded_stream_drops_writes_after_the_reader_left():
    from curate.commands.streams import GuardedStream

    r, w = os.pipe()
    os.close(r)
    raw = open(w, "w")
    guard = GuardedStream(raw, "stdout")
    guard.write("x" * 100_000)  # more than the buffer: written (and failed) now
    guard.write("more")
    guard.flush()
    assert guard.failure is not None and guard.lost() is None  # a reader gone: nothing to say
    raw.write("after")
    raw.flush()  # the descriptor is /dev/null now: no error
    raw.close()


# --------------------------------------------------------------------- --quiet

def test_quiet_run_prints_nothing_not_even_the_s_curve(tmp_path):
    p, out = write_pipeline(tmp_path, "minhash_dedup")
    r = subprocess.run([sys.executable, "-m", "curate", "run", str(p), "--quiet"], cwd=ROOT, env=env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and "S-curve" not in r.stderr, (r.stdout, r.stderr)
    assert json.loads((out / "plans" / "01_minhash_dedup" / "minhash_stats.json").read_text())["bands"] > 0
    # without --quiet the table is printed (on stderr, with the progress)
    p2, _ = write_pipeline(tmp_path / "loud", "minhash_dedup")
    r = subprocess.run([sys.executable, "-m", "curate", "run", str(p2)], cwd=ROOT, env=env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "S-curve" in r.stderr and "input documents" in r.stdout


# --------------------------------------------------------------------- integer options

HUGE = "99999999999999999999"


@pytest.mark.parametrize("flags, message", [
    (["--show", HUGE], "argument --show: must be a whole number from 1 to"),  # was an OverflowError traceback
    (["--show", "-1"], "argument --show: must be a whole number from 1 to"),  # printed nothing, said nothing
    (["--show", "0"], "argument --show"),
    (["--cluster", HUGE], "argument --cluster: must be a whole number from 0 to"),  # an OverflowError traceback
    (["--cluster", "-2"], "argument --cluster"),
    (["--members", HUGE], "argument --members"),  # an OverflowError traceback
    (["--members", "-1"], "argument --members: must be a whole number from 0 to"),  # said "301 more" of 300
    (["--width", "-5"], "argument --width: must be a whole number from 1 to"),  # printed the full text
    (["--show", "many"], "argument --show: not a whole number: 'many'"),
])
def test_clusters_options_out_of_range_stop_in_one_line(minhash_out, capsys, flags, message):
    from curate.cli import main

    with pytest.raises(SystemExit) as e:
        main(["clusters", str(minhash_out), *flags])
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()[-1]) < 200


def test_clusters_that_do_not_exist_are_named(minhash_out, capsys):
    from curate.cli import main

    assert main(["clusters", str(minhash_out), "--cluster", "999999999"]) == 1
    captured = capsys.readouterr()
    assert "no cluster 999999999" in captured.err and "no cluster 999999999 in this plan" in captured.out


def test_clusters_members_counts_add_up(minhash_out, capsys):
    from curate.cli import main

    assert main(["clusters", str(minhash_out), "--show", "1", "--members", "0"]) == 0
    out = capsys.readouterr().out
    size = int(out.split("size ")[1].split()[0])
    assert f"... {size} more" in out
    assert main(["clusters", str(minhash_out), "--show", "1", "--members", "2", "--width", "3"]) == 0
    out = capsys.readouterr().out
    assert f"... {size - 2} more" in out and "'the'" in out


@pytest.mark.parametrize("prog, argv, message", [
    ("curate", ["run", "p.toml", "--workers", "0"], "argument --workers"),
    ("curate", ["run", "p.toml", "--workers", HUGE], "argument --workers"),
    ("curate", ["train-quality", "--positive", "a", "--negative", "b", "--output", "m.bin", "--seed", HUGE],
     "argument --seed"),  # was fastText's "Invoked with: <fasttext_pybind.args ...>" after reading the inputs
    ("curate", ["train-quality", "--positive", "a", "--negative", "b", "--output", "m.bin", "--word-ngrams", "0"],
     "argument --word-ngrams"),  # trained as 1
    ("curate", ["train-quality", "--positive", "a", "--negative", "b", "--output", "m.bin", "--min-count", "-5"],
     "argument --min-count"),
    ("pretrain", ["generate", "--checkpoint", "c", "--prompt", "a", "--max-tokens", "-1"], "argument --max-tokens"),
    ("pretrain", ["generate", "--checkpoint", "c", "--prompt", "a", "--top-k", HUGE], "argument --top-k"),
    ("pretrain", ["generate", "--checkpoint", "c", "--prompt", "a", "--seed", HUGE + "000"], "argument --seed"),
    ("pretrain", ["report", "--out", "o", "--curated", "c", "--logs", "l", "--max-tokens", "-3"],
     "argument --max-tokens"),
    ("pretrain", ["blend", "build", "s.toml", "--out", "o", "--seq-len", "0", "--samples", "1"], "argument --seq-len"),
    ("pretrain", ["tokenizer", "train", "--input", "i", "--output", "o", "--vocab-size", "100", "--workers", "-1"],
     "argument --workers"),
    ("pretrain", ["ablate", "s.toml", "--ray-cpus", "0"], "argument --ray-cpus"),
])
def test_integer_options_out_of_range_stop_at_parsing(capsys, prog, argv, message):
    import importlib

    main = importlib.import_module(f"{prog}.cli").main
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and "must be a whole number" in err and "Traceback" not in err, err


def test_vocab_size_below_one_is_named_at_start(tmp_path, capsys):
    from pretrain.cli import main

    assert main(["tokenizer", "train", "--input", str(tmp_path), "--output", str(tmp_path / "t.model"),
                 "--vocab-size", "0"]) == 2
    err = capsys.readouterr().err
    assert "--vocab-size 0: must be at least 1" in err and "Traceback" not in err
