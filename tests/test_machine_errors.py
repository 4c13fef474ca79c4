"""Errors of the machine (disk full, read-only file system, permission denied) end a command with one line
saying what and where, exit status 1, not a traceback; a rerun after the cause is fixed finishes the work."""
import errno
import types
from pathlib import Path

import pytest

from curate.commands.dispatch import run_interruptible
from curate.os_errors import errno_of, machine_error


def _command(exc):
    def run(args):
        raise exc

    return types.SimpleNamespace(run=run)


@pytest.mark.parametrize("exc, said", [
    (OSError(errno.ENOSPC, "No space left on device", "/data/out.bin"), "No space left on device: /data/out.bin"),
    (OSError("Error writing bytes to file. Detail: [errno 28] No space left on device"), "No space left on device"),
    (RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)"), "No space left"),
    (OSError("8644 requested and 4064 written"), "No space left on device"),  # numpy's tofile
    (PermissionError(errno.EACCES, "Permission denied", "/ro/x"), "Permission denied: /ro/x"),
    (OSError(errno.EROFS, "Read-only file system", "/mnt/x"), "Read-only file system: /mnt/x"),
    (NotADirectoryError(errno.ENOTDIR, "Not a directory", "/etc/passwd/sub"), "Not a directory: /etc/passwd/sub"),
    (FileExistsError(errno.EEXIST, "File exists", "/dev/null"), "File exists: /dev/null"),
])
def test_a_machine_error_is_one_line(exc, said, capsys):
    assert run_interruptible("pretrain tokenize", _command(exc), None) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"pretrain tokenize: error: {said}")
    assert "rerun the same command" in err


@pytest.mark.parametrize("exc", [ValueError("a bug"), FileNotFoundError(errno.ENOENT, "No such file", "x"),
                                 RuntimeError("unexpected pos 704 vs 598"),
                                 NotADirectoryError(errno.ENOTDIR, "Not a directory")])  # a path error naming no path
def test_other_errors_are_not_taken_for_the_machines(exc):
    assert machine_error(exc) is None
    with pytest.raises(type(exc)):
        run_interruptible("pretrain train", _command(exc), None)


def test_errno_read_from_where_libraries_put_it():
    assert errno_of(OSError(errno.ENOSPC, "x")) == errno.ENOSPC
    assert errno_of(OSError("Detail: [Errno 13] Permission denied")) == errno.EACCES
    assert errno_of(Exception("I/O error: No space left on device (os error 28)")) == errno.ENOSPC
    assert errno_of(Exception("nothing here")) is None


def test_a_checkpoint_write_that_fails_on_a_full_disk_says_so(tmp_path, monkeypatch):
    """torch's zip writer says only "unexpected pos" when the disk fills: with the disk (nearly) full, the
    failure is an ENOSPC OSError naming the folder and what ``latest`` names; otherwise a CheckpointError."""
    import shutil

    from pretrain.checkpoint.find import CheckpointError
    from pretrain.checkpoint.save_load import write_failure

    d = tmp_path / "ckpt" / "step_00000010" / "dcp"
    d.mkdir(parents=True)
    (tmp_path / "ckpt" / "latest").write_text("step_00000005\n")
    zip_error = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598")
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=1000))
    full = write_failure(zip_error, d)
    assert isinstance(full, OSError) and full.errno == errno.ENOSPC and full.filename == str(d)
    assert "latest still names the previous checkpoint" in machine_error(full)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=10 << 30))
    other = write_failure(zip_error, d)
    assert isinstance(other, CheckpointError) and "unexpected pos" in str(other) and str(d) in str(other)
    assert isinstance(write_failure(OSError(errno.EROFS, "Read-only file system"), d), OSError)
    assert "no checkpoint was complete" in str(write_failure(OSError(errno.ENOSPC, "x"), Path(tmp_path / "n" / "dcp")))


def test_a_background_thread_ending_on_a_full_disk_says_it_in_one_line(capsys):
    """TensorBoard's writer thread dies on a full disk: one line, not the thread's traceback; other errors in a
    thread keep Python's traceback."""
    import threading

    from curate.commands.dispatch import _thread_error_hook

    def raising(exc):
        def run():
            raise exc

        return run

    before = threading.excepthook
    threading.excepthook = _thread_error_hook("pretrain train")
    try:
        for exc in (OSError(errno.ENOSPC, "No space left on device"), ValueError("a bug")):
            t = threading.Thread(target=raising(exc))
            t.start()
            t.join()
    finally:
        threading.excepthook = before
    err = capsys.readouterr().err
    assert "pretrain train: error in a background thread: No space left on device\n" in err
    assert "Traceback" in err and "ValueError: a bug" in err and err.count("Traceback") == 1


def test_output_paths_that_cannot_be_written_are_one_line_and_leave_no_temp_file(tmp_path, capsys):
    """Output paths below a file, or a file path that is a folder, in the commands that write one: one line
    (tracebacks before: NotADirectoryError, FileExistsError), refused at start where the command checks its
    output, and no temp file left beside the folder (the atomic write's rename used to fail after it)."""
    from curate.cli import main as curate_main
    from curate.shards import write_json
    from pretrain.cli import main as pretrain_main

    folder = tmp_path / "results"
    folder.mkdir()
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(IsADirectoryError, match="is a folder"):
        write_json({"a": 1}, folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "results"]

    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(f'{{"text": "document number {i} of some words"}}\n' for i in range(20)))
    for out, said in ((folder, "is a folder"), (tmp_path / "a_file" / "q.bin", "which is a file, not a folder")):
        assert curate_main(["train-quality", "--positive", str(docs), "--negative", str(docs),
                            "--output", str(out)]) == 2
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err and err.count("\n") == 1, err
    tasks = tmp_path / "t.jsonl"
    tasks.write_text('{"context": "a", "choices": ["b", "c"], "label": 0}\n')
    assert pretrain_main(["eval", "--checkpoint", str(tmp_path / "none"), "--task", f"choice:{tasks}",
                          "--output", str(folder)]) == 2
    assert "--output " + str(folder) + " is a folder" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "docs.jsonl", "results", "t.jsonl"]
