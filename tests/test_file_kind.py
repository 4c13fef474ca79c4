"""``curate.file_kind``: the one vocabulary for kinds of files (``describe_kind``), the one check of a path before it
is opened (``file_problem``, a folder accepted where a caller reads folders too), and the one "same file" identity
(``file_id``) that the readers, the manifest check, the blend and `curate train-quality` compare."""
import os
import stat

from curate.file_kind import describe_kind, file_id, file_problem


def test_every_kind_has_one_name():
    assert describe_kind(stat.S_IFREG) == "a regular file"
    assert describe_kind(stat.S_IFDIR) == "a folder"
    assert describe_kind(stat.S_IFCHR) == "a character device"
    assert describe_kind(stat.S_IFBLK) == "a block device"
    assert describe_kind(stat.S_IFIFO) == "a named pipe"
    assert describe_kind(stat.S_IFSOCK) == "a socket"
    assert describe_kind(0) == "an unknown kind of file"


def test_file_problem_with_and_without_folders(tmp_path):
    (tmp_path / "f").write_text("x")
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert file_problem(tmp_path / "f") is None and file_problem(tmp_path / "f", folder_ok=True) is None
    assert file_problem(tmp_path) == "is not a regular file (a folder)"
    assert file_problem(tmp_path, folder_ok=True) is None
    assert file_problem(tmp_path / "pipe", folder_ok=True) == "is not a regular file or folder (a named pipe)"
    assert file_problem(tmp_path / "dangling", folder_ok=True) == "not found (a link to nothing)"
    assert file_problem(tmp_path / "missing", folder_ok=True) == "not found"
    assert file_problem(tmp_path / "f" / "below") == "not found (a folder in its path is a file)"


def test_file_id_is_the_same_under_every_name(tmp_path):
    a = tmp_path / "a"
    a.write_text("x")
    os.link(a, tmp_path / "hard")
    (tmp_path / "soft").symlink_to(a)
    (tmp_path / "copy").write_text("x")
    ids = {name: file_id(os.stat(tmp_path / name)) for name in ("a", "hard", "soft", "copy")}
    assert ids["a"] == ids["hard"] == ids["soft"] == file_id(os.stat(f"{tmp_path}/./a")) != ids["copy"]
